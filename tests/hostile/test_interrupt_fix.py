"""Interrupting `torchdoctor fix --yes` while real pip changes a real venv: nothing broken, nothing left
behind. The machine is fixworld.py's: torch 2.6.0+cu126 (with torchvision 0.21.0 and torchaudio 2.6.0) on
an RTX 5090, fixed to 2.7.1+cu128 from a local index whose torch wheel holds 200 MB in 5,000 files, so
that pip spends seconds writing it.

Each run sends one signal at one moment, recognised in pip's streamed output:

- ``download``: pip is reading and hashing the big wheel ("Processing .../torch-2.7.1+cu128...");
- ``uninstalled``: just after "Successfully uninstalled torch-2.6.0+cu126": the old torch is gone, the new
  one is being written;
- ``installing``: 1 s later, the new torch half written.

Signals: SIGINT to torchdoctor's process group (what Ctrl-C in a terminal does), SIGTERM and SIGHUP to
torchdoctor alone, SIGTERM to its process group (`kill -TERM -PGID`, a CI job cancelled). pip runs in a
session of its own, so it gets only what torchdoctor passes on.

Afterwards: torchdoctor has exited; 2 s later no process of the run is alive and the venv did not change
after the exit; and the venv is either untouched, or fully on the new build, or the restore command
torchdoctor printed (at the interruption, else in its plan) brings the old builds back; in every case
`pip check` is clean.
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from fixworld import (
    NEW,
    OLD,
    cli_env,
    fresh_venv,
    get_fix_world,
    has_builds,
    installed,
    leftovers,
    pip_check,
    pip_env,
)
from hostile import Launched, base_env, cli_argv, describe, kill_run, live_processes, params_of

pytestmark = [pytest.mark.hostile, pytest.mark.slow]

SETTLE = 2.0
MOMENTS = {
    # name: (text that marks it in pip's output, seconds to wait after it)
    "download": ("Processing ", "torch-2.7.1", 0.0),
    "uninstalled": ("Successfully uninstalled torch-2.6.0", "", 0.0),
    "installing": ("Successfully uninstalled torch-2.6.0", "", 1.0),
}
SIGNALS = {
    "SIGINT": (signal.SIGINT, True),
    "SIGTERM": (signal.SIGTERM, False),
    "SIGHUP": (signal.SIGHUP, False),
    "SIGTERM-group": (signal.SIGTERM, True),
}
XFAIL: dict[tuple[str, str], str] = {}  # (signal, moment) -> what happens today, for a run that fails


@dataclass
class Run:
    reached: bool = False
    returncode: int | None = None
    exited_after: float | None = None
    alive_after_exit: list[str] = field(default_factory=list)
    changed_after_exit: bool = False
    state: str = ""  # untouched | new | restored | broken
    detail: str = ""
    restore_command: str = ""
    tilde: list[str] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""


def fix_world(jobs):
    """fixworld.py's machine, built once (a job of its own, so the runs that need it queue behind it)."""
    world = jobs.result("fix-world", "setup", get_fix_world)
    if isinstance(world, str):
        pytest.skip(world)
    return world


def fix_args(world, venv: Path, index: Path, *more: str) -> list[str]:
    return [
        "fix",
        "--yes",
        "--no-smoke",
        "--python",
        str(venv / "bin" / "python"),
        "--index-url-base",
        index.as_uri(),
        *more,
    ]


def restore_command(out: str, err: str) -> str:
    """The restore command torchdoctor printed: the last one on stderr (at the interruption), else the last
    on stdout (in its plan). Recognised by what it runs (`pip install -r <restore file>`), not by wording."""
    for text in (err, out):
        found = [line.strip() for line in text.splitlines() if " -m pip install -r " in line]
        if found:
            return found[-1].removeprefix("$ ")
    return ""


def run_restore(command: str) -> str:
    """Run 'a && b' without a shell; '' when every part exited 0, else what failed."""
    part: list[str] = []
    parts = [part]
    for word in shlex.split(command):
        if word == "&&":
            part = []
            parts.append(part)
        else:
            part.append(word)
    for argv in parts:
        done = subprocess.run(argv, capture_output=True, text=True, env=pip_env(), timeout=300)
        if done.returncode != 0:
            return f"`{' '.join(argv)[:120]}` exited {done.returncode}: {(done.stdout + done.stderr)[-600:]}"
    return ""


def judge(venv: Path, run: Run) -> None:
    state = installed(venv)
    code, text = pip_check(venv)
    run.tilde = leftovers(venv)
    if code == 0 and has_builds(state, OLD):
        run.state = "untouched"
    elif code == 0 and has_builds(state, NEW):
        run.state = "new"
    else:
        run.detail = f"after the run: {state}; pip check: {text}; leftovers {run.tilde}"
        if not run.restore_command:
            run.state = "broken"
            return
        failed = run_restore(run.restore_command)
        state, (code, text) = installed(venv), pip_check(venv)
        if not failed and code == 0 and has_builds(state, OLD):
            run.state = "restored"
        else:
            run.state = "broken"
            run.detail += (f"; the restore command {'failed: ' + failed if failed else 'ran'}; then {state}; "
                f"pip check: {text}")


def interrupt(world, root: Path, sig_name: str, moment: str) -> Run:
    root.mkdir(parents=True)
    venv = fresh_venv(world, root / "venv")
    needle, also, delay = MOMENTS[moment]
    sig, group = SIGNALS[sig_name]
    run = Run()
    with Launched(
        fix_args(world, venv, world.big), cli_env(world, base_env(None)), cwd=root, needles=(str(venv),)
    ) as cli:
        run.reached = cli.wait_for(
            lambda: any(needle in line and also in line for line in cli.out().splitlines()),
            timeout=120,
            poll=0.01,
        )
        if run.reached:
            time.sleep(delay)
            sent = time.monotonic()
            cli.signal(sig, group=group)
            run.returncode = cli.wait_exit(30)
            run.exited_after = time.monotonic() - sent
            at_exit = installed(venv)
            time.sleep(SETTLE)
            run.alive_after_exit = [describe(p) for p in cli.others()]
            run.changed_after_exit = installed(venv) != at_exit
        else:
            run.returncode = cli.wait_exit(120)
        run.stdout, run.stderr = cli.out(), cli.err()
    run.restore_command = restore_command(run.stdout, run.stderr)
    judge(venv, run)
    return run


COMBOS = [(s, m) for m in MOMENTS for s in SIGNALS]


def run_root(jobs, name: str) -> Path:
    root = jobs.tmp.getbasetemp() / "hostile-interrupt"
    root.mkdir(exist_ok=True)
    return root / name


def job(jobs, key):
    """(key, pool, function) of one run of this module: an interruption, two-at-once, or a restore file."""
    if isinstance(key, tuple):
        return key, "cpu", lambda: interrupt(fix_world(jobs), run_root(jobs, "-".join(key)), *key)
    if key == "two-at-once":
        return key, "cpu", lambda: two_at_once(fix_world(jobs), run_root(jobs, key))
    if key.startswith("reader-leaves-"):
        return (
            key,
            "cpu",
            lambda: reader_leaves(fix_world(jobs), run_root(jobs, key), key.removeprefix("reader-leaves-")),
        )
    kind = key.removeprefix("restore-file-")
    return key, "cpu", lambda: restore_file_run(fix_world(jobs), run_root(jobs, key), kind)


def hostile_jobs(jobs, items) -> None:
    """conftest.py's scheduler: the fix world first, then every selected run."""
    keys = []
    for item in items:
        params = params_of(item)
        if "sig_name" in params:
            keys.append((params["sig_name"], params["moment"]))
        elif "kind" in params:
            keys.append(f"restore-file-{params['kind']}")
        elif item.name.startswith("test_two_fixes"):
            keys.append("two-at-once")
        elif item.name.startswith("test_a_reader_that_leaves"):
            keys.append(f"reader-leaves-{params['moment']}")
    if keys:
        jobs.submit("fix-world", "setup", get_fix_world)
    for key in keys:
        jobs.submit(*job(jobs, key))


@pytest.mark.parametrize(
    "sig_name,moment",
    [
        pytest.param(
            s,
            m,
            id=f"{s}-{m}",
            marks=[pytest.mark.xfail(strict=True, reason=XFAIL[(s, m)])] if (s, m) in XFAIL else [],
        )
        for s, m in COMBOS
    ],
)
def test_interrupted_fix_leaves_a_whole_environment(sig_name, moment, jobs):
    run = jobs.result(*job(jobs, (sig_name, moment)))
    tail = f"\n--- stdout tail:\n{run.stdout[-1500:]}\n--- stderr:\n{run.stderr[-1500:]}"
    assert run.reached, f"the moment never came (exit {run.returncode}){tail}"
    assert run.returncode is not None and run.exited_after <= 30, (
        f"torchdoctor still running 30 s after {sig_name}"
    )
    assert not run.alive_after_exit, f"alive {SETTLE:g}s after torchdoctor's exit: {run.alive_after_exit}"
    assert not run.changed_after_exit, "the venv changed after torchdoctor had exited"
    assert run.state in ("untouched", "new", "restored"), f"{run.state}: {run.detail}{tail}"
    if sig_name == "SIGINT":
        assert run.returncode == 130, f"exit {run.returncode}{tail}"
    if run.state == "restored":
        assert "restore" in run.stderr.lower(), (
            f"changed the venv, and said nothing about restoring at the end{tail}"
        )


# --- two fixes at once, and the restore file's name -----------------------------------------------------


def two_at_once(world, root: Path) -> dict:
    """Two `fix --yes` on one venv from one folder, started together (big index: each install takes
    seconds, so they overlap), each with a $HOME and state folder of its own, the second through a symlink
    to the venv (issue 27: the lock was in the user's state folder, keyed on the path)."""
    root.mkdir(parents=True)
    venv = fresh_venv(world, root / "venv")
    (root / "link").symlink_to(venv)
    start = threading.Barrier(2)
    results: list = [None, None]

    def one(i):
        env = cli_env(world, base_env(None))  # its own marker: each run finds (and kills) only its own
        env["HOME"] = env["XDG_STATE_HOME"] = str(root / f"home{i}")
        args = fix_args(world, venv if i == 0 else root / "link", world.big)
        start.wait()
        with Launched(args, env, cwd=root) as cli:
            pips, seen = 0, []
            deadline = time.monotonic() + 120
            while cli.proc.poll() is None and time.monotonic() < deadline:
                # every pip installing into this venv, whichever run started it; a process forked by pip
                # shows pip's command line until it execs (vfork), and is that same pip, not a second one
                both = live_processes(None, tuple(f"{v}/bin/python -m pip install "
                    "torch" for v in (venv, root / "link")))
                pids = {proc.pid for proc in both}
                independent = [proc for proc in both if _parent(proc) not in pids]
                if len(independent) > max(pips, 1):  # what two at once were, should it happen
                    seen = [describe(proc) for proc in both]
                pips = max(pips, len(independent))
                time.sleep(0.05)
            results[i] = (cli.wait_exit(5), cli.out(), cli.err(), pips, seen)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    return {
        "results": results,
        "restore_files": sorted(p.name for p in root.glob("torchdoctor-restore-*.txt")),
        "check": pip_check(venv),
        "state": installed(venv),
    }


def reader_leaves(world, root: Path, moment: str) -> dict:
    """`fix --yes` into a pipe whose reader reads up to ``moment`` in pip's streamed output and then goes
    (`| head`, `| grep -m1`): the rest of the output has nowhere to go while pip is still installing."""
    root.mkdir(parents=True)
    venv = fresh_venv(world, root / "venv")
    needle, also, _delay = MOMENTS[moment]
    err_path = root / "stderr.txt"
    with err_path.open("wb") as err:
        proc = subprocess.Popen(
            cli_argv(fix_args(world, venv, world.big)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            env=cli_env(world, base_env(None)),
            cwd=root,
            start_new_session=True,
        )
        seen, reached = [], False
        try:
            for raw in proc.stdout:
                seen.append(raw.decode("utf-8", "replace"))
                if needle in seen[-1] and also in seen[-1]:
                    reached = True
                    break
            proc.stdout.close()  # the reader goes; pip goes on writing lines
            code = proc.wait(180)
        finally:
            kill_run(proc.pid, None, (str(venv),))
    return {
        "reached": reached,
        "code": code,
        "seen": "".join(seen),
        "stderr": err_path.read_text(errors="replace"),
        "state": installed(venv),
        "check": pip_check(venv),
        "leftovers": leftovers(venv),
    }


def _parent(proc) -> int | None:
    try:
        return proc.ppid()
    except psutil.Error:  # gone since it was listed: it is no one's parent now
        return None


def restore_file_run(world, root: Path, kind: str) -> dict:
    """`fix --yes --restore-file NAME` where NAME is an existing file, or a symlink to one elsewhere."""
    root.mkdir(parents=True)
    venv = fresh_venv(world, root / "venv")
    precious = root / "elsewhere" / "important.txt"
    precious.parent.mkdir()
    precious.write_text("the only copy of something important\n")
    name = "restore.txt"
    if kind == "existing":
        precious = precious.rename(root / "important.txt")
        name = "important.txt"
    else:
        (root / name).symlink_to(precious)
    env = cli_env(world, base_env(None))
    with Launched(
        fix_args(world, venv, world.small, "--restore-file", name), env, cwd=root, needles=(str(venv),)
    ) as cli:
        code = cli.wait_exit(120)
        return {"code": code, "out": cli.out(), "err": cli.err(), "precious": precious.read_text()}


def test_two_fixes_on_one_venv_take_turns(jobs):
    """Never two pips installing into one venv at once, never one restore file for two runs, and a whole
    environment at the end: one run carries out the plan, the other waits, is refused, or finds it done."""
    two = jobs.result(*job(jobs, "two-at-once"))
    results = [r for r in two["results"] if r]
    assert len(results) == 2, two
    most_at_once = max(r[3] for r in results)
    named = [set(re.findall(r"torchdoctor-restore-[^\s/]+\.txt", r[1])) for r in results]
    shared = named[0] & named[1]
    assert most_at_once <= 1 and not shared, (
        f"{most_at_once} pips installed into the venv at once; restore file names used by both runs: "
        f"{sorted(shared)}; exits {[r[0] for r in results]}; seen at once: {[r[4] for r in results]}; "
        f"stderr tails: {[r[2][-600:] for r in results]}"
    )
    assert two["check"][0] == 0 and has_builds(two["state"], NEW), two


@pytest.mark.parametrize("moment", ["download", "uninstalled"])
def test_a_reader_that_leaves_mid_install_leaves_a_whole_environment(moment, jobs):
    """The output's reader going away is no interruption: the fix carries on as it would with `> /dev/null`
    (0.1.0 stopped pip half-way with nothing restored: torch 2.7.1 beside torchaudio 2.6.0, exit 1)."""
    run = jobs.result(*job(jobs, f"reader-leaves-{moment}"))
    tail = f"\n--- stdout until the reader left:\n{run['seen'][-1500:]}\n--- stderr:\n{run['stderr'][-1500:]}"
    assert run["reached"], f"the moment never came (exit {run['code']}){tail}"
    assert run["code"] == 0, f"exit {run['code']}{tail}"
    assert has_builds(run["state"], NEW) and run["check"][0] == 0 and not run["leftovers"], (
        f"{run['state']}; pip check {run['check']}; leftovers {run['leftovers']}{tail}"
    )
    assert "Traceback" not in run["stderr"] and "BrokenPipe" not in run["stderr"], tail


@pytest.mark.parametrize("kind", ["existing", "symlink"])
def test_restore_file_never_overwrites_another_file(kind, jobs):
    """An existing --restore-file is never overwritten, and never written through a symlink."""
    run = jobs.result(*job(jobs, f"restore-file-{kind}"))
    assert run["precious"] == "the only copy of something important\n", (
        f"--restore-file {'overwrote an existing file' if kind == 'existing' else 'wrote through a symlink'} "
        f"(exit {run['code']})"
    )
    assert run["code"] in (0, 2, 5, 6), run["out"] + run["err"]
