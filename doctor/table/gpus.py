"""GPU product names as NVML prints them, normalised for lookup (gpus.json naming_notes): vendor and
brand prefixes first, then form-factor and memory suffixes."""

from __future__ import annotations

import re

from doctor.table.rows import GpuModel

_NAME_PREFIX_RE = re.compile(r"^(nvidia|tesla|geforce)\s+")
_NAME_SUFFIX_RE = re.compile(
    r"(\s+laptop gpu|\s+with max-q "
    r"design|\s+mig\s.*|[\s-]+(sxm\d*|pcie|pci-e|fhhl|nvl|ac|hbm\d*e?|\d+\s?gb?))$"
)


def normalise_gpu_name(name: str) -> str:
    """Case-insensitive, single spaces, without leading "NVIDIA ", "Tesla ", "GeForce " (in any order)."""
    text = " ".join((name or "").split()).lower()
    while True:
        stripped = _NAME_PREFIX_RE.sub("", text, count=1)
        if stripped == text:
            return text
        text = stripped


def strip_gpu_suffixes(light: str) -> str:
    """Drop memory/form-factor tokens: "a100-sxm4-80gb" -> "a100", "h100 80gb hbm3" -> "h100"."""
    text = light
    while True:
        stripped = _NAME_SUFFIX_RE.sub("", text)
        if stripped == text or not stripped:
            return text
        text = stripped


def gpu_indexes(models: tuple[GpuModel, ...], aliases: dict[str, str]):
    by_name = {m.name: m for m in models}
    exact: dict[str, GpuModel] = {}
    for model in models:
        exact.setdefault(normalise_gpu_name(model.name), model)
    for alias, name in aliases.items():
        exact.setdefault(normalise_gpu_name(alias), by_name[name])
    # A stem shared by models of different compute capability is ambiguous and left out.
    loose: dict[str, GpuModel] = {}
    ambiguous: set[str] = set()
    for key, model in exact.items():
        stem = strip_gpu_suffixes(key)
        other = loose.get(stem)
        if other is not None and other.compute_capability != model.compute_capability:
            ambiguous.add(stem)
        loose.setdefault(stem, model)
    for stem in ambiguous:
        del loose[stem]
    return exact, loose
