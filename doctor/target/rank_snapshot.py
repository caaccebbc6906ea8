"""What every rank reports about itself: versions (torch, CUDA, NCCL, driver), its device, its host.

Runs INSIDE the target interpreter (Python 3.8+, stdlib only; torch and pynvml are passed in).
Cheap on purpose: no device work beyond naming the device.
"""

from __future__ import annotations

import os
import platform
import socket
from typing import Any

from doctor.target.rank import FAKE_VERSION_SEAM, as_text, first_line, seam_for_rank


def read_driver_version(nvml: Any = None, sys_root: str = "/") -> tuple[str | None, str]:
    """(driver version, source): NVML when it loads, else /sys/module/nvidia/version."""
    if nvml is not None:
        try:
            nvml.nvmlInit()
            try:
                return as_text(nvml.nvmlSystemGetDriverVersion()), "nvml"
            finally:
                nvml.nvmlShutdown()
        except Exception as exc:  # NVMLError_*, missing library: fall through to sysfs
            why = f"nvml: {exc}"
        else:  # pragma: no cover - the try returns
            why = ""
    else:
        why = "nvml: not importable"
    try:
        with open(os.path.join(sys_root, "sys/module/nvidia/version")) as fh:
            return fh.read().strip() or None, "/sys/module/nvidia/version"
    except OSError:
        return None, why + "; /sys/module/nvidia/version: absent"


def light_snapshot(torch: Any, rank: int, local_rank: int, seams: dict[str, str], nvml: Any = None) -> dict:
    """What every rank reports about itself; cheap (no device work beyond naming the device)."""
    snap = {
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "python": platform.python_version(),
        "torch_version": str(torch.__version__),
        "cuda_version": getattr(torch.version, "cuda", None),
        "hip_version": getattr(torch.version, "hip", None),
        "nccl_version": None,
        "cuda_available": False,
        "device_count": 0,
        "device": None,
        "driver_version": None,
        "driver_source": "",
    }
    fake = seam_for_rank(seams.get(FAKE_VERSION_SEAM), rank)
    if fake:
        snap["torch_version"] = fake
    try:
        snap["cuda_available"] = bool(torch.cuda.is_available())
        snap["device_count"] = int(torch.cuda.device_count()) if snap["cuda_available"] else 0
    except Exception as exc:
        snap["cuda_error"] = first_line(exc)
    if snap["cuda_available"] and snap["device_count"]:
        index = local_rank % snap["device_count"]
        try:
            props = torch.cuda.get_device_properties(index)
            snap["device"] = {
                "index": index,
                "name": props.name,
                "capability": f"{props.major}.{props.minor}",
                "total_memory_mib": int(props.total_memory) // (1 << 20),
            }
        except Exception as exc:
            snap["device"] = {"index": index, "error": first_line(exc)}
    if snap["cuda_version"]:
        snap["nccl_version"] = read_nccl_version(torch)
    if snap["cuda_version"] or snap["cuda_available"]:
        snap["driver_version"], snap["driver_source"] = read_driver_version(nvml)
    return snap


def read_nccl_version(torch: Any) -> str | None:
    """torch.cuda.nccl.version(): a tuple (2, 21, 5) in torch >= 1.13, an int 2708 before."""
    try:
        version = torch.cuda.nccl.version()
    except Exception:
        return None
    if isinstance(version, (tuple, list)):
        return ".".join(str(part) for part in version)
    if isinstance(version, int):  # NCCL_VERSION_CODE: 2708 or 21903
        if version >= 10000:
            return f"{version // 10000}.{version // 100 % 100}.{version % 100}"
        return f"{version // 1000}.{version // 100 % 10}.{version % 100}"
    return str(version)
