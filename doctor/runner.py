"""The one way torchdoctor runs a subprocess: argv lists, limits always, never raises.

"Not found", a timeout, a crash by signal, a flood of output and undecodable output all become a
``RunResult`` that the probes turn into facts. Tests pass a fake runner instead of patching subprocess.

``run`` collects the output; ``stream_run`` (the steps of `torchdoctor fix`) hands each line over as it
comes. Every child gets:

- a process group of its own (POSIX: a new session; Windows: ``CREATE_NEW_PROCESS_GROUP``), which is
  what gets stopped: at its time limit, at its output limit, and when torchdoctor exits in any way
  (doctor/app/process.py: normal exit, an exception, Ctrl-C, SIGTERM, SIGHUP);
- a hard limit on time (``timeout``) and on the bytes of output read (``max_output``; past it the child
  is stopped and the result says ``overflowed``);
- a limit of its own for when torchdoctor is killed outright (SIGKILL), set between fork and exec:
  Linux's ``PR_SET_PDEATHSIG`` (the kernel sends SIGKILL to the child the moment torchdoctor dies) and,
  on every POSIX system, ``alarm()`` a few seconds past its time limit (SIGALRM's default action ends
  the process even inside a hung ``import torch``; the timer survives exec);
- ``TORCHDOCTOR_OWNER=<our pid>`` in its environment, so that descendants that start sessions of their
  own (torchrun starts every rank that way) are found and ended too.

Where the platform has no process groups to signal (no ``os.killpg``/``signal.SIGKILL``: Windows), the
child alone is killed.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

MAX_OUTPUT = 8 << 20  # bytes of stdout (and of stderr) read from one child; past it the child is stopped
MAX_LINE = 64 << 10  # a longer line handed over as it comes (stream_run, on_line) goes in pieces this long
MAX_TIMEOUT = 30 * 24 * 3600.0  # no limit is longer (a non-finite one becomes this)
HARD_GRACE_S = 3.0  # the child's own alarm fires this long after its time limit
STOP_GRACE_S = 2.0  # between the polite signal and SIGKILL when torchdoctor stops a child
OWNER_VAR = "TORCHDOCTOR_OWNER"


@dataclass
class RunResult:
    """What one child did."""

    argv: list[str]
    returncode: int | None  # None when it never ran or was killed for the timeout
    stdout: str = ""
    stderr: str = ""
    not_found: bool = False
    timed_out: bool = False
    error: str | None = None  # OSError text when it could not start
    seconds: float = 0.0
    overflowed: bool = False  # stopped: it printed more than its output limit

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.overflowed

    @property
    def signal(self) -> int | None:
        """The signal number when the process was killed by one (POSIX: negative return code)."""
        if self.returncode is not None and self.returncode < 0 and not self.overflowed:
            return -self.returncode
        return None

    def describe(self) -> str:
        """A short reason for logs and facts: 'not found', 'timed out after 5s', 'exit 2'..."""
        name = os.path.basename(self.argv[0]) if self.argv else "?"
        if self.not_found:
            return f"{name} not found"
        if self.timed_out:
            return f"{name} timed out after {self.seconds:.0f}s"
        if self.overflowed:
            return f"{name} printed more than {MAX_OUTPUT >> 20} MB and was stopped"
        if self.error:
            return f"{name} could not start: {self.error}"
        if self.signal:
            signame = signal_name(self.signal)
            return f"{name} killed by {signame}"
        return f"{name} exited with {self.returncode}"


Runner = Callable[..., RunResult]


def signal_name(number: int) -> str:
    """11 -> 'SIGSEGV'; a number the platform does not name -> 'signal N'."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def limit_seconds(timeout: float) -> float:
    """A usable time limit: NaN or anything not positive becomes a tenth of a second, anything above
    MAX_TIMEOUT (inf included) MAX_TIMEOUT. Callers validate user input; this keeps the runner total."""
    try:
        value = float(timeout)
    except (TypeError, ValueError):
        return 10.0
    if math.isnan(value) or value <= 0:
        return 0.1
    return min(value, MAX_TIMEOUT)


# --- the children alive now ------------------------------------------------------------------------

# Children still running, so that any way out of torchdoctor can end them (they run in process groups
# of their own, which neither the terminal's Ctrl-C nor a signal to our group reaches).
_LIVE: dict[int, tuple[subprocess.Popen, bool]] = {}  # pid -> (process, may start sessions of its own)
_LIVE_LOCK = threading.Lock()
_SCAN = threading.Event()  # a child that starts sessions of its own was stopped: look for its descendants


def _track(proc: subprocess.Popen, sessions: bool) -> None:
    with _LIVE_LOCK:
        _LIVE[proc.pid] = (proc, sessions)


def _untrack(proc: subprocess.Popen) -> None:
    with _LIVE_LOCK:
        _LIVE.pop(proc.pid, None)


def kill_running() -> None:
    """End every child run() or stream_run() is waiting for (the waiting threads then return at once),
    and every process that carries our owner mark when one of them starts sessions of its own."""
    with _LIVE_LOCK:
        procs = list(_LIVE.values())
    for proc, sessions in procs:
        if sessions:
            _SCAN.set()
            _stop_politely(proc)
        else:
            _kill_group(proc)
    if _SCAN.is_set():
        kill_marked()


def kill_marked(owner: str | None = None) -> int:
    """SIGKILL every process (not this one) whose environment says ``TORCHDOCTOR_OWNER=<owner>`` (default:
    us): the descendants that left our children's process groups. Returns how many. Never raises."""
    owner = owner or str(os.getpid())
    try:
        import psutil
    except ImportError:
        return 0
    me, found = os.getpid(), []
    try:
        born = psutil.Process(me).create_time()  # what started before us cannot carry our mark
    except (psutil.Error, OSError):
        born = 0.0
    for proc in psutil.process_iter(["pid", "create_time"]):
        try:
            if (proc.info["create_time"] or 0.0) < born - 1.0:
                continue
            if proc.pid != me and proc.environ().get(OWNER_VAR) == owner:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    for proc in found:
        try:
            proc.kill()
        except (psutil.Error, OSError):
            pass
    if found:
        psutil.wait_procs(found, timeout=2)
    return len(found)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP that arrive inside the block (a few file operations that must not be
    cut in half) are delivered when it ends (POSIX; elsewhere the block is not protected)."""
    held = {getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)}
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = mask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        mask(signal.SIG_SETMASK, previous)


# --- starting a child ------------------------------------------------------------------------------


def _prctl():
    """libc's prctl on Linux (for PR_SET_PDEATHSIG), else None. Resolved once, before any fork."""
    global _PRCTL
    if _PRCTL is False:
        _PRCTL = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
            except (OSError, AttributeError, ImportError):
                _PRCTL = None
    return _PRCTL


_PRCTL = False
PR_SET_PDEATHSIG = 1


def _new_group(hard_limit: float | None = None) -> dict:
    """Popen options: a process group of its own; on POSIX also the child's own end (module docstring)."""
    if os.name == "nt":
        import subprocess

        return {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0x200)}
    if hard_limit is None:
        return {"start_new_session": True}
    parent, prctl = os.getpid(), _prctl()
    seconds = max(1, min(int(math.ceil(hard_limit)), 0x7FFFFFFF))
    sigkill = getattr(signal, "SIGKILL", 9)

    def setup() -> None:  # runs in the child between fork and exec: system calls only
        os.setsid()
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, sigkill)
            if os.getppid() != parent:  # torchdoctor died before the line above
                os._exit(137)
        signal.alarm(seconds)

    return {"preexec_fn": setup}


_SPAWNED = threading.Event()  # a child was started: at the end, its daemons are looked for (kill_leftovers)


def kill_leftovers() -> int:
    """At the end of a run that started children: SIGKILL the processes they left behind carrying our mark (a
    daemon a target's start-up code started in a session of its own, which no group kill reaches). Linux reads
    /proc itself (psutil is not loaded on check's path); elsewhere ``kill_marked``. Returns how many."""
    if not _SPAWNED.is_set():
        return 0
    if not os.path.isfile("/proc/self/stat"):
        return kill_marked()
    mark = f"\0{OWNER_VAR}={os.getpid()}\0".encode()
    born = _start_ticks("self")
    killed = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid() or _start_ticks(name) < born:
            continue  # what started before us cannot carry our mark
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                if mark not in b"\0" + handle.read(1 << 20):
                    continue
            os.kill(int(name), signal.SIGKILL)
            killed += 1
        except (OSError, ValueError):
            continue
    return killed


def _start_ticks(pid: str) -> int:
    """When the process started, in clock ticks since boot (/proc/<pid>/stat, field 22); -1 if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read(4096).rpartition(b")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return -1


def _spawn(args: list[str], timeout: float, env: Mapping[str, str] | None, **popen) -> subprocess.Popen:
    _SPAWNED.set()
    child_env = dict(os.environ if env is None else env)
    child_env[OWNER_VAR] = str(os.getpid())
    return subprocess.Popen(args, env=child_env, **popen, **_new_group(timeout + HARD_GRACE_S))


# --- reading a child's output; run: collect it ----------------------------------------------------------


class _Reader(threading.Thread):
    """The one reader of a child's pipe (run and stream_run): reads it to its end or to ``limit`` bytes (past
    it, ``on_over`` stops the child and reading ends). ``keep``: what was read is kept for ``text()``.
    ``on_line``: each line is also handed over as it comes (a longer one than MAX_LINE in pieces; the last
    one too when the output ends without a newline). ``on_end``: called once reading has ended, however."""

    def __init__(self, stream, limit: int, on_over: Callable[[], None],
                 on_line: Callable[[str], object] | None = None, keep: bool = True,
                 on_end: Callable[[], object] | None = None):
        super().__init__(daemon=True)
        self.stream, self.limit, self.on_over, self.on_line = stream, limit, on_over, on_line
        self.keep, self.on_end = keep, on_end
        self.chunks: list[bytes] = []
        self.size = 0
        self.over = False
        self.partial = b""  # on_line: the start of a line not ended yet (shorter than MAX_LINE)
        self.start()

    def run(self) -> None:
        try:
            while True:
                chunk = (
                    self.stream.read1(1 << 16) if hasattr(self.stream, "read1") else self.stream.read(1 << 16)
                )
                if not chunk:
                    if self.partial:
                        self._hand(self.partial)
                    break
                room = self.limit - self.size
                if len(chunk) > room:
                    if self.keep:
                        self.chunks.append(chunk[:room])
                    self.size = self.limit
                    self.over = True
                    self.on_over()
                    break
                if self.keep:
                    self.chunks.append(chunk)
                self.size += len(chunk)
                if self.on_line is not None:
                    self._lines(chunk)
        except (OSError, ValueError):
            pass
        finally:
            if self.on_end is not None:
                self.on_end()

    def _lines(self, chunk: bytes) -> None:
        *whole, self.partial = (self.partial + chunk).split(b"\n")
        for raw in whole:
            self._hand(raw)
        while len(self.partial) >= MAX_LINE:  # a line without end in sight: handed over in pieces
            self._hand(self.partial[:MAX_LINE])
            self.partial = self.partial[MAX_LINE:]

    def _hand(self, raw: bytes) -> None:
        for start in range(0, max(len(raw), 1), MAX_LINE):
            try:
                self.on_line(raw[start:start + MAX_LINE].decode("utf-8", errors="replace").rstrip("\r"))
            except Exception:  # noqa: BLE001 - a progress display must never cost the evidence
                pass

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")


def run(
    argv: Sequence[str],
    timeout: float = 10.0,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    cwd: str | None = None,
    max_output: int = MAX_OUTPUT,
    sessions: bool = False,
    on_line: Callable[[str], object] | None = None,
) -> RunResult:
    """Run ``argv`` to its end, its time limit or its output limit. ``sessions``: the child may start
    processes in sessions of their own (torchrun's ranks): when it is stopped, they are looked for too.
    ``on_line``: also called with each stdout line as it comes (progress)."""
    args = [str(a) for a in argv]
    timeout = limit_seconds(timeout)
    start = time.perf_counter()
    try:
        proc = _spawn(
            args,
            timeout,
            env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
        )
    except FileNotFoundError:
        return RunResult(args, None, not_found=True, seconds=time.perf_counter() - start)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return RunResult(args, None, error=getattr(exc, "strerror", None) or str(exc),
                         seconds=time.perf_counter() - start)
    _track(proc, sessions)
    timed_out = False
    readers: list[_Reader] = []
    feeder = None
    try:
        stop = (lambda: _stop_politely(proc)) if sessions else (lambda: _kill_group(proc))
        readers = [_Reader(proc.stdout, max_output, stop, on_line), _Reader(proc.stderr, max_output, stop)]
        if stdin is not None:
            feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin.encode()), daemon=True)
            feeder.start()
        if not _await(proc, readers, timeout):
            timed_out = True
            stop()
            _wait(proc, STOP_GRACE_S + 3)
        _finish_readers(proc, readers)
    except BaseException:  # Ctrl-C, SIGTERM (Interrupted): the child must not outlive this call
        (_stop_politely if sessions else _kill_group)(proc)
        if sessions:
            _SCAN.set()
            kill_marked()
        raise
    finally:
        _untrack(proc)
        _close_pipes(proc, readers, feeder)
    if sessions and timed_out:
        kill_marked()
    overflowed = any(r.over for r in readers)
    return RunResult(
        args,
        None if timed_out else proc.returncode,
        readers[0].text(),
        readers[1].text(),
        timed_out=timed_out,
        seconds=time.perf_counter() - start,
        overflowed=overflowed and not timed_out,
    )


def _close_pipes(proc: subprocess.Popen, readers: Sequence[_Reader] = (), feeder=None) -> None:
    """Close our ends of the child's pipes (a long fix or distributed run would otherwise keep a few
    descriptors per command until the garbage collector came by). A pipe a thread still reads or writes (a
    descendant holds its other end) is left to that thread: closing it under a blocked read would block."""
    busy = {id(r.stream) for r in readers if r.is_alive()}
    if feeder is not None and feeder.is_alive():
        busy.add(id(proc.stdin))
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None and id(pipe) not in busy:
            with contextlib.suppress(OSError, ValueError):
                pipe.close()


def _feed(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except (OSError, ValueError):
        pass


def _await(proc: subprocess.Popen, readers: list[_Reader], timeout: float) -> bool:
    """Wait for the child to end (True) or its time limit (False). The end of its output is what is
    waited on (a thread join wakes at once; Popen.wait with a timeout polls, so it wakes late), then the
    exit status; a child that exited while a descendant holds its pipes is not waited on past DRAIN."""
    deadline = time.monotonic() + timeout
    exited_at = None
    for reader in readers:
        while reader.is_alive():
            left = deadline - time.monotonic()
            if left <= 0:
                return proc.poll() is not None
            reader.join(min(left, 0.2))
            if reader.is_alive() and proc.poll() is not None:
                exited_at = exited_at or time.monotonic()
                if time.monotonic() - exited_at > 2.0:
                    return True
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False
    return True


def _finish_readers(proc: subprocess.Popen, readers: list[_Reader], drain: float = 2.0) -> None:
    """After the child exits: its descendants may hold the pipes open; give them ``drain`` seconds, then
    end the group and stop waiting."""
    deadline = time.monotonic() + drain
    for reader in readers:
        reader.join(max(0.0, deadline - time.monotonic()))
    if any(r.is_alive() for r in readers):
        _kill_group(proc)
        for reader in readers:
            reader.join(1.0)


def _wait(proc: subprocess.Popen, seconds: float) -> None:
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


# --- stream_run: line by line ------------------------------------------------------------------------

STREAM_TAIL = 200  # lines of a streamed step's output kept for the failure report
DRAIN_S = 5.0  # after the child exits, how long a grandchild may keep the output pipe open
MAX_STREAM = 1 << 30  # bytes a streamed step may print in all (pip prints far less)


def stream_run(
    argv: Sequence[str],
    timeout: float,
    on_line: Callable[[str], object],
    env: Mapping[str, str] | None = None,
    grace: float = 15.0,
    interrupt_grace: float | None = None,
) -> RunResult:
    """Like ``run``, but stdout and stderr together go to ``on_line`` line by line as they come (called on
    this thread). On the timeout the child's group is interrupted (SIGINT), then killed after ``grace``
    seconds; the result says ``timed_out``. Never raises, except that a KeyboardInterrupt (and the app's
    ``Interrupted`` for SIGTERM/SIGHUP) is passed on after the child's group was stopped: interrupted, then
    killed after ``interrupt_grace`` seconds (default ``grace``; 0: killed at once)."""
    args = [str(a) for a in argv]
    timeout = limit_seconds(timeout)
    start = time.perf_counter()
    try:
        proc = _spawn(args, timeout + grace, env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT)
    except FileNotFoundError:
        return RunResult(args, None, not_found=True, seconds=time.perf_counter() - start)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return RunResult(args, None, error=getattr(exc, "strerror", None) or str(exc),
                         seconds=time.perf_counter() - start)
    _track(proc, False)
    fired = threading.Event()

    def stop(wait: float) -> None:
        """Interrupt, wait, kill. Best effort: never raises (it runs on the timer thread too)."""
        if wait > 0:
            _interrupt_group(proc)
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
            except Exception:  # noqa: BLE001 - a timer thread must not die with the child still running
                _kill_group(proc)
        else:
            _kill_group(proc)

    def on_timeout() -> None:
        fired.set()
        stop(grace)

    import queue  # only a streamed run (fix) needs it

    lines: queue.Queue[str | None] = queue.Queue(maxsize=10_000)
    assert proc.stdout is not None
    # keep=False: a step's output is not held in memory, only its last STREAM_TAIL lines below
    reader = _Reader(proc.stdout, MAX_STREAM, lambda: _kill_group(proc), on_line=lines.put, keep=False,
                     on_end=lambda: lines.put(None))
    timer = threading.Timer(timeout, on_timeout)
    timer.daemon = True
    timer.start()
    tail: deque[str] = deque(maxlen=STREAM_TAIL)
    try:
        exited_at = None
        while True:
            try:
                line = lines.get(timeout=0.1)
            except queue.Empty:
                if proc.poll() is None:
                    continue
                # The child is gone; a grandchild that outlived it (or survived the kill where only
                # the child could be killed) may hold the pipe open: do not wait on it forever.
                exited_at = exited_at or time.perf_counter()
                if time.perf_counter() - exited_at > DRAIN_S:
                    break
                continue
            if line is None:
                break
            tail.append(line)
            on_line(line)
        code = proc.wait()
    except BaseException:  # KeyboardInterrupt, Interrupted
        timer.cancel()
        stop(grace if interrupt_grace is None else interrupt_grace)
        raise
    finally:
        timer.cancel()
        _untrack(proc)
        reader.join(0.5)
        _close_pipes(proc, [reader])
    seconds = time.perf_counter() - start
    if fired.is_set():
        return RunResult(args, None, "\n".join(tail), timed_out=True, seconds=seconds)
    return RunResult(args, code, "\n".join(tail), seconds=seconds)


# --- stopping ------------------------------------------------------------------------------------------


def _interrupt_group(proc: subprocess.Popen) -> None:
    """SIGINT to the child's group (Windows: CTRL_BREAK_EVENT to its group); the child alone where there
    are no groups to signal; a kill where it cannot be interrupted at all."""
    killpg, sigint = getattr(os, "killpg", None), getattr(signal, "SIGINT", None)
    if killpg is not None and sigint is not None:
        try:
            killpg(proc.pid, sigint)
            return
        except OSError:
            pass  # the group is gone or not ours: the child alone below
    try:
        if os.name == "nt" and hasattr(signal, "CTRL_BREAK_EVENT"):
            proc.send_signal(signal.CTRL_BREAK_EVENT)
        elif sigint is not None:
            proc.send_signal(sigint)
        else:
            proc.terminate()
    except (OSError, ValueError):
        _kill_group(proc)


def _stop_politely(proc: subprocess.Popen, grace: float = STOP_GRACE_S) -> None:
    """SIGTERM to the group (torchrun passes it on to the ranks it started in sessions of their own),
    then SIGKILL after ``grace`` seconds."""
    killpg, sigterm = getattr(os, "killpg", None), getattr(signal, "SIGTERM", None)
    if killpg is None or sigterm is None:
        _kill_group(proc)
        return
    try:
        killpg(proc.pid, sigterm)
    except OSError:
        pass
    _wait(proc, grace)
    _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to the child's group; ``proc.kill()`` where there is no ``os.killpg``/``signal.SIGKILL``."""
    killpg, sigkill = getattr(os, "killpg", None), getattr(signal, "SIGKILL", None)
    if killpg is not None and sigkill is not None:
        try:
            killpg(proc.pid, sigkill)
            return
        except OSError:
            pass
    try:
        proc.kill()
    except OSError:
        pass


def run_lines(
    argv: Sequence[str],
    timeout: float,
    on_line: Callable[[str], object],
    env: Mapping[str, str] | None = None,
) -> RunResult:
    """``run`` (a time and output limit, its own process group, never raises) that also hands each stdout
    line to ``on_line`` as it comes (on the reader thread): the smoke child's JSON lines, for progress.
    ``on_line`` must not raise; if it does, the line is still kept."""
    return run(argv, timeout=timeout, env=env, on_line=on_line)
