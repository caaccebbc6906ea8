"""Which installer carries out a fix, and which packages belong to torch's family (pure).

pip and uv get the same pins and the same index (doctor/plan/commands.py), so the two are
interchangeable: ``uv pip install --python <target>`` is pip's command with uv's front end.
"""

from __future__ import annotations

from doctor.compat.installs import conda_torch
from doctor.model.snapshot import as_plain
from doctor.model.versions import normalize_name
from doctor.plan.commands import AUTO, PIP, UV

__all__ = ["AUTO", "PIP", "UV", "TORCH_FAMILY", "choose_installer", "conda_torch_records", "in_torch_family"]

# Packages that may change with torch: the three, the compiler, and the CUDA wheels they pin.
TORCH_FAMILY = {"torch", "torchvision", "torchaudio", "triton", "pytorch-triton", "pytorch-triton-rocm"}
FAMILY_PREFIXES = ("nvidia-", "cuda-", "pytorch-triton")


def in_torch_family(name: str) -> bool:
    name = normalize_name(name)
    return name in TORCH_FAMILY or name.startswith(FAMILY_PREFIXES)


def choose_installer(requested: str, snap) -> tuple[str, str]:
    """(installer, why). ``auto`` picks uv for an environment uv made, else pip."""
    if requested in (PIP, UV):
        return requested, f"--installer {requested}"
    if snap.interpreter.env_kind == "uv-venv":
        return UV, "the environment was made by uv"
    for dist in (snap.install.torch, snap.install.torchvision, snap.install.torchaudio):
        if dist is not None and (dist.installer or "").strip() == "uv":
            return UV, f"{dist.name} was installed by uv"
    return PIP, "default"


def conda_torch_records(snap) -> list[dict]:
    """The conda records that must go before pip installs torch (doctor/compat/installs.py), as plain
    dicts for the restore file."""
    return [as_plain(r) for r in conda_torch(snap).remove_before_pip]
