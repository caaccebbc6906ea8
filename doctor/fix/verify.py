"""After the steps: the diagnosis before against the one after. The fix worked when the findings
the plan addressed are gone; new findings are reported, not hidden. torch gone, or a new error finding, is
a failed fix (rolled back by doctor/fix/run.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.model.findings import ERROR


@dataclass
class Outcome:
    gone: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)
    appeared: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)  # addressed by the plan, still there
    torch_now: str | None = None  # the torch build after the fix, when there is one
    torch_gone: bool = False  # torch was there before (or the plan installs it) and is not now
    new_errors: list[str] = field(default_factory=list)  # error findings that were not there before

    @property
    def broken(self) -> bool:
        """The fix made things worse: a failed fix, rolled back."""
        return self.torch_gone or bool(self.new_errors)


def compare(before, after, addresses: list[str]) -> Outcome:
    """``before``/``after``: the diagnoses; ``addresses``: the finding ids the plan meant to resolve."""
    old_ids = {f.id for f in before.findings}
    new_ids = {f.id for f in after.findings}
    torch = after.snapshot.install.torch
    had_torch = before.snapshot.install.torch is not None or any(
        p.partition("==")[0] == "torch" for p in getattr(before.plan, "pins", None) or [])
    return Outcome(
        gone=sorted(old_ids - new_ids),
        remaining=sorted(old_ids & new_ids),
        appeared=sorted(new_ids - old_ids),
        unresolved=sorted(set(addresses) & new_ids),
        torch_now=(torch.build_version or torch.version) if torch is not None else None,
        torch_gone=had_torch and torch is None,
        new_errors=sorted({f.id for f in after.findings if f.severity == ERROR} - old_ids),
    )
