"""The JSON report: one versioned document holding the snapshot, the findings and the fix plan.

It is what `check --json` prints and what `check --from FILE` reads back on another machine.
"""

from __future__ import annotations

from typing import Any

from doctor import __version__
from doctor.model.findings import (
    CHECK_STATES,
    CRASHED,
    ERROR,
    INFO,
    WARNING,
    CheckResult,
    Finding,
    as_report_dict,
)
from doctor.model.snapshot import Snapshot

REPORT_SCHEMA_VERSION = 1  # major: bump only on an incompatible change; readers refuse other majors


def build_report(
    snapshot: Snapshot,
    table_meta: dict[str, Any],
    findings: list[Finding],
    checks: list[CheckResult],
    plan: dict[str, Any],
    exit_code: int,
    strict: bool = False,
) -> dict[str, Any]:
    return {
        "report_schema_version": REPORT_SCHEMA_VERSION,
        "tool": {"name": "torchdoctor", "version": __version__},
        "table": table_meta,  # {"version", "verified_on", "path"}
        "snapshot": snapshot.to_dict(),
        "checks": [as_report_dict(c) for c in checks],
        "findings": [as_report_dict(f) for f in findings],
        "plan": plan,
        "summary": {
            "errors": sum(f.severity == ERROR for f in findings),
            "warnings": sum(f.severity == WARNING for f in findings),
            "infos": sum(f.severity == INFO for f in findings),
            "exit_code": exit_code,
            "strict": strict,  # warnings failed the run too
            # how many checks passed, failed, were skipped (did not apply) or unknown (a fact was missing)
            "checks": {state: sum(c.status == state for c in checks) for state in CHECK_STATES if
                       state != CRASHED or any(c.status == CRASHED for c in checks)},
        },
    }
