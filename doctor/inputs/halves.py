"""Reading many files on two cores: the second half of the list in a forked copy of this process.

`fleet summarize` spends ~60 % of its time in ``json.loads`` of 10,000 small reports, which one core
cannot do faster. With a second core, a forked child reads the second half while this process reads the
first; the child hands back its results pickled through a pipe (it is this very process, so nothing
untrusted is unpickled). Whatever goes wrong with the child (it cannot start, crashes, is killed, or
sends back something short), its half is read here after all: the answer is always the same list.

Only where it is safe and pays: a POSIX fork, a single thread (forking a threaded process can deadlock
the child), at least two usable CPUs and enough items. Ctrl-C reaches both processes: the child leaves
quietly, this process stops and reaps it before the interrupt goes on.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

MIN_ITEMS = 2000  # below this a fork (~1-2 ms) and the pickling do not pay
_PIPE_CHUNK = 64 << 10  # a pipe's buffer: a larger read request only allocates a larger buffer


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def can_split(count: int) -> bool:
    return (
        count >= MIN_ITEMS
        and hasattr(os, "fork")
        and threading.active_count() == 1
        and usable_cpus() >= 2
    )


def map_in_halves(func: Callable, items: Sequence) -> list:
    """``[func(item) for item in items]``, the second half computed in a forked child when ``can_split``.
    ``func`` must not raise and must return picklable values."""
    if not can_split(len(items)):
        return [func(item) for item in items]
    half = len(items) // 2
    try:
        read_end, write_end = os.pipe()
        pid = os.fork()
    except OSError:
        return [func(item) for item in items]
    if pid == 0:  # the child: compute, send, and leave without running the parent's exit handlers
        status = 1
        try:
            os.close(read_end)
            from pickle import HIGHEST_PROTOCOL, dumps

            _write_all(write_end, dumps([func(item) for item in items[half:]], protocol=HIGHEST_PROTOCOL))
            status = 0
        except BaseException:  # noqa: BLE001 - Ctrl-C or anything else: the parent reads this half itself
            pass
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        first = [func(item) for item in items[:half]]
        data = _read_all(read_end)
    except BaseException:
        _stop(pid)
        raise
    finally:
        os.close(read_end)
    second = _received(data, pid, len(items) - half)
    return first + (second if second is not None else [func(item) for item in items[half:]])


def _received(data: bytes, pid: int, expected: int) -> list | None:
    """The child's list when it ended well and sent all of it, else None."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    if status != 0:
        return None
    try:
        from pickle import loads

        second = loads(data)
    except Exception:  # noqa: BLE001 - cut short: this half is read again
        return None
    return second if isinstance(second, list) and len(second) == expected else None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[:_PIPE_CHUNK]):]


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, _PIPE_CHUNK)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _stop(pid: int) -> None:
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass
