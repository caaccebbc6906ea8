"""What several hazard families share: version arithmetic, the installed build, the container kind and
the shell lines that set a library path."""

from __future__ import annotations

from typing import Any

from doctor.compat.builds import Build
from doctor.model import shells
from doctor.model import snapshot as S
from doctor.model.findings import INSTALL, Action
from doctor.model.i18n import Msg
from doctor.model.versions import version_tuple
from doctor.rules import Outcome, not_observed, unknown

GIB = 1024**3
MIB = 1024**2
WSL_LIB_DIR = "/usr/lib/wsl/lib"
TORCH_TRIO = ("torch", "torchvision", "torchaudio")


def mm(version: Any) -> tuple[int, int | None] | None:
    """'12.4.127' -> (12, 4); '12' -> (12, None); None when it does not start with a number."""
    parts = version_tuple(str(version or ""))
    if not parts:
        return None
    return parts[0], (parts[1] if len(parts) > 1 else None)


def mm_text(version: Any) -> str:
    found = mm(version)
    if found is None:
        return str(version)
    return f"{found[0]}.{found[1]}" if found[1] is not None else str(found[0])


def torch_cuda(snap: S.Snapshot, build: Build | None) -> str | None:
    if build is not None and build.kind == "cuda":
        return build.cuda or snap.runtime.cuda_version
    return None


def is_cuda_build(build: Build | None) -> bool:
    return build is not None and build.kind == "cuda"


def reinstall(build: Build | None, kind: str = INSTALL, venv: str = "") -> Action:
    """torch and its companions again: the plan's exact builds (the plan's target, else the installed builds
    pinned exactly), from the plan's index, so no finding names another torch than the plan beside it. The
    command builder writes nothing for it when the plan names no builds (never an unpinned install)."""
    variant = build.variant if build is not None and build.kind in ("cuda", "cpu", "rocm", "xpu") else None
    return Action(kind, TORCH_TRIO, variant, text=venv, plan=True)


def gib(nbytes: float | int | None) -> str:
    return "?" if nbytes is None else f"{nbytes / GIB:.1f} GiB"


def container_kind(snap: S.Snapshot) -> str | None:
    """The environment probe's container kind; a report without that section still has the host's."""
    section = snap.environment.container
    return (section.kind if section is not None else None) or snap.host.container


def missing(snap: S.Snapshot, section: Any, what: str) -> Outcome | None:
    """Skipped or unknown when an environment ``section`` was not observed (a collect_env text, an older
    report: skipped; a probe that failed: unknown); None when it is there (the rule then says unknown itself
    when the value it needs is absent, with the section's ``why``)."""
    if section is None:
        return not_observed(snap, what, snap.environment.error)
    return None


def unread(what: str, section: Any) -> Outcome:
    """unknown: ``what`` is not in the section, with the probe's reason when it gave one."""
    why = getattr(section, "why", None)
    return unknown(Msg("{what} could not be read", what=what) + (Msg(": {why}", why=why) if why else ""))


def libcuda_copies(snap: S.Snapshot, soname: str = "libcuda.so.1") -> list[str] | None:
    """The ``soname`` files (libcuda.so.1, libnvidia-ml.so.1) the dynamic loader can find, in its order; None
    when the loader was not read."""
    loader = snap.environment.loader
    if loader is None:
        return None
    return [c.path for c in loader.copies if c.soname == soname]


def usable_gpus(snap: S.Snapshot) -> list[S.Gpu]:
    return list(snap.nvidia.gpus) if snap.nvidia.status == S.NVIDIA_OK else []


def export(variable: str, dirs: list[str], windows: bool = False) -> str:
    """The command that sets the library path to ``dirs`` (or unsets it when empty)."""
    if windows:
        return f'$env:{variable} = "{";".join(dirs)}"'
    if not dirs:
        return f"unset {variable}"
    return f"export {variable}={shells.quote(':'.join(dirs))}"


def split_path(value: str | None, windows: bool = False) -> list[str]:
    return [d for d in (value or "").split(";" if windows else ":") if d]


def same_dir(a: str, b: str) -> bool:
    return a.rstrip("/\\") == b.rstrip("/\\")
