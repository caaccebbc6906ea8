"""Raw source: running the ROCm tools through the runner (argv, a time limit, never raises) and parsing what
they print. ``rocminfo`` first; ``amd-smi static --asic --bus`` and then ``rocm-smi --showproductname`` only
while a GPU still lacks a name or a processor (amd-smi is a Python program: a second or more to start).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from shutil import which
from typing import Any

from doctor.probes.amd.parsers import (
    ToolAnswer,
    parse_amd_smi_static,
    parse_rocm_smi_productname,
    parse_rocminfo,
)
from doctor.runner import run

# name, argv after the program, parser
TOOLS = (
    ("rocminfo", (), parse_rocminfo),
    ("amd-smi", ("static", "--asic", "--bus"), parse_amd_smi_static),
    ("rocm-smi", ("--showproductname",), parse_rocm_smi_productname),
)


def find_tool(name: str, root: str = "/", env: Mapping[str, str] | None = None) -> str | None:
    """``name`` on PATH, else in ROCm's bin folder ($ROCM_PATH/bin, /opt/rocm/bin)."""
    env = os.environ if env is None else env
    found = which(name, path=env.get("PATH", ""))
    if found:
        return found
    rocm = env.get("ROCM_PATH") or "/opt/rocm"
    candidate = os.path.join(root, rocm.lstrip("/"), "bin", name)
    return candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None


def ask_tool(name: str, exe: str, args, parser, runner: Any = run,
             timeout: float = 5.0) -> tuple[ToolAnswer, str]:
    """(what the tool said, one attempts line)."""
    result = runner([exe, *args], timeout=timeout)
    if result.not_found or result.error or result.timed_out or result.overflowed or result.signal:
        why = result.describe()
        return ToolAnswer(failure=why), f"{name}: {why}"
    answer = parser(result.stdout + ("\n" + result.stderr if result.stderr else ""))
    if answer.gpus:
        return answer, f"{name}: ok, {len(answer.gpus)} GPU{'s' if len(answer.gpus) != 1 else ''}"
    status = f" (exit {result.returncode})" if result.returncode else ""
    return answer, f"{name}: {answer.failure}{status}"
