"""The small readers every environment probe uses: files under ``root`` (a fake root in tests), never raising."""

from __future__ import annotations

import os


def under(root: str, path: str) -> str:
    """``path`` inside ``root``; the real path when ``root`` is the real one."""
    return os.path.join(root, path.lstrip("/")) if root not in ("", "/") else path


def read_text(root: str, path: str, limit: int = 1 << 20) -> str | None:
    """The file's text (at most ``limit`` bytes), or None when it cannot be read."""
    try:
        with open(under(root, path), encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except OSError:
        return None


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
