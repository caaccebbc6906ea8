"""The rules engine: pure functions of one machine's assessment (the snapshot, the table and what is derived
from them once: doctor/compat/assessment.py) that return findings.

Every rule is registered in ``RULES`` with a stable id and a one-line summary, so that
``torchdoctor rules``, the README and the checks shown in ``check`` come from one place.

A rule returns its findings (a list). A rule that cannot judge says so instead of passing:
``return skipped("--no-smoke: torch was not imported")`` when it does not apply here, and
``return unknown("the size of /dev/shm could not be read")`` when a fact it needs is missing. Both
are lists too (empty, or with findings for ``unknown``), so a caller that only wants findings reads
them as it always did. A check that did not run is never reported as passed.

A rule that raises is torchdoctor's bug: it becomes an ``internal-rule-error`` finding naming the rule
and a ``crashed`` check, the other rules still run, and the run exits 3 (doctor/app/run.py).
Importing this package must not pull in subprocess, pynvml, psutil or torch (a test holds that).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from doctor.model.findings import (
    CRASHED,
    ERROR,
    FAILED,
    INTERNAL_ERROR_ID,
    PASSED,
    SKIPPED,
    UNKNOWN,
    WARNING,
    CheckResult,
    Finding,
)
from doctor.model.i18n import Msg, join
from doctor.model.snapshot import NVIDIA_NO_GPU, NVIDIA_OK, NVIDIA_UNKNOWN, Snapshot

if TYPE_CHECKING:  # annotations only: the engine runs what it is handed, it derives nothing
    from doctor.compat.assessment import Assessment

RuleFunc = Callable[..., list[Finding]]  # (assessment) -> findings (or an Outcome)
UNINSPECTED = Msg("the target interpreter could not be inspected")


@dataclass(frozen=True, slots=True)
class Rule:
    id: str  # the rule's id; its findings may use this id or more specific ones
    summary: str  # shown as the ✓ line when the rule finds nothing
    func: RuleFunc
    ids: tuple[str, ...] = ()  # every finding id this rule can emit (documentation, --ignore)


class Outcome(list):
    """A rule's findings together with a state other than passed/failed, and why.

    ``status`` is SKIPPED (the rule does not apply to this machine or this input) or UNKNOWN (it applies
    but a fact it needs is missing); ``note`` is the reason a user reads ("not WSL", "--no-smoke: torch
    was not imported", "collect_env does not report /dev/shm")."""

    def __init__(self, findings: Iterable[Finding] = (), status: str = UNKNOWN, note: str = "") -> None:
        super().__init__(findings)
        self.status = status
        self.note = note


def skipped(why: str) -> Outcome:
    """The rule does not apply here; ``why`` says what made it not apply."""
    return Outcome((), SKIPPED, why)


def unknown(why: str, findings: Iterable[Finding] = ()) -> Outcome:
    """The rule applies but cannot tell: ``why`` names the missing fact (and why it is missing)."""
    return Outcome(findings, UNKNOWN, why)


_ORIGINS = {"collect_env": Msg("collect_env text"), "report": Msg("report"), "probe": Msg("probe")}


def origin_name(snapshot: Snapshot) -> str:
    """What the snapshot was read from, for a reason: "collect_env text", "report", "probe"."""
    return _ORIGINS.get(snapshot.origin, snapshot.origin or "snapshot")


def not_observed(snapshot: Snapshot, what: str, why: str | None = None) -> Outcome:
    """A rule's answer when the facts it reads are absent: skipped for a re-diagnosed text or report that
    never held them ("/dev/shm is not in a collect_env text"), unknown when this machine was probed and
    they could not be read (``why``: the probe's reason)."""
    if snapshot.origin in ("collect_env", "report") and not why:
        return skipped(Msg("this {origin} does not state {what}", origin=origin_name(snapshot), what=what))
    return unknown(Msg("{what} could not be read: {why}", what=what, why=why) if why else
                   Msg("{what} could not be read", what=what))


def without_torch(snapshot: Snapshot) -> Outcome:
    """A torch rule's answer when there is no installed build to judge: skipped when torch is not
    installed (torch-not-installed says so), unknown when the install could not be read."""
    install = snapshot.install
    if install.status == "absent":
        return skipped(Msg("torch is not installed"))
    if snapshot.interpreter.error:  # interpreter-unusable says what it printed
        return unknown(UNINSPECTED)
    why = install.detail or Msg("the installed torch could not be read")
    if snapshot.origin in ("collect_env", "report") and install.status == "unknown":
        return skipped(Msg("no torch build in this {origin}", origin=origin_name(snapshot)))
    return unknown(why)


def no_gpu(snapshot: Snapshot) -> Outcome:
    """A GPU rule's answer without a working NVIDIA GPU: skipped, or unknown when nobody could tell."""
    nv = snapshot.nvidia
    if nv.status == NVIDIA_UNKNOWN:
        return unknown(Msg("whether this machine has a working NVIDIA GPU is not known"))
    if nv.status in (NVIDIA_NO_GPU, NVIDIA_OK):
        return skipped(Msg("no NVIDIA GPU"))
    return skipped(Msg("the NVIDIA driver is not usable ({status}): the driver check explains it",
                       status=nv.status))


def gpu_list(snapshot: Snapshot) -> str:
    """The NVIDIA GPUs for a finding's text: "GPU 0 NVIDIA H100 (CC 9.0), GPU 1 ..."."""
    parts = []
    for g in snapshot.nvidia.gpus:
        cc = g.compute_capability.value
        parts.append(Msg("GPU {index} {name} (CC {cc})", index=g.index, name=g.name, cc=cc) if cc else
                     Msg("GPU {index} {name}", index=g.index, name=g.name))
    return join(", ", parts) or Msg("none listed")


def all_rules() -> list[Rule]:
    """Every rule, in the order they run: the explicit list in doctor/rules/registry.py."""
    from doctor.rules.registry import RULES  # the rule modules import Rule from here

    return list(RULES)


def known_ids(rules: Iterable[Rule] | None = None) -> list[str]:
    """Every finding id a rule can report (what --ignore accepts), rule ids included, in rule order."""
    ids: dict[str, None] = {}
    for rule in all_rules() if rules is None else rules:
        ids.setdefault(rule.id, None)
        for finding_id in rule.ids:
            ids.setdefault(finding_id, None)
    return list(ids)


def run_rules(facts: Assessment, rules: list[Rule] | None = None) -> tuple[list[Finding], list[CheckResult]]:
    findings: list[Finding] = []
    checks: list[CheckResult] = []
    for rule in rules if rules is not None else all_rules():
        try:
            result = rule.func(facts)
            produced = list(result or [])
        except Exception as exc:  # noqa: BLE001 - one broken rule must not hide the others
            findings.append(_crash_finding(rule, exc))
            checks.append(CheckResult(rule.id, rule.summary, CRASHED, f"{type(exc).__name__}: {exc}"))
            continue
        status = getattr(result, "status", None)
        note = getattr(result, "note", "") or ""
        if status not in (SKIPPED, UNKNOWN) or (status == SKIPPED and produced):
            # A check fails on an error or a warning; notes alone leave it passed (they are said beside it).
            failing = [f for f in produced if f.severity in (ERROR, WARNING)]
            status = FAILED if failing else PASSED
            note = "" if failing or not produced else Msg("noted: "
                "{ids}", ids=", ".join(dict.fromkeys(f.id for f in produced)))
        checks.append(CheckResult(rule.id, rule.summary, status, note))
        for finding in produced:
            finding.rule = finding.rule or rule.id
        findings.extend(produced)
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: order.get(f.severity, 3))
    return findings, checks


def _crash_finding(rule: Rule, exc: BaseException) -> Finding:
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = (
        f"{frames[-1].filename.replace(chr(92), '/').rsplit('/', 1)[-1]}:{frames[-1].lineno}"
        if frames
        else "?"
    )
    return Finding(
        id=INTERNAL_ERROR_ID,
        severity=ERROR,
        title=Msg("internal error in rule {rule}: torchdoctor could not check this; please report "
            "it", rule=rule.id),
        detail=Msg("{exception}: {message} (at {where}). This is a bug in torchdoctor, not a finding about "
                   "this machine; the other checks "
                   "ran.", exception=type(exc).__name__, message=str(exc), where=where),
        evidence={"rule": rule.id, "exception": type(exc).__name__, "at": where},
    )
