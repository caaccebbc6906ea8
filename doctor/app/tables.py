"""The compatibility table, loaded once in a compact form and then reused while nothing it rests on changed.

Parsing and validating ``compat_tables/pytorch.json`` (doctor/table/) costs ~8 ms a run; the indexed
``CompatTable`` it builds, pickled in the user's cache folder (doctor/probes/cache.py), loads in ~2 ms. An
entry is used only when its header matches what the table rests on now: the table file's ``stat`` (size,
mtime and ctime in ns, inode, device), the ``stat`` of every module of doctor/table/ and doctor/model/ (the
classes the pickle holds), torchdoctor's version and the Python version. Anything else (no entry, another key, a corrupt or
foreign entry, an entry not owned by this user or writable by others) means the table is parsed again, never
a stale table. ``--no-cache`` / TORCHDOCTOR_NO_CACHE=1 bypass it.
"""

from __future__ import annotations

import json
import os
import sys

from doctor import __version__

MAGIC = b"torchdoctor-table 1\n"
FOLDER = "tables"


def load_table_fast(path: str | os.PathLike | None = None, cache: bool = True):
    """``doctor.table.load.load_table(path)``, through the cache when it is on. A hit imports neither the
    JSON parser nor the validator (doctor/table/load.py, parse.py)."""
    from doctor.probes.cache import cache_dir, cache_disabled, read_entry, write_entry

    if not cache or cache_disabled():
        from doctor.table.load import load_table

        return load_table(path)
    from doctor.table.files import bundled_path

    resolved = os.path.expanduser(os.fspath(path)) if path is not None else bundled_path("pytorch.json")
    key = _key(resolved)
    entry = os.path.join(cache_dir(), FOLDER, _digest(key) + ".pickle") if key is not None else None
    table = _read(entry, key, read_entry) if entry is not None else None
    if table is not None:
        return table
    from doctor.table.load import load_table

    table = load_table(path)  # without a key, this says why the file cannot be read
    if entry is None:
        return table
    _write(entry, key, table, write_entry)
    return table


def _stat(path: str) -> list[int] | None:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]


def _key(table_path: str) -> str | None:
    """What the parsed table rests on, as one string (module docstring); None when the file cannot be read."""
    try:
        real = os.path.realpath(table_path)
    except (OSError, ValueError):
        return None
    signature = _stat(real)
    if signature is None:
        return None
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    modules = []
    for layer in ("table", "model"):  # the classes a pickled table holds, and what they are built from
        try:
            names = sorted(n for n in os.listdir(os.path.join(package, layer)) if n.endswith(".py"))
        except OSError:
            return None
        modules += [[f"{layer}/{n}", _stat(os.path.join(package, layer, n))] for n in names]
    return json.dumps({"table": real, "stat": signature, "tool": __version__, "python": list(sys.version_info[:3]),
                       "code": modules}, sort_keys=True)


def _digest(key: str) -> str:
    import zlib

    data = key.encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def _read(entry: str, key: str, read_entry):
    raw = read_entry(entry)
    if raw is None or not raw.startswith(MAGIC):
        return None
    try:
        info = os.stat(entry)
        if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & 0o022):
            return None  # only an entry this user wrote and nobody else can change is unpickled
        header, _, body = raw[len(MAGIC):].partition(b"\n")
        if header.decode("utf-8", "surrogateescape") != key:
            return None
        try:  # the C unpickler alone: pickle.py around it costs ~2 ms to import, for nothing a load uses
            from _pickle import loads
        except ImportError:  # an interpreter without the accelerator
            from pickle import loads

        from doctor.table.compat import CompatTable

        table = loads(body)
        return table if isinstance(table, CompatTable) else None
    except Exception:  # noqa: BLE001 - a corrupt entry of any kind is a miss; the table is parsed again
        return None


def _write(entry: str, key: str, table, write_entry) -> None:
    try:
        import pickle

        body = pickle.dumps(table, protocol=4)
    except Exception:  # noqa: BLE001 - a table that cannot be pickled is simply not cached
        return
    write_entry(entry, MAGIC + key.encode("utf-8", "surrogateescape") + b"\n" + body)
