"""The NVIDIA probe: driver version, the driver's maximum CUDA, the GPUs, and what is broken.

Layers, as in packaging's ``_manylinux``: ``read_*`` return raw text (or None), ``parse_*`` are
pure and tested on recorded outputs, ``probe_nvidia`` combines the sources in this order:

1. NVML (``pynvml`` from nvidia-ml-py, imported lazily), bounded by a timeout;
2. ``nvidia-smi`` (PATH, then the WSL and Windows locations): the banner, then
   ``--query-gpu`` for the GPUs, with ``compute_cap`` asked for separately;
3. ``/sys/module/nvidia/version`` then ``/proc/driver/nvidia/version`` for the kernel module's
   version (no CUDA number there: the caller fills that from the table's driver-branch map);
4. the PCI bus (``/sys/bus/pci/devices``) and WSL markers, to tell "no GPU" from "no driver";
5. the ``TORCHDOCTOR_DRIVER_VERSION`` / ``TORCHDOCTOR_CUDA_DRIVER_VERSION`` overrides.

Nothing here raises: every failure becomes a status, a ``Fact.unknown(why)`` or an attempts line.
"""

from __future__ import annotations

import csv
import glob
import os
import re
import shutil
import sys
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from doctor.model.snapshot import (
    NVIDIA_CONTAINER_LOST,
    NVIDIA_MISMATCH,
    NVIDIA_NO_DRIVER,
    NVIDIA_NO_GPU,
    NVIDIA_NO_PERMISSION,
    NVIDIA_OK,
    NVIDIA_UNKNOWN,
    Fact,
    Gpu,
    Nvidia,
)
from doctor.model.versions import cuda_from_int
from doctor.probes.host import read_text, read_wsl_marker
from doctor.runner import RunResult, run

ENV_DRIVER = "TORCHDOCTOR_DRIVER_VERSION"
ENV_CUDA = "TORCHDOCTOR_CUDA_DRIVER_VERSION"

SYS_MODULE_VERSION = "/sys/module/nvidia/version"
PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"
PCI_DEVICES = "/sys/bus/pci/devices"
WSL_SMI = "/usr/lib/wsl/lib/nvidia-smi"

NVIDIA_PCI_VENDOR = "0x10de"

QUERY_FIELDS = ("index", "name", "uuid", "memory.total", "pci.bus_id", "driver_version")
QUERY_ARGS = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")
# Asked for on its own: R470 and older reject the field and would fail the whole query (exit 2).
COMPUTE_CAP_ARGS = ("--query-gpu=compute_cap", "--format=csv,noheader")

# NVML error codes (nvml.h) that decide a status; class names for bindings without ``.value``.
NVML_NO_PERMISSION = 4
NVML_DRIVER_NOT_LOADED = 9
NVML_LIBRARY_NOT_FOUND = 12
NVML_LIB_RM_MISMATCH = 18
NVML_UNKNOWN = 999
_NVML_CLASS_CODES = {
    "NVMLError_Uninitialized": 1,
    "NVMLError_NotSupported": 3,
    "NVMLError_NoPermission": NVML_NO_PERMISSION,
    "NVMLError_DriverNotLoaded": NVML_DRIVER_NOT_LOADED,
    "NVMLError_LibraryNotFound": NVML_LIBRARY_NOT_FOUND,
    "NVMLError_FunctionNotFound": 13,
    "NVMLError_GpuIsLost": 15,
    "NVMLError_LibRmVersionMismatch": NVML_LIB_RM_MISMATCH,
    "NVMLError_Unknown": NVML_UNKNOWN,
}
_NVML_CODE_STATUS = {
    NVML_LIB_RM_MISMATCH: NVIDIA_MISMATCH,
    NVML_UNKNOWN: NVIDIA_CONTAINER_LOST,
    NVML_NO_PERMISSION: NVIDIA_NO_PERMISSION,
}
_COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}

# Failures that name their cause; nothing later in the chain can say more.
_DEFINITIVE = (NVIDIA_MISMATCH, NVIDIA_CONTAINER_LOST, NVIDIA_NO_PERMISSION)

# nvidia-smi failure texts (PROBES.md §2.2), checked in order, case-insensitively.
_SMI_FAILURES = (
    ("driver/library version mismatch", NVIDIA_MISMATCH),
    ("failed to initialize nvml: unknown error", NVIDIA_CONTAINER_LOST),
    ("insufficient permissions", NVIDIA_NO_PERMISSION),
    ("couldn't communicate with the nvidia driver", NVIDIA_NO_DRIVER),
    ("couldn't find libnvidia-ml.so", NVIDIA_NO_DRIVER),
    ("no devices were found", NVIDIA_NO_GPU),
)

_NA_VALUES = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]"}
_VERSION_RE = re.compile(r"^\d+(?:\.\d+)+$")
_DRIVER_LABEL_RE = re.compile(r"(?:Driver|KMD) Version\s*:\s*(\d+(?:\.\d+)+)")
_CUDA_LABEL_RE = re.compile(r"CUDA(?:\s+UMD)?\s+Version\s*:\s*(\d+)\.(\d+)")
_CC_RE = re.compile(r"^\d+\.\d+$")
_DETAIL_LIMIT = 500


# --- pure parsers -----------------------------------------------------------------------------



def parse_smi_banner(text: str) -> tuple[str, str | None] | None:
    """(driver, max CUDA) from plain ``nvidia-smi`` or ``-q`` output, or None without a driver line.

    Knows the classic "Driver Version: X  CUDA Version: Y" labels and the R610+ "KMD Version: X
    CUDA UMD Version: Y" ones; the CUDA part is None when the driver shows "N/A" there.
    """
    driver = _DRIVER_LABEL_RE.search(text)
    if driver is None:
        return None
    cuda = _CUDA_LABEL_RE.search(text)
    return driver.group(1), (f"{int(cuda.group(1))}.{int(cuda.group(2))}" if cuda else None)


def parse_smi_query(csv_text: str, fields: tuple[str, ...] = QUERY_FIELDS) -> list[dict[str, Any]]:
    """Rows of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader[,nounits]`` as dicts.

    ``[N/A]`` / ``[Not Supported]`` become None; ``index`` and ``memory.total`` become ints (a
    "MiB" unit is tolerated). Lines with the wrong number of columns (garbage) are skipped.
    """
    rows = []
    for record in csv.reader(csv_text.splitlines(), skipinitialspace=True):
        if len(record) != len(fields):
            continue
        row: dict[str, Any] = {}
        for name, raw in zip(fields, record, strict=True):
            value: Any = raw.strip()
            if value.lower() in _NA_VALUES:
                value = None
            elif name in ("index", "memory.total"):
                value = _leading_int(value)
            row[name] = value
        if "index" in fields and row["index"] is None:
            continue  # every real row has an index; this one is not a row
        rows.append(row)
    return rows


def parse_compute_caps(text: str) -> list[str | None] | None:
    """``--query-gpu=compute_cap`` output as ["9.0", "8.6", None...], or None when it is not that."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    caps: list[str | None] = []
    for line in lines:
        if line.lower() in _NA_VALUES:
            caps.append(None)
        elif _CC_RE.match(line):
            caps.append(line)
        else:
            return None
    return caps or None


def parse_sys_module_version(text: str) -> str | None:
    """``/sys/module/nvidia/version``: the bare driver version, e.g. "550.144.03"."""
    value = text.strip()
    return value if _VERSION_RE.match(value) else None


def parse_proc_version(text: str) -> str | None:
    """The version on the ``NVRM version:`` line of ``/proc/driver/nvidia/version``.

    Fields are separated by two spaces (as uv parses it), the version is the second:
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  375.74  Wed Jun 14 ..." -> "375.74";
    the open module says "... Open Kernel Module for x86_64  550.144.03  Release Build ...";
    Jetson prints its L4T release there ("35.3.1"), see ``is_l4t_version``.
    """
    for line in text.splitlines():
        if not line.startswith("NVRM version:"):
            continue
        parts = [part.strip() for part in line.split("  ") if part.strip()]
        if len(parts) >= 2 and _VERSION_RE.match(parts[1]):
            return parts[1]
        found = re.search(r"\s(\d+\.\d+(?:\.\d+)?)\s", line + " ")  # odd spacing: first version-like token
        return found.group(1) if found else None
    return None


def is_l4t_version(version: str) -> bool:
    """Jetson's L4T release numbers (32.x, 35.x, 36.x) are not desktop driver branches (>= 100)."""
    major = _leading_int(version)
    return major is not None and major < 100


def classify_smi_failure(text: str) -> tuple[str, str]:
    """(status, detail) for a failed ``nvidia-smi`` run; detail is the message, verbatim."""
    detail = _clip(text)
    lowered = text.lower()
    for needle, status in _SMI_FAILURES:
        if needle in lowered:
            return status, detail
    if not detail:
        return NVIDIA_UNKNOWN, "nvidia-smi printed nothing"
    return NVIDIA_UNKNOWN, f"unrecognised nvidia-smi output: {detail}"


def classify_nvml_error(exc: BaseException) -> tuple[int | None, str]:
    """(NVML error code or None, message) for anything the binding raised."""
    value = getattr(exc, "value", None)
    code = value if isinstance(value, int) and not isinstance(value, bool) else None
    if code is None:
        code = _NVML_CLASS_CODES.get(type(exc).__name__)
    try:
        message = str(exc)  # NVMLError.__str__ may call back into the library
    except Exception:  # the message is best effort
        message = ""
    if isinstance(exc, UnicodeDecodeError) or not message:
        message = f"{type(exc).__name__}: {message}".rstrip(": ")
    return code, message


def normalise_bus_id(bus: str) -> str:
    """PCI address in sysfs form: NVML/nvidia-smi "00000000:01:00.0" -> "0000:01:00.0"."""
    value = bus.strip().lower()
    if value.count(":") == 1:
        return f"0000:{value}"
    domain, _, rest = value.partition(":")
    return f"{domain[-4:].rjust(4, '0')}:{rest}"


def _leading_int(value: str) -> int | None:
    found = re.match(r"\s*(\d+)", value)
    return int(found.group(1)) if found else None


def _clip(text: str) -> str:
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    joined = "\n".join(lines)
    return joined if len(joined) <= _DETAIL_LIMIT else joined[: _DETAIL_LIMIT - 3] + "..."


def _text(value: Any) -> str:
    """NVML strings: bytes from pynvml <= 11.4.1, str from nvidia-ml-py."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


# --- raw sources ------------------------------------------------------------------------------


def read_pci_nvidia_devices(root: str = "/") -> list[str] | None:
    """PCI addresses of NVIDIA display devices (vendor 0x10de, class 0x03xxxx), sorted.

    None when ``/sys/bus/pci/devices`` cannot be listed (not Linux, or a sandbox), so that
    "nothing found" is never mistaken for "could not look".
    """
    base = os.path.join(root, PCI_DEVICES.lstrip("/"))
    if not os.path.isdir(base):
        return None
    found = []
    for vendor_path in glob.glob(os.path.join(base, "*", "vendor")):
        device = os.path.dirname(vendor_path)
        vendor = read_text("/", vendor_path) or ""
        klass = read_text("/", os.path.join(device, "class")) or ""
        if vendor.strip().lower() == NVIDIA_PCI_VENDOR and klass.strip().lower().startswith("0x03"):
            found.append(os.path.basename(device))
    return sorted(found)


def read_kernel_driver_version(root: str = "/") -> tuple[str | None, str, str]:
    """(version or None, source file, note) from /sys/module, then /proc; the note says why not."""
    notes = []
    for path, parser in (
        (SYS_MODULE_VERSION, parse_sys_module_version),
        (PROC_DRIVER_VERSION, parse_proc_version),
    ):
        text = read_text(root, path)
        if text is None:
            notes.append(f"{path} absent")
            continue
        version = parser(text)
        if version:
            return version, path, ""
        notes.append(f"{path} unreadable: {_clip(text)[:80]!r}")
    return None, "", "; ".join(notes)


def find_nvidia_smi(
    root: str = "/", env: Mapping[str, str] | None = None, system: str | None = None
) -> str | None:
    """Where nvidia-smi is: PATH, then WSL's /usr/lib/wsl/lib, then (Windows) the driver folders."""
    env = os.environ if env is None else env
    system = system or _this_system()
    exe = "nvidia-smi.exe" if system == "windows" else "nvidia-smi"
    on_path = shutil.which(exe, path=env.get("PATH", ""))
    if on_path:
        return on_path
    candidates = [os.path.join(root, WSL_SMI.lstrip("/"))]
    if system == "windows":
        # The order torch's collect_env tries: DCH drivers first, then the legacy NVSMI folder.
        if env.get("SystemRoot"):
            candidates.append(os.path.join(env["SystemRoot"], "System32", exe))
        if env.get("ProgramFiles"):
            candidates.append(os.path.join(env["ProgramFiles"], "NVIDIA Corporation", "NVSMI", exe))
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    return None


def _this_system() -> str:
    if sys.platform.startswith("win"):
        return "windows"
    return "darwin" if sys.platform == "darwin" else "linux"


# --- NVML -------------------------------------------------------------------------------------


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
        out.driver = Fact(_text(driver), "nvml") if driver else Fact.unknown(why, "nvml")
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
    gpu.name = _text(name).strip() if name is not None else ""
    cc, why = _call(nvml, "nvmlDeviceGetCudaComputeCapability", handle)
    if isinstance(cc, (tuple, list)) and len(cc) == 2:
        gpu.compute_capability = Fact(f"{int(cc[0])}.{int(cc[1])}", "nvml")
    else:
        gpu.compute_capability = Fact.unknown(why or f"NVML: unexpected compute capability {cc!r}", "nvml")
    memory, _ = _call(nvml, "nvmlDeviceGetMemoryInfo", handle)  # NotSupported on unified-memory GB10
    total = getattr(memory, "total", None)
    gpu.memory_total_mib = int(total) // (1024 * 1024) if isinstance(total, int) else None
    uuid, _ = _call(nvml, "nvmlDeviceGetUUID", handle)
    gpu.uuid = _text(uuid) if uuid else None
    pci, _ = _call(nvml, "nvmlDeviceGetPciInfo", handle)
    bus = getattr(pci, "busId", None)
    gpu.pci_bus_id = normalise_bus_id(_text(bus)) if bus else None
    mig, _ = _call(nvml, "nvmlDeviceGetMigMode", handle)  # NotSupported on GPUs without MIG
    gpu.mig_mode = bool(mig[0] == 1) if isinstance(mig, (tuple, list)) and mig else None
    mode, _ = _call(nvml, "nvmlDeviceGetComputeMode", handle)
    gpu.compute_mode = _COMPUTE_MODES.get(mode) if isinstance(mode, int) else None
    return gpu


# --- nvidia-smi -------------------------------------------------------------------------------


@dataclass
class SmiOutcome:
    status: str | None = None  # NVIDIA_OK, a failure status, or None when nvidia-smi was not found
    detail: str = ""
    driver: str | None = None
    cuda: str | None = None
    gpus: list[Gpu] = field(default_factory=list)
    attempts: list[str] = field(default_factory=list)


def query_smi(exe: str, runner: Any = run, timeout: float = 5.0) -> SmiOutcome:
    """Run nvidia-smi: the banner first; only when it answers, the GPU queries."""
    banner = runner([exe], timeout=timeout)
    out = SmiOutcome()
    if banner.not_found or banner.error:
        out.attempts.append(f"nvidia-smi: {banner.describe()}")
        return out
    if banner.timed_out:
        out.status, out.detail = (
            NVIDIA_UNKNOWN,
            f"nvidia-smi did not answer within {timeout:g}s (a hung driver?)",
        )
        out.attempts.append(f"nvidia-smi: timed out after {timeout:g}s")
        return out
    text = banner.stdout + ("\n" + banner.stderr if banner.stderr else "")
    parsed = parse_smi_banner(text) if banner.ok else None
    if parsed is None:
        out.status, out.detail = classify_smi_failure(text)
        if banner.signal and out.status == NVIDIA_UNKNOWN:
            out.detail = f"{banner.describe()}; {out.detail}"
        out.attempts.append(f"nvidia-smi: {out.detail.splitlines()[0] if out.detail else banner.describe()}")
        return out
    out.status = NVIDIA_OK
    out.driver, out.cuda = parsed
    out.attempts.append("nvidia-smi: ok")
    out.gpus = _smi_gpus(exe, runner, timeout, out.attempts)
    return out


def _smi_gpus(exe: str, runner: Any, timeout: float, attempts: list[str]) -> list[Gpu]:
    result: RunResult = runner([exe, *QUERY_ARGS], timeout=timeout)
    rows = parse_smi_query(result.stdout) if result.ok else []
    if not rows:
        attempts.append(f"nvidia-smi --query-gpu: {_failure_text(result) or 'no GPU rows'}")
        return []
    cc_result: RunResult = runner([exe, *COMPUTE_CAP_ARGS], timeout=timeout)
    caps = parse_compute_caps(cc_result.stdout) if cc_result.ok else None
    cc_why = ""
    if caps is None or len(caps) != len(rows):
        cc_why = f"nvidia-smi --query-gpu=compute_cap: {_failure_text(cc_result) or 'unexpected output'}"
        if "not a valid field" in cc_why:
            cc_why += " (a driver older than ~R510 does not know this field)"
        attempts.append(cc_why)
        caps = [None] * len(rows)
    gpus = []
    for row, cap in zip(rows, caps, strict=True):
        if cap:
            cc = Fact(cap, "nvidia-smi")
        else:
            cc = Fact.unknown(cc_why or "nvidia-smi printed [N/A] for compute_cap", "nvidia-smi")
        bus = row.get("pci.bus_id")
        gpus.append(
            Gpu(
                index=row["index"],
                name=row.get("name") or "",
                compute_capability=cc,
                memory_total_mib=row.get("memory.total"),
                uuid=row.get("uuid"),
                pci_bus_id=normalise_bus_id(bus) if bus else None,
            )
        )
    return gpus


def _failure_text(result: RunResult) -> str:
    if result.timed_out or result.not_found or result.error or result.signal:
        return result.describe()
    text = _clip(result.stdout + "\n" + result.stderr)
    if result.ok:
        return f"unexpected output {text[:120]!r}" if text else ""
    return text.splitlines()[0] if text else result.describe()


# --- the combiner -----------------------------------------------------------------------------


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
    system = system or _this_system()
    result = Nvidia()
    pci = read_pci_nvidia_devices(root) if system == "linux" else None
    result.pci_devices = pci or []
    wsl = read_wsl_marker(root) if system == "linux" else None

    if nvml is False:  # TORCHDOCTOR_NVML=0: skip NVML (a hung driver, or a test seam)
        nv = NvmlOutcome(message="disabled (TORCHDOCTOR_NVML=0)")
    elif nvml is None:
        nvml, why = load_pynvml()
        nv = NvmlOutcome(message=why) if nvml is None else query_nvml(nvml, timeout)
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
        result.driver_version = Fact(smi.driver, "nvidia-smi")
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
    """The status when neither NVML nor nvidia-smi listed a GPU, most specific cause first."""
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
            f"({reasons}): user-space driver libraries missing, e.g. a container started without the NVIDIA runtime"
        )
    if pci:
        return (
            NVIDIA_NO_DRIVER,
            smi.detail
            if smi.status == NVIDIA_NO_DRIVER
            else f"{reasons}; NVIDIA device(s) on PCI: {', '.join(pci)}",
        )
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
    """The escape hatch (like uv's UV_CUDA_DRIVER_VERSION): forced values replace detected ones."""
    driver = (env.get(ENV_DRIVER) or "").strip()
    if driver:
        result.driver_version = Fact(driver, f"env:{ENV_DRIVER}")
        result.attempts.append(f"env: {ENV_DRIVER}={driver}")
    cuda = (env.get(ENV_CUDA) or "").strip()
    if cuda:
        if cuda.isdigit() and int(cuda) >= 1000:
            cuda = cuda_from_int(int(cuda))  # accept NVML's integer form too: 12080 -> "12.8"
        result.cuda_driver_version = Fact(cuda, f"env:{ENV_CUDA}")
        result.attempts.append(f"env: {ENV_CUDA}={cuda}")
