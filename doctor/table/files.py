"""Where the bundled data files are, and how one is read: doctor/compat_tables/ in an installed
wheel, <repo>/compat_tables/ in a checkout."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from doctor.errors import TableError
from doctor.model.files import FileRefused, read_bytes


def bundled_path(name: str) -> str:
    """The bundled data file ``name`` ("pytorch.json", "signatures.json"), as text, the form
    os.path and open take."""
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    installed = os.path.join(package, "compat_tables", name)
    if os.path.isfile(installed):
        return installed
    return os.path.join(os.path.dirname(package), "compat_tables", name)


def bundled(name: str) -> Path:
    """``bundled_path(name)`` as a Path."""
    return Path(bundled_path(name))


def read_json(path: str, limit: int, what: str) -> Any:
    """A bounded JSON data file, or one TableError line naming ``what`` ("compat table", "accelerator
    table") and the file: a regular file of bounded size only (/dev/zero or a FIFO is refused, not read
    forever), UTF-8, JSON not nested past the parser's depth."""
    try:
        text = read_bytes(path, limit).decode("utf-8")
    except (OSError, UnicodeDecodeError, FileRefused) as exc:
        raise TableError(f"{what} {path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TableError(
            f"{what} {path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise TableError(f"{what} {path}: JSON nested too deeply") from None
