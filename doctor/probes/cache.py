"""The user's cache folder and how torchdoctor reads and writes entries there (stdlib only).

What is cached can always be worked out again: an entry that is missing, unreadable, corrupt or written by
another version is simply not used, and a cache that cannot be written is skipped; neither is ever an error.

- Where: ``$XDG_CACHE_HOME/torchdoctor`` (an absolute XDG_CACHE_HOME only, as the XDG spec says), else
  ``~/.cache/torchdoctor``; macOS ``~/Library/Caches/torchdoctor``; Windows ``%LOCALAPPDATA%\\torchdoctor\\Cache``.
- Off: ``TORCHDOCTOR_NO_CACHE=1`` (or ``--no-cache`` on the commands that probe) reads and writes nothing.
- Writes go to a temporary file in the same folder, then ``os.replace``: a reader sees the old entry or the
  new one, never half of one. Folders are created 0700 and entries 0600 (they hold paths of this machine).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from doctor.model.files import FileRefused, read_bytes

APP = "torchdoctor"
ENV_NO_CACHE = "TORCHDOCTOR_NO_CACHE"
MAX_ENTRY_BYTES = 8 << 20  # an inspector's answer is a few KB; a table index ~200 KB


def cache_dir(env: Mapping[str, str] | None = None, platform: str | None = None) -> str:
    """The user's cache folder for torchdoctor (module docstring); not created here. Text, not a Path: a check
    gets here without importing pathlib (~4.5 ms with urllib.parse and ipaddress)."""
    env = os.environ if env is None else env
    platform = platform or sys.platform
    home = env.get("HOME") or env.get("USERPROFILE") or os.path.expanduser("~")
    if platform == "win32":
        return os.path.join(env.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local"), APP, "Cache")
    if platform == "darwin":
        return os.path.join(home, "Library", "Caches", APP)
    xdg = env.get("XDG_CACHE_HOME") or ""
    return os.path.join(xdg if os.path.isabs(xdg) else os.path.join(home, ".cache"), APP)


def cache_disabled(env: Mapping[str, str] | None = None) -> bool:
    """TORCHDOCTOR_NO_CACHE set to anything but "", "0", "false" or "no"."""
    value = (os.environ if env is None else env).get(ENV_NO_CACHE, "")
    return value.strip().lower() not in ("", "0", "false", "no")


def read_entry(path: str | os.PathLike, limit: int = MAX_ENTRY_BYTES) -> bytes | None:
    """The bytes of a cache entry, or None when there is none (or it is not a regular file, or too big)."""
    try:
        return read_bytes(path, limit)
    except (OSError, FileRefused):
        return None


def write_entry(path: str | os.PathLike, data: bytes) -> bool:
    """Write ``data`` to ``path`` atomically (module docstring). False when it could not be written."""
    path = os.fspath(path)
    folder, name = os.path.split(path)
    temp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    try:
        os.makedirs(folder or ".", mode=0o700, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(temp, flags | getattr(os, "O_BINARY", 0), 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(temp, path)
        return True
    except OSError:
        try:
            os.unlink(temp)
        except OSError:
            pass
        return False


# --- entries keyed by what their answer rests on (inspection_cache.py, kernel_cache.py) ----------------------


def file_signature(path: str, follow: bool = True) -> list[int] | None:
    """What would change if the file changed: [mtime_ns, ctime_ns, size, inode, device, type]; None: absent."""
    import stat

    try:
        info = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return None
    return [info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_dev, stat.S_IFMT(info.st_mode)]


def entry_path(folder: str, key: dict) -> str:
    """Where the entry for ``key`` lives: only a file name from it; the whole key is compared inside the entry
    (no hashlib: ~3 ms to import)."""
    import json
    import zlib

    data = json.dumps(key, sort_keys=True).encode("utf-8", "surrogateescape")
    return os.path.join(folder, f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}.json")


def read_keyed_entry(folder: str, key: dict) -> dict | None:
    """The JSON object stored for ``key`` when it records exactly that key; None when there is none, it is
    corrupt, or it was written for another key (raises nothing)."""
    import json

    try:
        raw = read_entry(entry_path(folder, key))
        if raw is None:
            return None
        entry = json.loads(raw)
        if not isinstance(entry, dict) or entry.get("key") != json.loads(json.dumps(key)):
            return None
        return entry
    except (ValueError, TypeError, RecursionError):
        return None


def write_keyed_entry(folder: str, key: dict, entry: dict) -> bool:
    """Write ``entry`` (a JSON-able dict) with ``key`` in it, atomically; False when it could not be written."""
    import json

    try:
        data = json.dumps(dict(entry, key=key), sort_keys=True).encode("utf-8", "surrogateescape")
    except (ValueError, TypeError, RecursionError):
        return False
    return write_entry(entry_path(folder, key), data)
