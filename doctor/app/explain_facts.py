"""What the machine's facts say about a cause `explain` read from a message (pure, over the snapshot).

The rules answer for the causes `check` knows; many messages, though, are settled by a plain fact the
rules have no reason to turn into a finding: "Torch not compiled with CUDA enabled" is confirmed by a
``+cpu`` torch whether or not a GPU is there; "no kernel image" cannot come from a machine without a
GPU; an MPS message cannot come from Linux. Each function here takes the snapshot (and the groups the
message captured) and returns (verdict, why), or None when its facts do not decide and the rules'
answer stands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from doctor.model.amd import AMD_NO_GPU, AMD_OK
from doctor.model.snapshot import NVIDIA_NO_DRIVER, NVIDIA_NO_GPU, NVIDIA_OK, Snapshot

if TYPE_CHECKING:  # annotations only: the assessment is handed in by the diagnosis
    from doctor.compat.assessment import Assessment

CONFIRMED = "confirmed"
RULED_OUT = "ruled-out"
UNKNOWN = "unknown"

Verdict = tuple[str, str]


# --- the machine, in the words a verdict needs --------------------------------------------------------


def _vendors(snap: Snapshot) -> set[str] | None:
    """{"nvidia"}, {"amd"}, both, or set() (no GPU); None when the probes could not tell."""
    nvidia = snap.nvidia.status == NVIDIA_OK and bool(snap.nvidia.gpus)
    amd = snap.amd is not None and snap.amd.status == AMD_OK and bool(snap.amd.gpus)
    found = {name for name, has in (("nvidia", nvidia), ("amd", amd)) if has}
    if found:
        return found
    nvidia_none = snap.nvidia.status in (NVIDIA_NO_GPU, NVIDIA_NO_DRIVER) and not snap.nvidia.pci_devices
    amd_none = snap.amd is not None and snap.amd.status == AMD_NO_GPU
    return set() if nvidia_none and amd_none else None


def _build(facts: Assessment):
    """The installed torch's build, as the assessment derived it; None unless torch was read whole."""
    snap = facts.snap
    if snap.install.status != "ok" or snap.install.torch is None:
        return None
    return facts.build


def _where(snap: Snapshot) -> str:
    return snap.interpreter.path or "the interpreter looked at"


def _os(snap: Snapshot) -> str:
    return {"linux": "Linux", "windows": "Windows", "darwin": "macOS"}.get(snap.host.os, snap.host.os or "?")


# --- per cause ------------------------------------------------------------------------------------------


def _torch_cpu_build(facts: Assessment, groups: dict) -> Verdict | None:
    snap = facts.snap
    build = _build(facts)
    if build is None:
        return (UNKNOWN, f"no torch found in {_where(snap)}") if snap.install.status == "absent" else None
    if build.kind == "cpu":
        return CONFIRMED, f"{_where(snap)} has torch {build.label}, a CPU-only build"
    if build.kind in ("cuda", "rocm"):
        return RULED_OUT, (f"{_where(snap)} has torch {build.label}, a {build.kind.upper()} build: the "
                           "message came from another interpreter or machine")
    return None


def _needs_a_gpu(facts: Assessment, groups: dict) -> Verdict | None:
    snap = facts.snap
    if _vendors(snap) == set():
        return RULED_OUT, ("this machine has no GPU (no NVIDIA or AMD device): the message came from "
                           "another machine")
    return None


def _wrong_vendor(facts: Assessment, groups: dict) -> Verdict | None:
    snap = facts.snap
    build, vendors = _build(facts), _vendors(snap)
    if build is None or vendors is None:
        return None
    if build.kind == "rocm" and vendors == {"nvidia"}:
        return CONFIRMED, (f"{_where(snap)} has torch {build.label}, a ROCm build, on a machine with "
                           "NVIDIA GPUs only")
    if build.kind == "cuda" and vendors == {"amd"}:
        return CONFIRMED, (f"{_where(snap)} has torch {build.label}, a CUDA build, on a machine with "
                           "AMD GPUs only")
    if (build.kind == "rocm" and "amd" in vendors) or (build.kind == "cuda" and "nvidia" in vendors):
        return RULED_OUT, f"torch {build.label} in {_where(snap)} matches this machine's GPU vendor"
    return None


def _rocm_under_wsl(facts: Assessment, groups: dict) -> Verdict | None:
    snap = facts.snap
    if not snap.host.wsl:
        return RULED_OUT, "this machine is not WSL2"
    build = _build(facts)
    if build is not None and build.kind == "rocm":
        return CONFIRMED, (f"WSL2, and {_where(snap)} has torch {build.label}, a ROCm build with its own "
                           "HSA runtime")
    return None


def _not_wsl(facts: Assessment, groups: dict) -> Verdict | None:
    snap = facts.snap
    if not snap.host.wsl:
        return RULED_OUT, "this machine is not WSL2: the message came from another machine"
    return None


def _wsl_libcuda(facts: Assessment, groups: dict) -> Verdict | None:
    snap = facts.snap
    if not snap.host.wsl:
        return _not_wsl(facts, groups)
    wsl, libs = snap.environment.wsl, snap.environment.libraries
    if wsl is None or wsl.ld_so_conf is None or libs is None or libs.why is not None:
        return None
    wanted = "/usr/lib/wsl/lib"
    if wsl.wsl_lib_dir_exists is False:
        return CONFIRMED, f"WSL2, but {wanted} (the Windows driver's libcuda.so) does not exist"
    in_conf = any(wanted in (conf.dirs or []) for conf in wsl.ld_so_conf)
    in_path = wanted in (libs.value or "").split(":")
    if not in_conf and not in_path:
        return CONFIRMED, ("WSL2, and neither /etc/ld.so.conf.d nor LD_LIBRARY_PATH "
                           f"({libs.value or 'unset'}) names {wanted}, where the Windows driver's "
                           "libcuda.so lives")
    return None


def _hsa_override(facts: Assessment, groups: dict) -> Verdict | None:
    snap = facts.snap
    amd = snap.amd
    if amd is None:
        return None
    override = amd.override.value if amd.override.known else None
    if amd.override.known and not override:
        return RULED_OUT, "HSA_OVERRIDE_GFX_VERSION is not set here"
    if override and amd.gpus:
        gfx = [g.gfx.value for g in amd.gpus if g.gfx.known]
        gpus = ", ".join(gfx) or "of unknown ISA"
        return CONFIRMED, f"HSA_OVERRIDE_GFX_VERSION={override} here, on GPU(s) {gpus}"
    return None


def _on_os(name: str) -> Callable[[Assessment, dict], Verdict | None]:
    def verdict(facts: Assessment, groups: dict) -> Verdict | None:
        snap = facts.snap
        if snap.host.os and snap.host.os != name:
            return RULED_OUT, f"this machine runs {_os(snap)}: the message came from another machine"
        return None

    return verdict


def _python_32_bit(facts: Assessment, groups: dict) -> Verdict | None:
    snap = facts.snap
    bits = snap.interpreter.bits
    if bits == 32:
        return CONFIRMED, f"{_where(snap)} is a 32-bit Python"
    if bits == 64:
        return RULED_OUT, f"{_where(snap)} is a 64-bit Python"
    return None


# the wheel a symbol's library comes from, by the prefix of the symbol or library named in the message
_WHEEL_OF = (("nccl", "nvidia-nccl-cu"), ("libnccl", "nvidia-nccl-cu"), ("nvjitlink", "nvidia-nvjitlink-cu"),
             ("libnvjitlink", "nvidia-nvjitlink-cu"), ("libcudart", "nvidia-cuda-runtime-cu"),
             ("libcublas", "nvidia-cublas-cu"))


def _pinned_wheel(facts: Assessment, groups: dict, prefix: str | None = None) -> Verdict | None:
    """A missing symbol of NCCL, nvJitLink, cudart or cuBLAS: is the wheel torch pins installed at another
    version than the pin (one installed later over it)?"""
    snap = facts.snap
    named = (groups.get("lib") or groups.get("symbol") or "").lower().lstrip("_")
    prefix = prefix or next((wheel for start, wheel in _WHEEL_OF if named.startswith(start)), None)
    torch = snap.install.torch if snap.install.status == "ok" else None
    python = snap.environment.python
    if prefix is None or torch is None or python is None or not python.dists:
        return None
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion

    for line in torch.requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if not req.name.lower().startswith(prefix) or not req.specifier:
            continue
        for dist in python.dists:
            if (dist.name or "").lower().replace("_", "-") != req.name.lower() or not dist.version:
                continue
            try:
                fits = req.specifier.contains(dist.version, prereleases=True)
            except InvalidVersion:
                return None
            if fits:
                return None  # the pinned wheel is there: another copy on the library path is for the rules
            return CONFIRMED, (f"{_where(snap)} has {dist.name} {dist.version}, but torch {torch.version} "
                               f"pins {req.name}{req.specifier}")
    return None


FACTS: dict[str, Callable[[Assessment, dict], Verdict | None]] = {
    "torch-cpu-build": _torch_cpu_build,
    "gpu-arch-unsupported": _needs_a_gpu,
    "gpu-newer-than-build-range": _needs_a_gpu,
    "cuda-device-side-assert": _needs_a_gpu,
    "torch-wrong-vendor-build": _wrong_vendor,
    "rocm-wsl-runtime-missing": _rocm_under_wsl,
    "wsl-libcuda-not-on-path": _wsl_libcuda,
    "wsl-linux-driver-installed": _not_wsl,
    "hsa-override-gfx-wrong": _hsa_override,
    "mps-op-not-implemented": _on_os("darwin"),
    "mps-macos-too-old": _on_os("darwin"),
    "macos-arch-mismatch": _on_os("darwin"),
    "macos-x86-no-torch-wheels": _on_os("darwin"),
    "python-under-rosetta": _on_os("darwin"),
    "windows-dll-init-failed": _on_os("windows"),
    "windows-dll-load-failed": _on_os("windows"),
    "windows-long-paths-disabled": _on_os("windows"),
    "python-32-bit": _python_32_bit,
    "torch-cuda-symbol-error": _pinned_wheel,
    "nvjitlink-symbol-missing": lambda facts, groups: _pinned_wheel(facts, groups, "nvidia-nvjitlink-cu"),
}


def fact_verdict(finding: str, facts: Assessment, groups: dict) -> Verdict | None:
    """(verdict, why) from the machine's facts (the diagnosis's assessment) for a cause, or None: the rules
    decide."""
    judge = FACTS.get(finding)
    return judge(facts, groups) if judge is not None else None
