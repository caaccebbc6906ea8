"""Rank 0's distributed report: every rank's result, the findings and an exit code, as a plain dict.

Built inside the target interpreter (Python 3.8+, stdlib only) and written as JSON or text; the
torchdoctor CLI reads it back and renders it (doctor/render/distributed.py). Its shape is
``distributed_schema_version``; a change there is a change of that number.
"""

from __future__ import annotations

from dataclasses import asdict

from doctor import __version__, exitcodes
from doctor.distributed.analysis import analyze, slowest_rank
from doctor.model.findings import ERROR, INFO, WARNING
from doctor.plan.commands import Commands

DISTRIBUTED_SCHEMA_VERSION = 1


def build_report(
    ranks: list[dict],
    world_size: int,
    backend: str,
    launcher: str,
    master: str,
    timeout_s: float,
    seams: dict[str, str] | None = None,
    note: str = "",
    commands: Commands | None = None,
) -> dict:
    """Rank 0's report: every rank's result, the findings, and an exit code.

    ``commands`` writes the install hints (default: ``python`` and the PyTorch index)."""
    ranks = sorted(ranks, key=lambda e: e["rank"])
    findings = analyze(ranks, master, commands)
    errors = sum(f.severity == ERROR for f in findings)
    exit_code = exitcodes.FINDINGS if errors else exitcodes.OK
    rank0 = next((e for e in ranks if e["rank"] == 0), {})
    report = {
        "distributed_schema_version": DISTRIBUTED_SCHEMA_VERSION,
        "tool": {"name": "torchdoctor", "version": __version__},
        "world_size": world_size,
        "backend": backend,
        "launcher": launcher,
        "master": master,
        "timeout_s": timeout_s,
        "status": "failed" if errors else "ok",
        "note": note,
        "ranks": ranks,
        "missing_ranks": [e["rank"] for e in ranks if e.get("status") == "missing"],
        "bandwidth": rank0.get("bandwidth") or [],
        "slowest_rank": slowest_rank(ranks),
        "topology": {e.get("node") or str(e["rank"]): e["topology"] for e in ranks if e.get("topology")},
        "findings": [asdict(f) for f in findings],
        "summary": {
            "errors": errors,
            "warnings": sum(f.severity == WARNING for f in findings),
            "infos": sum(f.severity == INFO for f in findings),
            "exit_code": exit_code,
        },
    }
    if seams:
        report["test_seams"] = dict(seams)  # never let a staged failure pass for a real one
    return report


def missing_entry(rank: int, published: dict) -> dict:
    """A rank that sent no result: what it published in the store (hello, progress, error)."""
    hello = published.get("hello") or {}
    error = published.get("error")
    return {
        "rank": rank,
        "node": hello.get("hostname"),
        "local_rank": None,
        "status": "failed" if error else "missing",
        "snapshot": hello,
        "progress": published.get("stage"),
        "steps": [],
        "bandwidth": [],
        "topology": None,
        "error": error,
        "seconds": None,
    }
