"""Which published torch wheels can run on this machine (pure: snapshot facts + table).

A wheel is (release patch, variant). It fits when the release has a wheel for this Python and
platform, the driver can run the variant's CUDA, and every GPU has kernels in the variant's
architecture list. The rules ask "does the installed build fit?"; the fix plan asks "which
wheel is the smallest change that does?".
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from doctor.compat.arch import arch_supports
from doctor.compat.builds import torch_build
from doctor.compat.coverage import arch_row, table_cudnn_floor
from doctor.model.snapshot import Snapshot
from doctor.model.versions import parse_cc, variant_to_cuda, version_tuple

# Driver verdicts for a CUDA variant
NATIVE = "native"  # the driver's maximum CUDA is at least the variant's
MINOR_COMPAT = "minor-compat"  # same CUDA major, driver above that major's floor: runs, with caveats
TOO_OLD = "too-old"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Machine:
    """The facts wheel choice depends on, pulled out of a snapshot once."""

    platform: str  # "linux-x86_64"
    os: str
    python: str | None  # "3.12.1"
    gpu_ccs: tuple[tuple[int, int], ...]  # known capabilities of NVIDIA GPUs
    gpu_count: int  # NVIDIA GPUs seen, capability known or not
    nvidia_present: bool  # an NVIDIA GPU is there (driver working or not)
    driver_version: str | None
    driver_max_cuda: str | None
    installed_variant: str | None = None  # "cu126", "rocm6.3", "cpu": kept when it still fits


def machine_from_snapshot(snap: Snapshot) -> Machine:
    gpus = snap.nvidia.gpus
    ccs = tuple(cc for cc in (parse_cc(g.compute_capability.value) for g in gpus) if cc)
    present = bool(gpus) or bool(snap.nvidia.pci_devices) or snap.nvidia.status not in ("no-gpu", "unknown")
    return Machine(
        platform=snap.host.platform,
        os=snap.host.os,
        python=snap.interpreter.version or None,
        gpu_ccs=ccs,
        gpu_count=len(gpus),
        nvidia_present=present,
        driver_version=snap.nvidia.driver_version.value,
        driver_max_cuda=snap.nvidia.cuda_driver_version.value,
        installed_variant=build.variant if (build := torch_build(snap)) else None,
    )


@dataclass(frozen=True)
class DriverVerdict:
    level: str  # NATIVE, MINOR_COMPAT, TOO_OLD, UNKNOWN
    needed: str | None = None  # minimum driver for native support of this CUDA, when known
    floor: str | None = None  # minor-version-compatibility floor of the CUDA major
    unverified: tuple[str, ...] = ()


def driver_verdict(table, cuda: str | None, machine: Machine) -> DriverVerdict:
    """Can this machine's driver run a build made with ``cuda``? (None: not a CUDA build.)"""
    if cuda is None:
        return DriverVerdict(NATIVE)
    want = version_tuple(cuda)
    row = table.cuda_driver(cuda)
    major_row = table.major_floor(want[0]) if want else None
    windows = machine.os == "windows"
    needed = (row.min_windows if windows else row.min_linux) if row else None
    floor = (major_row.min_windows if windows else major_row.min_linux) if major_row else None
    unverified = tuple(
        f"cuda {r}" for r, x in ((cuda, row), (f"{want[0]}.x" if want else "", major_row)) if x and x.confidence != "verified"
    )
    have_max = version_tuple(machine.driver_max_cuda)
    if have_max and want:
        if want[:2] <= have_max[:2]:
            return DriverVerdict(NATIVE, needed, floor, unverified)
        have = version_tuple(machine.driver_version)
        below_floor = bool(have and floor and version_tuple(floor) and have < version_tuple(floor))
        if want[0] == have_max[0] and not below_floor:
            return DriverVerdict(MINOR_COMPAT, needed, floor, unverified)
        return DriverVerdict(TOO_OLD, needed, floor, unverified)
    have = version_tuple(machine.driver_version)
    if have and needed and version_tuple(needed):
        if have >= version_tuple(needed):
            return DriverVerdict(NATIVE, needed, floor, unverified)
        if floor and version_tuple(floor) and have >= version_tuple(floor):
            return DriverVerdict(MINOR_COMPAT, needed, floor, unverified)
        return DriverVerdict(TOO_OLD, needed, floor, unverified)
    return DriverVerdict(UNKNOWN, needed, floor, unverified)


@dataclass(frozen=True)
class Wheel:
    torch: str  # "2.7.1"
    torchvision: str | None
    torchaudio: str | None
    variant: str  # "cu128", "cpu", "rocm6.3", "xpu"
    minor: str  # "2.7"
    unverified: tuple[str, ...] = ()

    @property
    def cuda(self) -> str | None:
        return variant_to_cuda(self.variant)

    @property
    def label(self) -> str:
        return f"{self.torch}+{self.variant}"


@dataclass
class Fit:
    """How well one wheel fits the machine."""

    wheel: Wheel
    driver: DriverVerdict
    gpus_ok: bool
    arch_known: bool
    bad_ccs: list[tuple[int, int]] = field(default_factory=list)

    @property
    def runs(self) -> bool:
        return self.gpus_ok and self.driver.level in (NATIVE, MINOR_COMPAT)


def gpu_verdicts(table, torch_version: str, variant: str, platform: str, ccs) -> tuple[bool, bool, list, object]:
    """(all supported, arch list known, unsupported ccs, arch row) for ``ccs`` on this build. A GPU below the
    compute capability the build's cuDNN supports counts as unsupported too (cuDNN 9, torch 2.4 and later, needs
    5.0: Kepler cannot run those builds even where sm_37 is listed)."""
    if not ccs or not variant.startswith("cu"):
        return True, True, [], None
    row, _ = arch_row(table, torch_version, variant, platform)
    if row is None:
        return False, False, [], None
    cuda = variant_to_cuda(variant)
    floor = table_cudnn_floor(table, torch_version, variant)
    low = parse_cc(floor[0]) if floor else None
    bad = [cc for cc in ccs if not arch_supports(cc, row.sm, row.ptx or (), cuda).supported or (low and cc < low)]
    return not bad, True, bad, row


def wanted_variants(release, machine: Machine) -> list[str]:
    """The variants worth considering on this machine: CUDA ones with an NVIDIA GPU. Without one, the
    kind of accelerator build already installed (a ROCm or XPU build is for a GPU NVIDIA's probes cannot
    see; a CUDA build may be in a container started without its GPU), else CPU. Variants the table marks
    unconfirmed (wheels inferred, never observed on the index) are never recommended."""
    variants = list(release.recommendable_variants(machine.platform))
    if machine.nvidia_present:
        return [v for v in variants if v.startswith("cu")]
    installed = machine.installed_variant or ""
    for prefix in ("rocm", "xpu", "cu"):
        if installed.startswith(prefix):
            same_kind = [v for v in variants if v.startswith(prefix)]
            return sorted(same_kind, key=lambda v: version_tuple(v) or (0,), reverse=True)  # newest first
    return [v for v in variants if v == "cpu"]


def fit(table, release, patch, variant: str, machine: Machine, ccs=None) -> Fit:
    ccs = machine.gpu_ccs if ccs is None else ccs
    relevant = ("patches", "python", "python.min", "python.max", f"variants.{machine.platform}")
    unverified = tuple(f"torch {release.minor}: {f}" for f in release.unverified_fields if f in relevant)
    wheel = Wheel(patch.torch, patch.torchvision, patch.torchaudio, variant, release.minor, unverified)
    ok, known, bad, row = gpu_verdicts(table, patch.torch, variant, machine.platform, ccs)
    if row is not None and row.confidence != "verified":
        wheel = Wheel(*[getattr(wheel, f) for f in ("torch", "torchvision", "torchaudio", "variant", "minor")],
                      unverified + (f"arch list {row.torch_minor}/{row.variant}",))
    return Fit(wheel, driver_verdict(table, variant_to_cuda(variant), machine), ok, known, bad)


def rank_fits(fits: list[Fit], installed_variant: str | None = None) -> list[Fit]:
    """Order the variants of one release: the installed variant when it runs (the smallest change), then
    native CUDA (newest first), then minor-compat (oldest first). Equal keys keep the given order."""
    def key(f: Fit):
        keep = 0 if f.wheel.variant == installed_variant and f.driver.level != TOO_OLD else 1
        cuda = version_tuple(f.wheel.cuda) or (0,)
        if f.driver.level == NATIVE:
            return (keep, 0, tuple(-x for x in cuda))
        if f.driver.level == MINOR_COMPAT:
            return (keep, 1, cuda)
        return (keep, 2, cuda)

    return sorted(fits, key=key)


def best_in_release(table, release, patch, machine: Machine, ccs=None, need_driver: bool = True) -> Fit | None:
    fits = [fit(table, release, patch, v, machine, ccs) for v in wanted_variants(release, machine)]
    # Without an NVIDIA GPU there is no driver to judge a CUDA build by: the installed kind is kept.
    no_driver_to_judge = not machine.nvidia_present
    good = [f for f in fits if f.gpus_ok and (f.runs or not need_driver or no_driver_to_judge)]
    ranked = rank_fits(good, machine.installed_variant)
    return ranked[0] if ranked else None


def python_ok(release, machine: Machine) -> bool:
    return machine.python is None or release.supports_python(machine.python)


@dataclass
class Choice:
    target: Fit | None  # the smallest change that fits
    alternative: Fit | None  # the newest release that fits, when different
    needs_driver: Fit | None  # when nothing fits the current driver: the wheel to install after a driver update
    reason: str


@functools.lru_cache(maxsize=512)  # pure: the rules and the plan ask it the same questions, and so do fleets
def choose(table, machine: Machine, installed_version: str | None, ccs=None) -> Choice:
    releases = [r for r in table.releases if python_ok(r, machine) and r.variants_for(machine.platform)]
    if not releases:
        return Choice(None, None, None, f"no torch release in the table has wheels for Python "
                      f"{machine.python} on {machine.platform}")
    fitting = []  # (release, Fit) with the current driver
    for release in releases:
        f = best_in_release(table, release, release.latest, machine, ccs)
        if f:
            fitting.append((release, f))
    newest = fitting[-1][1] if fitting else None
    base = installed_version.split("+")[0] if installed_version else None
    if fitting and base:
        inst = version_tuple(base)
        same = table.release(base)
        if same is not None and python_ok(same, machine):
            patch = same.patch(base) or same.latest
            f = best_in_release(table, same, patch, machine, ccs)
            if f:
                return Choice(f, newest if newest and newest.wheel.minor != f.wheel.minor else None, None,
                              f"keeps torch {patch.torch}")
        above = [(r, f) for r, f in fitting if inst is None or version_tuple(r.latest.torch) > inst]
        if above:
            target = above[0][1]
            return Choice(target, newest if newest is not target else None, None,
                          f"torch {base} has no wheel that fits; {target.wheel.torch} is the nearest release that does")
        return Choice(newest, None, None, "the newest release that fits")
    if fitting:
        return Choice(newest, None, None, "the newest release that fits this machine")
    # Nothing runs on this driver. Best: the installed build itself, once the driver is updated.
    if base:
        same = table.release(base)
        patch = same.patch(base) if same is not None and python_ok(same, machine) else None
        f = best_in_release(table, same, patch, machine, ccs, need_driver=False) if patch else None
        if f:
            return Choice(None, None, f, f"keeps torch {patch.torch}; only the driver is too old")
    # Else the newest wheel that would run after a driver update.
    for release in reversed(releases):
        f = best_in_release(table, release, release.latest, machine, ccs, need_driver=False)
        if f:
            return Choice(None, None, f, "no wheel runs on the installed driver")
    if machine.python is not None:
        relaxed = choose(table, replace(machine, python=None), None, ccs)
        fit_any = relaxed.target or relaxed.needs_driver
        if fit_any is not None:
            release = table.release(fit_any.wheel.torch)
            return Choice(None, None, None, f"torch {fit_any.wheel.label}, the build this machine needs, has no wheel "
                          f"for Python {machine.python} (it supports {release.python_min} to {release.python_max})")
    return Choice(None, None, None, "no published wheel has kernels for every GPU of this machine")
