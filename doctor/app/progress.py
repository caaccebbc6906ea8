"""What a run is doing, on stderr, while it does it: a one-line rich status ("reading the NVIDIA driver",
"importing torch in ~/venv/bin/python", "smoke test: matmul on GPU 0") that disappears before the
report is printed.

Only on a terminal: nothing when stderr is piped or redirected, TERM=dumb, with --json or -q, so logs,
CI and scripts never see it. And only for a run that lasts: the status starts after DELAY_S, so a check that
is done sooner (a static check on a known machine) shows no flicker.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager

from doctor.model.i18n import Msg, localize

DELAY_S = 0.3  # a run done sooner shows no status at all


def wanted(quiet: bool = False, json_output: bool = False, stream=None) -> bool:
    """Whether to show progress: a terminal on stderr, not dumb, and neither -q nor JSON output."""
    if quiet or json_output:
        return False
    stream = stream or sys.stderr
    try:
        if not stream.isatty():
            return False
    except (AttributeError, ValueError, OSError):
        return False
    return os.environ.get("TERM", "") not in ("dumb", "unknown")


class Progress:
    """The probes' ``progress(task, words)`` callback behind one status line. Tasks run side by side (the
    driver, the packages, the smoke test); the line shows the one that moved last, and when it ends, the
    one that is still running."""

    def __init__(self, stream=None) -> None:
        from doctor.render.console import console

        self._console = console(stream or sys.stderr, soft_wrap=False)
        self._status = self._console.status(localize(Msg("checking this machine")), spinner="dots")
        self._tasks: dict[str, str] = {}
        self._lock = threading.Lock()

    def __call__(self, task: str, words: str | None) -> None:
        with self._lock:
            self._tasks.pop(task, None)
            if words is not None:
                self._tasks[task] = words  # last in: shown
            shown = next(reversed(self._tasks.values()), Msg("checking this machine"))
            self._status.update(localize(shown))  # in the run's language

    def start(self) -> None:
        self._status.start()

    def stop(self) -> None:
        self._status.stop()


class _Later:
    """The callback the probes get: it keeps the tasks' words until the status starts (``start``, on a timer
    thread after DELAY_S), then passes them on. ``stop`` ends the status, or keeps it from ever starting."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[str, str] = {}
        self._display: Progress | None = None
        self._stopped = False

    def __call__(self, task: str, words: str | None) -> None:
        with self._lock:
            display = self._display
            if display is None:
                self._tasks.pop(task, None)
                if words is not None:
                    self._tasks[task] = words
                return
        display(task, words)

    def start(self) -> None:
        try:
            display = Progress()  # imports rich: only a run that lasts gets here
        except Exception:  # noqa: BLE001 - no status line is better than a traceback from a timer thread
            return
        with self._lock:
            if self._stopped:
                return
            for task, words in self._tasks.items():  # in the order they came: the last one shows
                display(task, words)
            display.start()
            self._display = display

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            display = self._display
        if display is not None:
            display.stop()


@contextmanager
def progress(show: bool, delay: float = DELAY_S):
    """``with progress(show) as tell:`` gives the callback for ProbeOptions.progress (None when not shown);
    the status appears after ``delay`` seconds and is gone when the block ends, before anything else is
    printed."""
    if not show:
        yield None
        return
    later = _Later()
    timer = threading.Timer(delay, later.start)
    timer.daemon = True
    timer.start()
    try:
        yield later
    finally:
        timer.cancel()
        later.stop()
