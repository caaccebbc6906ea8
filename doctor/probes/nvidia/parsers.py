"""Pure parsers of what the NVIDIA sources print: nvidia-smi screens and queries, the kernel
module's version files, NVML's errors. No I/O: each is tested on the recorded outputs in
tests/fixtures/nvidia/ (a new recording there is a new test).
"""

from __future__ import annotations

import re
from typing import Any

from doctor.model.snapshot import (
    NVIDIA_CONTAINER_LOST,
    NVIDIA_MISMATCH,
    NVIDIA_NO_DRIVER,
    NVIDIA_NO_GPU,
    NVIDIA_NO_PERMISSION,
    NVIDIA_UNKNOWN,
)

# The columns torchdoctor asks ``nvidia-smi --query-gpu`` for (smi.py builds the argv from these).
QUERY_FIELDS = ("index", "name", "uuid", "memory.total", "pci.bus_id", "driver_version")

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

# nvidia-smi failure texts as users' reports quote them (NVIDIA/nvidia-container-toolkit#48,
# microsoft/WSL#11888), checked in order, case-insensitively.
_SMI_FAILURES = (
    ("driver/library version mismatch", NVIDIA_MISMATCH),
    ("failed to initialize nvml: unknown error", NVIDIA_CONTAINER_LOST),
    ("insufficient permissions", NVIDIA_NO_PERMISSION),
    ("couldn't communicate with the nvidia driver", NVIDIA_NO_DRIVER),
    ("couldn't find libnvidia-ml.so", NVIDIA_NO_DRIVER),
    ("no devices were found", NVIDIA_NO_GPU),
)

_NA_VALUES = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]"}
# Version parts are bounded: a 5,000-digit "driver version" is garbage, and int() refuses 4,300+ digits.
_VERSION_RE = re.compile(r"^\d{1,6}(?:\.\d{1,6})+$")
_DRIVER_LABEL_RE = re.compile(r"(?:Driver|KMD) Version\s*:\s*(\d+(?:\.\d+)+)")
_CUDA_LABEL_RE = re.compile(r"CUDA(?:\s+UMD)?\s+Version\s*:\s*(\d{1,3})\.(\d{1,3})(?!\d)")
_CC_RE = re.compile(r"^\d{1,3}\.\d{1,3}$")
_DETAIL_LIMIT = 500


def parse_smi_banner(text: str) -> tuple[str | None, str | None] | None:
    """(driver, max CUDA) from plain ``nvidia-smi`` or ``-q`` output, or None without a driver line.

    Knows the classic "Driver Version: X  CUDA Version: Y" labels and the R610+ "KMD Version: X
    CUDA UMD Version: Y" ones; the CUDA part is None when the driver shows "N/A" there, the driver part
    when its number is not a version (a part of more than 6 digits).
    """
    driver = _DRIVER_LABEL_RE.search(text)
    if driver is None:
        return None
    cuda = _CUDA_LABEL_RE.search(text)
    version = driver.group(1) if _VERSION_RE.match(driver.group(1)) else None
    return version, (f"{int(cuda.group(1))}.{int(cuda.group(2))}" if cuda else None)


def parse_smi_query(csv_text: str, fields: tuple[str, ...] = QUERY_FIELDS) -> list[dict[str, Any]]:
    """Rows of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader[,nounits]`` as dicts.

    ``[N/A]`` / ``[Not Supported]`` become None; ``index`` and ``memory.total`` become ints (a
    "MiB" unit is tolerated). Lines with the wrong number of columns (garbage) are skipped.
    """
    rows = []
    # NUL bytes are garbage here; Python 3.10's csv raises on them ("line contains NUL"), 3.11+ does not
    import csv  # only where nvidia-smi printed a query (a machine with a driver)

    for record in csv.reader(csv_text.replace("\x00", "").splitlines(), skipinitialspace=True):
        if len(record) != len(fields):
            continue
        row: dict[str, Any] = {}
        for name, raw in zip(fields, record, strict=True):
            value: Any = raw.strip()
            if value.lower() in _NA_VALUES:
                value = None
            elif name in ("index", "memory.total"):
                value = leading_int(value)
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
        # odd spacing: first version-like token
        found = re.search(r"\s(\d{1,6}\.\d{1,6}(?:\.\d{1,6})?)\s", line + " ")
        return found.group(1) if found else None
    return None


def is_l4t_version(version: str) -> bool:
    """Jetson's L4T release numbers (32.x, 35.x, 36.x) are not desktop driver branches (>= 100)."""
    major = leading_int(version)
    return major is not None and major < 100


def classify_smi_failure(text: str) -> tuple[str, str]:
    """(status, detail) for a failed ``nvidia-smi`` run; detail is the message, verbatim."""
    detail = clip(text)
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
    try:
        message = str(exc)  # NVMLError.__str__ may call back into the library
    except Exception:  # the message is best effort
        message = ""
    return classify_nvml_failure(type(exc).__name__, value, message, isinstance(exc, UnicodeDecodeError))


def classify_nvml_failure(
    type_name: str, value: Any, message: str, unicode: bool = False
) -> tuple[int | None, str]:
    """The same from an exception's parts (NVML asked in a child sends them as data)."""
    code = value if isinstance(value, int) and not isinstance(value, bool) else None
    if code is None:
        code = _NVML_CLASS_CODES.get(type_name)
    if unicode or not message:
        message = f"{type_name}: {message}".rstrip(": ")
    return code, message


def normalise_bus_id(bus: str) -> str:
    """PCI address in sysfs form: NVML/nvidia-smi "00000000:01:00.0" -> "0000:01:00.0"."""
    value = bus.strip().lower()
    if value.count(":") == 1:
        return f"0000:{value}"
    domain, _, rest = value.partition(":")
    return f"{domain[-4:].rjust(4, '0')}:{rest}"


def leading_int(value: str) -> int | None:
    found = re.match(r"\s*(\d{1,18})(?!\d)", value)
    return int(found.group(1)) if found else None


def clip(text: str) -> str:
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    joined = "\n".join(lines)
    return joined if len(joined) <= _DETAIL_LIMIT else joined[: _DETAIL_LIMIT - 3] + "..."


def nvml_text(value: Any) -> str:
    """NVML strings: bytes from pynvml <= 11.4.1, str from nvidia-ml-py."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)
