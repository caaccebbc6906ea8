"""The fast path (doctor/cli/fast.py) reads `check`, `report` and `fleet summarize` lines without typer. These tests hold it to
the typer commands: the same options with the same kinds and defaults, the same keyword arguments for the
same command line, and typer for every line it must not read itself."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from doctor.cli import actions, commands, fast

REPO = Path(__file__).resolve().parents[1]
SIGNATURES = {name: inspect.signature(getattr(actions, name)).parameters for name in fast.OPTIONS}


def typer_command(name: str):
    app, word = (commands.fleet_app, "summarize") if name == "fleet_summarize" else (commands.app, name)
    info = next(c for c in app.registered_commands if (c.name or c.callback.__name__) == word)
    return typer.main.get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode=None)


def kind_of(param):
    """The fast path's kind for a click parameter, by click's own type names."""
    if getattr(param, "is_flag", False):
        return fast.FLAG
    kind = param.type.name
    if kind == "choice":
        return tuple(param.type.choices)
    # typer's own types (path) and the click types it bundles (str, int, float): int()/float() on the text
    assert kind in ("path", "float", "int", "str"), (param.name, kind)
    return {"path": fast.PATH, "float": fast.FLOAT, "int": fast.INT, "str": fast.TEXT}[kind]


@pytest.mark.parametrize("name", sorted(fast.OPTIONS))
def test_the_table_is_the_typer_commands_options(name):
    """Every option word typer knows for the command is in the table with its parameter, kind and
    multiplicity, and nothing else is; the defaults of actions.py are typer's; every envvar is listed."""
    command = typer_command(name)
    table = fast.OPTIONS[name]
    words = {}
    defaults = SIGNATURES[name]
    for param in command.params:
        if param.name in ("help",):
            continue
        if param.param_type_name == "argument":  # the report paths of fleet summarize: required, many
            assert fast.POSITIONAL[name] == param.name and param.required and param.nargs == -1
            assert defaults[param.name].default is inspect.Parameter.empty
            continue
        for word in param.opts + param.secondary_opts:
            words[word] = (param.name, kind_of(param), bool(param.multiple))
        default = param.default
        if isinstance(default, (list, tuple)) and not default:
            default = None
        want = defaults[param.name].default
        if hasattr(default, "value"):
            default = default.value
        assert default == want, (param.name, default, want)
        if param.envvar:
            assert param.envvar in fast.ENVVARS, param.name
    words.pop("--help", None)
    words.pop("-h", None)
    assert table == words
    assert set(defaults) == {p.name for p in command.params}
    assert name in fast.POSITIONAL or not [p for p in command.params if p.param_type_name == "argument"]


def read_by_typer(args, monkeypatch) -> tuple[str, dict]:
    seen = {}

    def recorder(name):
        def record(**kwargs):
            seen.update(name=name, kwargs=kwargs)
            return 0
        return record

    for name in fast.OPTIONS:
        monkeypatch.setattr(actions, name, recorder(name))
    assert commands.run(list(args)) == 0, args
    return seen["name"], seen["kwargs"]


def with_defaults(name: str, params: dict) -> dict:
    return {key: params.get(key, p.default) for key, p in SIGNATURES[name].items()}


LINES = [
    ["check"],
    ["check", "--no-smoke", "--json"],
    ["check", "--no-smoke", "--json", "--python", "/usr/bin/python3"],
    ["check", "--python=/opt/env", "-v", "-q", "--strict", "--no-redact", "--no-cache", "--no-driver-change"],
    ["check", "--format", "github", "--require", "cuda", "--require=gpu", "--min-gpus", "2",
     "--min-compute-capability", "8.0", "--min-gpu-memory", "40GB", "--cuda", "12.x"],
    ["check", "--ignore", "a", "--ignore", "b", "--from", "r1.json", "--from=dir", "-o", "out.txt"],
    ["check", "--smoke-timeout", "2.5", "--device", "0", "--torch", "==2.3.1", "--table", "t.json"],
    ["check", "--smoke-timeout=1e2", "--config", "pyproject.toml", "--mirror", "nju", "--lang", "zh"],
    ["check", "--index-url-base", "https://mirror.example/whl", "--output", "o.json", "--verbose", "--quiet"],
    ["check", "--format=junit", "--json", "--min-gpus=0"],
    ["check", "--lang", "en", "--mirror=aliyun", "--torch=>=2.5,<2.8"],
    ["report"],
    ["report", "-o", "r.json", "--format", "markdown", "--no-smoke"],
    ["report", "--json", "--python", "py", "--table=t.json", "--smoke-timeout", "3", "--torch", "==2.6.0",
     "--no-driver-change", "--index-url-base", "https://m/whl", "--no-cache", "--mirror", "sjtu", "--lang", "zh",
     "-q", "--quiet", "--no-redact", "--output=x"],
    ["fleet", "summarize", "reports/"],
    ["fleet", "summarize", "a.json", "--json", "b.json", "dir"],
    ["fleet", "summarize", "--format", "markdown", "-o", "f.md", "r/", "--lang", "zh", "-q"],
    ["fleet", "summarize", "r", "--markdown", "--output=x.md", "--quiet", "--format=text"],
]


@pytest.mark.parametrize("args", LINES, ids=[" ".join(a)[:60] for a in LINES])
def test_the_fast_path_reads_a_line_as_typer_does(args, monkeypatch):
    monkeypatch.delenv("TORCHDOCTOR_INDEX_URL_BASE", raising=False)
    monkeypatch.delenv("_TORCHDOCTOR_COMPLETE", raising=False)
    parsed = fast.parse(args, {})
    assert parsed is not None, args
    name, params = parsed
    typer_name, typer_kwargs = read_by_typer(args, monkeypatch)
    assert name == typer_name
    assert with_defaults(name, params) == typer_kwargs


LEFT_TO_TYPER = [
    [],
    ["--help"],
    ["--version"],
    ["fix", "--dry-run"],
    ["explain", "text"],
    ["check", "--help"],
    ["check", "-h"],
    ["check", "--bogus"],
    ["check", "extra"],
    ["check", "--python"],  # missing value
    ["check", "--python", "--json"],  # a value that looks like an option
    ["check", "--smoke-timeout", "soon"],  # does not convert
    ["check", "--smoke-timeout", "-1"],
    ["check", "--min-gpus", "1.5"],
    ["check", "--format", "JSON"],  # choices are case-sensitive
    ["check", "--format", "pdf"],
    ["report", "--format", "text"],  # not one of report's choices
    ["check", "-vq"],  # combined short flags
    ["check", "-oout.txt"],
    ["check", "--json=yes"],  # a flag with a value
    ["check", "--python", "a", "--python", "b"],  # repeated single option
    ["check", "--", "--json"],
    ["check", "--table", ""],
    ["check", "--verb"],  # a prefix is not an option
    ["check", "--no-smoke", "--from"],
    ["fleet"],
    ["fleet", "summarize"],  # the report paths are required
    ["fleet", "summarize", "--json"],
    ["fleet", "summarize", "--help"],
    ["fleet", "summarize", "r", "--format", "pdf"],
    ["fleet", "summarize", "r", "--format", "github"],  # check's choice, not fleet's
    ["fleet", "summarize", "-"],
    ["fleet", "summarize", "r", "--", "x"],
    ["fleet", "summarize", "r", ""],
    ["fleet", "bogus"],
    ["summarize", "r"],
]


@pytest.mark.parametrize("args", LEFT_TO_TYPER, ids=[" ".join(a) or "(none)" for a in LEFT_TO_TYPER])
def test_lines_the_fast_path_leaves_to_typer(args):
    assert fast.parse(args, {}) is None


def test_an_envvar_or_completion_leaves_the_line_to_typer():
    assert fast.parse(["check"], {}) is not None
    assert fast.parse(["check"], {"TORCHDOCTOR_INDEX_URL_BASE": "https://m/whl"}) is None
    assert fast.parse(["check"], {"_TORCHDOCTOR_COMPLETE": "bash_complete"}) is None


def test_a_plain_check_imports_neither_typer_nor_click(tmp_path):
    """The point of the fast path, in a fresh interpreter: typer and click are never imported."""
    script = (
        "import contextlib, io, sys, json\nfrom doctor.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['check', '--no-smoke', '--json', '--python', sys.executable])\n"
        "print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'click'))]))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0", TORCHDOCTOR_SYSROOT=str(tmp_path),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path)
    code, loaded = __import__("json").loads(done.stdout.strip().splitlines()[-1])
    assert code in (0, 1), done.stderr
    assert loaded == []


def test_fleet_summarize_as_json_imports_neither_typer_nor_rich(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "broken.json").write_text("{")
    script = (
        "import contextlib, io, sys, json\nfrom doctor.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    code = main(['fleet', 'summarize', {str(tmp_path / 'reports')!r}, '--json'])\n"
        "print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'click', 'rich'))]))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    code, loaded = __import__("json").loads(done.stdout.strip().splitlines()[-1])
    assert code == 2, done.stderr  # nothing readable: the usage exit code, as before
    assert loaded == []


def test_usage_errors_still_come_from_typer(capsys):
    from doctor.cli import main

    assert main(["check", "--no-smoke", "--bogus"]) == 2
    err = capsys.readouterr().err
    assert "No such option: --bogus" in err and "Usage: torchdoctor check" in err
