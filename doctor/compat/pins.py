"""Which torch the user or the project asks for (pure): ``--torch`` (or ``[tool.torchdoctor] torch``) first,
else what the target project pins (doctor/probes/project.py read it).

The project's statements combine in this order: a lock file's resolved version (uv.lock, poetry.lock) when it
names one version; else every version specifier the project states (pyproject.toml's dependencies, the
requirements files), intersected. A statement whose environment marker does not hold for the target
interpreter (``torch==2.3.1; python_version < "3.12"``) does not count. Local labels are dropped
(``==2.3.1+cu121`` asks for 2.3.1): the plan picks the variant that fits this machine.
"""

from __future__ import annotations

from doctor.model.snapshot import Snapshot, TorchPin
from doctor.model.versions import major_minor, split_local

LOCK_FILES = ("uv.lock", "poetry.lock")

_SYS_PLATFORM = {"linux": "linux", "windows": "win32", "darwin": "darwin"}
_SYSTEM = {"linux": "Linux", "windows": "Windows", "darwin": "Darwin"}


def wanted_torch(snap: Snapshot) -> TorchPin | None:
    """The torch this run must end with: what the user asked for, else the project's pin; None: no
    preference."""
    asked = snap.requested.torch
    if asked is not None and asked.spec.strip():
        return asked
    return project_pin(snap)


def wanted_spec(snap: Snapshot) -> str | None:
    pin = wanted_torch(snap)
    return pin.spec if pin is not None else None


def project_pin(snap: Snapshot) -> TorchPin | None:
    """The project's own statement about torch, combined (see the module doc); None when it states none."""
    project = snap.project
    if project is None or not project.pins:
        return None
    env = marker_environment(snap)
    pins = [p for p in project.pins if p.spec.strip() and marker_holds(p.marker, env)]
    locked = [p for p in pins if p.source.split(":")[0] in LOCK_FILES]
    versions = {split_local(p.spec.lstrip("=").strip())[0] for p in locked}
    if len(versions) == 1:
        return TorchPin(f"=={versions.pop()}", ", ".join(dict.fromkeys(p.source for p in locked)))
    stated = [p for p in pins if p not in locked]
    if not stated:
        return None
    return TorchPin(",".join(dict.fromkeys(p.spec for p in stated)), ", ".join(p.source for p in stated))


def marker_environment(snap: Snapshot) -> dict[str, str]:
    """The PEP 508 marker variables of the target interpreter, as far as the snapshot knows them."""
    py = snap.interpreter.version or ""
    mm = major_minor(py)
    os_name = snap.host.os or "linux"
    env = {
        "sys_platform": _SYS_PLATFORM.get(os_name, os_name),
        "platform_system": _SYSTEM.get(os_name, os_name.capitalize()),
        "os_name": "nt" if os_name == "windows" else "posix",
        "platform_machine": ("AMD64" if snap.host.machine == "x86_64" else "ARM64")
        if os_name == "windows" else (snap.host.machine or ""),
        "implementation_name": snap.interpreter.implementation or "cpython",
        "platform_python_implementation": {"cpython": "CPython", "pypy": "PyPy"}.get(
            snap.interpreter.implementation or "cpython", "CPython"),
        "extra": "",
    }
    if mm:
        env["python_version"] = f"{mm[0]}.{mm[1]}"
        env["python_full_version"] = py
    return env


def marker_holds(marker: str | None, env: dict[str, str]) -> bool:
    """Whether a requirement's marker holds for the target (an unreadable marker counts as holding)."""
    if not marker:
        return True
    from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName

    try:
        return bool(Marker(marker).evaluate(env))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return True
