"""How versions, build tags and package names are spelled: one pure parser for each (stdlib only).

Every layer reads "2.7.1+cu128", "cu130", "12040" or "nvidia_cuda_runtime_cu12" the same way:
the table when it indexes its rows, the probes when they read metadata, the rules and the plan.
Nothing here raises on odd input: a string that does not parse gives None.
"""

from __future__ import annotations

import functools
import re

# A local version tag that names a PyTorch wheel index: "+cpu", "+cu128", "+rocm6.3", "+rocm6.2.4", "+xpu".
VARIANT_RE = re.compile(r"^(cpu|xpu|cu\d{3}|rocm\d+\.\d+(?:\.\d+)?)$")
_CUDA_VARIANT_RE = re.compile(r"^cu(\d+)(\d)$")
_LEADING_MINOR_RE = re.compile(r"^\s*v?(\d+)\.(\d+)")
_NAME_SEPARATORS = re.compile(r"[-_.]+")
_MAX_DIGITS = 40  # a version part longer than this is not a version (and int() of 5,000 digits is refused)


def split_local(version: str | None) -> tuple[str, str | None]:
    """"2.6.0+cu126" -> ("2.6.0", "cu126"); "2.14.1" -> ("2.14.1", None)."""
    base, _, local = (version or "").partition("+")
    return base, (local or None)


def index_variant(local: str | None) -> str | None:
    """The local tag when it names a wheel index ("cu126", "cpu", "rocm6.3", "xpu"), else None ("git1234")."""
    return local if local and VARIANT_RE.match(local) else None


def variant_of(version: str | None) -> str | None:
    """The index variant of a full version: "2.7.1+cu128" -> "cu128"; None without such a tag."""
    return index_variant(split_local(version)[1])


def variant_to_cuda(variant: str | None) -> str | None:
    """"cu128" -> "12.8", "cu118" -> "11.8", "cu130" -> "13.0"; None for other variants."""
    match = _CUDA_VARIANT_RE.match(variant or "")
    return f"{int(match.group(1))}.{match.group(2)}" if match else None


def cuda_to_variant(cuda: str | None) -> str | None:
    """"12.6" -> "cu126", "12.6.3" -> "cu126"; None when it is not major.minor."""
    parts = (cuda or "").split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return f"cu{int(parts[0])}{int(parts[1])}"


def cuda_from_tag(version: str | None) -> str | None:
    """The CUDA version a local tag names: "0.21.0+cu124" -> "12.4"; None without a cuNNN tag."""
    return variant_to_cuda(split_local(version)[1])


def cuda_from_int(value: int) -> str:
    """CUDA's version integer (NVML, cudaDriverGetVersion) as major.minor: 12040 -> "12.4"."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """"570.124.04" -> (570, 124, 4); "12.8" -> (12, 8); "2.7.1+cu128" -> (2, 7, 1); None when it does not
    parse."""
    if not version:
        return None
    parts = re.findall(r"\d+", str(version).split("+")[0])
    if not parts or any(len(p) > _MAX_DIGITS for p in parts):
        return None
    return tuple(int(p) for p in parts)


@functools.lru_cache(maxsize=4096)  # pure, and asked the same few versions thousands of times
def major_minor(version: str | None) -> tuple[int, int] | None:
    """"2.7.1+cu128" -> (2, 7), also "v2.7" and "2.8.0a0+git1234"; None without a major.minor."""
    match = _LEADING_MINOR_RE.match(version or "")
    if not match or len(match.group(1)) > _MAX_DIGITS or len(match.group(2)) > _MAX_DIGITS:
        return None
    return int(match.group(1)), int(match.group(2))


def minor_key(version: str | None) -> str | None:
    """"2.7.1+cu128" -> "2.7"; None when there is no major.minor."""
    mm = major_minor(version)
    return f"{mm[0]}.{mm[1]}" if mm else None


def parse_cc(value: object) -> tuple[int, int] | None:
    """A compute capability "8.6" (or "9") -> (8, 6); None when it does not parse."""
    if not value:
        return None
    major, _, minor = str(value).partition(".")
    if len(major) > _MAX_DIGITS or len(minor) > _MAX_DIGITS:
        return None
    try:
        return int(major), int(minor or 0)
    except ValueError:
        return None


def normalize_name(name: object) -> str:
    """A distribution name as PEP 503 compares them: "Nvidia_CUDA.runtime" -> "nvidia-cuda-runtime"."""
    return _NAME_SEPARATORS.sub("-", str(name or "")).lower()
