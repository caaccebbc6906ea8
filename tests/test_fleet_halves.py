"""doctor/inputs/halves.py: the second half read in a forked child gives the very list one process gives,
whatever happens to the child; it forks only where that is safe; Ctrl-C leaves no child behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from doctor.app.fleet import summarize_paths, summary_to_dict
from doctor.inputs import halves

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def split_small(monkeypatch):
    monkeypatch.setattr(halves, "MIN_ITEMS", 2)
    monkeypatch.setattr(halves, "usable_cpus", lambda: 2)
    # Earlier tests may leave daemon threads behind (a timed-out probe's); the work forked here takes no lock.
    monkeypatch.setattr(halves.threading, "active_count", lambda: 1)


def square_with_pid(x):
    return (x * x, os.getpid())


def test_the_halves_give_the_same_list_and_the_child_did_its_half(split_small):
    got = halves.map_in_halves(square_with_pid, list(range(101)))
    assert [value for value, _ in got] == [x * x for x in range(101)]
    pids = [pid for _, pid in got]
    assert set(pids[:50]) == {os.getpid()} and os.getpid() not in pids[50:]  # a real second process


def test_a_child_that_dies_leaves_its_half_to_the_parent(split_small):
    parent = os.getpid()

    def dies_in_the_child(x):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return x + 1

    assert halves.map_in_halves(dies_in_the_child, list(range(10))) == list(range(1, 11))


def test_no_fork_with_threads_running_or_one_cpu(split_small, monkeypatch):
    def no_fork():
        raise AssertionError("forked")

    monkeypatch.setattr(halves.os, "fork", no_fork)
    monkeypatch.setattr(halves.threading, "active_count", lambda: 2)
    assert halves.map_in_halves(lambda x: -x, [1, 2, 3]) == [-1, -2, -3]
    monkeypatch.setattr(halves.threading, "active_count", lambda: 1)
    monkeypatch.setattr(halves, "usable_cpus", lambda: 1)
    assert halves.map_in_halves(lambda x: -x, [1, 2, 3]) == [-1, -2, -3]


def test_fleet_summary_is_the_same_read_in_halves(tmp_path, monkeypatch):
    sys.path.insert(0, str(REPO / "benchmarks"))
    from fleet_bench import write_fleet

    write_fleet(str(tmp_path), 300)
    (tmp_path / "broken.json").write_text("{not json")
    os.mkfifo(tmp_path / "pipe.json")
    monkeypatch.setattr(halves, "MIN_ITEMS", 10**9)
    alone = summary_to_dict(summarize_paths([str(tmp_path)]))
    monkeypatch.setattr(halves, "MIN_ITEMS", 2)
    monkeypatch.setattr(halves, "usable_cpus", lambda: 2)
    monkeypatch.setattr(halves.threading, "active_count", lambda: 1)
    forked = []
    real_fork = halves.os.fork
    monkeypatch.setattr(halves.os, "fork", lambda: forked.append(1) or real_fork())
    split = summary_to_dict(summarize_paths([str(tmp_path)]))
    assert forked  # the second half was read in a child
    assert split == alone
    assert alone["nodes"] == 300 and len(alone["unreadable"]) == 3  # ours two and the fleet's truncated one


def test_ctrl_c_leaves_no_child_behind(tmp_path):
    pids = tmp_path / "pids"
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(REPO)!r})
        from doctor.inputs import halves
        halves.MIN_ITEMS = 2
        halves.usable_cpus = lambda: 2
        def slow(x):
            if x in (0, 1000):
                with open({str(pids)!r}, "a") as f:
                    f.write(f"{{os.getpid()}}\\n")
            time.sleep(0.01)
            return x
        print("sum", sum(halves.map_in_halves(slow, list(range(2000)))))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not pids.exists() or len(pids.read_text().split()) < 2):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and b"KeyboardInterrupt" in err
    child = next(int(p) for p in pids.read_text().split() if int(p) != proc.pid)
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)
