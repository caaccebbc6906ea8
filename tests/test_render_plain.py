"""The text view without rich (a pipe, a file: doctor/render/plain.py) prints the same bytes as rich does."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.render.text import render_text

GOLDEN = Path(__file__).parent / "golden"
REPO = Path(__file__).resolve().parents[1]


def _both(report: dict, **kw) -> tuple[str, str]:
    rich_out, plain_out = io.StringIO(), io.StringIO()
    render_text(report, file=rich_out, width=100, plain=False, **kw)
    render_text(report, file=plain_out, width=100, plain=True, **kw)
    return rich_out.getvalue(), plain_out.getvalue()


@pytest.mark.parametrize("name", sorted(p.name for p in GOLDEN.glob("*.json")))
@pytest.mark.parametrize("verbose", [False, True])
@pytest.mark.parametrize("quiet", [False, True])
def test_plain_kit_prints_what_rich_prints(name, verbose, quiet):
    report = json.loads((GOLDEN / name).read_text())
    rich_text, plain_text = _both(report, verbose=verbose, quiet=quiet)
    assert plain_text == rich_text


def test_plain_kit_with_awkward_text():
    """Markup-looking text, tabs, several lines, long lines past the width, non-ASCII."""
    report = json.loads((GOLDEN / "cpu-healthy.json").read_text())
    report["findings"] = [{
        "id": "x-[bold]y[/bold]", "severity": "error", "title": "tab\there [red]not markup[/red] " + "w" * 150,
        "detail": "line one\nline two\twith tab", "fix": {"summary": "ü ≤ → …", "commands": ["pip install 'a[b]'"]},
        "evidence": {"k": "v [x]"}, "unverified": ["row-1"],
    }]
    rich_text, plain_text = _both(report, verbose=True)
    assert plain_text == rich_text


def test_piped_text_check_does_not_import_rich():
    """`check --from REPORT` as text into a pipe renders without rich (rich is only for a terminal)."""
    script = (
        "import contextlib, io, sys\nfrom doctor.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['check', '--from', {str(GOLDEN / 'cpu-healthy.json')!r}])\n"
        "print('rich' in sys.modules, file=sys.__stderr__)\n"
    )
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert res.stderr.strip().splitlines()[-1] == "False", res.stderr
