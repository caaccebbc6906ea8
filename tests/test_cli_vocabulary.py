"""One output vocabulary on every command (--format where it has formats, --json as its alias, -o FILE, -q),
--ignore checked against the ids that exist, help texts with an example each and every default once, shell
completion offered; and the small things of the human text (aligned rows, the label's bold, copyable fleet
commands). Through the real CLI (``main(argv)`` in a fresh process, or in this one where that is enough)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from fakeenv import make_fake_env

from doctor import exitcodes
from doctor.cli import main

REPO = Path(__file__).resolve().parents[1]
COMMANDS = [["check"], ["report"], ["fix"], ["fleet", "summarize"], ["distributed"], ["explain"], ["rules"]]


def run_cli(args, env_extra=None, cwd=None):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update({"PYTHONPATH": str(REPO), "TORCHDOCTOR_NVML": "0", "NO_COLOR": "1", "COLUMNS": "100",
                **(env_extra or {})})
    return subprocess.run(
        [sys.executable, "-m", "doctor", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


def help_of(command: list[str]) -> str:
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        assert main([*command, "--help"]) == 0
    return buffer.getvalue()


@pytest.fixture
def cpu_machine(tmp_path):
    (tmp_path / "sysroot").mkdir()
    python = make_fake_env(tmp_path / "venv", torch="2.13.0+cpu", cuda=None)
    return python, {"TORCHDOCTOR_SYSROOT": str(tmp_path / "sysroot")}


# --- help ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_an_example_and_the_common_options(command):
    text = help_of(command)
    assert "Example" in text and f"torchdoctor {' '.join(command)}" in text.split("Example", 1)[1]
    options = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", text))
    assert "--json" in options and "--format" in options, command
    if command != ["rules"]:
        assert {"-q", "--quiet"} <= options, command
    if command not in (["fix"],):
        assert {"-o", "--output"} <= options, command


@pytest.mark.parametrize("command", [["--help"], *COMMANDS], ids=" ".join)
def test_no_default_is_printed_twice(command):
    text = " ".join(help_of(command if command == ["--help"] else command).split())
    for option_help in re.split(r"(?=\s--?[a-z])", text):
        if "[default:" in option_help:
            assert "(default" not in option_help.lower(), option_help


def test_completion_is_offered():
    text = help_of([])
    assert "--install-completion" in text and "--show-completion" in text


# --- formats, --json, -o, -q -------------------------------------------------------------------------------


def test_format_and_json_agree_or_it_is_a_usage_error(cpu_machine, tmp_path):
    python, env = cpu_machine
    for args in (["report", "--json", "--format", "markdown"], ["rules", "--json", "--format", "text"],
                 ["fix", "--json", "--format", "text", "--dry-run"], ["check", "--json", "--format", "junit"],
                 ["fleet", "summarize", str(tmp_path), "--json", "--format", "markdown"],
                 ["report", "--format", "junit"]):
        res = run_cli(
            [*args, "--python", str(python)] if args[0] in ("report", "fix", "check") else args, env
        )
        assert res.returncode == 2, (args, res.stderr)
        assert "Traceback" not in res.stderr


def test_json_alias_and_output_file_on_each_command(cpu_machine, tmp_path):
    python, env = cpu_machine
    out = tmp_path / "out.json"
    res = run_cli(["report", "--no-smoke", "--json", "-o", str(out), "--python", str(python)], env)
    assert res.returncode == 0 and json.loads(out.read_text())["report_schema_version"] == 1
    assert f"wrote {out}" in res.stderr
    res = run_cli(["report", "--no-smoke", "--json", "-o", str(out), "-q", "--python", str(python)], env)
    assert res.returncode == 0 and res.stderr == ""  # -q: no notice either
    rules = json.loads(run_cli(["rules", "--format", "json"]).stdout)["rules"]
    assert {"nvidia-driver", "runtime", "requirements"} <= {r["id"] for r in rules}
    fix = run_cli(["fix", "--dry-run", "--no-smoke", "--format", "json", "--python", str(python)], env)
    assert json.loads(fix.stdout)["plan"]["status"] == "healthy"
    fleet_out = tmp_path / "fleet.md"
    res = run_cli(["fleet", "summarize", str(out), "--format", "markdown", "-o", str(fleet_out)])
    assert res.returncode == 0 and fleet_out.read_text().startswith("## torchdoctor fleet: 1 node(s)")


def test_quiet_check_prints_only_what_needs_doing(cpu_machine):
    python, env = cpu_machine
    healthy = run_cli(["check", "--no-smoke", "-q", "--python", str(python)], env)
    assert healthy.returncode == 0 and healthy.stdout == "" and healthy.stderr == ""
    unmet = run_cli(["check", "--no-smoke", "-q", "--require", "gpu", "--python", str(python)], env)
    assert unmet.returncode == 4
    assert unmet.stdout.lstrip().startswith("✗ requirement-gpu") and "OS " not in unmet.stdout
    assert "exit 4" in unmet.stdout


# --- --ignore ------------------------------------------------------------------------------------------


def test_an_unknown_ignore_id_lists_the_close_matches(cpu_machine):
    python, env = cpu_machine
    res = run_cli(["check", "--no-smoke", "--ignore", "shm-to-small", "--python", str(python)], env)
    assert res.returncode == exitcodes.USAGE
    assert res.stderr.strip() == ("torchdoctor: error: --ignore shm-to-small: no finding has this id "
                                  "(did you mean shm-too-small? `torchdoctor rules` lists them)")
    known = run_cli(["check", "--no-smoke", "--ignore", "shm-too-small", "--ignore", "requirement-gpu",
                     "--python", str(python)], env)
    assert known.returncode == 0, known.stderr


# --- the small things of the human text ------------------------------------------------------------------


def render(report: dict, **kwargs) -> str:
    from rich.console import Console

    from doctor.render import text as text_view

    buffer = io.StringIO()
    original = text_view.console
    text_view.console = lambda file=None, width=None, **_: Console(
        file=buffer, width=120, force_terminal=True, color_system="standard", highlight=False, soft_wrap=True
    )
    try:
        text_view.render_text(report, **kwargs)
    finally:
        text_view.console = original
    return buffer.getvalue()


def test_the_label_is_bold_and_its_value_is_not():
    from test_report_schema import full_report

    out = render(full_report())
    row = next(line for line in out.splitlines() if "OS" in line and "linux" in line)
    bold_label, value = row.split("OS", 1)[0], row.split("OS", 1)[1]
    assert "\x1b[1m" in bold_label  # the label starts bold ...
    assert "\x1b[0m" in value.split("linux")[0]  # ... and the style ends before the value begins
    assert "\x1b[1m" not in value


def test_a_multi_line_nvml_error_stays_under_its_column():
    from test_report_schema import full_report

    report = full_report()
    report["snapshot"]["nvidia"].update(status="unknown", driver_version={"value": None, "why": "x"},
                                        detail="NVML: Unknown Error\nnvidia-smi: Failed to initialize NVML:\n"
                                        "  Unknown Error", gpus=[])
    lines = render(report).splitlines()
    plain = [re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", line) for line in lines]
    at = next(i for i, line in enumerate(plain) if line.startswith("  Driver    unknown (NVML: Unknown "
        "Error"))
    assert plain[at + 1] == " " * 12 + "nvidia-smi: Failed to initialize NVML:"
    assert plain[at + 2] == " " * 12 + "Unknown Error)"


def test_the_import_time_is_the_import_steps():
    from test_report_schema import full_report

    report = full_report()
    report["snapshot"]["runtime"].update(status="ok", torch_version="2.5.1", seconds=4.6, backend="cuda",
                                         device_count=1, steps=[
                                             {"name": "import", "status": "ok", "seconds": 2.7},
                                             {"name": "matmul", "status": "ok", "seconds": 0.3, "device": 0}])
    row = next(line for line in render(report).splitlines() if "Runtime" in line)
    assert "imported in 2.7s" in row and "smoke test 4.6s in all" in row and "in 4.6s" not in row


def test_fleet_commands_are_never_wrapped(tmp_path):
    """The fix fleet writes for a group (from the first report's facts) is one whole line at any width."""
    paste = REPO / "tests" / "fixtures" / "collect_env" / "composed-2.6.0-cu126-rtx5090d-issue150733.txt"
    res = run_cli(["check", "--from", str(paste), "--json"], {})
    report = json.loads(res.stdout)
    command = next(step["command"] for step in report["plan"]["steps"] if step.get("command"))
    assert len(command) > 80 and "--index-url" in command
    for name in ("a", "b"):
        report["snapshot"]["host"]["hostname"] = name
        (tmp_path / f"{name}.json").write_text(json.dumps(report), encoding="utf-8")
    res = run_cli(["fleet", "summarize", str(tmp_path)], {"COLUMNS": "80"})
    assert res.returncode == 1, res.stderr
    assert f"    {command}\n" in res.stdout  # one line, whole, as it must be pasted


def test_what_torch_warned_is_said_under_runtime_and_in_markdown():
    from test_report_schema import full_report

    from doctor.render.markdown import render_markdown

    report = full_report()
    report["snapshot"]["runtime"].update(status="ok", torch_version="2.13.0+cpu", seconds=2.1, backend="cpu",
                                         warnings=["Failed to initialize NumPy: No module named 'numpy'"],
                                         steps=[{"name": "import", "status": "ok", "seconds": 1.6}])
    plain = [re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", line) for line in render(report).splitlines()]
    at = next(i for i, line in enumerate(plain) if line.startswith("  Runtime   torch 2.13.0+cpu imported"))
    assert plain[at + 1] == " " * 12 + "torch warned: Failed to initialize NumPy: No module named 'numpy'"
    assert "| torch warnings | Failed to initialize NumPy: No module named 'numpy' |" in render_markdown(
        report
    )


def test_second_hand_table_rows_are_said_in_words_only_with_v():
    from test_report_schema import full_report

    report = full_report()
    report["plan"]["unverified"] = ["torch 2.7: patches", "arch list 2.7/cu128", "something new"]
    assert "unverified" not in render(report) and "how sure" not in render(report)
    verbose = render(report, verbose=True)
    assert "how sure: the patch releases of torch 2.7 come from release notes" in verbose
    assert "the GPUs the torch 2.7 cu128 build has kernels for come from PyTorch's build scripts" in verbose
    assert 'the table row "something new" is not confirmed from a primary source' in verbose


def test_explain_names_the_interpreter_its_fixes_are_for():
    import io

    from doctor.render.explain import render_explain, render_explain_markdown

    cause = {"id": "gpu-arch-unsupported", "title": "t", "meaning": "m", "fix": "f", "verdict": "confirmed",
             "match": {"line": 1, "text": "no kernel "
                 "image"}, "check": {"fix": {"summary": "s", "commands": []}}}
    report = {
        "causes": [cause],
        "probed": True,
        "interpreter_from_traceback": True,
        "input": {"lines": 1},
        "check": {"snapshot": {"interpreter": {"path": "/home/u/venv/bin/python", "reason": "--python"}}},
    }
    said = "The fixes below are for /home/u/venv/bin/python (chosen: the traceback's site-packages)."
    out = io.StringIO()
    render_explain(report, file=out, width=200)
    assert said in out.getvalue() and said in render_explain_markdown(report)
    # nothing to change: no interpreter line
    ruled_out = dict(report, causes=[dict(cause, verdict="ruled-out")])
    out = io.StringIO()
    render_explain(ruled_out, file=out, width=200)
    assert "The fixes below" not in out.getvalue()
