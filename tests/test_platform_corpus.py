"""Score `check --from` on the corpus of real platform reports (issues 28 and 29).

tests/fixtures/corpus_platforms/index.json lists collect_env texts taken from public issue threads (pasted,
or composed from the facts a thread states) with the finding and fix the thread resolved. Each entry without
``needs_sysroot`` is re-diagnosed through the real CLI, ``python -m doctor check --from FILE --json``, and
scored: right when the expected severity's finding is reported (or, for a healthy case, no error at all) and,
when ``command_contains`` is set, some command of the plan or the findings contains it. Entries marked
``needs_sysroot`` carry facts collect_env cannot hold; tests/test_platform_corpus_machines.py scores those
on fake machines, with the same ``score()`` and ``tally()``.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pytest
from test_e2e_check import run_cli

CORPUS = Path(__file__).parent / "fixtures" / "corpus_platforms"
ENTRIES = json.loads((CORPUS / "index.json").read_text(encoding="utf-8"))
SCORED = [e for e in ENTRIES if not e.get("needs_sysroot")]

# The share of scored entries diagnosed right today (40 of 41: issue 28's 22 of 22, issue 29's 18 of 19),
# rounded down.
CURRENT_FLOOR = 0.97

# One CLI subprocess per scored entry: 16-19 s on an idle machine, more when it is shared.
pytestmark = pytest.mark.slow


def _commands(report: dict) -> list[str]:
    """Every command string the report offers: plan steps and findings' own fixes, at any depth."""
    found: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("command", "commands", "fix") and isinstance(value, str):
                    found.append(value)
                elif key == "commands" and isinstance(value, list):
                    found.extend(v for v in value if isinstance(v, str))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(report.get("plan") or {})
    walk(report.get("findings") or [])
    return found


def score(entry: dict, report: dict) -> tuple[bool, str]:
    """(right, one line saying what was seen) for one entry and the report `check --from` gave for it."""
    expected = entry["expected"]
    findings = report.get("findings") or []
    errors = [f["id"] for f in findings if f.get("severity") == "error"]
    if expected["severity"] == "healthy":
        return not errors, f"errors={errors}"
    ids = {f["id"] for f in findings if f.get("severity") == expected["severity"]}
    right = expected["finding"] in ids
    want = expected.get("command_contains")
    if right and want:
        right = any(want in command for command in _commands(report))
    return right, f"{expected['severity']}={sorted(ids)}"


def _run(entry: dict) -> dict:
    res = run_cli(["check", "--from", str(CORPUS / entry["file"]), "--json"])
    assert res.stdout.strip(), f"{entry['file']}: no JSON (rc {res.returncode}): {res.stderr[-400:]}"
    return json.loads(res.stdout)


def test_index_is_well_formed():
    names = {p.name for p in CORPUS.glob("*.txt")}
    assert {e["file"] for e in ENTRIES} == names
    for issue in (28, 29):
        entries = [e for e in ENTRIES if e["issue"] == issue]
        assert len(entries) >= 40, issue
        # every fifth entry of an issue is held out, in index order
        want = ["holdout" if i % 5 == 4 else "dev" for i in range(len(entries))]
        assert [e["split"] for e in entries] == want
    for entry in ENTRIES:
        assert (CORPUS / (entry["file"] + ".source")).is_file(), entry["file"]
        assert entry["source"].startswith("https://github.com/"), entry["file"]
        assert entry["expected"]["severity"] in ("error", "warning", "healthy"), entry["file"]
        assert (entry["expected"]["finding"] is None) == (entry["expected"]["severity"] == "healthy")
        assert entry["why"].strip() and "\n" not in entry["why"]


def tally(results: list[tuple[dict, bool, str]]) -> dict[tuple[str, str], list[int]]:
    """Print the score per issue and split (and the misses) of (entry, right, seen) results; return it."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    misses = []
    for entry, right, seen in results:
        for key in ((f"issue {entry['issue']}", "all"), (f"issue {entry['issue']}", entry["split"]),
                    ("all", entry["split"]), ("all", "all")):
            counts[key][0] += right
            counts[key][1] += 1
        if not right:
            misses.append(f"  {entry['file']}: want {entry['expected']}, got {seen}")
    for (group, split), (right, total) in sorted(counts.items()):
        print(f"{group:9} {split:8} {right}/{total} = {right / total:.2f}")
    print("missed:\n" + "\n".join(misses))
    return counts


def test_corpus_score_does_not_drop():
    counts = tally([(entry, *score(entry, _run(entry))) for entry in SCORED])
    right, total = counts[("all", "all")]
    measured = right / total
    assert math.floor(measured * 100) / 100 >= CURRENT_FLOOR, f"corpus score {measured:.3f} < {CURRENT_FLOOR}"
