"""check_runtime: torch's real messages in a TorchRuntime -> stable finding ids, evidence and fixes.

Pure: each test builds the runtime result by hand on the factory's healthy machine and changes one
thing. The message texts are torch's own (tests/standins/messages.py says where each comes from).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from factory import gpu, make_snapshot, torch_dist, written
from standins import messages as M

from doctor.compat.assessment import assess
from doctor.model.environment import DriverLibCopy, Loader
from doctor.model.snapshot import RuntimeDevice, SmokeStep, TorchRuntime
from doctor.rules import all_rules
from doctor.rules.runtime import RULES, check_runtime

EMITTED: set[str] = set()


def snap_with(runtime: TorchRuntime, **changes):
    snap = make_snapshot(**changes)
    snap.runtime = runtime
    return snap


def check(snap):
    findings = written(check_runtime(assess(snap, None)), snap)
    EMITTED.update(f.id for f in findings)
    return findings


def ok(name, device=None, **data) -> SmokeStep:
    return SmokeStep(name=name, status="ok", seconds=0.1, message="fine", device=device, data=data)


def failed(name, message, device=None, **data) -> SmokeStep:
    return SmokeStep(name=name, status="failed", seconds=0.1, message=message, device=device, data=data)


def cuda_runtime(*steps, status="ok", warnings=(), **kw) -> TorchRuntime:
    fields = dict(
        torch_version="2.7.1+cu128",
        cuda_version="12.8",
        backend="cuda",
        cuda_available=True,
        device_count=1,
        devices=[RuntimeDevice(0, "NVIDIA GeForce RTX 4090", "8.9", 24564, 23000)],
    )
    fields.update(kw)
    base = [ok("import"), ok("init"), ok("versions")]
    return TorchRuntime(status=status, steps=base + list(steps), warnings=list(warnings), **fields)


def test_skipped_and_healthy_runs_have_no_findings():
    assert check(snap_with(TorchRuntime(status="skipped", detail="--no-smoke"))) == []
    healthy = cuda_runtime(
        ok("alloc", 0),
        ok("matmul", 0, tflops=80.0),
        status="ok",
        warnings=["Failed to initialize NumPy: No module named 'numpy'"],
    )
    assert check(snap_with(healthy)) == []


@pytest.mark.parametrize(
    "step, message, expected",
    [
        ("alloc", "AcceleratorError: " + M.NO_KERNEL_IMAGE, "gpu-arch-unsupported"),
        ("alloc", "RuntimeError: " + M.HIP_INVALID_DEVICE_FUNCTION, "gpu-arch-unsupported"),
        ("init", "RuntimeError: " + M.DRIVER_TOO_OLD, "driver-too-old"),
        ("init", "RuntimeError: " + M.NO_DRIVER, "nvidia-driver-missing"),
        ("init", "RuntimeError: " + M.DRIVER_MISMATCH_803, "driver-library-mismatch"),
        ("init", "AssertionError: " + M.NOT_COMPILED, "torch-cpu-build"),
        ("init", "AcceleratorError: " + M.BUSY, "gpu-busy-or-exclusive"),
        ("conv", "RuntimeError: " + M.CUDNN_NOT_INITIALIZED, "cudnn-error"),
        ("versions", "RuntimeError: " + M.CUDNN_INCOMPATIBLE, "cudnn-error"),
        ("alloc", "OutOfMemoryError: " + M.OUT_OF_MEMORY, "gpu-out-of-memory-at-start"),
        ("matmul", "AcceleratorError: " + M.ILLEGAL_ADDRESS, "smoke-failed"),
    ],
)
def test_each_real_message_maps_to_its_id(step, message, expected):
    device = 0 if step in ("alloc", "matmul", "conv") else None
    [f] = check(snap_with(cuda_runtime(failed(step, message, device))))
    assert f.id == expected and f.severity == "error"
    assert f.evidence["source"] == "smoke-test" and f.evidence["step"] == step
    assert f.title and "\n" not in f.title and f.detail and f.fix is not None and f.fix.summary


def test_error_803_names_the_libcuda_the_loader_finds():
    snap = snap_with(cuda_runtime(failed("init", "RuntimeError: " + M.DRIVER_MISMATCH_803)))
    snap.environment.loader = Loader(copies=[
        DriverLibCopy("libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "default", "550.54.15")])
    [f] = check(snap)
    assert f.id == "driver-library-mismatch" and "550.54.15" in f.detail and "570.124.04" in f.detail
    assert f.fix.commands == ["cat /proc/driver/nvidia/version"]
    compat = "/usr/local/cuda-12.2/compat/libcuda.so.1"
    snap.environment.loader = Loader(copies=[DriverLibCopy("libcuda.so.1", compat, "LD_LIBRARY_PATH",
                                                           "535.54.03", compat=True)])
    [f] = check(snap)
    assert "cuda-compat" in f.detail and "LD_LIBRARY_PATH" in f.fix.summary


def test_error_803_beside_nvmls_own_mismatch_is_said_once():
    snap = snap_with(cuda_runtime(failed("init", "RuntimeError: " + M.DRIVER_MISMATCH_803)),
                     nvidia_status="driver-library-mismatch")
    assert "driver-library-mismatch" not in {f.id for f in check(snap)}  # the driver rule's to say


@pytest.mark.parametrize("found, cuda", [(12040, "12.4"), (11080, "11.8"), (13000, "13.0"), (12090, "12.9")])
def test_driver_version_int_is_read_as_cuda(found, cuda):
    text = M.DRIVER_TOO_OLD.replace("12040", str(found))
    [f] = check(snap_with(cuda_runtime(failed("init", "RuntimeError: " + text))))
    assert f.evidence["driver.max_cuda"] == cuda and f.evidence["found_version"] == found
    assert f.evidence["driver"] == "570.124.04" and f.fix.commands == []  # the plan names the wheel


def test_arch_warning_and_failure_make_one_finding_with_both_messages():
    rt = cuda_runtime(
        failed("alloc", "AcceleratorError: " + M.NO_KERNEL_IMAGE, 0), warnings=[M.ARCH_WARNING_OLD]
    )
    [f] = check(snap_with(rt))
    assert f.id == "gpu-arch-unsupported" and f.severity == "error"
    assert len(f.evidence["messages"]) == 2 and f.evidence["sm"] == "sm_120"
    assert "compatibility table" in f.detail  # says why it beats the static diagnosis


def test_arch_warning_while_kernels_ran_is_only_a_warning():
    rt = cuda_runtime(
        ok("alloc", 0), ok("matmul", 0), ok("conv", 0), status="ok", warnings=[M.ARCH_WARNING_NEW]
    )
    [f] = check(snap_with(rt))
    assert (f.id, f.severity) == ("gpu-arch-unsupported", "warning")
    assert f.evidence["compute_capability"] == "6.1" and "ran" in f.detail


def test_arch_warning_in_import_mode_is_an_error():
    [f] = check(snap_with(cuda_runtime(status="ok", warnings=[M.ARCH_WARNING_NEW])))
    assert (f.id, f.severity) == ("gpu-arch-unsupported", "error")


def test_no_driver_without_any_nvidia_device_is_not_a_finding():
    rt = cuda_runtime(failed("init", "RuntimeError: " + M.NO_DRIVER))
    assert check(snap_with(rt, nvidia_status="no-gpu", gpus=[], driver=None, max_cuda=None)) == []


def test_busy_names_the_exclusive_gpu():
    snap = snap_with(cuda_runtime(failed("init", "AcceleratorError: " + M.BUSY)))
    snap.nvidia.gpus[0].compute_mode = "Exclusive_Process"
    [f] = check(snap)
    assert "sudo nvidia-smi -i 0 -c DEFAULT" in f.fix.commands and "Exclusive_Process" in f.detail


def test_busy_without_compute_mode_gives_the_generic_reset():
    [f] = check(snap_with(cuda_runtime(failed("init", "AcceleratorError: " + M.BUSY))))
    assert "sudo nvidia-smi -c DEFAULT" in f.fix.commands


def test_oom_names_the_process_holding_the_memory():
    [f] = check(snap_with(cuda_runtime(failed("alloc", "OutOfMemoryError: " + M.OUT_OF_MEMORY, 0))))
    assert f.evidence["processes"] == [{"pid": 4242, "memory": "79.13 GiB"}]
    assert f.evidence["free_memory_mib"] == 23000
    assert f.fix.commands == ["nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"]


def test_cudnn_too_new_for_old_gpu_points_at_cu126():
    text = (
        "RuntimeError: cuDNN version 91100 is not compatible with devices with SM < 7.5. Please install a "
        "version of PyTorch with a compatible cuDNN version."
    )
    [f] = check(snap_with(cuda_runtime(failed("conv", text, 0))))
    assert f.id == "cudnn-error" and "cu126" in f.fix.summary


def test_wrong_result_says_broken_device():
    step = failed(
        "matmul",
        "4096x4096 float32 matmul differs from the CPU float64 result: max rel err 5.00e-01 > 0.01",
        0,
        wrong_result=True,
        max_rel_err=0.5,
        tolerance=0.01,
    )
    [f] = check(snap_with(cuda_runtime(step)))
    assert f.id == "gpu-wrong-result" and f.title == "GPU 0 computed a wrong result (matmul)"
    assert "broken" in f.detail and f.evidence["tolerance"] == 0.01
    assert "sudo dmesg | grep -i xid" in f.fix.commands


def test_crash_names_the_step_and_library():
    crash = failed(
        "conv",
        "crashed: SIGSEGV",
        0,
        signal=11,
        libraries=["libcudnn_engines_precompiled.so.9"],
        unfinished=True,
    )
    rt = cuda_runtime(
        ok("alloc", 0),
        crash,
        status="crashed",
        signal=11,
        detail="torch crashed (SIGSEGV) during step 'conv' on device 0",
        stderr_tail="Fatal Python error: Segmentation fault\n",
    )
    [f] = check(snap_with(rt))
    assert f.id == "torch-crashed" and f.evidence["signal"] == 11
    assert f.title == "torch crashed during step 'conv' on device 0 in libcudnn_engines_precompiled.so.9"
    assert "unset LD_LIBRARY_PATH" in f.fix.commands


def test_crash_with_a_known_cause_in_stderr_gives_both():
    # A C++ exception escaping torch ends in abort(); its what() is torch's message.
    stderr = (
        "terminate called after throwing an instance of 'c10::AcceleratorError'\n  what():  "
        + M.NO_KERNEL_IMAGE
    )
    rt = cuda_runtime(
        failed("alloc", "crashed: SIGABRT", 0, signal=6, libraries=[], unfinished=True),
        status="crashed",
        signal=6,
        detail="torch crashed (SIGABRT)",
        stderr_tail=stderr,
    )
    assert {f.id for f in check(snap_with(rt))} == {"torch-crashed", "gpu-arch-unsupported"}


def test_crash_inside_import_is_a_crash_not_an_import_error():
    step = failed("import", "crashed: SIGSEGV", signal=11, libraries=[], unfinished=True)
    rt = TorchRuntime(
        status="crashed", signal=11, steps=[step], detail="torch crashed (SIGSEGV) during step 'import'"
    )
    assert [f.id for f in check(snap_with(rt))] == ["torch-crashed"]


def test_timeout_and_garbage():
    hung = failed(
        "init", "did not finish within the 60 s limit", None, timed_out=True, limit_s=60, unfinished=True
    )
    rt = cuda_runtime(
        hung, status="timeout", detail="the child did not finish within 60 s; it was running step 'init'"
    )
    [f] = check(snap_with(rt))
    assert f.id == "smoke-timeout" and f.evidence["limit_s"] == 60
    assert "torchdoctor check --smoke-timeout 180" in f.fix.commands
    garbage = TorchRuntime(
        status="garbage", detail="no parseable output from the child (python exited with 0)"
    )
    [g] = check(snap_with(garbage))
    assert g.id == "smoke-garbage" and g.fix.commands[0].startswith("/home/u/venv/bin/python -c")


def test_import_error_undefined_symbol_points_at_ld_library_path():
    rt = TorchRuntime(
        status="import-error", steps=[failed("import", "ImportError: " + M.UNDEFINED_NVJITLINK)]
    )
    [f] = check(snap_with(rt))
    assert f.id == "torch-import-error" and "__nvJitLinkComplete_12_4" in f.detail
    assert f.fix.commands[:2] == ['echo "$LD_LIBRARY_PATH"', "unset LD_LIBRARY_PATH"]


@pytest.mark.parametrize(
    "dist, command",
    [
        # torch and its companions move together, each pinned exactly, from the index the local tag names
        (
            torch_dist("2.7.1+cu128"),
            '/home/u/venv/bin/python -m pip install --force-reinstall "torch==2.7.1+cu128" '
            '"torchvision==0.22.1+cu128" "torchaudio==2.7.1+cu128" --index-url https://download.pytorch.org/whl/cu128',
        ),
        # PyPI's builds have no local tag in METADATA and PyPI has no "+cu130" files: no tag, no index.
        (
            torch_dist("2.14.1+cu130", "13.0", metadata_version="2.14.1"),
            '/home/u/venv/bin/python -m pip install --force-reinstall "torch==2.14.1"',
        ),
    ],
)
def test_missing_shared_library_reinstalls_the_same_build(dist, command):
    text = "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"
    rt = TorchRuntime(status="import-error", steps=[failed("import", text)])
    companions = {} if dist.version.startswith("2.7.1") else {"torchvision": None, "torchaudio": None}
    [f] = check(snap_with(rt, torch=dist, **companions))
    assert f.fix.commands == [command]


def test_import_error_reinstalls_what_the_plan_installs():
    # The plan moves this RTX 5090 to 2.7.1+cu128; the import error's reinstall names that build, not
    # 2.6.0+cu126.
    from doctor.app.diagnose import diagnose
    from doctor.table.load import load_table

    text = "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"
    rt = TorchRuntime(status="import-error", steps=[failed("import", text)])
    snap = snap_with(rt, gpus=[gpu("NVIDIA GeForce RTX "
        "5090", "12.0")], torch=torch_dist("2.6.0+cu126", "12.6"),
                     torchvision=None, torchaudio=None)
    diag = diagnose(snap, load_table())
    [install] = [s for s in diag.plan.steps if s.kind == "install"]
    assert '"torch==2.7.1+cu128"' in install.command
    f = next(f for f in diag.findings if f.id == "torch-import-error")
    assert f.fix.commands == ['/home/u/venv/bin/python -m pip install --force-reinstall "torch==2.7.1+cu128" '
                              "--index-url https://download.pytorch.org/whl/cu128"]


def test_torch_not_installed_is_left_to_the_install_rule():
    rt = TorchRuntime(
        status="import-error", steps=[failed("import", "ModuleNotFoundError: No module named 'torch'")]
    )
    assert check(snap_with(rt, torch=None, torchvision=None, torchaudio=None)) == []
    assert [f.id for f in check(snap_with(rt))] == ["torch-import-error"]  # installed yet not importable


def test_several_unrecognised_failures_make_one_finding():
    rt = cuda_runtime(
        failed("matmul", "RuntimeError: weird one", 0), failed("conv", "RuntimeError: weird two", 0)
    )
    [f] = check(snap_with(rt))
    assert f.id == "smoke-failed" and len(f.evidence["failed_steps"]) == 2 and "1 more" in f.detail


def test_rule_is_registered_and_declares_every_id_it_emits():
    assert RULES[0] in all_rules()
    assert RULES[0].id == "runtime" and RULES[0].summary == "torch imports and the device computes correctly"
    assert EMITTED <= set(RULES[0].ids), EMITTED - set(RULES[0].ids)  # runs last in this module


def test_importing_the_rule_pulls_in_no_system_modules():
    code = (
        "import sys, doctor.rules.runtime; "
        "print([m for m in ('subprocess', 'pynvml', 'psutil', 'torch') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr
