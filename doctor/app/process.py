"""The command as a process: what the CLI wraps every command in. Kept light (signal and threading,
which typer loads anyway): `torchdoctor --help` pays nothing for it.

Output into a pipe whose reader has gone goes to /dev/null (``ReaderMayLeave``): the command finishes and
its exit code stands.

Inside ``guard``, SIGTERM and SIGHUP are raised in the main thread like Ctrl-C (``Interrupted`` is a
KeyboardInterrupt), so every use case ends the way it ends on Ctrl-C: the runner stops the child it
waits for with its whole process group, and fix restores the environment. Whichever way the command
ends, every child still running is ended (doctor/runner.py's ``kill_running``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C's KeyboardInterrupt (exit 130, "interrupted")."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_signal(signum, frame) -> None:
    if signum == getattr(signal, "SIGHUP", None):
        _drop_dead_terminal()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Interrupted(signum)


def _drop_dead_terminal() -> None:
    """SIGHUP: the terminal is gone; writing to it would fail (EIO) in the middle of the way back."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            if stream is not None and stream.isatty():
                setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115 - lives as long as the process
        except (OSError, ValueError):
            pass


class ReaderMayLeave:
    """stdout or stderr into a pipe or socket whose reader may go before we are done (`| head`, `| grep -m1`,
    a closed ssh session). Python ignores SIGPIPE, so the next write would raise BrokenPipeError wherever it
    happens to be: in the middle of a fix's installer, which would then be stopped half-way with nothing
    restored, or before a check returns its verdict. Once the reader has gone, the stream behaves like
    /dev/null instead: the command finishes as it would with `> /dev/null`, and its exit code says how it
    ended. Everything else is the wrapped stream's, as with streams.FittingWriter."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._left()
            return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._left()

    def _left(self) -> None:
        try:  # the recipe in Python's documentation of SIGPIPE: what is still buffered goes to /dev/null
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)
        except (OSError, AttributeError, ValueError):  # no file descriptor (embedded, tests): a fresh stream
            self._stream = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _reader_may_leave() -> list[ReaderMayLeave]:
    """stdout and stderr wrapped, where they are not terminals (a terminal that goes away is SIGHUP's, below)."""
    wrapped = []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, ReaderMayLeave):
            continue
        try:
            if stream.isatty():
                continue
        except (OSError, ValueError, AttributeError):
            continue
        wrapped.append(ReaderMayLeave(stream))
        setattr(sys, name, wrapped[-1])
    return wrapped


@contextlib.contextmanager
def guard() -> Iterator[None]:
    wrapped = _reader_may_leave()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for name in ("SIGINT", "SIGTERM", "SIGHUP"):
            sig = getattr(signal, name, None)
            if sig is None:
                continue
            try:
                previous[sig] = signal.signal(sig, _on_signal)
            except (OSError, ValueError):
                pass
    try:
        yield
    finally:
        for stream in wrapped:
            stream.flush()  # a reader that left shows up here, not in the interpreter's last flush
        runner = sys.modules.get("doctor.runner")  # not loaded: no child was ever started
        if runner is not None:
            runner.kill_running()
        for sig, handler in previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(sig, handler)
