"""``Fact``: one value with where it came from, or why it is unknown.

Its own module so that every model module can hold facts (doctor/model/snapshot.py, doctor/model/amd.py)
without importing the snapshot; ``doctor.model.snapshot`` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Fact:
    """One value with where it came from, or why it is unknown."""

    value: Any = None
    source: str = ""  # e.g. "nvml", "nvidia-smi", "/proc/driver/nvidia/version", "table", "user"
    why: str | None = None  # set when value is None: "nvidia-smi not found", "NVML: Driver Not Loaded", ...

    @property
    def known(self) -> bool:
        return self.value is not None

    @classmethod
    def unknown(cls, why: str, source: str = "") -> Fact:
        return cls(value=None, source=source, why=why)
