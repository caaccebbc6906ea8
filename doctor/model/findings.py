"""Findings: what the rules conclude. Plain data with a stable id; rules return them, never print."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)


@dataclass
class Fix:
    summary: str = ""  # one sentence: what to do
    commands: list[str] = field(default_factory=list)  # exact, copy-pasteable, one per line
    links: list[str] = field(default_factory=list)


@dataclass
class Finding:
    id: str  # stable kebab-case, e.g. "gpu-arch-unsupported"
    severity: str  # ERROR, WARNING or INFO
    title: str  # one line
    detail: str = ""  # why, in a few sentences
    evidence: dict[str, Any] = field(default_factory=dict)  # the facts the conclusion rests on
    fix: Fix | None = None
    unverified: list[str] = field(default_factory=list)  # table rows marked unverified that it rests on
    rule: str = ""  # the rule that produced it (filled by the engine)


@dataclass
class CheckResult:
    """One rule's outcome, for the ✓ / ! / ✗ summary: passed, failed (findings) or skipped."""

    rule: str
    summary: str
    status: str  # "passed", "failed", "skipped", "crashed"
    note: str = ""
