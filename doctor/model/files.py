"""Bounded, typed reads: the one way torchdoctor reads a file it is handed or probes (stdlib only).

Only regular files are read. The file is opened with O_NONBLOCK (a FIFO nobody writes cannot block the
open) and then ``fstat``-ed: a FIFO, a device (``/dev/zero``, ``/dev/urandom``), a socket or a folder is
refused before a byte is read. The size is checked on the bytes read, never on ``stat`` (which says 0 for
``/proc`` files and devices): at most ``limit`` bytes are ever read, plus one to know there was more.
Numbers read from such files go through ``bounded_int`` (CPython refuses int() of 4,300+ digits).
"""

from __future__ import annotations

import math
import os
import re
import stat

_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
# reads past what fstat announced (/proc files announce 0): below malloc's mmap threshold
_SMALL_CHUNK = 64 << 10
MAX_DIGITS = 18  # an integer a file or a variable may give us: far below CPython's 4,300-digit limit


class FileRefused(ValueError):
    """Not read: ``str()`` is the reason ("a FIFO, not a regular file", "more than 20.0 MB", ...)."""


def kind_of(mode: int) -> str:
    """What a file is, in words, for messages: "a FIFO", "a character device", "a folder"..."""
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(
    path: str | os.PathLike, limit: int, *, truncate: bool = False, regular: bool = False
) -> bytes:
    """At most ``limit`` bytes of the regular file ``path``. More than that raises FileRefused, or with
    ``truncate`` gives the first ``limit`` bytes. Anything but a regular file raises FileRefused; a file
    that cannot be opened or read raises OSError (with ``strerror``).

    ``regular``: the caller has just seen a regular file there (os.scandir's entry type), so the look before
    opening is skipped; the opened descriptor is still checked."""
    path = os.fspath(path)
    if not regular:
        mode = os.stat(path).st_mode  # opening a device can have effects (a tape rewinds): look first
        if not stat.S_ISREG(mode):
            raise FileRefused(f"{kind_of(mode)}, not a regular file")
    fd = os.open(path, _FLAGS)
    try:
        info = os.fstat(fd)  # swapped for something else since the stat?
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(f"{kind_of(info.st_mode)}, not a regular file")
        expected = info.st_size  # 0 for /proc files: those are read by their bytes, to the end
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            # What fstat announced and one byte more (which shows the end or a file grown past it): asking for
            # 1 MB every time allocated a 1 MB buffer per read, for reports of a few KB.
            want = min(expected - size + 1 if expected > size else _SMALL_CHUNK, limit + 1 - size)
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size == expected and len(chunk) < want:
                break  # every byte fstat counted, and the read stopped short of what it asked: the end
    finally:
        os.close(fd)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if len(data) > limit:
        if not truncate:
            raise FileRefused(f"more than {megabytes(limit)}")
        data = data[:limit]
    return data


def read_text(path: str | os.PathLike, limit: int, *, truncate: bool = True) -> str | None:
    """The text (UTF-8, undecodable bytes replaced) of at most ``limit`` bytes of a regular file, or None
    when it is absent, unreadable or not a regular file. For probes, which never raise."""
    try:
        return read_bytes(path, limit, truncate=truncate).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return None


def megabytes(size: int) -> str:
    return f"{size / (1 << 20):.1f} MB"


def bounded_int(text: object, max_digits: int = MAX_DIGITS) -> int | None:
    """An optionally signed decimal integer with at most ``max_digits`` digits, else None."""
    found = re.fullmatch(r"\s*([+-]?)(\d+)\s*", str(text))
    if found is None or len(found.group(2)) > max_digits:
        return None
    return int(found.group(1) + found.group(2))


def bounded_float(text: object, low: float = 0.0, high: float = 7 * 24 * 3600.0) -> float | None:
    """A finite number in ``(low, high]``, else None (nan, inf, 1e308, -1, "abc")."""
    try:
        value = float(str(text).strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and low < value <= high else None


def write_text(path: str | os.PathLike, text: str, append: bool = False) -> None:
    """Write (or append) ``text`` as UTF-8. Opened without blocking, so a FIFO nobody reads is an error at
    once (OSError, ENXIO), never a hang; a FIFO with a reader, /dev/stdout or a regular file are written."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_APPEND if append else os.O_TRUNC
    fd = os.open(os.fspath(path), flags | getattr(os, "O_BINARY", 0), 0o666)
    try:
        if getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)  # a reader is there (or it is a file): wait for it as usual
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def toml_module():
    """tomllib (3.11+) or its backport tomli (the dependency pyproject.toml declares for 3.10); None when an
    install skipped that dependency."""
    try:
        import tomllib
    except ImportError:
        try:
            import tomli as tomllib
        except ImportError:
            return None
    return tomllib
