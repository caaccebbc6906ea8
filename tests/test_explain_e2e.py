"""`torchdoctor explain` through the real CLI: the input forms users have (stdin, a file, the words on
the command line, a long CI log, ANSI colours, CRLF, a Chinese paste, binary junk), and the probe that
confirms or rules out a cause on a fake machine (a real venv with a metadata-only torch, a fake
nvidia-smi; see tests/fakeenv.py and tests/fixtures/nvidia/fake_smi.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import find_python, make_fake_env

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "nvidia"))
from fake_smi import write_fake_nvidia_smi  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RTX5090 = {"name": "NVIDIA GeForce RTX 5090", "cc": "12.0", "mem_mib": 32607}
ARCH_WARNING = ("UserWarning: \nNVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with "
    "the "
                "current PyTorch installation.\nThe current PyTorch install supports CUDA capabilities sm_50 "
                "sm_60 "
                "sm_70 sm_75 sm_80 sm_86 sm_90.\n")
NO_KERNEL = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"


def explain(args, stdin=None, env_extra=None, cwd=None, timeout=120):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0", NO_COLOR="1")
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "doctor", "explain", *args],
        input=stdin,
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def causes(res) -> list[tuple[str, str]]:
    report = json.loads(res.stdout)
    return [(c["id"], c["verdict"]) for c in report["causes"]]


def test_stdin_is_read_and_answered_from_the_text_alone():
    res = explain(["--no-probe", "--json", "-"], stdin=NO_KERNEL.encode())
    assert res.returncode == 1, res.stderr
    assert causes(res) == [("gpu-arch-unsupported", "not-probed")]


def test_a_piped_stdin_needs_no_dash():
    res = explain(["--no-probe", "--json"], stdin=b"Torch not compiled with CUDA enabled\n")
    assert causes(res)[0] == ("torch-cpu-build", "not-probed")


def test_the_message_on_the_command_line():
    res = explain(
        ["--no-probe", "--json", "RuntimeError:", "Found", "no", "NVIDIA", "driver", "on", "your", "system."]
    )
    assert causes(res)[0][0] == "nvidia-driver-missing", res.stdout


def test_a_file_with_crlf_ansi_and_chinese_around_the_message(tmp_path):
    text = (
        "运行训练脚本时报错，求助：\r\n\x1b[31mRuntimeError\x1b[0m: CUDA out of memory. "
        "Tried to allocate 2.00 GiB "
        "(GPU 0; 23.65 GiB total capacity; 20.10 GiB already allocated)\r\n谢谢！\r\n"
    )
    log = tmp_path / "paste.txt"
    log.write_bytes(text.encode("utf-8"))
    res = explain(["--no-probe", "--json", str(log)])
    assert causes(res)[0][0] == "cuda-out-of-memory"
    assert "\x1b" not in res.stdout.decode()


def test_one_message_buried_in_a_long_ci_log(tmp_path):
    lines = [f"step {i}: ok, loss 0.{i % 97:02d}" for i in range(5000)]
    lines[4321] = "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"
    log = tmp_path / "ci.log"
    log.write_text("\n".join(lines) + "\n")
    res = explain(["--no-probe", "--json", str(log)])
    report = json.loads(res.stdout)
    assert report["input"]["lines"] >= 5000
    assert (
        report["causes"][0]["id"] == "cudnn-library-missing" and report["causes"][0]["match"]["line"] == 4322
    )


def test_nothing_known_is_exit_0_and_says_so():
    res = explain(["--no-probe", "all good here, training finished"])
    assert res.returncode == 0 and b"no known error message" in res.stdout


@pytest.mark.parametrize("payload", [b"", os.urandom(200_000), b"\x00" * 10_000, b"a" * 3_000_000])
def test_hostile_bytes_never_crash(payload):
    res = explain(["--no-probe", "--json", "-"], stdin=payload)
    assert res.returncode in (0, 1), res.stderr
    assert b"Traceback" not in res.stderr
    json.loads(res.stdout)


def test_a_fifo_is_refused_with_one_line(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    res = explain(["--no-probe", str(fifo)], timeout=20)
    assert res.returncode == 2
    assert res.stderr.decode().strip().splitlines() == [
        f"torchdoctor: error: {fifo}: not a regular file (for a pipe, use: ... | torchdoctor explain -)"]


def test_no_input_on_a_terminal_is_a_usage_error():
    import pty

    leader, follower = pty.openpty()
    try:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        res = subprocess.run([sys.executable, "-m", "doctor", "explain", "--no-probe"], stdin=follower,
                             capture_output=True, env=env, timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
    assert res.returncode == 2 and b"nothing to explain" in res.stderr


# --- probing a fake machine ---------------------------------------------------------------------------


@pytest.fixture
def machine(tmp_path):
    py = find_python("3.12")
    if py is None:
        pytest.skip("needs a real Python 3.12 interpreter (pyenv 3.12)")
    sysroot = tmp_path / "sysroot"
    sysroot.mkdir()
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [RTX5090], driver="570.124.04", cuda="12.8")
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TORCHDOCTOR_SYSROOT": str(sysroot)}
    return py, env


@pytest.mark.slow
def test_probe_confirms_the_arch_message_with_the_plans_exact_command(tmp_path, machine):
    py, env = machine
    python = make_fake_env(tmp_path / "venv", python=py, torch="2.6.0+cu126", cuda="12.6",
                           torchvision="0.21.0+cu126", torchaudio="2.6.0+cu126")
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    log = f'  File "{site}/torch/cuda/__init__.py", line 287, in _lazy_init\n{ARCH_WARNING}{NO_KERNEL}'
    res = explain(["--json", "-"], stdin=log.encode(), env_extra=env)
    assert res.returncode == 1, res.stderr
    report = json.loads(res.stdout)
    assert report["interpreter_from_traceback"] is True
    arch = report["causes"][0]
    assert (arch["id"], arch["verdict"]) == ("gpu-arch-unsupported", "confirmed")
    expected = (f'{python} -m pip install "torch==2.7.1+cu128" "torchvision==0.22.1+cu128" '
                f'"torchaudio==2.7.1+cu128" --index-url https://download.pytorch.org/whl/cu128')
    assert arch["check"]["fix"]["commands"] == [expected]
    assert report["check"]["plan"]["steps"][0]["command"] == expected
    text = explain(["-"], stdin=log.encode(), env_extra=env)
    assert expected in text.stdout.decode() and b"confirmed on this machine" in text.stdout


@pytest.mark.slow
def test_probe_rules_out_the_arch_message_when_the_build_has_the_kernels(tmp_path, machine):
    py, env = machine
    python = make_fake_env(tmp_path / "venv", python=py, torch="2.7.1+cu128", cuda="12.8")
    res = explain(
        ["--json", "--python", str(python), "-"], stdin=(ARCH_WARNING + NO_KERNEL).encode(), env_extra=env
    )
    report = json.loads(res.stdout)
    assert [(c["id"], c["verdict"]) for c in report["causes"]] == [("gpu-arch-unsupported", "ruled-out")]
    assert res.returncode == 0


# --- the capability range warning ------------------------------------------------------------------------

GB10_RANGE = ("/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:283: UserWarning: \n"
              "    Found GPU0 NVIDIA GB10 which is of cuda capability 12.1.\n"
              "    Minimum and Maximum cuda capability supported by this version of PyTorch is\n"
              "    (8.0) - (12.0)\n    \n  warnings.warn(\n")
RTX5090_RANGE = ("UserWarning: \n    Found GPU0 NVIDIA GeForce RTX 5090 which is of cuda capability 12.0.\n"
                 "    Minimum and Maximum cuda capability supported by this version of PyTorch is\n"
                 "    (5.0) - (9.0)\n")


def test_gb10_just_above_the_range_is_harmless():
    res = explain(["--no-probe", "--json", "-"], stdin=GB10_RANGE.encode())
    report = json.loads(res.stdout)
    [cause] = report["causes"]  # the general "Found GPU0 ... capability" prefix is no cause of its own
    assert cause["id"] == "gpu-newer-than-build-range"
    groups = {"index": "0", "gpu": "NVIDIA GB10", "cc": "12.1", "min": "8.0", "max": "12.0"}
    assert cause["match"]["groups"] == groups
    assert "harmless" in cause["title"]


def test_rtx_5090_above_the_range_needs_a_newer_torch_never_an_older_one():
    res = explain(["--no-probe", "--json", "-"], stdin=RTX5090_RANGE.encode())
    [cause] = json.loads(res.stdout)["causes"]
    assert cause["id"] == "gpu-arch-unsupported"
    assert "newer" in cause["title"] and "newer torch" in cause["fix"].lower() + cause["meaning"].lower()
    assert "older torch" not in cause["fix"] and "previous-versions" not in cause["fix"]
    below = RTX5090_RANGE.replace("RTX 5090", "Tesla K80").replace("12.0.", "3.7.")
    [old] = json.loads(explain(["--no-probe", "--json", "-"], stdin=below.encode()).stdout)["causes"]
    assert old["id"] == "gpu-arch-unsupported"
    assert "older" in old["title"] and "previous-versions" in old["fix"]


# --- a collect_env paste or a report: diagnosed as check --from would ------------------------------------

COLLECT_ENV_CPU = """Cuda is not available.

Collecting environment information...
PyTorch version: 2.2.2+cpu
Is debug build: False
CUDA used to build PyTorch: None
ROCM used to build PyTorch: N/A

OS: Ubuntu 22.04.4 LTS (x86_64)
GCC version: (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0
Clang version: Could not collect
CMake version: Could not collect
Libc version: glibc-2.35

Python version: 3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0] (64-bit runtime)
Python platform: Linux-6.5.0-26-generic-x86_64-with-glibc2.35
Is CUDA available: False
CUDA runtime version: No CUDA
CUDA_MODULE_LOADING set to: N/A
GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4090
Nvidia driver version: 550.54.15
cuDNN version: No CUDA
HIP runtime version: N/A
MIOpen runtime version: N/A
Is XNNPACK available: True

Versions of relevant libraries:
[pip3] numpy==1.26.4
[pip3] torch==2.2.2+cpu
[conda] Could not collect
"""


def test_a_collect_env_paste_is_diagnosed_as_check_from_would(tmp_path):
    paste = tmp_path / "issue.txt"
    paste.write_text(COLLECT_ENV_CPU)
    res = explain(["--json", str(paste)])  # no --no-probe: the paste's machine is diagnosed, never this one
    report = json.loads(res.stdout)
    assert res.returncode == 1, res.stderr
    assert report["rediagnosed"] == {"kind": "collect_env", "as": "torchdoctor check --from", "exit_code": 1}
    assert report["probed"] is False
    assert "torch-cpu-build" in [f["id"] for f in report["check"]["findings"]]
    assert [(c["id"], c["verdict"]) for c in report["causes"]] == [("torch-cpu-build", "confirmed")]
    text = explain([str(paste)]).stdout.decode()
    assert "collect_env paste" in text and "check --from" in text and "torch-cpu-build" in text


# --- any size, in bounded memory ------------------------------------------------------------------------

PLANTED = [
    "RuntimeError: Found no NVIDIA driver on your system.",
    "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory",
    "RuntimeError: CUDA error: out of memory",
    "ERROR: No matching distribution found for torch==2.5.1+cu124",
    "AssertionError: Torch not compiled with CUDA enabled",
]


@pytest.mark.slow
def test_a_50_mb_log_is_searched_from_its_first_line_to_its_last(tmp_path):
    lines = 600_000  # about 50 MB
    where = [1, lines // 4, lines // 2, 3 * lines // 4, lines]  # start, middle, end (1-based)
    log = tmp_path / "train.log"
    filler = "2026-11-30T08:00:00Z [INFO] step {} loss 0.{:04d} lr 3e-4 tokens/s 12345 grad 0.5 &amp; ok\n"
    with open(log, "w") as out:
        for number in range(1, lines + 1):
            planted = PLANTED[where.index(number)] + "\n" if number in where else None
            out.write(planted or filler.format(number, number % 9973))
    assert log.stat().st_size > 45_000_000
    res = explain(["--no-probe", "--json", str(log)], timeout=300)
    report = json.loads(res.stdout)
    assert report["input"] == {"source": str(log), "lines": lines, "notes": []}
    found = {c["id"]: c["match"]["line"] for c in report["causes"]}
    ids = ["nvidia-driver-missing", "cudnn-library-missing", "cuda-out-of-memory", "no-matching-wheel",
           "torch-cpu-build"]
    assert found == dict(zip(ids, where, strict=True))


def test_what_could_not_be_read_is_said_with_counts():
    data = b"\xfa ok\n\x00junk\x01\x02\n" + b"x" * 1_100_000 + b"\nTorch not compiled with CUDA enabled\n"
    report = json.loads(explain(["--no-probe", "--json", "-"], stdin=data).stdout)
    notes = report["input"]["notes"]
    assert "1 byte(s) were not valid UTF-8 text and were replaced" in notes
    assert "1 NUL byte(s) were removed" in notes and "2 other control character(s) were removed" in notes
    assert any(n.startswith("1 line(s) longer than 1048576 characters") for n in notes)
    assert report["causes"][0]["id"] == "torch-cpu-build"


# --- probing: the machine's facts confirm or rule out ------------------------------------------------------


def _bare_machine(tmp_path, *, wsl=False, amd=False):
    """A sysroot with a PCI bus (empty, or one AMD Radeon RX 6700 XT with its KFD node), no nvidia-smi."""
    from test_amd_probe import CPU_NODE, GPU_NODE, PCI_RX6700, make_root

    if amd:
        root = make_root(tmp_path, pci=[PCI_RX6700], kfd={0: CPU_NODE, 1: GPU_NODE},
                         dev=["/dev/kfd", "/dev/dri/renderD128"])
    else:
        root = make_root(tmp_path)
    if wsl:
        (Path(root) / "usr/lib/wsl/lib").mkdir(parents=True)
        (Path(root) / "proc").mkdir(exist_ok=True)
        (Path(root) / "proc/version").write_text("Linux version 6.6.87.1-microsoft-standard-WSL2\n")
    bin_dir = tmp_path / "emptybin"
    bin_dir.mkdir()
    path = os.pathsep.join([str(bin_dir), os.path.dirname(sys.executable), "/usr/bin", "/bin"])
    return {"TORCHDOCTOR_SYSROOT": root, "PATH": path, "LD_LIBRARY_PATH": ""}


def _probed(python, stdin: bytes, env: dict) -> dict:
    return json.loads(explain(["--json", "--python", str(python), "-"], stdin=stdin, env_extra=env).stdout)


@pytest.fixture
def py312():
    py = find_python("3.12")
    if py is None:
        pytest.skip("needs a real Python 3.12 interpreter (pyenv 3.12)")
    return py


@pytest.mark.slow
def test_probe_confirms_a_cpu_build_and_rules_out_a_gpu_message_without_a_gpu(tmp_path, py312):
    python = make_fake_env(tmp_path / "venv", python=py312, torch="2.6.0+cpu", cuda=None)
    env = _bare_machine(tmp_path)
    message = b"AssertionError: Torch not compiled with CUDA enabled\n" + NO_KERNEL.encode()
    res = explain(["--json", "--python", str(python), "-"], stdin=message, env_extra=env)
    report = json.loads(res.stdout)
    verdicts = {c["id"]: (c["verdict"], c["why"]) for c in report["causes"]}
    assert verdicts["torch-cpu-build"][0] == "confirmed" and str(python) in verdicts["torch-cpu-build"][1]
    arch = verdicts["gpu-arch-unsupported"]
    assert arch[0] == "ruled-out" and "no GPU" in arch[1]
    assert report["interpreter"] == str(python)
    assert not [c for c in report["causes"] if "--no-smoke" in c["why"]]  # explain was never given --no-smoke
    said = explain(["--python", str(python), "-"], stdin=message, env_extra=env).stdout.decode()
    assert f"The fixes below are for {python}" in said and "--no-smoke" not in said


@pytest.mark.slow
def test_probe_confirms_a_cuda_torch_on_an_amd_machine(tmp_path, py312):
    python = make_fake_env(tmp_path / "venv", python=py312, torch="2.6.0+cu126", cuda="12.6")
    env = _bare_machine(tmp_path, amd=True)
    message = b"My GPU is an AMD Radeon RX 6700 XT.\nRuntimeError: Found no NVIDIA driver on your system.\n"
    report = _probed(python, message, env)
    assert report["causes"][0]["id"] == "torch-wrong-vendor-build"
    assert report["causes"][0]["verdict"] == "confirmed", report["causes"][0]["why"]
    assert "AMD" in report["causes"][0]["why"]


WSL_CUDNN = (b"Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object "
             b"file: No such file or directory\nPlease make sure libcudnn_cnn_infer.so.8 is in your library "
             b"path!\n")


@pytest.mark.slow
@pytest.mark.parametrize("wsl", [True, False], ids=["wsl", "not-wsl"])
def test_probe_judges_the_wsl_libcuda_message_by_the_machine(tmp_path, py312, wsl):
    python = make_fake_env(tmp_path / "venv", python=py312, torch="2.1.2+cu121", cuda="12.1")
    env = _bare_machine(tmp_path, wsl=wsl)
    report = _probed(python, WSL_CUDNN, env)
    cause = report["causes"][0]
    assert cause["id"] == "wsl-libcuda-not-on-path"
    assert "reinstall" not in cause["fix"].lower().replace("reinstalling torch or cudnn does not help", "")
    if wsl:
        assert cause["verdict"] == "confirmed" and "/usr/lib/wsl/lib" in cause["why"], cause["why"]
    else:
        assert cause["verdict"] == "ruled-out" and "not WSL2" in cause["why"]


def test_the_numbers_in_a_message_are_decoded():
    message = (b"UserWarning: The NVIDIA driver on your system is too old (found version 11040).\n"
               b"RuntimeError: cuda runtime error (59) : device-side assert triggered at "
               b"/pytorch/aten/src/THC/x.cu:1\n")
    causes_ = json.loads(explain(["--no-probe", "--json", "-"], stdin=message).stdout)["causes"]
    assert causes_[0]["id"] == "driver-too-old" and causes_[0]["decoded"] == {"found_version": "CUDA 11.4"}
    text = explain(["--no-probe", "-"], stdin=message).stdout.decode()
    assert "found_version means CUDA 11.4" in text


def test_a_torchdoctor_json_report_is_rediagnosed_too():
    report = json.loads(explain(["--json", str(REPO / "tests" / "golden" / "rtx5090-cu126.json")]).stdout)
    assert report["rediagnosed"]["kind"] == "report" and report["probed"] is False
    assert report["check"]["findings"] and report["causes"][0]["id"] == "gpu-arch-unsupported"


@pytest.mark.slow
def test_probe_confirms_a_missing_nccl_symbol_from_the_wheels(tmp_path, py312):
    from fakeenv import add_dist_info

    python = make_fake_env(tmp_path / "venv", python=py312, torch="2.6.0+cu126", cuda="12.6",
                           requires=["nvidia-nccl-cu12==2.21.5; platform_system == \"Linux\"", "filelock"])
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    add_dist_info(site, "nvidia_nccl_cu12", "2.19.3")
    env = _bare_machine(tmp_path)
    message = (b"ImportError: /venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so: "
               b"undefined symbol: ncclCommRegister\n")
    report = _probed(python, message, env)
    cause = report["causes"][0]
    assert cause["id"] == "torch-cuda-symbol-error"
    assert cause["verdict"] == "confirmed"
    assert "nvidia-nccl-cu12 2.19.3" in cause["why"] and "==2.21.5" in cause["why"]
