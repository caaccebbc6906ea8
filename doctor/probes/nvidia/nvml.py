"""Raw source: NVML through ``pynvml`` (nvidia-ml-py), imported only when asked for and queried in a
daemon thread, so a hung driver costs the timeout and not the run. Every failure is kept with
NVML's own words (classify_nvml_error) for the combiner to judge.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

from doctor.model.snapshot import Fact, Gpu
from doctor.model.versions import cuda_from_int
from doctor.probes.nvidia.parsers import classify_nvml_error, normalise_bus_id, nvml_text

_COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}


@dataclass
class NvmlOutcome:
    ok: bool = False
    code: int | None = None  # NVML error code of the failure, when there was one
    message: str = ""  # the failure, verbatim ("Driver Not Loaded", "timed out after 5s", ...)
    timed_out: bool = False
    driver: Fact = field(default_factory=Fact)
    cuda: Fact = field(default_factory=Fact)
    gpus: list[Gpu] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # per-GPU oddities worth an attempts line


def load_pynvml() -> tuple[Any, str]:
    """(the pynvml module or None, why not). The legacy pynvml 13.x redirector warns on import."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pynvml  # kept out of module import (start-up cost, no driver needed)
    except Exception as exc:  # a broken binding is a fact, not a crash
        return None, f"not importable ({type(exc).__name__}: {exc})"
    return pynvml, ""


def query_nvml(nvml: Any, timeout: float = 5.0) -> NvmlOutcome:
    """Ask NVML in a daemon thread, so that a hung driver costs ``timeout`` seconds, not the run."""
    box: list[NvmlOutcome] = []

    def target() -> None:
        try:
            box.append(_query_nvml_unbounded(nvml))
        except BaseException as exc:  # never let the thread die silently
            code, message = classify_nvml_error(exc)
            box.append(NvmlOutcome(code=code, message=message))

    thread = threading.Thread(target=target, name="torchdoctor-nvml", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive() or not box:
        return NvmlOutcome(message=f"timed out after {timeout:g}s (a hung driver?)", timed_out=True)
    return box[0]


def _query_nvml_unbounded(nvml: Any) -> NvmlOutcome:
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError subclasses, OSError, UnicodeDecodeError...
        code, message = classify_nvml_error(exc)
        return NvmlOutcome(code=code, message=message)
    try:
        out = NvmlOutcome(ok=True)
        driver, why = _call(nvml, "nvmlSystemGetDriverVersion")
        out.driver = Fact(nvml_text(driver), "nvml") if driver else Fact.unknown(why, "nvml")
        out.cuda = _nvml_cuda(nvml)
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as exc:
            code, message = classify_nvml_error(exc)
            return NvmlOutcome(code=code, message=message, driver=out.driver, cuda=out.cuda)
        for index in range(count):
            out.gpus.append(_nvml_gpu(nvml, index, out.notes))
        return out
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # shutdown errors change nothing we report
            pass


def _call(nvml: Any, name: str, *args: Any) -> tuple[Any, str]:
    """(value, "") or (None, "NVML: <why>") for one NVML query."""
    try:
        return getattr(nvml, name)(*args), ""
    except Exception as exc:  # NotSupported, FunctionNotFound, AttributeError...
        return None, f"NVML {name}: {classify_nvml_error(exc)[1]}"


def _nvml_cuda(nvml: Any) -> Fact:
    whys = []
    # _v2 reads libcuda (the real answer); v1 falls back to a built-in number when libcuda is absent.
    for name in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
        value, why = _call(nvml, name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return Fact(cuda_from_int(value), "nvml")
        whys.append(why or f"NVML {name}: unexpected value {value!r}")
    return Fact.unknown("; ".join(whys), "nvml")


def _nvml_gpu(nvml: Any, index: int, notes: list[str]) -> Gpu:
    gpu = Gpu(index=index)
    handle, why = _call(nvml, "nvmlDeviceGetHandleByIndex", index)
    if handle is None:
        gpu.compute_capability = Fact.unknown(why, "nvml")
        notes.append(f"nvml: GPU {index}: {why}")
        return gpu
    name, why = _call(nvml, "nvmlDeviceGetName", handle)
    if name is None:
        notes.append(f"nvml: GPU {index} name: {why}")  # UnicodeDecodeError under WSL (pynvml#53)
    gpu.name = nvml_text(name).strip() if name is not None else ""
    cc, why = _call(nvml, "nvmlDeviceGetCudaComputeCapability", handle)
    if isinstance(cc, (tuple, list)) and len(cc) == 2:
        gpu.compute_capability = Fact(f"{int(cc[0])}.{int(cc[1])}", "nvml")
    else:
        gpu.compute_capability = Fact.unknown(why or f"NVML: unexpected compute capability {cc!r}", "nvml")
    memory, _ = _call(nvml, "nvmlDeviceGetMemoryInfo", handle)  # NotSupported on unified-memory GB10
    total = getattr(memory, "total", None)
    gpu.memory_total_mib = int(total) // (1024 * 1024) if isinstance(total, int) else None
    uuid, _ = _call(nvml, "nvmlDeviceGetUUID", handle)
    gpu.uuid = nvml_text(uuid) if uuid else None
    pci, _ = _call(nvml, "nvmlDeviceGetPciInfo", handle)
    bus = getattr(pci, "busId", None)
    gpu.pci_bus_id = normalise_bus_id(nvml_text(bus)) if bus else None
    mig, _ = _call(nvml, "nvmlDeviceGetMigMode", handle)  # NotSupported on GPUs without MIG
    gpu.mig_mode = bool(mig[0] == 1) if isinstance(mig, (tuple, list)) and mig else None
    mode, _ = _call(nvml, "nvmlDeviceGetComputeMode", handle)
    gpu.compute_mode = _COMPUTE_MODES.get(mode) if isinstance(mode, int) else None
    return gpu
