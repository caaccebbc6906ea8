"""The compatibility table: torch releases, wheel arch lists, CUDA driver floors, driver branches, GPUs.

The facts live in ``compat_tables/pytorch.json`` (data, with a source and a confidence on every row);
this module only reads that one file, validates it and builds indexes so that every lookup is a dict
access. Any problem with the file is a ``TableError`` naming the file and the field, never a traceback.
Pure: stdlib + packaging, no subprocess, no environment.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from doctor.errors import TableError
from doctor.model.versions import VARIANT_RE as _VARIANT_RE
from doctor.model.versions import major_minor as _major_minor
from doctor.model.versions import minor_key as _minor_key
from doctor.model.versions import variant_to_cuda

SCHEMA_VERSION = 1
CONFIDENCES = ("verified", "inferred", "unverified")
PLATFORMS = ("linux-x86_64", "linux-aarch64", "windows-x86_64", "darwin-arm64", "darwin-x86_64")
DEFAULT_INDEX_BASE = "https://download.pytorch.org/whl"

_MINOR_RE = re.compile(r"^\d+\.\d+$")
_DRIVER_RE = re.compile(r"^\d+(\.\d+)*$")
_SM_RE = re.compile(r"^sm_\d+[af]?$")
_PTX_RE = re.compile(r"^compute_\d+[af]?$")
_PLAIN_SM_RE = re.compile(r"^sm_\d+$")
_FREE_THREADED_RE = re.compile(r"^\d+\.\d+t$")
_SM_NUMBER_RE = re.compile(r"^\s*(?:sm_|compute_)?(\d+)(?:\.(\d))?[af]?\s*$")
_CUDA_CHECKS = ("major.minor", "major")

# GPU name normalisation (gpus.json naming_notes): vendor/brand prefixes, then form-factor/memory suffixes.
_NAME_PREFIX_RE = re.compile(r"^(nvidia|tesla|geforce)\s+")
_NAME_SUFFIX_RE = re.compile(
    r"(\s+laptop gpu|\s+with max-q design|\s+mig\s.*|[\s-]+(sxm\d*|pcie|pci-e|fhhl|nvl|ac|hbm\d*e?|\d+\s?gb?))$"
)


# --- rows -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Patch:
    torch: str
    torchvision: str | None
    torchaudio: str | None
    free_threaded: tuple[str, ...] | None = None  # this patch's own free-threaded builds; None = the release's


@dataclass(frozen=True)
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
    requires_python: dict[str, str] = field(default_factory=dict)  # package -> Requires-Python of the latest patch
    _by_version: dict[str, Patch] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_version", {_public(p.torch): p for p in self.patches})

    def __hash__(self) -> int:  # the dict fields are not hashable; a release is identified by its patches
        return hash((self.minor, self.patches))

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
        try:
            return SpecifierSet(spec).contains(Version(python.rstrip("t")), prereleases=True)
        except InvalidVersion:
            return None

    def cudnn_version(self, variant: str) -> str | None:
        """The cuDNN version a CUDA variant of this release was built with ("9.1.0.70"), when recorded."""
        return self.cudnn.get(variant.strip().lower())


@dataclass(frozen=True)
class ArchList:
    torch_minor: str
    variant: str
    platform: str
    sm: tuple[str, ...]  # cubin targets, "sm_80"
    ptx: tuple[str, ...] | None  # "compute_120"; () = none, None = unknown
    source: str
    confidence: str


@dataclass(frozen=True)
class CudaDriver:
    cuda: str  # "12.8"
    min_linux: str | None  # driver of the toolkit's GA release, "570.26"
    min_windows: str | None
    source: str
    confidence: str


@dataclass(frozen=True)
class MajorFloor:
    major: int  # 12
    min_linux: str | None  # minor-version-compatibility floor, "525.60.13"
    min_windows: str | None
    source: str
    confidence: str


@dataclass(frozen=True)
class DriverBranch:
    branch: int  # 570
    max_cuda: str  # newest CUDA the branch supports (nvidia-smi "CUDA Version"), "12.8"
    source: str
    confidence: str


@dataclass(frozen=True)
class GpuModel:
    name: str  # as NVML prints it, "NVIDIA GeForce RTX 4090"
    compute_capability: str  # "8.9"
    arch: str  # "Ada Lovelace"
    source: str
    confidence: str


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class CudnnSupport:
    cudnn: str  # first cuDNN version (major.minor) the row applies to, "9.0"
    cuda_major: int  # the CUDA major of the cuDNN build, 12
    min_compute_capability: str  # "5.0"
    source: str
    confidence: str


@dataclass(frozen=True)
class CompanionCudaCheck:
    package: str  # "torchvision"
    versions: str  # a specifier set of the package versions the row covers, ">=0.16"
    compares: str  # "major.minor" or "major": what must match torch.version.cuda at import
    source: str
    confidence: str


# --- the table ---------------------------------------------------------------------------------


class CompatTable:
    """A loaded, validated table with O(1) lookups. Build it with ``load_table``."""

    def __init__(
        self,
        path: str,
        schema_version: int,
        table_version: str,
        verified_on: str,
        releases: tuple[Release, ...],
        arch_lists: tuple[ArchList, ...],
        cuda_drivers: tuple[CudaDriver, ...],
        major_floors: tuple[MajorFloor, ...],
        driver_branches: tuple[DriverBranch, ...],
        gpu_models: tuple[GpuModel, ...],
        gpu_aliases: dict[str, str] | None = None,
        cuda_toolkits: tuple[CudaToolkit, ...] = (),
        cudnn_support: tuple[CudnnSupport, ...] = (),
        companion_checks: tuple[CompanionCudaCheck, ...] = (),
    ):
        self.path = path
        self.schema_version = schema_version
        self.table_version = table_version
        self.verified_on = verified_on
        self.releases = tuple(sorted(releases, key=lambda r: Version(r.minor)))
        self.arch_lists = arch_lists
        self.cuda_drivers = cuda_drivers
        self.major_floors = major_floors
        self.driver_branches = tuple(sorted(driver_branches, key=lambda b: b.branch))
        self.gpu_models = gpu_models

        self._releases = {r.minor: r for r in self.releases}
        self._arch = {(a.torch_minor, a.variant, a.platform): a for a in arch_lists}
        # (variant, platform) -> (ascending minors, their rows) for the older-minor fallback
        self._arch_series: dict[tuple[str, str], tuple[list[Version], list[ArchList]]] = {}
        for row in sorted(arch_lists, key=lambda a: Version(a.torch_minor)):
            minors, rows = self._arch_series.setdefault((row.variant, row.platform), ([], []))
            minors.append(Version(row.torch_minor))
            rows.append(row)
        self._cuda = {c.cuda: c for c in cuda_drivers}
        self._majors = {m.major: m for m in major_floors}
        self._branches = {b.branch: b for b in self.driver_branches}
        self._branch_numbers = [b.branch for b in self.driver_branches]
        self._gpus_exact, self._gpus_loose = _gpu_indexes(gpu_models, gpu_aliases or {})
        self.cuda_toolkits = tuple(sorted(cuda_toolkits, key=lambda t: Version(t.cuda)))
        self.cudnn_rows = cudnn_support
        self.companion_checks = companion_checks
        self._toolkits = {t.cuda: t for t in self.cuda_toolkits}
        # cuda major -> (ascending first cuDNN versions, their rows) for the nearest-lower lookup
        self._cudnn: dict[int, tuple[list[Version], list[CudnnSupport]]] = {}
        for row in sorted(cudnn_support, key=lambda c: Version(c.cudnn)):
            versions, rows = self._cudnn.setdefault(row.cuda_major, ([], []))
            versions.append(Version(row.cudnn))
            rows.append(row)
        self._companions: dict[str, tuple[tuple[SpecifierSet, CompanionCudaCheck], ...]] = {}
        for check in companion_checks:
            entry = (SpecifierSet(check.versions), check)
            self._companions[check.package] = (*self._companions.get(check.package, ()), entry)

    def __repr__(self) -> str:
        return f"CompatTable({self.path!r}, table_version={self.table_version!r})"

    def release(self, version: str) -> Release | None:
        """The row of a torch minor: "2.7", "2.7.1", "2.7.1+cu128" and "2.8.0a0+git..." all give 2.x."""
        key = _minor_key(version)
        return self._releases.get(key) if key else None

    def arch_list(self, torch_version: str, variant: str, platform: str) -> ArchList | None:
        """The arch list of a build; falls back to the newest older row of the same variant and platform
        (arch lists rarely change), but only when that variant is published for this release."""
        minor = _minor_key(torch_version)
        if minor is None:
            return None
        variant = variant.strip().lower()
        exact = self._arch.get((minor, variant, platform))
        if exact is not None:
            return exact
        release = self._releases.get(minor)
        if release is None or variant not in release.variants_for(platform):
            return None
        minors, rows = self._arch_series.get((variant, platform), ([], []))
        at = bisect.bisect_right(minors, Version(minor))
        return rows[at - 1] if at else None

    def cuda_driver(self, cuda: str) -> CudaDriver | None:
        """The GA driver row of a CUDA minor: "12.8", "12.8.1" or "cu128"."""
        key = variant_to_cuda(cuda.strip().lower()) or _minor_key(cuda)
        return self._cuda.get(key) if key else None

    def major_floor(self, major: int) -> MajorFloor | None:
        return self._majors.get(major)

    def max_cuda_for_driver(self, driver_version: str) -> DriverBranch | None:
        """The branch of "570.124.04" (570 -> "12.8"); an unknown branch takes the nearest lower one
        (Windows 572.x is R570), and a driver older than every known branch gives None."""
        match = re.match(r"^\s*(\d+)", driver_version or "")
        if not match:
            return None
        branch = int(match.group(1))
        exact = self._branches.get(branch)
        if exact is not None:
            return exact
        at = bisect.bisect_right(self._branch_numbers, branch)
        return self._branches[self._branch_numbers[at - 1]] if at else None

    def gpu(self, name: str) -> GpuModel | None:
        """The model of an NVML name. Exact normalised match first, then without memory/form-factor
        suffixes (only where every model sharing that stem has the same compute capability)."""
        light = _normalise_gpu_name(name)
        found = self._gpus_exact.get(light)
        if found is None:
            found = self._gpus_loose.get(_strip_gpu_suffixes(light))
        return found

    def toolkit(self, cuda: str) -> CudaToolkit | None:
        """The targets nvcc of a CUDA minor compiles offline: "12.8", "12.8.1" or "cu128"."""
        key = variant_to_cuda((cuda or "").strip().lower()) or _minor_key(cuda or "")
        return self._toolkits.get(key) if key else None

    def cudnn_support(self, cudnn: str, cuda_major: int) -> CudnnSupport | None:
        """The support row of a cuDNN version ("9.1.0.70") built for a CUDA major: the row with the
        newest first version not above it, for that CUDA major. None when no row covers it."""
        key = _minor_key(cudnn or "")
        versions, rows = self._cudnn.get(cuda_major, ([], []))
        if key is None or not versions:
            return None
        at = bisect.bisect_right(versions, Version(key))
        return rows[at - 1] if at else None

    def cudnn_min_cc(self, torch_version: str, variant: str | None = None) -> str | None:
        """The lowest compute capability the cuDNN of a torch build supports ("5.0" for cuDNN 9).

        With a variant ("cu118"): that build's cuDNN. Without: the answer shared by every CUDA variant of
        the release that records its cuDNN, or None when they differ or none is recorded."""
        release = self.release(torch_version)
        if release is None:
            return None
        variants = [variant.strip().lower()] if variant else sorted(release.cudnn)
        answers = set()
        for name in variants:
            cuda = variant_to_cuda(name)
            version = release.cudnn_version(name)
            row = self.cudnn_support(version, int(cuda.split(".")[0])) if cuda and version else None
            if row is None:
                return None
            answers.add(row.min_compute_capability)
        return answers.pop() if len(answers) == 1 else None

    def companion_cuda_check(self, package: str, version: str) -> CompanionCudaCheck | None:
        """How a companion package ("torchvision", "0.15.2+cu117") compares its CUDA with torch's at
        import: the row whose version range holds it, or None when no row does."""
        try:
            wanted = Version(_public(version))
        except InvalidVersion:
            return None
        for spec, check in self._companions.get((package or "").strip().lower(), ()):
            if spec.contains(wanted, prereleases=True):
                return check
        return None


# --- public helpers ----------------------------------------------------------------------------


def index_url(variant: str, base: str = DEFAULT_INDEX_BASE) -> str:
    """The PyTorch wheel index of a variant: "cu128" -> https://download.pytorch.org/whl/cu128."""
    return f"{base.rstrip('/')}/{variant}"


def default_table_path() -> Path:
    """The bundled table: doctor/compat_tables/ in an installed wheel, <repo>/compat_tables/ in a checkout."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "compat_tables" / "pytorch.json"
    if installed.is_file():
        return installed
    return package.parent / "compat_tables" / "pytorch.json"


def load_table(path: str | Path | None = None) -> CompatTable:
    """Load and validate a table (None = the bundled one). Cached per file path and modification time."""
    resolved = Path(path).expanduser() if path is not None else default_table_path()
    try:
        resolved = resolved.resolve()
        stat = resolved.stat()
    except OSError as exc:
        raise TableError(f"compat table {resolved}: cannot read: {exc.strerror or exc}") from None
    return _load_cached(str(resolved), stat.st_mtime_ns, stat.st_size)


# --- loading and validation --------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, size: int) -> CompatTable:
    del mtime_ns, size  # cache keys only: an edited file is read again
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TableError(
            f"compat table {path}: cannot read: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TableError(
            f"compat table {path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    return _Parser(path).table(data)


class _Parser:
    """Turns the JSON document into rows, raising a one-line TableError at the first bad field."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, where: str, message: str) -> TableError:
        return TableError(f"compat table {self.path}: {where}: {message}")

    # typed field access ---------------------------------------------------------------------

    def get(self, obj: dict, key: str, where: str, kinds: tuple[type, ...], optional: bool = False) -> Any:
        if key not in obj:
            if optional:
                return None
            raise self.fail(f"{where}.{key}" if where else key, "missing")
        value = obj[key]
        if value is None and optional:
            return None
        # bool is an int subclass: a stray true/false must not pass as a number
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            wanted = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds)
            raise self.fail(f"{where}.{key}" if where else key, f"expected {wanted}, got {_json_kind(value)}")
        return value

    def string(
        self, obj: dict, key: str, where: str, pattern: re.Pattern | None = None, what: str = ""
    ) -> str:
        value = self.get(obj, key, where, (str,))
        self.check_pattern(value, f"{where}.{key}", pattern, what)
        return value

    def opt_string(self, obj: dict, key: str, where: str, pattern: re.Pattern | None = None, what: str = ""):
        value = self.get(obj, key, where, (str,), optional=True)
        if value is not None:
            self.check_pattern(value, f"{where}.{key}", pattern, what)
        return value

    def check_pattern(self, value: str, where: str, pattern: re.Pattern | None, what: str) -> None:
        if pattern is not None and not pattern.match(value):
            raise self.fail(where, f"{value!r} is not {what}")

    def check_version(self, value: str, where: str) -> None:
        try:
            Version(value)
        except InvalidVersion:
            raise self.fail(where, f"{value!r} is not a version") from None

    def version(self, obj: dict, key: str, where: str, optional: bool = False) -> str | None:
        value = self.get(obj, key, where, (str,), optional=optional)
        if value is not None:
            try:
                Version(value)
            except InvalidVersion:
                raise self.fail(f"{where}.{key}", f"{value!r} is not a version") from None
        return value

    def strings(
        self, obj: dict, key: str, where: str, pattern: re.Pattern | None = None, what: str = ""
    ) -> tuple:
        values = self.get(obj, key, where, (list,))
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise self.fail(f"{where}.{key}[{i}]", f"expected a string, got {_json_kind(value)}")
            self.check_pattern(value, f"{where}.{key}[{i}]", pattern, what)
        return tuple(values)

    def provenance(self, obj: dict, where: str) -> tuple[str, str]:
        source = self.get(obj, "source", where, (str,))
        if not source.strip():
            raise self.fail(f"{where}.source", "is empty")
        confidence = self.get(obj, "confidence", where, (str,))
        if confidence not in CONFIDENCES:
            raise self.fail(f"{where}.confidence", f"{confidence!r} is not one of {', '.join(CONFIDENCES)}")
        return source, confidence

    def rows(self, data: dict, key: str) -> list[tuple[str, dict]]:
        rows = self.get(data, key, "", (list,))
        out = []
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise self.fail(f"{key}[{i}]", f"expected an object, got {_json_kind(row)}")
            out.append((f"{key}[{i}]", row))
        return out

    def unique(self, seen: dict, key: Any, where: str, shown: str) -> None:
        if key in seen:
            raise self.fail(where, f"duplicate {shown} (first at {seen[key]})")
        seen[key] = where

    # sections --------------------------------------------------------------------------------

    def table(self, data: Any) -> CompatTable:
        if not isinstance(data, dict):
            raise self.fail("(top level)", f"expected an object, got {_json_kind(data)}")
        schema = self.get(data, "schema_version", "", (int,))
        if schema != SCHEMA_VERSION:
            raise self.fail(
                "schema_version", f"{schema} is not supported (this torchdoctor reads {SCHEMA_VERSION})"
            )
        table_version = self.get(data, "table_version", "", (str,))
        verified_on = self.get(data, "verified_on", "", (str,))
        for key, value in (("table_version", table_version), ("verified_on", verified_on)):
            if not value.strip():
                raise self.fail(key, "is empty")

        releases = self.section(data, "releases", self.release, lambda r: r.minor, "release minor")
        by_minor = {r.minor: r for r in releases}
        arch_lists = self.section(
            data,
            "arch_lists",
            self.arch_row,
            lambda a: (a.torch_minor, a.variant, a.platform),
            "arch list row",
        )
        for (where, _), row in zip(self.rows(data, "arch_lists"), arch_lists, strict=True):
            release = by_minor.get(row.torch_minor)
            if release is None:
                raise self.fail(f"{where}.torch_minor", f"{row.torch_minor!r} has no row in releases")
            if row.variant not in release.variants_for(row.platform):
                raise self.fail(
                    f"{where}.variant",
                    f"{row.variant!r} is not a {row.platform} variant of torch {row.torch_minor} in releases",
                )
        cuda = self.section(data, "cuda", self.cuda_row, lambda c: c.cuda, "CUDA version")
        majors = self.section(data, "cuda_majors", self.major_row, lambda m: m.major, "CUDA major")
        branches = self.section(data, "driver_branches", self.branch_row, lambda b: b.branch, "driver branch")
        aliases: dict[str, str] = {}
        gpus = self.section(
            data, "gpus", lambda row, where: self.gpu_row(row, where, aliases), lambda g: g.name, "GPU name"
        )
        # Optional sections (schema 1 stays readable without them).
        toolkits = self.section(data, "cuda_toolkits", self.toolkit_row, lambda t: t.cuda, "CUDA toolkit", True)
        cudnn = self.section(
            data, "cudnn", self.cudnn_row, lambda c: (c.cudnn, c.cuda_major), "cuDNN row", True
        )
        companions = self.companion_rules(data)
        for (where, _), release in zip(self.rows(data, "releases"), releases, strict=True):
            for variant in release.cudnn:
                if variant not in {v for names in release.variants.values() for v in names}:
                    raise self.fail(f"{where}.cudnn.{variant}", f"{variant!r} is not a variant of torch {release.minor}")
        return CompatTable(
            self.path,
            schema,
            table_version,
            verified_on,
            tuple(releases),
            tuple(arch_lists),
            tuple(cuda),
            tuple(majors),
            tuple(branches),
            tuple(gpus),
            aliases,
            tuple(toolkits),
            tuple(cudnn),
            tuple(companions),
        )

    def section(
        self, data: dict, key: str, parse: Callable, identity: Callable, shown: str, optional: bool = False
    ) -> list:
        if optional and key not in data:
            return []
        seen: dict = {}
        parsed = []
        for where, row in self.rows(data, key):
            item = parse(row, where)
            self.unique(seen, identity(item), where, f"{shown} {identity(item)!r}")
            parsed.append(item)
        return parsed

    def release(self, row: dict, where: str) -> Release:
        minor = self.get(row, "minor", where, (str,))
        if not _MINOR_RE.match(minor):
            raise self.fail(f"{where}.minor", f"{minor!r} is not a version (major.minor)")
        patches = []
        seen: dict = {}
        for i, item in enumerate(self.get(row, "patches", where, (list,))):
            at = f"{where}.patches[{i}]"
            if not isinstance(item, dict):
                raise self.fail(at, f"expected an object, got {_json_kind(item)}")
            torch = self.version(item, "torch", at)
            if _minor_key(torch) != minor:
                raise self.fail(f"{at}.torch", f"{torch!r} is not a {minor}.x version")
            self.unique(seen, _public(torch), f"{at}.torch", f"torch patch {torch!r}")
            patch_free_threaded = None
            if item.get("free_threaded") is not None:
                patch_free_threaded = self.strings(item, "free_threaded", at, _FREE_THREADED_RE, "a Python like '3.13t'")
            patches.append(
                Patch(
                    torch,
                    self.version(item, "torchvision", at, optional=True),
                    self.version(item, "torchaudio", at, optional=True),
                    patch_free_threaded,
                )
            )
            if "confidence" in item and item["confidence"] not in CONFIDENCES:
                raise self.fail(
                    f"{at}.confidence", f"{item['confidence']!r} is not one of {', '.join(CONFIDENCES)}"
                )
        if not patches:
            raise self.fail(f"{where}.patches", "is empty")
        patches.sort(key=lambda p: Version(p.torch))

        python = self.get(row, "python", where, (dict,))
        py_min = self.version(python, "min", f"{where}.python")
        py_max = self.version(python, "max", f"{where}.python")
        free_threaded = self.strings(python, "free_threaded", f"{where}.python", _FREE_THREADED_RE, "a Python like '3.13t'")

        variants = {}
        for platform, names in self.get(row, "variants", where, (dict,)).items():
            at = f"{where}.variants.{platform}"
            if platform not in PLATFORMS:
                raise self.fail(at, f"unknown platform (expected one of {', '.join(PLATFORMS)})")
            if not isinstance(names, list):
                raise self.fail(at, f"expected a list, got {_json_kind(names)}")
            for i, name in enumerate(names):
                if not isinstance(name, str) or not _VARIANT_RE.match(name):
                    raise self.fail(f"{at}[{i}]", f"{name!r} is not a variant (cpu, cuNNN, rocmX.Y[.Z], xpu)")
            if len(set(names)) != len(names):
                raise self.fail(at, "lists a variant twice")
            variants[platform] = tuple(names)

        pypi_default = {}
        for platform, name in self.get(row, "pypi_default", where, (dict,)).items():
            at = f"{where}.pypi_default.{platform}"
            if not isinstance(name, str) or name not in variants.get(platform, ()):
                raise self.fail(at, f"{name!r} is not among {where}.variants.{platform}")
            pypi_default[platform] = name

        cudnn = {}
        for variant, version in (self.get(row, "cudnn", where, (dict,), optional=True) or {}).items():
            at = f"{where}.cudnn.{variant}"
            if variant_to_cuda(variant) is None:
                raise self.fail(at, f"{variant!r} is not a CUDA variant (cuNNN)")
            if not isinstance(version, str) or _minor_key(version) is None:
                raise self.fail(at, f"{version!r} is not a cuDNN version")
            self.check_version(version, at)
            cudnn[variant] = version

        requires_python = {}
        for package, spec in (self.get(row, "requires_python", where, (dict,), optional=True) or {}).items():
            at = f"{where}.requires_python.{package}"
            if not isinstance(spec, str):
                raise self.fail(at, f"expected a string, got {_json_kind(spec)}")
            try:
                SpecifierSet(spec)
            except InvalidSpecifier:
                raise self.fail(at, f"{spec!r} is not a version specifier") from None
            requires_python[package] = spec

        source, confidence = self.provenance(row, where)
        unverified = self.strings(row, "unverified_fields", where) if "unverified_fields" in row else ()
        return Release(
            minor,
            tuple(patches),
            py_min,
            py_max,
            free_threaded,
            variants,
            pypi_default,
            source,
            confidence,
            unverified,
            cudnn,
            requires_python,
        )

    def arch_row(self, row: dict, where: str) -> ArchList:
        minor = self.string(row, "torch_minor", where, _MINOR_RE, "a version (major.minor)")
        variant = self.string(row, "variant", where, _VARIANT_RE, "a variant (cpu, cuNNN, rocmX.Y[.Z], xpu)")
        platform = self.string(row, "platform", where)
        if platform not in PLATFORMS:
            raise self.fail(f"{where}.platform", f"{platform!r} is not one of {', '.join(PLATFORMS)}")
        sm = self.strings(row, "sm", where, _SM_RE, "a cubin target like 'sm_80'")
        ptx = None
        if row.get("ptx") is not None:
            ptx = self.strings(row, "ptx", where, _PTX_RE, "a PTX target like 'compute_120'")
        elif "ptx" not in row:
            raise self.fail(f"{where}.ptx", "missing (use null when unknown)")
        return ArchList(minor, variant, platform, sm, ptx, *self.provenance(row, where))

    def cuda_row(self, row: dict, where: str) -> CudaDriver:
        cuda = self.string(row, "cuda", where, _MINOR_RE, "a CUDA version (major.minor)")
        min_linux = self.opt_string(row, "min_linux", where, _DRIVER_RE, "a driver version")
        min_windows = self.opt_string(row, "min_windows", where, _DRIVER_RE, "a driver version")
        return CudaDriver(cuda, min_linux, min_windows, *self.provenance(row, where))

    def major_row(self, row: dict, where: str) -> MajorFloor:
        major = self.get(row, "major", where, (int,))
        min_linux = self.opt_string(row, "min_linux", where, _DRIVER_RE, "a driver version")
        min_windows = self.opt_string(row, "min_windows", where, _DRIVER_RE, "a driver version")
        return MajorFloor(major, min_linux, min_windows, *self.provenance(row, where))

    def branch_row(self, row: dict, where: str) -> DriverBranch:
        branch = self.get(row, "branch", where, (int,))
        max_cuda = self.string(row, "max_cuda", where, _MINOR_RE, "a CUDA version (major.minor)")
        return DriverBranch(branch, max_cuda, *self.provenance(row, where))

    def toolkit_row(self, row: dict, where: str) -> CudaToolkit:
        cuda = self.string(row, "cuda", where, _MINOR_RE, "a CUDA version (major.minor)")
        sm = self.strings(row, "sm", where, _PLAIN_SM_RE, "a plain cubin target like 'sm_80'")
        if not sm:
            raise self.fail(f"{where}.sm", "is empty")
        numbers = [_sm_number(t) for t in sm]
        if numbers != sorted(set(numbers)):
            raise self.fail(f"{where}.sm", "is not ascending without repeats")
        lowest = self.string(row, "lowest_sm", where, _PLAIN_SM_RE, "a plain cubin target like 'sm_80'")
        highest = self.string(row, "highest_sm", where, _PLAIN_SM_RE, "a plain cubin target like 'sm_80'")
        if lowest != sm[0]:
            raise self.fail(f"{where}.lowest_sm", f"{lowest!r} is not the lowest of sm ({sm[0]!r})")
        if highest != sm[-1]:
            raise self.fail(f"{where}.highest_sm", f"{highest!r} is not the highest of sm ({sm[-1]!r})")
        return CudaToolkit(cuda, sm, lowest, highest, *self.provenance(row, where))

    def cudnn_row(self, row: dict, where: str) -> CudnnSupport:
        cudnn = self.string(row, "cudnn", where, _MINOR_RE, "a cuDNN version (major.minor)")
        cuda_major = self.get(row, "cuda_major", where, (int,))
        cc = self.string(row, "min_compute_capability", where, _MINOR_RE, "a compute capability (major.minor)")
        return CudnnSupport(cudnn, cuda_major, cc, *self.provenance(row, where))

    def companion_rules(self, data: dict) -> list[CompanionCudaCheck]:
        rules = self.get(data, "companion_rules", "", (dict,), optional=True)
        if rules is None:
            return []
        checks = []
        for i, row in enumerate(self.get(rules, "cuda_check", "companion_rules", (list,))):
            where = f"companion_rules.cuda_check[{i}]"
            if not isinstance(row, dict):
                raise self.fail(where, f"expected an object, got {_json_kind(row)}")
            package = self.string(row, "package", where).strip().lower()
            versions = self.string(row, "versions", where)
            try:
                SpecifierSet(versions)
            except InvalidSpecifier:
                raise self.fail(f"{where}.versions", f"{versions!r} is not a version specifier") from None
            compares = self.string(row, "compares", where)
            if compares not in _CUDA_CHECKS:
                raise self.fail(f"{where}.compares", f"{compares!r} is not one of {', '.join(_CUDA_CHECKS)}")
            checks.append(CompanionCudaCheck(package, versions, compares, *self.provenance(row, where)))
        return checks

    def gpu_row(self, row: dict, where: str, aliases: dict[str, str]) -> GpuModel:
        name = self.string(row, "name", where)
        cc = self.string(row, "compute_capability", where, _MINOR_RE, "a compute capability (major.minor)")
        arch = self.string(row, "arch", where)
        if "aliases" in row:
            for alias in self.strings(row, "aliases", where):
                aliases[alias] = name
        return GpuModel(name, cc, arch, *self.provenance(row, where))


_KIND_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "an object", bool: "a boolean"}


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    return _KIND_NAMES.get(type(value), type(value).__name__)


# --- small pure helpers ------------------------------------------------------------------------


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
    except InvalidVersion:
        return base


def _normalise_gpu_name(name: str) -> str:
    """Case-insensitive, single spaces, without leading "NVIDIA ", "Tesla ", "GeForce " (in any order)."""
    text = " ".join((name or "").split()).lower()
    while True:
        stripped = _NAME_PREFIX_RE.sub("", text, count=1)
        if stripped == text:
            return text
        text = stripped


def _strip_gpu_suffixes(light: str) -> str:
    """Drop memory/form-factor tokens: "a100-sxm4-80gb" -> "a100", "h100 80gb hbm3" -> "h100"."""
    text = light
    while True:
        stripped = _NAME_SUFFIX_RE.sub("", text)
        if stripped == text or not stripped:
            return text
        text = stripped


def _gpu_indexes(models: tuple[GpuModel, ...], aliases: dict[str, str]):
    by_name = {m.name: m for m in models}
    exact: dict[str, GpuModel] = {}
    for model in models:
        exact.setdefault(_normalise_gpu_name(model.name), model)
    for alias, name in aliases.items():
        exact.setdefault(_normalise_gpu_name(alias), by_name[name])
    # A stem shared by models of different compute capability is ambiguous and left out.
    loose: dict[str, GpuModel] = {}
    ambiguous: set[str] = set()
    for key, model in exact.items():
        stem = _strip_gpu_suffixes(key)
        other = loose.get(stem)
        if other is not None and other.compute_capability != model.compute_capability:
            ambiguous.add(stem)
        loose.setdefault(stem, model)
    for stem in ambiguous:
        del loose[stem]
    return exact, loose
