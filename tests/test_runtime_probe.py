"""The import probe and smoke test: the real child script, run in real interpreters.

Stand-in torch packages (tests/standins/torch) in a throw-away venv raise torch's real messages at
import, at ``torch.cuda.init()`` or at a kernel launch, crash by signal, hang, or exit early; each
must come back as the right status and, through ``check_runtime``, the right finding id. The real
CPU torch 2.13.0 wheel checks the child against torch itself. A fake runner covers what a real
interpreter cannot be made to print (truncated or malformed protocol lines).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from factory import gpu, make_snapshot
from fakeenv import find_python, site_packages
from standins import messages as M

from doctor.compat.assessment import assess
from doctor.model.snapshot import Snapshot
from doctor.probes.runtime import (
    CHILD_SCRIPT,
    child_argv,
    child_budget,
    interpret,
    name_cuda_libraries,
    parse_child_output,
    probe_runtime,
)
from doctor.rules.runtime import check_runtime
from doctor.runner import RunResult

STANDINS = Path(__file__).parent / "standins"

H100 = {
    "name": "NVIDIA H100 80GB HBM3",
    "capability": [9, 0],
    "total": 85_045_149_696,
    "free": 84_500_000_000,
}
RTX5090 = {
    "name": "NVIDIA GeForce RTX 5090",
    "capability": [12, 0],
    "total": 34_190_000_000,
    "free": 33_000_000_000,
}
T4 = {"name": "Tesla T4", "capability": [7, 5], "total": 15_835_398_144, "free": 15_500_000_000}
CUDA_OK = {
    "version": "2.7.1+cu128",
    "cuda": "12.8",
    "devices": [H100],
    "cudnn": 90100,
    "nccl": [2, 26, 2],
    "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
}


def make_standin_venv(root: Path, python: str) -> str:
    subprocess.run(
        [python, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True, timeout=120
    )
    site = site_packages(root)
    shutil.copytree(STANDINS / "torch", site / "torch")
    shutil.copy(STANDINS / "sitecustomize.py", site / "sitecustomize.py")
    return str(root / "bin" / "python")


@pytest.fixture(scope="module")
def standin_python(tmp_path_factory) -> str:
    return make_standin_venv(tmp_path_factory.mktemp("standin-venv"), sys.executable)


def run_scenario(python: str, tmp_path: Path, scenario: dict, mode="smoke", device="all", timeout=30.0):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    env = dict(os.environ, TD_STANDIN_SCENARIO=str(path))
    return probe_runtime(python, mode=mode, device=device, timeout=timeout, env=env)


def ids(findings) -> list[str]:
    return [f.id for f in findings]


def by_name(runtime, device=0) -> dict:
    return {s.name: s for s in runtime.steps if s.device in (device, None)}


# --- healthy devices --------------------------------------------------------------------------------


def test_cuda_smoke_passes_every_step_with_timings(standin_python, tmp_path):
    rt = run_scenario(standin_python, tmp_path, CUDA_OK)
    assert rt.status == "ok", rt.detail
    assert (rt.backend, rt.torch_version, rt.cuda_version, rt.cuda_available) == (
        "cuda",
        "2.7.1+cu128",
        "12.8",
        True,
    )
    assert rt.device_count == 1 and rt.devices[0].name == H100["name"] and rt.devices[0].capability == "9.0"
    assert rt.devices[0].total_memory_mib == H100["total"] // 2**20
    assert rt.devices[0].free_memory_mib == H100["free"] // 2**20
    assert (rt.cudnn_version, rt.nccl_version) == (90100, "2.26.2")
    assert rt.arch_list == CUDA_OK["arch_list"]
    names = [s.name for s in rt.steps]
    assert names == [
        "import",
        "init",
        "versions",
        "alloc",
        "matmul",
        "conv",
        "autocast-fp16",
        "autocast-bf16",
        "sync",
    ]
    assert all(s.status == "ok" and s.seconds is not None and s.seconds >= 0 for s in rt.steps), rt.steps
    matmul = by_name(rt)["matmul"]
    assert matmul.device == 0 and matmul.data["n"] == 4096 and matmul.data["tflops"] > 0
    assert matmul.data["tolerance"] == 1e-2 and "<= 0.01" in matmul.message
    assert by_name(rt)["conv"].data["engine"] == "cuDNN 90100"
    assert by_name(rt)["alloc"].data["free_mib"] == H100["free"] // 2**20
    assert by_name(rt)["versions"].data["nccl"] == "2.26.2"
    assert check_runtime(assess(make_snapshot(), None)) == []  # the factory's runtime is "skipped"
    snap = make_snapshot()
    snap.runtime = rt
    assert check_runtime(assess(snap, None)) == []
    # The result is part of the JSON report: strict JSON, and it reads back the same.
    text = json.dumps(snap.to_dict(), allow_nan=False)
    assert Snapshot.from_dict(json.loads(text)).runtime == rt


def test_import_mode_stops_after_the_facts(standin_python, tmp_path):
    rt = run_scenario(standin_python, tmp_path, CUDA_OK, mode="import")
    assert rt.status == "ok"
    assert [s.name for s in rt.steps] == ["import", "init", "versions"]
    assert rt.devices[0].free_memory_mib is not None and rt.cudnn_version == 90100


def test_a_chosen_device_is_the_only_one_tested(standin_python, tmp_path):
    rt = run_scenario(standin_python, tmp_path, dict(CUDA_OK, devices=[T4, H100]), device="1")
    assert rt.status == "ok", rt.detail
    assert [d.index for d in rt.devices] == [1] and rt.device_count == 2
    assert {s.device for s in rt.steps if s.name in ("alloc", "matmul", "sync")} == {1}


def test_device_out_of_range_fails_init_and_skips_the_rest(standin_python, tmp_path):
    rt = run_scenario(standin_python, tmp_path, CUDA_OK, device="3")
    steps = by_name(rt, device=None)
    assert steps["init"].status == "failed" and "device 3 is not visible" in steps["init"].message
    assert steps["matmul"].status == "skipped"
    assert ids(check_runtime(assess(Snapshot(runtime=rt), None))) == ["smoke-failed"]


def test_bf16_is_skipped_below_compute_capability_8(standin_python, tmp_path):
    rt = run_scenario(standin_python, tmp_path, dict(CUDA_OK, devices=[T4]))
    assert rt.status == "ok"
    bf16 = by_name(rt)["autocast-bf16"]
    assert bf16.status == "skipped" and "8.0" in bf16.message and "7.5" in bf16.message
    assert by_name(rt)["autocast-fp16"].status == "ok"


def test_mps_backend(standin_python, tmp_path):
    rt = run_scenario(standin_python, tmp_path, {"version": "2.13.0", "cuda": None, "mps": True})
    assert rt.status == "ok", rt.detail
    assert rt.backend == "mps" and rt.cuda_available is False and rt.devices[0].name == "Apple MPS"
    assert [s.name for s in rt.steps][3:] == [
        "alloc",
        "matmul",
        "conv",
        "autocast-fp16",
        "autocast-bf16",
        "sync",
    ]
    assert by_name(rt)["conv"].data["engine"] == "MPS"
    assert check_runtime(assess(Snapshot(runtime=rt), None)) == []


def test_autocast_torch_disables_is_skipped_not_wrong(standin_python, tmp_path):
    scenario = {"version": "2.3.1", "cuda": None, "mps": True, "autocast_disabled": ["bfloat16"]}
    rt = run_scenario(standin_python, tmp_path, scenario)
    bf16 = by_name(rt)["autocast-bf16"]
    assert bf16.status == "skipped" and "disabled" in bf16.message
    assert check_runtime(assess(Snapshot(runtime=rt), None)) == []


def test_cpu_only_machine_still_gets_a_real_smoke_test(standin_python, tmp_path):
    rt = run_scenario(standin_python, tmp_path, {"version": "2.13.0+cpu", "cuda": None})
    assert rt.status == "ok" and rt.backend == "cpu" and rt.device_count == 0
    steps = by_name(rt, device=None)
    assert [s.name for s in rt.steps] == [
        "import",
        "init",
        "versions",
        "alloc",
        "matmul",
        "conv",
        "autocast-fp16",
        "autocast-bf16",
    ]
    assert steps["matmul"].data["n"] == 512 and steps["matmul"].data["tolerance"] == 1e-4


# --- torch's failures, each to its finding -----------------------------------------------------------


def test_arch_unsupported_from_warning_and_kernel_failure(standin_python, tmp_path):
    scenario = {
        "version": "2.6.0+cu126",
        "cuda": "12.6",
        "devices": [RTX5090],
        "arch_list": M.ARCH_LIST_CU126,
        "init_warnings": [M.ARCH_WARNING_OLD],
        "fail": {"op": "alloc", "type": "AcceleratorError", "message": M.NO_KERNEL_IMAGE},
    }
    rt = run_scenario(standin_python, tmp_path, scenario)
    assert rt.status == "ok"
    assert by_name(rt)["alloc"].message.startswith("AcceleratorError: CUDA error: no kernel image")
    assert by_name(rt)["matmul"].status == "skipped"
    assert M.ARCH_WARNING_OLD.strip() in [w.strip() for w in rt.warnings]
    findings = check_runtime(assess(Snapshot(runtime=rt), None))
    assert ids(findings) == ["gpu-arch-unsupported"]
    f = findings[0]
    assert f.severity == "error" and f.evidence["source"] == "smoke-test"
    assert f.evidence["sm"] == "sm_120" and f.evidence["gpu"] == "NVIDIA GeForce RTX 5090"
    assert len(f.evidence["messages"]) == 2  # the kernel failure and the warning, one finding
    assert f.fix is not None and f.fix.commands == []  # the fix plan computes the wheel command


def test_arch_warning_alone_in_import_mode(standin_python, tmp_path):
    scenario = {
        "version": "2.13.0+cu130",
        "cuda": "13.0",
        "devices": [{"name": "NVIDIA GeForce GTX 1080", "capability": [6, 1]}],
        "init_warnings": [M.ARCH_WARNING_NEW],
    }
    rt = run_scenario(standin_python, tmp_path, scenario, mode="import")
    assert rt.status == "ok"
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert (f.id, f.severity) == ("gpu-arch-unsupported", "error")
    assert f.evidence["compute_capability"] == "6.1" and f.evidence["gpu.index"] == 0


def test_rocm_invalid_device_function(standin_python, tmp_path):
    scenario = {
        "version": "2.5.1+rocm6.2",
        "cuda": None,
        "hip": "6.2.41133-dd7f95766",
        "devices": [{"name": "AMD Radeon RX 6700 XT", "capability": [10, 3]}],
        "arch_list": ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030", "gfx1100"],
        "fail": {"op": "alloc", "message": M.HIP_INVALID_DEVICE_FUNCTION},
    }
    rt = run_scenario(standin_python, tmp_path, scenario)
    assert (rt.status, rt.backend, rt.hip_version) == ("ok", "rocm", "6.2.41133-dd7f95766")
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert f.id == "gpu-arch-unsupported" and "HSA_OVERRIDE_GFX_VERSION" in f.fix.summary
    assert f.evidence["gpu"] == "AMD Radeon RX 6700 XT"


def test_rocm_conv_goes_through_miopen(standin_python, tmp_path):
    scenario = {
        "version": "2.5.1+rocm6.2",
        "cuda": None,
        "hip": "6.2.41133-dd7f95766",
        "devices": [{"name": "AMD Instinct MI300X", "capability": [9, 4]}],
    }
    rt = run_scenario(standin_python, tmp_path, scenario)
    assert rt.status == "ok" and by_name(rt)["conv"].data["engine"] == "MIOpen"


def test_driver_too_old(standin_python, tmp_path):
    scenario = {
        "version": "2.7.1+cu128",
        "cuda": "12.8",
        "devices": [H100],
        "available_warning": M.DRIVER_TOO_OLD,
        "fail": {"op": "init", "message": M.DRIVER_TOO_OLD},
    }
    rt = run_scenario(standin_python, tmp_path, scenario)
    assert rt.status == "ok" and rt.cuda_available is False
    assert by_name(rt, None)["alloc"].status == "skipped"
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert f.id == "driver-too-old" and f.evidence["driver.max_cuda"] == "12.4"
    assert f.evidence["found_version"] == 12040 and f.evidence["torch.cuda"] == "12.8"


def test_no_driver(standin_python, tmp_path):
    scenario = {
        "version": "2.7.1+cu128",
        "cuda": "12.8",
        "devices": [],
        "available_warning": M.NO_DRIVER,
        "fail": {"op": "init", "message": M.NO_DRIVER},
    }
    rt = run_scenario(standin_python, tmp_path, scenario, mode="import")
    snap = make_snapshot(nvidia_status="no-driver", gpus=[], driver=None, max_cuda=None, pci=["0000:01:00.0"])
    snap.runtime = rt
    assert ids(check_runtime(assess(snap, None))) == ["nvidia-driver-missing"]
    snap.nvidia.status = "no-gpu"  # no NVIDIA device at all: a CUDA build has nothing to drive
    assert check_runtime(assess(snap, None)) == []


def test_cpu_build_asked_for_a_device(standin_python, tmp_path):
    rt = run_scenario(standin_python, tmp_path, {"version": "2.13.0+cpu", "cuda": None}, device="0")
    assert rt.backend == "cuda" and rt.status == "ok"
    assert by_name(rt, None)["init"].message == "AssertionError: " + M.NOT_COMPILED
    assert ids(check_runtime(assess(Snapshot(runtime=rt), None))) == ["torch-cpu-build"]


def test_busy_gpu_in_exclusive_mode(standin_python, tmp_path):
    scenario = dict(CUDA_OK, fail={"op": "mem_get_info", "type": "AcceleratorError", "message": M.BUSY})
    rt = run_scenario(standin_python, tmp_path, scenario)
    snap = make_snapshot()
    snap.nvidia.gpus[0].compute_mode = "Exclusive_Process"
    snap.runtime = rt
    [f] = check_runtime(assess(snap, None))
    assert f.id == "gpu-busy-or-exclusive" and f.evidence["compute_mode"] == {0: "Exclusive_Process"}
    assert "sudo nvidia-smi -i 0 -c DEFAULT" in f.fix.commands
    assert "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv" in f.fix.commands


def test_one_busy_gpu_does_not_stop_the_others_being_tested(standin_python, tmp_path):
    scenario = dict(CUDA_OK, devices=[H100, dict(H100, busy=True)])
    rt = run_scenario(standin_python, tmp_path, scenario)
    assert by_name(rt, 0)["matmul"].status == "ok"  # GPU 0 still got the whole workload
    failed = [s for s in rt.steps if s.status == "failed"]
    assert [(s.name, s.device) for s in failed] == [("init", 1)] and "busy or unavailable" in failed[
        0
    ].message
    snap = make_snapshot(gpus=[gpu("NVIDIA H100 80GB "
        "HBM3", "9.0", 0), gpu("NVIDIA H100 80GB HBM3", "9.0", 1)])
    snap.runtime = rt
    assert "gpu-busy-or-exclusive" in ids(check_runtime(assess(snap, None)))


def test_cudnn_not_initialized_at_conv(standin_python, tmp_path):
    rt = run_scenario(
        standin_python, tmp_path, dict(CUDA_OK, fail={"op": "conv", "message": M.CUDNN_NOT_INITIALIZED})
    )
    assert by_name(rt)["conv"].status == "failed" and by_name(rt)["autocast-fp16"].status == "ok"
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert f.id == "cudnn-error" and "unset LD_LIBRARY_PATH" in f.fix.commands


def test_cudnn_version_incompatibility(standin_python, tmp_path):
    scenario = dict(CUDA_OK, fail={"op": "cudnn_version", "message": M.CUDNN_INCOMPATIBLE})
    rt = run_scenario(standin_python, tmp_path, scenario, mode="import")
    assert by_name(rt, None)["versions"].status == "failed"
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert f.id == "cudnn-error" and "LD_LIBRARY_PATH" in f.detail


def test_out_of_memory_at_a_small_allocation(standin_python, tmp_path):
    scenario = dict(CUDA_OK, fail={"op": "alloc", "type": "OutOfMemoryError", "message": M.OUT_OF_MEMORY})
    rt = run_scenario(standin_python, tmp_path, scenario)
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert f.id == "gpu-out-of-memory-at-start"
    assert f.evidence["processes"] == [{"pid": 4242, "memory": "79.13 GiB"}] and "4242" in f.detail


def test_wrong_matmul_result(standin_python, tmp_path):
    rt = run_scenario(standin_python, tmp_path, dict(CUDA_OK, wrong={"op": "matmul", "err": 0.5}))
    matmul = by_name(rt)["matmul"]
    assert (
        matmul.status == "failed"
        and matmul.data["wrong_result"] is True
        and matmul.data["max_rel_err"] == 0.5
    )
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert f.id == "gpu-wrong-result" and "broken" in f.detail and f.evidence["max_rel_err"] == 0.5


def test_unrecognised_failure_is_still_reported(standin_python, tmp_path):
    rt = run_scenario(
        standin_python, tmp_path, dict(CUDA_OK, fail={"op": "matmul", "message": M.ILLEGAL_ADDRESS})
    )
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert f.id == "smoke-failed" and "illegal memory access" in f.detail


# --- crashes, hangs, early exits, garbage ----------------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="signals are POSIX")
def test_segfault_during_conv(standin_python, tmp_path):
    rt = run_scenario(standin_python, tmp_path, dict(CUDA_OK, crash={"op": "conv", "signal": "SIGSEGV"}))
    assert (rt.status, rt.signal) == ("crashed", signal.SIGSEGV)
    assert by_name(rt)["matmul"].status == "ok"
    conv = by_name(rt)["conv"]
    assert conv.status == "failed" and conv.data["unfinished"] and "SIGSEGV" in conv.message
    assert "Segmentation fault" in rt.stderr_tail  # faulthandler's report, with the Python stack
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert f.id == "torch-crashed" and "'conv'" in f.title


@pytest.mark.skipif(os.name != "posix", reason="signals are POSIX")
def test_abort_naming_a_cuda_library(standin_python, tmp_path):
    crash = {"op": "conv", "signal": "SIGABRT", "stderr": M.CUDNN_LOAD_ABORT}
    rt = run_scenario(standin_python, tmp_path, dict(CUDA_OK, crash=crash))
    assert (rt.status, rt.signal) == ("crashed", signal.SIGABRT)
    assert "libcudnn_cnn_infer.so.8" in rt.detail
    findings = {f.id: f for f in check_runtime(assess(Snapshot(runtime=rt), None))}
    assert set(findings) == {"torch-crashed", "cudnn-error"}
    crashed = findings["torch-crashed"]
    assert crashed.evidence["libraries"] == ["libcudnn_cnn_infer.so.8", "libnvrtc.so"]
    assert "libcudnn_cnn_infer.so.8" in crashed.title and "unset LD_LIBRARY_PATH" in crashed.fix.commands


def test_hang_is_cut_off_at_the_limit(standin_python, tmp_path):
    began = time.monotonic()
    rt = run_scenario(
        standin_python, tmp_path, dict(CUDA_OK, hang={"op": "matmul", "seconds": 600}), timeout=4
    )
    took = time.monotonic() - began
    assert took < 4 + 4, took
    assert rt.status == "timeout" and "'matmul' on device 0" in rt.detail
    assert by_name(rt)["alloc"].status == "ok"
    assert by_name(rt)["matmul"].data == {"timed_out": True, "limit_s": 4, "unfinished": True}
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert f.id == "smoke-timeout" and f.evidence["limit_s"] == 4 and "alloc" in f.evidence["steps_done"]


def test_child_budget_skips_the_rest_and_still_reports(standin_python, tmp_path):
    # 3 s limit -> the child's own budget is 1 s; alloc alone takes 1.5 s.
    rt = run_scenario(
        standin_python, tmp_path, dict(CUDA_OK, hang={"op": "alloc", "seconds": 1.5}), timeout=3
    )
    assert rt.status == "ok", rt.detail
    assert by_name(rt)["alloc"].status == "ok"
    assert by_name(rt)["matmul"].status == "skipped" and "time budget" in by_name(rt)["matmul"].message


def test_import_error_undefined_symbol(standin_python, tmp_path):
    scenario = {"import_error": {"type": "ImportError", "message": M.UNDEFINED_NVJITLINK}}
    rt = run_scenario(standin_python, tmp_path, scenario)
    assert rt.status == "import-error" and [s.name for s in rt.steps] == ["import"]
    assert "__nvJitLinkComplete_12_4" in rt.steps[0].message
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert f.id == "torch-import-error" and "unset LD_LIBRARY_PATH" in f.fix.commands


def test_garbage_instead_of_the_protocol(standin_python, tmp_path):
    rt = run_scenario(standin_python, tmp_path, {"startup_garbage": "Welcome to ClusterOS! Your quota: 93%"})
    assert rt.status == "garbage" and "ClusterOS" in rt.detail
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert f.id == "smoke-garbage" and f.severity == "error"


def test_silent_exit_mid_run(standin_python, tmp_path):
    rt = run_scenario(standin_python, tmp_path, dict(CUDA_OK, exit={"op": "matmul", "code": 0}))
    assert rt.status == "error" and "'matmul'" in rt.detail
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert f.id == "smoke-failed" and f.title == "the smoke test stopped early"


def test_missing_interpreter_never_raises(tmp_path):
    rt = probe_runtime(str(tmp_path / "no-such-python"), mode="smoke", timeout=5)
    assert rt.status == "error" and "not found" in rt.detail
    [f] = check_runtime(assess(Snapshot(runtime=rt), None))
    assert (f.id, f.severity) == ("smoke-failed", "warning")


# --- the child on every interpreter it must support ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"])
def test_child_runs_on_python(version, tmp_path):
    python = find_python(version)
    if python is None:
        pytest.skip(f"no Python {version} interpreter (pyenv or python{version} on PATH)")
    venv_python = make_standin_venv(tmp_path / "venv", python)
    rt = run_scenario(venv_python, tmp_path, CUDA_OK)
    assert rt.status == "ok", (rt.detail, rt.stderr_tail)
    assert len([s for s in rt.steps if s.status == "ok"]) == 9


# --- the real CPU torch ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_real_cpu_torch(tmp_path_factory):
    from realtorch import real_cpu_torch_python

    python = str(real_cpu_torch_python(tmp_path_factory))
    began = time.perf_counter()
    imported = probe_runtime(python, mode="import", timeout=120)
    import_wall = time.perf_counter() - began
    began = time.perf_counter()
    smoke = probe_runtime(python, mode="smoke", timeout=120)
    smoke_wall = time.perf_counter() - began
    print(f"real CPU torch: import mode {import_wall:.2f} s, smoke mode {smoke_wall:.2f} s wall")
    for step in smoke.steps:
        print(f"  {step.name:14} {step.status:7} {step.seconds}s  {step.message}")

    assert imported.status == "ok", (imported.detail, imported.stderr_tail)
    assert (imported.torch_version, imported.cuda_available, imported.backend) == ("2.13.0+cpu", False, "cpu")
    assert imported.cuda_version is None and imported.arch_list == [] and imported.cudnn_version is None
    assert [s.name for s in imported.steps] == ["import", "init", "versions"]

    assert smoke.status == "ok", (smoke.detail, smoke.stderr_tail)
    assert smoke.backend == "cpu"
    names = [s.name for s in smoke.steps]
    assert names == [
        "import",
        "init",
        "versions",
        "alloc",
        "matmul",
        "conv",
        "autocast-fp16",
        "autocast-bf16",
    ]
    assert all(s.status == "ok" and s.seconds is not None for s in smoke.steps), smoke.steps
    matmul = next(s for s in smoke.steps if s.name == "matmul")
    assert matmul.data["max_rel_err"] <= 1e-4 and matmul.data["tflops"] > 0
    assert next(s for s in smoke.steps if s.name == "conv").data["engine"] in ("oneDNN", "native CPU")
    assert check_runtime(assess(Snapshot(runtime=smoke), None)) == []
    # torch takes about a second to import; the workload itself stays well under one.
    workload = sum(s.seconds for s in smoke.steps if s.name not in ("import", "init", "versions"))
    assert workload < 3.0, workload


# --- the parent's parsing, through a fake runner ---------------------------------------------------------


def fake_result(stdout="", stderr="", returncode=0, **kw) -> RunResult:
    return RunResult(["python", str(CHILD_SCRIPT)], returncode, stdout, stderr, seconds=0.5, **kw)


def line(key, value) -> str:
    return json.dumps({key: value}) + "\n"


def test_argv_and_budget():
    argv = child_argv("/venv/bin/python", "smoke", "all", 60)
    assert argv == [
        "/venv/bin/python",
        str(CHILD_SCRIPT),
        "--mode",
        "smoke",
        "--device",
        "all",
        "--budget",
        "54.0",
    ]
    assert child_budget(3) == 1.0 and child_budget(0.2) == 0.5


def test_probe_passes_argv_timeout_and_env_to_the_runner():
    calls = []

    def runner(argv, timeout, env=None, **kw):
        calls.append((argv, timeout, env))
        return fake_result(line("result", {"status": "ok", "seconds": 0.1}))

    env = {"PATH": "/usr/bin"}
    probe_runtime("/p/python", mode="import", device="2", timeout=7, runner=runner, env=env)
    assert calls == [(child_argv("/p/python", "import", "2", 7), 7, env)]


@pytest.mark.parametrize("mode, device", [("bogus", "all"), ("smoke", "gpu0")])
def test_bad_arguments_become_an_error_status(mode, device):
    rt = probe_runtime("/p/python", mode=mode, device=device, runner=lambda *a, **k: pytest.fail("ran"))
    assert rt.status == "error"


def test_noise_lines_are_ignored_and_bad_shapes_rejected():
    out = parse_child_output(
        "hello from sitecustomize\n"
        + line(
            "step",
            {"name": "import", "status": "ok", "seconds": 1.0, "message": "", "device": None, "data": {}},
        )
        + line("step", {"name": "x", "status": "exploded"})  # unknown status
        + line("step", ["not", "a", "dict"])
        + '{"step": {"name": "trunc'  # cut off mid-line
        + "\n"
        + line(
            "facts",
            {"torch_version": "2.6.0", "device_count": "two", "devices": [{"index": 0, "name": "A"}, 7]},
        )
        + line("result", {"status": "ok", "seconds": 1.2})
    )
    assert [s.name for s in out.steps] == ["import"]
    assert (out.good_lines, out.bad_lines) == (3, 4)
    rt = interpret(fake_result(), out, 60)
    assert rt.device_count is None and [d.name for d in rt.devices] == ["A"] and rt.torch_version == "2.6.0"


def test_garbage_stdout_through_the_fake_runner():
    rt = probe_runtime(
        "/p/python", runner=lambda *a, **k: fake_result("Segmentation fault (core dumped)\n", "", 1)
    )
    assert rt.status == "garbage" and "Segmentation fault" in rt.detail


def test_timeout_with_nothing_printed():
    rt = probe_runtime(
        "/p/python", timeout=5, runner=lambda *a, **k: fake_result(returncode=None, timed_out=True)
    )
    assert rt.status == "timeout" and rt.steps == []
    assert ids(check_runtime(assess(Snapshot(runtime=rt), None))) == ["smoke-timeout"]


def test_windows_access_violation_is_a_crash():
    stdout = line("running", {"name": "matmul", "device": 0})
    rt = probe_runtime("/p/python", runner=lambda *a, **k: fake_result(stdout, "", 0xC0000005))
    assert rt.status == "crashed" and rt.signal is None and "access violation" in rt.detail
    assert rt.steps[-1].name == "matmul" and rt.steps[-1].status == "failed"


def test_name_cuda_libraries():
    text = ("free(): invalid pointer\n#3 in /usr/local/cuda/lib64/libcublasLt.so.12.4.5 ... "
        "libcublasLt.so.12.4.5\n")
    assert name_cuda_libraries(text) == ["libcublasLt.so.12.4.5"]
    assert name_cuda_libraries("Fatal Python error: Segmentation fault") == []


def test_a_leftover_torch_folder_is_an_import_error_not_a_torch(tmp_path):
    # pip uninstall can leave an empty torch/ behind: Python imports it as a namespace package
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, timeout=120
    )
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    (site / "torch").mkdir()
    rt = probe_runtime(str(tmp_path / "venv" / "bin" / "python"), mode="import", timeout=30)
    assert rt.status == "import-error"
    assert "without __init__.py" in rt.steps[0].message
