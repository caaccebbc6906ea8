"""Command lines through the real entry point (``main(argv)``): what `check`, `report` and `fleet summarize`
hand the app for a line, which lines are usage errors (exit 2, from typer), and the accepted but obsolete
--no-cache / TORCHDOCTOR_NO_CACHE."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from doctor import exitcodes
from doctor.app.options import CheckOptions
from doctor.cli import main
from doctor.model import i18n

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _own_language(monkeypatch):
    """--lang sets the process's language: each test starts and ends with its own."""
    monkeypatch.setattr(i18n, "_state", dict(i18n._state))
    monkeypatch.delenv("TORCHDOCTOR_INDEX_URL_BASE", raising=False)
    monkeypatch.delenv("TORCHDOCTOR_NO_CACHE", raising=False)


def options_of(args: list[str], monkeypatch) -> tuple[str, object]:
    """(what ran, the options it was given) for ``torchdoctor args``, the app's work left out."""
    seen = {}

    def recorder(name):
        def record(*given, **kwargs):
            seen.update(name=name, given=given, kwargs=kwargs)
            return 0
        return record

    import doctor.app.check
    import doctor.app.fleet

    monkeypatch.setattr(doctor.app.check, "run_check", recorder("check"))
    monkeypatch.setattr(doctor.app.check, "run_report", recorder("report"))
    monkeypatch.setattr(doctor.app.fleet, "summarize_command", recorder("fleet"))
    assert main(list(args)) == 0, args
    if seen["name"] == "fleet":
        return "fleet", (seen["given"], seen["kwargs"])
    (opts,) = seen["given"]
    return seen["name"], opts


LINES = [
    (["check"], {}),
    (["check", "--no-smoke", "--json", "--python", "/usr/bin/python3"],
     {"smoke": False, "json": True, "python": "/usr/bin/python3"}),
    (["check", "--python=/opt/env", "-v", "-q", "--strict", "--no-redact", "--no-driver-change"],
     {"python": "/opt/env", "verbose": True, "quiet": True, "strict": True, "redact": False,
      "no_driver_change": True}),
    (["check", "--format", "github", "--require", "cuda", "--require=gpu", "--min-gpus", "2",
      "--min-compute-capability", "8.0", "--min-gpu-memory", "40GB", "--cuda", "12.x"],
     {"format": "github", "require": ["cuda", "gpu"], "min_gpus": 2, "min_compute_capability": "8.0",
      "min_gpu_memory": "40GB", "cuda": "12.x"}),
    (["check", "--ignore", "a", "--ignore", "b", "--from", "r1.json", "--from=dir", "-o", "out.txt"],
     {"ignore": ["a", "b"], "inputs": [Path("r1.json"), Path("dir")], "output": Path("out.txt")}),
    (["check", "--smoke-timeout", "2.5", "--device", "0", "--torch", "==2.3.1", "--table", "t.json"],
     {"smoke_timeout": 2.5, "device": "0", "torch": "==2.3.1", "table": Path("t.json")}),
    (["check", "--smoke-timeout=1e2", "--config", "pyproject.toml", "--mirror", "nju", "--lang", "zh"],
     {"smoke_timeout": 100.0, "config": Path("pyproject.toml"), "mirror": "nju"}),
    (["check", "--index-url-base", "https://m.example/whl", "--output", "o.json", "--verbose", "--quiet"],
     {"index_url_base": "https://m.example/whl", "output": Path("o.json"), "verbose": True, "quiet": True}),
    (["check", "--format=json", "--json", "--min-gpus=0"], {"format": "json", "json": True, "min_gpus": 0}),
    (["check", "--lang", "en", "--mirror=aliyun", "--torch=>=2.5,<2.8", "--python", "a", "--python", "b"],
     {"mirror": "aliyun", "torch": ">=2.5,<2.8", "python": "b"}),  # a repeated option: click keeps the last
    (["report"], {"format": "json"}),
    (["report", "-o", "r.json", "--format", "markdown", "--no-smoke"],
     {"output": Path("r.json"), "format": "markdown", "smoke": False}),
    (["report", "--json", "--python", "py", "--table=t.json", "--smoke-timeout", "3", "--torch", "==2.6.0",
      "--no-driver-change", "--index-url-base", "https://m/whl", "--mirror", "sjtu", "--lang", "zh",
      "-q", "--quiet", "--no-redact", "--output=x"],
     {"format": "json", "python": "py", "table": Path("t.json"), "smoke_timeout": 3.0, "torch": "==2.6.0",
      "no_driver_change": True, "index_url_base": "https://m/whl", "mirror": "sjtu", "quiet": True,
      "redact": False, "output": Path("x")}),
]


@pytest.mark.parametrize("args,fields", LINES, ids=[" ".join(a)[:60] for a, _ in LINES])
def test_a_check_or_report_line_gives_these_options(args, fields, monkeypatch):
    name, opts = options_of(args, monkeypatch)
    assert name == args[0]
    assert opts == CheckOptions(**fields)


def test_an_envvar_gives_an_option_its_value(monkeypatch):
    monkeypatch.setenv("TORCHDOCTOR_INDEX_URL_BASE", "https://m/whl")
    assert options_of(["check"], monkeypatch)[1] == CheckOptions(index_url_base="https://m/whl")


@pytest.mark.parametrize("args,expected", [
    (["fleet", "summarize", "reports/"], (["reports"], False, False, None, False)),
    (["fleet", "summarize", "a.json", "--json", "b.json", "dir"],
     (["a.json", "b.json", "dir"], True, False, None, False)),
    (["fleet", "summarize", "--format", "markdown", "-o", "f.md", "r/", "--lang", "zh", "-q"],
     (["r"], False, True, "f.md", True)),
    (["fleet", "summarize", "r", "--markdown", "--output=x.md", "--quiet", "--format=markdown"],
     (["r"], False, True, "x.md", True)),
])
def test_a_fleet_summarize_line(args, expected, monkeypatch):
    name, (given, kwargs) = options_of(args, monkeypatch)
    assert name == "fleet"
    assert (*given, kwargs["quiet"]) == expected


USAGE_ERRORS = [
    ["check", "--bogus"],
    ["check", "extra"],
    ["check", "--python"],  # missing value
    ["check", "--smoke-timeout", "soon"],  # does not convert
    ["check", "--smoke-timeout", "-1"],  # converts, but is no time limit
    ["check", "--min-gpus", "1.5"],
    ["check", "--format", "JSON"],  # choices are case-sensitive
    ["check", "--format", "pdf"],
    ["check", "--format=junit", "--json"],  # --json is --format json
    ["report", "--format", "text"],  # not one of report's choices
    ["check", "--json=yes"],  # a flag takes no value
    ["check", "--verb"],  # a prefix is not an option
    ["fleet"],
    ["fleet", "summarize"],  # the report paths are required
    ["fleet", "summarize", "--json"],
    ["fleet", "summarize", "r", "--format", "pdf"],
    ["fleet", "summarize", "r", "--format", "github"],  # check's choice, not fleet's
    ["fleet", "summarize", "r", "--markdown", "--json"],
    ["fleet", "bogus"],
    ["summarize", "r"],
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=" ".join)
def test_usage_errors_exit_2(args, capsys):
    assert main(args) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert err.strip() and "Traceback" not in err


def test_a_usage_error_is_typers_message(capsys):
    assert main(["check", "--no-smoke", "--bogus"]) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert "No such option: --bogus" in err and "Usage: torchdoctor check" in err


def test_unreadable_reports_are_exit_2_without_rich(tmp_path):
    """`fleet summarize --json` over nothing readable: exit 2, and rich (for text) is never imported."""
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "broken.json").write_text("{")
    script = (
        "import contextlib, io, sys, json\nfrom doctor.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    code = main(['fleet', 'summarize', {str(tmp_path / 'reports')!r}, '--json'])\n"
        "print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] == 'rich')]))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=120)
    code, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == exitcodes.USAGE, done.stderr
    assert loaded == []


# --- --no-cache and TORCHDOCTOR_NO_CACHE: accepted, ignored, and said so once ---------------------------

NO_CACHE_LINE = ("torchdoctor: --no-cache is no longer needed: nothing is cached; the option will be removed "
                 "in a later release\n")
ENV_LINE = ("torchdoctor: TORCHDOCTOR_NO_CACHE is no longer needed: nothing is cached; the variable is "
            "ignored and can be unset\n")


@pytest.mark.parametrize("command", [["check"], ["report"]])
def test_no_cache_is_accepted_with_one_notice(command, monkeypatch, capsys):
    without = options_of([*command, "--lang", "en"], monkeypatch)[1]
    assert capsys.readouterr().err == ""
    # nothing is passed on
    assert options_of([*command, "--no-cache", "--lang", "en"], monkeypatch)[1] == without
    assert capsys.readouterr().err == NO_CACHE_LINE


def test_the_variable_is_accepted_with_one_notice(monkeypatch, capsys):
    monkeypatch.setenv("TORCHDOCTOR_NO_CACHE", "1")
    assert options_of(["check", "--lang", "en"], monkeypatch)[1] == CheckOptions()
    assert capsys.readouterr().err == ENV_LINE
    options_of(["check", "--no-cache", "--lang", "en"], monkeypatch)
    assert capsys.readouterr().err == NO_CACHE_LINE + ENV_LINE
    options_of(["check", "--no-cache", "-q"], monkeypatch)  # -q: no notices
    assert capsys.readouterr().err == ""


def test_the_notice_is_in_the_runs_language(monkeypatch, capsys):
    options_of(["check", "--no-cache", "--lang", "zh"], monkeypatch)
    said = "torchdoctor: --no-cache 已不再需要：现在不缓存任何内容；这个选项会在以后的版本中移除\n"
    assert capsys.readouterr().err == said


def test_fix_accepts_no_cache(monkeypatch, capsys):
    import doctor.app.fix

    monkeypatch.setattr(doctor.app.fix, "run_fix", lambda opts, fix_opts: 0)
    assert main(["fix", "--dry-run", "--no-cache", "--lang", "en"]) == 0
    assert capsys.readouterr().err == NO_CACHE_LINE
