"""Judgements about accelerators other than NVIDIA's, as pure functions of snapshot facts and the accelerator
table (``compat_tables/accelerators.json``, ``doctor/table/accelerators.py``): which processor each AMD GPU
is, which processors a ROCm build holds, whether a GPU runs it (natively, through HSA_OVERRIDE_GFX_VERSION,
or not at all), which ROCm variants of a release cover the GPUs, which Intel GPUs the xpu wheels run on
(and which of them are reasons to suggest that wheel), and the macOS a release's wheels need. The rules and
the plan both ask here, so they agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.model.snapshot import Snapshot
from doctor.model.versions import version_tuple
from doctor.table.accelerators import AcceleratorTable, HsaOverride, processor_override

# How a GPU fares with a ROCm build (RocmVerdict.kind)
NATIVE = "native"  # the build holds the GPU's own processor
BY_OVERRIDE = "override"  # HSA_OVERRIDE_GFX_VERSION is set and names a processor the build holds
# not held, but a sibling people ran with is (the override is not set)
OVERRIDE_POSSIBLE = "override-possible"
WRONG_OVERRIDE = "wrong-override"  # HSA_OVERRIDE_GFX_VERSION names a processor the build does not hold
MISSING = "missing"  # neither it nor a sibling reported to work
UNKNOWN = "unknown"  # the GPU's processor or the build's targets are not known


def accelerators(table) -> AcceleratorTable:
    """The accelerator facts that travel with a compat table (``load_table`` reads the accelerators.json
    beside it); a table built without them (a test's) reads the bundled file."""
    found = getattr(table, "accelerators", None)
    if isinstance(found, AcceleratorTable):
        return found
    from doctor.table.accelerators import load_accelerators

    return load_accelerators(None)


@dataclass(frozen=True)
class AmdProcessor:
    """One AMD GPU and its processor, with where the processor came from."""

    index: int
    name: str | None  # "AMD Radeon RX 6700 XT" (a ROCm tool), or the pci.ids name from the table
    gfx: str | None  # "gfx1031"
    source: str  # "/sys/class/kfd/...", "rocminfo", "PCI id 0x73df (accelerator table)"
    confidence: str  # "verified" from the kernel or a tool, the table row's from a PCI id
    pci_id: str | None = None
    # the processor the runtime claims instead (HSA_OVERRIDE_GFX_VERSION; in a collect_env text, the runtime's
    # gfx when it is not the product's own: "AMD Instinct MI210 (gfx1030)")
    claimed: str | None = None


def amd_processors(snap: Snapshot, acc: AcceleratorTable) -> list[AmdProcessor]:
    """The machine's AMD GPUs with their processors: the kernel's or a tool's, else the one the table gives
    for the PCI device id (kfd unreadable, a container without /sys/class/kfd)."""
    amd = snap.amd
    if amd is None:
        return []
    by_address = {d.address: d for d in amd.pci_devices}
    override = amd.override.value if amd.override is not None and amd.override.known else None
    out = []
    for gpu in amd.gpus:
        device = by_address.get(gpu.pci_address or "")
        pci_id = device.device_id if device else None
        name = gpu.name.value if gpu.name.known else None
        if gpu.gfx.known and snap.origin == "collect_env":
            # torch printed the runtime's processor: a product whose own is another one runs under an override
            own = acc.amd_gfx_for_name(name)
            if own and own != gpu.gfx.value:
                out.append(AmdProcessor(gpu.index, name, own, "its product name, by the accelerator table",
                                        "inferred", pci_id, claimed=gpu.gfx.value))
                continue
        if gpu.gfx.known:
            out.append(AmdProcessor(gpu.index, name, gpu.gfx.value, gpu.gfx.source or "probe", "verified",
                                    pci_id, claimed=override))
            continue
        row = acc.amd_gpu(pci_id) if pci_id else None
        if row is not None:
            out.append(AmdProcessor(gpu.index, name or row.name, row.gfx,
                                    f"PCI id {pci_id} ({row.name}; accelerator table)", row.confidence,
                                    pci_id, claimed=override))
        else:
            out.append(AmdProcessor(gpu.index, name, None, gpu.gfx.why or "not known", "unverified", pci_id,
                                    claimed=override))
    return out


@dataclass(frozen=True)
class BuildTargets:
    """The processors a ROCm build holds, and where that came from."""

    gfx: tuple[str, ...]
    from_binary: bool  # read from the installed libtorch_hip.so; else the table's row for the release
    source: str
    confidence: str


def rocm_build_targets(snap: Snapshot, acc: AcceleratorTable, version: str | None,
                       variant: str | None) -> BuildTargets | None:
    """The installed ROCm build's processors: from its libtorch_hip.so when read, else the table."""
    torch = snap.install.torch
    kernels = torch.hip_kernels if torch is not None else None
    if kernels is not None and kernels.status == "ok" and kernels.processors:
        return BuildTargets(tuple(kernels.processors), True, f"{kernels.path} (offload bundles)", "verified")
    row = acc.rocm_targets(version or "", variant) if version and variant else None
    if row is None:
        return None
    return BuildTargets(row.gfx, False, f"accelerator table: torch {row.torch_minor} {row.variant} "
        f"({row.source})",
                        row.confidence)


@dataclass(frozen=True)
class RocmVerdict:
    kind: str  # NATIVE, BY_OVERRIDE, OVERRIDE_POSSIBLE, WRONG_OVERRIDE, MISSING, UNKNOWN
    gfx: str | None  # the GPU's processor
    claimed: str | None = None  # the processor HSA_OVERRIDE_GFX_VERSION makes it claim
    override: HsaOverride | None = None  # the table's row for this processor


def judge_rocm(gfx: str | None, targets: BuildTargets | None, claimed: str | None,
               acc: AcceleratorTable) -> RocmVerdict:
    """How one GPU fares with a ROCm build. ``claimed``: the processor HSA_OVERRIDE_GFX_VERSION names (the
    runtime loads that processor's code instead of the GPU's own)."""
    row = acc.hsa_override(gfx) if gfx else None
    if targets is None:
        return RocmVerdict(UNKNOWN, gfx, claimed, row)
    if claimed:
        # another generation's code (gfx1031 claiming gfx1100) does not run either: a GPU reset or INVALID_ISA
        same = gfx is None or gfx_major(gfx) == gfx_major(claimed)
        kind = BY_OVERRIDE if claimed in targets.gfx and same else WRONG_OVERRIDE
        return RocmVerdict(kind, gfx, claimed, row)
    if gfx is None:
        return RocmVerdict(UNKNOWN, gfx, None, row)
    if gfx in targets.gfx:
        return RocmVerdict(NATIVE, gfx, None, row)
    if row is not None and row.reported == "works" and row.sibling in targets.gfx:
        return RocmVerdict(OVERRIDE_POSSIBLE, gfx, None, row)
    return RocmVerdict(MISSING, gfx, None, row)


def gfx_major(gfx: str) -> str:
    """The generation of a processor: "gfx1031" -> "10", "gfx90a" -> "9"."""
    return gfx[3:-2]


def override_value(gfx: str) -> str | None:
    """The HSA_OVERRIDE_GFX_VERSION value that claims ``gfx``: "gfx1030" -> "10.3.0"."""
    return processor_override(gfx)


def rocm_variants_covering(release, platform: str, gfxs: tuple[str, ...], acc: AcceleratorTable) -> list[str]:
    """The ROCm variants of ``release`` (recommendable on ``platform``) whose wheels hold every processor in
    ``gfxs``, newest ROCm first. Empty when none does, or when the table does not know them."""
    out = []
    for variant in release.recommendable_variants(platform):
        if not variant.startswith("rocm"):
            continue
        row = acc.rocm_targets(release.minor + ".0", variant)
        if row is not None and all(row.covers(g) for g in gfxs):
            out.append(variant)
    return sorted(out, key=lambda v: version_tuple(v[len("rocm"):]) or (0,), reverse=True)


def runnable_as(acc: AcceleratorTable, gfx: str) -> str:
    """The processor a GPU runs a wheel as: its own when some wheel holds it, else the sibling people reported
    working through HSA_OVERRIDE_GFX_VERSION (gfx1031 -> gfx1030)."""
    if acc.rocm_builds_for(gfx):
        return gfx
    row = acc.hsa_override(gfx)
    if row is not None and row.reported == "works" and row.sibling and acc.rocm_builds_for(row.sibling):
        return row.sibling
    return gfx


def vendor_variants(acc: AcceleratorTable, release, platform: str, amd_gfx: tuple[str, ...],
                    variants: list[str], installed: str | None = None) -> list[str]:
    """The variants worth considering for another vendor's GPU: the ROCm ones that hold every AMD GPU's
    processor (newest ROCm first), else the xpu wheel for a discrete Intel GPU. Where no ROCm wheel of any
    release holds the GPU, the CPU wheel (a laptop's Radeon 680M; its CPU torch is fine), unless a ROCm build
    is installed: no wheel replaces that one, and the findings say what would."""
    if not amd_gfx:
        return [v for v in variants if v == "xpu"]
    if all(acc.rocm_builds_for(g) for g in amd_gfx) or (installed or "").startswith("rocm"):
        return rocm_variants_covering(release, platform, amd_gfx, acc)
    return [v for v in variants if v == "cpu"]


def os_problem(acc: AcceleratorTable, machine, patch, nearest=None) -> str | None:
    """Why ``patch``'s wheels do not install on this machine's macOS (with the newest release that does), or
    None."""
    why = macos_problem(acc, patch.torch, machine.platform, getattr(machine, "macos", None))
    if why and nearest is not None:
        why += f"; torch {nearest.wheel.torch} is the newest release that installs here"
    return why


def amd_runnable(snap: Snapshot, acc: AcceleratorTable) -> tuple[str, ...]:
    """The processors this machine's AMD GPUs run ROCm wheels as, for the wheel choice."""
    return tuple(dict.fromkeys(runnable_as(acc, p.gfx) for p in amd_processors(snap, acc) if p.gfx))


def amd_processor_unknown(snap: Snapshot, acc: AcceleratorTable) -> bool:
    """An AMD GPU is here and no processor of any is known (a PCI device id the table has no row for, and no
    KFD topology): the wheel choice cannot pick a build by processor."""
    procs = amd_processors(snap, acc)
    return bool(procs) and not any(p.gfx for p in procs)


# --- Intel ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IntelGpu:
    device_id: str
    family: str
    product: str
    validated: bool  # on PyTorch's XPU hardware list
    source: str
    confidence: str
    discrete: bool = True


def intel_xpu_gpus(snap: Snapshot, acc: AcceleratorTable, *, integrated: bool) -> list[IntelGpu]:
    """The Intel GPUs the PCI bus shows that PyTorch's xpu wheels may run on: the discrete ones (DG1 is
    discrete but not among them) and, with ``integrated``, the integrated ones PyTorch's XPU page lists (Core
    Ultra with Arc Graphics). Those answer "can an xpu build run here", never "should a CPU torch be
    replaced": a laptop on the CPU wheel is not broken."""
    out = []
    for device in getattr(snap.host, "intel_gpus", None) or []:
        row = acc.intel_gpu(device)
        if row is None:
            continue
        if row.discrete:
            if row.xpu != "validated" and row.family == "DG1":
                continue
        elif not (integrated and row.xpu == "validated"):
            continue
        out.append(IntelGpu(device, row.family, row.product, row.xpu == "validated", row.source,
                            row.confidence, row.discrete))
    return out


# --- Apple -------------------------------------------------------------------------------------------------


def macos_problem(acc: AcceleratorTable, torch_version: str, platform: str, macos: str | None) -> str | None:
    """Why torch ``torch_version``'s wheels do not install on this macOS, or None (they do, or it is not
    known)."""
    if not macos or not platform.startswith("darwin"):
        return None
    floor = acc.macos_floor(torch_version, platform)
    if floor is None or floor.installs_on(macos) is not False:
        return None
    tag = f"macosx_{floor.min_macos.replace('.', '_')}_{platform.split('-', 1)[1]}"
    return (f"torch {torch_version}'s wheels need macOS {floor.min_macos} or newer ({tag}); this Mac runs "
            f"macOS {macos}")


def is_rosetta(snap: Snapshot) -> bool:
    """An x86_64 Python on an Apple silicon Mac (Rosetta 2): its torch is the last Intel-Mac build (2.2.x at
    most) and has no MPS."""
    host = snap.host
    if host.os != "darwin":
        return False
    machine = getattr(snap.interpreter, "machine", None) or host.machine
    cpu = getattr(host, "cpu", None) or ""
    return machine == "x86_64" and (cpu.startswith("Apple M") or bool(getattr(host, "translated", False)))
