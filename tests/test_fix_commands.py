"""Every command `fix` shows or runs is written once, by doctor/plan/commands.py, with fix's installer
and source: the plan is not rebuilt after the diagnosis, the findings and the plan share one
``Commands``, and no module under doctor/fix assembles an installer argv of its own."""

from __future__ import annotations

import ast
import io
import json
import re
from pathlib import Path

import pytest
from test_fix_unit import PY, FakeInstaller, Tty, cpu_snapshot, fake_machine, opts

from doctor.app.diagnose import diagnose
from doctor.app.options import CheckOptions, source_from_options
from doctor.app.output import emit
from doctor.app.run import exit_code_for, make_report
from doctor.fix.run import FixCommands, FixOptions, Machine, run_fix
from doctor.model.environment import Conda, CondaRecord, PythonFacts
from doctor.table.load import load_table

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "doctor" / "fix"
# Words that only an installer command line has: where one stands alone in a string, an argv is being built.
ARGV_WORDS = {
    "pip", "-m", "install", "uninstall", "-r", "-y", "--python", "--index-url", "--extra-index-url",
    "--find-links", "--no-index", "--force-reinstall", "--reinstall", "--no-deps", "--dry-run", "--report",
}
COMMAND_LINE = re.compile(r"\bpip (install|uninstall)\b|-m pip\b")
MIRROR = "https://mirror.example/pytorch/whl"


@pytest.fixture(scope="module")
def table():
    return load_table()


def hand_built(source: str) -> list[str]:
    """The installer argv pieces and command lines a module writes itself (the line and the text of each)."""
    tree = ast.parse(source)
    docs = {
        id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)):
            words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            found += [f"{node.lineno}: {w!r} in a list" for w in words if w in ARGV_WORDS]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if COMMAND_LINE.search(node.value):
                found.append(f"{node.lineno}: {node.value!r}")
            # A word moved out of its list (``M = "-m"; argv = [python, M]``) is still that word
            # ("install" alone is also the plan's step kind).
            elif node.value in ARGV_WORDS - {"install"}:
                found.append(f"{node.lineno}: {node.value!r}")
    return sorted(set(found))


def test_no_module_under_fix_builds_an_installer_command():
    modules = sorted(FIX.rglob("*.py"))
    assert {p.name for p in modules} >= {"run.py", "consent.py", "preview.py", "restore.py", "project.py"}
    wrong = {str(p.relative_to(REPO)): hits for p in modules if (hits := hand_built(p.read_text()))}
    assert not wrong, "build these in doctor/plan/commands.py:\n" + json.dumps(wrong, indent=1)


@pytest.mark.parametrize("source", [
    'argv = [python, "-m", "pip", "install", *pins]',
    'argv = install[:4] + ["--dry-run", "--report", path]',
    'force = ["--force-reinstall", "--no-deps"]',
    'line = f"{python} -m pip install {pin}"',
    'head = (uv, "pip", "uninstall")',
])
def test_the_scan_catches_a_hand_built_command(source):
    assert hand_built(source)


def test_the_scan_leaves_plain_code_alone():
    assert not hand_built('if step.kind == "install" and installer == PIP:\n    which("uv")\n')


def test_fix_diagnoses_once_with_its_installer_and_source(table, tmp_path, capsys):
    # uv made the environment: the diagnosis itself is written with uv and the mirror, no second plan.
    calls = []

    def diagnose_once(opts, commands=None):
        calls.append(commands)
        snap = cpu_snapshot(env_kind="uv-venv")
        return table, diagnose(snap, table, commands=commands(snap))

    source = source_from_options(MIRROR, None, False)
    machine = Machine(stdin=io.StringIO(""), env={"PATH": "", "CONDA_EXE": "/opt/c/bin/conda"}, cwd=tmp_path,
                      diagnose=diagnose_once, report=make_report, emit=emit, exit_code=exit_code_for)
    code = run_fix(CheckOptions(python=PY, smoke=False, json=True), FixOptions(dry_run=True, source=source),
                   machine)
    assert code == 1 and len(calls) == 1 and isinstance(calls[0], FixCommands)
    report = json.loads(capsys.readouterr().out)
    [step] = report["plan"]["steps"]
    assert step["argv"][1:5] == ["pip", "install", "--python", PY]
    assert step["argv"][-2:] == ["--index-url", f"{MIRROR}/cu128"]
    # The findings and the plan come from the same Commands: the wheel finding carries the plan's command.
    finding = next(f for f in report["findings"] if f["id"] == "torch-cpu-build")
    assert finding["fix"]["commands"] == [step["command"]]
    assert "download.pytorch.org" not in json.dumps(report["findings"]) + json.dumps(report["plan"]["steps"])


def test_the_installer_line_keeps_its_reason(table, tmp_path, capsys):
    machine = fake_machine(FakeInstaller(), [cpu_snapshot(env_kind="uv-venv")], table, tmp_path)
    assert run_fix(opts(), FixOptions(dry_run=True), machine) == 1
    assert "  installer: uv (the environment was made by uv)" in capsys.readouterr().out
    machine = fake_machine(FakeInstaller(), [cpu_snapshot()], table, tmp_path)
    assert run_fix(opts(), FixOptions(dry_run=True, installer="uv"), machine) == 1
    assert "  installer: uv (--installer uv)" in capsys.readouterr().out


def test_fix_commands_writes_conda_and_the_source_into_the_plan(table):
    snap = cpu_snapshot(env_kind="conda", prefix="/opt/envs/t")
    snap.environment.python = PythonFacts(
        conda=Conda(records=[CondaRecord(name="pytorch", version="2.7.1", build="b")])
    )
    write = FixCommands(
        FixOptions(source=source_from_options(MIRROR, None, False)), {"CONDA_EXE": "/c/conda"}
    )
    plan = diagnose(snap, table, commands=write(snap)).plan
    assert write.why == "default" and write.written.installer == "pip"
    assert plan.steps[0].argv[:2] == ["/c/conda", "remove"]
    assert plan.steps[1].argv[-2:] == ["--index-url", f"{MIRROR}/cu128"]


def test_a_diagnose_that_ignores_fixs_commands_stops_fix(table, tmp_path):
    # Carrying out commands written for another installer or index than fix chose would be a silent lie.
    def diagnose_default(opts, commands=None):
        return table, diagnose(cpu_snapshot(), table)

    fake = FakeInstaller()
    machine = fake_machine(fake, [cpu_snapshot()], table, tmp_path, stdin=Tty("y\n"))
    machine.diagnose = diagnose_default
    with pytest.raises(RuntimeError, match="fix's commands"):
        run_fix(opts(), FixOptions(yes=True), machine)
    assert fake.calls == [] and fake.steps == 0
