"""The command as a process: what the CLI wraps every command in. Kept light (signal and threading,
which typer loads anyway): `torchdoctor --help` pays nothing for it.

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


@contextlib.contextmanager
def guard() -> Iterator[None]:
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
        runner = sys.modules.get("doctor.runner")  # not loaded: no child was ever started
        if runner is not None:
            runner.kill_running()
        for sig, handler in previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(sig, handler)
