"""Can a build compiled for these SM architectures run on a GPU of this compute capability? (pure)

CUDA runs a cubin (SASS) for ``sm_XY`` on any GPU of the same major whose minor is not below Y; it
JIT-compiles embedded PTX (``compute_XY``) for any GPU at or above XY. Arch-specific cubins (``sm_90a``) run
on exactly that capability; family cubins (``sm_100f``, CUDA 12.9+) on the later capabilities of the same
major (10.0 and 10.3), like plain ones. PTX follows the same suffix rules: plain PTX JIT-compiles forward to
any later GPU, ``compute_90a`` only for 9.0, ``compute_100f`` only within 10.x. Integrated Tegra parts (5.3,
6.2, 7.2, 8.7) cannot run the discrete-GPU cubins of the same major (torch's DEVICE_REQUIREMENT table), except
that builds with CUDA 13.2 or later run sm_70/sm_80/sm_86 cubins on Xavier and Orin too (torch 2.14's
DEVICE_REQUIREMENT_POST_JETSON_SBSA_UNIFICATION). Thor's sm_101 was renamed sm_110: those two capabilities run
each other's cubins and nothing else does.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_ARCH_RE = re.compile(r"^(sm|compute)_(\d+)([af]?)$")
_TEGRA = {(5, 3), (6, 2), (7, 2), (8, 7)}
_THOR = {(10, 1), (11, 0)}
_UNIFIED_CODES = {(7, 0), (8, 0), (8, 6)}  # dGPU cubins Xavier/Orin run from CUDA 13.2 on
_UNIFIED_DEVICES = {(7, 2), (8, 7)}


@dataclass(frozen=True, slots=True)
class ArchVerdict:
    supported: bool
    via: str  # "sm_86 cubin", "compute_90 PTX (JIT, slow first start)", "" when unsupported


@functools.lru_cache(maxsize=1024)  # a handful of distinct strings, parsed ~350 times per report
def parse_arch(arch: str) -> tuple[str, tuple[int, int], str] | None:
    """'sm_90a' -> ('sm', (9, 0), 'a'); 'compute_120' -> ('compute', (12, 0), '')."""
    m = _ARCH_RE.match(arch.strip())
    if not m:
        return None
    number = int(m.group(2))
    return m.group(1), (number // 10, number % 10), m.group(3)


def arch_supports(
    cc: tuple[int, int], sm: list[str] | tuple[str, ...], ptx=(), cuda: str | None = None
) -> ArchVerdict:
    """``cuda``: the build's CUDA version ("13.2"), which decides the Jetson rule; None when unknown."""
    return _arch_supports(tuple(cc), tuple(sm), tuple(ptx or ()), _unified(cuda))


def _unified(cuda: str | None) -> bool:
    parts = (cuda or "").split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= (13, 2)
    except (ValueError, IndexError):
        return False


@functools.lru_cache(maxsize=4096)  # pure; wheel choice asks the same (cc, arch list) for every variant
def _arch_supports(
    cc: tuple[int, int], sm: tuple[str, ...], ptx: tuple[str, ...], unified: bool
) -> ArchVerdict:
    for arch in sm:
        parsed = parse_arch(arch)
        if not parsed or parsed[0] != "sm":
            continue
        _, code, suffix = parsed
        if code in _THOR or cc in _THOR:
            if code in _THOR and cc in _THOR:
                return ArchVerdict(True, f"{arch} cubin")
            continue
        if suffix == "a" or cc in _TEGRA or code in _TEGRA:
            if code == cc:
                return ArchVerdict(True, f"{arch} cubin")
            if (unified and not suffix and cc in _UNIFIED_DEVICES and code in _UNIFIED_CODES
                    and code[0] == cc[0] and code[1] <= cc[1]):
                return ArchVerdict(True, f"{arch} cubin (CUDA 13.2+ runs it on Jetson)")
            continue
        if code[0] == cc[0] and code[1] <= cc[1]:
            return ArchVerdict(True, f"{arch} cubin")
    for arch in list(ptx) + [a for a in sm if a.startswith("compute_")]:
        parsed = parse_arch(arch)
        if not parsed or parsed[0] != "compute":
            continue
        _, code, suffix = parsed
        # Plain PTX JIT-compiles for any later GPU; "a" PTX only for exactly its capability, "f" PTX only
        # within its family (same major, minor not below).
        fits = (
            code == cc
            if suffix == "a"
            else (code[0] == cc[0] and code[1] <= cc[1])
            if suffix == "f"
            else code <= cc
        )
        if fits:
            return ArchVerdict(True, f"{arch} PTX (JIT-compiled at first use: slow first start)")
    return ArchVerdict(False, "")


def format_cc(cc: tuple[int, int]) -> str:
    return f"{cc[0]}.{cc[1]}"


def sm_name(cc: tuple[int, int]) -> str:
    return f"sm_{cc[0]}{cc[1]}"
