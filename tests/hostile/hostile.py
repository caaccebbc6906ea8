"""Helpers for the hostile-input suite: run the real CLI under guard, build hostile inputs, find leftovers.

Everything talks to torchdoctor through its command line only (``python -m doctor ...`` with
``PYTHONPATH`` at the repository root), so the suite survives any reshuffle of the modules under doctor/.

- ``run_cli``: one guarded run. The CLI starts in a session of its own; a watchdog thread samples its
  resident memory (psutil) and kills the whole run past a time or memory limit, so a hang or a memory
  bomb costs seconds, never the suite. Whatever happens, every process of the run is killed at the end:
  its process group, and every process that carries the run's marker variable in its environment
  (children that torchdoctor started in sessions of their own, or orphans it left behind).
- ``live_processes``: processes of a run still alive (by marker variable, or by a path in their command
  line), zombies excluded.
- ``controls``: raw control characters in output bytes (anything that can move a terminal's cursor,
  retitle its window or clear it).
- ``World``: the shared fake machine (a fake target venv with a metadata-only torch, a fake nvidia-smi
  for an RTX 5090, an empty sysroot, the fake NVML library when a C compiler exists).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TESTS = REPO / "tests"
FIXTURES = HERE / "fixtures"
for _p in (str(TESTS), str(TESTS / "fixtures" / "nvidia")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from fake_smi import write_fake_nvidia_smi  # noqa: E402
from fakeenv import make_fake_env  # noqa: E402

MARK_VAR = "TORCHDOCTOR_HOSTILE_MARK"
RTX5090 = {"name": "NVIDIA GeForce RTX 5090", "cc": "12.0", "mem_mib": 32607}
# What a terminal must never receive raw from an input: C0 controls other than TAB and LF (CR included: it
# rewrites the line), and DEL. ESC (0x1b) is among them. and, UTF-8 encoded, the bidirectional controls
# (U+061C, U+200E/F, U+202A-E, U+2066-9) that reorder what is shown
_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]")
OUTPUT_CAP = 4 << 20  # bytes of each stream kept; the rest is counted, not stored


# --- running the CLI ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    argv: list[str]
    returncode: int | None
    stdout: bytes
    stderr: bytes
    seconds: float
    peak_rss_mb: float
    timed_out: bool = False  # killed by the guard at the time limit
    memory_killed: bool = False  # killed by the guard past the memory limit
    stdout_bytes: int = 0  # including what was not kept
    stderr_bytes: int = 0
    leftovers: list[str] = field(default_factory=list)  # processes of the run alive after it ended

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    @property
    def text(self) -> str:
        return self.out + self.err

    def summary(self) -> str:
        """One paragraph for assertion messages: what happened, and the ends of both streams."""
        how = (
            f"killed after {self.seconds:.1f}s (time limit)"
            if self.timed_out
            else f"killed at {self.peak_rss_mb:.0f} MB RSS after {self.seconds:.1f}s (memory limit)"
            if self.memory_killed
            else f"exit {self.returncode} after {self.seconds:.1f}s, peak RSS {self.peak_rss_mb:.0f} MB"
        )
        return (
            f"{' '.join(map(repr, self.argv[3:]))[:300]}: {how}\n"
            f"--- stdout ({self.stdout_bytes} bytes) tail:\n{self.out[-1500:]!r}\n"
            f"--- stderr ({self.stderr_bytes} bytes) tail:\n{self.err[-1500:]!r}"
        )


def cli_argv(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "doctor", *map(str, args)]


# This process's environment, copied once at import (collection, main thread). The hostile cases build their
# environments in worker threads, and iterating os.environ there races pytest setting and deleting
# PYTEST_CURRENT_TEST in the main thread (KeyError in os.environ.__iter__, seen once in CI).
HOST_ENVIRON: dict[str, str] = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


def base_env(world: World | None = None, **extra: str) -> dict[str, str]:
    """The CLI's environment: no pip/uv/venv/CI settings of this machine, NVML off, the fake machine's
    nvidia-smi first on PATH and its empty sysroot, no colour, and a fresh marker variable."""
    env = {
        k: v
        for k, v in HOST_ENVIRON.items()
        if not k.startswith(("PIP_", "UV_", "TORCHDOCTOR_", "GITHUB_", "FAKE_NVML_"))
        and k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_EXE", "PYTHONPATH", "LD_LIBRARY_PATH", "CI")
    }
    env["PYTHONPATH"] = str(REPO)
    env["TORCHDOCTOR_NVML"] = "0"
    env["NO_COLOR"] = "1"
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    env["UV_NO_CONFIG"] = "1"
    if world is not None:
        env["PATH"] = f"{world.bin}{os.pathsep}{env.get('PATH', '')}"
        env["TORCHDOCTOR_SYSROOT"] = str(world.sysroot)
    env[MARK_VAR] = uuid.uuid4().hex
    env.update(extra)
    return env


def run_cli(
    args: list[str],
    env: dict[str, str],
    cwd: Path | str | None = None,
    limit: float = 30.0,
    rss_kill_mb: float = 600.0,
    stdin: bytes | None = None,
    settle: float = 2.0,
    needles: tuple[str, ...] = (),
) -> Outcome:
    """Run ``python -m doctor *args`` under guard (module docstring). ``settle``: how long processes of the
    run may take to end after the CLI exited before they count as ``leftovers``; ``needles``: paths whose
    presence in a command line also marks a process as the run's."""
    argv = cli_argv(args)
    marker = env.get(MARK_VAR) or uuid.uuid4().hex
    env = dict(env, **{MARK_VAR: marker})
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(cwd) if cwd else None,
        start_new_session=True,
    )
    _limit_address_space(proc.pid)
    streams = [_Reader(proc.stdout), _Reader(proc.stderr)]
    if stdin is not None:
        try:
            proc.stdin.write(stdin)
            proc.stdin.close()
        except OSError:
            pass
    peak, timed_out, memory_killed = 0.0, False, False
    try:
        while True:
            try:
                returncode = proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                pass
            peak = max(peak, _rss_mb(proc.pid))
            if peak > rss_kill_mb:
                memory_killed = True
            elif time.monotonic() - start > limit:
                timed_out = True
            if memory_killed or timed_out:
                kill_run(proc.pid, marker)
                returncode = proc.wait()
                break
        seconds = time.monotonic() - start
        leftovers = [] if (timed_out or memory_killed) else _wait_gone(marker, needles, settle)
    finally:
        kill_run(proc.pid, marker, needles)
        for reader in streams:
            reader.join(5)
    return Outcome(
        argv,
        returncode,
        streams[0].data(),
        streams[1].data(),
        seconds,
        peak,
        timed_out,
        memory_killed,
        streams[0].total,
        streams[1].total,
        leftovers,
    )


class _Reader(threading.Thread):
    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.chunks, self.total, self.kept = stream, [], 0, 0
        self.start()

    def run(self) -> None:
        try:
            while True:
                chunk = self.stream.read1(1 << 16)
                if not chunk:
                    break
                self.total += len(chunk)
                if self.kept < OUTPUT_CAP:
                    self.chunks.append(chunk[: OUTPUT_CAP - self.kept])
                    self.kept += len(self.chunks[-1])
        except (OSError, ValueError):
            pass

    def data(self) -> bytes:
        return b"".join(self.chunks)


def _limit_address_space(pid: int, gib: int = 4) -> None:
    """A safety net under the RSS watchdog: the run (and what it starts) cannot map more than ``gib``."""
    try:
        psutil.Process(pid).rlimit(psutil.RLIMIT_AS, (gib << 30, gib << 30))
    except (psutil.Error, OSError, AttributeError, ValueError):
        pass


def _rss_mb(pid: int) -> float:
    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return 0.0


def _wait_gone(marker: str, needles: tuple[str, ...], settle: float) -> list[str]:
    deadline = time.monotonic() + settle
    while True:
        alive = live_processes(marker, needles)
        if not alive or time.monotonic() > deadline:
            return [describe(p) for p in alive]
        time.sleep(0.05)


def live_processes(marker: str | None = None, needles: tuple[str, ...] = ()) -> list[psutil.Process]:
    """Processes (not zombies, not this one) with ``MARK_VAR=marker`` in their environment or one of
    ``needles`` in their command line."""
    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.pid == me or proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmdline = " ".join(proc.info["cmdline"] or [])
            if needles and any(n in cmdline for n in needles):
                found.append(proc)
                continue
            if marker and proc.environ().get(MARK_VAR) == marker:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid} (parent {proc.ppid()}): {' '.join(proc.cmdline())[:160]}"
    except psutil.Error:
        return f"pid {proc.pid}"


def kill_run(pid: int, marker: str | None, needles: tuple[str, ...] = ()) -> None:
    """SIGKILL the run's process group, then every process still carrying its marker (or a needle)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    for _ in range(3):
        alive = live_processes(marker, needles)
        if not alive:
            return
        for proc in alive:
            try:
                proc.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=2)


def params_of(item) -> dict:
    """A collected test's parameters ({} when it has none)."""
    return dict(getattr(getattr(item, "callspec", None), "params", {}))


# --- checking output ---------------------------------------------------------------------------------


def controls(data: bytes) -> list[str]:
    """Each raw control character in ``data`` with a little context, e.g. ``'\\x1b' in b'GPU 0 \\x1b]0;'``."""
    found = []
    for m in _CONTROL.finditer(data):
        found.append(f"{data[m.start() : m.end()]!r} in {data[max(0, m.start() - 30) : m.end() + 30]!r}")
        if len(found) >= 5:
            break
    return found


def strip_fences(markdown: str) -> str:
    """Markdown outside fenced code blocks (where HTML is live)."""
    out, fence = [], None
    for line in markdown.splitlines():
        m = re.match(r"^\s*(`{3,}|~{3,})", line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        out.append(line)
    return "\n".join(out)


# --- the fake machine --------------------------------------------------------------------------------


@dataclass
class World:
    root: Path
    py: Path  # the fake target venv's python: torch 2.6.0+cu126 and companions, import raises
    bin: Path  # fake nvidia-smi: one RTX 5090, driver 570.124.04 / CUDA 12.8
    sysroot: Path  # empty
    report: Path  # a JSON report of that machine (check --json --no-smoke)
    report_data: dict
    nvml: Path | None  # folder holding the fake libnvidia-ml.so.1, None without a C compiler
    nvml_why: str = ""


def build_world(root: Path) -> World:
    root.mkdir(parents=True, exist_ok=True)
    py = make_fake_env(
        root / "venv",
        torch="2.6.0+cu126",
        cuda="12.6",
        torchvision="0.21.0+cu126",
        torchaudio="2.6.0+cu126",
    )
    bin_dir = root / "bin"
    write_fake_nvidia_smi(bin_dir, [RTX5090], driver="570.124.04", cuda="12.8")
    sysroot = root / "sysroot"
    sysroot.mkdir()
    nvml, why = build_fake_nvml(root / "nvml")
    world = World(root, py, bin_dir, sysroot, root / "report.json", {}, nvml, why)
    res = run_cli(["check", "--no-smoke", "--json", "--python", py], base_env(world), cwd=root, limit=60)
    if res.returncode != 1:
        raise RuntimeError("the fake machine's reference report failed:\n" + res.summary())
    world.report.write_bytes(res.stdout)
    world.report_data = json.loads(res.stdout)
    return world


def build_fake_nvml(folder: Path) -> tuple[Path | None, str]:
    """Compile fixtures/fake_nvml.c into ``folder/libnvidia-ml.so.1``; (None, why) without a compiler."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return None, "no C compiler (cc, gcc, clang) on PATH"
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-O0",
            "-o",
            str(folder / "libnvidia-ml.so.1"),
            str(FIXTURES / "fake_nvml.c"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        return None, f"{cc} failed: {done.stderr.strip()[-300:]}"
    return folder, ""


def write_exe(path: Path, text: str) -> Path:
    """An executable script (the shebang is part of ``text``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def write_script_smi(bin_dir: Path, body: str) -> Path:
    """An nvidia-smi that runs ``body`` (Python, this interpreter) whatever its arguments."""
    return write_exe(bin_dir / "nvidia-smi", f"#!{sys.executable}\nimport sys\n{body}\n")


def run_on_pty(args: list[str], env: dict[str, str], cwd: Path | str | None = None, limit: float = 30.0):
    """Run the CLI with stdin, stdout and stderr on a pseudo-terminal (what a user's terminal receives).
    Returns (returncode or None when killed at ``limit``, every byte written to the terminal)."""
    import pty
    import select

    master, slave = pty.openpty()
    marker = env.get(MARK_VAR) or uuid.uuid4().hex
    env = dict(env, **{MARK_VAR: marker})
    proc = subprocess.Popen(
        cli_argv(args), stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
    )
    os.close(slave)
    data, deadline = bytearray(), time.monotonic() + limit
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 1 << 16)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not chunk:
                    break
                data += chunk
            elif proc.poll() is not None:
                break
        try:
            returncode = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            returncode = None
    finally:
        kill_run(proc.pid, marker)
        proc.wait()
        os.close(master)
    return returncode, bytes(data)


class Launched:
    """A CLI run to interact with while it runs (signals at chosen moments). Always ``close()`` it (or use
    it as a context manager): that kills whatever of the run is left."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        cwd: Path | str | None = None,
        needles: tuple[str, ...] = (),
    ):
        self.marker = env.get(MARK_VAR) or uuid.uuid4().hex
        self.needles = needles
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            cli_argv(args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env, **{MARK_VAR: self.marker}),
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
        )
        _limit_address_space(self.proc.pid)
        self.readers = [_Reader(self.proc.stdout), _Reader(self.proc.stderr)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def out(self) -> str:
        return self.readers[0].data().decode("utf-8", "replace")

    def err(self) -> str:
        return self.readers[1].data().decode("utf-8", "replace")

    def wait_for(self, predicate, timeout: float, poll: float = 0.05, while_running: bool = True) -> bool:
        """Poll ``predicate()`` until it is true (True) or ``timeout`` passes (False); with ``while_running``
        also stop (False) once the CLI has exited and the predicate is still false."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            if while_running and self.proc.poll() is not None:
                return bool(predicate())
            time.sleep(poll)
        return False

    def wait_output(self, needle: str, timeout: float) -> bool:
        return self.wait_for(lambda: needle in self.out() or needle in self.err(), timeout)

    def wait_exit(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def others(self) -> list[psutil.Process]:
        """The run's processes other than the CLI itself, alive now: by ``needles`` when there are some (a
        cheap scan of command lines), else by the marker variable."""
        found = live_processes(None if self.needles else self.marker, self.needles)
        return [p for p in found if p.pid != self.proc.pid]

    def signal(self, sig: int, group: bool = False) -> None:
        try:
            if group:
                os.killpg(self.proc.pid, sig)
            else:
                self.proc.send_signal(sig)
        except OSError:
            pass

    def close(self) -> None:
        kill_run(self.proc.pid, self.marker, self.needles)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for reader in self.readers:
            reader.join(5)
