"""Which interpreter on this machine a fix may name (pure): only one that is there (the host probe lists
``python3.X`` on PATH, and uv, which fetches any Python it is asked for), else it says what to install."""

from __future__ import annotations

from dataclasses import dataclass

from doctor.model.snapshot import Snapshot
from doctor.model.versions import major_minor

PYTHON_DOWNLOADS = "https://www.python.org/downloads/"


@dataclass(frozen=True, slots=True)
class OtherPython:
    """A Python in a range: where it is, or how to get it."""

    version: str  # "3.12"
    path: str | None  # an interpreter on this machine; None when there is none
    uv: str | None = None  # uv, when no interpreter is here but uv can fetch one

    @property
    def available(self) -> bool:
        return self.path is not None or self.uv is not None


def python_in_range(snap: Snapshot, low: str, high: str, exclude: tuple[str, ...] = ()) -> OtherPython | None:
    """The newest interpreter on this machine within ``low``..``high`` (major.minor); else, with uv, the
    newest version of the range for uv to fetch; else the newest of the range, to install. None for an empty
    range."""
    lo, hi = major_minor(low), major_minor(high)
    if not lo or not hi or lo > hi:
        return None
    here = []
    for version, path in (snap.host.pythons or {}).items():
        mm = major_minor(version)
        if mm and lo <= mm <= hi and version not in exclude:
            here.append((mm, version, path))
    if here:
        _, version, path = max(here)
        return OtherPython(version, path)
    newest = f"{hi[0]}.{hi[1]}"
    return OtherPython(newest, None, snap.host.uv)


def venv_line(other: OtherPython, folder: str, windows: bool = False) -> str | None:
    """The command that makes a virtual environment with that Python (None: it has to be installed first)."""
    if other.path:
        exe = f'& "{other.path}"' if windows and " " in other.path else other.path
        return f"{exe} -m venv {folder}"
    if other.uv:
        return f"{other.uv} venv --seed --python {other.version} {folder}"
    return None


def install_hint(other: OtherPython) -> str:
    return (f"No Python {other.version} is on this machine: install it (your distribution's "
        f"python{other.version} "
            f"package, or {PYTHON_DOWNLOADS}), or install uv, which fetches it (uv venv --python "
            f"{other.version}).")
