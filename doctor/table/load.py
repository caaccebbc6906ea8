"""The compatibility table: torch releases, wheel arch lists, CUDA driver floors, driver branches, GPUs,
CUDA toolkits, cuDNN and the companions' CUDA checks.

The facts live in ``compat_tables/pytorch.json`` (data, with a source and a confidence on every row);
the table package only reads that one file, validates it (parse.py) and builds indexes (compat.py) so
that every lookup is a dict access. Any problem with the file is a ``TableError`` naming the file and
the field, never a traceback. Pure: stdlib + packaging, no subprocess, no environment.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from doctor.errors import TableError
from doctor.table.compat import CompatTable
from doctor.table.files import bundled
from doctor.table.parse import CONFIDENCES, PLATFORMS, SCHEMA_VERSION, _Parser

__all__ = ["CONFIDENCES", "PLATFORMS", "SCHEMA_VERSION", "CompatTable", "default_table_path", "load_table"]


def default_table_path() -> Path:
    """The bundled table: doctor/compat_tables/ in an installed wheel, <repo>/compat_tables/ in a checkout."""
    return bundled("pytorch.json")


def load_table(path: str | Path | None = None) -> CompatTable:
    """Load and validate a table (None = the bundled one). Cached per file path and modification time."""
    resolved = Path(path).expanduser() if path is not None else default_table_path()
    try:
        resolved = resolved.resolve()
        stat = resolved.stat()
    except OSError as exc:
        raise TableError(f"compat table {resolved}: cannot read: {exc.strerror or exc}") from None
    return _load_cached(str(resolved), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, size: int) -> CompatTable:
    del mtime_ns, size  # cache keys only: an edited file is read again
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TableError(
            f"compat table {path}: cannot read: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TableError(
            f"compat table {path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    return _Parser(path).table(data)
