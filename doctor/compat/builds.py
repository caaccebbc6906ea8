"""What build of torch is installed, derived from the snapshot (pure).

The same answer can come from several places, in order of trust: ``torch/version.py``
(``cuda``/``hip``, always right, also on PyPI wheels whose metadata has no local tag), the
local version tag (``+cu126``), the wheel's CUDA pins (``nvidia-cuda-runtime-cu12==12.4.127``,
``cuda-toolkit==13.0.3``), and finally whether ``libtorch_cuda`` exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.compat.distributions import conda_build_cuda, conda_record
from doctor.model.snapshot import Dist, Snapshot
from doctor.model.versions import (
    cuda_to_variant,
    index_variant,
    normalize_name,
    split_local,
    variant_to_cuda,
)


@dataclass(frozen=True, slots=True)
class Build:
    version: str  # base version without local tag, "2.6.0"
    local: str | None  # "cu126", "cpu", "rocm6.3", None (PyPI wheel)
    kind: str  # "cuda", "rocm", "xpu", "cpu", "unknown"
    cuda: str | None  # "12.6"
    hip: str | None
    variant: str | None  # index variant it corresponds to: "cu126", "cpu", "rocm6.3", None if unknown
    evidence: str  # where kind/cuda came from

    @property
    def label(self) -> str:
        """How the build names itself: its own local tag ("2.14.1a0+git9a8b7c6",
        "2.6.0a0+ecf3bae40a.nv25.01"), else the index variant it corresponds to ("2.14.1+cu130" for PyPI's
        untagged wheel)."""
        tag = self.local or self.variant
        return f"{self.version}+{tag}" if tag else self.version

    @property
    def cuda_major(self) -> str | None:
        return self.cuda.split(".")[0] if self.cuda else None


_REQUIREMENT = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*\(?\s*(?:===?|~=)\s*(?P<version>\d+\.\d+)"
)
# The wheels whose exact pin gives the CUDA version of a torch wheel (12.x style and 13.x style).
_CUDA_PINS = ("cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime-cu12",
              "nvidia-cuda-runtime-cu13")


def cuda_from_requires(requires: list[str]) -> str | None:
    """The CUDA major.minor pinned by ``Requires-Dist`` lines (or ``pip freeze`` lines):
    ``nvidia-cuda-runtime-cu12==12.4.127`` -> "12.4", ``cuda-toolkit[cublas]==13.0.3`` -> "13.0"; else
    None."""
    for line in requires:
        match = _REQUIREMENT.match(line.split(";")[0])
        if not match:
            continue
        name = normalize_name(match["name"])
        if name in _CUDA_PINS:
            major, minor = match["version"].split(".")
            return f"{int(major)}.{int(minor)}"
    return None


def dist_build(dist: Dist, cuda_from_requires_: str | None = None) -> Build:
    """The build of torch (or of a companion: torchvision/torchaudio record their own CUDA)."""
    version_for_tag = dist.build_version or dist.version
    base, local = split_local(version_for_tag)
    if local is None:
        base, local = split_local(dist.version)
    local_variant = index_variant(local)  # None for a custom local tag ("+git1234")

    if dist.hip:
        return Build(base, local, "rocm", None, dist.hip, local_variant, "version.py hip")
    if dist.cuda:
        return Build(
            base,
            local,
            "cuda",
            dist.cuda,
            None,
            local_variant or cuda_to_variant(dist.cuda),
            "version.py cuda",
        )
    if dist.build_version is not None or dist.cuda is not None:
        # version.py was read and says no CUDA / no HIP
        if local_variant == "xpu" or dist.xpu:
            return Build(base, local, "xpu", None, None, "xpu", "version.py xpu")
        if local_variant and local_variant.startswith("cu"):
            # tag says CUDA but version.py says none: trust version.py, keep the tag as evidence
            return Build(base, local, "cpu", None, None, "cpu", "version.py cuda=None (tag disagrees)")
        return Build(base, local, "cpu", None, None, local_variant or "cpu", "version.py cuda=None")
    # version.py unreadable: fall back to the tag, the pins, the libraries
    if local_variant:
        if local_variant.startswith("cu"):
            return Build(base, local, "cuda", variant_to_cuda(local_variant), None, local_variant, "local "
                "tag")
        if local_variant.startswith("rocm"):
            return Build(base, local, "rocm", None, local_variant[4:], local_variant, "local tag")
        kind = "xpu" if local_variant == "xpu" else "cpu"
        return Build(base, local, kind, None, None, local_variant, "local tag")
    cuda = cuda_from_requires_ or cuda_from_requires(dist.requires)
    if cuda:
        return Build(base, None, "cuda", cuda, None, cuda_to_variant(cuda), "CUDA pins in Requires-Dist")
    if dist.has_libtorch_cuda:
        return Build(base, None, "cuda", None, None, None, "libtorch_cuda present")
    if dist.has_libtorch_hip:
        return Build(base, None, "rocm", None, None, None, "libtorch_hip present")
    if dist.has_libtorch_cuda is False:
        return Build(base, None, "cpu", None, None, "cpu", "no libtorch_cuda")
    return Build(base, None, "unknown", None, None, None, "no build information")


def torch_build(snapshot: Snapshot) -> Build | None:
    """The installed torch's build. What its own files say comes first (``dist_build``); when they leave the
    kind or the CUDA version open, its conda record, then its library (``Dist.kernels``) answer."""
    dist = snapshot.install.torch
    if dist is None:
        return None
    build = dist_build(dist, snapshot.install.cuda_from_requires)
    if build.kind == "unknown" or (build.kind == "cuda" and not build.cuda):
        build = _from_record_or_binary(build, dist, snapshot, _CONDA_TORCH) or build
    return build


def companion_build(snapshot: Snapshot, name: str) -> Build | None:
    """torchvision's or torchaudio's build. Their ``version.py`` sets ``cuda`` only when the package is
    imported, so a version without a ``+cuXXX`` tag says nothing: the build is then read from the conda
    record, then from the package's own library (GPU code in it; the ``libcudart.so.N`` it needs gives the
    CUDA major), else it is unknown, never "CPU"."""
    dist = getattr(snapshot.install, name, None)
    if dist is None:
        return None
    base, local = split_local(dist.build_version or dist.version)
    if local is None:
        base, local = split_local(dist.version)
    variant = index_variant(local)
    if variant and variant.startswith("cu"):
        return Build(base, local, "cuda", variant_to_cuda(variant), None, variant, "local tag")
    if variant and variant.startswith("rocm"):
        return Build(base, local, "rocm", None, variant[4:], variant, "local tag")
    if variant:
        return Build(base, local, "xpu" if variant == "xpu" else "cpu", None, None, variant, "local tag")
    if dist.cuda:
        return Build(base, local, "cuda", dist.cuda, None, cuda_to_variant(dist.cuda), "version.py cuda")
    unknown = Build(base, local, "unknown", None, None, None, "no +cuXXX tag, conda record or readable "
        "library")
    return _from_record_or_binary(unknown, dist, snapshot, (normalize_name(name),)) or unknown


_CONDA_TORCH = ("pytorch", "pytorch-gpu", "pytorch-cpu", "libtorch")


def _from_record_or_binary(
    build: Build, dist: Dist, snapshot: Snapshot, names: tuple[str, ...]
) -> Build | None:
    record = conda_record(snapshot, names, dist.version)
    if record is not None:
        kind, cuda = conda_build_cuda(record.build)
        if kind == "cuda":
            return Build(build.version, build.local, "cuda", cuda or build.cuda, None,
                         cuda_to_variant(cuda) if cuda else build.variant, f"conda build {record.build}")
        if kind == "cpu":
            return Build(build.version, build.local, "cpu", None, None, "cpu", f"conda build {record.build}")
    kernels = dist.kernels
    if kernels is None:
        return None
    major = cuda_major_from_needed(kernels.needed)
    lib = kernels.path.rsplit("/", 1)[-1] or "its library"
    if kernels.status == "ok":
        needs = (
            f", needs {next(n for n in kernels.needed if 'cudart' in n or 'cublas' in n)}" if major else ""
        )
        return Build(build.version, build.local, "cuda", build.cuda or major, None, build.variant,
                     f"GPU code in {lib}{needs}")
    if major:
        return Build(build.version, build.local, "cuda", build.cuda or major, None, build.variant,
                     f"{lib} needs {next(n for n in kernels.needed if 'cudart' in n or 'cublas' in n)}")
    if kernels.status == "no-gpu-code" and build.kind == "unknown":
        return Build(build.version, build.local, "cpu", None, None, "cpu", f"no GPU code in {lib}")
    return None


_NEEDED_RE = re.compile(r"^lib(cudart|cublas)\b[^/]*?\.so\.(\d+)")


def cuda_major_from_needed(needed: list[str]) -> str | None:
    """The CUDA major a library was built against, from the runtime it needs: "libcudart.so.12" -> "12"
    (libcublas's soname follows the CUDA major too; libcusparse's does not, so it is not used)."""
    for wanted in ("cudart", "cublas"):
        for name in needed:
            match = _NEEDED_RE.match(name)
            if match and match.group(1) == wanted and not name.startswith("libcublasLt"):
                return str(int(match.group(2)))
    return None



