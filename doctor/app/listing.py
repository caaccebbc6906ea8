"""`torchdoctor rules`: every rule and the finding ids it can report, from the registry itself."""

from __future__ import annotations


def rules_text() -> str:
    from doctor.rules import all_rules

    lines = []
    for rule in all_rules():
        lines.append(f"{rule.id}: {rule.summary}")
        lines += [f"    {finding_id}" for finding_id in rule.ids]
    return "\n".join(lines) + "\n"
