"""Snapshot + table (+ stated requirements) -> findings, checks and fix plan (pure). Used by `check`,
`fix`, `report` and `--from`."""

from __future__ import annotations

from dataclasses import dataclass

from doctor.compat.assessment import Assessment, assess
from doctor.model.findings import CheckResult, Finding
from doctor.model.requirements import Requirements
from doctor.model.snapshot import Fact, Requested, Snapshot
from doctor.plan.commands import Commands
from doctor.plan.plan import Plan, attach_commands, build_plan, commands_for


@dataclass(slots=True)
class Diagnosis:
    snapshot: Snapshot
    findings: list[Finding]
    checks: list[CheckResult]
    plan: Plan
    # how this run wrote every command (installer, source, shell): the plan's and the fix's
    commands: Commands
    strict: bool = False  # warnings fail the run too (--strict or the config's strict)
    facts: Assessment | None = None  # what the rules and the plan were given (explain judges by it too)


def enrich(snap: Snapshot, table) -> None:
    """Fill facts nothing reported from the table: GPU capability by name, driver's max CUDA by branch."""
    for gpu in snap.nvidia.gpus:
        if not gpu.compute_capability.known and gpu.name:
            model = table.gpu(gpu.name)
            if model is not None:
                gpu.compute_capability = Fact(model.compute_capability, f"table: {model.name}", None)
    nv = snap.nvidia
    if not nv.cuda_driver_version.known and nv.driver_version.known:
        branch = table.max_cuda_for_driver(str(nv.driver_version.value))
        if branch is not None:
            nv.cuda_driver_version = Fact(branch.max_cuda, f"table: driver branch R{branch.branch}", None)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """When the smoke test saw a problem for itself, its finding replaces the static one with the same id:
    the static rules work from the table, the smoke test from what the device really did."""
    runtime_ids = {f.id for f in findings if f.evidence.get("source") == "smoke-test"}
    return [f for f in findings if f.evidence.get("source") == "smoke-test" or f.id not in runtime_ids]


def diagnose(snap: Snapshot, table, rules=None, commands: Commands | None = None,
             requirements: Requirements | None = None, requested: Requested | None = None) -> Diagnosis:
    """``commands``: how this run writes commands (installer, mirror, shell); default pip from the PyTorch
    index. ``requirements``: checked by the requirements rule when they state anything; their ``ignore``
    ids are dropped before the plan is made, so an ignored finding asks for no change. ``requested``: what the
    user asked of this run (the torch to end with, whether the driver may change); it replaces what a report
    read back recorded."""
    from doctor.rules import all_rules, run_rules

    if requested is not None:
        snap.requested = requested

    rules = list(all_rules() if rules is None else rules)
    if requirements is not None and not requirements.empty:
        from doctor.model.requirements import gpu_wanted_by
        from doctor.rules.requirements import requirements_rule

        rules.append(requirements_rule(requirements))
        # What the user stated reaches the rules as a fact: the container rule's severity depends on it.
        snap.gpu_wanted = list(dict.fromkeys(snap.gpu_wanted + gpu_wanted_by(requirements)))
    enrich(snap, table)
    facts = assess(snap, table)  # what the rules and the plan derive from the snapshot, worked out once
    findings, checks = run_rules(facts, rules)
    findings = _dedupe(findings)
    if requirements is not None and requirements.ignore:
        findings = [f for f in findings if f.id not in set(requirements.ignore)]
    commands = commands or commands_for(snap)
    plan = build_plan(facts, findings, commands)
    # Findings are written after the plan: a finding that reinstalls torch names the plan's exact builds.
    commands.fill(findings, (tuple(plan.pins), plan.pins_variant))
    attach_commands(findings, plan)
    return Diagnosis(
        snap, findings, checks, plan, commands, bool(requirements and requirements.strict), facts
    )
