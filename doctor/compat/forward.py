"""CUDA forward compatibility: whether the libcuda the loader picks first is a cuda-compat copy, and what that
means on these GPUs (the table's ``forward_compat`` rows, from NVIDIA's "CUDA Compatibility").

On a GPU class that may use it (data center, Jetson), the CUDA torch gets is the compat libcuda's: an H100 on
R535 runs a CUDA 13 build. On one that may not (GeForce), CUDA stops at start with error 804, whatever the
build. Pure: it reads the snapshot's ``environment.loader`` and the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.compat.distributions import is_jetson
from doctor.model.environment import CompatDir, DriverLibCopy
from doctor.model.snapshot import Snapshot
from doctor.model.versions import version_tuple

_GEFORCE = re.compile(r"\b(geforce|titan)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ForwardCompatUse:
    """A cuda-compat libcuda is the first the loader finds."""

    copy: DriverLibCopy  # that libcuda.so.1
    # the GPUs' class: "data-center", "jetson", "geforce"; None: not judged (a Quadro, none listed)
    gpus: str | None
    supported: bool | None  # the table's answer for that class; None: not known
    # the newest CUDA the compat libcuda's branch supports ("13.0"); None: not in the table
    max_cuda: str | None
    newer: bool | None  # the compat libcuda is newer than the installed driver (else it brings nothing)
    source: str  # the table row's source, or why there is none

    @property
    def effective(self) -> bool:
        """torch gets the compat libcuda's CUDA: a supported GPU, and a copy newer than the driver."""
        return bool(self.supported and self.newer and self.max_cuda)


def gpu_class(snap: Snapshot, table) -> str | None:
    """The GPUs' forward-compatibility class: "jetson", "geforce" (when any GPU is a GeForce or TITAN: one is
    enough for error 804), "data-center" (when every GPU is one in the table), else None."""
    if is_jetson(snap):
        return "jetson"
    names = [g.name for g in snap.nvidia.gpus]
    if any(_GEFORCE.search(name) for name in names):
        return "geforce"
    models = [table.gpu(name) for name in names] if table is not None else []
    if models and all(m is not None and m.segment == "data-center" for m in models):
        return "data-center"
    return None


def first_libcuda(snap: Snapshot) -> DriverLibCopy | None:
    loader = snap.environment.loader
    if loader is None:
        return None
    return next((c for c in loader.copies if c.soname == "libcuda.so.1"), None)


def _mounted_compat(snap: Snapshot, copy: DriverLibCopy) -> bool:
    """A cuda-compat libcuda put in a driver folder: the NVIDIA container toolkit mounts the image's compat
    libraries over the host's (libnvidia-container 1.4.0 did so on every GPU, DeepVAC/TorchPod#43). It is
    the version of a compat folder's libcuda on disk, and not the installed driver's."""
    loader, have = snap.environment.loader, snap.nvidia.driver_version.value
    if loader is None or not copy.version or not have or copy.version == have:
        return False
    return any(folder.version == copy.version for folder in loader.compat)


def forward_compat_in_use(snap: Snapshot, table) -> ForwardCompatUse | None:
    """What the cuda-compat libcuda the loader picks first means here; None when the first is not one (or the
    loader was not read)."""
    copy = first_libcuda(snap)
    if copy is None or not (copy.compat or _mounted_compat(snap, copy)):
        return None
    gpus = gpu_class(snap, table)
    row = table.forward_compat_for(gpus) if table is not None else None
    branch = table.max_cuda_for_driver(copy.version) if table is not None and copy.version else None
    have, compat = version_tuple(snap.nvidia.driver_version.value), version_tuple(copy.version)
    newer = compat > have if have and compat else None
    source = row.source if row is not None else "no forward_compat row for these GPUs"
    return ForwardCompatUse(copy, gpus, row.supported if row is not None else None,
                            branch.max_cuda if branch is not None else None, newer, source)


def unused_compat(snap: Snapshot, table, cuda: str) -> CompatDir | None:
    """A cuda-compat folder on disk, off the loader's path, that would run a build of ``cuda`` here: the GPUs
    may use forward compatibility and its libcuda's branch supports that CUDA. None when there is none."""
    loader = snap.environment.loader
    if loader is None or table is None or forward_compat_in_use(snap, table) is not None:
        return None
    row = table.forward_compat_for(gpu_class(snap, table))
    if row is None or not row.supported:
        return None
    want, have = version_tuple(cuda), version_tuple(snap.nvidia.driver_version.value)
    for folder in loader.compat:
        branch = table.max_cuda_for_driver(folder.version) if folder.version else None
        newer = have is not None and version_tuple(folder.version) > have
        if branch is not None and newer and want and version_tuple(branch.max_cuda)[:2] >= want[:2]:
            return folder
    return None
