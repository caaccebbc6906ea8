"""The rules engine: pure functions of (snapshot, table) that return findings.

Every rule is registered in ``RULES`` with a stable id and a one-line summary, so that
``torchdoctor rules``, the README and the checks shown in ``check`` come from one place.
A rule that raises becomes an ``internal-rule-error`` finding; it never hides the others.
Importing this package must not pull in subprocess, pynvml, psutil or torch (a test holds that).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from doctor.model.findings import WARNING, CheckResult, Finding
from doctor.model.snapshot import Snapshot

RuleFunc = Callable[..., list[Finding]]  # (snapshot, table) -> findings


@dataclass(frozen=True)
class Rule:
    id: str  # the rule's id; its findings may use this id or more specific ones
    summary: str  # shown as the ✓ line when the rule finds nothing
    func: RuleFunc
    ids: tuple[str, ...] = ()  # every finding id this rule can emit (documentation, --ignore)


def all_rules() -> list[Rule]:
    """Every rule, in the order they run: the explicit list in doctor/rules/registry.py."""
    from doctor.rules.registry import RULES  # the rule modules import Rule from here

    return list(RULES)


def run_rules(snapshot: Snapshot, table, rules: list[Rule] | None = None) -> tuple[list[Finding], list[CheckResult]]:
    findings: list[Finding] = []
    checks: list[CheckResult] = []
    for rule in rules if rules is not None else all_rules():
        try:
            produced = list(rule.func(snapshot, table) or [])
        except Exception as exc:  # noqa: BLE001 - one broken rule must not hide the others
            produced = [
                Finding(
                    id="internal-rule-error",
                    severity=WARNING,
                    title=f"internal error in rule {rule.id}; please report it",
                    detail=f"{type(exc).__name__}: {exc}",
                    evidence={"rule": rule.id},
                )
            ]
            checks.append(CheckResult(rule.id, rule.summary, "crashed", str(exc)))
        else:
            checks.append(CheckResult(rule.id, rule.summary, "failed" if produced else "passed"))
        for finding in produced:
            finding.rule = finding.rule or rule.id
        findings.extend(produced)
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: order.get(f.severity, 3))
    return findings, checks
