"""After the steps: the diagnosis before against the one after. The fix worked when the findings
the plan addressed are gone; new findings are reported, not hidden."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Outcome:
    gone: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)
    appeared: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)  # addressed by the plan, still there
    torch_now: str | None = None  # the torch build after the fix, when there is one


def compare(before, after, addresses: list[str]) -> Outcome:
    """``before``/``after``: the diagnoses; ``addresses``: the finding ids the plan meant to resolve."""
    old_ids = {f.id for f in before.findings}
    new_ids = {f.id for f in after.findings}
    torch = after.snapshot.install.torch
    return Outcome(
        gone=sorted(old_ids - new_ids),
        remaining=sorted(old_ids & new_ids),
        appeared=sorted(new_ids - old_ids),
        unresolved=sorted(set(addresses) & new_ids),
        torch_now=(torch.build_version or torch.version) if torch is not None else None,
    )
