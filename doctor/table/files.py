"""Where the bundled data files are (stdlib only, cheap to import): doctor/compat_tables/ in an installed
wheel, <repo>/compat_tables/ in a checkout."""

from __future__ import annotations

from pathlib import Path


def bundled(name: str) -> Path:
    """The bundled data file ``name`` ("pytorch.json", "signatures.json")."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "compat_tables" / name
    if installed.is_file():
        return installed
    return package.parent / "compat_tables" / name
