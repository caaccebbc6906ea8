"""What users see of typer through ``main(argv)`` is typer's own: the top-level help, a command's help,
usage errors and --version as typer's command prints them, and shell completion of every command and
option."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from doctor import cli
from doctor.cli import commands

REPO = Path(__file__).resolve().parents[1]


def _full(args: list[str]) -> tuple[int, str]:
    """The output of typer's command alone, without main()'s handling."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = typer.main.get_command(commands.app).main(
                args=args, prog_name="torchdoctor", standalone_mode=False
            )
        except typer.Exit as exc:
            code = exc.exit_code
        except Exception as exc:  # noqa: BLE001 - a usage error: show it as main() does
            show = getattr(exc, "show", None)
            if show:
                show()
            code = getattr(exc, "exit_code", 2)
    return code, out.getvalue() + err.getvalue()


def _ours(args: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(args)
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["check", "--help"], ["fleet", "--help"],
                                  ["fleet", "summarize", "--help"], ["rules", "-h"], ["check", "--bogus"],
                                  ["nosuchcommand"], ["--version"]])
def test_same_output_as_typer_alone(args):
    assert _ours(args)[1] == _full(args)[1]


@pytest.mark.parametrize("words,cword,expected", [("torchdoctor check --no-sm", "2", "--no-smoke"),
                                                  ("torchdoctor che", "1", "check"),
                                                  ("torchdoctor fleet summ", "2", "summarize")])
def test_shell_completion_sees_every_command_and_option(words, cword, expected):
    env = dict(os.environ, PYTHONPATH=str(REPO), _TORCHDOCTOR_COMPLETE="complete_bash", COMP_WORDS=words,
               COMP_CWORD=cword)
    done = subprocess.run([sys.executable, "-c", "import sys\nfrom doctor.cli import "
        "main\nsys.exit(main([]))"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert expected in done.stdout.split(), done.stdout + done.stderr
