"""The rows of the compatibility table, as frozen dataclasses. Each keeps its source and confidence."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from doctor.model.versions import major_minor as _major_minor

_SM_NUMBER_RE = re.compile(r"^\s*(?:sm_|compute_)?(\d+)(?:\.(\d))?[af]?\s*$")


@dataclass(frozen=True, slots=True)
class Patch:
    torch: str
    torchvision: str | None
    torchaudio: str | None
    # this patch's own free-threaded builds; None = the release's
    free_threaded: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Release:
    minor: str  # "2.7"
    patches: tuple[Patch, ...]  # ascending
    python_min: str  # "3.9"
    python_max: str  # "3.13"
    free_threaded: tuple[str, ...]  # ("3.13t",)
    variants: dict[str, tuple[str, ...]]  # platform -> ("cpu", "cu126", "cu128", "rocm6.3", "xpu", ...)
    pypi_default: dict[str, str]  # platform -> variant that plain `pip install torch` gets from PyPI
    source: str
    confidence: str
    unverified_fields: tuple[str, ...]  # e.g. ("patches", "variants.windows-x86_64")
    cudnn: dict[str, str] = field(default_factory=dict)  # CUDA variant -> cuDNN version it was built with
    # package -> Requires-Python of the latest patch
    requires_python: dict[str, str] = field(default_factory=dict)
    # platform -> variants whose wheels were not confirmed on the index (inferred): recognised when installed,
    # never recommended by the plan
    unconfirmed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _by_version: dict[str, Patch] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_version", {_public(p.torch): p for p in self.patches})

    # the dict fields are not hashable; a release is identified by its minor (equal
    def __hash__(self) -> int:
        return hash(self.minor)  # releases have equal minors; hashing the patches too cost every cached call)

    @property
    def latest(self) -> Patch:
        return self.patches[-1]

    def patch(self, version: str) -> Patch | None:
        """The row of "2.7.1" or "2.7.1+cu128" (the local tag is ignored)."""
        return self._by_version.get(_public(version))

    def supports_python(self, py: str) -> bool:
        """Whether wheels exist for Python ``py`` ("3.12", "3.12.1", "3.13t"); major.minor only."""
        wanted = _major_minor(py)
        low, high = _major_minor(self.python_min), _major_minor(self.python_max)
        return wanted is not None and low is not None and high is not None and low <= wanted <= high

    def variants_for(self, platform: str) -> tuple[str, ...]:
        return self.variants.get(platform, ())

    def recommendable_variants(self, platform: str) -> tuple[str, ...]:
        """The variants the plan may recommend: the published ones less the unconfirmed ones."""
        skip = self.unconfirmed.get(platform, ())
        return tuple(v for v in self.variants_for(platform) if v not in skip)

    def free_threaded_for(self, version: str | None = None) -> tuple[str, ...]:
        """The free-threaded Pythons ("3.14t") with wheels for a patch (None or unknown: the latest patch)."""
        patch = self.patch(version) if version else None
        patch = patch or self.latest
        return patch.free_threaded if patch.free_threaded is not None else self.free_threaded

    def requires_python_ok(self, package: str, python: str) -> bool | None:
        """Whether ``python`` ("3.14.1") satisfies the package's Requires-Python; None when not recorded."""
        spec = self.requires_python.get(package)
        if spec is None:
            return None
        return _spec_contains(spec, python)

    def cudnn_version(self, variant: str) -> str | None:
        """The cuDNN version a CUDA variant of this release was built with ("9.1.0.70"), when recorded."""
        return self.cudnn.get(variant.strip().lower())


@dataclass(frozen=True, slots=True)
class ArchList:
    torch_minor: str
    variant: str
    platform: str
    sm: tuple[str, ...]  # cubin targets, "sm_80"
    ptx: tuple[str, ...] | None  # "compute_120"; () = none, None = unknown
    source: str
    confidence: str


@dataclass(frozen=True, slots=True)
class CudaDriver:
    cuda: str  # "12.8"
    min_linux: str | None  # driver of the toolkit's GA release, "570.26"
    min_windows: str | None
    source: str
    confidence: str


@dataclass(frozen=True, slots=True)
class MajorFloor:
    major: int  # 12
    min_linux: str | None  # minor-version-compatibility floor, "525.60.13"
    min_windows: str | None
    source: str
    confidence: str


@dataclass(frozen=True, slots=True)
class DriverBranch:
    branch: int  # 570
    max_cuda: str  # newest CUDA the branch supports (nvidia-smi "CUDA Version"), "12.8"
    source: str
    confidence: str


@dataclass(frozen=True, slots=True)
class GpuModel:
    name: str  # as NVML prints it, "NVIDIA GeForce RTX 4090"
    compute_capability: str  # "8.9"
    arch: str  # "Ada Lovelace"
    source: str
    confidence: str
    segment: str | None = None  # "data-center": NVIDIA's data-center drivers and branches apply


@dataclass(frozen=True, slots=True)
class ForwardCompat:
    """Whether a class of GPUs may use CUDA forward compatibility (the cuda-compat package's libcuda on an
    older driver branch). A GPU of a class that may not fails CUDA's start with error 804."""

    gpus: str  # "data-center", "jetson", "rtx-server-ready", "geforce"
    supported: bool
    note: str
    source: str
    confidence: str


@dataclass(frozen=True, slots=True)
class DriverSupport:
    """The last driver branch that supports GPUs of a compute-capability range (Kepler: R470)."""

    min_compute_capability: str  # "5.0"
    max_compute_capability: str  # "7.2"
    last_branch: int  # 580
    architectures: str  # "Maxwell, Pascal, Volta"
    source: str
    confidence: str


@dataclass(frozen=True, slots=True)
class CudaToolkit:
    cuda: str  # "12.8"
    sm: tuple[str, ...]  # every plain target nvcc of that version compiles offline, ascending ("sm_50", ...)
    lowest_sm: str  # "sm_50"
    highest_sm: str  # "sm_120"
    source: str
    confidence: str

    def compiles(self, target: str) -> bool:
        """Whether nvcc of this version compiles offline for ``target`` ("sm_86", "sm_90a", "8.6")."""
        number = _sm_number(target)
        return number is not None and number in {_sm_number(t) for t in self.sm}


@dataclass(frozen=True, slots=True)
class CudnnSupport:
    cudnn: str  # first cuDNN version (major.minor) the row applies to, "9.0"
    cuda_major: int  # the CUDA major of the cuDNN build, 12
    min_compute_capability: str  # "5.0"
    source: str
    confidence: str


@dataclass(frozen=True, slots=True)
class CompanionCudaCheck:
    package: str  # "torchvision"
    versions: str  # a specifier set of the package versions the row covers, ">=0.16"
    compares: str  # "major.minor" or "major": what must match torch.version.cuda at import
    source: str
    confidence: str


@dataclass(frozen=True, slots=True)
class NumpyAbi:
    """torch builds that were compiled against NumPy 1's C API: with NumPy 2 they import, but every NumPy
    conversion fails ("Numpy is not available", "_ARRAY_API not found")."""

    torch: str  # a specifier set of the torch versions the row covers, "<2.3"
    os: str  # the host OS the row applies to ("windows"), or "all"
    numpy: str  # the NumPy those builds work with, "<2"
    source: str
    confidence: str


@dataclass(frozen=True, slots=True)
class DeclaredRequirements:
    """The ``Requires-Dist`` lines of one PyPI torch wheel (its METADATA): what `pip install torch==X`
    installs beside it on that platform, pins of the CUDA library wheels included."""

    torch: str  # "2.1.1": the PyPI build, no local tag
    platform: str  # "linux-x86_64"
    wheel: str  # the wheel the lines were read from
    requires: tuple[str, ...]  # as written, markers included
    source: str
    confidence: str


@dataclass(frozen=True, slots=True)
class JetPackRow:
    l4t: str  # Jetson Linux release this row covers: "36.4" (that minor) or "35" (every 35.x)
    jetpack: str  # "6.1, 6.2, 6.2.1"
    cuda: str  # the CUDA the JetPack ships: "12.6"
    note: str
    source: str
    confidence: str


@dataclass(frozen=True, slots=True)
class WindowsLongestPath:
    """The longest member path of one torch release's win_amd64 wheels (PyPI's, read from the zip's central
    directory): pip writes it under site-packages, so it decides whether an install passes Windows'
    260-character limit when long paths are off."""

    torch: str  # "2.13.0": the PyPI release (no local tag)
    wheel: str  # the wheel read: "torch-2.13.0-cp312-cp312-win_amd64.whl"
    sha256: str  # that wheel's, from the index
    member: str  # the longest member path, as the zip names it ("/"-separated)
    length: int  # len(member)
    source: str
    confidence: str

    def length_for(self, version: str) -> int:
        """The member's length in the build named ``version`` ("2.13.0+cu126"): a member under the dist-info
        folder carries the version in that folder's name (torch-2.13.0+cu126.dist-info), the others do not."""
        if self.member.startswith(f"torch-{self.torch}.dist-info/"):
            return self.length - len(self.torch) + len(version)
        return self.length

    def member_for(self, version: str) -> str:
        """The member's path in the build named ``version``."""
        prefix = f"torch-{self.torch}.dist-info/"
        if self.member.startswith(prefix):
            return f"torch-{version}.dist-info/" + self.member[len(prefix):]
        return self.member


def spec_holds(spec: str, version: str) -> bool | None:
    """Whether the PEP 440 specifier set ``spec`` holds ``version`` (pre-releases included); None when
    ``version`` is not a version. Raises packaging's InvalidSpecifier for a bad ``spec``."""
    try:
        parsed = Version(version)
    except ValueError:  # InvalidVersion, or a part past int()'s 4,300-digit limit
        return None
    return SpecifierSet(spec).contains(parsed, prereleases=True)


def _spec_contains(spec: str, python: str) -> bool | None:
    return spec_holds(spec, python.rstrip("t"))


def _sm_number(target: str) -> int | None:
    """ "sm_86" / "sm_90a" / "compute_120" -> 86 / 90 / 120; "8.6" -> 86; else None."""
    match = _SM_NUMBER_RE.match(target or "")
    if not match:
        return None
    if match.group(2) is not None:
        return int(match.group(1)) * 10 + int(match.group(2))
    return int(match.group(1))


@functools.lru_cache(maxsize=4096)  # pure, and asked the same few versions thousands of times
def _public(version: str) -> str:
    """ "2.7.1+cu128" -> "2.7.1" in packaging's normal form ("2.7" and "2.7.0" stay distinct strings)."""
    base = (version or "").split("+", 1)[0].strip()
    try:
        return str(Version(base))
    except ValueError:  # InvalidVersion, or a part past int()'s 4,300-digit limit
        return base
