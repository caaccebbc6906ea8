"""The combiner: the NVIDIA facts from every source, in this order of precedence:

1. NVML (``pynvml`` from nvidia-ml-py, imported lazily), bounded by a timeout (nvml.py);
2. ``nvidia-smi`` (PATH, then the WSL and Windows locations): the banner, then
   ``--query-gpu`` for the GPUs, with ``compute_cap`` asked for separately (smi.py);
3. ``/sys/module/nvidia/version`` then ``/proc/driver/nvidia/version`` for the kernel module's
   version (no CUDA number there: the caller fills that from the table's driver-branch map) (kernel.py);
4. the PCI bus (``/sys/bus/pci/devices``) and WSL markers, to tell "no GPU" from "no driver";
5. the ``TORCHDOCTOR_DRIVER_VERSION`` / ``TORCHDOCTOR_CUDA_DRIVER_VERSION`` overrides, which win.

The first source that lists GPUs gives the GPUs and versions; when none does, the status is the
most specific cause any source named (``_decide``). Nothing here raises: every failure becomes a
status, a ``Fact.unknown(why)`` or an attempts line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from doctor.compat.wsl import wsl_version
from doctor.model.snapshot import (
    NVIDIA_CONTAINER_LOST,
    NVIDIA_MISMATCH,
    NVIDIA_NO_DRIVER,
    NVIDIA_NO_GPU,
    NVIDIA_NO_PERMISSION,
    NVIDIA_OK,
    NVIDIA_UNKNOWN,
    Fact,
    Nvidia,
)
from doctor.probes.environment.files import exists
from doctor.probes.environment.wsl import read_kernel_release
from doctor.probes.host import read_wsl_marker
from doctor.probes.nvidia.kernel import read_kernel_driver_version, read_pci_nvidia_devices
from doctor.probes.nvidia.nvml import NvmlOutcome, query_nvml, query_nvml_isolated
from doctor.probes.nvidia.parsers import (
    NVML_LIB_RM_MISMATCH,
    NVML_NO_PERMISSION,
    NVML_UNKNOWN,
    is_l4t_version,
)
from doctor.probes.nvidia.smi import SmiOutcome, find_nvidia_smi, query_smi, this_system
from doctor.probes.overrides import ENV_CUDA, ENV_DRIVER, BadOverride, read_overrides
from doctor.runner import run

_NVML_CODE_STATUS = {
    NVML_LIB_RM_MISMATCH: NVIDIA_MISMATCH,
    NVML_UNKNOWN: NVIDIA_CONTAINER_LOST,
    NVML_NO_PERMISSION: NVIDIA_NO_PERMISSION,
}

# Failures that name their cause; nothing later in the chain can say more.
_DEFINITIVE = (NVIDIA_MISMATCH, NVIDIA_CONTAINER_LOST, NVIDIA_NO_PERMISSION)


def probe_nvidia(
    runner: Any = run,
    root: str = "/",
    nvml: Any = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 5.0,
    *,
    system: str | None = None,
) -> Nvidia:
    """Gather the NVIDIA facts in the documented order (module docstring). Never raises.

    ``nvml`` is a pynvml-like module object (tests pass a fake); None imports ``pynvml``; False skips NVML.
    ``system`` ("linux", "windows", "darwin") defaults to this machine's.
    """
    env = os.environ if env is None else env
    system = system or this_system()
    result = Nvidia()
    pci = read_pci_nvidia_devices(root) if system == "linux" else None
    result.pci_devices = pci or []
    wsl = read_wsl_marker(root) if system == "linux" else None
    if wsl:
        # WSL 1 has no GPU at all; the marker alone cannot tell it from WSL 2
        release = read_kernel_release(root)
        if wsl_version(release, exists(root, "/dev/dxg")) == 1:
            wsl = f"WSL 1, kernel {release}"

    if nvml is False:  # TORCHDOCTOR_NVML=0: skip NVML (a hung driver, or a test seam)
        nv = NvmlOutcome(message="disabled (TORCHDOCTOR_NVML=0)")
    elif nvml is None:  # the real library: in a child, so that it cannot take torchdoctor down
        nv = query_nvml_isolated(timeout, runner, env)
    else:
        nv = query_nvml(nvml, timeout)
    result.attempts.append(f"nvml: ok ({len(nv.gpus)} GPUs)" if nv.ok else f"nvml: {nv.message}")
    result.attempts.extend(nv.notes)

    if nv.ok and nv.gpus:
        result.status, result.detail = NVIDIA_OK, ""
        result.driver_version, result.cuda_driver_version, result.gpus = nv.driver, nv.cuda, nv.gpus
    else:
        _fallbacks(result, nv, runner, root, env, timeout, system, pci, wsl)

    _apply_overrides(result, env)
    return result


def _fallbacks(
    result: Nvidia,
    nv: NvmlOutcome,
    runner: Any,
    root: str,
    env: Mapping[str, str],
    timeout: float,
    system: str,
    pci: list[str] | None,
    wsl: str | None,
) -> None:
    """NVML gave no GPUs: try nvidia-smi, the kernel module files, then decide the status."""
    exe = find_nvidia_smi(root, env, system)
    smi = query_smi(exe, runner, timeout) if exe else SmiOutcome(attempts=["nvidia-smi: not found"])
    result.attempts.extend(smi.attempts)

    if smi.status == NVIDIA_OK and smi.gpus:
        result.status, result.detail = NVIDIA_OK, ""
        result.driver_version = (
            Fact(smi.driver, "nvidia-smi")
            if smi.driver
            else Fact.unknown("nvidia-smi's driver version is not a version number", "nvidia-smi")
        )
        result.cuda_driver_version = (
            Fact(smi.cuda, "nvidia-smi")
            if smi.cuda
            else Fact.unknown("nvidia-smi shows no CUDA version", "nvidia-smi")
        )
        result.gpus = smi.gpus
        return

    # Versions: NVML (it initialised but listed no GPU), then nvidia-smi, then the kernel module.
    kernel, kernel_source, kernel_note = (None, "", "")
    if system == "linux":
        kernel, kernel_source, kernel_note = read_kernel_driver_version(root)
        result.attempts.append(
            f"kernel module: {kernel} ({kernel_source})" if kernel else f"kernel module: {kernel_note}"
        )
    l4t = kernel is not None and is_l4t_version(kernel)
    if nv.ok and nv.driver.known:
        result.driver_version, result.cuda_driver_version = nv.driver, nv.cuda
    elif smi.driver:
        result.driver_version = Fact(smi.driver, "nvidia-smi")
        result.cuda_driver_version = (
            Fact(smi.cuda, "nvidia-smi") if smi.cuda else Fact.unknown("not shown", "nvidia-smi")
        )
    elif kernel and not l4t:
        result.driver_version = Fact(kernel, kernel_source)
        result.cuda_driver_version = Fact.unknown(
            f"only the kernel module version was readable ({kernel_source}); the maximum CUDA comes from "
            "NVML or nvidia-smi",
            kernel_source,
        )
    else:
        whys = [f"NVML: {nv.message}" if not nv.ok else "NVML: no driver version", _smi_why(smi)]
        if l4t:
            whys.append(f"Jetson L4T release {kernel} in {kernel_source} is not a driver branch")
        elif kernel_note:
            whys.append(kernel_note)
        why = "; ".join(w for w in whys if w)
        result.driver_version = Fact.unknown(why)
        result.cuda_driver_version = Fact.unknown(why)

    result.status, result.detail = _decide(nv, smi, kernel, kernel_source, pci, wsl, system)


def _smi_why(smi: SmiOutcome) -> str:
    if smi.status is None:
        return smi.attempts[0] if smi.attempts else "nvidia-smi not found"
    first = smi.detail.splitlines()[0] if smi.detail else smi.status
    return f"nvidia-smi: {first}"


def _decide(
    nv: NvmlOutcome,
    smi: SmiOutcome,
    kernel: str | None,
    kernel_source: str,
    pci: list[str] | None,
    wsl: str | None,
    system: str,
) -> tuple[str, str]:
    """The status when neither NVML nor nvidia-smi listed a GPU, most specific cause first. ``wsl``: the
    WSL marker found, or "WSL 1, kernel <release>" under WSL 1."""
    nvml_status = _NVML_CODE_STATUS.get(nv.code) if nv.code is not None else None
    if nvml_status in _DEFINITIVE:
        # nvidia-smi's text is what users search for; it adds e.g. "NVML library version: 570.124".
        return nvml_status, smi.detail if smi.status == nvml_status else nv.message
    if smi.status in _DEFINITIVE:
        return smi.status, smi.detail
    driver_answered = nv.ok or smi.status in (NVIDIA_OK, NVIDIA_NO_GPU)
    if driver_answered:
        message = smi.detail if smi.status == NVIDIA_NO_GPU else "the driver answered but lists no GPU"
        if pci == [] and not wsl:
            return NVIDIA_NO_GPU, message
        return (
            NVIDIA_UNKNOWN,
            f"{message} (the PCI bus {'is not visible' if not pci else 'shows ' + ', '.join(pci)})",
        )
    reasons = f"NVML: {nv.message}; {_smi_why(smi)}"
    # A hang or garbage says something is badly wrong, but not what: never guess past it.
    if smi.status == NVIDIA_UNKNOWN:
        return NVIDIA_UNKNOWN, smi.detail
    if nv.timed_out:
        return NVIDIA_UNKNOWN, f"NVML {nv.message}"
    if kernel:
        return NVIDIA_UNKNOWN, (
            f"the nvidia kernel module ({kernel}, {kernel_source}) is loaded but no driver library answered "
            f"({reasons}): user-space driver libraries missing, e.g. a container started without the NVIDIA "
            "runtime"
        )
    if pci:
        return (
            NVIDIA_NO_DRIVER,
            smi.detail
            if smi.status == NVIDIA_NO_DRIVER
            else f"{reasons}; NVIDIA device(s) on PCI: {', '.join(pci)}",
        )
    if wsl and wsl.startswith("WSL 1"):
        return NVIDIA_NO_GPU, f"{wsl}: WSL 1 has no GPU; only WSL 2 passes the Windows driver's GPU through"
    if wsl:
        return NVIDIA_UNKNOWN, (
            f"WSL2 ({wsl}): the PCI bus is not visible, so a missing GPU cannot be told from a missing "
            f"Windows driver ({reasons})"
        )
    if pci is None:
        if system == "darwin":
            return NVIDIA_NO_GPU, "macOS: no NVIDIA CUDA support"
        return NVIDIA_UNKNOWN, f"no NVIDIA driver answered and the PCI bus cannot be scanned here ({reasons})"
    message = "no NVIDIA display device on the PCI bus"
    return NVIDIA_NO_GPU, f"{message} ({_smi_why(smi)})" if smi.status == NVIDIA_NO_DRIVER else message


def _apply_overrides(result: Nvidia, env: Mapping[str, str]) -> None:
    """The escape hatch (like uv's UV_CUDA_DRIVER_VERSION): forced values replace detected ones. A value
    that cannot mean anything is refused before probing (doctor/probes/overrides.py); here it is ignored."""
    try:
        forced = read_overrides(env)
    except BadOverride as exc:
        result.attempts.append(f"env: ignored: {exc}")
        return
    if forced.driver:
        result.driver_version = Fact(forced.driver, f"env:{ENV_DRIVER}")
        result.attempts.append(f"env: {ENV_DRIVER}={forced.driver}")
    if forced.cuda:
        result.cuda_driver_version = Fact(forced.cuda, f"env:{ENV_CUDA}")
        result.attempts.append(f"env: {ENV_CUDA}={forced.cuda}")
