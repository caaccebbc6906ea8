"""`torchdoctor rules`: every rule and the finding ids it can report, from the registry itself, and the
ids `--ignore` accepts (the same list: a typo is a usage error naming the close matches)."""

from __future__ import annotations

import difflib
from pathlib import Path

from doctor.errors import DoctorError
from doctor.model.i18n import Msg, localize


def listed_rules() -> list[dict]:
    """Every rule as data: the registry's, then the one CI requirements add to a run."""
    from doctor.model.requirements import REQUIREMENT_IDS
    from doctor.model.requirements import RULE as REQUIREMENTS_RULE
    from doctor.rules import all_rules

    rules = [{"id": r.id, "summary": r.summary, "ids": list(r.ids)} for r in all_rules()]
    rules.append({"id": REQUIREMENTS_RULE, "summary": Msg("the machine meets the stated requirements (only "
        "with "
                                                          "--require, --min-gpus, ... or "
                                                          "[tool.torchdoctor])"),
                  "ids": list(REQUIREMENT_IDS)})
    return rules


def ignorable_ids() -> list[str]:
    """What --ignore (and ``ignore`` in [tool.torchdoctor]) accepts: every finding id and rule id."""
    ids: dict[str, None] = {}
    for rule in listed_rules():
        ids.setdefault(rule["id"], None)
        ids.update(dict.fromkeys(rule["ids"]))
    return list(ids)


def check_ignored(ids: list[str], where: str) -> None:
    """A finding id nothing can report is a typo: exit 2, with the close matches and where to look."""
    if not ids:
        return
    known = ignorable_ids()
    for finding_id in ids:
        if finding_id in known:
            continue
        close = difflib.get_close_matches(finding_id, known, n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise DoctorError(f"{where} {finding_id}: no finding has this id ({hint}`torchdoctor rules` lists "
            "them)")


def rules_text() -> str:
    lines = []
    for rule in listed_rules():
        lines.append(f"{rule['id']}: {localize(rule['summary'])}")
        lines += [f"    {finding_id}" for finding_id in rule["ids"]]
    return "\n".join(lines) + "\n"


def run_rules_listing(fmt: str = "text", output: Path | None = None) -> int:
    import json

    from doctor.app.options import CheckOptions
    from doctor.app.output import deliver

    if fmt not in ("text", "json"):
        raise DoctorError(f"--format {fmt}: rules are listed as text or json")
    text = json.dumps({"rules": listed_rules()}, indent=2) + "\n" if fmt == "json" else rules_text()
    deliver(text, CheckOptions(output=output))
    return 0
