"""Which GPU code the installed torch has, from the best source there is, and what it means per GPU (pure).

The arch list comes from the first of these that is known:

1. ``runtime``: ``torch.cuda.get_arch_list()``, from the import probe / smoke test (torch itself says);
2. ``binary``: the cubins and PTX read from ``libtorch_cuda.so`` / ``torch_cuda.dll`` (``Dist.kernels``);
3. ``table``: the compatibility table's arch row, used only for PyTorch's own release wheels (a conda-forge,
   NGC, Jetson, nightly or source build of the same version has its own list);
4. ``cuda-bound``: no list, but the build's CUDA version bounds what any build made with it can target (the
   table's ``cuda_toolkits``): CUDA 12.4 cannot compile for sm_120, CUDA 13 not for sm_61.

The first three give the list itself; the bound only says which GPUs no such build can serve. A GPU the bound
leaves possible stays *unknown* (the smoke test or the binary can tell), never "supported".
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from doctor.compat.arch import arch_supports, format_cc, parse_arch, sm_name
from doctor.compat.builds import Build
from doctor.compat.distributions import NIGHTLY, PYTORCH_CONDA, WHEEL, Origin
from doctor.model.snapshot import Snapshot
from doctor.model.versions import major_minor, variant_to_cuda

RUNTIME = "runtime"
BINARY = "binary"
TABLE = "table"
BOUND = "cuda-bound"
NONE = "none"

# Per GPU
RUNS = "runs"
NO_KERNELS = "no-kernels"  # certain (or as good as: the build's own list, or physics)
NEEDS_PTX = "needs-ptx"  # no cubin of this CUDA can run on it; only embedded PTX could, and that is not known
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ArchSource:
    """Where the arch list of the installed build comes from, and the list."""

    kind: str  # RUNTIME, BINARY, TABLE, BOUND or NONE
    label: str  # for people: "the binary /…/torch/lib/libtorch_cuda.so (475 fatbin containers)"
    sm: tuple[str, ...] = ()
    ptx: tuple[str, ...] | None = ()  # None: not known
    partial: tuple[str, ...] = ()  # (binary) targets held by a few containers only
    toolkit: object | None = None  # the CudaToolkit row of the build's CUDA (the bound), when known
    skipped: tuple[str, ...] = ()  # why a better source was not used: "binary: not an ELF or PE file"
    unverified: tuple[str, ...] = ()

    @property
    def has_list(self) -> bool:
        return self.kind in (RUNTIME, BINARY, TABLE)


@dataclass(frozen=True, slots=True)
class GpuFit:
    verdict: str  # RUNS, NO_KERNELS, NEEDS_PTX, UNKNOWN
    via: str  # what runs it ("sm_86 cubin"), or ""
    why: str  # one sentence for the finding
    bound: str | None = None  # "CUDA 11.7 cannot target sm_90 (its nvcc compiles sm_35 to sm_87)"


def arch_row(table, torch_version: str, variant: str, platform: str):
    """The table's architecture list for a build, and a note when it was borrowed from Linux.

    Windows CUDA builds are compiled from the same TORCH_CUDA_ARCH_LIST as Linux x86_64 (the
    cu126 legacy builds aside), and the table records few Windows rows of its own.
    """
    row = table.arch_list(torch_version, variant, platform)
    if row is None and platform == "windows-x86_64":
        row = table.arch_list(torch_version, variant, "linux-x86_64")
        if row is not None:
            return row, f"arch list {row.torch_minor}/{variant} of linux-x86_64 used for Windows"
    return row, None


def arch_source(snap: Snapshot, table, build: Build, origin: Origin) -> ArchSource:
    toolkit = table.toolkit(build.cuda) if build.cuda and "." in build.cuda else None
    skipped = []
    runtime = snap.runtime
    if runtime.status == "ok" and runtime.arch_list:
        return ArchSource(RUNTIME, "torch.cuda.get_arch_list() (import "
            "probe)", tuple(runtime.arch_list), (), (),
                          toolkit)
    if runtime.status == "ok" and not runtime.arch_list:
        skipped.append("run time: torch reported no arch list")
    kernels = snap.install.torch.kernels if snap.install.torch is not None else None
    if kernels is not None and kernels.status == "ok" and kernels.sm + kernels.ptx:
        label = (f"the binary {kernels.path} ({kernels.containers} fatbin "
            f"container{'s' if kernels.containers != 1 else ''})")
        return ArchSource(
            BINARY,
            label,
            tuple(kernels.sm),
            tuple(kernels.ptx),
            tuple(kernels.partial),
            toolkit,
            tuple(skipped),
        )
    if kernels is None:
        skipped.append("binary: not read")
    elif kernels.status == "no-gpu-code":
        skipped.append(f"binary: {kernels.path} holds no GPU code")
    else:
        skipped.append(f"binary: {kernels.why or kernels.status}")
    if origin.kind == WHEEL and build.variant:
        row, borrowed = arch_row(table, build.version, build.variant, snap.host.platform)
        if row is not None:
            unverified = ["arch list "
                f"{row.torch_minor}/{row.variant}"] if row.confidence != "verified" else []
            if borrowed:
                unverified.append(borrowed)
            label = f"the table (torch {row.torch_minor} {row.variant} {row.platform}, {row.confidence})"
            return ArchSource(
                TABLE, label, tuple(row.sm), row.ptx, (), toolkit, tuple(skipped), tuple(unverified)
            )
        skipped.append(f"table: no arch row for torch {build.label} on {snap.host.platform}")
    else:
        skipped.append(f"table: its rows describe PyTorch's release wheels, not {origin.label}")
    if toolkit is not None:
        unverified = (f"cuda_toolkits {toolkit.cuda}",) if toolkit.confidence != "verified" else ()
        label = (f"the CUDA {toolkit.cuda} bound (its nvcc compiles {toolkit.lowest_sm} to "
            f"{toolkit.highest_sm}; "
                 "which of them this build holds is not known)")
        return ArchSource(BOUND, label, (), None, (), toolkit, tuple(skipped), unverified)
    if build.cuda and "." in build.cuda:
        skipped.append(f"bound: the table has no cuda_toolkits row for CUDA {build.cuda}")
    else:
        skipped.append("bound: the build's CUDA version is not known")
    return ArchSource(NONE, "nothing", (), None, (), None, tuple(skipped))


_INTEGRATED = {(5, 3): "Jetson "
    "Nano/TX1", (6, 2): "Jetson TX2", (7, 2): "Jetson Xavier", (8, 7): "Jetson Orin",
               (10, 1): "Jetson Thor", (11, 0): "Jetson Thor"}


def _integrated_note(cc: tuple[int, int], sm, cuda: str | None) -> str:
    """Why same-major cubins do not count on a Jetson's integrated GPU (torch's DEVICE_REQUIREMENT)."""
    name = _INTEGRATED.get(cc)
    same = [t for t in sm if (p := parse_arch(t)) and p[1][0] == cc[0] and p[1] <= cc]
    if not name or not same:
        return ""
    return (f"its {' '.join(same)} cubins are for discrete GPUs: the integrated GPU of {name} runs only "
        "cubins "
            f"built for exactly {sm_name(cc)}" + _UNIFIED_NOTE.get(cc, ""))


_UNIFIED_NOTE = {(7, 2): " (builds with CUDA 13.2 or later: also sm_70 ones)",
                 (8, 7): " (builds with CUDA 13.2 or later: also sm_80 and sm_86 ones)"}


def _bound_text(toolkit, cc: tuple[int, int]) -> str:
    return (f"CUDA {toolkit.cuda} cannot target {sm_name(cc)} (its nvcc compiles {toolkit.lowest_sm} to "
            f"{toolkit.highest_sm})")


@functools.lru_cache(maxsize=1024)  # pure; the plan asks it for every toolkit row and GPU
def bound_verdict(toolkit, cc: tuple[int, int], cuda: str | None) -> str:
    """What the CUDA toolkit alone says about a GPU: RUNS (a cubin it can make would run), NEEDS_PTX (only PTX
    it can make would: a GPU above its newest target), or NO_KERNELS (neither: a GPU below its oldest)."""
    if arch_supports(cc, toolkit.sm, (), cuda).supported:
        return RUNS
    if arch_supports(cc, (), tuple(t.replace("sm_", "compute_") for t in toolkit.sm), cuda).supported:
        return NEEDS_PTX
    return NO_KERNELS


def gpu_fit(
    source: ArchSource, cc: tuple[int, int], build: Build, origin: Origin, table, platform: str
) -> GpuFit:
    toolkit = source.toolkit
    bound = bound_verdict(toolkit, cc, build.cuda) if toolkit is not None else None
    bound_text = _bound_text(toolkit, cc) if bound in (NEEDS_PTX, NO_KERNELS) else None
    if source.has_list:
        verdict = arch_supports(cc, source.sm, source.ptx or (), build.cuda)
        if verdict.supported:
            return GpuFit(RUNS, verdict.via, f"runs through its {verdict.via}")
        handful = [
            t
            for t in source.partial
            if arch_supports(
                cc, (t,) if t.startswith("sm_") else (), (t,) if t.startswith("compute_") else (), build.cuda
            ).supported
        ]
        why = _integrated_note(cc, source.sm, build.cuda)
        if handful:
            why = (f"only a handful of its kernels ({', '.join(handful)}, in a few fatbin containers) would "
                "run: "
                   "most operations fail")
        return GpuFit(NO_KERNELS, "", why, bound_text)
    if toolkit is None:
        return GpuFit(UNKNOWN, "", "the build's arch list is not known and neither is its CUDA version's "
            "range")
    if bound == RUNS:
        return GpuFit(UNKNOWN, "", f"CUDA {toolkit.cuda} can target {sm_name(cc)}; whether this build holds "
            "such "
                      "kernels is not known")
    if bound == NO_KERNELS:
        return GpuFit(NO_KERNELS, "", f"{bound_text}, and PTX only JIT-compiles for newer GPUs, so no build "
            "made "
                      f"with CUDA {toolkit.cuda} can run on compute capability {format_cc(cc)}", bound_text)
    policy = (
        pytorch_ptx_policy(table, build.variant, platform, cc)
        if origin.kind in (WHEEL, NIGHTLY, PYTORCH_CONDA)
        else None
    )
    if policy:
        return GpuFit(NO_KERNELS, "", f"{bound_text}; only PTX could run on it, and {policy}", bound_text)
    return GpuFit(NEEDS_PTX, "", f"{bound_text}; only PTX JIT-compiled by the driver could run on it, and "
        "whether "
                  "this build embeds PTX is not known", bound_text)


def pytorch_ptx_policy(table, variant: str | None, platform: str, cc: tuple[int, int]) -> str | None:
    """When every arch row of PyTorch's ``variant`` builds that records its PTX holds none this GPU could JIT:
    a sentence saying so (evidence that a nightly of that variant has none either); else None."""
    if not variant:
        return None
    rows = [
        r for r in table.arch_lists if r.variant == variant and r.platform == platform and r.ptx is not None
    ]
    if not rows or any(arch_supports(cc, (), r.ptx, None).supported for r in rows):
        return None
    minors = ", ".join(sorted({r.torch_minor for r in rows}, key=lambda m: major_minor(m) or (0, 0)))
    return f"PyTorch's {variant} builds carry no PTX it could JIT-compile (table: torch {minors})"


def cudnn_floor(
    snap: Snapshot, table, build: Build, origin: Origin
) -> tuple[str, str, tuple[str, ...]] | None:
    """(lowest compute capability the build's cuDNN supports, where that comes from, unverified parts), or
    None.

    From the cuDNN torch reported at run time; else, for PyTorch's own wheels, the cuDNN the table records for
    the build's variant, or (when only other variants of the release are recorded and they share a cuDNN
    major) the lowest floor of that major."""
    cuda_major = int(build.cuda.split(".")[0]) if build.cuda and build.cuda.split(".")[0].isdigit() else None
    if cuda_major is None:
        return None
    runtime = snap.runtime
    if runtime.status == "ok" and runtime.cudnn_version:
        text = _cudnn_text(runtime.cudnn_version)
        row = table.cudnn_support(text, cuda_major)
        if row is not None:
            return row.min_compute_capability, f"cuDNN {text} (torch at run time)", _unverified(row)
    if origin.kind not in (WHEEL, NIGHTLY, PYTORCH_CONDA) or not build.variant:
        return None
    return table_cudnn_floor(table, build.version, build.variant)


def table_cudnn_floor(table, torch_version: str, variant: str) -> tuple[str, str, tuple[str, ...]] | None:
    """The cuDNN floor of one of PyTorch's builds from the table: the cuDNN recorded for the variant, or, when
    only other variants of the release are recorded and they share a cuDNN major, the lowest floor of that
    major (marked unverified). None when the table cannot say."""
    release = table.release(torch_version)
    cuda = variant_to_cuda(variant)
    if release is None or cuda is None:
        return None
    cuda_major = int(cuda.split(".")[0])
    version = release.cudnn_version(variant)
    if version:
        row = table.cudnn_support(version, cuda_major)
        if row is None:
            return None
        return row.min_compute_capability, f"cuDNN {version} (table: torch {release.minor} {variant})", \
            _unverified(row)
    majors = {v.split(".")[0] for v in release.cudnn.values()}
    if len(majors) != 1:
        return None
    major = majors.pop()
    row = table.cudnn_support(f"{major}.0", cuda_major)
    if row is None:
        return None
    return (row.min_compute_capability,
            f"cuDNN {major} (table: every recorded variant of torch {release.minor} uses cuDNN {major})",
            _unverified(row) + (f"cuDNN of torch {release.minor} {variant}",))


def _unverified(row) -> tuple[str, ...]:
    return (f"cudnn {row.cudnn}/CUDA {row.cuda_major}",) if row.confidence != "verified" else ()


def _cudnn_text(value: int) -> str:
    """torch.backends.cudnn.version(): 91002 -> "9.10.2" (cuDNN 9: major*10000 + minor*100 + patch);
    8902 -> "8.9.2" (cuDNN 8: major*1000 + minor*100 + patch)."""
    if value >= 10000:
        return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"
