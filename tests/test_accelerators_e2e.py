"""End to end through the real CLI: AMD (ROCm), Intel (XPU) and Apple machines (issue 28).

Each Linux machine is a real venv holding a metadata-only torch (tests/fakeenv.py) and a TORCHDOCTOR_SYSROOT
with the PCI bus, the KFD topology (/sys/class/kfd) and the device files (/dev/kfd, /dev/dri). No ROCm tool is
on PATH, so the GPU's name comes from the accelerator table's PCI row and the build's processors from its
table row (the fake torch has no libtorch_hip.so). The Macs are collect_env texts from public pytorch issues.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_machine import kfd_topology, pci_device
from fakeenv import make_fake_env

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
COLLECT_ENV = REPO / "tests" / "fixtures" / "collect_env"
PYTORCH = "https://download.pytorch.org/whl"

RX7900XTX = ("0x1002", "0x744c", 110000)  # Navi 31, gfx1100
RX6700XT = ("0x1002", "0x73df", 100301)  # Navi 22, gfx1031
ARC_A770 = ("0x8086", "0x56a0", None)  # DG2-G10
MTL_ARC = ("0x8086", "0x7d55", None)  # Meteor Lake-H, Intel Arc Graphics (integrated)
ADL_GT1 = ("0x8086", "0x4680", None)  # Alder Lake-S GT1, UHD Graphics 770 (integrated)


class Machine:
    """A fake Linux machine with one GPU on the PCI bus; ``kfd``: the KFD topology lists it; ``devices``:
    /dev/kfd and its render node exist."""

    def __init__(self, root: Path, torch: str, gpu: tuple, *, hip: str | None = None, cuda: str | None = None,
                 devices: bool = True):
        self.root = root
        self.python = str(make_fake_env(root / "venv", torch=torch, cuda=cuda, hip=hip))
        self.sysroot = root / "sysroot"
        vendor, device, target_version = gpu
        pci_device(self.sysroot, "0000:03:00.0", vendor, "0x030000", device)
        if target_version:
            kfd_topology(self.sysroot, [{"cpu_cores_count": 0, "simd_count": 80,
                                         "gfx_target_version": target_version, "vendor_id": 4098,
                                         "device_id": int(device, 16), "location_id": 768, "domain": 0,
                                         "drm_render_minor": 128}])
        if devices:
            (self.sysroot / "dev/dri").mkdir(parents=True)
            (self.sysroot / "dev/kfd").write_text("")
            (self.sysroot / "dev/dri/renderD128").write_text("")
        (root / "bin").mkdir()

    def cli(self, *args: str, env: dict | None = None):
        environ = {
            k: v
            for k, v in os.environ.items()
            if k
            not in (
                "VIRTUAL_ENV",
                "CONDA_PREFIX",
                "TORCHDOCTOR_INDEX_URL_BASE",
                "HSA_OVERRIDE_GFX_VERSION",
                "HIP_VISIBLE_DEVICES",
                "ROCR_VISIBLE_DEVICES",
            )
        }
        environ["PATH"] = os.pathsep.join([str(self.root / "bin"), "/usr/bin", "/bin"])
        environ.update(PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0", TORCHDOCTOR_SYSROOT=str(self.sysroot),
                       NO_COLOR="1", COLUMNS="250")
        environ.update(env or {})
        res = subprocess.run(
            [sys.executable, "-m", "doctor", "check", "--no-smoke", *args, "--python", self.python],
            capture_output=True,
            text=True,
            env=environ,
            timeout=120,
            cwd=str(self.sysroot),
        )
        assert "Traceback" not in res.stderr, res.stderr
        return res

    def json(self, *args: str, env: dict | None = None) -> tuple[int, dict]:
        res = self.cli(*args, "--json", env=env)
        return res.returncode, json.loads(res.stdout)


def from_text(name: str, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    environ = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1", COLUMNS="250")
    argv = [sys.executable, "-m", "doctor", "check", "--from", str(COLLECT_ENV / name), *args]
    text = subprocess.run(argv, capture_output=True, text=True, env=environ, timeout=120)
    assert "Traceback" not in text.stderr, text.stderr
    report = subprocess.run(argv + ["--json"], capture_output=True, text=True, env=environ, timeout=120)
    return text, json.loads(report.stdout)


def finding(report: dict, fid: str) -> dict:
    return next(f for f in report["findings"] if f["id"] == fid)


def ids(report: dict) -> set[str]:
    return {f["id"] for f in report["findings"]}


def commands(report: dict) -> list[str]:
    return [s["command"] for s in report["plan"]["steps"] if s.get("command")]


# --- AMD ----------------------------------------------------------------------------------------------------


def test_a_cuda_wheel_on_an_rx_7900_xtx_gets_a_rocm_wheel(tmp_path):
    m = Machine(tmp_path, "2.7.1+cu126", RX7900XTX, cuda="12.6")
    code, report = m.json()
    assert code == 1
    found = finding(report, "torch-wrong-vendor-build")
    assert found["severity"] == "error"
    assert "GPU 0 AMD Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M] (gfx1100)" in found["detail"]
    assert found["evidence"]["gfx.source"] == ["/sys/class/kfd/kfd/topology/nodes/1/properties"]
    assert report["plan"]["target"]["label"] == "2.7.1+rocm6.3"  # the installed version kept, its ROCm build
    assert commands(report) == [f'{m.python} -m pip install "torch==2.7.1+rocm6.3" --index-url '
        f'{PYTORCH}/rocm6.3']


def test_rx_6700_xt_on_2_5_1_rocm6_2_needs_the_override(tmp_path):
    m = Machine(tmp_path, "2.5.1+rocm6.2", RX6700XT, hip="6.2.41133")
    code, report = m.json()
    assert code == 0
    found = finding(report, "rocm-gfx-override-available")
    assert found["severity"] == "warning"
    assert found["fix"]["commands"] == ["export HSA_OVERRIDE_GFX_VERSION=10.3.0"]
    assert found["evidence"]["targets.from_binary"] is False  # from the table: the fake torch has no library
    assert "ROCm/legacy-rocm-build#2353" in found["evidence"]["override.report"]
    assert report["plan"]["status"] == "healthy"


def test_the_same_with_the_override_set_is_healthy(tmp_path):
    m = Machine(tmp_path, "2.5.1+rocm6.2", RX6700XT, hip="6.2.41133")
    code, report = m.json(env={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"})
    assert code == 0 and not ids(report) & {
        "rocm-gfx-override-available",
        "hsa-override-gfx-wrong",
        "rocm-gfx-unsupported",
    }
    check = next(c for c in report["checks"] if c["rule"] == "rocm-targets")
    assert check["status"] == "passed"


def test_a_wrong_override_is_an_error(tmp_path):
    m = Machine(tmp_path, "2.5.1+rocm6.2", RX6700XT, hip="6.2.41133")
    code, report = m.json(env={"HSA_OVERRIDE_GFX_VERSION": "10.3.1"})  # gfx1031 itself: not in the build
    found = finding(report, "hsa-override-gfx-wrong")
    assert code == 1 and found["severity"] == "error"
    assert "claim gfx1031" in found["title"] and "HSA_STATUS_ERROR_INVALID_ISA" in found["detail"]
    assert found["fix"]["commands"] == ["export HSA_OVERRIDE_GFX_VERSION=10.3.0"]


def test_an_mi350x_on_rocm6_4_gets_a_rocm7_wheel(tmp_path):
    """gfx950 first appears in the ROCm 7 wheels (astral-sh/uv's lists; corpus entry
    amd-mi350x-gfx950-rocm6.4)."""
    m = Machine(tmp_path, "2.9.1+rocm6.4", ("0x1002", "0x75a0", 90500), hip="6.4.43482")
    code, report = m.json()
    found = finding(report, "rocm-gfx-unsupported")
    assert code == 1 and "Aqua Vanjaram [Instinct MI350X] (gfx950)" in found["title"]
    assert report["plan"]["target"]["label"] == "2.10.0+rocm7.1"
    assert commands(report) == [f'{m.python} -m pip install "torch==2.10.0+rocm7.1" --index-url '
        f'{PYTORCH}/rocm7.1']


def test_a_container_without_dev_kfd(tmp_path):
    m = Machine(tmp_path, "2.7.1+rocm6.3", RX7900XTX, hip="6.3.42131", devices=False)
    code, report = m.json()
    found = finding(report, "amd-device-access")
    assert code == 1 and found["severity"] == "error"
    assert found["fix"]["commands"] == [
        "docker run --device /dev/kfd --device /dev/dri --group-add video --group-add render <image> ...  "
        "# podman: the same flags"]


# --- Intel --------------------------------------------------------------------------------------------------


def test_an_arc_a770_with_a_cpu_wheel_gets_the_xpu_wheel(tmp_path):
    m = Machine(tmp_path, "2.7.1+cpu", ARC_A770)
    code, report = m.json()
    found = finding(report, "xpu-wheel-needed")
    assert code == 1 and found["severity"] == "error"
    assert found["evidence"]["family"] == ["DG2"]
    assert commands(report) == [f'{m.python} -m pip install "torch==2.7.1+xpu" --index-url {PYTORCH}/xpu']


def test_integrated_intel_graphics_is_no_reason_for_xpu(tmp_path):
    m = Machine(tmp_path, "2.7.1+cpu", MTL_ARC)  # a Core Ultra laptop on the CPU wheel is not broken
    code, report = m.json()
    assert code == 0 and "xpu-wheel-needed" not in ids(report)
    assert not any("xpu" in c for c in commands(report))
    code, report = m.json("--require", "xpu")  # asked for: the build is what is missing, not the GPU
    title = finding(report, "requirement-xpu")["title"]
    assert code == 4 and title.endswith("is not an xpu build")


def test_core_ultra_arc_graphics_meets_require_xpu(tmp_path):
    """PyTorch's XPU page lists Meteor Lake-H's Arc Graphics: an xpu torch there meets --require xpu judged
    from the facts (it said "no discrete Intel GPU was found" and exited 4)."""
    m = Machine(tmp_path, "2.7.1+xpu", MTL_ARC)
    code, report = m.json("--require", "xpu")
    assert code == 0 and "requirement-xpu" not in ids(report)
    assert "xpu-wheel-needed" not in ids(report)


def test_alder_lake_graphics_does_not_meet_require_xpu(tmp_path):
    m = Machine(tmp_path, "2.7.1+xpu", ADL_GT1)  # UHD Graphics 770: not on PyTorch's XPU page
    code, report = m.json("--require", "xpu")
    title = finding(report, "requirement-xpu")["title"]
    assert code == 4
    assert title == ("--require xpu: no XPU device usable: no Intel GPU that PyTorch's XPU builds list was "
                     "found on the PCI bus")
    code, report = Machine(tmp_path / "cpu", "2.7.1+cpu", ADL_GT1).json("--require", "xpu")
    title = finding(report, "requirement-xpu")["title"]
    assert code == 4 and "is not an xpu build, and no Intel GPU that PyTorch's XPU builds list" in title


# --- Apple --------------------------------------------------------------------------------------------------


def test_rosetta_from_a_collect_env_paste():
    text, report = from_text("real-rosetta-m2pro-pytorch146236.txt")
    found = finding(report, "python-under-rosetta")
    assert text.returncode == 1 and found["severity"] == "error"
    assert "Apple M2 Pro" in found["title"]
    assert report["snapshot"]["host"]["macos"] == "15.3"  # the OS line, not the platform line's 10.16


def test_an_intel_mac_is_not_rosetta(tmp_path):
    source = (COLLECT_ENV / "real-rosetta-m2pro-pytorch146236.txt").read_text()
    intel = tmp_path / "intel-mac.txt"
    intel.write_text(source.replace("Apple M2 Pro", "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz"))
    environ = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")
    res = subprocess.run([sys.executable, "-m", "doctor", "check", "--from", str(intel), "--json"],
                         capture_output=True, text=True, env=environ, timeout=120)
    assert "python-under-rosetta" not in ids(json.loads(res.stdout))


def test_macos_13_never_gets_a_wheel_it_cannot_install():
    text, report = from_text("real-macos13-arm64-pytorch164943.txt", "--torch", ">=2.12")
    found = finding(report, "torch-version-unavailable")
    assert "need macOS 14.0 or newer (macosx_14_0_arm64); this Mac runs macOS 13.7.4" in found["detail"]
    assert "torch 2.11.0 is the newest release that installs here" in found["detail"]
    plan = report["plan"]
    assert plan["status"] == "manual" and not any("2.12" in c or "2.13" in c or "2.14" in c or "2.15" in c
                                                   for c in commands(report))
    assert "torch==2.11.0" in text.stdout  # the other way names the newest release that installs
    assert "macos-too-old-for-torch" in ids(report)  # 2.10's MPS needs macOS 14 (pytorch/pytorch#163515)


def test_a_tables_own_accelerator_facts_decide_the_wheel_choice(tmp_path):
    """--table with an accelerators.json beside it: the wheel choice reads that file's macOS floors, never
    the bundled ones (here a table that says torch 2.11 needs macOS 14 too: 2.10 is the newest for 13.7)."""
    tables = tmp_path / "tables"
    tables.mkdir()
    shutil.copy(REPO / "compat_tables" / "pytorch.json", tables / "pytorch.json")
    acc = json.loads((REPO / "compat_tables" / "accelerators.json").read_text(encoding="utf-8"))
    for row in acc["macos"]:
        if row["torch_minor"] == "2.11" and row["platform"] == "darwin-arm64":
            row["min_macos"] = "14.0"
    (tables / "accelerators.json").write_text(json.dumps(acc), encoding="utf-8")
    _, report = from_text("real-macos13-arm64-pytorch164943.txt", "--torch", ">=2.12",
                          "--table", str(tables / "pytorch.json"))
    detail = finding(report, "torch-version-unavailable")["detail"]
    assert "torch 2.10" in detail and "is the newest release that installs here" in detail
    assert "2.11.0 is the newest" not in detail


# --- --require from the facts (no import probe) -------------------------------------------------------------


def test_require_rocm_from_the_facts(tmp_path):
    healthy = Machine(tmp_path / "ok", "2.7.1+rocm6.3", RX7900XTX, hip="6.3.42131")
    code, report = healthy.json("--require", "rocm")
    assert code == 0 and "requirement-rocm" not in ids(report)
    bare = Machine(tmp_path / "bare", "2.7.1+rocm6.3", RX7900XTX, hip="6.3.42131", devices=False)
    code, report = bare.json("--require", "rocm")
    assert code == 4 and "requirement-rocm" in ids(report)
    assert "/dev/kfd" in finding(report, "requirement-rocm")["title"]


def test_require_xpu_from_the_facts(tmp_path):
    m = Machine(tmp_path, "2.7.1+cpu", ARC_A770)
    code, report = m.json("--require", "xpu")
    assert code == 4 and "is not an xpu build" in finding(report, "requirement-xpu")["title"]


def test_require_mps_under_rosetta():
    _, report = from_text("real-rosetta-m2pro-pytorch146236.txt", "--require", "mps")
    assert "requirement-mps" in ids(report)  # the paste says torch ran on the CPU
    from doctor.compat.accelerators import accelerators
    from doctor.compat.builds import torch_build
    from doctor.inputs.collect_env import parse_collect_env
    from doctor.rules.requirements import _mps_from_facts

    snap = parse_collect_env((COLLECT_ENV / "real-rosetta-m2pro-pytorch146236.txt").read_text())
    ok, why = _mps_from_facts(snap, "torch", torch_build(snap), accelerators(None))
    assert not ok and "Rosetta 2" in why
