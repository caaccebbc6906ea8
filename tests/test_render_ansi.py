"""The text view on a terminal without rich (doctor/render/ansi.py) prints the same bytes as rich does, and
doctor/app/output.py's text_kind decides as rich decides."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from doctor.app.output import text_kind
from doctor.render import ansi
from doctor.render.text import render_text

GOLDEN = Path(__file__).parent / "golden"
TERMINALS = [
    {"TERM": "xterm-256color"},
    {"TERM": "xterm", "COLORTERM": "truecolor"},
    {"TERM": "screen"},
    {"TERM": "xterm-256color", "NO_COLOR": "1"},
]


def _env(monkeypatch, env: dict) -> None:
    for name in ("TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def _both(report: dict, env: dict, monkeypatch, **kw) -> tuple[str, str]:
    _env(monkeypatch, {**env, "FORCE_COLOR": "1"})  # rich: a StringIO is a terminal too
    rich_out, ours = io.StringIO(), io.StringIO()
    render_text(report, file=rich_out, plain=False, **kw)
    render_text(report, file=ours, terminal="no-color" if env.get("NO_COLOR") else "color", **kw)
    return rich_out.getvalue(), ours.getvalue()


@pytest.mark.parametrize("env", TERMINALS, ids=lambda e: ",".join(f"{k}={v}" for k, v in e.items()))
@pytest.mark.parametrize("name", sorted(p.name for p in GOLDEN.glob("*.json")))
@pytest.mark.parametrize("verbose", [False, True])
def test_ansi_kit_prints_what_rich_prints_on_a_terminal(name, env, verbose, monkeypatch):
    report = json.loads((GOLDEN / name).read_text())
    rich_text, ours = _both(report, env, monkeypatch, verbose=verbose)
    assert "\x1b[" in rich_text or env.get("NO_COLOR")
    assert ours == rich_text


def test_ansi_kit_with_awkward_text(monkeypatch):
    """Markup-looking text, tabs, several lines, control characters, empty parts, non-ASCII: rich's bytes."""
    report = json.loads((GOLDEN / "cpu-healthy.json").read_text())
    report["findings"] = [{
        "id": "x-[bold]y[/bold]", "severity": "error", "title": "tab\there [red]not markup[/red] " + "w" * 150,
        "detail": "line one\nline two\twith tab\x07bell\rcr", "fix": {"summary": "ü ≤ → …",
                                                                     "commands": ["pip install 'a[b]'"]},
        "evidence": {"k": "v [x]", "empty": ""}, "unverified": ["row-1"],
    }, {"id": "plain", "severity": "warning", "title": "", "detail": "", "fix": {}}]
    for env in TERMINALS:
        rich_text, ours = _both(report, env, monkeypatch, verbose=True)
        assert ours == rich_text, env


@pytest.mark.parametrize("style", ["", "bold", "dim", "bold red", "bold dim", "red bold", "green", "cyan",
                                   "yellow", "bold yellow", "dim red green", "italic underline blue"])
def test_one_print_per_style(style, monkeypatch):
    for env in TERMINALS:
        _env(monkeypatch, {**env, "FORCE_COLOR": "1"})
        from rich.text import Text as RichText

        rich_out, ours = io.StringIO(), io.StringIO()
        con = Console(file=rich_out, highlight=False, soft_wrap=True)
        mine = ansi.Console(ours, no_color=bool(env.get("NO_COLOR")))
        for base in ("", "bold", "dim"):
            con.print(RichText.assemble(("a ", style), "b", "c", ("", "red"), ("d", style), style=base))
            mine.print(ansi.Text.assemble(("a ", style), "b", "c", ("", "red"), ("d", style)).restyle(base))
            con.print(RichText("whole", style=style))
            mine.print(ansi.Text("whole", style=style))
            con.print()
            mine.print()
        assert ours.getvalue() == rich_out.getvalue(), (style, env)


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


ENVS = [{}, {"TERM": "dumb"}, {"TERM": "unknown"}, {"TERM": "xterm"}, {"NO_COLOR": "1"}, {"NO_COLOR": ""},
        {"FORCE_COLOR": "1"}, {"FORCE_COLOR": ""}, {"FORCE_COLOR": "0"}, {"TTY_COMPATIBLE": "0"},
        {"TTY_COMPATIBLE": "1"}, {"TTY_COMPATIBLE": "1", "FORCE_COLOR": ""}, {"TTY_INTERACTIVE": "1"},
        {"FORCE_COLOR": "1", "TERM": "dumb"}, {"NO_COLOR": "x", "TERM": "xterm-256color", "FORCE_COLOR": "1"}]


@pytest.mark.parametrize("tty", [False, True])
@pytest.mark.parametrize("env", ENVS, ids=lambda e: ",".join(f"{k}={v}" for k, v in e.items()) or "none")
def test_text_kind_decides_as_rich_does(env, tty):
    stream = _Stream(tty)
    con = Console(file=stream, highlight=False, soft_wrap=True, _environ=env)
    if not con.is_terminal or con.color_system is None:
        want = "plain"
    else:
        want = "no-color" if con.no_color else "color"
    assert text_kind(stream, env) == want


def test_text_on_a_terminal_does_not_import_rich():
    """`check --from REPORT` as text to what rich takes for a terminal (FORCE_COLOR) is styled without rich."""
    import os
    import subprocess
    import sys

    script = (
        "import contextlib, io, sys\nfrom doctor.cli import main\nout = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    main(['check', '--from', {str(GOLDEN / 'rtx5090-cu126.json')!r}])\n"
        "print('rich' in sys.modules, '\\x1b[1;31m' in out.getvalue(), file=sys.__stderr__)\n"
    )
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo), "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert res.stderr.strip().splitlines()[-1] == "False True", res.stderr
