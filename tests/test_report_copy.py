"""A report holds copies of its findings' evidence (doctor/model/findings.py, ``_copied``: deepcopy without
its machinery). Over the findings of the mutated reports (tests/mutated_reports.py), the copy must be what
copy.deepcopy gives: equal, messages still messages with their template and parameters, and nothing shared
with the finding."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from mutated_reports import mutate

from doctor.app.diagnose import diagnose
from doctor.inputs.reports import read_report
from doctor.model.findings import _copied, as_report_dict
from doctor.model.i18n import Msg
from doctor.table.load import load_table

ROOT = Path(__file__).resolve().parents[1]


def same(a, b) -> bool:
    """Equal, of the same types all the way down, messages with the same template and parameters."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Msg):
        return (
            str(a) == str(b)
            and a.template == b.template
            and a.structural == b.structural
            and same(a.params, b.params)
        )
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def shared(a, b) -> bool:
    """Whether a container of ``a`` is the very object in ``b`` (a copy must share none)."""
    if isinstance(a, (dict, list)) and a is b:
        return True
    if isinstance(a, dict):
        return any(shared(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return any(shared(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Msg):
        return a.params is b.params or shared(a.params, b.params)
    return False


def test_report_copies_are_what_deepcopy_gives():
    table = load_table()
    base = json.loads((ROOT / "tests" / "golden" / "rtx5090-cu126.json").read_text())
    seen = 0
    for i in range(0, 400, 7):
        snap, _ = read_report(json.dumps(mutate(base, i)), f"r{i}.json")
        diag = diagnose(snap, table)
        for item in [*diag.findings, *diag.checks]:
            for name, value in as_report_dict(item).items():
                original = getattr(item, name)
                if isinstance(original, (dict, list, Msg)):
                    assert same(value, copy.deepcopy(original))
                    assert not shared(value, original)
                    seen += 1
    assert seen > 100


def test_other_values_still_go_through_deepcopy():
    odd = {"t": (1, [2]), "s": {3}, "n": [None, 1.5, True, Msg("x {y}", y=[1])]}
    assert same(_copied(odd), copy.deepcopy(odd))
    assert not shared(_copied(odd), odd)
