"""How fast torchdoctor is next to what users run, measured as whole processes side by side.

    python benchmarks/bench.py [--runs N] [--fleet N] [--target PYTHON]

One warm-up round (thrown away), then N interleaved rounds: one run of each command per round, so that
background load hits every command alike and the ratios stay fair. Prints per command the median, min and
max wall time and the peak RSS (os.wait4: the largest process of the tree), then each target with met / NOT
met. On demand only, not part of CI: it exits 0 whatever the numbers are, 1 only when a command fails.

The target environment is a venv with the real CPU torch wheel, built as tests/realtorch.py builds it (and
reused from the same folder); without the wheel, the rows that need a real torch are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "benchmarks")]

SMOKE_CHILD = REPO / "doctor" / "target" / "smoke.py"
OK_CODES = (0, 1)  # torchdoctor: healthy, or error findings; both are a finished run


class CommandFailed(Exception):
    pass


@dataclass
class Command:
    key: str
    label: str
    argv: list[str]
    ok_codes: tuple[int, ...] = (0,)
    seconds: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)

    def median(self) -> float:
        return statistics.median(self.seconds)


def run_once(cmd: Command, env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one whole-process run."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd.argv, stdout=subprocess.DEVNULL, stderr=err, env=env,
                                cwd=tempfile.gettempdir())
        _, status, usage = os.wait4(proc.pid, 0)  # also gives the child's resource usage
        seconds = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if code not in cmd.ok_codes:
            err.seek(0)
            tail = err.read().decode(errors="replace").strip()[-800:]
            raise CommandFailed(f"{cmd.label}: exit {code}: {' '.join(cmd.argv)}\n{tail}")
    return seconds, usage.ru_maxrss


def measure(commands: list[Command], rounds: int, env: dict[str, str]) -> None:
    for round_no in range(rounds + 1):
        for cmd in commands:
            seconds, rss = run_once(cmd, env)
            if round_no:  # round 0 is the warm-up
                cmd.seconds.append(seconds)
                cmd.rss_kib.append(rss)
        print(f"  round {round_no}/{rounds}{' (warm-up)' if round_no == 0 else ''} done", file=sys.stderr)


# --- the environments checked -----------------------------------------------------------------------------


def real_torch_python() -> tuple[str | None, str]:
    """The real-CPU-torch venv of tests/realtorch.py (built there once: about a minute), or (None, why)."""
    import pytest
    from realtorch import real_cpu_torch_python

    try:
        return str(real_cpu_torch_python()), "the venv of tests/realtorch.py"
    except pytest.skip.Exception as exc:
        return None, str(exc)


def venv_with_distributions(root: Path, count: int) -> str:
    """A venv holding a (metadata-only) CPU torch and ``count`` distributions in all."""
    from fakeenv import add_dist_info, make_fake_env, site_packages

    python = make_fake_env(root, torch="2.13.0+cpu", cuda=None)
    site = site_packages(root)
    for i in range(count - 1):
        files = {f"package_{i:04d}/__init__.py": ""}
        add_dist_info(site, f"package-{i:04d}", f"1.{i % 50}.0", ["numpy"], "pip", files)
    return str(python)


def fleet_seconds(td: list[str], nodes: int, rounds: int, env: dict[str, str]) -> float:
    """Median wall seconds of `torchdoctor fleet summarize DIR --json` over ``nodes`` generated reports."""
    from fleet_bench import write_fleet

    folder = tempfile.mkdtemp(prefix="torchdoctor-bench-fleet-")
    try:
        write_fleet(folder, nodes)
        cmd = Command("fleet", "fleet summarize", td + ["fleet", "summarize", folder, "--json"], OK_CODES)
        measure([cmd], rounds, env)
        return cmd.median()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# The part of a check no ordering can hide: a child of torchdoctor's python imports every module that
# `check --no-smoke --json` imported (read from a real run just before), builds the command line and loads
# the table, and does nothing else: no probe, no child, no rule, no output.
_MODULES_OF_A_CHECK = """import io, json, sys, contextlib
sys.argv = ["torchdoctor"] + sys.argv[1:]
from doctor.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(sys.argv[1:])
print(json.dumps(sorted(m for m in sys.modules if m != "__main__")))
"""
_IMPORTS_ONLY = """import importlib, json, sys
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except Exception:
        pass
import typer.main
from doctor.cli.commands import app
from doctor.table.load import load_table
typer.main.get_command(app)
load_table(None)
"""


def modules_of_a_check(check: list[str], env: dict[str, str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _MODULES_OF_A_CHECK, *check], env=env, capture_output=True,
                          text=True, timeout=120)
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- the run ----------------------------------------------------------------------------------------------

# (what, command, reference, limit): the command's median at most ``limit`` times the reference's.
TARGETS = [
    ("check --no-smoke --json / collect_env", "check", "collect_env", 0.08),
    ("check --no-smoke --json / import typer", "check", "typer", 3.0),
    ("--help / import typer", "help", "typer", 1.5),
    ("check of a venv with 3,000 distributions / with 10", "many", "few", 1.5),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="measured rounds after the warm-up (default 7)")
    parser.add_argument("--fleet", type=int, default=10_000, help="reports for fleet summarize (10,000)")
    parser.add_argument("--target", help="the target python (default: the real-CPU-torch venv)")
    args = parser.parse_args(argv)

    target, how = (args.target, "--target") if args.target else real_torch_python()
    drop = ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    # An installed torchdoctor has its .pyc files: a checkout's are kept outside the tree, not recompiled.
    env.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "torchdoctor-bench-pycache"))
    script = Path(sys.executable).with_name("torchdoctor")
    td = [str(script)] if script.exists() else [sys.executable, "-m", "doctor"]
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"torchdoctor: {' '.join(td)} (Python {sys.version.split()[0]})")
    print(f"target: {target or 'the default python'} ({how}); {args.runs} rounds after 1 warm-up")

    scratch = Path(tempfile.mkdtemp(prefix="torchdoctor-bench-"))
    try:
        few = venv_with_distributions(scratch / "few", 10)
        many = venv_with_distributions(scratch / "many", 3000)
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        print(f"bench: could not make the venvs to check: {exc}", file=sys.stderr)
        return 1
    check = td + ["check", "--no-smoke", "--json"]
    modules = modules_of_a_check(["check", "--no-smoke", "--json"] + (["--python", target] if target else []),
                                 env)
    commands = [
        Command("typer", "python -c 'import typer' (torchdoctor's python)",
                [sys.executable, "-c", "import typer"]),
        Command("help", "torchdoctor --help", td + ["--help"]),
        Command("imports", f"imports of a check alone ({len(modules)} modules) + the table",
                [sys.executable, "-c", _IMPORTS_ONLY, json.dumps(modules)]),
        Command("check", "torchdoctor check --no-smoke --json",
                check + (["--python", target] if target else []), OK_CODES),
        Command("few", "  same, a venv with 10 distributions", check + ["--python", few], OK_CODES),
        Command("many", "  same, a venv with 3,000 distributions", check + ["--python", many], OK_CODES),
    ]
    if target:
        commands += [
            Command("collect_env", "python -m torch.utils.collect_env",
                    [target, "-m", "torch.utils.collect_env"]),
            Command("smoke", "torchdoctor check --json (smoke test)",
                    td + ["check", "--json", "--python", target], OK_CODES),
            Command("bare", "  import torch + the same workload, no torchdoctor",
                    [target, str(SMOKE_CHILD), "--mode", "smoke", "--device", "all", "--budget", "54"]),
        ]
    try:
        measure(commands, args.runs, env)
        fleet = fleet_seconds(td, args.fleet, 3, env)
    except CommandFailed as exc:
        print(f"bench: a command failed: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"\n{'command':58} {'median':>9} {'min':>9} {'max':>9} {'peak RSS':>10}")
    for c in commands:
        print(f"{c.label:58} {c.median() * 1000:6.0f} ms {min(c.seconds) * 1000:6.0f} ms "
              f"{max(c.seconds) * 1000:6.0f} ms {max(c.rss_kib) / 1024:7.1f} MB")

    by = {c.key: c for c in commands}
    print("\ntargets (ratios of medians from the same rounds):")
    for what, key, reference, limit in TARGETS:
        if key in by and reference in by:
            ratio = by[key].median() / by[reference].median()
            shown, goal = (f"{ratio:.1%}", f"{limit:.0%}") if limit < 1 else (f"{ratio:.2f}x", f"{limit:g}x")
            print(f"  {what + ' = ' + shown:66} target <= {goal:5} {'met' if ratio <= limit else 'NOT met'}")
    print("measured, no target:")
    imports = by["imports"].median()
    if target:
        share = imports / by["collect_env"].median()
        print(f"  imports of a check alone + the table / collect_env = {share:.1%}")
    print(f"  imports of a check alone + the table / import typer = {imports / by['typer'].median():.2f}x")
    if target:
        print(f"  check with the smoke test / bare import torch + workload = "
              f"{by['smoke'].median() / by['bare'].median():.2f}x")
    print(f"  fleet summarize of {args.fleet} reports: {fleet:.2f} s (median of 3)")
    print(f"  peak RSS of check --no-smoke --json: {max(by['check'].rss_kib) / 1024:.1f} MB")
    print(f"  load average after the run: {os.getloadavg()[0]:.2f}")
    return 0  # never fail on noise


if __name__ == "__main__":
    sys.exit(main())
