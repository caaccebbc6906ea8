"""doctor.runner: run and stream_run with real child processes, also where the platform lacks
process groups (Windows has no ``os.killpg`` and no ``signal.SIGKILL``; simulated here)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from doctor import runner
from doctor.fix import run as fixer
from doctor.runner import run, stream_run

SLEEP = [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"]
DEAF = [  # ignores SIGINT: only the kill after the grace period stops it
    sys.executable,
    "-c",
    "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('started', flush=True); "
    "time.sleep(60)",
]
FAST = [sys.executable, "-c", "print('one'); print('two')"]


@pytest.fixture(params=["posix", "no-killpg", "windows-like"])
def platform(request, monkeypatch):
    """As here; without ``os.killpg``; and also without ``signal.SIGKILL``, where ``Popen.kill`` is
    TerminateProcess (emulated with SIGTERM: POSIX's own ``Popen.kill`` needs SIGKILL)."""
    if request.param in ("no-killpg", "windows-like"):
        monkeypatch.delattr(os, "killpg", raising=False)
    if request.param == "windows-like":
        monkeypatch.setattr(subprocess.Popen, "kill", subprocess.Popen.terminate)
        monkeypatch.delattr(signal, "SIGKILL", raising=False)
    return request.param


def test_stream_run_kills_a_hung_step_at_the_timeout(platform):
    lines = []
    start = time.perf_counter()
    res = stream_run(SLEEP, 1.0, lines.append, grace=2.0)
    assert time.perf_counter() - start < 10
    assert res.timed_out and res.returncode is None and not res.ok
    assert lines[0] == "started" and "timed out" in res.describe()


def test_stream_run_kills_a_step_that_ignores_the_interrupt_after_the_grace(platform):
    start = time.perf_counter()
    res = stream_run(DEAF, 1.0, lambda line: None, grace=0.5)
    assert time.perf_counter() - start < 10
    assert res.timed_out


def test_stream_run_a_fast_step_is_not_reported_timed_out(platform):
    lines = []
    res = stream_run(FAST, 5.0, lines.append)
    assert res.ok and not res.timed_out and lines == ["one", "two"] and res.stdout == "one\ntwo"
    time.sleep(0.1)  # the cancelled timer must not fire later either
    assert not res.timed_out


def test_stream_run_interrupt_stops_the_child_and_is_passed_on(platform):
    def on_line(line):
        raise KeyboardInterrupt  # as if the user pressed Ctrl-C while the step runs

    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        stream_run(SLEEP, 30.0, on_line, grace=2.0)
    assert time.perf_counter() - start < 10


def test_stream_run_missing_program_and_exit_codes():
    res = stream_run(["/nonexistent/torchdoctor-test"], 5.0, lambda line: None)
    assert res.not_found and not res.ok
    res = stream_run([sys.executable, "-c", "import sys; print('x'); sys.exit(3)"], 5.0, lambda line: None)
    assert res.returncode == 3 and res.stdout == "x"


def test_run_times_out_without_process_groups_too(platform):
    res = run(SLEEP, timeout=1.0)
    assert res.timed_out and res.stdout.startswith("started")


def test_children_get_a_process_group_of_their_own(monkeypatch):
    assert runner._new_group() == {"start_new_session": True} or os.name == "nt"
    monkeypatch.setattr(os, "name", "nt")
    flags = runner._new_group()
    assert flags == {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0x200)}


def test_fixer_uses_the_runners_stream_run():
    assert fixer.stream_run is stream_run and fixer.Machine().stream is stream_run
