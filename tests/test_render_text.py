"""The text view as people see it, through rich: no styles on a pipe or in a file, bold and colours on a
terminal (attributes without colours under NO_COLOR, nothing for TERM=dumb), and never a line broken or
padded by the renderer (soft wrap), so every command can be copied whole at any width. The golden files hold
the words; test_output_encoding.py holds the ASCII stand-ins for streams that cannot encode the glyphs."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.app.options import CheckOptions
from doctor.app.output import render
from doctor.render.text import render_text

REPO = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "golden"
SGR = re.compile(r"\x1b\[[0-9;]*m")
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?3[0-7](?:;[0-9;]*)?m")
COMMAND = ('/venv/bin/python -m pip install "torch==2.7.1+cu128" "torchvision==0.22.1+cu128" '
           '--index-url https://download.pytorch.org/whl/cu128')


def _report() -> dict:
    """The README's machine, with a finding whose title has a tab and text that looks like markup."""
    report = json.loads((GOLDEN / "rtx5090-cu126.json").read_text(encoding="utf-8"))
    # The golden leaves out this host's CPU architecture; re-diagnosed without one, no wheel can be judged.
    report["snapshot"]["host"].update(machine="x86_64", platform="linux-x86_64")
    report["findings"].append({
        "id": "x-[bold]y[/bold]", "severity": "warning", "title": "tab\there [red]not "
            "markup[/red] " + "w" * 150,
        "detail": "", "fix": {"summary": "ü ≤ → …", "commands": [COMMAND]},
    })
    return report


def _env(monkeypatch, **env: str) -> None:
    for name in (
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "FORCE_COLOR",
        "TTY_COMPATIBLE",
        "TTY_INTERACTIVE",
        "COLUMNS",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def _text(**kw) -> str:
    out = io.StringIO()
    render_text(_report(), file=out, verbose=True, **kw)
    return out.getvalue()


def test_a_pipe_gets_plain_lines_unbroken_at_any_width(monkeypatch):
    _env(monkeypatch, TERM="xterm-256color")
    for width in (20, 80, None):
        out = _text(width=width)
        assert "\x1b" not in out
        assert f"\n        {COMMAND}\n" in out  # the command whole, on a line of its own
        title = "  ! x-[bold]y[/bold]  tab\there [red]not markup[/red] " + "w" * 150
        assert f"\n{title.expandtabs(8)}\n" in out  # markup is text; a tab goes to the next 8th column
        assert all(line == line.rstrip() for line in out.splitlines())  # never padded to the width


def test_a_terminal_gets_bold_and_colours(monkeypatch):
    _env(monkeypatch, TERM="xterm-256color", FORCE_COLOR="1")
    out = _text(width=20)
    assert "\x1b[1;31m  ✗ \x1b[0m\x1b[31mgpu-arch-unsupported\x1b[0m" in out
    assert "\x1b[1m  OS        \x1b[0mlinux-" in out  # the label bold, its value not
    assert f"\x1b[1m        {COMMAND}\x1b[0m\n" in out  # bold, still whole at 20 columns
    assert SGR.sub("", out) == _text(width=20, terminal=False)  # the same words as on a pipe


def test_no_color_keeps_the_attributes_and_drops_the_colours(monkeypatch):
    _env(monkeypatch, TERM="xterm-256color", FORCE_COLOR="1", NO_COLOR="1")
    out = _text()
    assert "\x1b[1m  ✗ \x1b[0mgpu-arch-unsupported" in out
    assert "\x1b[2m" in out and not COLOUR.search(out)


@pytest.mark.parametrize(
    "env",
    [{"TERM": "dumb", "FORCE_COLOR": "1"}, {"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}, {"FORCE_COLOR": ""}],
)
def test_what_rich_takes_for_no_terminal_gets_no_styles(monkeypatch, env):
    _env(monkeypatch, **{"TERM": "xterm-256color", **env})
    assert "\x1b" not in _text()


def test_a_file_is_never_styled(monkeypatch, tmp_path):
    """-o: plain text whatever the environment says about stdout."""
    _env(monkeypatch, TERM="xterm-256color", FORCE_COLOR="1", TTY_COMPATIBLE="1")
    text = render(_report(), CheckOptions(output=tmp_path / "report.txt", verbose=True))
    assert text is not None and "\x1b" not in text
    assert f"\n        {COMMAND}\n" in text


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_a_real_terminal_gets_styles_and_whole_lines(tmp_path):
    """`check --from` on a pseudo-terminal 30 columns wide, rich finding the terminal itself: styled, and
    the same lines as on a pipe (none broken at 30 columns)."""
    import pty

    report = tmp_path / "report.json"
    report.write_text(json.dumps(_report()), encoding="utf-8")
    argv = [sys.executable, "-m", "doctor", "check", "--from", str(report)]
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE")}
    env.update(PYTHONPATH=str(REPO), TERM="xterm-256color", COLUMNS="30", LANG="C.UTF-8")
    piped = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.PIPE
        )
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the other side closed (Linux: EIO)
                break
            if not chunk:
                break
            out += chunk
        proc.wait(timeout=120)
    finally:
        os.close(leader)
    text = out.decode("utf-8").replace("\r\n", "\n")
    assert proc.returncode == piped.returncode == 1, proc.stderr.read()
    assert "\x1b[1m" in text and "\x1b[2m" in text and "\x1b[31m" in text
    assert SGR.sub("", text) == piped.stdout.decode("utf-8")
    assert any(len(line) > 30 for line in text.splitlines())
