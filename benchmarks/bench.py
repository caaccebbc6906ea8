"""How fast torchdoctor is next to what users run today, measured side by side in one run.

    python benchmarks/bench.py [--quick] [--runs N] [--reports N] [--fleet N] [--target PYTHON] [--keep DIR]
                               [--against CHECKOUT] [--no-kernels]

Every command runs as a whole process (time.perf_counter around spawn + wait), after a warm-up
round that is thrown away; the rounds are interleaved (one run of each command per round) so
that background load hits every command alike and the ratios stay fair. Prints per command the
median and min-max wall time and the peak RSS (os.wait4: the largest process of the tree), then
every target of the "Speed to the floor" issue (#17) with "met" or "NOT met". The floor is what
the chosen stack costs before torchdoctor does anything: its interpreter starting and importing typer.
`check --no-smoke` is measured as a second run on an unchanged machine (the warm-up round fills the
cache of what the target interpreter said; a `--no-cache` row shows the first-run cost); the text check
runs with a pseudo-terminal as stdout, as on a user's screen. The target environment is a venv with the real CPU torch
wheel, built like tests/realtorch.py does (and reused from the same cache folder). Two more rows time the same
check in a project folder (a pyproject.toml that is not ours, as in CI) and against a venv holding a CUDA torch's
libtorch_cuda.so (torch 2.14.1's real one when tests/test_kernels.py left it, else a synthetic one; none with --quick).

--quick (CI) runs fewer rounds and fewer reports. The script exits 0 whatever the numbers are:
it fails (exit 1) only when a command itself fails, never on noise.
"""

from __future__ import annotations

import argparse
import copy
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
WHEEL_DIR = Path("/opt/wheels")
WHEEL_GLOB = "torch-2.13.0+cpu-cp311-cp311-*.whl"
CACHE = Path("/tmp/torchdoctor-realtorch-cache")  # shared with tests/realtorch.py
COMPLETE = ".torchdoctor-complete"
CHILD = REPO / "doctor" / "target" / "smoke.py"
OK_CODES = (0, 1)  # torchdoctor: healthy, or error findings; both are a finished run


# --- the target environment -----------------------------------------------------------------------


def find_python311() -> str | None:
    """A CPython 3.11 for the cp311 wheel: pyenv's, else python3.11 on PATH."""
    pyenv = shutil.which("pyenv")
    if pyenv:
        try:
            root = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            root = ""
        for folder in sorted(Path(root, "versions").glob("3.11*")) if root else []:
            if (folder / "bin" / "python").exists():
                return str(folder / "bin" / "python")
    return shutil.which("python3.11")


def target_python() -> tuple[str | None, str]:
    """The real-CPU-torch venv's python (built if missing, like tests/realtorch.py), or (None, why)."""
    wheels = sorted(WHEEL_DIR.glob(WHEEL_GLOB)) if WHEEL_DIR.is_dir() else []
    if not wheels:
        return None, f"no wheel matching {WHEEL_DIR / WHEEL_GLOB}"
    wheel = wheels[-1]
    venv = CACHE / wheel.name[: -len(".whl")]
    python = venv / "bin" / "python"
    if (venv / COMPLETE).exists():
        return str(python), f"reused {venv}"
    base = find_python311()
    if base is None:
        return None, "no Python 3.11 (pyenv or python3.11 on PATH) for the cp311 wheel"
    import fcntl

    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / (venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a test session may be building it right now
        if not (venv / COMPLETE).exists():
            print(f"building {venv} (about a minute) ...", file=sys.stderr)
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([base, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
            pip = [str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
            done = subprocess.run(pip + [str(wheel)], capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                return None, f"could not install {wheel.name}: {done.stderr.strip()[-300:]}"
            (venv / COMPLETE).write_text("with-deps\n")
    return str(python), f"built {venv}"


# A project's pyproject.toml as CI runs `check` beside it: torchdoctor among its dev dependencies, no table of ours.
PROJECT_PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "trainer"
version = "1.4.0"
requires-python = ">=3.10"
dependencies = ["torch>=2.5", "numpy", "tqdm"]

[project.optional-dependencies]
dev = ["pytest", "ruff", "torchdoctor>=0.2"]

[tool.ruff]
line-length = 120
"""


def cuda_target(build: bool) -> tuple[str | None, Path | None, str]:
    """(python, folder to remove, what) of a venv that holds torch 2.14.1 cu130's metadata and, linked in, its
    503 MB libtorch_cuda.so (else the synthetic one, built only when ``build``): what a check reads on a CUDA
    machine (the kernel reader, or its cache). Made with tests/fakeenv.py; (None, None, why) without a library."""
    if REAL_KERNELS_FILE.is_file():
        library, what = REAL_KERNELS_FILE, "torch 2.14.1 cu130's real libtorch_cuda.so"
    elif build:
        library, what = synthetic_libtorch_cuda(), "a synthetic libtorch_cuda.so"
    else:
        return None, None, "no libtorch_cuda.so here and --quick builds none"
    sys.path.insert(0, str(REPO / "tests"))
    from fakeenv import make_fake_env

    root = Path(tempfile.mkdtemp(prefix="torchdoctor-bench-cuda-"))
    python = make_fake_env(root / "venv", torch="2.14.1", cuda="13.0")
    lib = next((root / "venv" / "lib").glob("python3*/site-packages")) / "torch" / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "libtorch_cuda.so").symlink_to(library)  # a link: the library's own inode and times stay as they are
    return str(python), root, what


def torchdoctor_argv() -> list[str]:
    """What users run: the console script next to this interpreter, else `python -m doctor`."""
    script = Path(sys.executable).with_name("torchdoctor")
    return [str(script)] if script.exists() else [sys.executable, "-m", "doctor"]


# --- running and timing ---------------------------------------------------------------------------


@dataclass
class Command:
    key: str
    label: str
    argv: list[str]
    ok_codes: tuple[int, ...] = (0,)
    is_torchdoctor: bool = False
    seconds: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    last_stdout: bytes = b""
    env_extra: dict[str, str] = field(default_factory=dict)  # e.g. PYTHONPATH of another checkout
    tty: bool = False  # stdout and stderr are a pseudo-terminal (the text view on a user's screen)
    cwd: str | None = None  # where it runs (default: $TMPDIR, a folder without a pyproject.toml)
    pinned: bool = False  # runs on one CPU (one_core): "reports per second on one core"


class CommandFailed(Exception):
    pass


def by_key(commands: list[Command], key: str) -> Command:
    return next(c for c in commands if c.key == key)


def run_once(cmd: Command, env: dict[str, str], keep_stdout: bool = False) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB, the largest process of the tree) of one whole-process run."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        master = drain = None
        stdout, stderr, screen = (out if keep_stdout else subprocess.DEVNULL), err, bytearray()
        if cmd.tty:
            import pty
            import threading

            master, stdout = pty.openpty()
            stderr = stdout  # a user's screen: the progress status on stderr is decided as it would be there
            drain = threading.Thread(target=_drain, args=(master, screen), daemon=True)
            drain.start()
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd.argv,
            stdout=stdout,
            stderr=stderr,
            env={**env, **cmd.env_extra},
            cwd=cmd.cwd or tempfile.gettempdir(),
            preexec_fn=one_core if cmd.pinned else None,
        )
        # os.wait4, not proc.wait(): it also returns the child's resource usage (peak RSS).
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        if cmd.tty:
            os.close(stdout)
            drain.join(5)
            os.close(master)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        err_text = (bytes(screen) if cmd.tty else err.read()).decode(errors="replace")
        out.seek(0)
        if keep_stdout:
            cmd.last_stdout = out.read()
    if proc.returncode not in cmd.ok_codes:
        tail = err_text.strip()[-800:]
        raise CommandFailed(f"{cmd.label}: exit {proc.returncode}: {' '.join(cmd.argv)}\n{tail}")
    return seconds, usage.ru_maxrss


def _drain(fd: int, keep: bytearray) -> None:
    """Read a pseudo-terminal until the child is gone (its output must not fill the pty's buffer); the last
    4 KB are kept for an error message."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other side closed
            return
        if not chunk:
            return
        keep.extend(chunk)
        del keep[:-4096]


def measure(commands: list[Command], rounds: int, env: dict[str, str]) -> None:
    """One warm-up round (thrown away), then ``rounds`` interleaved rounds."""
    for round_no in range(rounds + 1):
        for cmd in commands:
            seconds, rss = run_once(cmd, env, keep_stdout=round_no == 0 and cmd.key == "no_smoke")
            if round_no:
                cmd.seconds.append(seconds)
                cmd.rss_kib.append(rss)
        print(f"  round {round_no}/{rounds}{' (warm-up)' if round_no == 0 else ''} done", file=sys.stderr)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# --- the 1,000 reports ----------------------------------------------------------------------------

DRIVERS = ["535.183.01", "550.54.15", "560.35.03", "570.124.06", "575.57.08", "580.65.06", "470.256.02"]
GPUS = [
    ("NVIDIA H100 80GB HBM3", "9.0"),
    ("NVIDIA A100-SXM4-80GB", "8.0"),
    ("Tesla V100-SXM2-32GB", "7.0"),
    ("NVIDIA GeForce RTX 4090", "8.9"),
    ("NVIDIA GeForce RTX 5090", "12.0"),
    ("Tesla P100-PCIE-16GB", "6.0"),
    ("NVIDIA B200", "10.0"),
    ("Tesla K80", "3.7"),
]
TORCH_BUILDS = ["2.13.0+cpu", "2.13.0+cu128", "2.12.1+cu126", "2.9.0+cu130", "2.5.1+cu118", "2.6.0+cu124"]


def mutate(base: dict, i: int) -> dict:
    """Report number ``i``: the real report with another driver, GPU set and torch build."""
    report = copy.deepcopy(base)
    snap = report["snapshot"]
    driver = DRIVERS[i % len(DRIVERS)]
    name, cc = GPUS[(i // len(DRIVERS)) % len(GPUS)]
    build = TORCH_BUILDS[(i // 3) % len(TORCH_BUILDS)]
    nv = snap["nvidia"]
    fact = {"value": None, "source": "", "why": None}
    nv.update(
        status="ok",
        detail="",
        attempts=["nvml: ok"],
        driver_version=dict(fact, value=driver, source="nvml"),
        cuda_driver_version={"value": None, "source": "", "why": "left to the table"},
    )
    nv["gpus"] = [
        {
            "index": k,
            "name": name,
            "uuid": f"GPU-{i:08d}-{k}",
            "pci_bus_id": f"0000:{k:02x}:00.0",
            "compute_capability": dict(fact, value=cc, source="nvml"),
            "memory_total_mib": 81559,
        }
        for k in range(1 + i % 4)
    ]
    torch = (snap.get("install") or {}).get("torch")
    if torch:
        local = build.split("+")[1]
        cuda = None if local == "cpu" else f"{int(local[2:-1])}.{local[-1]}"
        torch.update(version=build, build_version=build, cuda=cuda, has_libtorch_cuda=cuda is not None)
    snap["collected_at"] = f"2026-01-01T00:{(i // 60) % 60:02d}:{i % 60:02d}+00:00"
    return report


def write_reports(base_json: bytes, count: int, folder: Path) -> None:
    base = json.loads(base_json)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"node-{i:05d}.json").write_text(json.dumps(mutate(base, i)))


# Fallback when the CLI has no `check --from` yet: the same work in one process, timed inside.
IN_PROCESS = r"""
import sys, time, pathlib, json
from doctor.inputs.reports import read_report
from doctor.app.diagnose import diagnose
from doctor.table.load import load_table
t0 = time.perf_counter()
table = load_table(None)
paths = sorted(pathlib.Path(sys.argv[1]).glob("*.json"))
t1 = time.perf_counter()
for p in paths:
    snap, meta = read_report(p.read_text(), str(p))
    diagnose(snap, table)
t2 = time.perf_counter()
print(json.dumps({"n": len(paths), "setup_s": t1 - t0, "loop_s": t2 - t1}))
"""


NO_CLI = (
    "import sys\nfrom doctor.app.check import run_check\nfrom doctor.app.options import CheckOptions\n"
    "sys.exit(run_check(CheckOptions(python=sys.argv[1], smoke=False, json=True)))"
)


def one_core():
    """preexec_fn: pin the child to one CPU ("reports per second on one core")."""
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    except (AttributeError, OSError):
        pass


def cli_has_from(td: list[str], env: dict[str, str]) -> bool:
    done = subprocess.run(td + ["check", "--help"], capture_output=True, text=True, env=env, timeout=60)
    return "--from" in done.stdout


def measure_reports(td: list[str], folder: Path, count: int, rounds: int, env: dict[str, str],
                    to_file: Path | None = None) -> dict:
    """``to_file``: write the lines there with -o, as a user keeping them does; shared output is redacted."""
    if cli_has_from(td, env):
        argv = td + ["check", "--from", str(folder), "--json"] + (["-o", str(to_file)] if to_file else [])
        times = []
        for _ in range(rounds + 1):
            start = time.perf_counter()
            done = subprocess.run(
                argv,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
                preexec_fn=one_core,
                timeout=600,
            )
            times.append(time.perf_counter() - start)
            if done.returncode not in OK_CODES:
                raise CommandFailed(f"check --from: exit {done.returncode}: {done.stderr.decode()[-800:]}")
        best = median(times[1:])
        return {
            "how": "torchdoctor check --from DIR --json (whole process, pinned to one core)",
            "seconds": best,
            "rate": count / best,
        }
    rates, loops = [], []
    for _ in range(rounds + 1):
        done = subprocess.run(
            [sys.executable, "-c", IN_PROCESS, str(folder)],
            capture_output=True,
            text=True,
            env=env,
            preexec_fn=one_core,
            timeout=600,
        )
        if done.returncode != 0:
            raise CommandFailed(f"in-process re-diagnosis failed: {done.stderr[-800:]}")
        data = json.loads(done.stdout.strip().splitlines()[-1])
        loops.append(data["loop_s"])
        rates.append(data["n"] / data["loop_s"])
    return {
        "how": "in process (the CLI has no `check --from` yet): read_report + diagnose per file, "
        "pinned to one core, table loaded once",
        "seconds": median(loops[1:]),
        "rate": median(rates[1:]),
    }


# What re-diagnosis cannot go below with today's output, before any judging: per report, the C work of reading
# the file, json.loads, and json.dumps of the line torchdoctor wrote for it (written first; only the loop is timed).
C_WORK = r"""
import json, sys, time, pathlib
paths = sorted(pathlib.Path(sys.argv[1]).glob("*.json"))
with open(sys.argv[2]) as f:
    lines = [json.loads(line) for line in f]
t0 = time.perf_counter()
for path, line in zip(paths, lines):
    json.loads(path.read_text())
    json.dumps(line, separators=(",", ":"))
print((time.perf_counter() - t0) / len(paths))
"""


def measure_reports_floor(td: list[str], folder: Path, rounds: int, env: dict[str, str]) -> dict:
    """The fastest re-diagnosis today's output allows here: a process's start (`check --from` of one report)
    plus, per report, the C work above. Not a target: it says how much of the target is left for Python."""
    lines = folder.with_name(folder.name + "-lines.jsonl")
    one = folder.with_name(folder.name + "-one")
    one.mkdir(exist_ok=True)
    first = sorted(folder.glob("*.json"))[0]
    shutil.copy(first, one / first.name)
    write = Command("floor_lines", "check --from DIR --json (the lines to dump)",
                    td + ["check", "--from", str(folder), "--json"], OK_CODES)
    # the start runs where measure_reports runs the re-diagnosis it is set against (the bench's own folder)
    start = Command("floor_start", "check --from of one report", td + ["check", "--from", str(one), "--json"],
                    OK_CODES, cwd=os.getcwd(), pinned=True)
    try:
        run_once(write, env, keep_stdout=True)
        lines.write_bytes(write.last_stdout)
        per_report = []
        for _ in range(rounds + 1):
            start.seconds.append(run_once(start, env)[0])
            done = subprocess.run([sys.executable, "-c", C_WORK, str(folder), str(lines)], capture_output=True,
                                  text=True, env=env, preexec_fn=one_core, timeout=600)
            if done.returncode != 0:
                raise CommandFailed(f"re-diagnosis floor: {done.stderr[-800:]}")
            per_report.append(float(done.stdout.strip()))
    finally:
        lines.unlink(missing_ok=True)
        shutil.rmtree(one, ignore_errors=True)
    return {"start": median(start.seconds[1:]), "per_report": median(per_report[1:])}


# --- the report -----------------------------------------------------------------------------------


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def print_table(commands: list[Command]) -> None:
    print(f"{'command':58} {'median':>11} {'min':>11} {'max':>11} {'peak RSS':>10}")
    for cmd in commands:
        rss = f"{max(cmd.rss_kib) / 1024:7.1f} MB" if cmd.rss_kib else ""
        print(
            f"{cmd.label:58} {fmt_ms(median(cmd.seconds))} {fmt_ms(min(cmd.seconds))} "
            f"{fmt_ms(max(cmd.seconds))} {rss:>10}"
        )


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI: 2 rounds, 200 reports")
    parser.add_argument("--runs", type=int, help="measured rounds after the warm-up (default 7; quick 2)")
    parser.add_argument("--reports", type=int, help="reports to re-diagnose (default 1000; quick 200)")
    parser.add_argument("--fleet", type=int, help="reports for fleet summarize (default 10000; quick 1000)")
    parser.add_argument("--no-kernels", action="store_true", help="skip the binary kernel reader (it writes a "
                        "500 MB file under $TMPDIR once)")
    parser.add_argument("--target", help="target python (default: the real-CPU-torch venv)")
    parser.add_argument("--keep", type=Path, help="write the generated reports here and keep them")
    parser.add_argument("--against", type=Path, help="another checkout (e.g. the previous release) whose "
                        "--help and check --no-smoke are measured in the same rounds, both trees run as "
                        "python -m doctor")
    args = parser.parse_args(argv)
    rounds = args.runs or (2 if args.quick else 7)
    n_reports = args.reports or (200 if args.quick else 1000)
    n_fleet = args.fleet or (1000 if args.quick else 10_000)

    target, how = (args.target, "--target") if args.target else target_python()
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env.pop("CONDA_PREFIX", None)
    # An installed torchdoctor has its .pyc files (pip compiles them); a checkout run with
    # PYTHONDONTWRITEBYTECODE=1 would recompile every module on every run. Cache them outside the tree.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "torchdoctor-bench-pycache"))
    # A cache folder of its own: the warm-up round fills it, the measured rounds are second runs.
    env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="torchdoctor-bench-cache-")
    env.pop("TORCHDOCTOR_NO_CACHE", None)
    td = torchdoctor_argv()
    tool_python = sys.executable
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
        f"torchdoctor: {' '.join(td)} (Python {sys.version.split()[0]})"
    )
    print(
        f"target: {target or 'none'} ({how}); {rounds} measured rounds after 1 warm-up; {n_reports} reports"
    )

    commands = [
        Command("pass", "python -c pass (torchdoctor's interpreter)", [tool_python, "-c", "pass"]),
        Command("floor", "python -c 'import typer' (the floor)", [tool_python, "-c", "import typer"]),
        Command("help", "torchdoctor --help", td + ["--help"], is_torchdoctor=True),
    ]
    cleanup: list[Path] = []  # folders made for the run
    if target:
        py = ["--python", target]
        commands += [
            Command("target_pass", "target python -c pass", [target, "-c", "pass"]),
            Command(
                "no_smoke",
                "torchdoctor check --no-smoke --json",
                td + ["check", "--no-smoke", "--json"] + py,
                OK_CODES,
                True,
            ),
            Command(
                "no_smoke_text",
                "torchdoctor check --no-smoke (text, on a terminal)",
                td + ["check", "--no-smoke"] + py,
                OK_CODES,
                True,
                tty=True,
            ),
            Command(
                "no_cache",
                "  same --json with --no-cache (a first run)",
                td + ["check", "--no-smoke", "--json", "--no-cache"] + py,
                OK_CODES,
                True,
            ),
            # Not a target: the same check without the CLI layer (typer), to show what typer costs.
            Command(
                "no_cli",
                "  same, calling doctor.app.check.run_check (no CLI)",
                [tool_python, "-c", NO_CLI, target],
                OK_CODES,
                True,
            ),
            Command(
                "smoke",
                "torchdoctor check --json (smoke test)",
                td + ["check", "--json"] + py,
                OK_CODES,
                True,
            ),
            Command(
                "collect_env", "python -m torch.utils.collect_env", [target, "-m", "torch.utils.collect_env"]
            ),
            Command("import_torch", "python -c 'import torch'", [target, "-c", "import torch"]),
            Command(
                "bare_smoke",
                "import torch + smoke, one process (torch_child.py)",
                [target, str(CHILD), "--mode", "smoke", "--device", "all", "--budget", "54"],
            ),
        ]
        project = Path(tempfile.mkdtemp(prefix="torchdoctor-bench-project-"))
        cleanup.append(project)
        (project / "pyproject.toml").write_text(PROJECT_PYPROJECT)
        commands.insert(commands.index(by_key(commands, "no_smoke_text")), Command(
            "no_smoke_project",
            "  same, in a project folder (its pyproject.toml names no [tool.torchdoctor])",
            td + ["check", "--no-smoke", "--json"] + py,
            OK_CODES,
            True,
            cwd=str(project),
        ))
        cuda_python, cuda_root, cuda_what = (None, None, "--no-kernels") if args.no_kernels else cuda_target(
            build=not args.quick)
        print(f"CUDA target: {cuda_python or 'none'} ({cuda_what})")
        cleanup += [cuda_root] if cuda_root else []
        if cuda_python:
            commands.insert(commands.index(by_key(commands, "no_smoke_text")), Command(
                "no_smoke_cuda",
                "  same, a CUDA torch (its libtorch_cuda.so linked in)",
                td + ["check", "--no-smoke", "--json", "--python", cuda_python],
                OK_CODES,
                True,
            ))
    else:
        commands.append(
            Command(
                "no_smoke",
                "torchdoctor check --no-smoke --json (default python)",
                td + ["check", "--no-smoke", "--json"],
                OK_CODES,
                True,
            )
        )
    if args.against:
        trees = (("this", REPO), ("against", args.against.resolve()))
        for name, tree in trees:
            env_tree = {"PYTHONPATH": str(tree)}
            module = [tool_python, "-m", "doctor"]
            commands.append(Command(f"help_{name}", f"  --help, python -m doctor from {tree}", module + ["--help"],
                                    env_extra=env_tree))
            check = module + ["check", "--no-smoke", "--json"] + (["--python", target] if target else [])
            commands.append(Command(f"no_smoke_{name}", f"  check --no-smoke --json, from {tree}", check, OK_CODES,
                                    env_extra=env_tree))
    by = {c.key: c for c in commands}
    fleet = kernels = None
    try:
        measure(commands, rounds, env)
        print()
        print_table(commands)
        reports = saved = reports_floor = None
        base = by["no_smoke"].last_stdout
        if base.strip():
            folder = args.keep or Path(tempfile.mkdtemp(prefix="torchdoctor-bench-"))
            try:
                write_reports(base, n_reports, folder)
                reports = measure_reports(td, folder, n_reports, 1 if args.quick else 3, env)
                if cli_has_from(td, env):  # not targets: what redaction adds to the same lines, and the floor
                    lines = folder.with_name(folder.name + ".jsonl")
                    saved = measure_reports(td, folder, n_reports, 1 if args.quick else 2, env, to_file=lines)
                    lines.unlink(missing_ok=True)
                    reports_floor = measure_reports_floor(td, folder, 1 if args.quick else 3, env)
            finally:
                if args.keep is None:
                    shutil.rmtree(folder, ignore_errors=True)
        fleet = measure_fleet(td, n_fleet, 1 if args.quick else 3, env)
        if not args.no_kernels:  # --quick reads the real file when it is there, and never writes 500 MB
            kernels = measure_kernels(2 if args.quick else 5, build=not args.quick)
    except CommandFailed as exc:
        print(f"bench: a command failed: {exc}", file=sys.stderr)
        for folder in cleanup:
            shutil.rmtree(folder, ignore_errors=True)
        return 1

    print()
    print("targets (ratios of medians, measured side by side in this run; issue #17):")
    floor = median(by["floor"].seconds)
    nos = median(by["no_smoke"].seconds)
    print(f"  (floor = torchdoctor's interpreter starting + import typer: {floor * 1000:.0f} ms; "
          f"python -c pass {median(by['pass'].seconds) * 1000:.0f} ms)")
    if "no_cli" in by:
        cli_ms = (nos - median(by["no_cli"].seconds)) * 1000  # the fast path reads the line: typer is not imported
        print(f"  (the command line's share of check --no-smoke: {cli_ms:.0f} ms = {cli_ms / 1000 / nos:.0%})")
    if "no_cache" in by:
        first = median(by["no_cache"].seconds)
        print(f"  (check --no-smoke --json without the cache, a first run: {first * 1000:.0f} ms = "
              f"{first / floor:.2f}x the floor)")
    hlp = median(by["help"].seconds)
    rows = []
    rows.append((f"check --no-smoke --json (second run) / floor = {nos / floor:5.2f}x ({nos * 1000:.0f} ms)",
                 "<= 1.5x", nos / floor <= 1.5))
    if "no_smoke_project" in by:
        pj = median(by["no_smoke_project"].seconds)
        rows.append((f"same, in a project folder (a pyproject.toml, not ours) / floor = {pj / floor:5.2f}x "
                     f"({pj * 1000:.0f} ms)", "<= 1.5x", pj / floor <= 1.5))
    if "no_smoke_cuda" in by:
        cu = median(by["no_smoke_cuda"].seconds)
        rows.append((f"same, a CUDA torch (libtorch_cuda.so read, or its kernels cached) / floor = {cu / floor:5.2f}x "
                     f"({cu * 1000:.0f} ms)", "<= 1.5x", cu / floor <= 1.5))
    if "collect_env" in by:
        ce = median(by["collect_env"].seconds)
        rows.append((f"check --no-smoke --json / collect_env = {nos / ce:6.1%}", "<= 4%", nos / ce <= 0.04))
    if "no_smoke_text" in by:
        txt = median(by["no_smoke_text"].seconds)
        rows.append((f"check --no-smoke, text on a terminal / floor = {txt / floor:5.2f}x ({txt * 1000:.0f} ms)",
                     "<= 1.8x", txt / floor <= 1.8))
    rows.append((f"--help / floor = {hlp / floor:5.2f}x ({hlp * 1000:.0f} ms)", "<= 1.3x", hlp / floor <= 1.3))
    if "smoke" in by:
        sm, bare = median(by["smoke"].seconds), median(by["bare_smoke"].seconds)
        rows.append(
            (f"check (smoke) / bare import torch + smoke = {sm / bare:5.2f}x", "<= 1.10x", sm / bare <= 1.10)
        )
    if reports:
        rows.append(
            (
                f"re-diagnosis: {reports['rate']:7.0f} reports/s ({n_reports} in "
                f"{reports['seconds']:.2f} s; {reports['how']})",
                ">= 2000/s",
                reports["rate"] >= 2000,
            )
        )
    if saved:
        print(f"  (re-diagnosis written to a file with -o, so redacted: {saved['rate']:.0f} reports/s, "
              f"{saved['seconds']:.2f} s; not a target)")
    if reports_floor:
        fl = reports_floor
        best = fl["start"] + n_reports * fl["per_report"]
        print(f"  (re-diagnosis floor, not a target: a start of {fl['start'] * 1000:.0f} ms (check --from of one "
              f"report) + {fl['per_report'] * 1000:.3f} ms a report of C work alone (read, json.loads, json.dumps "
              f"of the line written) = at most {n_reports / best:.0f} reports/s for {n_reports} with no judging at all; "
              f"2,000/s leaves {max(0.0, 1 / 2000 - best / n_reports) * 1000:.3f} ms a report for the Python work)")
    if fleet:
        rows.append((f"fleet summarize of {n_fleet} reports: {fleet:.2f} s (whole process, --json)",
                     "<= 0.5 s" if n_fleet == 10_000 else f"<= {0.5 * n_fleet / 10_000:.2f} s",
                     fleet <= 0.5 * n_fleet / 10_000))
    if kernels:
        cold, warm, size, which = kernels
        print(f"  (binary kernel reader: {which}, {size / 1e6:.0f} MB)")
        rows.append((f"binary kernel reader, cold page cache: {cold * 1000:.1f} ms", "<= 50 ms", cold <= 0.050))
        rows.append((f"binary kernel reader, warm: {warm * 1000:.1f} ms", "<= 10 ms", warm <= 0.010))
    elif not args.no_kernels:
        print("  (binary kernel reader: not measured: no libtorch_cuda.so here and --quick builds none)")
    rss = max(by["no_smoke"].rss_kib) / 1024
    rows.append((f"peak RSS of check --no-smoke = {rss:5.1f} MB", "<= 60 MB", rss <= 60))
    if args.against:
        for key in ("help", "no_smoke"):
            now, before = median(by[f"{key}_this"].seconds), median(by[f"{key}_against"].seconds)
            rows.append((f"{key}: this tree / {args.against} = {now / before:5.2f}x "
                         f"({now * 1000:.0f} vs {before * 1000:.0f} ms)", "<= 1.05x", now / before <= 1.05))
    for text, target_text, ok in rows:
        print(f"  {text:100} target {target_text:9} {verdict(ok)}")
    if "import_torch" in by:
        print(
            f"  (floors: import torch {fmt_ms(median(by['import_torch'].seconds)).strip()}, "
            f"target python -c pass {fmt_ms(median(by['target_pass'].seconds)).strip()})"
        )
    print(f"  (load average after the run: {os.getloadavg()[0]:.2f})")
    shutil.rmtree(env["XDG_CACHE_HOME"], ignore_errors=True)
    for folder in cleanup:
        shutil.rmtree(folder, ignore_errors=True)
    return 0  # never fail on noise


# --- fleet summarize and the binary kernel reader -------------------------------------------------------------


def measure_fleet(td: list[str], nodes: int, rounds: int, env: dict[str, str]) -> float:
    """Median wall seconds of `torchdoctor fleet summarize DIR --json` over ``nodes`` generated reports."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fleet_bench import write_fleet

    folder = Path(tempfile.mkdtemp(prefix="torchdoctor-bench-fleet-"))
    try:
        write_fleet(str(folder), nodes)
        times = []
        for _ in range(rounds + 1):
            start = time.perf_counter()
            done = subprocess.run(td + ["fleet", "summarize", str(folder), "--json"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, env=env, timeout=600)
            times.append(time.perf_counter() - start)
            if done.returncode not in OK_CODES:
                raise CommandFailed(f"fleet summarize: exit {done.returncode}: {done.stderr.decode()[-800:]}")
        return median(times[1:])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


KERNELS_FILE = Path(tempfile.gettempdir()) / "torchdoctor-bench-libtorch_cuda.so"
# torch 2.14.1 cu130's real libtorch_cuda.so (503 MB), where tests/test_kernels.py has unpacked it
REAL_KERNELS_FILE = Path(os.environ.get("TORCHDOCTOR_WHEEL_CACHE", "/tmp/torchdoctor-wheel-cache")) / "torch-2.14.1" \
    / "libtorch_cuda.so"


def synthetic_libtorch_cuda() -> Path:
    """A ~500 MB ELF laid out like torch 2.14.1 cu130's libtorch_cuda.so (docs in doctor/probes/kernels.py):
    475 containers, each with cubins for sm_75 ... sm_120 (~175 KB each), sm_100a/sm_103f in 59 of them,
    and the wrapper records. Built once and kept under $TMPDIR."""
    if KERNELS_FILE.is_file() and KERNELS_FILE.stat().st_size > 400_000_000:
        return KERNELS_FILE
    sys.path.insert(0, str(REPO / "tests"))
    import elfmaker

    payload = bytes(175_000)
    extended = elfmaker.EXTENDED_HEADER
    containers = []
    for i in range(475):
        entries = [elfmaker.cubin(sm, payload=payload) for sm in (75, 80, 86, 90)]
        entries += [elfmaker.cubin(sm, flags=elfmaker.HOST_LINUX_64 | extended, payload=payload) for sm in (100, 120)]
        if i % 8 == 0:
            entries.append(elfmaker.cubin(100, flags=elfmaker.HOST_LINUX_64 | extended | 0x100000, payload=payload))
        containers.append(entries)
    data = elfmaker.fatbin_elf(containers)
    temp = KERNELS_FILE.with_suffix(".tmp")
    temp.write_bytes(data)
    os.replace(temp, KERNELS_FILE)
    return KERNELS_FILE


def measure_kernels(rounds: int, build: bool = True) -> tuple[float, float, int, str] | None:
    """(median cold seconds, median warm seconds, file size, which file) of doctor.probes.kernels.read_kernels on
    torch's real libtorch_cuda.so when tests/test_kernels.py left one, else on the synthetic one (built only
    when ``build``). Cold: the file's pages are dropped from the page cache first (fsync + posix_fadvise
    DONTNEED: this file only, nothing else on the machine)."""
    if not hasattr(os, "posix_fadvise"):
        return None
    sys.path.insert(0, str(REPO))
    from doctor.probes.kernels import read_kernels

    if REAL_KERNELS_FILE.is_file():
        path, which = REAL_KERNELS_FILE, "torch 2.14.1 cu130's real libtorch_cuda.so"
    elif build:
        path, which = synthetic_libtorch_cuda(), "a synthetic libtorch_cuda.so (475 containers)"
    else:
        return None
    cold, warm = [], []
    for _ in range(rounds):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        start = time.perf_counter()
        found = read_kernels(path)
        cold.append(time.perf_counter() - start)
        start = time.perf_counter()
        read_kernels(path)
        warm.append(time.perf_counter() - start)
        if getattr(found, "status", "ok") != "ok":
            raise CommandFailed(f"the kernel reader could not read {path}: {found}")
    return median(cold), median(warm), path.stat().st_size, which


if __name__ == "__main__":
    sys.exit(main())
