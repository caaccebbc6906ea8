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
ARCH_WARNING = ("UserWarning: \nNVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the "
                "current PyTorch installation.\nThe current PyTorch install supports CUDA capabilities sm_50 sm_60 "
                "sm_70 sm_75 sm_80 sm_86 sm_90.\n")
NO_KERNEL = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"


def explain(args, stdin=None, env_extra=None, cwd=None, timeout=120):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0", NO_COLOR="1")
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "doctor", "explain", *args], input=stdin, capture_output=True,
                          env=env, cwd=cwd, timeout=timeout)


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
    res = explain(["--no-probe", "--json", "RuntimeError:", "Found", "no", "NVIDIA", "driver", "on", "your", "system."])
    assert causes(res)[0][0] == "nvidia-driver-missing", res.stdout


def test_a_file_with_crlf_ansi_and_chinese_around_the_message(tmp_path):
    text = ("运行训练脚本时报错，求助：\r\n\x1b[31mRuntimeError\x1b[0m: CUDA out of memory. Tried to allocate 2.00 GiB "
            "(GPU 0; 23.65 GiB total capacity; 20.10 GiB already allocated)\r\n谢谢！\r\n")
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
    assert report["causes"][0]["id"] == "cudnn-library-missing" and report["causes"][0]["match"]["line"] == 4322


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
    res = explain(["--json", "--python", str(python), "-"], stdin=(ARCH_WARNING + NO_KERNEL).encode(), env_extra=env)
    report = json.loads(res.stdout)
    assert [(c["id"], c["verdict"]) for c in report["causes"]] == [("gpu-arch-unsupported", "ruled-out")]
    assert res.returncode == 0
