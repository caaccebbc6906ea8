"""When the GPU cannot work at all, say so: end to end through the real CLI on fake machines.

Each machine is a fake root (``TORCHDOCTOR_SYSROOT``: the PCI bus, /sys/module, /dev, /proc, /etc,
/usr/lib/wsl/lib, a cuda-compat folder) around a real venv holding a metadata-only CUDA torch
(tests/fakeenv.py), with a fake ``nvidia-smi`` (tests/fixtures/nvidia/fake_smi.py) where the machine
has one. ``TORCHDOCTOR_NVML=0`` keeps a real GPU of the test machine out of it. Every test asserts the
finding id, its severity, the exit code and the remedy command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_machine import HOST_VARIABLES as _HOST_VARIABLES
from corpus_machine import WSL1_VERSION, WSL2_VERSION, libcuda, link, pci_gpu, write
from fake_smi import write_fake_nvidia_smi
from fakeenv import make_fake_env

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
H100 = {"name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "mem_mib": 81559}
RTX4090 = {"name": "NVIDIA GeForce RTX 4090", "cc": "8.9", "mem_mib": 24564}


@pytest.fixture
def machine(tmp_path):
    """(root, bin_dir, python): an empty fake root, a folder for nvidia-smi, a venv with torch 2.6.0+cu126."""
    root = tmp_path / "root"
    write(root, "/proc/meminfo", "MemTotal:       24684092 kB\nMemAvailable:   24188892 kB\nSwapTotal: 0 "
        "kB\n")
    (root / "dev").mkdir()
    python = make_fake_env(tmp_path / "venv", torch="2.6.0+cu126", cuda="12.6")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return root, bin_dir, python


def check(root: Path, bin_dir: Path, python: Path, **variables: str) -> tuple[int, dict, str]:
    """Run ``check --json`` and then the human ``check`` on the fake machine: (exit code, report, text)."""
    env = {k: v for k, v in os.environ.items() if k not in _HOST_VARIABLES}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0",
               TORCHDOCTOR_SYSROOT=str(root), NO_COLOR="1", COLUMNS="120", LANG="C.UTF-8")
    env.update(variables)
    argv = [sys.executable, "-m", "doctor", "check", "--no-smoke", "--python", str(python)]
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    text = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert text.returncode == done.returncode, text.stdout + text.stderr
    assert "Traceback" not in done.stderr + text.stderr
    return done.returncode, json.loads(done.stdout), text.stdout


def finding(report: dict, fid: str) -> dict:
    found = [f for f in report["findings"] if f["id"] == fid]
    assert found, [(f["id"], f["severity"]) for f in report["findings"]]
    return found[0]


def ids(report: dict) -> dict[str, str]:
    return {f["id"]: f["severity"] for f in report["findings"]}


# --- 1. a container on a GPU host started without the GPUs ----------------------------------------


def gpu_host(root: Path) -> None:
    """What a container on a GPU host sees without the NVIDIA runtime: the host's PCI bus and nvidia
    module."""
    pci_gpu(root)
    write(root, "/sys/module/nvidia/version", "550.54.15\n")


RUNTIMES = {
    # name: (how the fake root and the variables show the runtime, a remedy command or text it must name)
    "docker": ({"/.dockerenv": ""}, {}, "docker run --gpus all <image> ..."),
    "kubernetes": ({"/.dockerenv": ""}, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"},
                   "kubectl set resources deployment/<name> --limits=nvidia.com/gpu=1"),
    "podman": ({"/run/.containerenv": ""}, {}, "podman run --device nvidia.com/gpu=all <image> ..."),
    "enroot": ({}, {"SLURM_JOB_ID": "4242", "ENROOT_ROOTFS": "/tmp/enroot/data/pyxis_4242"},
               "srun --gres=gpu:1 --container-image=<image> ..."),
    "apptainer": ({}, {"APPTAINER_CONTAINER": "/home/u/pytorch.sif"}, "apptainer exec --nv <image.sif> ..."),
}


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_container_started_without_the_gpus_is_an_error(machine, runtime):
    root, bin_dir, python = machine
    gpu_host(root)
    files, variables, remedy = RUNTIMES[runtime]
    for path, text in files.items():
        write(root, path, text)
    # Apptainer shares the host's /dev: the nodes are there, the driver libraries are not
    if runtime == "apptainer":
        write(root, "/dev/nvidia0")
        write(root, "/dev/nvidiactl")
    code, report, text = check(root, bin_dir, python, **variables)
    found = finding(report, "container-no-gpu-access")
    assert found["severity"] == "error" and code == 1
    assert found["evidence"]["container"] == runtime
    assert found["evidence"]["pci_devices"] == ["0000:01:00.0"]
    fix = " ".join(found["fix"]["commands"]) + " " + found["fix"]["summary"]
    assert remedy in fix, fix
    # the driver-state rule leaves it to the container rule (no "run nvidia-smi" warning beside it)
    assert "nvidia-state-unknown" not in ids(report)
    assert remedy in text


def test_docker_fix_names_the_compose_block(machine):
    root, bin_dir, python = machine
    gpu_host(root)
    write(root, "/.dockerenv")
    _, report, _ = check(root, bin_dir, python)
    summary = finding(report, "container-no-gpu-access")["fix"]["summary"]
    assert "deploy.resources.reservations.devices" in summary


def test_container_on_a_host_without_gpus_stays_a_note(machine):
    # nothing shows a GPU (no NVIDIA device on the PCI bus, no module): healthy, at most a note, as before
    root, bin_dir, python = machine
    write(root, "/.dockerenv")
    write(root, "/sys/bus/pci/devices/0000:00:02.0/vendor", "0x8086\n")
    write(root, "/sys/bus/pci/devices/0000:00:02.0/class", "0x030000\n")
    code, report, _ = check(root, bin_dir, python)
    assert code == 0
    assert ids(report).get("container-no-gpu-access") in (None, "info")


# --- 2. NVIDIA_DRIVER_CAPABILITIES without compute ------------------------------------------------


def test_utility_only_capabilities_is_an_error(machine):
    root, bin_dir, python = machine
    pci_gpu(root)
    write(root, "/.dockerenv")
    write(root, "/dev/nvidia0")
    write(root, "/dev/nvidiactl")
    # nvidia-smi works; libcuda is absent
    write_fake_nvidia_smi(bin_dir, [H100], driver="570.124.06", cuda="12.8")
    code, report, text = check(root, bin_dir, python, NVIDIA_DRIVER_CAPABILITIES="utility")
    found = finding(report, "nvidia-driver-capabilities-no-compute")
    assert found["severity"] == "error" and code == 1
    assert any("NVIDIA_DRIVER_CAPABILITIES=compute,utility" in c for c in found["fix"]["commands"])
    assert found["evidence"]["libcuda"] == []
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in text


def test_compute_capability_given_is_quiet(machine):
    root, bin_dir, python = machine
    pci_gpu(root)
    write(root, "/.dockerenv")
    write(root, "/dev/nvidia0")
    libcuda(root, "/usr/lib/x86_64-linux-gnu", "570.124.06")
    write_fake_nvidia_smi(bin_dir, [H100], driver="570.124.06", cuda="12.8")
    code, report, _ = check(root, bin_dir, python, NVIDIA_DRIVER_CAPABILITIES="compute,utility")
    assert "nvidia-driver-capabilities-no-compute" not in ids(report)


# --- 3. WSL 1 ---------------------------------------------------------------------------------------

def test_wsl1_has_no_gpu(machine):
    root, bin_dir, python = machine
    write(root, "/proc/version", WSL1_VERSION)
    write(root, "/proc/sys/kernel/osrelease", "4.4.0-19041-Microsoft\n")
    code, report, text = check(root, bin_dir, python, WSL_DISTRO_NAME="Ubuntu-22.04")
    found = finding(report, "wsl1-no-gpu")
    assert found["severity"] == "error" and code == 1
    assert "wsl --set-version Ubuntu-22.04 2" in found["fix"]["commands"][0]
    assert found["evidence"]["kernel_release"] == "4.4.0-19041-Microsoft"
    assert report["snapshot"]["environment"]["wsl"]["version"] == 1
    assert "wsl --set-version Ubuntu-22.04 2" in text


def test_wsl1_read_from_a_collect_env_text():
    # collect_env's "Python platform: Linux-4.4.0-19041-Microsoft-x86_64" is the only WSL fact such a text
    # holds
    text = REPO / "tests" / "fixtures" / "corpus_platforms" / "wsl-wsl1-kernel-4.4.0-19041-driver-install.txt"
    env = {k: v for k, v in os.environ.items() if k not in _HOST_VARIABLES}
    env.update(PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0")
    done = subprocess.run([sys.executable, "-m", "doctor", "check", "--from", str(text), "--json"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    report = json.loads(done.stdout)
    found = finding(report, "wsl1-no-gpu")
    assert found["severity"] == "error" and done.returncode == 1
    assert found["fix"]["commands"][0] == "wsl --set-version <distro> 2  # in Windows"


def test_wsl2_is_not_wsl1(machine):
    root, bin_dir, python = machine
    write(root, "/proc/version", WSL2_VERSION)
    write(root, "/dev/dxg")
    _, report, _ = check(root, bin_dir, python, WSL_DISTRO_NAME="Ubuntu")
    assert "wsl1-no-gpu" not in ids(report)
    assert report["snapshot"]["environment"]["wsl"]["version"] == 2


# --- 4. a Linux driver installed inside WSL 2 -------------------------------------------------------

DPKG_STATUS = """Package: nvidia-driver-550
Status: install ok installed
Version: 550.120-0ubuntu0.22.04.1

Package: libnvidia-compute-550
Status: install ok installed
Version: 550.120-0ubuntu0.22.04.1

Package: nvidia-utils-550
Status: install ok installed
Version: 550.120-0ubuntu0.22.04.1

Package: nvidia-cuda-toolkit
Status: install ok installed
Version: 11.5.1-1ubuntu1
"""


def wsl2_with_linux_driver(root: Path, bin_dir: Path) -> None:
    write(root, "/proc/version", WSL2_VERSION)
    write(root, "/dev/dxg")
    for name in ("libcuda.so.1", "libcuda.so.1.1", "libnvidia-ml.so.1", "nvidia-smi"):
        write(root, f"/usr/lib/wsl/lib/{name}")
    write(root, "/etc/ld.so.conf.d/ld.wsl.conf", "/usr/lib/wsl/lib\n")
    write(
        root,
        "/etc/ld.so.conf.d/x86_64-linux-gnu.conf",
        "/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n",
    )
    write(root, "/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")
    folder = "/usr/lib/x86_64-linux-gnu"
    write(root, f"{folder}/libnvidia-ml.so.550.120")
    link(root, f"{folder}/libnvidia-ml.so.1", "libnvidia-ml.so.550.120")
    libcuda(root, folder, "550.120")
    write(root, "/var/lib/dpkg/status", DPKG_STATUS)
    # the distribution's nvidia-smi (nvidia-utils-550), first on PATH, cannot reach the GPU
    write_fake_nvidia_smi(bin_dir, [RTX4090], driver="550.120", cuda="12.4", mode="no-driver")


def test_linux_driver_inside_wsl2_is_an_error_with_the_purge(machine):
    root, bin_dir, python = machine
    wsl2_with_linux_driver(root, bin_dir)
    code, report, text = check(root, bin_dir, python, WSL_DISTRO_NAME="Ubuntu")
    found = finding(report, "wsl-linux-driver-installed")
    assert found["severity"] == "error" and code == 1
    commands = found["fix"]["commands"]
    assert commands[0] == "sudo apt-get purge libnvidia-compute-550 nvidia-driver-550 nvidia-utils-550"
    assert "sudo ldconfig" in commands
    assert found["evidence"]["driver_packages"] == [
        "libnvidia-compute-550",
        "nvidia-driver-550",
        "nvidia-utils-550",
    ]
    assert "sudo apt-get purge libnvidia-compute-550" in text
    assert "Fix: nothing to change" not in text


def test_linux_driver_files_without_dpkg_status_ask_dpkg_for_the_owner(machine):
    root, bin_dir, python = machine
    wsl2_with_linux_driver(root, bin_dir)
    write(root, "/var/lib/dpkg/status", "")
    write(root, "/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.120\n")
    code, report, _ = check(root, bin_dir, python, WSL_DISTRO_NAME="Ubuntu")
    found = finding(report, "wsl-linux-driver-installed")
    assert found["severity"] == "error" and code == 1
    lib = "/usr/lib/x86_64-linux-gnu/libcuda.so.550.120"
    assert found["fix"]["commands"][:2] == [
        f"sudo apt-get purge $(dpkg -S {lib} | cut -d: -f1)",
        "dkms status  # then: sudo apt-get purge the nvidia-dkms-* package it names",
    ]


# --- 5. CUDA forward compatibility (cuda-compat) ------------------------------------------------------


def test_data_center_gpu_runs_a_newer_cuda_through_cuda_compat(tmp_path, machine):
    # An H100 on R535 (CUDA 12.2) with the CUDA 13 compat package loaded first: torch 2.14.1+cu130 runs.
    root, bin_dir, _ = machine
    python = make_fake_env(tmp_path / "venv13", torch="2.14.1", cuda="13.0")
    pci_gpu(root)
    write(root, "/dev/nvidia0")
    libcuda(root, "/usr/lib/x86_64-linux-gnu", "535.183.01")
    libcuda(root, "/usr/local/cuda-13.0/compat", "580.65.06")
    link(root, "/usr/local/cuda", "cuda-13.0")
    write_fake_nvidia_smi(bin_dir, [H100], driver="535.183.01", cuda="12.2")
    code, report, text = check(root, bin_dir, python, LD_LIBRARY_PATH="/usr/local/cuda/compat")
    assert "driver-too-old" not in ids(report), text
    assert code == 0, ids(report)
    note = finding(report, "cuda-forward-compat")
    assert note["severity"] == "info"
    assert note["evidence"]["compat_libcuda"] == "/usr/local/cuda/compat/libcuda.so.1"
    assert note["evidence"]["compat_max_cuda"] == "13.0"


def test_data_center_gpu_with_compat_from_ld_so_conf(tmp_path, machine):
    # The NVIDIA Container Toolkit's enable-cuda-compat hook names the compat folder in /etc/ld.so.conf.d.
    root, bin_dir, _ = machine
    python = make_fake_env(tmp_path / "venv13", torch="2.14.1", cuda="13.0")
    pci_gpu(root)
    write(root, "/dev/nvidia0")
    write(root, "/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")
    write(root, "/etc/ld.so.conf.d/00-compat-580.conf", "/usr/local/cuda-13.0/compat\n")
    libcuda(root, "/usr/local/cuda-13.0/compat", "580.65.06")
    libcuda(root, "/usr/lib/x86_64-linux-gnu", "535.183.01")
    write_fake_nvidia_smi(bin_dir, [H100], driver="535.183.01", cuda="12.2")
    code, report, _ = check(root, bin_dir, python)
    assert "driver-too-old" not in ids(report) and code == 0
    assert (
        finding(report, "cuda-forward-compat")["evidence"]["found_by"]
        == "/etc/ld.so.conf.d/00-compat-580.conf"
    )


def test_compat_installed_but_not_loaded_keeps_driver_too_old(tmp_path, machine):
    root, bin_dir, _ = machine
    python = make_fake_env(tmp_path / "venv13", torch="2.14.1", cuda="13.0")
    pci_gpu(root)
    write(root, "/dev/nvidia0")
    libcuda(root, "/usr/local/cuda-13.0/compat", "580.65.06")
    write_fake_nvidia_smi(bin_dir, [H100], driver="535.183.01", cuda="12.2")
    code, report, _ = check(root, bin_dir, python)
    assert ids(report).get("driver-too-old") == "error" and code == 1
    # the compat package is there for a data-center GPU: the fix names loading it as the way that keeps both
    found = finding(report, "driver-too-old")
    assert found["evidence"]["compat_available"] == "/usr/local/cuda-13.0/compat"
    assert (
        "export LD_LIBRARY_PATH=/usr/local/cuda-13.0/compat${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        in found["fix"]["summary"]
    )


def test_geforce_with_cuda_compat_fails_with_error_804(machine):
    # GeForce is not a forward-compatibility GPU: with compat's libcuda first, CUDA stops with error 804.
    root, bin_dir, python = machine
    pci_gpu(root)
    write(root, "/dev/nvidia0")
    libcuda(root, "/usr/lib/x86_64-linux-gnu", "535.183.01")
    libcuda(root, "/usr/local/cuda-12.8/compat", "570.124.06")
    other = root / "opt" / "lib"
    other.mkdir(parents=True)
    write_fake_nvidia_smi(bin_dir, [RTX4090], driver="535.183.01", cuda="12.2")
    code, report, text = check(root, bin_dir, python, LD_LIBRARY_PATH="/usr/local/cuda-12.8/compat:/opt/lib")
    found = finding(report, "cuda-compat-unsupported-gpu")
    assert found["severity"] == "error" and code == 1
    assert found["fix"]["commands"] == ["export LD_LIBRARY_PATH=/opt/lib"]
    assert "804" in found["detail"]
    assert "driver-older-than-build" in ids(report)  # what remains once compat is out of the way
    assert "export LD_LIBRARY_PATH=/opt/lib" in text


def test_geforce_with_compat_from_ld_so_conf(machine):
    root, bin_dir, python = machine
    pci_gpu(root)
    write(root, "/dev/nvidia0")
    write(root, "/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")
    write(root, "/etc/ld.so.conf.d/000_cuda-compat.conf", "/usr/local/cuda-12.8/compat\n")
    libcuda(root, "/usr/local/cuda-12.8/compat", "570.124.06")
    write_fake_nvidia_smi(bin_dir, [RTX4090], driver="535.183.01", cuda="12.2")
    code, report, _ = check(root, bin_dir, python)
    found = finding(report, "cuda-compat-unsupported-gpu")
    assert found["severity"] == "error" and code == 1
    assert found["fix"]["commands"] == [
        "sudo mv /etc/ld.so.conf.d/000_cuda-compat.conf /etc/ld.so.conf.d/000_cuda-compat.conf.disabled && "
        "sudo ldconfig"
    ]


# --- the probes on their own ---------------------------------------------------------------------


def test_loader_order_ld_library_path_then_ld_so_conf_then_default(tmp_path):
    from doctor.probes.environment.loader import probe_loader

    root = tmp_path / "root"
    write(root, "/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n/opt/extra\n")
    write(root, "/etc/ld.so.conf.d/b.conf", "/opt/b\n")
    write(root, "/etc/ld.so.conf.d/a.conf", "# comment\n/opt/a\n")
    for folder, version in (("/opt/a", "550.54.15"), ("/opt/b", "560.35.03"), ("/opt/extra", "565.57.01"),
                            ("/usr/lib64", "570.124.06"), ("/opt/first/compat", "580.65.06")):
        libcuda(root, folder, version)
    loader = probe_loader(str(root), {"LD_LIBRARY_PATH": "/opt/first/compat::/nowhere"})
    order = [(c.path, c.found_by, c.version, c.compat) for c in loader.copies]
    assert order == [
        ("/opt/first/compat/libcuda.so.1", "LD_LIBRARY_PATH", "580.65.06", True),
        ("/opt/a/libcuda.so.1", "/etc/ld.so.conf.d/a.conf", "550.54.15", False),
        ("/opt/b/libcuda.so.1", "/etc/ld.so.conf.d/b.conf", "560.35.03", False),
        ("/opt/extra/libcuda.so.1", "/etc/ld.so.conf", "565.57.01", False),
        ("/usr/lib64/libcuda.so.1", "default", "570.124.06", False),
    ]


def test_wsl_version_from_the_kernel_release():
    from doctor.compat.wsl import wsl_version

    assert wsl_version("4.4.0-19041-Microsoft") == 1
    assert wsl_version("4.4.0-22621-Microsoft") == 1
    assert wsl_version("5.15.167.4-microsoft-standard-WSL2") == 2
    assert wsl_version("4.19.104-microsoft-standard") == 2
    assert wsl_version("6.8.0-45-generic") is None
    assert wsl_version("", dxg=True) == 2


def test_dpkg_status_keeps_installed_driver_packages_only():
    from doctor.probes.environment.wsl import parse_dpkg_status

    text = DPKG_STATUS + "\nPackage: nvidia-driver-535\nStatus: deinstall ok config-files\n"
    assert parse_dpkg_status(text) == ["libnvidia-compute-550", "nvidia-driver-550", "nvidia-utils-550"]


@pytest.mark.parametrize(("env", "files", "kind"), [
    ({"APPTAINER_CONTAINER": "/x.sif"}, (), "apptainer"),
    ({"SINGULARITY_CONTAINER": "/x.sif"}, (), "apptainer"),
    ({}, ("/.singularity.d",), "apptainer"),
    ({"SLURM_JOB_ID": "1", "ENROOT_ROOTFS": "/r"}, (), "enroot"),
    ({"PYXIS_VERSION": "0.20"}, ("/.dockerenv",), "enroot"),
    ({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, ("/.dockerenv",), "kubernetes"),
])  # fmt: skip
def test_container_kinds(tmp_path, env, files, kind):
    from doctor.probes.environment.containers import probe_container

    for path in files:
        (tmp_path / path.lstrip("/")).mkdir(parents=True)
    write(tmp_path, "/sys/module/nvidia/version", "550.54.15\n")
    container = probe_container(str(tmp_path), env)
    assert container.kind == kind and container.nvidia_module is True


NGC_LIBRARY_PATH = "/usr/local/cuda/compat/lib:/usr/local/nvidia/lib:/usr/local/nvidia/lib64"


def ngc_image(root: Path, enabled: bool) -> None:
    """An NGC image: cuda-compat in compat/lib.real; its entrypoint links it into compat/lib (first on the
    image's LD_LIBRARY_PATH) only when the GPU and the driver need and allow forward compatibility."""
    libcuda(root, "/usr/local/cuda-13.0/compat/lib.real", "580.65.06")
    link(root, "/usr/local/cuda", "cuda-13.0")
    (root / "usr/local/cuda-13.0/compat/lib").mkdir()
    if enabled:
        link(root, "/usr/local/cuda-13.0/compat/lib/libcuda.so.1", "../lib.real/libcuda.so.580.65.06")
    libcuda(root, "/usr/lib/x86_64-linux-gnu", "535.183.01")
    write(root, "/.dockerenv")
    pci_gpu(root)
    write(root, "/dev/nvidia0")


def test_ngc_image_in_compatibility_mode_on_a_data_center_gpu(tmp_path, machine):
    root, bin_dir, _ = machine
    python = make_fake_env(tmp_path / "venv13", torch="2.14.1", cuda="13.0")
    ngc_image(root, enabled=True)
    write_fake_nvidia_smi(bin_dir, [H100], driver="535.183.01", cuda="12.2")
    code, report, _ = check(root, bin_dir, python, LD_LIBRARY_PATH=NGC_LIBRARY_PATH)
    assert code == 0 and "driver-too-old" not in ids(report)
    note = finding(report, "cuda-forward-compat")
    assert note["evidence"]["compat_libcuda"] == "/usr/local/cuda/compat/lib/libcuda.so.1"
    loader = report["snapshot"]["environment"]["loader"]
    assert {"path": "/usr/local/cuda/compat/lib.real", "version": "580.65.06"} in loader["compat"]


def test_ngc_image_on_a_geforce_leaves_compat_off(machine):
    # The entrypoint did not link compat/lib on a GeForce: the driver's own libcuda is first, no error 804.
    root, bin_dir, python = machine
    ngc_image(root, enabled=False)
    write_fake_nvidia_smi(bin_dir, [RTX4090], driver="535.183.01", cuda="12.2")
    code, report, _ = check(root, bin_dir, python, LD_LIBRARY_PATH=NGC_LIBRARY_PATH)
    assert "cuda-compat-unsupported-gpu" not in ids(report)
    assert (
        report["snapshot"]["environment"]["loader"]["copies"][0]["path"]
        == "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
    )


@pytest.mark.parametrize(("names", "expected"), [
    (["NVIDIA H100 80GB HBM3"], "data-center"),
    (["NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090"], "geforce"),  # one GeForce is enough for error 804
    (["NVIDIA TITAN RTX"], "geforce"),
    (["NVIDIA RTX A6000"], None),  # only select NGC Server Ready SKUs may: not judged
    ([], None),
])  # fmt: skip
def test_forward_compat_gpu_class(names, expected):
    from doctor.compat.forward import gpu_class
    from doctor.model.snapshot import Gpu, Snapshot
    from doctor.table.load import load_table

    snap = Snapshot()
    snap.nvidia.gpus = [Gpu(index=i, name=name) for i, name in enumerate(names)]
    assert gpu_class(snap, load_table()) == expected
