"""The one way torchdoctor runs a subprocess: argv lists, a timeout always, never raises.

"Not found", a timeout, a crash by signal and undecodable output all become a ``RunResult``
that the probes turn into facts. Tests pass a fake runner instead of patching subprocess.
"""

from __future__ import annotations

import os
import signal
import subprocess
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
            try:
                signame = signal.Signals(self.signal).name
            except ValueError:
                signame = f"signal {self.signal}"
            return f"{name} killed by {signame}"
        return f"{name} exited with {self.returncode}"


Runner = Callable[..., RunResult]


def run(
    argv: Sequence[str],
    timeout: float = 10.0,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    cwd: str | None = None,
) -> RunResult:
    import time

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
            start_new_session=True,  # so a timeout can kill the whole process group
        )
    except FileNotFoundError:
        return RunResult(args, None, not_found=True, seconds=time.perf_counter() - start)
    except OSError as exc:
        return RunResult(args, None, error=exc.strerror or str(exc), seconds=time.perf_counter() - start)
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
    return RunResult(args, proc.returncode, _decode(out), _decode(err), seconds=time.perf_counter() - start)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        proc.kill()


def _drain(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    try:
        return proc.communicate(timeout=2)
    except (subprocess.TimeoutExpired, OSError, ValueError):
        return b"", b""


def _decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")
