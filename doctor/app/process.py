"""The command as a process: what the CLI wraps every command in. Kept light (signal and threading,
which typer loads anyway): `torchdoctor --help` pays nothing for it.

Output into a pipe whose reader has gone goes to /dev/null (``ReaderMayLeave``): the command finishes and
its exit code stands. Output that cannot be written for another reason (a full disk) goes quiet the same way,
and ``output_failed`` says so in one line when the command ends (exit 2).

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

    def __init__(self, stream, name: str) -> None:
        self._stream = stream
        self.name = name
        self.failed: OSError | None = None  # a write that failed for another reason (a full disk): not chosen

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            self._left(exc)
            return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self._left(exc)

    def _left(self, exc: OSError) -> None:
        """A full disk (or any other write error) goes quiet the same way, so that it cannot stop a fix's
        installer half-way either; unlike a reader that left, it is reported when the command ends."""
        if not isinstance(exc, BrokenPipeError) and self.failed is None:
            self.failed = exc
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


def _fill_closed_streams() -> None:
    """A run started with stdout or stderr closed (``cmd >&-``): Python sets ``sys.stdout`` to None, and the
    next file opened gets descriptor 1, into which every child's output would then go. The descriptor gets
    /dev/null, and the stream writes there: no reader, as with a pipe whose reader left (the exit code is the
    verdict's)."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, "w", encoding="utf-8", errors="replace", closefd=False))
        except OSError:
            continue


def _reader_may_leave() -> list[ReaderMayLeave]:
    """stdout and stderr wrapped, where they are not terminals (a terminal that goes away is SIGHUP's,
    below)."""
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
        wrapped.append(ReaderMayLeave(stream, name))
        setattr(sys, name, wrapped[-1])
    return wrapped


def output_failed(code: int) -> int:
    """``code``, or 2 when stdout or stderr could not be written for a reason other than a reader that left
    (a full disk): said in one line on stderr, with the exit code the run itself ended with. Codes that
    already say the run did not end normally (3, 5, 6, 130) stay."""
    failed = [s for s in (_unwrap(sys.stdout), _unwrap(sys.stderr)) if s is not None and s.failed is not None]
    if not failed:
        return code
    from doctor import exitcodes
    from doctor.errors import one_line
    from doctor.model.i18n import Msg, localize

    for stream in failed:
        said = Msg(
            "could not write to {stream}: {why}; what it shows is incomplete (the run itself ended "
            "with "
            "exit {code})",
            stream=stream.name,
            why=stream.failed.strerror or str(stream.failed),
            code=code,
        )
        print(one_line(f"torchdoctor: {localize(said)}"), file=sys.stderr)
    ended = (exitcodes.INTERNAL, exitcodes.FIX_FAILED, exitcodes.REFUSED, exitcodes.INTERRUPTED)
    return code if code in ended else exitcodes.USAGE


def _unwrap(stream) -> ReaderMayLeave | None:
    while stream is not None and not isinstance(stream, ReaderMayLeave):  # under streams.FittingWriter
        stream = getattr(stream, "_stream", None)
    return stream


@contextlib.contextmanager
def guard() -> Iterator[None]:
    _fill_closed_streams()
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
            stream.flush()  # a closed pipe or a full disk shows up here, not in the interpreter's last flush
        runner = sys.modules.get("doctor.runner")  # not loaded: no child was ever started
        if runner is not None:
            runner.kill_running()
            runner.kill_leftovers()
        for sig, handler in previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(sig, handler)
