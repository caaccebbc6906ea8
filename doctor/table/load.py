"""The compatibility table: torch releases, wheel arch lists, CUDA driver floors, driver branches, GPUs,
CUDA toolkits, cuDNN and the companions' CUDA checks.

The facts live in ``compat_tables/pytorch.json`` (data, with a source and a confidence on every row);
the table package only reads that one file, validates it (parse.py) and builds indexes (compat.py) so
that every lookup is a dict access. Any problem with the file is a ``TableError`` naming the file and
the field, never a traceback. Pure: stdlib + packaging, no subprocess, no environment.
"""

from __future__ import annotations

from pathlib import Path

from doctor.errors import TableError
from doctor.table.accelerators import load_accelerators
from doctor.table.compat import CompatTable
from doctor.table.files import bundled, read_json
from doctor.table.parse import CONFIDENCES, PLATFORMS, SCHEMA_VERSION, _Parser

__all__ = ["CONFIDENCES", "PLATFORMS", "SCHEMA_VERSION", "CompatTable", "default_table_path", "load_table"]


MAX_TABLE_BYTES = 32 << 20  # the bundled table is ~200 KB


def default_table_path() -> Path:
    """The bundled table: doctor/compat_tables/ in an installed wheel, <repo>/compat_tables/ in a checkout."""
    return bundled("pytorch.json")


def load_table(path: str | Path | None = None) -> CompatTable:
    """Load and validate a table (None = the bundled one), with the accelerator facts beside it. Read afresh
    on every call: a run loads it once and hands it on (doctor/app/run.py)."""
    resolved = Path(path).expanduser() if path is not None else default_table_path()
    try:
        resolved = resolved.resolve()
        resolved.stat()  # a missing file: this one line, before anything else is tried
    except OSError as exc:
        raise TableError(f"compat table {resolved}: cannot read: {exc.strerror or exc}") from None
    path = str(resolved)
    data = read_json(path, MAX_TABLE_BYTES, "compat table")
    try:
        table = _Parser(path).table(data)
    except (ValueError, RecursionError) as exc:  # a number past CPython's 4,300-digit limit, say
        raise TableError(f"compat table {path}: {str(exc).splitlines()[0][:200]}") from None
    # The accelerator facts travel with the table: an accelerators.json beside a --table file, else the
    # bundled one.
    beside = Path(path).with_name("accelerators.json")
    table.accelerators = load_accelerators(beside if beside.is_file() else None)
    return table
