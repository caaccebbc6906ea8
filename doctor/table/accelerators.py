"""The accelerator table (``compat_tables/accelerators.json``): what torchdoctor knows of GPUs other than
NVIDIA's. Which GPU targets each ROCm wheel holds, the HSA_OVERRIDE_GFX_VERSION siblings people reported
working, AMD and Intel PCI device ids, and the macOS floor of each release's wheels.

It is a file of its own beside ``pytorch.json``, read and validated the same way: every row keeps its
source and confidence, and a bad field is one ``TableError`` line naming the file and the field.
Pure: stdlib + packaging, no subprocess, no environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from doctor.errors import TableError
from doctor.model.versions import minor_key, split_local
from doctor.table.files import bundled, read_json
from doctor.table.parse import SCHEMA_VERSION, _Parser

MAX_BYTES = 8 << 20  # the bundled file is ~80 KB

_MINOR_RE = re.compile(r"^\d+\.\d+$")
_ROCM_RE = re.compile(r"^rocm\d+\.\d+(?:\.\d+)?$")
_GFX_RE = re.compile(r"^gfx[0-9]{1,2}[0-9a-f]{2}$")
_OVERRIDE_RE = re.compile(r"^(\d{1,2})\.(\d{1,2})\.(\d{1,2})$")
_PCI_ID_RE = re.compile(r"^0x[0-9a-f]{4}$")
_MACOS_PLATFORMS = ("darwin-arm64", "darwin-x86_64")
REPORTED = ("works", "fails", "unknown")
XPU_STATES = ("validated", "not-listed")


@dataclass(frozen=True)
class RocmTargets:
    """The GPU targets one ROCm wheel was compiled for (torch.cuda.get_arch_list() of that build)."""

    torch_minor: str  # "2.7"
    variant: str  # "rocm6.3"
    gfx: tuple[str, ...]  # ("gfx900", ..., "gfx1201")
    source: str
    confidence: str
    note: str | None = None

    def covers(self, gfx: str) -> bool:
        return gfx in self.gfx


@dataclass(frozen=True)
class HsaOverride:
    """What HSA_OVERRIDE_GFX_VERSION value makes a GPU load a sibling's code, and whether people reported it
    working (``reported``: "works", "fails" or "unknown")."""

    gfx: str  # the GPU's own processor: "gfx1031"
    override: str | None  # "10.3.0"; None when no sibling is known
    reported: str
    source: str
    confidence: str

    @property
    def sibling(self) -> str | None:
        """The processor the override claims: "10.3.0" -> "gfx1030"."""
        return override_processor(self.override) if self.override else None


@dataclass(frozen=True)
class RocmFloor:
    """The oldest ROCm release whose compiler and libraries build a processor: a ROCm build of torch made with
    an older ROCm cannot hold it, whatever torch release it is."""

    gfx: str  # "gfx950"
    rocm: str  # "7.0"
    source: str
    confidence: str

    def excludes(self, rocm: str) -> bool | None:
        """Whether a build made with ROCm ``rocm`` ("6.4", "6.4.43482") is too old to hold ``gfx``; None
        when ``rocm`` is no version."""
        older = _at_least(rocm, self.rocm)
        return None if older is None else not older


@dataclass(frozen=True)
class RocmWindowsFamily:
    """A GPU family AMD's own ROCm builds of torch for Windows (TheRock) hold; download.pytorch.org has no
    ROCm wheel for Windows."""

    family: str  # "gfx110X-all": TheRock's name, also its index's
    gfx: tuple[str, ...]
    source: str
    confidence: str

    def covers(self, gfx: str) -> bool:
        return gfx in self.gfx


@dataclass(frozen=True)
class AmdPciRow:
    device_id: str  # "0x73df"
    gfx: str
    name: str  # the pci.ids name: "Navi 22 [Radeon RX 6700/6700 XT/6750 XT / 6800M/6850M XT]"
    segment: str  # "dgpu" or "apu"
    source: str
    confidence: str


@dataclass(frozen=True)
class IntelGpuFamily:
    family: str  # "DG2"
    product: str  # "Intel Arc A-Series (Alchemist), ..."
    device_ids: tuple[str, ...]
    discrete: bool
    xpu: str  # "validated": on PyTorch's XPU hardware list; "not-listed"
    source: str
    confidence: str
    note: str | None = None


@dataclass(frozen=True)
class MacosFloor:
    """The oldest macOS a release's wheels install on, and the oldest on which its MPS backend works."""

    torch_minor: str
    platform: str  # "darwin-arm64" or "darwin-x86_64"
    min_macos: str  # "14.0"
    mps_min_macos: str | None  # None: no MPS in that build
    source: str
    confidence: str
    note: str | None = None

    def installs_on(self, macos: str) -> bool | None:
        return _at_least(macos, self.min_macos)

    def mps_on(self, macos: str) -> bool | None:
        if self.mps_min_macos is None:
            return False
        return _at_least(macos, self.mps_min_macos)


def override_processor(value: str | None) -> str | None:
    """HSA_OVERRIDE_GFX_VERSION's major.minor.stepping as a processor: "10.3.0" -> "gfx1030",
    "9.0.10" -> "gfx90a"; None when it spells none (minor or stepping past one hex digit)."""
    m = _OVERRIDE_RE.match((value or "").strip())
    if not m:
        return None
    major, minor, stepping = (int(g) for g in m.groups())
    if not (0 < major and minor < 16 and stepping < 16):
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


def processor_override(gfx: str) -> str | None:
    """The inverse: "gfx1030" -> "10.3.0", "gfx90a" -> "9.0.10"."""
    if not _GFX_RE.match(gfx or ""):
        return None
    digits = gfx[3:]
    return f"{int(digits[:-2])}.{int(digits[-2], 16)}.{int(digits[-1], 16)}"


def _at_least(version: str, floor: str) -> bool | None:
    try:
        return Version(version) >= Version(floor)
    except InvalidVersion:
        return None


class AcceleratorTable:
    """The loaded accelerator table with dict lookups. Build it with ``load_accelerators``."""

    def __init__(self, path: str, table_version: str, verified_on: str, rocm: tuple[RocmTargets, ...],
                 overrides: tuple[HsaOverride, ...], amd_pci: tuple[AmdPciRow, ...],
                 intel: tuple[IntelGpuFamily, ...], macos: tuple[MacosFloor, ...],
                 floors: tuple[RocmFloor, ...] = (), windows: tuple[RocmWindowsFamily, ...] = ()):
        self.path = path
        self.table_version = table_version
        self.verified_on = verified_on
        self.rocm = rocm
        self.overrides = overrides
        self.amd_pci = amd_pci
        self.intel = intel
        self.macos = macos
        self.floors = floors
        self.windows = windows
        self._floors = {f.gfx: f for f in floors}
        self._rocm = {(r.torch_minor, r.variant): r for r in rocm}
        self._overrides = {o.gfx: o for o in overrides}
        self._amd = {a.device_id: a for a in amd_pci}
        self._intel = {d: f for f in intel for d in f.device_ids}
        self._macos = {(m.torch_minor, m.platform): m for m in macos}
        self._names = _product_index(amd_pci)

    def rocm_targets(self, torch_version: str, variant: str | None = None) -> RocmTargets | None:
        """The row of "2.5.1+rocm6.2" (or of ("2.5.1", "rocm6.2")); None when the table has none."""
        public, local = split_local(torch_version)
        variant = variant or local
        minor = minor_key(public)
        if not minor or not variant:
            return None
        return self._rocm.get((minor, variant))

    def rocm_builds_for(self, gfx: str) -> list[RocmTargets]:
        """The ROCm builds that hold ``gfx``, newest torch first (then the newest ROCm)."""
        rows = [r for r in self.rocm if r.covers(gfx)]
        return sorted(rows, key=lambda r: (Version(r.torch_minor), _rocm_key(r.variant)), reverse=True)

    def rocm_windows_for(self, gfx: str) -> RocmWindowsFamily | None:
        """The family of AMD's Windows builds that holds ``gfx``; None when none does (as far as known)."""
        return next((f for f in self.windows if f.covers(gfx)), None)

    def rocm_floor(self, gfx: str) -> RocmFloor | None:
        """The oldest ROCm that builds ``gfx``; None when the table names none."""
        return self._floors.get(gfx)

    def hsa_override(self, gfx: str) -> HsaOverride | None:
        return self._overrides.get(gfx)

    def amd_gpu(self, device_id: str | int | None) -> AmdPciRow | None:
        return self._amd.get(_pci_id(device_id))

    def amd_gfx_for_name(self, name: str | None) -> str | None:
        """The processor of a product name as torch or a ROCm tool prints it ("AMD Instinct MI210",
        "AMD Radeon RX 7900 XTX"), from the pci.ids names of the table's rows; None when unknown or ambiguous
        ("AMD Radeon Graphics" names several chips)."""
        return self._names.get(_product_key(name or ""))

    def intel_gpu(self, device_id: str | int | None) -> IntelGpuFamily | None:
        return self._intel.get(_pci_id(device_id))

    def macos_floor(self, torch_version: str, platform: str) -> MacosFloor | None:
        minor = minor_key(split_local(torch_version)[0])
        return self._macos.get((minor, platform)) if minor else None


def _product_key(name: str) -> str:
    text = re.sub(r"\((tm|r)\)", "", name.lower())
    text = re.sub(r"\s*\(gfx[^)]*\)\s*$", "", text)
    text = re.sub(r"^amd\s+", "", " ".join(text.split()))
    return text


def _product_index(rows) -> dict[str, str]:
    """Product name -> processor, from names like "Navi 22 [Radeon RX 6700/6700 XT/6750 XT / 6800M]": each
    name in the brackets, a bare number taking the words before the first one's number ("Radeon RX 6700
    XT")."""
    seen: dict[str, set[str]] = {}
    for row in rows:
        m = re.search(r"\[(.*)\]", row.name)
        if not m:
            continue
        prefix = ""
        for part in (p.strip() for p in m.group(1).split("/")):
            if not part:
                continue
            if part[0].isdigit() and prefix:
                part = prefix + part
            else:
                words = re.match(r"^(.*?\s)(?=\S*\d)", part)
                prefix = words.group(1) if words else ""
            seen.setdefault(_product_key(part), set()).add(row.gfx)
    return {name: next(iter(gfx)) for name, gfx in seen.items() if len(gfx) == 1}


def _rocm_key(variant: str) -> Version:
    return Version(variant[len("rocm"):])


def _pci_id(value: str | int | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, int):
        return f"0x{value:04x}"
    text = value.strip().lower()
    if not text.startswith("0x"):
        text = "0x" + text
    return text


# --- loading and validation ---------------------------------------------------------------------


def default_accelerators_path() -> Path:
    return bundled("accelerators.json")


def load_accelerators(path: str | Path | None = None) -> AcceleratorTable:
    """Load and validate the accelerator table (None = the bundled one). ``load_table`` loads it once beside
    the compat table (``table.accelerators``)."""
    resolved = Path(path).expanduser() if path is not None else default_accelerators_path()
    try:
        path = str(resolved.resolve(strict=True))
    except OSError as exc:
        raise TableError(f"accelerator table {resolved}: cannot read: {exc.strerror or exc}") from None
    data = read_json(path, MAX_BYTES, "accelerator table")
    try:
        return _AcceleratorParser(path).table(data)
    except (ValueError, RecursionError) as exc:
        raise TableError(f"accelerator table {path}: {str(exc).splitlines()[0][:200]}") from None


class _AcceleratorParser(_Parser):
    """The pytorch.json parser's field checks, applied to the accelerator sections."""

    def fail(self, where: str, message: str) -> TableError:
        error = super().fail(where, message)
        return TableError(str(error).replace("compat table ", "accelerator table ", 1))

    def table(self, data: Any) -> AcceleratorTable:  # type: ignore[override]
        if not isinstance(data, dict):
            raise self.fail("(top level)", "expected an object")
        schema = self.get(data, "schema_version", "", (int,))
        if schema != SCHEMA_VERSION:
            raise self.fail("schema_version", f"{schema} is not supported (this torchdoctor reads "
                f"{SCHEMA_VERSION})")
        table_version = self.get(data, "table_version", "", (str,))
        verified_on = self.get(data, "verified_on", "", (str,))
        rocm = self.section(data, "rocm_targets", self.rocm_row, lambda r: (r.torch_minor, r.variant),
                            "ROCm build")
        overrides = self.section(data, "hsa_overrides", self.override_row, lambda o: o.gfx, "processor")
        floors = self.section(data, "rocm_floors", self.floor_row, lambda f: f.gfx, "processor",
                              optional=True)
        windows = self.section(data, "rocm_windows", self.windows_row, lambda f: f.family, "family",
                               optional=True)
        amd = self.section(data, "amd_pci", self.amd_row, lambda a: a.device_id, "AMD device id")
        intel = self.section(data, "intel_pci", self.intel_row, lambda f: f.family, "Intel family")
        seen: dict = {}
        for (where, _), family in zip(self.rows(data, "intel_pci"), intel, strict=True):
            for device in family.device_ids:
                self.unique(seen, device, f"{where}.device_ids", f"Intel device id {device!r}")
        macos = self.section(data, "macos", self.macos_row, lambda m: (m.torch_minor, m.platform),
                             "macOS row")
        return AcceleratorTable(path=self.path, table_version=table_version, verified_on=verified_on,
                                rocm=tuple(rocm), overrides=tuple(overrides), amd_pci=tuple(amd),
                                intel=tuple(intel), macos=tuple(macos), floors=tuple(floors),
                                windows=tuple(windows))

    def gfx_list(self, row: dict, key: str, where: str) -> tuple[str, ...]:
        values = self.strings(row, key, where, _GFX_RE, "a processor like 'gfx1100'")
        if not values:
            raise self.fail(f"{where}.{key}", "is empty")
        return values

    def rocm_row(self, row: dict, where: str) -> RocmTargets:
        minor = self.string(row, "torch_minor", where, _MINOR_RE, "a version (major.minor)")
        variant = self.string(row, "variant", where, _ROCM_RE, "a ROCm variant like 'rocm6.3'")
        gfx = self.gfx_list(row, "gfx", where)
        source, confidence = self.provenance(row, where)
        return RocmTargets(minor, variant, gfx, source, confidence, self.opt_string(row, "note", where))

    def override_row(self, row: dict, where: str) -> HsaOverride:
        gfx = self.string(row, "gfx", where, _GFX_RE, "a processor like 'gfx1031'")
        override = self.opt_string(row, "override", where, _OVERRIDE_RE, "major.minor.stepping like '10.3.0'")
        if override is not None and override_processor(override) is None:
            raise self.fail(f"{where}.override", f"{override!r} names no processor")
        reported = self.string(row, "reported", where)
        if reported not in REPORTED:
            raise self.fail(f"{where}.reported", f"{reported!r} is not one of {', '.join(REPORTED)}")
        if reported == "works" and override is None:
            raise self.fail(f"{where}.override", "is missing for a sibling reported to work")
        source, confidence = self.provenance(row, where)
        return HsaOverride(gfx, override, reported, source, confidence)

    def floor_row(self, row: dict, where: str) -> RocmFloor:
        gfx = self.string(row, "gfx", where, _GFX_RE, "a processor like 'gfx950'")
        rocm = self.string(row, "rocm", where, _MINOR_RE, "a ROCm version (major.minor)")
        source, confidence = self.provenance(row, where)
        return RocmFloor(gfx, rocm, source, confidence)

    def windows_row(self, row: dict, where: str) -> RocmWindowsFamily:
        family = self.string(row, "family", where)
        gfx = self.gfx_list(row, "gfx", where)
        source, confidence = self.provenance(row, where)
        return RocmWindowsFamily(family, gfx, source, confidence)

    def amd_row(self, row: dict, where: str) -> AmdPciRow:
        device = self.string(row, "device_id", where, _PCI_ID_RE, "a PCI id like '0x73df' (lower case)")
        gfx = self.string(row, "gfx", where, _GFX_RE, "a processor like 'gfx1031'")
        name = self.string(row, "name", where)
        segment = self.string(row, "segment", where)
        if segment not in ("dgpu", "apu"):
            raise self.fail(f"{where}.segment", f"{segment!r} is not dgpu or apu")
        source, confidence = self.provenance(row, where)
        return AmdPciRow(device, gfx, name, segment, source, confidence)

    def intel_row(self, row: dict, where: str) -> IntelGpuFamily:
        family = self.string(row, "family", where)
        product = self.string(row, "product", where)
        devices = self.strings(row, "device_ids", where, _PCI_ID_RE, "a PCI id like '0x56a0' (lower case)")
        discrete = self.get(row, "discrete", where, (bool,))
        xpu = self.string(row, "xpu", where)
        if xpu not in XPU_STATES:
            raise self.fail(f"{where}.xpu", f"{xpu!r} is not one of {', '.join(XPU_STATES)}")
        source, confidence = self.provenance(row, where)
        return IntelGpuFamily(family, product, devices, discrete, xpu, source, confidence,
                              self.opt_string(row, "note", where))

    def macos_row(self, row: dict, where: str) -> MacosFloor:
        minor = self.string(row, "torch_minor", where, _MINOR_RE, "a version (major.minor)")
        platform = self.string(row, "platform", where)
        if platform not in _MACOS_PLATFORMS:
            raise self.fail(f"{where}.platform", f"{platform!r} is not one of {', '.join(_MACOS_PLATFORMS)}")
        low = self.version(row, "min_macos", where)
        mps = self.version(row, "mps_min_macos", where, optional=True)
        source, confidence = self.provenance(row, where)
        return MacosFloor(minor, platform, low, mps, source, confidence, self.opt_string(row, "note", where))
