"""doctor/inputs/halves.py: the second half read in a forked child gives the very list one process gives,
whatever happens to the child; it forks only where that is safe; Ctrl-C leaves no child behind.

The forking cases run in a fresh interpreter: earlier tests may leave threads behind in this one, where
halves rightly refuses to fork (and Python 3.12+ warns when a threaded process does)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from doctor.inputs import halves

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
REPO = Path(__file__).resolve().parents[1]

PRELUDE = f"""
import json, os, signal, sys
sys.path[:0] = [{str(REPO)!r}, {str(REPO / "benchmarks")!r}]
from doctor.inputs import halves
halves.MIN_ITEMS = 2
halves.usable_cpus = lambda: 2
forks = []
real_fork = os.fork
def counting_fork():
    forks.append(1)
    return real_fork()
halves.os.fork = counting_fork
"""


def in_fresh_python(body: str) -> dict:
    """Run PRELUDE + ``body`` (which prints one JSON line last) in a new single-threaded interpreter."""
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", PRELUDE + textwrap.dedent(body)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_halves_give_the_same_list_and_the_child_did_its_half():
    got = in_fresh_python("""
        out = halves.map_in_halves(lambda x: (x * x, os.getpid()), list(range(101)))
        print(json.dumps({"out": out, "me": os.getpid(), "forks": len(forks)}))
    """)
    assert [value for value, _ in got["out"]] == [x * x for x in range(101)]
    pids = [pid for _, pid in got["out"]]
    assert set(pids[:50]) == {got["me"]} and got["me"] not in pids[50:]  # a real second process
    assert got["forks"] == 1


def test_a_child_that_dies_leaves_its_half_to_the_parent():
    got = in_fresh_python("""
        parent = os.getpid()
        def dies_in_the_child(x):
            if os.getpid() != parent:
                os.kill(os.getpid(), signal.SIGKILL)
            return x + 1
        print(json.dumps({"out": halves.map_in_halves(dies_in_the_child, list(range(10))), "forks": len(forks)}))
    """)
    assert got == {"out": list(range(1, 11)), "forks": 1}


def test_no_fork_with_threads_running_or_one_cpu(monkeypatch):
    def no_fork():
        raise AssertionError("forked")

    monkeypatch.setattr(halves, "MIN_ITEMS", 2)
    monkeypatch.setattr(halves.os, "fork", no_fork)
    monkeypatch.setattr(halves, "usable_cpus", lambda: 2)
    monkeypatch.setattr(halves.threading, "active_count", lambda: 2)
    assert halves.map_in_halves(lambda x: -x, [1, 2, 3]) == [-1, -2, -3]
    monkeypatch.setattr(halves.threading, "active_count", lambda: 1)
    monkeypatch.setattr(halves, "usable_cpus", lambda: 1)
    assert halves.map_in_halves(lambda x: -x, [1, 2, 3]) == [-1, -2, -3]
    monkeypatch.setattr(halves, "usable_cpus", lambda: 2)
    monkeypatch.setattr(halves, "MIN_ITEMS", 4)
    assert halves.map_in_halves(lambda x: -x, [1, 2, 3]) == [-1, -2, -3]  # too few to pay


def test_fleet_summary_is_the_same_read_in_halves(tmp_path):
    got = in_fresh_python(f"""
        from fleet_bench import write_fleet
        from doctor.app.fleet import summarize_paths, summary_to_dict
        folder = {str(tmp_path)!r}
        write_fleet(folder, 300)
        open(os.path.join(folder, "broken.json"), "w").write("{{not json")
        os.mkfifo(os.path.join(folder, "pipe.json"))
        halves.MIN_ITEMS = 10**9
        alone = summary_to_dict(summarize_paths([folder]))
        assert not forks
        halves.MIN_ITEMS = 2
        split = summary_to_dict(summarize_paths([folder]))
        print(json.dumps({{"same": split == alone, "forks": len(forks), "nodes": alone["nodes"],
                          "unreadable": len(alone["unreadable"])}}))
    """)
    # ours two and the fleet's truncated one are unreadable either way
    assert got == {"same": True, "forks": 1, "nodes": 300, "unreadable": 3}


def test_ctrl_c_leaves_no_child_behind(tmp_path):
    pids = tmp_path / "pids"
    script = PRELUDE + textwrap.dedent(f"""
        import time
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
