"""The one way torchdoctor runs a subprocess: argv lists, a timeout always, never raises.

"Not found", a timeout, a crash by signal and undecodable output all become a ``RunResult``
that the probes turn into facts. Tests pass a fake runner instead of patching subprocess.

``run`` collects the output; ``stream_run`` (the steps of `torchdoctor fix`) hands each line over as it
comes. Both start the child in its own process group (POSIX: a new session; Windows:
``CREATE_NEW_PROCESS_GROUP``) so that a timeout stops the whole tree where the platform allows, and
fall back to killing the child alone where it does not (no ``os.killpg``/``signal.SIGKILL`` on Windows).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass
class RunResult:
    argv: list[str]
    returncode: int | None  # None when it never ran or was killed for the timeout
    stdout: str = ""
    stderr: str = ""
    not_found: bool = False
    timed_out: bool = False
    error: str | None = None  # OSError text when it could not start
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def signal(self) -> int | None:
        """The signal number when the process was killed by one (POSIX: negative return code)."""
        if self.returncode is not None and self.returncode < 0:
            return -self.returncode
        return None

    def describe(self) -> str:
        """A short reason for logs and facts: 'not found', 'timed out after 5s', 'exit 2'..."""
        name = os.path.basename(self.argv[0]) if self.argv else "?"
        if self.not_found:
            return f"{name} not found"
        if self.timed_out:
            return f"{name} timed out after {self.seconds:.0f}s"
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

# Children of run() still running, so that Ctrl-C can end them at once (they run in their own
# process groups, which the terminal's SIGINT does not reach).
_LIVE: set[subprocess.Popen] = set()
_LIVE_LOCK = threading.Lock()


def kill_running() -> None:
    """End every child run() is waiting for (on Ctrl-C: the waiting threads then return at once)."""
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        _kill_group(proc)


def run(
    argv: Sequence[str],
    timeout: float = 10.0,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    cwd: str | None = None,
) -> RunResult:
    args = [str(a) for a in argv]
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            **_new_group(),  # so a timeout can kill the whole process group
        )
    except FileNotFoundError:
        return RunResult(args, None, not_found=True, seconds=time.perf_counter() - start)
    except OSError as exc:
        return RunResult(args, None, error=exc.strerror or str(exc), seconds=time.perf_counter() - start)
    with _LIVE_LOCK:
        _LIVE.add(proc)
    try:
        out, err = proc.communicate(stdin.encode() if stdin is not None else None, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = _drain(proc)
        return RunResult(
            args,
            None,
            _decode(out),
            _decode(err),
            timed_out=True,
            seconds=time.perf_counter() - start,
        )
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)
    return RunResult(args, proc.returncode, _decode(out), _decode(err), seconds=time.perf_counter() - start)


STREAM_TAIL = 200  # lines of a streamed step's output kept for the failure report
DRAIN_S = 5.0  # after the child exits, how long a grandchild may keep the output pipe open


def stream_run(
    argv: Sequence[str],
    timeout: float,
    on_line: Callable[[str], object],
    env: Mapping[str, str] | None = None,
    grace: float = 15.0,
) -> RunResult:
    """Like ``run``, but stdout and stderr together go to ``on_line`` line by line as they come (called
    on this thread). On the timeout the child's group is interrupted (SIGINT: pip rolls back a half-done
    install on it), then killed after ``grace`` seconds; the result says ``timed_out``. Never raises,
    except that a KeyboardInterrupt is passed on after the child got the same treatment."""
    args = [str(a) for a in argv]
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            **_new_group(),
        )
    except FileNotFoundError:
        return RunResult(args, None, not_found=True, seconds=time.perf_counter() - start)
    except OSError as exc:
        return RunResult(args, None, error=exc.strerror or str(exc), seconds=time.perf_counter() - start)
    fired = threading.Event()

    def stop() -> None:
        """Interrupt, wait ``grace``, kill. Best effort: never raises (it runs on the timer thread too)."""
        _interrupt_group(proc)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
        except Exception:  # noqa: BLE001 - a timer thread must not die with the child still running
            _kill_group(proc)

    def on_timeout() -> None:
        fired.set()
        stop()

    lines: queue.Queue[str | None] = queue.Queue()
    assert proc.stdout is not None
    reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
    reader.start()
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
    except KeyboardInterrupt:
        timer.cancel()
        stop()
        raise
    finally:
        timer.cancel()
    seconds = time.perf_counter() - start
    if fired.is_set():
        return RunResult(args, None, "\n".join(tail), timed_out=True, seconds=seconds)
    return RunResult(args, code, "\n".join(tail), seconds=seconds)


def _pump(stream, out: queue.Queue) -> None:
    try:
        for raw in stream:
            out.put(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
    except (OSError, ValueError):
        pass
    finally:
        out.put(None)


def _new_group() -> dict:
    """Popen options that start the child in a process group of its own."""
    if os.name == "nt":
        return {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0x200)}
    return {"start_new_session": True}


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


def _drain(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    try:
        return proc.communicate(timeout=2)
    except (subprocess.TimeoutExpired, OSError, ValueError):
        return b"", b""


def _decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def run_lines(
    argv: Sequence[str],
    timeout: float,
    on_line: Callable[[str], object],
    env: Mapping[str, str] | None = None,
) -> RunResult:
    """Like ``run`` (stdout and stderr apart, a time limit, its own process group, never raises), but each
    stdout line also goes to ``on_line`` as it comes (on a reader thread): the smoke child's JSON lines,
    for progress. ``on_line`` must not raise; if it does, the line is still kept."""
    args = [str(a) for a in argv]
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            **_new_group(),
        )
    except FileNotFoundError:
        return RunResult(args, None, not_found=True, seconds=time.perf_counter() - start)
    except OSError as exc:
        return RunResult(args, None, error=exc.strerror or str(exc), seconds=time.perf_counter() - start)
    with _LIVE_LOCK:
        _LIVE.add(proc)
    out: list[bytes] = []
    err: list[bytes] = []

    def read_out() -> None:
        assert proc.stdout is not None
        try:
            for raw in proc.stdout:
                out.append(raw)
                try:
                    on_line(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
                except Exception:  # noqa: BLE001 - a progress display must never cost the evidence
                    pass
        except (OSError, ValueError):
            pass

    def read_err() -> None:
        assert proc.stderr is not None
        try:
            for raw in proc.stderr:
                err.append(raw)
        except (OSError, ValueError):
            pass

    readers = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)
    for reader in readers:  # a grandchild may hold the pipes open: do not wait on it for long
        reader.join(timeout=2 if timed_out else DRAIN_S)
    seconds = time.perf_counter() - start
    stdout, stderr = _decode(b"".join(out)), _decode(b"".join(err))
    if timed_out:
        return RunResult(args, None, stdout, stderr, timed_out=True, seconds=seconds)
    return RunResult(args, proc.returncode, stdout, stderr, seconds=seconds)
