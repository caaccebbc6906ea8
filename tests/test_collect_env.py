"""parse_collect_env over every fixture (real captures and template-composed layouts), plus a live
run of the real CPU torch's collect_env when the cp311 wheel is available."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.errors import ReportError
from doctor.inputs.collect_env import WHY_NO_CC, WHY_NO_MAX_CUDA, looks_like_collect_env, parse_collect_env
from doctor.model.snapshot import Snapshot

FIXTURES = Path(__file__).parent / "fixtures" / "collect_env"
ALL = sorted(p.name for p in FIXTURES.glob("*.txt"))

# fixture -> expected facts (dotted path on the snapshot -> value)
EXPECTED = {
    "composed-2.6.0-cu126-rtx5090d-issue150733.txt": {
        "host.os": "linux",
        "host.libc": "glibc 2.40",
        "interpreter.version": "3.12.9",
        "install.torch.version": "2.6.0+cu126",
        "install.torch.cuda": "12.6",
        "install.torchvision.version": "0.21.0+cu126",
        "nvidia.driver_version.value": "570.124.04",
        "gpu_names": ["NVIDIA GeForce RTX 5090 D"],
        "runtime.cuda_available": True,
    },
    "torch-2.13.0-cpu-linux-real.txt": {
        "host.os": "linux",
        "host.machine": "x86_64",
        "host.libc": "glibc 2.36",
        "interpreter.version": "3.11.7",
        "interpreter.bits": 64,
        "install.torch.version": "2.13.0+cpu",
        "install.torch.build_version": "2.13.0+cpu",
        "install.torch.cuda": None,
        "install.torchvision": None,
        "runtime.status": "ok",
        "runtime.cuda_available": False,
        "runtime.backend": "cpu",
        "nvidia.driver_version.value": None,
        "gpu_names": [],
    },
    "torch-2.13.0-cpu-linux-real-with-stderr.txt": {
        "install.torch.version": "2.13.0+cpu",
        "runtime.cuda_available": False,
        "host.machine": "x86_64",
    },
    "composed-2.5.1-cu121-rtx4090-pip.txt": {
        "host.os": "linux",
        "host.machine": "x86_64",
        "host.os_release": "5.15.0-105-generic",
        "host.libc": "glibc 2.35",
        "interpreter.version": "3.11.7",
        "install.torch.version": "2.5.1+cu121",
        "install.torch.cuda": "12.1",
        "install.torchvision.version": "0.20.1+cu121",
        "install.torchaudio.version": "2.5.1+cu121",
        "install.cuda_from_requires": "12.1",
        "runtime.status": "ok",
        "runtime.cuda_available": True,
        "runtime.backend": "cuda",
        "runtime.cuda_version": "12.1",
        "nvidia.status": "ok",
        "nvidia.driver_version.value": "550.54.14",
        "gpu_names": ["NVIDIA GeForce RTX 4090"],
    },
    "composed-2.5.1-conda-4xA100.txt": {
        "host.libc": "glibc 2.28",
        "interpreter.version": "3.10.15",
        "install.torch.version": "2.5.1",
        "install.torch.installer": "conda",
        "install.torch.cuda": "12.1",
        "install.torchvision.version": "0.20.1",
        "install.torchvision.installer": "conda",
        "nvidia.driver_version.value": "535.104.05",
        "gpu_names": ["NVIDIA A100-SXM4-80GB"] * 4,
    },
    "composed-1.3.1-old-layout-no-cuda.txt": {
        "host.os": "linux",
        "host.machine": "",
        "interpreter.version": "3.6",
        "interpreter.bits": None,
        "install.torch.version": "1.3.1",
        "install.torch.cuda": "10.1",
        "install.torchvision.version": "0.4.2",
        "runtime.status": "ok",
        "runtime.cuda_available": False,
        "runtime.cuda_version": "10.1",
        "nvidia.status": "ok",
        "nvidia.driver_version.value": "410.48",
        "gpu_names": ["TITAN Xp", "TITAN Xp"],
    },
    "composed-rocm-6.2-mi300x.txt": {
        "install.torch.cuda": None,
        "install.torch.hip": "6.2.41133-dd7f95766",
        "runtime.backend": "rocm",
        "runtime.cuda_available": True,
        "runtime.hip_version": "6.2.41133-dd7f95766",
        "runtime_device_names": ["AMD Instinct MI300X (gfx942:sramecc+:xnack-)"],
        "nvidia.status": "unknown",
        "gpu_names": [],
    },
    "real-rosetta-m2pro-pytorch146236.txt": {
        "host.os": "darwin",
        "host.machine": "x86_64",
        "host.cpu": "Apple M2 Pro",
        "host.macos": "15.3",
        "interpreter.machine": "x86_64",
        "install.torch.cuda": None,
        "runtime.backend": "cpu",
        "gpu_names": [],
    },
    "real-macos13-arm64-pytorch164943.txt": {
        "host.os": "darwin",
        "host.machine": "arm64",
        "host.cpu": "Apple M2 Max",
        "host.macos": "13.7.4",
        "install.torch.version": "2.10.0.dev20251008",
        "gpu_names": [],
    },
    "composed-2.8-windows-cpu.txt": {
        "host.os": "windows",
        "host.machine": "x86_64",
        "host.os_release": "10.0.22631",
        "host.libc": "",
        "install.torch.version": "2.8.0+cpu",
        "install.torch.cuda": None,
        "runtime.cuda_available": False,
        "runtime.backend": "cpu",
        "nvidia.status": "unknown",
        "nvidia.driver_version.value": None,
        "gpu_names": [],
    },
    "composed-torch-not-importable.txt": {
        "install.status": "ok",
        "install.torch.version": "2.6.0+cu124",
        "install.torch.build_version": None,
        "install.torch.cuda": "12.4",
        "install.cuda_from_requires": "12.4",
        "runtime.status": "import-error",  # N/A with torch in the package list: its import failed
        "runtime.cuda_available": None,
        "nvidia.driver_version.value": "470.256.02",
        "gpu_names": ["NVIDIA GeForce RTX 3060"],
    },
    "composed-2.4.0-cu121-windows-not-importable.txt": {
        "host.os": "windows",
        "host.machine": "x86_64",
        "interpreter.bits": 64,
        "install.torch.version": "2.4.0+cu121",
        "runtime.status": "import-error",
        "nvidia.driver_version.value": "560.94",
        "gpu_names": ["NVIDIA GeForce RTX 4070"],
    },
    "composed-windows-32bit-python.txt": {
        "host.os": "windows",
        "host.machine": "x86_64",  # the OS is 64-bit; the Python is not
        "interpreter.bits": 32,
        "interpreter.version": "3.12.4",
        "install.status": "absent",
        "runtime.status": "skipped",
        "gpu_names": ["NVIDIA GeForce GTX 1660 SUPER"],
    },
    "composed-2.14.1-cu130-rtx5090-r610.txt": {
        "interpreter.version": "3.13.7",
        "install.torch.version": "2.14.1",
        "install.torch.build_version": "2.14.1+cu130",
        "install.torch.cuda": "13.0",
        "install.cuda_from_requires": "13.0",
        "runtime.cuda_version": "13.0",
        "runtime.backend": "cuda",
        "nvidia.status": "ok",
        "nvidia.driver_version.value": None,
        "gpu_names": ["NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 3090 Ti"],
    },
}


def _get(snapshot: Snapshot, path: str):
    if path == "gpu_names":
        return [g.name for g in snapshot.nvidia.gpus]
    if path == "runtime_device_names":
        return [d.name for d in snapshot.runtime.devices]
    value = snapshot
    for part in path.split("."):
        if value is None:
            return None
        value = getattr(value, part)
    return value


def test_every_fixture_has_expectations_and_an_origin_note():
    assert set(ALL) == set(EXPECTED)
    readme = (FIXTURES / "README.md").read_text()
    for name in ALL:
        assert (FIXTURES / f"{name}.source").exists() or name in readme, name


@pytest.mark.parametrize("name", ALL)
def test_fixture(name):
    snapshot = parse_collect_env((FIXTURES / name).read_text(encoding="utf-8"))
    assert snapshot.origin == "collect_env"
    for path, expected in EXPECTED[name].items():
        assert _get(snapshot, path) == expected, path
    # what collect_env cannot know is unknown with a reason, never a guess
    assert snapshot.nvidia.cuda_driver_version.value is None
    assert snapshot.nvidia.cuda_driver_version.why == WHY_NO_MAX_CUDA
    for gpu in snapshot.nvidia.gpus:
        assert gpu.compute_capability.value is None and gpu.compute_capability.why == WHY_NO_CC
        assert gpu.uuid is None
    assert any(u.startswith("nvidia.cuda_driver_version") for u in snapshot.unknowns)
    assert any(u.startswith("nvidia.gpus[].compute_capability") for u in snapshot.unknowns)
    # it survives the JSON round trip like any snapshot
    assert Snapshot.from_dict(snapshot.to_dict()) == snapshot


def test_driver_fact_keeps_the_collect_env_reason():
    snapshot = parse_collect_env((FIXTURES / "composed-2.14.1-cu130-rtx5090-r610.txt").read_text())
    fact = snapshot.nvidia.driver_version
    assert fact.source == "collect_env" and "Could not collect" in fact.why
    good = parse_collect_env((FIXTURES / "composed-2.5.1-cu121-rtx4090-pip.txt").read_text())
    assert good.nvidia.driver_version.source == "collect_env"


def test_system_cudnn_candidates_are_kept_apart_from_torch():
    snapshot = parse_collect_env((FIXTURES / "composed-2.5.1-cu121-rtx4090-pip.txt").read_text())
    assert snapshot.runtime.cudnn_version is None
    raw = snapshot.environment.collect_env
    assert raw.cudnn_candidates == [
        "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7",
        "/usr/lib/x86_64-linux-gnu/libcudnn_adv_infer.so.8.9.7",
    ]
    assert raw.fields["cuda_runtime_version"] == "12.4.131"  # nvcc, not torch


def test_pasted_in_markdown_quote_with_crlf():
    text = (FIXTURES / "composed-2.5.1-conda-4xA100.txt").read_text()
    quoted = "\r\n".join("> " + line for line in text.splitlines())
    snapshot = parse_collect_env("Here is my env:\r\n```\r\n" + quoted + "\r\n```\r\n")
    assert [g.index for g in snapshot.nvidia.gpus] == [0, 1, 2, 3]
    assert snapshot.install.torch.version == "2.5.1"


def test_gpu_uuid_left_in_a_hand_edited_paste_is_dropped():
    text = (
        "PyTorch version: 2.5.1\nIs CUDA available: True\nGPU models and configuration: "
        "GPU 0: NVIDIA L4 (UUID: GPU-0b1c2d3e-1111-2222-3333-444455556666)\n"
    )
    snapshot = parse_collect_env(text)
    assert [g.name for g in snapshot.nvidia.gpus] == ["NVIDIA L4"]


def test_macos_layout():
    text = (
        "PyTorch version: 2.5.1\nIs debug build: False\nCUDA used to build PyTorch: None\n"
        "OS: macOS 14.4.1 (arm64)\nPython version: 3.12.2 (main) [Clang 15.0.0] (64-bit runtime)\n"
        "Python platform: macOS-14.4.1-arm64-arm-64bit\nIs CUDA available: False\n"
    )
    snapshot = parse_collect_env(text)
    assert (snapshot.host.os, snapshot.host.machine, snapshot.host.os_release) == (
        "darwin",
        "arm64",
        "14.4.1",
    )


def test_collect_env_after_a_long_log_is_still_found():
    """A pip log or a traceback of any length pasted before the collect_env text does not hide it."""
    text = (FIXTURES / "composed-2.5.1-conda-4xA100.txt").read_text(encoding="utf-8")
    log = "".join(f"  Downloading nvidia_cudnn_cu12-9.1.0.70-py3-none-manylinux2014_x86_64.whl ({i} kB)\n"
                  for i in range(5000))
    assert len(log) > 200_000 and looks_like_collect_env(log + text)
    alone, after_log = parse_collect_env(text), parse_collect_env(log + text)
    assert after_log.install.torch.version == alone.install.torch.version


@pytest.mark.parametrize("text", ["", "hello world", "OS: Ubuntu\nGCC version: 12\n", '{"a": 1}'])
def test_not_collect_env_raises_report_error(text):
    assert not looks_like_collect_env(text)
    with pytest.raises(ReportError, match="not `python -m torch.utils.collect_env` output"):
        parse_collect_env(text)


# --- the real thing ----------------------------------------------------------------------------


def _python311() -> str | None:
    candidates = []
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=20).stdout.strip()
        if root:
            candidates += sorted(Path(root, "versions").glob("3.11*/bin/python"))
    found = shutil.which("python3.11")
    if found:
        candidates.append(Path(found))
    return str(candidates[0]) if candidates else None


def _cpu_torch_python(tmp_path_factory) -> str:
    try:  # another engineer's shared helper, when present
        from realtorch import real_cpu_torch_python  # type: ignore[import-not-found]

        return real_cpu_torch_python(tmp_path_factory)
    except ImportError:
        pass
    wheels = sorted(Path("/opt/wheels").glob("torch-2.13.0+cpu-cp311-*.whl"))
    python = _python311()
    if not wheels or not python:
        pytest.skip("needs the cp311 CPU torch wheel in /opt/wheels and a Python 3.11")
    cache = Path(os.environ.get("TORCHDOCTOR_REALTORCH_CACHE", "/tmp/torchdoctor-realtorch-cache")) / "venv"
    venv_python = cache / "bin" / "python"
    if not venv_python.exists():
        subprocess.run([python, "-m", "venv", str(cache)], check=True, timeout=120)
        subprocess.run(
            [str(venv_python), "-m", "pip", "install", "-q", str(wheels[0])], check=True, timeout=600
        )
    return str(venv_python)


@pytest.mark.slow
def test_live_collect_env_of_the_real_cpu_torch(tmp_path_factory):
    python = _cpu_torch_python(tmp_path_factory)
    result = subprocess.run(
        [python, "-m", "torch.utils.collect_env"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    snapshot = parse_collect_env(result.stdout)
    assert snapshot.install.torch.build_version.startswith("2.13.0")
    assert snapshot.install.torch.cuda is None
    assert snapshot.runtime.status == "ok" and snapshot.runtime.cuda_available is False
    assert snapshot.interpreter.version.startswith("3.11")
    assert snapshot.host.os == {"linux": "linux", "darwin": "darwin", "win32": "windows"}.get(sys.platform)
