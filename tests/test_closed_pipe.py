"""A reader that leaves early (`| head`, `| grep -q`, `| true`) closes the pipe under our output. The verdict
must still decide the exit code: under `set -o pipefail` a CI step that only looks at the first lines would
otherwise pass a broken machine (it used to exit 0). Real processes, a real closed pipe. What a reader leaving
does to `fix` while pip installs is tests/hostile/test_interrupt_fix.py's.

Output that cannot be written for another reason (stdout on a full disk: /dev/full) is not the user's choice:
it goes quiet the same way, so it cannot stop an installer half-way, and is said in one line at the end, exit
2 (it used to be "internal error ... please report it", exit 3)."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys

import pytest
from test_output_encoding import REPO, rtx5090  # noqa: F401 - rtx5090 is a fixture

from doctor.app import process

GOLDEN = REPO / "tests" / "golden"


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0", NO_COLOR="1", **extra)
    return env


def _run(args: list[str], env: dict[str, str], stdout) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "doctor", *args], stdout=stdout, stderr=subprocess.PIPE, env=env, timeout=120
    )


def _closed_pipe_and_normal(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, int]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte
    try:
        closed = _run(args, env, write_end)
    finally:
        os.close(write_end)
    return closed, _run(args, env, subprocess.DEVNULL).returncode


def _both_closed(args: list[str], env: dict[str, str]) -> int:
    """`2>&1 | head`: stderr into the same pipe, gone too."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "doctor", *args], stdout=write_end, stderr=write_end, env=env, timeout=120
        ).returncode
    finally:
        os.close(write_end)


@pytest.mark.parametrize("fmt", [[], ["--json"], ["--format", "markdown"], ["--format", "junit"], ["-v"]])
def test_a_reader_that_left_does_not_turn_a_failing_check_into_a_pass(rtx5090, fmt):  # noqa: F811
    args, extra = rtx5090
    closed, normal = _closed_pipe_and_normal([*args, *fmt], _env(extra))
    assert normal == 1  # the machine has an error finding
    assert closed.returncode == 1, closed.stderr.decode()
    # no traceback, no "Exception ignored ... BrokenPipeError"
    assert closed.stderr == b"", closed.stderr.decode()


def test_many_reports_read_back_keep_their_worst_code_too(tmp_path):
    for name in ("cpu-healthy.json", "no-torch.json"):
        (tmp_path / name).write_bytes((GOLDEN / name).read_bytes())
    args = ["check", "--from", str(tmp_path), "--json"]
    closed, normal = _closed_pipe_and_normal(args, _env({}))
    assert normal == 1  # no-torch.json has an error finding
    assert (closed.returncode, closed.stderr) == (normal, b"")


def test_head_under_pipefail_sees_the_verdict(rtx5090):  # noqa: F811
    args, extra = rtx5090
    line = " ".join([sys.executable, "-m", "doctor", *args, "--json", "-v"])
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {line} | head -c 100 >/dev/null"],
                          capture_output=True, env=_env(extra), timeout=120)
    assert done.returncode == 1, done.stderr.decode()
    assert b"Traceback" not in done.stderr and b"BrokenPipe" not in done.stderr


@pytest.mark.parametrize("more", [["--json"], ["-o", "{tmp}/report.json"]])
def test_stderr_gone_too_changes_nothing(rtx5090, tmp_path, more):  # noqa: F811 - -o writes its line on stderr
    args, extra = rtx5090
    assert _both_closed([*args, *(m.format(tmp=tmp_path) for m in more)], _env(extra)) == 1


@pytest.mark.parametrize("args", [["--help"], ["check", "--help"], ["--version"], ["rules"]])
def test_what_is_not_a_verdict_exits_0_into_a_closed_pipe(args):
    closed, normal = _closed_pipe_and_normal(args, _env({}))
    assert normal == 0
    assert (closed.returncode, closed.stderr) == (0, b""), closed.stderr.decode()


FULL = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")


@FULL
@pytest.mark.parametrize("fmt", [["--json"], []])
def test_stdout_on_a_full_disk_is_one_line_and_exit_2(rtx5090, fmt):  # noqa: F811
    args, extra = rtx5090
    with open("/dev/full", "w") as full:
        done = _run([*args, *fmt], _env(extra), full)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert err.count("\n") == 1 and "could not write to stdout: No space left on device" in err, err
    assert "(the run itself ended with exit 1)" in err and "internal error" not in err, err


@FULL
def test_the_line_is_in_the_runs_language(rtx5090):  # noqa: F811
    args, extra = rtx5090
    with open("/dev/full", "w") as full:
        done = _run([*args, "--json", "--lang", "zh"], _env(extra), full)
    err = done.stderr.decode()
    assert done.returncode == 2 and "无法写入 stdout" in err and "退出码 1" in err, err


@FULL
def test_version_on_a_full_disk_too():
    with open("/dev/full", "w") as full:
        done = _run(["--version"], _env({}), full)
    assert done.returncode == 2 and b"exit 0" in done.stderr, done.stderr.decode()


class _FullDisk(io.StringIO):
    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("code, expected", [(0, 2), (1, 2), (4, 2), (3, 3), (5, 5), (6, 6), (130, 130)])
def test_a_failed_write_goes_quiet_and_is_counted_at_the_end(monkeypatch, capsys, code, expected):
    stream = process.ReaderMayLeave(_FullDisk(), "stdout")
    assert stream.write("the report") == len("the report")  # no exception where it was written
    monkeypatch.setattr(sys, "stdout", stream)
    assert process.output_failed(code) == expected  # codes that already say the run ended badly stay
    assert f"ended with exit {code})" in capsys.readouterr().err


def test_a_reader_that_left_is_not_counted(monkeypatch):
    class Gone(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    stream = process.ReaderMayLeave(Gone(), "stdout")
    stream.write("the report")
    monkeypatch.setattr(sys, "stdout", stream)
    assert process.output_failed(1) == 1


@pytest.mark.parametrize(
    "args", [["rules"], ["rules", "--format", "json"], ["report"], ["check", "--no-smoke"]]
)
def test_a_closed_stdout_is_no_reader_not_an_internal_error(args, tmp_path):
    """``torchdoctor rules >&-``: Python starts with ``sys.stdout`` None; it used to be exit 3
    (AttributeError). Now the output goes nowhere, as into a pipe whose reader left, and the exit code is the
    verdict's."""
    env = _env({"TORCHDOCTOR_SYSROOT": str(tmp_path)})
    done = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "doctor", *args],
                          stderr=subprocess.PIPE, env=env, timeout=120, cwd=tmp_path)
    err = done.stderr.decode(errors="replace")
    assert done.returncode in (0, 1), err
    assert "internal error" not in err and "Traceback" not in err, err
