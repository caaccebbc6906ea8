"""Which published torch wheels can run on this machine (pure: snapshot facts + table).

A wheel is (release patch, variant). It fits when the release has a wheel for this Python and
platform, the driver can run the variant's CUDA, and every GPU has kernels in the variant's
architecture list. The rules ask "does the installed build fit?"; the fix plan asks "which
wheel is the smallest change that does?".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from doctor.compat import accelerators as other
from doctor.compat.arch import arch_supports
from doctor.compat.builds import Build
from doctor.compat.coverage import arch_row, table_cudnn_floor
from doctor.model.i18n import Msg
from doctor.model.snapshot import Snapshot
from doctor.model.versions import major_minor, parse_cc, split_local, variant_to_cuda, version_tuple
from doctor.table.accelerators import AcceleratorTable

# Driver verdicts for a CUDA variant
NATIVE = "native"  # the driver's maximum CUDA is at least the variant's
MINOR_COMPAT = "minor-compat"  # same CUDA major, driver above that major's floor: runs, with caveats
TOO_OLD = "too-old"
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
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
    free_threaded: bool = False  # a free-threaded build (Py_GIL_DISABLED): only "3.13t"-style wheels install
    amd_gfx: tuple[str, ...] = ()  # what AMD GPUs run ROCm wheels as (doctor/compat/accelerators.py)
    intel_xpu: bool = False
    macos: str | None = None
    amd_unknown: bool = False  # an AMD GPU whose processor is not known


def machine_from_snapshot(snap: Snapshot, build: Build | None, acc: AcceleratorTable) -> Machine:
    """``build``: the installed torch's (None: not installed), whose variant is kept when it still fits;
    ``acc``: the accelerator facts of the table in use (which AMD processors and Intel GPUs run what)."""
    gpus = snap.nvidia.gpus
    ccs = tuple(cc for cc in (parse_cc(g.compute_capability.value) for g in gpus) if cc)
    present = bool(gpus) or bool(snap.nvidia.pci_devices) or snap.nvidia.status not in ("no-gpu", "unknown")
    platform = snap.host.platform
    if snap.interpreter.bits == 32:
        # a 32-bit Python installs 32-bit wheels whatever the OS is: torch publishes none
        platform = f"{snap.host.os}-{'x86' if snap.host.os == 'windows' else 'i686'}"
    return Machine(
        platform=platform,
        os=snap.host.os,
        python=snap.interpreter.version or None,
        gpu_ccs=ccs,
        gpu_count=len(gpus),
        nvidia_present=present,
        driver_version=snap.nvidia.driver_version.value,
        driver_max_cuda=snap.nvidia.cuda_driver_version.value,
        installed_variant=build.variant if build is not None else None,
        free_threaded=bool(snap.interpreter.free_threaded),
        amd_gfx=other.amd_runnable(snap, acc) if not present else (),
        # discrete only: a laptop's integrated Arc Graphics is no reason to leave the CPU wheel (an installed
        # xpu build keeps its kind: wanted_variants)
        intel_xpu=bool(other.intel_xpu_gpus(snap, acc, integrated=False)), macos=snap.host.macos,
        amd_unknown=not present and other.amd_processor_unknown(snap, acc),
    )


@dataclass(frozen=True, slots=True)
class DriverVerdict:
    level: str  # NATIVE, MINOR_COMPAT, TOO_OLD, UNKNOWN
    needed: str | None = None  # minimum driver for native support of this CUDA, when known
    floor: str | None = None  # minor-version-compatibility floor of the CUDA major
    unverified: tuple[str, ...] = ()


def driver_verdict(table, cuda: str | None, machine: Machine) -> DriverVerdict:
    """Can this machine's driver run a build made with ``cuda``? (None: not a CUDA build.)"""
    return _driver_verdict(table, cuda, machine.os, machine.driver_version, machine.driver_max_cuda)


def _driver_verdict(table, cuda: str | None, os_name: str, driver_version, driver_max_cuda) -> DriverVerdict:
    # keyed by the three facts it reads, not the whole Machine: machines that differ in GPUs share the answers
    if cuda is None:
        return DriverVerdict(NATIVE)
    want = version_tuple(cuda)
    row = table.cuda_driver(cuda)
    major_row = table.major_floor(want[0]) if want else None
    windows = os_name == "windows"
    needed = (row.min_windows if windows else row.min_linux) if row else None
    floor = (major_row.min_windows if windows else major_row.min_linux) if major_row else None
    unverified = tuple(
        f"cuda {r}"
        for r, x in ((cuda, row), (f"{want[0]}.x" if want else "", major_row))
        if x and x.confidence != "verified"
    )
    have_max = version_tuple(driver_max_cuda)
    if have_max and want:
        if want[:2] <= have_max[:2]:
            return DriverVerdict(NATIVE, needed, floor, unverified)
        have = version_tuple(driver_version)
        below_floor = bool(have and floor and version_tuple(floor) and have < version_tuple(floor))
        if want[0] == have_max[0] and not below_floor:
            return DriverVerdict(MINOR_COMPAT, needed, floor, unverified)
        return DriverVerdict(TOO_OLD, needed, floor, unverified)
    have = version_tuple(driver_version)
    if have and needed and version_tuple(needed):
        if have >= version_tuple(needed):
            return DriverVerdict(NATIVE, needed, floor, unverified)
        if floor and version_tuple(floor) and have >= version_tuple(floor):
            return DriverVerdict(MINOR_COMPAT, needed, floor, unverified)
        return DriverVerdict(TOO_OLD, needed, floor, unverified)
    return DriverVerdict(UNKNOWN, needed, floor, unverified)


@dataclass(frozen=True, slots=True)
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


@dataclass(slots=True)
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


def gpu_verdicts(
    table, torch_version: str, variant: str, platform: str, ccs
) -> tuple[bool, bool, list, object]:
    """(all supported, arch list known, unsupported ccs, arch row) for ``ccs`` on this build. A GPU below the
    compute capability the build's cuDNN supports counts as unsupported too (cuDNN 9, torch 2.4 and later,
    needs 5.0: Kepler cannot run those builds even where sm_37 is listed)."""
    ok, known, bad, row = _gpu_verdicts(table, torch_version, variant, platform, tuple(ccs) if ccs else ())
    return ok, known, list(bad), row


def _gpu_verdicts(table, torch_version: str, variant: str, platform: str, ccs: tuple) -> tuple:
    if not ccs or not variant.startswith("cu"):
        return True, True, [], None
    row, _ = arch_row(table, torch_version, variant, platform)
    if row is None:
        return False, False, [], None
    cuda = variant_to_cuda(variant)
    floor = table_cudnn_floor(table, torch_version, variant)
    low = parse_cc(floor[0]) if floor else None
    bad = tuple(
        cc for cc in ccs if not arch_supports(cc, row.sm, row.ptx or (), cuda).supported or (low and cc < low)
    )
    return not bad, True, bad, row


def wanted_variants(release, machine: Machine, acc: AcceleratorTable) -> list[str]:
    """The variants worth considering on this machine: CUDA ones with an NVIDIA GPU. Without one, the
    kind of accelerator build already installed (a ROCm or XPU build is for a GPU NVIDIA's probes cannot
    see; a CUDA build may be in a container started without its GPU), else CPU. Variants the table marks
    unconfirmed (wheels inferred, never observed on the index) are never recommended."""
    variants = list(release.recommendable_variants(machine.platform))
    if machine.nvidia_present:
        return [v for v in variants if v.startswith("cu")]
    if machine.amd_gfx or machine.intel_xpu:  # ROCm wheels holding every AMD GPU's processor; the xpu wheel
        return other.vendor_variants(acc, release, machine.platform, machine.amd_gfx, variants,
                                     machine.installed_variant)
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
        wheel = Wheel(
            *[getattr(wheel, f) for f in ("torch", "torchvision", "torchaudio", "variant", "minor")],
            unverified + (f"arch list {row.torch_minor}/{row.variant}",),
        )
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


def best_in_release(
    table, release, patch, machine: Machine, ccs=None, need_driver: bool = True
) -> Fit | None:
    """The best fitting wheel of one release for this machine, or None."""
    ccs = machine.gpu_ccs if ccs is None else tuple(ccs)
    good = _good_fits(table, release, patch, machine, ccs, need_driver)
    # The installed variant only decides the variants without an NVIDIA GPU, and the order when it is one of
    # the fitting variants (else it ranks like none).
    installed = machine.installed_variant if any(f.wheel.variant == machine.installed_variant for f in good) \
        else None
    ranked = rank_fits(list(good), installed)
    return ranked[0] if ranked else None


def _good_fits(table, release, patch, machine: Machine, ccs, need_driver: bool) -> tuple[Fit, ...]:
    fits = [fit(table, release, patch, v, machine, ccs)
            for v in wanted_variants(release, machine, other.accelerators(table))]
    # Without an NVIDIA GPU there is no driver to judge a CUDA build by: the installed kind is kept.
    no_driver_to_judge = not machine.nvidia_present
    return tuple(f for f in fits if f.gpus_ok and (f.runs or not need_driver or no_driver_to_judge))


def torch_version(text: str) -> Version | None:
    """A torch version to compare with the table's releases: a nightly ("2.8.0.dev20250601") or a release
    candidate ("2.7.1rc1") ranks below its final release; None when ``text`` is not a version."""
    try:
        return Version(split_local(text)[0])
    except ValueError:  # InvalidVersion, or a part past int()'s 4,300-digit limit
        return None


def change_cost(anchor: str | None, f: Fit) -> str:
    """What taking ``f`` instead of torch ``anchor`` costs: "a downgrade from torch 2.12.1 to 2.11.0"."""
    if not anchor:
        return ""
    public = split_local(anchor)[0]
    have, want = torch_version(public), torch_version(f.wheel.torch)
    if have is None or want is None or have == want:
        return Msg("another build of torch {torch} ({variant})", torch=f.wheel.torch, variant=f.wheel.variant)
    if want < have:
        return Msg("a downgrade from torch {have} to {want}", have=public, want=f.wheel.torch)
    return Msg("an upgrade from torch {have} to {want}", have=public, want=f.wheel.torch)


def python_label(machine: Machine) -> str:
    """ "3.13.1" or, for a free-threaded build, "3.13.1 (free-threaded, 3.13t)"."""
    if not machine.python:
        return "?"
    mm = major_minor(machine.python)
    return (
        f"{machine.python} (free-threaded, {mm[0]}.{mm[1]}t)"
        if machine.free_threaded and mm
        else machine.python
    )


def python_problem(release, machine: Machine, patch=None) -> str | None:
    """Why ``patch`` (default: the latest) of ``release`` publishes no torch wheel for this Python, or None.

    The minor range of the release; for a free-threaded interpreter, the free-threaded builds of that patch
    (2.12.1 dropped cp313t); the exact ``Requires-Python`` recorded for the latest patch (patch-level
    exclusions such as ``!=3.14.1``)."""
    return _python_problem(release, machine.python, machine.free_threaded, patch)


def _python_problem(release, py: str | None, free_threaded: bool, patch) -> str | None:
    if py is None:
        return None
    patch = patch or release.latest
    if not release.supports_python(py):
        return f"torch {release.minor} has wheels for Python {release.python_min} to {release.python_max}"
    mm = major_minor(py)
    if free_threaded and mm:
        tag = f"{mm[0]}.{mm[1]}t"
        builds = release.free_threaded_for(patch.torch)
        if tag not in builds:
            return (f"torch {patch.torch} has no free-threaded wheel for Python {tag} ("
                    + ("free-threaded builds: "
                        f"{', '.join(builds)}" if builds else "no free-threaded builds") + ")")
    if patch == release.latest and release.requires_python_ok("torch", py) is False:
        return (f"torch {patch.torch} declares Requires-Python {release.requires_python['torch']}, which "
            f"excludes {py}")
    return None


def python_ok(release, machine: Machine, patch=None) -> bool:
    return python_problem(release, machine, patch) is None


def companion_problem(release, patch, name: str, machine: Machine) -> str | None:
    """Why the companion ``name`` of ``patch`` cannot be installed on this Python, or None (also when not
    known): its own ``Requires-Python`` (torchvision 0.26 to 0.29.2 declare ``!=3.14.1``), recorded for the
    latest patch."""
    version = getattr(patch, name, None)
    if not version or machine.python is None or patch != release.latest:
        return None
    if release.requires_python_ok(name, machine.python) is False:
        return (f"{name} {version} declares Requires-Python {release.requires_python[name]}, which excludes "
                f"Python {machine.python}")
    return None


def packages_for(snap: Snapshot) -> list[str]:
    """torch, and the companions the environment has (all three when torch is not installed yet)."""
    inst = snap.install
    if inst.torch is None:
        return ["torch", "torchvision", "torchaudio"]
    return ["torch"] + [n for n in ("torchvision", "torchaudio") if getattr(inst, n) is not None]


def wheel_pins(fit: Fit, snap: Snapshot, packages: list[str], table=None, machine: Machine | None = None
               ) -> tuple[list[str], list[str]]:
    """(pins, notes): exact local-version pins of ``packages`` (macOS wheels come from PyPI without local
    tags). A companion whose own Requires-Python excludes this Python is left out, with a note saying why."""
    w = fit.wheel
    tagged = snap.host.os != "darwin"
    versions = {"torch": w.torch, "torchvision": w.torchvision, "torchaudio": w.torchaudio}
    release = table.release(w.torch) if table is not None else None
    patch = release.patch(w.torch) if release is not None else None
    pins, notes = [], []
    for name in packages:
        version = versions.get(name)
        if version is None:
            continue
        problem = (
            companion_problem(release, patch, name, machine)
            if (patch and machine and name != "torch")
            else None
        )
        if problem:
            notes.append(f"{problem}: it is left out of the command. Keep using torch without it, or use a "
                "Python "
                         f"that {name} supports.")
            continue
        pins.append(f"{name}=={version}+{w.variant}" if tagged else f"{name}=={version}")
    return pins, notes


def public_spec(text: str | None):
    """A SpecifierSet of the torch versions asked for, with local labels dropped (``==2.3.1+cu121`` asks for
    2.3.1: the plan picks the variant that fits this machine); None for no or an unreadable specifier."""
    if not text or not text.strip():
        return None
    parts = []
    for part in text.split(","):
        part = part.strip()
        if part.startswith("==") and "+" in part:
            part = "==" + split_local(part[2:])[0]
        parts.append(part)
    try:
        return SpecifierSet(",".join(p for p in parts if p))
    except InvalidSpecifier:
        return None


def in_spec(spec, version: str) -> bool:
    if spec is None:
        return True
    try:
        return spec.contains(Version(split_local(version)[0]), prereleases=True)
    except InvalidVersion:
        return False


def usable_patch(release, machine: Machine, acc: AcceleratorTable, spec=None):
    """The newest patch of ``release`` the specifier allows with a wheel for this Python (and this macOS)."""
    for patch in reversed(release.patches):
        if in_spec(spec, patch.torch) and python_ok(release, machine, patch) and \
                not other.os_problem(acc, machine, patch):
            return patch
    return None


# Why a version that was asked for cannot be installed here (Choice.unavailable, and its code)
NO_SUCH_VERSION = "no-such-version"  # no release in the table matches the specifier
NO_PLATFORM = "platform"  # it publishes no wheel for this OS and architecture
NO_PYTHON = "python"  # it publishes no wheel for this Python
NO_GPU = "gpu"  # no variant has kernels for every GPU
NO_OS = "os"  # its wheels need a newer OS than this one (macOS: the platform tag's floor)

# What a choice's reason says (Choice.code), for code to branch on; the reason's words are for people.
KEEPS = "keeps"  # the installed torch fits
KEEPS_AFTER_DRIVER = "keeps-after-driver"  # the installed torch runs once the driver is newer
NEAREST = "nearest"  # the installed torch has no wheel that fits: the nearest release above it does
NEWEST = "newest"  # the newest release that fits
NO_WHEEL_ON_DRIVER = "no-wheel-on-driver"  # nothing runs on the installed driver: the newest that would after
AS_ASKED = "as-asked"  # the version asked for fits
AS_ASKED_AFTER_DRIVER = "as-asked-after-driver"  # the version asked for runs once the driver is newer
NO_RELEASE_FOR_PYTHON = "no-release-for-python"  # no release has wheels for this Python on this platform
NEEDS_OTHER_PYTHON = "needs-other-python"  # the build this machine needs has no wheel for this Python
NO_WHEEL_FOR_GPUS = "no-wheel-for-gpus"  # no published wheel has kernels for every GPU
AMD_UNKNOWN = "amd-processor-unknown"  # a CUDA build beside an AMD GPU whose processor is not known


@dataclass(slots=True)
class Choice:
    target: Fit | None  # the smallest change that fits
    alternative: Fit | None  # the newest release that fits, when different
    # when nothing fits the current driver: the wheel to install after a driver update
    needs_driver: Fit | None
    reason: str
    code: str  # what ``reason`` says (KEEPS, NO_PYTHON, ...): branch on this, never on the words
    # With needs_driver: the nearest release that runs on today's driver, the other way out (a downgrade,
    # usually).
    today: Fit | None = None
    # A version was asked for (--torch, a project pin) and cannot be had here: why (NO_PYTHON, ...) and the
    # nearest workable choice.
    unavailable: str | None = None
    nearest: Fit | None = None
    asked: str | None = None  # the release patch the specifier names first ("2.9.1")


def _nearest(fitting: list, anchor: str | None) -> Fit | None:
    """The fitting release closest to ``anchor``: the nearest above it, else the newest below it."""
    if not fitting:
        return None
    have = torch_version(anchor) if anchor else None
    above = [f for _, f in fitting if have is None or torch_version(f.wheel.torch) > have]
    if above and have is not None:
        return above[0]
    return fitting[-1][1]


def _keep_installed(table, release, patch, machine: Machine, ccs, later: Fit) -> Fit:
    """After a driver update, the installed build itself when it has kernels for every GPU (nothing to
    reinstall). Only a variant worth considering here counts: a CPU build on a machine with an NVIDIA GPU is
    never "kept"."""
    variant = machine.installed_variant
    if variant and variant in wanted_variants(release, machine, other.accelerators(table)) and \
            variant != later.wheel.variant:
        own = fit(table, release, patch, variant, machine, ccs)
        if own.gpus_ok and own.driver.level != UNKNOWN:
            return own
    return later


def choose_on_python(table, machine: Machine, python: str, asked: str) -> tuple[Machine, Choice]:
    """The wheel of torch ``asked`` for this machine as if it ran another Python (``python``: "3.12" or
    "3.12.4"), and that machine."""
    there = replace(machine, python=f"{python}.0" if python.count(".") == 1 else python, free_threaded=False)
    return there, choose(table, there, None, wanted=f"=={asked}")


def choose(
    table, machine: Machine, installed_version: str | None, ccs=None, wanted: str | None = None
) -> Choice:
    """The wheel for this machine. ``wanted``: a PEP 440 specifier the user or the project asks for; it wins
    over the installed version when that one does not match it."""
    if machine.amd_unknown and (machine.installed_variant or "").startswith("cu"):
        # A CUDA build runs on no AMD GPU, and which ROCm wheel (if any) holds this one is not known.
        return Choice(None, None, None, Msg("this machine's GPU is AMD's and its processor is not known: no "
                                            "build can be chosen for it (the finding says how to find the "
                                            "processor)"), code=AMD_UNKNOWN)
    spec = public_spec(wanted)
    base = split_local(installed_version)[0] if installed_version else None
    if spec is not None and (base is None or not in_spec(spec, base)):
        return _choose_wanted(table, machine, spec, ccs)
    usable = list(_usable(table, machine.platform, machine.python, machine.free_threaded, wanted,
                          machine.macos))
    if not usable:
        return Choice(None, None, None, f"no torch release in the table has wheels for Python "
                      f"{python_label(machine)} on {machine.platform}", code=NO_RELEASE_FOR_PYTHON)
    fitting = []  # (release, Fit) with the current driver
    for release, patch in usable:
        f = best_in_release(table, release, patch, machine, ccs)
        if f:
            fitting.append((release, f))
    newest = fitting[-1][1] if fitting else None
    if base:
        same = table.release(base)
        patch = (same.patch(base) or same.latest) if same is not None else None
        if patch is not None and python_ok(same, machine, patch):
            f = best_in_release(table, same, patch, machine, ccs)
            if f:
                return Choice(f, newest if newest and newest.wheel.minor != f.wheel.minor else None, None,
                              Msg("keeps torch {torch}", torch=patch.torch), code=KEEPS)
            later = best_in_release(table, same, patch, machine, ccs, need_driver=False)
            if (
                later is not None
                and later.driver.level == TOO_OLD
                and driver_reachable(table, machine, later)
            ):
                # The installed torch runs once the driver is newer: that is the first way out; the nearest
                # release that runs on today's driver is the other.
                kept = _keep_installed(table, same, patch, machine, ccs, later)
                return Choice(None, None, kept, Msg("keeps torch {torch}; only the driver is too "
                    "old", torch=patch.torch),
                              code=KEEPS_AFTER_DRIVER, today=_nearest(fitting, base))
        if fitting:
            inst = torch_version(base)
            above = [(r, f) for r, f in fitting if inst is None or torch_version(f.wheel.torch) > inst]
            if above:
                target = above[0][1]
                return Choice(target, newest if newest is not target else None, None,
                              Msg("torch {base} has no wheel that fits; {nearest} is the nearest release "
                                  "that does", base=base, nearest=target.wheel.torch), code=NEAREST)
            return Choice(newest, None, None, Msg("the newest release that fits"), code=NEWEST)
    if fitting:
        return Choice(newest, None, None, Msg("the newest release that fits this machine"), code=NEWEST)
    # Nothing runs on this driver. Best: the installed build itself, once the driver is updated.
    if base:
        same = table.release(base)
        patch = same.patch(base) if same is not None else None
        f = best_in_release(table, same, patch, machine, ccs, need_driver=False) \
            if patch and python_ok(same, machine, patch) else None
        if f:
            return Choice(None, None, _keep_installed(table, same, patch, machine, ccs, f),
                          Msg("keeps torch {torch}; only the driver is too old", torch=patch.torch),
                          code=KEEPS_AFTER_DRIVER)
    # Else the newest wheel that would run after a driver update.
    for release, patch in reversed(usable):
        f = best_in_release(table, release, patch, machine, ccs, need_driver=False)
        if f and driver_reachable(table, machine, f):
            return Choice(None, None, f, Msg("no wheel runs on the installed driver"),
                          code=NO_WHEEL_ON_DRIVER)
    if machine.python is not None:
        relaxed = choose(table, replace(machine, python=None, free_threaded=False), None, ccs)
        fit_any = relaxed.target or relaxed.needs_driver
        if fit_any is not None:
            release = table.release(fit_any.wheel.torch)
            return Choice(None, None, None, f"torch {fit_any.wheel.label}, the build this machine needs, has "
                "no wheel "
                          f"for Python {python_label(machine)} ({python_problem(release, machine)})",
                          code=NEEDS_OTHER_PYTHON)
    return Choice(None, None, None, Msg("no published wheel has kernels for every GPU of this machine"),
                  code=NO_WHEEL_FOR_GPUS)


def _usable(table, platform: str, python: str | None, free_threaded: bool, wanted: str | None,
            macos: str | None = None) -> tuple:
    """(release, newest usable patch) on this platform for this Python, oldest release first."""
    machine = Machine(platform, "", python, (), 0, False, None, None, None, free_threaded, macos=macos)
    spec = public_spec(wanted)
    return tuple(
        (r, p) for r in table.releases
        if r.variants_for(platform) and (p := usable_patch(r, machine, other.accelerators(table), spec))
    )


def _choose_wanted(table, machine: Machine, spec, ccs) -> Choice:
    """The wheel of a version that was asked for (and is not the installed one): the newest patch the
    specifier allows that fits; else that one after a driver update (today's nearest release beside it); else
    why none can be had here, with the nearest workable choice."""
    label = str(spec)
    on_platform = [r for r in table.releases if r.variants_for(machine.platform)]
    asked = sorted(((r, p) for r in table.releases for p in r.patches if in_spec(spec, p.torch)),
                   key=lambda rp: version_tuple(rp[1].torch) or (0,), reverse=True)
    here = [(r, p) for r, p in asked if r in on_platform]
    acc = other.accelerators(table)
    every = [(r, p) for r in on_platform if (p := usable_patch(r, machine, acc)) is not None]
    fitting = [(r, f) for r, p in every if (f := best_in_release(table, r, p, machine, ccs))]
    if not asked:
        return Choice(None, None, None, f"no torch release matches torch{label} (the table knows "
                      f"{table.releases[0].minor} to {table.releases[-1].minor})", code=NO_SUCH_VERSION,
                      unavailable=NO_SUCH_VERSION,
                      nearest=fitting[-1][1] if fitting else None)
    first = asked[0][1].torch
    if not here:
        return Choice(None, None, None, f"torch {first} publishes no wheel for {machine.platform}",
                      code=NO_PLATFORM, unavailable=NO_PLATFORM, nearest=_nearest(fitting, first),
                      asked=first)
    if not (on_os := [(r, p) for r, p in here if not other.os_problem(acc, machine, p)]):
        near = _nearest(fitting, first)
        return Choice(None, None, None, other.os_problem(acc, machine, here[0][1], near), code=NO_OS,
                      unavailable=NO_OS, nearest=near, asked=first)
    here = on_os
    usable = [(r, p) for r, p in here if python_ok(r, machine, p)]
    if not usable:
        release, patch = here[0]
        why = python_problem(release, machine, patch)
        nearest = _nearest_for_python(table, machine, release, every)
        reason = f"no torch {patch.torch} wheel for Python {python_label(machine)}: {why}"
        if nearest is not None:
            r, p = nearest
            older = version_tuple(p.torch) < version_tuple(patch.torch)
            reason += (f"; torch {p.torch} is the {'last' if older else 'first'} release with wheels for "
                "Python "
                       f"{_py_tag(machine)}")
        near_fit = None
        if nearest is not None:
            near_fit = best_in_release(table, nearest[0], nearest[1], machine, ccs) or \
                best_in_release(table, nearest[0], nearest[1], machine, ccs, need_driver=False)
        return Choice(None, None, None, reason, code=NO_PYTHON, unavailable=NO_PYTHON, nearest=near_fit,
                      asked=patch.torch)
    for release, patch in usable:
        f = best_in_release(table, release, patch, machine, ccs)
        if f:
            return Choice(f, None, None, Msg("torch{label}, as asked", label=label), code=AS_ASKED,
                          asked=patch.torch)
    for release, patch in usable:
        later = best_in_release(table, release, patch, machine, ccs, need_driver=False)
        if later is not None and (later.driver.level != TOO_OLD or driver_reachable(table, machine, later)):
            return Choice(None, None, later, f"torch{label}, as asked; only the driver is too old",
                          code=AS_ASKED_AFTER_DRIVER, today=_nearest(fitting, patch.torch), asked=patch.torch)
    release, patch = usable[0]
    return Choice(None, None, None, f"no variant of torch {patch.torch} has kernels for every GPU of this "
        "machine",
                  code=NO_GPU, unavailable=NO_GPU, nearest=_nearest(fitting, patch.torch), asked=patch.torch)


def _py_tag(machine: Machine) -> str:
    mm = major_minor(machine.python or "")
    return f"{mm[0]}.{mm[1]}{'t' if machine.free_threaded else ''}" if mm else "?"


def _nearest_for_python(table, machine: Machine, release, every: list):
    """The release nearest to ``release`` that has wheels for this Python: (release, patch), or None."""
    if not every:
        return None
    order = {r.minor: i for i, r in enumerate(table.releases)}
    at = order.get(release.minor, 0)
    return min(every, key=lambda rp: (abs(order[rp[0].minor] - at), order[rp[0].minor] > at))


def driver_reachable(table, machine: Machine, f: Fit) -> bool:
    """Whether a driver that runs ``f`` exists for every GPU of this machine: old GPUs stop at a last driver
    branch (Kepler R470; Maxwell, Pascal and Volta R580), so a build that needs a newer driver never runs
    there."""
    needed = f.driver.needed or f.driver.floor
    branch = version_tuple(needed)[0] if version_tuple(needed) else None
    if branch is None:
        return True
    for cc in machine.gpu_ccs:
        last = table.last_driver_branch(cc)
        if last is not None and branch > last:
            return False
    return True
