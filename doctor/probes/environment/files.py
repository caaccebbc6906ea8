"""The small readers every environment probe uses: files under ``root`` (a fake root in tests), never
raising."""

from __future__ import annotations

import os

from doctor.model.files import read_text as bounded_read_text


def under(root: str, path: str) -> str:
    """``path`` inside ``root``; the real path when ``root`` is the real one."""
    return os.path.join(root, path.lstrip("/")) if root not in ("", "/") else path


def read_text(root: str, path: str, limit: int = 1 << 20) -> str | None:
    """The file's text (at most ``limit`` bytes), or None when it cannot be read or is not a regular file
    (a FIFO would block, /dev/zero would never end: doctor/model/files.py)."""
    return bounded_read_text(under(root, path), limit)


def exists(root: str, path: str) -> bool:
    """Whether ``path`` is there (a dangling symlink counts: its name is the evidence)."""
    return os.path.lexists(under(root, path))


def scandir_names(path: str) -> list[str] | None:
    """The sorted names in a real folder, or None when it cannot be listed."""
    try:
        with os.scandir(path) as entries:
            return sorted(entry.name for entry in entries)
    except OSError:
        return None
