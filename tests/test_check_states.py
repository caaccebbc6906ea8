"""Four states for every check, everywhere: passed, failed, skipped (with why) and unknown (with why).
A check that did not run is never shown as passed; a crashed rule fails the run (exit 3); the summary line
agrees with the exit code. Through the real CLI, in text, JSON, Markdown, GitHub and JUnit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from fakeenv import make_fake_env

REPO = Path(__file__).resolve().parents[1]
COLLECT_ENV = Path(__file__).parent / "fixtures" / "collect_env" / "composed-2.5.1-cu121-rtx4090-pip.txt"


def run_cli(args, env_extra=None, cwd=None, prelude=""):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0", NO_COLOR="1", COLUMNS="200", **(env_extra or {}))
    code = prelude + "import sys\nfrom doctor.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


@pytest.fixture
def cpu_machine(tmp_path):
    sysroot = tmp_path / "sysroot"
    sysroot.mkdir()
    python = make_fake_env(tmp_path / "venv", torch="2.13.0+cpu", cuda=None)
    return python, {"TORCHDOCTOR_SYSROOT": str(sysroot)}


def states(report: dict) -> dict[str, tuple[str, str]]:
    return {c["rule"]: (c["status"], c["note"]) for c in report["checks"]}


def test_no_smoke_marks_the_runtime_check_skipped_in_every_format(cpu_machine, tmp_path):
    python, env = cpu_machine
    base = ["check", "--no-smoke", "--python", str(python)]

    report = json.loads(run_cli([*base, "--json"], env).stdout)
    status, note = states(report)["runtime"]
    assert status == "skipped" and "--no-smoke" in note
    assert report["summary"]["checks"]["skipped"] >= 1 and "passed" in report["summary"]["checks"]

    res = run_cli([*base, "--format", "junit"], env)
    assert res.returncode == 0, res.stderr
    root = ET.fromstring(res.stdout.encode())
    case = next(c for c in root.iter("testcase") if c.get("name") == "runtime")
    skipped = case.find("skipped")
    assert skipped is not None and skipped.get("type") == "skipped" and "--no-smoke" in skipped.get("message")
    assert int(root.get("skipped")) >= 1 and root.find("testsuite").get("skipped") == root.get("skipped")
    # every check is a testcase, and each skipped or unknown one says so
    assert int(root.get("skipped")) == sum(
        report["summary"]["checks"].get(s, 0) for s in ("skipped", "unknown")
    )

    text = run_cli([*base, "-v"], env).stdout
    assert "✓ torch imports and the device computes correctly" not in text
    assert (
        "- torch imports and the device computes correctly  (skipped: --no-smoke: torch was not imported)"
        in text
    )

    markdown = run_cli([*base, "--format", "markdown"], env).stdout
    assert "**Checks**:" in markdown
    assert (
        "| skipped | torch imports and the device computes correctly | --no-smoke: torch was not imported |"
        in markdown
    )

    github = run_cli([*base, "--format", "github"], env).stdout
    notice = next(line for line in github.splitlines() if line.startswith("::notice title=torchdoctor "
        "checks::"))
    assert "skipped: torch imports and the device computes correctly (--no-smoke" in notice


def test_not_wsl_is_skipped_not_passed(cpu_machine):
    python, env = cpu_machine
    report = json.loads(run_cli(["check", "--no-smoke", "--json", "--python", str(python)], env).stdout)
    assert states(report)["wsl"] == ("skipped", "not WSL")
    text = run_cli(["check", "--no-smoke", "-v", "--python", str(python)], env).stdout
    assert "✓ WSL2 uses the Windows driver's libraries" not in text
    assert "- WSL2 uses the Windows driver's libraries  (skipped: not WSL)" in text


def test_a_collect_env_paste_does_not_pass_what_it_does_not_contain():
    res = run_cli(["check", "--from", str(COLLECT_ENV), "--json"])
    found = states(json.loads(res.stdout))
    for rule in ("shm", "cpu-quota", "containers", "memory", "wsl"):
        status, note = found[rule]
        assert status == "skipped" and "this collect_env text does not state" in note, (rule, found[rule])
    # collect_env imports torch but computes nothing: the device is not known to work
    assert found["runtime"][0] == "unknown" and "no smoke test" in found["runtime"][1]
    text = run_cli(["check", "--from", str(COLLECT_ENV), "-v"]).stdout
    for summary in ("/dev/shm is large enough", "the CPU quota matches", "a container that should have a "
        "GPU"):
        assert f"✓ {summary}" not in text and f"- {summary}" in text


def test_unknown_is_said_when_a_fact_is_missing(cpu_machine):
    # the sysroot has no /dev/shm: its size is not known, so that check is unknown, with the probe's reason
    python, env = cpu_machine
    report = json.loads(run_cli(["check", "--no-smoke", "--json", "--python", str(python)], env).stdout)
    status, note = states(report)["shm"]
    assert status == "unknown" and "statvfs(/dev/shm) failed" in note
    text = run_cli(["check", "--no-smoke", "--python", str(python)], env).stdout
    assert "? /dev/shm is large enough for DataLoader workers  (unknown: " in text  # shown even without -v


def test_a_crashing_rule_is_exit_3_naming_it(cpu_machine):
    python, env = cpu_machine
    prelude = ("import doctor.rules.hazards.resources as r\n"
               "def boom(facts):\n    raise KeyError('planted')\n"
               "import doctor.rules.registry as reg\n"
               "reg.RULES[:] = [type(x)(x.id, x.summary, boom, x.ids) if x.id == 'shm' else x\n"
               "                for x in reg.RULES]\n")
    res = run_cli(["check", "--no-smoke", "--json", "--python", str(python)], env, prelude=prelude)
    assert res.returncode == 3, res.stderr
    assert "internal error in rule shm" in res.stderr and "please report it" in res.stderr
    report = json.loads(res.stdout)  # the rest of the report is still there
    assert states(report)["shm"][0] == "crashed" and report["summary"]["exit_code"] == 3
    assert "internal-rule-error" in {f["id"] for f in report["findings"]}
    text = run_cli(["check", "--no-smoke", "--python", str(python)], env, prelude=prelude)
    assert text.returncode == 3 and "internal error in rule shm" in text.stdout and "exit 3" in text.stdout
    assert "Fix: nothing to change." not in text.stdout


def test_the_summary_agrees_with_the_exit_code(cpu_machine):
    python, env = cpu_machine
    res = run_cli(["check", "--no-smoke", "--python", str(python), "--require", "cuda", "--min-gpus", "2",
                   "--min-gpu-memory", "40GB", "--torch", ">=2.14"], env)
    assert res.returncode == 4
    assert "4 requirements not met" in res.stdout and "exit 4" in res.stdout
    assert "Fix: nothing to change." not in res.stdout
    healthy = run_cli(["check", "--no-smoke", "--python", str(python)], env)
    assert healthy.returncode == 0
    assert "no problems found" in healthy.stdout and "exit 0" in healthy.stdout
    assert "Fix: nothing to change." in healthy.stdout
