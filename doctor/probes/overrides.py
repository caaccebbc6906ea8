"""The escape hatches users set in the environment (and tests use as seams), read and checked in one place.

An override that cannot mean anything (``TORCHDOCTOR_DRIVER_VERSION=abc``, ``TORCHDOCTOR_NVIDIA_TIMEOUT=-1``
or ``nan``) is a usage error: ``read_overrides`` raises ``BadOverride`` with one line naming the variable,
and the app turns it into exit 2 before anything is probed. A forced value is never shown as if a probe
had read it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from doctor.model.files import bounded_float
from doctor.model.versions import cuda_from_int

ENV_DRIVER = "TORCHDOCTOR_DRIVER_VERSION"  # the driver version, e.g. 570.124.04 (Windows: 572.16)
ENV_CUDA = "TORCHDOCTOR_CUDA_DRIVER_VERSION"  # the driver's maximum CUDA, 12.8 or NVML's 12080
ENV_NVIDIA_TIMEOUT = "TORCHDOCTOR_NVIDIA_TIMEOUT"  # seconds NVML and each nvidia-smi run may take
ENV_NVML = "TORCHDOCTOR_NVML"  # 0: do not ask NVML (a hung driver, or a test)
ENV_SYSROOT = "TORCHDOCTOR_SYSROOT"  # where /proc and /sys are read from

DEFAULT_NVIDIA_TIMEOUT = 5.0
MAX_NVIDIA_TIMEOUT = 600.0
_DRIVER = re.compile(r"^\d{1,4}(?:\.\d{1,6}){1,3}$")
_CUDA = re.compile(r"^\d{1,3}\.\d{1,3}(?:\.\d{1,4})?$")
_CUDA_INT = re.compile(r"^\d{4,6}$")


class BadOverride(ValueError):
    """``str()`` is the one line to show (it names the variable and the accepted form)."""


@dataclass(frozen=True, slots=True)
class Overrides:
    driver: str | None = None
    cuda: str | None = None
    nvidia_timeout: float = DEFAULT_NVIDIA_TIMEOUT
    nvml: bool = True
    sysroot: str = "/"


def read_overrides(env: Mapping[str, str]) -> Overrides:
    """The overrides ``env`` sets; raises BadOverride for one that cannot mean anything."""
    driver = (env.get(ENV_DRIVER) or "").strip() or None
    if driver is not None and not _DRIVER.match(driver):
        raise BadOverride(f"{ENV_DRIVER}={_shown(driver)}: not a driver version (like 570.124.04 or 572.16)")
    cuda = (env.get(ENV_CUDA) or "").strip() or None
    if cuda is not None:
        if _CUDA_INT.match(cuda):
            cuda = cuda_from_int(int(cuda))  # NVML's integer form: 12080 -> "12.8"
        elif not _CUDA.match(cuda):
            raise BadOverride(f"{ENV_CUDA}={_shown(cuda)}: not a CUDA version (like 12.8 or 12080)")
    timeout = DEFAULT_NVIDIA_TIMEOUT
    raw = (env.get(ENV_NVIDIA_TIMEOUT) or "").strip()
    if raw:
        value = bounded_float(raw, 0.0, MAX_NVIDIA_TIMEOUT)
        if value is None:
            raise BadOverride(
                f"{ENV_NVIDIA_TIMEOUT}={_shown(raw)}: give a number of seconds above 0 and at most "
                f"{MAX_NVIDIA_TIMEOUT:g}"
            )
        timeout = value
    return Overrides(
        driver=driver,
        cuda=cuda,
        nvidia_timeout=timeout,
        nvml=env.get(ENV_NVML, "1") != "0",
        sysroot=env.get(ENV_SYSROOT) or "/",
    )


def _shown(value: str) -> str:
    """The value as the message shows it: escaped, and cut when long."""
    text = value if len(value) <= 40 else value[:37] + "..."
    return ascii(text)
