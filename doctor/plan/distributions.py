"""What fits a distribution's own torch (pure): the plan never replaces a conda-forge, NGC, Jetson or source
build (or another conda channel's) with pip wheels. It says what fits that distribution instead: conda-forge's
CUDA build spec, a newer NGC container, NVIDIA's PyTorch for this JetPack, a rebuild with the missing
architectures; or it stops at the diagnosis.

A PyTorch wheel on a Jetson before JetPack 7 counts too: PyPI's aarch64 wheels are built for server ARM (SBSA)
GPUs, and a Jetson's driver comes with its JetPack, so the remedy is NVIDIA's build for that JetPack.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from doctor.compat.coverage import RUNS, bound_verdict
from doctor.compat.distributions import (
    CONDA_FORGE,
    CONDA_OTHER,
    JETSON,
    NGC,
    SOURCE,
    Origin,
    is_jetson,
    jetpack_text,
)
from doctor.model.findings import Finding
from doctor.model.snapshot import Snapshot
from doctor.model.versions import major_minor
from doctor.plan.commands import Commands, conda_install_argv, render_argv

if TYPE_CHECKING:  # annotations only: importing it would load all of compat (wheels, table) with the plan
    from doctor.compat.assessment import Assessment

JETSON_PYTORCH = "https://docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/index.html"
NGC_RELEASE_NOTES = "https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/index.html"
CONDA_FORGE_CUDA = "https://conda-forge.org/docs/user/cuda/"

_ARCH_IDS = (
    "gpu-arch-unsupported",
    "gpu-arch-needs-ptx",
    "cudnn-unsupported-gpu",
    "gpus-need-different-wheels",
)


@dataclass(slots=True)
class OwnBuild:
    """The advice for a distribution's own torch: why no pip command, and what fits instead."""

    origin: Origin
    reason: str
    notes: list[str] = field(default_factory=list)


def own_build(facts: Assessment) -> Origin | None:
    """The torch's origin when the plan must not replace it with pip wheels, else None."""
    snap, origin = facts.snap, facts.origin
    if origin.own_build:
        return origin
    if is_jetson(snap) and not jetson_is_sbsa(snap):
        return Origin(JETSON, f"a Jetson (L4T {snap.provenance.l4t or '?'})", detail="Jetson")
    return None


def jetson_is_sbsa(snap: Snapshot) -> bool:
    """JetPack 7 (Jetson Linux 38) aligned Jetson with server ARM (SBSA): the same CUDA 13 aarch64 builds
    run."""
    l4t = major_minor(snap.provenance.l4t or "")
    return bool(l4t and l4t[0] >= 38)


@functools.lru_cache(maxsize=256)  # pure: a fleet of reports asks the same few questions
def cuda_range_for(table, ccs: tuple) -> tuple[str, str] | None:
    """(oldest, newest) CUDA whose nvcc can compile a cubin for every one of ``ccs``; None when no CUDA the
    table knows can (cuda_toolkits)."""
    fitting = [t.cuda for t in table.cuda_toolkits if all(bound_verdict(t, cc, t.cuda) == RUNS for cc in ccs)]
    return (fitting[0], fitting[-1]) if fitting else None


def advise(facts: Assessment, findings: list[Finding], commands: Commands) -> OwnBuild | None:
    """The plan's advice when the torch is a distribution's own, else None (the wheel plan applies)."""
    origin = own_build(facts)
    if origin is None:
        return None
    snap, table = facts.snap, facts.table
    ids = {f.id for f in findings}
    ccs = facts.machine.gpu_ccs
    needs_arch = bool(ids & set(_ARCH_IDS))
    reach = cuda_range_for(table, ccs) if ccs else None
    driver_max = snap.nvidia.cuda_driver_version.value
    advice = OwnBuild(origin, f"torch is {origin.label} ({origin.evidence}); torchdoctor does not replace it "
        "with "
                      "pip wheels")
    notes = advice.notes
    if origin.kind == CONDA_FORGE:
        specs = ['pytorch=*=cuda*']
        if needs_arch and reach:
            specs.append(f"cuda-version>={reach[0]}")
        elif "driver-too-old" in ids and driver_max:
            specs.append(f"cuda-version<={driver_max}")
        specs += [n for n in ("torchvision", "torchaudio") if getattr(snap.install, n) is not None]
        prefix = snap.interpreter.prefix or "<env>"
        command = render_argv(conda_install_argv(commands.conda, prefix, "conda-forge", specs), commands.os)
        notes.append(f"Stay with conda-forge: install its CUDA build that fits ({CONDA_FORGE_CUDA}): "
            f"{command}")
        if needs_arch:
            notes.append("conda-forge compiles its own architecture list; after installing, torchdoctor "
                "check reads "
                         "the new build's kernels from its library.")
    elif origin.kind == CONDA_OTHER:
        notes.append(f"Install a build that fits from the {origin.detail} channel, or move this environment "
            "to "
                     "conda-forge or to PyTorch's pip wheels yourself: either replaces that channel's torch.")
    elif origin.kind == NGC:
        if needs_arch:
            want = f" built with CUDA {reach[0]} or newer" if reach else ""
            notes.append(f"Use a newer NGC PyTorch container{want} (nvcr.io/nvidia/pytorch:<YY.MM>-py3; each "
                "tag's "
                         f"CUDA is in NVIDIA's release notes: {NGC_RELEASE_NOTES}). Replace the container, "
                         "not the "
                         "torch inside it.")
        if "driver-too-old" in ids:
            notes.append("This container's CUDA needs a newer driver on the host; update the host's driver, "
                "or use "
                         f"an NGC tag built with CUDA {driver_max or 'the driver supports'} or older.")
        if ids & {"torchvision-mismatch", "torchaudio-mismatch"}:
            notes.append("NGC's torchvision and torchaudio are built with its torch: reinstall them from the "
                         "container image rather than from PyPI.")
    elif origin.kind == JETSON:
        jetpack, cuda = jetpack_text(snap, table)
        notes.append(f"On Jetson the CUDA driver comes with JetPack ({jetpack}); it is never installed from "
                     f"NVIDIA's driver downloads. Install NVIDIA's PyTorch built for this JetPack"
                     + (f" (CUDA {cuda})" if cuda else "") + f": {JETSON_PYTORCH}")
        if facts.origin.pytorch_wheel:
            notes.append("PyPI's aarch64 wheels are built for server ARM (SBSA) GPUs: before CUDA 13.2 they "
                "hold no "
                         "kernels Jetson's integrated GPU can run, and their CUDA may be newer than this "
                         "JetPack's.")
    elif origin.kind == SOURCE:
        arch = _arch_list_with(snap, ccs)
        if needs_arch and arch:
            own = table.toolkit(build_cuda) if (build_cuda := _build_cuda(snap)) else None
            if own is not None and all(bound_verdict(own, cc, own.cuda) == RUNS for cc in ccs):
                cuda = f" (its CUDA {own.cuda} can target them)"
            else:
                cuda = f" with CUDA {reach[0]} or newer" if reach else ""
            notes.append(f"Rebuild it for these GPUs{cuda}: TORCH_CUDA_ARCH_LIST=\"{arch}\" (for example "
                         f"TORCH_CUDA_ARCH_LIST=\"{arch}\" python -m pip install --no-build-isolation -v -e "
                         ". in "
                         "your PyTorch checkout).")
        if "driver-too-old" in ids:
            notes.append("Or rebuild it with a CUDA the driver supports "
                f"({driver_max or 'see the driver finding'} or "
                         "older), or update the driver.")
    if not notes:
        notes.append("See each finding's fix.")
    return advice


def _build_cuda(snap: Snapshot) -> str | None:
    torch = snap.install.torch
    return torch.cuda if torch is not None else None


def _arch_list_with(snap: Snapshot, ccs) -> str:
    """The build's arch list (from its binary) plus each GPU's capability, as TORCH_CUDA_ARCH_LIST:
    "8.0;9.0"."""
    kernels = snap.install.torch.kernels if snap.install.torch is not None else None
    have = []
    for target in (kernels.sm if kernels is not None and kernels.status == "ok" else []):
        number = target[3:].rstrip("af")
        if number.isdigit():
            have.append((int(number) // 10, int(number) % 10))
    every = sorted(set(have) | set(ccs))
    return ";".join(f"{major}.{minor}" for major, minor in every)
