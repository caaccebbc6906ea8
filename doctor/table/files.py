"""Where the bundled data files are (stdlib only): doctor/compat_tables/ in an installed
wheel, <repo>/compat_tables/ in a checkout."""

from __future__ import annotations

import os
from pathlib import Path


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
