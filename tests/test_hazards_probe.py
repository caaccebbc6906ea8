"""The environment probe over a fake root directory (and fake psutil callables): no real /proc or /sys."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from doctor.model.environment import Shm
from doctor.model.snapshot import Host, as_plain
from doctor.probes import environment as E
from doctor.probes.environment import containers, devices, libraries, resources, wsl
from doctor.probes.host import probe_host

FIXTURES = Path(__file__).parent / "fixtures" / "hazards"
GIB = 1024**3
SECTIONS = {"container", "shm", "cpu", "memory", "visible_devices", "libraries", "cuda_home", "wsl", "loader"}


def put(root: Path, path: str, text: str = "") -> Path:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- containers ---------------------------------------------------------------------------------


def test_docker_marker_and_device_nodes(tmp_path):
    put(tmp_path, "/.dockerenv")
    for node in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        put(tmp_path, f"/dev/{node}")
    facts = containers.probe_container(str(tmp_path), {"NVIDIA_VISIBLE_DEVICES": "all"})
    assert facts.kind == "docker"
    assert "/.dockerenv exists" in facts.evidence
    assert facts.device_nodes == ["/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"]
    assert facts.gpu_device_nodes == 2
    assert facts.nvidia_visible_devices == "all"


def test_cgroup_v2_docker_found_through_mountinfo(tmp_path):
    put(tmp_path, "/proc/self/mountinfo", fixture("docker-cgroup2.mountinfo"))
    put(tmp_path, "/proc/self/cgroup", fixture("docker-cgroup2.cgroup"))
    facts = containers.probe_container(str(tmp_path), {})
    assert facts.kind == "docker"
    assert facts.gpu_device_nodes == 0 and facts.cuda_image is False


def test_kubernetes_wins_over_its_runtime(tmp_path):
    put(tmp_path, "/.dockerenv")
    put(tmp_path, "/proc/self/cgroup", fixture("kubepods-v1.cgroup"))
    facts = containers.probe_container(str(tmp_path), {"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert facts.kind == "kubernetes"
    assert "KUBERNETES_SERVICE_HOST is set" in facts.evidence


def test_podman_marker(tmp_path):
    put(tmp_path, "/run/.containerenv", 'engine="podman-4.9.3"\n')
    assert containers.probe_container(str(tmp_path), {}).kind == "podman"


def test_bare_metal_and_cuda_image_hints(tmp_path):
    (tmp_path / "usr/local/cuda").mkdir(parents=True)
    facts = containers.probe_container(str(tmp_path), {"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"})
    assert facts.kind is None and facts.evidence == []
    assert facts.cuda_image is True
    assert facts.cuda_image_evidence == ["NVIDIA_REQUIRE_CUDA=cuda>=12.4", "/usr/local/cuda exists"]


def _linux():
    return SimpleNamespace(system=lambda: "Linux", machine=lambda: "x86_64", release=lambda: "6.8.0",
                           version=lambda: "#1", libc_ver=lambda: ("glibc", "2.39"))


@pytest.mark.parametrize(
    ("files", "env", "kind"),
    [
        # the two old detections disagreed here
        ({"/.dockerenv": "", "/run/.containerenv": ""}, {}, "podman"),
        # cgroup v2: mountinfo only
        ({"/proc/self/mountinfo": fixture("docker-cgroup2.mountinfo")}, {}, "docker"),
        (
            {"/.dockerenv": "", "/proc/1/cgroup": "11:devices:/kubepods/besteffort/pod1/abcd\n"},
            {},
            "kubernetes",
        ),
        ({}, {"container": "oci"}, "oci"),
        ({"/proc/1/cgroup": "0::/\n"}, {}, None),
    ],
)
def test_host_and_environment_share_one_container_decision(tmp_path, files, env, kind):
    for path, text in files.items():
        put(tmp_path, path, text)
    assert containers.probe_container(str(tmp_path), env).kind == kind
    assert probe_host(root=str(tmp_path), env=env, platform_module=_linux()).container == kind


@pytest.mark.parametrize(
    ("files", "env", "is_wsl"),
    [
        ({"/dev/dxg": ""}, {}, True),
        ({"/proc/version": "Linux version 5.15.167.4-microsoft-standard-WSL2\n"}, {}, True),
        ({}, {"WSL_DISTRO_NAME": "Ubuntu"}, True),  # the host probe used to ignore the variable
        ({"/proc/version": "Linux version 6.8.0-45-generic\n"}, {}, False),
    ],
)
def test_host_and_environment_share_one_wsl_decision(tmp_path, files, env, is_wsl):
    for path, text in files.items():
        put(tmp_path, path, text)
    assert wsl.probe_wsl(str(tmp_path), env).is_wsl is is_wsl
    assert probe_host(root=str(tmp_path), env=env, platform_module=_linux()).wsl is is_wsl


# --- CPU quota ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cpus"), [("200000 100000\n", 2.0), ("max 100000\n", None), ("50000 100000", 0.5), ("", None)]
)
def test_parse_cpu_max(text, cpus):
    assert resources.parse_cpu_max(text) == cpus


def test_parse_cfs():
    assert resources.parse_cfs("-1\n", "100000\n") is None
    assert resources.parse_cfs("150000\n", "100000\n") == 1.5
    assert resources.parse_cfs("garbage", "100000") is None


def test_cgroup_v2_quota_in_container(tmp_path):
    put(tmp_path, "/proc/self/mountinfo", fixture("docker-cgroup2.mountinfo"))
    put(tmp_path, "/proc/self/cgroup", fixture("docker-cgroup2.cgroup"))
    put(tmp_path, "/sys/fs/cgroup/cpu.max", "400000 100000\n")
    facts = resources.probe_cpu(str(tmp_path), cpu_count=64, affinity=64)
    assert facts.cgroup == "v2"
    assert facts.quota_cpus == 4.0 and facts.quota_raw == "400000 100000"
    assert facts.quota_source == "/sys/fs/cgroup/cpu.max"
    assert facts.budget == 4


def test_cgroup_v2_nested_quota_takes_the_smallest_on_the_way_up(tmp_path):
    put(tmp_path, "/proc/self/mountinfo", fixture("docker-cgroup2.mountinfo"))
    put(tmp_path, "/proc/self/cgroup", "0::/user.slice/job.scope\n")
    put(tmp_path, "/sys/fs/cgroup/cpu.max", "max 100000\n")
    put(tmp_path, "/sys/fs/cgroup/user.slice/cpu.max", "150000 100000\n")
    put(tmp_path, "/sys/fs/cgroup/user.slice/job.scope/cpu.max", "max 100000\n")
    facts = resources.probe_cpu(str(tmp_path), cpu_count=16, affinity=8)
    assert facts.quota_cpus == 1.5
    assert facts.quota_source == "/sys/fs/cgroup/user.slice/cpu.max"
    assert facts.budget == 2  # ceil(1.5)


def test_cgroup_v1_kubernetes_quota(tmp_path):
    put(tmp_path, "/proc/self/mountinfo", fixture("kubepods-v1.mountinfo"))
    put(tmp_path, "/proc/self/cgroup", fixture("kubepods-v1.cgroup"))
    put(tmp_path, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "200000\n")
    put(tmp_path, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    facts = resources.probe_cpu(str(tmp_path), cpu_count=96, affinity=96)
    assert (facts.cgroup, facts.quota_cpus, facts.budget) == ("v1", 2.0, 2)


def test_cgroup_v1_unlimited_recorded_machine(tmp_path):
    # The development machine's own layout: v1 cpu controller with quota -1, affinity 2.
    put(tmp_path, "/proc/self/mountinfo", fixture("sandbox-v1.mountinfo"))
    put(tmp_path, "/proc/self/cgroup", fixture("sandbox-v1.cgroup"))
    put(tmp_path, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n")
    put(tmp_path, "/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n")
    facts = resources.probe_cpu(str(tmp_path), cpu_count=2, affinity=2)
    assert facts.cgroup == "v1" and facts.quota_cpus is None and facts.budget == 2


def test_no_cgroup_files_is_a_why_not_an_error(tmp_path):
    facts = resources.probe_cpu(str(tmp_path), cpu_count=8, affinity=4)
    assert facts.cgroup is None and facts.why is not None
    assert facts.budget == 4  # the affinity mask still limits


# --- shm, memory --------------------------------------------------------------------------------


def test_shm_reads_statvfs(tmp_path):
    (tmp_path / "dev/shm").mkdir(parents=True)
    facts = resources.probe_shm(str(tmp_path), "linux")
    st = os.statvfs(tmp_path / "dev/shm")
    assert facts.total_bytes == st.f_blocks * st.f_frsize > 0


def test_shm_missing_and_windows(tmp_path):
    assert resources.probe_shm(str(tmp_path), "linux").why is not None
    assert as_plain(resources.probe_shm(str(tmp_path), "windows")) == {"why": "no /dev/shm on Windows"}


def test_memory_from_psutil_callables():
    facts = resources.probe_memory(
        lambda: SimpleNamespace(total=8 * GIB, available=3 * GIB), lambda: SimpleNamespace(total=0)
    )
    assert as_plain(facts) == {
        "source": "psutil",
        "total_bytes": 8 * GIB,
        "available_bytes": 3 * GIB,
        "swap_total_bytes": 0,
    }


def test_memory_failure_becomes_why():
    def boom():
        raise OSError("no /proc/meminfo")

    assert "no /proc/meminfo" in resources.probe_memory(boom, boom).why


def test_memory_from_proc_meminfo(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text(
        "MemTotal:       24576000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n"
        "SwapTotal:             0 kB\n"
    )
    facts = resources.probe_memory(root=str(tmp_path))
    assert as_plain(facts) == {"source": "/proc/meminfo", "total_bytes": 24576000 * 1024,
                     "available_bytes": 20000000 * 1024, "swap_total_bytes": 0}
    # unreadable or incomplete: psutil answers instead
    (tmp_path / "proc" / "meminfo").write_text("MemTotal: 1 kB\n")
    assert resources.probe_memory(root=str(tmp_path)).source == "psutil"


def test_memory_real_proc_meminfo_agrees_with_psutil():
    import psutil

    facts = resources.probe_memory(root="/")
    assert facts.source == "/proc/meminfo"
    assert facts.total_bytes == psutil.virtual_memory().total


def test_memory_real_psutil():
    facts = resources.probe_memory()
    assert facts.total_bytes > 0 and 0 <= facts.available_bytes <= facts.total_bytes


# --- visible devices ----------------------------------------------------------------------------


def test_visible_devices_records_only_set_variables():
    env = {"CUDA_VISIBLE_DEVICES": "", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "HOME": "/root"}
    assert as_plain(devices.probe_visible_devices(env)) == {
        "CUDA_VISIBLE_DEVICES": "",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    }


# --- libraries ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "windows", "parsed"),
    [
        ("libcudnn.so.8.9.2", False, ("cudnn", "8.9.2")),
        ("libcudnn_ops_infer.so.8", False, ("cudnn", "8")),
        ("libnvJitLink.so.12.4.127", False, ("nvjitlink", "12.4.127")),
        ("libcublas.so.12", False, ("cublas", "12")),
        ("libcublasLt.so.12.4.5.8", False, ("cublas", "12.4.5.8")),
        ("libcudart.so", False, ("cudart", None)),
        ("libnccl.so.2.21.5", False, ("nccl", "2.21.5")),
        ("libcusparse.so.12.3.1.170", False, ("cusparse", "12.3.1.170")),
        ("libcusparseLt.so.0", False, None),  # cuSPARSELt: its own product and versions
        ("libcudnn_static.a", False, None),
        ("libcuda.so.1", False, None),
        ("cudnn64_9.dll", True, ("cudnn", "9")),
        ("cublasLt64_12.dll", True, ("cublas", "12")),
        ("cudart64_110.dll", True, ("cudart", "11.0")),
        ("nvJitLink_120_0.dll", True, ("nvjitlink", "12.0")),
        ("python311.dll", True, None),
    ],
)
def test_parse_cuda_lib_name(name, windows, parsed):
    assert libraries.parse_cuda_lib_name(name, windows) == parsed


def test_scan_library_dir_follows_version_symlinks(tmp_path):
    lib = tmp_path / "cuda-12.1/lib64"
    lib.mkdir(parents=True)
    (lib / "libnvJitLink.so.12.1.105").write_bytes(b"\x7fELF")
    (lib / "libnvJitLink.so.12").symlink_to("libnvJitLink.so.12.1.105")
    (lib / "libcuda.so.1").write_bytes(b"")
    (lib / "README").write_text("")
    entry = libraries.scan_library_dir(str(lib))
    assert entry.exists is True
    assert entry.driver_libs == ["libcuda.so.1"]
    by_file = {item.file: item for item in entry.libs}
    assert by_file["libnvJitLink.so.12"].real_version == "12.1.105"
    assert by_file["libnvJitLink.so.12.1.105"].version == "12.1.105"


def test_probe_libraries_keeps_order_and_missing_dirs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    (a / "libcudnn.so.9.0.0").write_bytes(b"")
    value = f"{a}:{tmp_path / 'missing'}::{a}:{b}"
    facts = libraries.probe_libraries({"LD_LIBRARY_PATH": value}, "linux")
    assert facts.variable == "LD_LIBRARY_PATH" and facts.value == value
    assert [d.path for d in facts.dirs] == [str(a), str(tmp_path / "missing"), str(b)]
    assert [d.exists for d in facts.dirs] == [True, False, False]
    assert facts.dirs[0].libs[0].family == "cudnn"


def test_probe_libraries_unset():
    assert as_plain(libraries.probe_libraries({}, "linux")) == {
        "variable": "LD_LIBRARY_PATH",
        "value": None,
        "dirs": [],
    }


# --- CUDA_HOME ----------------------------------------------------------------------------------


def test_cuda_home_version_json(tmp_path):
    home = tmp_path / "opt/cuda-12.4"
    put(tmp_path, "/opt/cuda-12.4/version.json", fixture("cuda-12.4-version.json"))
    facts = libraries.probe_cuda_home(str(tmp_path), {"CUDA_HOME": "/opt/cuda-12.4"})
    assert home.is_dir()
    assert as_plain(facts) == {
        "variable": "CUDA_HOME",
        "path": "/opt/cuda-12.4",
        "version": "12.4.1",
        "version_source": "/opt/cuda-12.4/version.json",
        "installed": [],  # nothing in /usr/local/cuda-X.Y
    }


def test_installed_toolkits_are_listed_with_their_versions(tmp_path):
    put(tmp_path, "/usr/local/cuda-12.4/version.json", fixture("cuda-12.4-version.json"))
    put(tmp_path, "/usr/local/cuda-10.2/version.txt", fixture("cuda-10.2-version.txt"))
    (tmp_path / "usr/local/cuda-13.0/bin").mkdir(parents=True)  # pip-assembled: no version file
    (tmp_path / "usr/local/cuda-notes").mkdir()
    facts = libraries.probe_cuda_home(str(tmp_path), {"CUDA_HOME": "/usr/local/cuda-12.4"})
    assert [(t.path, t.version) for t in facts.installed] == [
        ("/usr/local/cuda-10.2", "10.2.89"),
        ("/usr/local/cuda-12.4", "12.4.1"),
        ("/usr/local/cuda-13.0", "13.0"),
    ]


def test_cuda_path_version_txt(tmp_path):
    put(tmp_path, "/usr/local/cuda-10.2/version.txt", fixture("cuda-10.2-version.txt"))
    facts = libraries.probe_cuda_home(str(tmp_path), {"CUDA_PATH": "/usr/local/cuda-10.2"})
    assert (facts.variable, facts.version) == ("CUDA_PATH", "10.2.89")


def test_default_toolkit_version_from_directory_name(tmp_path):
    (tmp_path / "usr/local/cuda-13.0/bin").mkdir(parents=True)
    (tmp_path / "usr/local/cuda").symlink_to(tmp_path / "usr/local/cuda-13.0")
    facts = libraries.probe_cuda_home(str(tmp_path), {})
    assert (facts.variable, facts.path, facts.version) == (None, "/usr/local/cuda", "13.0")


def test_no_toolkit(tmp_path):
    assert "not set" in libraries.probe_cuda_home(str(tmp_path), {}).why


def test_parsers_reject_garbage():
    assert libraries.parse_cuda_version_json("{not json") is None
    assert libraries.parse_cuda_version_json(json.dumps([1])) is None
    assert libraries.parse_cuda_version_txt("hello") is None


# --- WSL ----------------------------------------------------------------------------------------


def test_not_wsl(tmp_path):
    put(tmp_path, "/proc/version", "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075)\n")
    assert as_plain(wsl.probe_wsl(str(tmp_path), {})) == {"is_wsl": False, "evidence": []}


def test_wsl_ld_so_conf_order_and_linux_driver(tmp_path):
    # /proc/version as WSL2 kernels print it.
    put(tmp_path, "/proc/version", "Linux version 5.15.167.4-microsoft-standard-WSL2 (root@f9c826d3017f)\n")
    put(tmp_path, "/dev/dxg")
    put(tmp_path, "/usr/lib/wsl/lib/libcuda.so.1")
    put(tmp_path, "/etc/ld.so.conf.d/cuda-12-4.conf", "/usr/local/cuda-12.4/targets/x86_64-linux/lib\n")
    put(
        tmp_path,
        "/etc/ld.so.conf.d/ld.wsl.conf",
        "# This file was automatically generated by WSL.\n/usr/lib/wsl/lib\n",
    )
    put(
        tmp_path,
        "/etc/ld.so.conf.d/x86_64-linux-gnu.conf",
        "# Multiarch support\n/usr/lib/x86_64-linux-gnu\n",
    )
    put(tmp_path, "/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcuda.so.1")
    put(tmp_path, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.14")
    put(tmp_path, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")  # no driver version in the name: not counted
    facts = wsl.probe_wsl(str(tmp_path), {"WSL_DISTRO_NAME": "Ubuntu"})
    assert facts.is_wsl is True
    assert "/dev/dxg exists" in facts.evidence and "WSL_DISTRO_NAME is set" in facts.evidence
    assert [c.file for c in facts.ld_so_conf] == [
        "/etc/ld.so.conf.d/cuda-12-4.conf",
        "/etc/ld.so.conf.d/ld.wsl.conf",
        "/etc/ld.so.conf.d/x86_64-linux-gnu.conf",
    ]
    assert facts.ld_so_conf[0].driver_libs == {
        "/usr/local/cuda-12.4/targets/x86_64-linux/lib": ["libcuda.so.1"]
    }
    assert facts.ld_so_conf[1].driver_libs == {}  # the WSL folder itself is never an offender
    assert facts.linux_driver == ["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.14"]


def test_parse_ld_so_conf():
    text = "include /etc/ld.so.conf.d/*.conf\n# comment\n/usr/lib/wsl/lib  # trailing\n\nrelative/dir\n"
    assert wsl.parse_ld_so_conf(text) == ["/usr/lib/wsl/lib"]


# --- the combiner -------------------------------------------------------------------------------


def test_probe_environment_over_fake_root_has_every_section(tmp_path):
    put(tmp_path, "/.dockerenv")
    (tmp_path / "dev/shm").mkdir(parents=True)
    facts = as_plain(E.probe_environment(str(tmp_path), {"CUDA_VISIBLE_DEVICES": "1"}, Host(os="linux")))
    assert set(facts) == SECTIONS
    assert json.loads(json.dumps(facts)) == facts  # JSON-able as it is
    assert facts["container"]["kind"] == "docker"
    assert facts["visible_devices"] == {"CUDA_VISIBLE_DEVICES": "1"}
    assert facts["wsl"] == {"is_wsl": False, "evidence": []}


def test_probe_environment_never_raises(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(E, "probe_shm", broken)
    facts = E.probe_environment(str(tmp_path), {}, Host(os="linux"))
    assert facts.shm == Shm(why="probe failed: RuntimeError: boom")
    assert as_plain(facts)["shm"] == {"why": "probe failed: RuntimeError: boom"}
    assert set(as_plain(facts)) == SECTIONS


def test_probe_environment_windows_skips_linux_only_parts(tmp_path):
    facts = E.probe_environment(str(tmp_path), {"PATH": str(tmp_path)}, Host(os="windows"))
    assert facts.libraries.variable == "PATH"
    assert as_plain(facts.shm) == {"why": "no /dev/shm on Windows"}
    assert facts.wsl.is_wsl is False
    assert facts.loader is None  # the dynamic loader's folders are Linux's
