"""Raw source: running ``nvidia-smi`` (through the runner: argv, a timeout, never raises) and turning
its answers into an outcome with the parsers. The banner first; only when it answers, the GPU
queries, with ``compute_cap`` asked on its own.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from doctor.model.snapshot import NVIDIA_OK, NVIDIA_UNKNOWN, Fact, Gpu
from doctor.probes.nvidia.parsers import (
    QUERY_FIELDS,
    classify_smi_failure,
    clip,
    normalise_bus_id,
    parse_compute_caps,
    parse_smi_banner,
    parse_smi_query,
)
from doctor.runner import RunResult, run

WSL_SMI = "/usr/lib/wsl/lib/nvidia-smi"

QUERY_ARGS = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")
# Asked for on its own: R470 and older reject the field and would fail the whole query (exit 2).
COMPUTE_CAP_ARGS = ("--query-gpu=compute_cap", "--format=csv,noheader")


def find_nvidia_smi(
    root: str = "/", env: Mapping[str, str] | None = None, system: str | None = None
) -> str | None:
    """Where nvidia-smi is: PATH, then WSL's /usr/lib/wsl/lib, then (Windows) the driver folders."""
    env = os.environ if env is None else env
    system = system or this_system()
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


def this_system() -> str:
    if sys.platform.startswith("win"):
        return "windows"
    return "darwin" if sys.platform == "darwin" else "linux"


@dataclass(slots=True)
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
    if banner.overflowed:  # a flood is not nvidia-smi's answer (and is not worth parsing)
        out.status, out.detail = NVIDIA_UNKNOWN, f"{banner.describe()}: that is not nvidia-smi's output"
        out.attempts.append(f"nvidia-smi: {banner.describe()}")
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
    text = clip(result.stdout + "\n" + result.stderr)
    if result.ok:
        return f"unexpected output {text[:120]!r}" if text else ""
    return text.splitlines()[0] if text else result.describe()
