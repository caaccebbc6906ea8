"""The NVML questions, answered as plain data: stdlib only and no import of torchdoctor, so that this file
also runs by path as the child that asks the real library (doctor/probes/nvidia/nvml.py starts it with
torchdoctor's own interpreter): Python's start-up and pynvml's import are all it costs.

``query(pynvml)`` returns JSON-able data: each answer is {"value": ...} or {"error": {"type", "value",
"message"}} with NVML's own words; nvml.py turns that into an ``NvmlOutcome``. Run as a script it points
fd 1 at stderr before pynvml loads the library (a library that prints when it loads cannot get onto
torchdoctor's stdout) and writes one JSON line on the real stdout.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

GPU_CALLS = (
    "nvmlDeviceGetName",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetComputeMode",
)
CUDA_CALLS = ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion")


def failure(exc: BaseException) -> dict[str, Any]:
    """An exception as data: its class name, NVML's code (``.value``) and its message."""
    value = getattr(exc, "value", None)
    try:
        message = str(exc)  # NVMLError.__str__ may call back into the library
    except Exception:  # noqa: BLE001 - the message is best effort
        message = ""
    return {
        "type": type(exc).__name__,
        "value": value if isinstance(value, int) and not isinstance(value, bool) else None,
        "message": message,
        "unicode": isinstance(exc, UnicodeDecodeError),
    }


def plain(value: Any) -> Any:
    """What an NVML answer holds, as JSON data: text, numbers, lists; a struct by the fields we read."""
    if isinstance(value, bytes):  # pynvml <= 11.4.1 answers bytes
        return value.decode("utf-8", errors="replace")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    fields = {name: plain(getattr(value, name)) for name in ("total", "busId") if hasattr(value, name)}
    return fields or str(value)


def ask(nvml: Any, name: str, *args: Any) -> dict[str, Any]:
    try:
        return {"value": plain(getattr(nvml, name)(*args))}
    except Exception as exc:  # noqa: BLE001 - NotSupported, FunctionNotFound, AttributeError...
        return {"error": failure(exc)}


def query(nvml: Any) -> dict[str, Any]:
    """Init, the driver and its CUDA, every GPU, shutdown."""
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError subclasses, OSError, UnicodeDecodeError...
        return {"ok": False, "error": failure(exc)}
    try:
        out: dict[str, Any] = {"ok": True, "driver": ask(nvml, "nvmlSystemGetDriverVersion")}
        out["cuda"] = {name: ask(nvml, name) for name in CUDA_CALLS}
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as exc:  # noqa: BLE001
            out["count_error"] = failure(exc)
            return out
        out["gpus"] = []
        for index in range(count):
            gpu: dict[str, Any] = {"index": index}
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except Exception as exc:  # noqa: BLE001
                gpu["handle_error"] = failure(exc)
            else:
                for name in GPU_CALLS:
                    gpu[name] = ask(nvml, name, handle)
            out["gpus"].append(gpu)
        return out
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutdown errors change nothing we report
            pass


def main() -> int:
    here = os.path.dirname(os.path.realpath(__file__))
    if sys.path and os.path.realpath(sys.path[0] or os.curdir) == here:
        del sys.path[0]  # run by path: nothing in our folder may shadow pynvml's imports
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the library prints as it loads goes to stderr
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the legacy pynvml 13.x redirector warns on import
            import pynvml
    except Exception as exc:  # noqa: BLE001 - a broken binding is a fact
        result: dict[str, Any] = {"ok": False, "unimportable": f"{type(exc).__name__}: {exc}"}
    else:
        result = query(pynvml)
    out.write(json.dumps(result) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
