"""End to end: the verdicts of issue 12 on the builds people really run, through the real CLI.

Each machine is built from real parts as in test_e2e_check.py: a real venv of a real interpreter holding
metadata-only packages (tests/fakeenv.py), a fake ``nvidia-smi`` on PATH, ``TORCHDOCTOR_SYSROOT`` for /sys,
/proc and /etc, conda-meta records where conda would write them, and, where the verdict rests on the binary,
a small library with a real ``.nv_fatbin`` section and DT_NEEDED entries built by tests/elfmaker.py.
Every test asserts the verdict (ids, severities, exit code), the source the verdict names, and that no plan
replaces a distribution's own torch with pip wheels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from elfmaker import cubin, fatbin_section, ptx, with_needed
from fakeenv import find_python, make_fake_env, site_packages

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "nvidia"))
from fake_smi import write_fake_nvidia_smi  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
H100 = {"name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "mem_mib": 81559}
RTX3090 = {"name": "NVIDIA GeForce RTX 3090", "cc": "8.6", "mem_mib": 24576}
RTX4090 = {"name": "NVIDIA GeForce RTX 4090", "cc": "8.9", "mem_mib": 24564}
RTX5080 = {"name": "NVIDIA GeForce RTX 5080", "cc": "12.0", "mem_mib": 16303}
RTX5090 = {"name": "NVIDIA GeForce RTX 5090", "cc": "12.0", "mem_mib": 32607}
GTX1080TI = {"name": "NVIDIA GeForce GTX 1080 Ti", "cc": "6.1", "mem_mib": 11264}
# JetPack 6: no memory, capability from the table
ORIN = {"name": "Orin (nvgpu)", "cc": None, "mem_mib": None}
K40M = {"name": "Tesla K40m", "cc": None, "mem_mib": 11441}  # R470's nvidia-smi has no compute_cap
K80 = {"name": "Tesla K80", "cc": None, "mem_mib": 11441}

pytestmark = pytest.mark.slow


def python(version: str) -> str:
    found = find_python(version)
    if found is None:
        pytest.skip(f"needs a real Python {version} interpreter (pyenv {version})")
    return found


def run_check(venv_python, bin_dir: Path | None, sysroot: Path, *args: str, env: dict | None = None):
    environ = {k: v for k, v in os.environ.items()
               if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_PYTORCH_VERSION",
                            "NVIDIA_REQUIRE_CUDA", "CUDA_VERSION", "NVIDIA_DRIVER_CAPABILITIES")}
    # Only the fake's folder and the system's: a real nvidia-smi on this machine must not leak in.
    environ["PATH"] = os.pathsep.join(p for p in [str(bin_dir) if bin_dir else "", "/usr/bin", "/bin"] if p)
    environ.update(PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0", TORCHDOCTOR_SYSROOT=str(sysroot), NO_COLOR="1",
                   COLUMNS="200")
    environ.update(env or {})
    res = subprocess.run([sys.executable, "-m", "doctor", "check", "--no-smoke", "--json", "--python",
                          str(venv_python), *args], capture_output=True, text=True, env=environ, timeout=120,
                         cwd=str(sysroot))
    assert "Traceback" not in res.stderr, res.stderr
    return res.returncode, json.loads(res.stdout)


def ids(report, severity: str | None = None) -> set[str]:
    return {f["id"] for f in report["findings"] if severity is None or f["severity"] == severity}


def finding(report, fid: str) -> dict:
    return next(f for f in report["findings"] if f["id"] == fid)


def plan_text(report) -> str:
    plan = report["plan"]
    return json.dumps(
        [plan.get("reason"), plan.get("notes"), [s.get("command") for s in plan.get("steps") or []]]
    )


def assert_no_pip_replacement(report):
    commands = [s.get("command") or "" for s in report["plan"].get("steps") or []]
    assert not any("pip install" in c for c in commands), commands
    for f in report["findings"]:
        assert not any("pip install" in c for c in (f.get("fix") or {}).get("commands") or []), f


@pytest.fixture
def sysroot(tmp_path) -> Path:
    root = tmp_path / "sysroot"
    root.mkdir()
    return root


def library(*targets: str, needed: tuple[str, ...] = (), containers: int = 3) -> bytes:
    """An ELF library whose fatbin holds ``targets`` ("sm_80", "compute_90") in each of ``containers``."""
    entries = [cubin(int(t[3:])) if t.startswith("sm_") else ptx(int(t[8:])) for t in targets]
    section = fatbin_section([entries] * containers)
    return with_needed([(".nv_fatbin", section)], list(needed))


def put(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def conda_meta(prefix: Path, name: str, version: str, build: str, channel: str) -> None:
    meta = prefix / "conda-meta"
    meta.mkdir(exist_ok=True)
    record = {"build": build, "channel": channel, "name": name, "version": version, "files": []}
    (meta / f"{name}-{version}-{build}.json").write_text(json.dumps(record, sort_keys=True))


# --- a CPU-only container with the plain `pip install torch` ------------------------------------------------


@pytest.fixture
def cpu_container(tmp_path, sysroot):
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch="2.14.1", cuda="13.0")
    (sysroot / ".dockerenv").write_text("")
    return venv


def test_cpu_only_container_with_the_plain_pip_torch_is_healthy(cpu_container, sysroot):
    code, report = run_check(cpu_container, None, sysroot)
    assert code == 0, report["findings"]
    assert not ids(report, "error") and not ids(report, "warning")
    note = finding(report, "container-no-gpu-access")
    assert note["severity"] == "info" and note["evidence"]["expects_gpu"] == ["torch 2.14.1+cu130 is a CUDA "
        "build"]
    assert report["plan"]["status"] == "healthy"


def test_the_same_container_is_an_error_when_a_gpu_is_required(cpu_container, sysroot):
    code, report = run_check(cpu_container, None, sysroot, "--require", "cuda")
    assert code == 4  # a CI requirement is not met
    assert finding(report, "container-no-gpu-access")["severity"] == "error"
    assert "requirement-cuda" in ids(report, "error")
    assert report["snapshot"]["gpu_wanted"] == ["require cuda (--require or [tool.torchdoctor])"]


def test_the_same_container_is_an_error_when_the_nvidia_runtime_was_asked_for_gpus(cpu_container, sysroot):
    code, report = run_check(cpu_container, None, sysroot, env={"NVIDIA_VISIBLE_DEVICES": "all"})
    assert code == 1
    assert finding(report, "container-no-gpu-access")["severity"] == "error"


def test_pyproject_requirement_makes_it_an_error_too(cpu_container, sysroot):
    (sysroot / "pyproject.toml").write_text('[tool.torchdoctor]\nrequire = ["gpu"]\n')
    code, report = run_check(cpu_container, None, sysroot)
    assert finding(report, "container-no-gpu-access")["severity"] == "error"
    assert code == 4


# --- conda-forge --------------------------------------------------------------------------------------------


@pytest.fixture
def conda_forge(tmp_path):
    def build(gpu: dict) -> tuple[Path, Path]:
        root = tmp_path / "env"
        venv = make_fake_env(
            root,
            python=python("3.12"),
            torch="2.5.1",
            cuda="12.6",
            build_version="2.5.1",
            requires=["filelock", "sympy"],
            installer="conda",
            torchvision="0.20.1",
            tv_cuda=None,
        )
        channel = "https://conda.anaconda.org/conda-forge/linux-64"
        conda_meta(root, "pytorch", "2.5.1", "cuda126_mkl_py312_h8b1a2c3_303", channel)
        conda_meta(root, "libtorch", "2.5.1", "cuda126_mkl_h1f0e0a2_303", channel)
        conda_meta(root, "torchvision", "0.20.1", "cuda_126_py312h9d9c1a4_0", channel)
        bin_dir = tmp_path / "bin"
        write_fake_nvidia_smi(bin_dir, [gpu], driver="570.124.04", cuda="12.8")
        return venv, bin_dir
    return build


def test_conda_forge_cuda126_with_its_torchvision_is_healthy(conda_forge, sysroot):
    venv, bin_dir = conda_forge(RTX4090)
    code, report = run_check(venv, bin_dir, sysroot)
    assert code == 0, report["findings"]
    assert "torchvision-mismatch" not in ids(report)
    assert not ids(report, "error") and not ids(report, "warning")
    # conda-forge's own list: neither binary nor table knows it
    unknown = finding(report, "arch-list-unknown")
    assert (
        unknown["evidence"]["origin"] == "conda-forge"
        and unknown["evidence"]["arch_list.kind"] == "cuda-bound"
    )
    assert report["plan"]["status"] == "healthy"


def test_conda_forge_libtorch_in_the_prefix_is_read(conda_forge, sysroot, tmp_path):
    venv, bin_dir = conda_forge(RTX4090)
    put(tmp_path / "env" / "lib" / "libtorch_cuda.so",
        library("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "compute_90",
                needed=("libcudart.so.12",)))
    code, report = run_check(venv, bin_dir, sysroot)
    assert code == 0 and not ids(report, "info") & {"arch-list-unknown"}
    kernels = report["snapshot"]["install"]["torch"]["kernels"]
    assert kernels["status"] == "ok" and kernels["path"].endswith("env/lib/libtorch_cuda.so")
    assert "sm_89" in kernels["sm"] and kernels["ptx"] == ["compute_90"]


def test_conda_forge_on_a_gpu_its_cuda_cannot_target_stays_with_conda_forge(conda_forge, sysroot):
    venv, bin_dir = conda_forge(RTX5090)
    code, report = run_check(venv, bin_dir, sysroot)
    # CUDA 12.6 cannot make sm_120 cubins; PTX might still run
    warning = finding(report, "gpu-arch-needs-ptx")
    assert warning["severity"] == "warning" and "CUDA 12.6 cannot target sm_120" in warning["detail"]
    plan = report["plan"]
    assert plan["status"] == "manual" and "conda-forge" in plan["reason"]
    assert any("-c conda-forge 'pytorch=*=cuda*' 'cuda-version>=12.8' "
        "torchvision" in n for n in plan["notes"])
    assert_no_pip_replacement(report)
    assert code == 0  # a warning alone


# --- NGC ----------------------------------------------------------------------------------------------------


@pytest.fixture
def ngc(tmp_path, sysroot):
    venv = make_fake_env(
        tmp_path / "venv",
        python=python("3.12"),
        torch="2.6.0a0+ecf3bae40a.nv25.1",
        cuda="12.8",
        build_version="2.6.0a0+ecf3bae40a.nv25.01",
        requires=["filelock", "sympy"],
        torchvision="0.20.0a0+861c3ca",
        tv_cuda=None,
    )
    site = site_packages(tmp_path / "venv")
    put(site / "torchvision" / "_C.so", library("sm_80", "sm_86", "sm_90", "compute_90",
                                                needed=("libc10.so", "libcudart.so.12")))
    (sysroot / ".dockerenv").write_text("")
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [H100], driver="570.124.06", cuda="12.8")
    return venv, bin_dir, site


NGC_ENV = {"NVIDIA_PYTORCH_VERSION": "25.01", "NVIDIA_VISIBLE_DEVICES": "all"}


def test_ngc_torch_and_torchvision_on_an_h100_are_healthy(ngc, sysroot):
    venv, bin_dir, site = ngc
    put(site / "torch" / "lib" / "libtorch_cuda.so",
        library("sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120", needed=("libcudart.so.12",)))
    code, report = run_check(venv, bin_dir, sysroot, env=NGC_ENV)
    assert code == 0, report["findings"]
    assert not ids(report, "error") and not ids(report, "warning") and "arch-list-unknown" not in ids(report)
    tv = report["snapshot"]["install"]["torchvision"]["kernels"]
    assert tv["status"] == "ok" and tv["needed"] == ["libcudart.so.12"]
    assert report["snapshot"]["provenance"]["nvidia_pytorch_version"] == "25.01"


def test_ngc_without_a_readable_binary_falls_back_to_the_cuda_bound(ngc, sysroot):
    venv, bin_dir, _ = ngc
    code, report = run_check(venv, bin_dir, sysroot, env=NGC_ENV)
    assert code == 0
    unknown = finding(report, "arch-list-unknown")
    assert unknown["evidence"]["origin"] == "ngc" and unknown["evidence"]["arch_list.kind"] == "cuda-bound"
    assert "CUDA 12.8 can target sm_90" in unknown["detail"]


def test_ngc_on_a_gpu_its_cuda_cannot_target_asks_for_a_newer_container(ngc, sysroot, tmp_path):
    venv, _, site = ngc
    put(site / "torch" / "lib" / "libtorch_cuda.so", library("sm_80", "sm_86", "sm_90"))
    bin_dir = tmp_path / "bin2"
    write_fake_nvidia_smi(bin_dir, [{"name": "NVIDIA "
        "B300", "cc": "10.3", "mem_mib": 288000}], driver="580.82.07",
                          cuda="13.0")
    code, report = run_check(venv, bin_dir, sysroot, env=NGC_ENV)
    assert code == 1 and finding(report, "gpu-arch-unsupported")["evidence"]["arch_list.kind"] == "binary"
    assert any("newer NGC PyTorch container" in n for n in report["plan"]["notes"])
    assert_no_pip_replacement(report)


# --- torch 1.13.1+cu117 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu,sm", [(H100, "sm_90"), (RTX5090, "sm_120")])
def test_cuda_11_7_cannot_target_hopper_or_blackwell(tmp_path, sysroot, gpu, sm):
    venv = make_fake_env(tmp_path / "venv", python=python("3.10"), torch="1.13.1+cu117", cuda="11.7")
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [gpu], driver="570.124.04", cuda="12.8")
    code, report = run_check(venv, bin_dir, sysroot)
    assert code == 1
    error = finding(report, "gpu-arch-unsupported")
    assert error["evidence"]["arch_list.kind"] == "table"
    assert error["evidence"]["bound"] == f"CUDA 11.7 cannot target {sm} (its nvcc compiles sm_35 to sm_87)"
    assert f"CUDA 11.7 cannot target {sm}" in error["detail"]
    assert report["plan"]["status"] == "install" and report["plan"]["target"]["cuda"] not in ("11.7", None)


# --- nightlies ----------------------------------------------------------------------------------------------


def test_nightly_cu124_on_an_rtx_5080(tmp_path, sysroot):
    venv = make_fake_env(
        tmp_path / "venv", python=python("3.12"), torch="2.7.0.dev20250301+cu124", cuda="12.4"
    )
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [RTX5080], driver="570.124.04", cuda="12.8")
    code, report = run_check(venv, bin_dir, sysroot)
    assert code == 1
    error = finding(report, "gpu-arch-unsupported")
    assert (
        error["evidence"]["arch_list.kind"] == "cuda-bound"
        and error["evidence"]["origin"] == "pytorch-nightly"
    )
    assert "CUDA 12.4 cannot target sm_120" in error["detail"]
    assert "PyTorch's cu124 builds carry no PTX" in error["detail"]
    assert any("replaces the nightly build" in n for n in report["plan"]["notes"])


def test_nightly_cu130_on_a_gtx_1080_ti(tmp_path, sysroot):
    venv = make_fake_env(
        tmp_path / "venv", python=python("3.12"), torch="2.16.0.dev20261101+cu130", cuda="13.0"
    )
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [GTX1080TI], driver="580.95.05", cuda="13.0")
    code, report = run_check(venv, bin_dir, sysroot)
    assert code == 1
    error = finding(report, "gpu-arch-unsupported")
    assert error["evidence"]["arch_list.kind"] == "cuda-bound"
    assert (
        "CUDA 13.0 cannot target sm_61" in error["detail"]
        and "no build made with CUDA 13.0" in error["detail"]
    )
    assert report["plan"]["target"]["variant"] == "cu126"  # the last builds for Pascal


# --- a source build
# -------------------------------------------------------------------------------------------


@pytest.fixture
def source_build(tmp_path):
    def build(gpu: dict, with_binary: bool = True):
        venv = make_fake_env(
            tmp_path / "venv",
            python=python("3.12"),
            torch="2.14.1a0+git9a8b7c6",
            cuda="13.0",
            requires=["filelock", "sympy"],
        )
        if with_binary:
            put(site_packages(tmp_path / "venv") / "torch" / "lib" / "libtorch_cuda.so",
                library("sm_80", containers=8, needed=("libcudart.so.13",)))
        bin_dir = tmp_path / "bin"
        write_fake_nvidia_smi(bin_dir, [gpu], driver="580.95.05", cuda="13.0")
        return venv, bin_dir
    return build


def test_source_build_for_sm80_only_is_an_error_on_an_h100(source_build, sysroot):
    venv, bin_dir = source_build(H100)
    code, report = run_check(venv, bin_dir, sysroot)
    assert code == 1
    error = finding(report, "gpu-arch-unsupported")
    assert error["evidence"]["arch_list.kind"] == "binary" and error["evidence"]["arch_list"] == ["sm_80"]
    assert (
        error["evidence"]["origin"] == "source"
        and "libtorch_cuda.so" in error["evidence"]["arch_list.source"]
    )
    plan = report["plan"]
    assert plan["status"] == "manual"
    assert any('TORCH_CUDA_ARCH_LIST="8.0;9.0"' in n for n in plan["notes"])
    # the wheel is offered only as an alternative that says what it replaces
    assert any("this replaces your source build" in n and "pip install" in n for n in plan["notes"])
    assert_no_pip_replacement(report)


def test_the_same_source_build_is_healthy_on_an_rtx_3090(source_build, sysroot):
    venv, bin_dir = source_build(RTX3090)
    code, report = run_check(venv, bin_dir, sysroot)
    assert code == 0, report["findings"]
    assert not ids(report, "error") and "arch-list-unknown" not in ids(report)


def test_the_same_source_build_without_a_binary_falls_back_to_the_cuda_bound(source_build, sysroot):
    venv, bin_dir = source_build(H100, with_binary=False)
    code, report = run_check(venv, bin_dir, sysroot)
    assert code == 0
    unknown = finding(report, "arch-list-unknown")
    assert unknown["evidence"]["arch_list.kind"] == "cuda-bound"
    assert (
        "CUDA 13.0 can target sm_90" in unknown["detail"]
        and "binary: no torch library found" in unknown["detail"]
    )


# --- Jetson
# ---------------------------------------------------------------------------------------------------


def test_jetson_orin_with_a_pypi_wheel_says_which_jetpack_build_it_needs(tmp_path, sysroot):
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch="2.14.1", cuda="13.0")
    (sysroot / "etc").mkdir()
    (sysroot / "etc" / "nv_tegra_release").write_text(
        "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan  8 "
        "01:49:37 "
        "UTC 2025\n")
    put(sysroot / "proc" / "device-tree" / "model", b"NVIDIA Jetson AGX Orin Developer Kit\0")
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [ORIN], driver="540.4.0", cuda="12.6")
    code, report = run_check(venv, bin_dir, sysroot)
    assert code == 1
    assert report["snapshot"]["provenance"]["l4t"] == "36.4.3"
    driver = finding(report, "driver-too-old")
    assert "comes with the JetPack" in driver["detail"] and "JetPack 6.1, 6.2, 6.2.1" in driver["title"]
    assert "gpu-arch-unsupported" in ids(report, "error")  # sm_87 is not in the SBSA build before CUDA 13.2
    plan = report["plan"]
    assert plan["status"] == "manual" and not plan["steps"]
    assert any("NVIDIA's PyTorch built for this JetPack (CUDA 12.6)" in n for n in plan["notes"])
    text = plan_text(report) + json.dumps(report["findings"])
    assert "Install NVIDIA driver" not in text and "cu132" not in text and "cu130" not in plan_text(report)
    assert_no_pip_replacement(report)


# --- Kepler
# ---------------------------------------------------------------------------------------------------


def test_tesla_k40m_on_r470_has_no_wheel(tmp_path, sysroot):
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch="2.3.1+cu118", cuda="11.8")
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [K40M], driver="470.256.02", cuda="11.4", mode="no-compute-cap")
    code, report = run_check(venv, bin_dir, sysroot)
    assert code == 1
    gpu = report["snapshot"]["nvidia"]["gpus"][0]
    assert gpu["compute_capability"]["value"] == "3.5" and gpu["compute_capability"]["source"].startswith(
        "table"
    )
    error = finding(report, "gpu-arch-unsupported")
    assert error["evidence"]["compute_capability"] == "3.5" and "sm_37" in error["evidence"]["arch_list"]
    assert report["plan"]["status"] == "manual"


def test_tesla_k80_cannot_run_cudnn_9_even_with_sm37_listed(tmp_path, sysroot):
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch="2.5.1+cu118", cuda="11.8")
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [K80], driver="470.256.02", cuda="11.4", mode="no-compute-cap")
    code, report = run_check(venv, bin_dir, sysroot)
    assert code == 1 and "gpu-arch-unsupported" not in ids(report)
    error = finding(report, "cudnn-unsupported-gpu")
    assert (
        error["evidence"]["cudnn.min_cc"] == "5.0" and "cuDNN 9.1.0.70" in error["evidence"]["cudnn.source"]
    )
    assert report["plan"]["target"]["label"] == "2.3.1+cu118"  # cuDNN 8.7: Kepler 3.5 and up


# --- companions' CUDA check
# -----------------------------------------------------------------------------------


def test_torchvision_0_15_refuses_another_cuda_minor(tmp_path, sysroot):
    venv = make_fake_env(tmp_path / "venv", python=python("3.11"), torch="2.0.1+cu117", cuda="11.7",
                         torchvision="0.15.2+cu118")
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [RTX3090], driver="535.183.01", cuda="12.2")
    code, report = run_check(venv, bin_dir, sysroot)
    assert code == 1
    error = finding(report, "torchvision-mismatch")
    assert "compares major and minor" in error["detail"] and error["evidence"]["cuda_check"].startswith(
        "major.minor"
    )
    commands = [s["command"] for s in report["plan"]["steps"]]
    assert any('"torch==2.0.1+cu117" "torchvision==0.15.2+cu117"' in c for c in commands), commands


def test_torchvision_0_16_accepts_another_cuda_minor(tmp_path, sysroot):
    venv = make_fake_env(tmp_path / "venv", python=python("3.11"), torch="2.1.2+cu118", cuda="11.8",
                         torchvision="0.16.2+cu118")
    site = site_packages(tmp_path / "venv")
    # the same torchvision from another CUDA 11 index: a different minor is fine from 0.16 on
    for info in site.glob("torchvision-*.dist-info"):
        text = (info / "METADATA").read_text().replace("Version: 0.16.2+cu118", "Version: 0.16.2+cu117")
        (info / "METADATA").write_text(text)
    (site / "torchvision" / "version.py").write_text("__version__ = '0.16.2+cu117'\n")
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [RTX3090], driver="535.183.01", cuda="12.2")
    code, report = run_check(venv, bin_dir, sysroot)
    assert "torchvision-mismatch" not in ids(report) and code == 0, report["findings"]


@pytest.mark.parametrize("gpu,code", [(H100, 1), (RTX3090, 0)])
def test_a_nightly_is_judged_on_its_binary_too(tmp_path, sysroot, gpu, code):
    venv = make_fake_env(
        tmp_path / "venv", python=python("3.12"), torch="2.16.0.dev20261101+cu130", cuda="13.0"
    )
    put(site_packages(tmp_path / "venv") / "torch" / "lib" / "libtorch_cuda.so",
        library("sm_80", containers=6, needed=("libcudart.so.13",)))
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [gpu], driver="580.95.05", cuda="13.0")
    got, report = run_check(venv, bin_dir, sysroot)
    assert got == code, report["findings"]
    if code:
        error = finding(report, "gpu-arch-unsupported")
        assert (
            error["evidence"]["arch_list.kind"] == "binary"
            and error["evidence"]["origin"] == "pytorch-nightly"
        )
    else:
        assert not ids(report, "error") and "arch-list-unknown" not in ids(report)
