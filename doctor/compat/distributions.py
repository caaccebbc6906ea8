"""Who built the installed torch (and its companions), decided from what the build is (pure).

The distribution decides two things: which facts about a build can be trusted (the table's arch rows describe
PyTorch's own wheels, not conda-forge's, NVIDIA's or a source build's) and what a remedy may be (a pip wheel
may replace a PyTorch wheel, never a conda-forge, NGC, Jetson or source build without saying that is what it
does).

Evidence, most specific first:

- conda-meta records (``pytorch-2.5.1-cuda126_mkl_py312_h..._303``; the channel says conda-forge, the old
  ``pytorch`` channel or another one; the build string says the CUDA version and whether it is a CPU build);
- NVIDIA's builds: a ``.nvYY.MM`` part in the local version (``2.6.0a0+ecf3bae40a.nv25.01``), which NVIDIA's
  NGC containers (``$NVIDIA_PYTORCH_VERSION``) and its Jetson wheels both carry; a Jetson
  (``/etc/nv_tegra_release``) tells which of the two;
- a source build: a ``+git<sha>`` local version (``2.14.1a0+git9a8b7c6``), or an ``a0`` pre-release with
another
  local tag;
- PyTorch's nightlies (``2.7.0.dev20250301+cu124``) and release wheels (``+cu126``, or PyPI's untagged
version).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.model.environment import CondaRecord
from doctor.model.snapshot import Dist, Snapshot
from doctor.model.versions import index_variant, normalize_name, split_local

WHEEL = "pytorch-wheel"  # a PyTorch release wheel: PyPI or download.pytorch.org/whl/<variant>
NIGHTLY = "pytorch-nightly"  # download.pytorch.org/whl/nightly
PYTORCH_CONDA = "pytorch-conda"  # the pytorch conda channel (PyTorch's own; its last release was 2.5)
CONDA_FORGE = "conda-forge"
CONDA_OTHER = "conda"  # another conda channel (Anaconda's defaults, a private one)
NGC = "ngc"  # NVIDIA's NGC PyTorch container
JETSON = "jetson"  # NVIDIA's build for Jetson (JetPack)
SOURCE = "source"  # built from source
UNKNOWN = "unknown"

# Distributions whose own torch a pip wheel must never silently replace.
OWN_BUILDS = (CONDA_FORGE, CONDA_OTHER, NGC, JETSON, SOURCE)

_NV_RE = re.compile(r"(?:^|\.)nv(\d{2})\.(\d{1,2})(?:$|\.)")
_GIT_RE = re.compile(r"^git[0-9a-f]{4,}", re.IGNORECASE)
_SUBDIR_RE = re.compile(r"^(?:noarch|(?:linux|osx|win|emscripten|wasi|zos)-[a-z0-9_]+)$")
# the pytorch channel's "py3.12_cuda12.4_cudnn9.1.0_0"
_PYTORCH_BUILD_RE = re.compile(r"^py\d\.\d+_(?:cuda|cpu)")
_CONDA_TORCH = ("pytorch", "pytorch-gpu", "pytorch-cpu", "libtorch")
_DOTTED_CUDA_RE = re.compile(r"(?:^|_|py\d+)cuda_?(\d{1,2})\.(\d)(?:_|$)")
_PACKED_CUDA_RE = re.compile(r"(?:^|_|py\d+)cuda_?(\d{2,3})(?=_|py|h|$)")
_BARE_CUDA_RE = re.compile(r"(?:^|_)cuda(?:_|$)")
_CPU_RE = re.compile(r"(?:^|_|py\d+)cpu(?:_|$)")


@dataclass(frozen=True, slots=True)
class Origin:
    """Who built a package, with the evidence, and the CUDA that distribution states (when it does)."""

    kind: str
    evidence: str  # "conda-meta: pytorch 2.5.1 cuda126_mkl_py312_h_303 (conda-forge)"
    cuda: str | None = None  # from the distribution's own record: "12.6"; None when it says nothing
    cpu: bool = False  # the distribution's record says this is a CPU build
    detail: str = ""  # "conda-forge", "NGC 25.01", "Jetson (L4T 36.4.3)"
    record: CondaRecord | None = None

    @property
    def pytorch_wheel(self) -> bool:
        """A PyTorch release wheel: the table's arch rows describe it."""
        return self.kind == WHEEL

    @property
    def own_build(self) -> bool:
        """A distribution's own torch, which a pip wheel must not replace without saying so."""
        return self.kind in OWN_BUILDS

    @property
    def label(self) -> str:
        return {
            WHEEL: "a PyTorch wheel", NIGHTLY: "a PyTorch nightly", PYTORCH_CONDA: "the pytorch conda "
                "channel's build",
            CONDA_FORGE: "conda-forge's build", CONDA_OTHER: f"the {self.detail or 'conda'} channel's build",
            NGC: f"NVIDIA's NGC build ({self.detail})" if self.detail else "NVIDIA's NGC build",
            JETSON: f"NVIDIA's Jetson build ({self.detail})" if self.detail else "NVIDIA's Jetson build",
            SOURCE: "a source build", UNKNOWN: "a build of unknown origin",
        }.get(self.kind, self.kind)


def conda_build_cuda(build: str | None) -> tuple[str | None, str | None]:
    """(kind, CUDA) a conda build string states: ("cuda", "12.6") for ``cuda126_mkl_py312_h..._303``,
    ``cuda_126_py312``, ``py3.12_cuda12.4_cudnn9.1.0_0`` or ``cuda118py39h196c800_0``; ("cuda", None) for
    ``cuda_py312_h...``; ("cpu", None) for ``cpu_mkl_py312_...`` or ``py3.12_cpu_0``; (None, None) when it
    says neither."""
    text = (build or "").lower()
    dotted = _DOTTED_CUDA_RE.search(text)
    if dotted:
        return "cuda", f"{int(dotted.group(1))}.{int(dotted.group(2))}"
    packed = _PACKED_CUDA_RE.search(text)
    if packed:
        digits = packed.group(1)
        return "cuda", f"{int(digits[:-1])}.{int(digits[-1])}"
    if _BARE_CUDA_RE.search(text) or text.startswith("cuda"):
        return "cuda", None
    if _CPU_RE.search(text):
        return "cpu", None
    return None, None


def conda_record(snap: Snapshot, names: tuple[str, ...], version: str | None = None) -> CondaRecord | None:
    """The conda-meta record of one of ``names`` (the one whose version matches ``version`` first)."""
    python = snap.environment.python
    conda = python.conda if python is not None else None
    if conda is None:
        return None
    found = [r for r in conda.records if normalize_name(r.name) in names]
    if version:
        base = split_local(version)[0]
        same = [r for r in found if r.version == base]
        if same:
            return same[0]
    return found[0] if found else None


def channel_name(channel: str | None) -> str:
    """The channel's name from what conda-meta records: "https://conda.anaconda.org/conda-forge/linux-64" ->
    "conda-forge"; "pytorch" -> "pytorch"; "https://repo.anaconda.com/pkgs/main/linux-64" -> "defaults"."""
    parts = [p for p in (channel or "").strip().lower().rstrip("/").split("/") if p]
    if parts and _SUBDIR_RE.match(parts[-1]):
        parts = parts[:-1]
    if not parts:
        return ""
    if len(parts) >= 2 and parts[-2] == "pkgs":
        return "defaults"
    return parts[-1]


def channel_kind(record: CondaRecord) -> tuple[str, str]:
    """(origin kind, channel name) of a conda record."""
    name = channel_name(record.channel)
    if name == "conda-forge":
        return CONDA_FORGE, name
    if name in ("pytorch", "pytorch-nightly", "pytorch-test"):
        return PYTORCH_CONDA, name
    if not name:
        # conda has written the channel into conda-meta since 4.4; without it only the build string can tell
        if _PYTORCH_BUILD_RE.match((record.build or "").lower()):
            return PYTORCH_CONDA, "pytorch"
        return UNKNOWN, "an unrecorded"
    return CONDA_OTHER, name


def is_jetson(snap: Snapshot) -> bool:
    """This machine is a Jetson: /etc/nv_tegra_release, or its device tree names one."""
    prov = snap.provenance
    return bool(prov.tegra_release or prov.l4t or "jetson" in (prov.device_model or "").lower())


def dist_origin(dist: Dist | None, snap: Snapshot, conda_names: tuple[str, ...] | None = None) -> Origin:
    """Who built this distribution (torch by default; pass ``conda_names`` for a companion)."""
    if dist is None:
        return Origin(UNKNOWN, "not installed")
    names = conda_names or ((normalize_name(dist.name),) if dist.name != "torch" else _CONDA_TORCH)
    version = dist.build_version or dist.version
    record = conda_record(snap, names, dist.version)
    if record is not None and (
        dist.installer in (None, "conda") or record.version == split_local(dist.version)[0]
    ):
        kind, channel = channel_kind(record)
        cuda_kind, cuda = conda_build_cuda(record.build)
        return Origin(
            kind,
            f"conda-meta: {record.name} {record.version} {record.build}"
            + (f" ({record.channel})" if record.channel else ""),
            cuda,
            cuda_kind == "cpu",
            channel,
            record,
        )
    local = split_local(version)[1] or split_local(dist.version)[1]
    nv = _NV_RE.search(local or "")
    if nv:
        release = f"{nv.group(1)}.{int(nv.group(2)):02d}"
        if is_jetson(snap):
            where = f"L4T {snap.provenance.l4t}" if snap.provenance.l4t else "Jetson"
            return Origin(JETSON, f"version {version} (.nv{release}) on a "
                "Jetson", detail=f"{where}, .nv{release}")
        return Origin(NGC, f"version {version} (.nv{release})", detail=f"NGC {release}")
    if local and _GIT_RE.match(local):
        return Origin(SOURCE, f"version {version} (+{local})", detail="+" + local)
    if snap.provenance.nvidia_pytorch_version and local and not index_variant(local):
        ngc = snap.provenance.nvidia_pytorch_version
        return Origin(NGC, f"version {version} in an NGC container "
            f"(NVIDIA_PYTORCH_VERSION={ngc})", detail=f"NGC {ngc}")
    variant = index_variant(local)
    base = split_local(version)[0]
    if ".dev" in base and (variant or local is None):
        return Origin(NIGHTLY, f"version {version}")
    if "a0" in base or (local and not variant):
        return Origin(SOURCE, "version "
            f"{version}" + (f" (+{local})" if local else ""), detail=f"+{local}" if local else "")
    if variant or local is None:
        return Origin(WHEEL, f"version {version}" + ("" if variant else " (PyPI: no local tag)"))
    return Origin(UNKNOWN, f"version {version}")


def torch_origin(snap: Snapshot) -> Origin:
    return dist_origin(snap.install.torch, snap)


def companion_origin(snap: Snapshot, name: str) -> Origin:
    return dist_origin(getattr(snap.install, name, None), snap, (name,))


def jetpack_text(snap: Snapshot, table) -> tuple[str, str | None]:
    """("JetPack 6.1, 6.2, 6.2.1 (L4T 36.4.3, CUDA 12.6)", "12.6") for this Jetson, from the table's
    ``jetpack`` rows; the CUDA is None when the table has no row for its Jetson Linux release."""
    l4t = snap.provenance.l4t
    row = table.jetpack(l4t) if l4t else None
    if row is None:
        return (f"Jetson Linux {l4t}" if l4t else "this JetPack"), None
    return f"JetPack {row.jetpack} (L4T {l4t}, CUDA {row.cuda})", row.cuda
