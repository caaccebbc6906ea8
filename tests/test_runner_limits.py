"""doctor/runner.py's limits with real processes: the bytes of output read, the time, the child's own end when
torchdoctor is SIGKILLed (PR_SET_PDEATHSIG, and alarm() where that is missing), descendants in sessions of
their own (found by the owner mark), and doctor/app/process.py's guard (SIGTERM acts like Ctrl-C).
The orphan scenarios through the real CLI: tests/hostile/test_orphans.py."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from doctor import runner
from doctor.runner import MAX_TIMEOUT, limit_seconds, run

REPO = Path(__file__).resolve().parents[1]
POSIX = pytest.mark.skipif(os.name != "posix", reason="process groups, signals and alarm() are POSIX")


def _gone(pid: int, within: float) -> float | None:
    """Seconds until ``pid`` is gone (a zombie counts as gone), or None when it is still there."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return time.monotonic() - start
        except psutil.NoSuchProcess:
            return time.monotonic() - start
        time.sleep(0.05)
    return None


def _parent(tmp_path: Path, body: str) -> subprocess.Popen:
    """A Python process that imports the runner and runs ``body`` (a stand-in for torchdoctor)."""
    script = tmp_path / "parent.py"
    head = f"import sys, time\nsys.path.insert(0, {str(REPO)!r})\nfrom doctor import runner\n"
    script.write_text(head + textwrap.dedent(body))
    return subprocess.Popen([sys.executable, str(script)], start_new_session=True)


def _wait_for_pid(path: Path, timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def _kill(pid: int | None) -> None:
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


SLEEPER = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"


def test_a_flood_is_cut_at_the_output_limit():
    flood = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"]
    start = time.perf_counter()
    res = run(flood, timeout=30, max_output=1 << 20)
    assert time.perf_counter() - start < 10
    assert res.overflowed and not res.ok and not res.timed_out and res.signal is None
    assert len(res.stdout) == 1 << 20 and "printed more than" in res.describe()



def test_a_streamed_flood_is_stopped_at_its_limit(monkeypatch):
    monkeypatch.setattr(runner, "MAX_STREAM", 1 << 20)
    flood = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 1000 + '\\n')"]
    start = time.perf_counter()
    seen = []
    res = runner.stream_run(flood, 30, seen.append)
    assert time.perf_counter() - start < 10 and not res.timed_out and res.returncode is not None
    assert 0 < len(seen) <= (1 << 20) // 1001 and set(seen) == {"x" * 1000}


def test_streamed_lines_as_they_come_long_ones_in_pieces_and_the_last_without_a_newline():
    text = "a\nb\r\n\n" + "y" * (runner.MAX_LINE + 10) + "\nlast"
    seen = []
    argv = [sys.executable, "-c", f"import sys; sys.stdout.write({text!r})"]
    res = runner.stream_run(argv, 30, seen.append)
    assert seen == ["a", "b", "", "y" * runner.MAX_LINE, "y" * 10, "last"] and res.returncode == 0


@pytest.mark.parametrize("value,expected", [(math.nan, 0.1), (-1, 0.1), (0, 0.1), (math.inf, MAX_TIMEOUT),
                                            (1e308, MAX_TIMEOUT), (5, 5.0)])
def test_time_limits_are_always_usable(value, expected):
    assert limit_seconds(value) == expected


@POSIX
def test_children_carry_the_owner_mark_and_their_own_group():
    res = run([sys.executable, "-c", "import os; print(os.environ['TORCHDOCTOR_OWNER'], os.getpgid(0) == "
        "os.getpid())"])
    assert res.ok and res.stdout.split() == [str(os.getpid()), "True"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_ends_the_moment_its_parent_is_killed(tmp_path):
    pid_file = tmp_path / "child.pid"
    parent = _parent(tmp_path, f"runner.run([sys.executable, '-c', {SLEEPER!r}, {str(pid_file)!r}], "
        "timeout=60)\n")
    child = None
    try:
        child = _wait_for_pid(pid_file)
        parent.kill()
        took = _gone(child, 5)
        assert took is not None and took < 2, "the child outlived its SIGKILLed parent"
    finally:
        parent.kill()
        _kill(child)


@POSIX
def test_without_pdeathsig_a_child_ends_at_its_own_limit(tmp_path):
    """macOS and others have no PR_SET_PDEATHSIG: alarm(), set between fork and exec, ends the child a few
    seconds past its limit even when torchdoctor was SIGKILLed (and even inside a hung import)."""
    pid_file = tmp_path / "child.pid"
    parent = _parent(tmp_path, f"runner._PRCTL = None\nrunner.run([sys.executable, '-c', {SLEEPER!r}, "
                               f"{str(pid_file)!r}], timeout=1)\n")
    child = None
    try:
        child = _wait_for_pid(pid_file)
        parent.kill()
        took = _gone(child, 1 + runner.HARD_GRACE_S + 5)
        assert took is not None, "the child ran past its own limit"
        assert took >= 1.5, "it died with its parent, not at its own limit (ceil(1 s) + HARD_GRACE_S)"
    finally:
        parent.kill()
        _kill(child)


@POSIX
def test_descendants_in_sessions_of_their_own_are_found_by_the_owner_mark(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    starter = (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', {SLEEPER!r}, {str(pid_file)!r}], start_new_session=True)\n"
    )
    assert run([sys.executable, "-c", starter], timeout=30).ok
    grandchild = _wait_for_pid(pid_file)
    try:
        assert psutil.Process(grandchild).environ().get(runner.OWNER_VAR) == str(os.getpid())
        assert runner.kill_marked() >= 1
        assert _gone(grandchild, 5) is not None
    finally:
        _kill(grandchild)


@POSIX
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_the_guard_turns_a_signal_into_an_interrupt_and_ends_the_child(tmp_path, sig):
    pid_file = tmp_path / "child.pid"
    out = tmp_path / "out.txt"
    parent = _parent(tmp_path, f"""
        from doctor.app.process import guard
        try:
            with guard():
                runner.run([sys.executable, '-c', {SLEEPER!r}, {str(pid_file)!r}], timeout=60)
        except KeyboardInterrupt as exc:
            open({str(out)!r}, 'w').write(type(exc).__name__ + ' ' + str(getattr(exc, 'signum', '')))
        """)
    child = None
    try:
        child = _wait_for_pid(pid_file)
        parent.send_signal(getattr(signal, sig))
        parent.wait(10)
        assert out.read_text() == f"Interrupted {int(getattr(signal, sig))}"
        assert _gone(child, 2) is not None
    finally:
        parent.kill()
        _kill(child)


@POSIX
def test_signals_held_are_delivered_when_the_block_ends(tmp_path):
    out = tmp_path / "out.txt"
    parent = _parent(tmp_path, f"""
        import os, signal
        from doctor.app.process import guard
        steps = []
        try:
            with guard():
                with runner.signals_held():
                    os.kill(os.getpid(), signal.SIGTERM)
                    time.sleep(0.2)
                    steps.append("block finished")
                steps.append("not reached")
        except KeyboardInterrupt:
            steps.append("interrupted after the block")
        open({str(out)!r}, 'w').write(", ".join(steps))
        """)
    parent.wait(20)
    assert out.read_text() == "block finished, interrupted after the block"
