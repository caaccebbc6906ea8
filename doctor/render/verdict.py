"""The verdict of a report in words, shared by every format: the headline that agrees with the exit code,
the checks by state, and the line under the plan. Pure: the report dict in, strings out.
"""

from __future__ import annotations

from typing import Any

from doctor.model.i18n import N_, Msg, join, localize

STATES = ("passed", "failed", "skipped", "unknown", "crashed")
REQUIREMENTS_RULE = "requirements"  # doctor.model.requirements.RULE
INTERNAL_ERROR_ID = "internal-rule-error"  # doctor.rules.INTERNAL_ERROR_ID


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


# Counted words, said in the run's language: (one, many).
COUNTED = {
    "check": (N_("{n} check"), N_("{n} checks")),
    "error": (N_("{n} error"), N_("{n} errors")),
    "warning": (N_("{n} warning"), N_("{n} warnings")),
    "note": (N_("{n} note"), N_("{n} notes")),
    "requirement": (N_("{n} requirement"), N_("{n} requirements")),
}
STATE_COUNTS = {"passed": N_("{n} passed"), "failed": N_("{n} failed"), "skipped": N_("{n} skipped"),
                "unknown": N_("{n} unknown"), "crashed": N_("{n} crashed")}


def counted(n: int, word: str) -> Msg:
    """A count and its word: "1 error", "2 errors" (and their translations)."""
    one, many = COUNTED[word]
    return Msg(one if n == 1 else many, n=n)


def exit_code(report: dict) -> int | None:
    code = _obj(report.get("summary")).get("exit_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def check_counts(report: dict) -> dict[str, int]:
    """Checks per state, in STATES order (states with none left out)."""
    counts = {state: 0 for state in STATES}
    for check in _list(report.get("checks")):
        status = _obj(check).get("status")
        if isinstance(status, str) and status in counts:
            counts[status] += 1
    return {state: n for state, n in counts.items() if n}


def checks_text(report: dict) -> str:
    """ "14 checks: 10 passed, 1 failed, 2 skipped, 1 unknown" (empty when the report lists none)."""
    counts = check_counts(report)
    if not counts:
        return ""
    total = sum(counts.values())
    states = join(", ", [Msg(STATE_COUNTS[state], n=n) for state, n in counts.items()])
    return localize(Msg("{checks}: {states}", checks=counted(total, "check"), states=states))


def headline(report: dict) -> str:
    """What the run concluded, in the exit code's terms: "no problems found", "2 errors, 1 note",
    "3 requirements not met", "internal error in rule X"."""
    findings = [_obj(f) for f in _list(report.get("findings"))]
    summary = _obj(report.get("summary"))
    code = exit_code(report)
    crashed = [str(_obj(f.get("evidence")).get("rule") or "?") for f in findings if f.get("id") == INTERNAL_ERROR_ID]
    unmet = [f for f in findings if f.get("rule") == REQUIREMENTS_RULE]
    others = [f for f in findings if f.get("id") != INTERNAL_ERROR_ID and f.get("rule") != REQUIREMENTS_RULE]
    counts = {sev: sum(1 for f in others if f.get("severity") == sev) for sev in ("error", "warning", "info")}
    words = [counted(counts["error"], "error"), counted(counts["warning"], "warning"), counted(counts["info"], "note")]
    words = [w for w, n in zip(words, counts.values(), strict=True) if n]
    parts = []
    if crashed:
        parts.append(Msg("internal error in rule {rules}: the verdict is incomplete", rules=", ".join(crashed)))
    if unmet:
        parts.append(Msg("{requirements} not met", requirements=counted(len(unmet), "requirement")))
    if words:
        strict = bool(summary.get("strict"))
        if not counts["error"] and counts["warning"] and strict and code == 1:
            words[0] = Msg("{warnings} (failing under --strict)", warnings=words[0])
        parts.append(join(", ", words))
    if not parts:
        return localize(Msg("no problems found"))
    if code == 0 and not counts["error"]:
        return localize(Msg("no errors: {parts}", parts=join("; ", parts)))
    return localize(join("; ", parts))


def verdict_line(report: dict) -> str:
    """The one summary line: the headline, the checks by state, and the exit code it agrees with."""
    parts = [headline(report)]
    checks = checks_text(report)
    if checks:
        parts.append(checks)
    code = exit_code(report)
    if code is not None:
        parts.append(localize(Msg("exit {code}", code=code)))
    return " · ".join(parts)


def plan_line(report: dict) -> str | None:
    """The line in place of a plan when the plan has no step: None when the plan has steps (or none at all)."""
    plan = _obj(report.get("plan"))
    status = plan.get("status")
    code = exit_code(report)
    if code == 3 and not plan.get("steps"):
        return localize(Msg("Fix: a rule crashed, so this machine was not fully checked; report it and check again."))
    findings = [_obj(f) for f in _list(report.get("findings"))]
    errors = [f for f in findings if f.get("severity") == "error"]
    if code == 4 and not plan.get("steps") and all(f.get("rule") == REQUIREMENTS_RULE for f in errors):
        return localize(Msg("Fix: nothing to install: this machine does not meet the requirements above."))
    if status != "healthy":
        return None
    if code in (0, None):
        return localize(Msg("Fix: nothing to change."))
    return localize(Msg("Fix: no install command fixes this: follow each finding's fix above."))
