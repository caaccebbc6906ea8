"""Printed commands are pasted into shells: whatever a path, a folder name or a report holds, the command
names exactly its argv and runs nothing else (issue 27).

Before, every argument holding ``==`` was put in double quotes, where ``$(...)``, backticks and ``$VAR``
still expand: a target at ``x==1$(touch PWNED)/venv/bin/python`` (here, or in a ``--from`` report), or a
site-packages folder ``nvidia_x-1$(touch${IFS}PWNED).dist-info`` that became a ``--force-reinstall
"nvidia-x==1$(...)"`` pin, ran ``touch`` when the printed command was pasted.

- the POSIX rendering round-trips through ``shlex.split`` for any argv without control characters
  (hypothesis), and through real bash (and dash) for hostile ones, control characters included, with no
  side effect;
- PowerShell and cmd get their own quoting, and refuse (a comment line saying why) what they cannot pass;
- through the real CLI: the hostile target, live and from a report, and the hostile dist-info folder; every
  printed command is run by bash and creates nothing.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import make_fake_env, site_packages
from hostile import REPO, base_env, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(REPO))

from doctor.model import shells  # noqa: E402
from doctor.plan.commands import Commands, pin_problem, render_argv  # noqa: E402

pytestmark = pytest.mark.hostile

PAYLOADS = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "x==1$(touch PWNED)/venv/bin/python",
    "nvidia-x==1$(touch${IFS}PWNED)",
    "a;touch PWNED",
    "a && touch PWNED",
    "a | touch PWNED",
    "a > PWNED",
    "<PWNED",
    "it's",
    "'$(touch PWNED)'",
    '"$(touch PWNED)"',
    "\\$(touch PWNED)",
    "!touch PWNED",
    "!!",
    "$HOME",
    "${IFS}",
    "~",
    "~root",
    "#comment",
    "*",
    "?",
    "[a]",
    "{a,b}",
    "=touch",
    "a=b",
    "",
    " ",
    "torch==2.7.1+cu128",
    "C:\\Program Files\\x\\",
    "/home/josé/venv/bin/python",
    "-e",
    "--index-url",
]
CONTROLS = ["a\tb", "new\nline; touch PWNED", "x\x1b]0;PWNED\x07", "\r", "back\\slash\x01'", "c1\x85\x9b",
            "bytes\udcff\udc80"]

ARGV_TEXT = st.text(st.characters(exclude_categories=("Cc", "Cs")), max_size=20)


def bash_argv(line: str, cwd: Path, shell: str = "bash") -> list[bytes]:
    """What ``shell`` passes to a program for the words of ``line``, run in ``cwd``."""
    done = subprocess.run(
        [shell, "-c", 'printf "%s\\0" ' + line], capture_output=True, cwd=cwd, timeout=30,
        env={"PATH": os.environ["PATH"], "HOME": str(cwd), "LC_ALL": "C.UTF-8"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split(b"\0")[:-1]


def encoded(arg: str) -> bytes:
    return arg.encode("utf-8", "surrogateescape")


# --- POSIX: round trips -----------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(st.lists(ARGV_TEXT, min_size=1, max_size=6))
def test_posix_rendering_round_trips_through_shlex(argv):
    assert shlex.split(shells.render(argv, shells.POSIX)) == argv


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=st.lists(st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
                             max_size=12), min_size=1, max_size=4))
def test_posix_rendering_round_trips_through_bash(argv, tmp_path):
    line = shells.render(argv, shells.POSIX)
    assert bash_argv(line, tmp_path) == [encoded(a) for a in argv]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("shell", ["bash", "dash"])
def test_hostile_arguments_reach_the_program_as_they_are(shell, tmp_path):
    if shutil.which(shell) is None:
        pytest.skip(f"no {shell}")
    argv = PAYLOADS + (CONTROLS if shell == "bash" else [])  # $'...' is bash/zsh/ksh, not dash
    line = shells.render(argv, shells.POSIX)
    assert bash_argv(line, tmp_path, shell) == [encoded(a) for a in argv]
    assert list(tmp_path.iterdir()) == [], "a pasted command had a side effect"


def test_plain_arguments_stay_as_the_goldens_show():
    argv = ["/venv/bin/python", "-m", "pip", "install", "torch==2.7.1+cu128", "--index-url",
            "https://download.pytorch.org/whl/cu128"]
    assert render_argv(argv) == ('/venv/bin/python -m pip install "torch==2.7.1+cu128" --index-url '
                                 "https://download.pytorch.org/whl/cu128")


def test_no_dollar_backtick_or_bang_is_ever_inside_double_quotes():
    for arg in PAYLOADS + ["a=$b", "a==`b`", "a==!b", "a==\\b"]:
        quoted = shells.quote(arg)
        if quoted.startswith('"'):
            assert not set(quoted) & set("$`!\\"), arg


def test_control_characters_never_reach_the_terminal_raw():
    for arg in CONTROLS:
        assert not re.search("[\x00-\x1f\x7f-\x9f]", shells.quote(arg)), repr(arg)


# --- PowerShell and cmd -------------------------------------------------------------------------------------


@pytest.mark.parametrize("arg,expected", [
    ("torch==2.7.1+cu128", '"torch==2.7.1+cu128"'),
    (r"C:\venv\Scripts\python.exe", r"C:\venv\Scripts\python.exe"),
    (r"C:\Users\Bob Smith\py.exe", r'"C:\Users\Bob Smith\py.exe"'),
    ("$(Remove-Item x)", "'$(Remove-Item x)'"),
    ("it's $x", "'it''s $x'"),
    ("a`b", "'a`b'"),
    ("a\u2019$b", "'a\u2019\u2019$b'"),  # PowerShell ends a single-quoted string at a typographic quote too
    ("a;b", '"a;b"'),
])
def test_powershell_quoting(arg, expected):
    assert shells.quote(arg, shells.POWERSHELL) == expected


def test_a_quoted_program_gets_the_call_operator():
    assert shells.render(["C:\\x y\\py.exe", "-m"], shells.POWERSHELL) == '& "C:\\x y\\py.exe" -m'
    assert shells.render(["C:\\$x\\py.exe"], shells.POWERSHELL) == "& 'C:\\$x\\py.exe'"


@pytest.mark.parametrize("arg,expected", [
    ("torch==2.7.1+cu128", "torch==2.7.1+cu128"),
    ("a&b|c<d>e^f(g)", '"a&b|c<d>e^f(g)"'),
    (r"C:\Program Files\x" + "\\", '"C:\\Program Files\\x\\\\"'),
    ("a b", '"a b"'),
])
def test_cmd_quoting(arg, expected):
    assert shells.quote(arg, shells.CMD) == expected


@pytest.mark.parametrize("shell,arg", [
    (shells.CMD, "%PATH%"), (shells.CMD, "!x!"), (shells.CMD, 'a"&calc'), (shells.CMD, "a\nb"),
    (shells.POWERSHELL, 'a"b'), (shells.POWERSHELL, "a\tb"), (shells.POWERSHELL, ""),
])
def test_what_a_shell_cannot_pass_is_refused_with_a_reason(shell, arg):
    with pytest.raises(shells.Unrepresentable):
        shells.quote(arg, shell)
    line = shells.render(["python", arg], shell)
    assert line.startswith("rem " if shell == shells.CMD else "# ")
    assert "cannot write this command safely" in line
    assert (not arg or arg not in line) and not set(line) & set("%!\"'$`&|<>;()")


# --- values read from the machine --------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["nvidia-x==1$(touch${IFS}PWNED)", "torch==2.*", "torch==1\n--index-url=x",
                                  "a b==1", "x[y]==1", "torch==1;python_version>'3'", "torch==1 "])
def test_pins_that_are_not_pep_440_are_refused(spec):
    assert pin_problem(spec)
    from doctor.model.findings import REINSTALL, Action

    line = Commands().line(Action(REINSTALL, (spec,), None))
    assert line.startswith("# ") and "PWNED" not in line and "$" not in line


@pytest.mark.parametrize("spec", ["torch==2.7.1+cu128", "nvidia-cudnn-cu12==9.1.0.70", "torch",
                                  "numpy==2.0.0rc1"])
def test_real_pins_pass(spec):
    assert pin_problem(spec) is None


# --- through the CLI ----------------------------------------------------------------------------------------


def hostile_machine(root: Path) -> Path:
    """A fake venv in a folder whose name runs code in double quotes, with a dist-info folder (no RECORD: an
    interrupted install) whose version does the same."""
    venv = root / "x==1$(touch PWNED)" / "venv"
    python = make_fake_env(venv, torch="2.6.0+cu126", cuda="12.6", torchvision="0.21.0+cu126",
                           torchaudio="2.6.0+cu126")
    dist = site_packages(venv) / "nvidia_x-1$(touch${IFS}PWNED).dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-x\nVersion: 1\n")
    return python


def command_lines(text: str) -> list[str]:
    """Every line of the output that is a command torchdoctor wrote (pip, rm, uv, conda, a comment line)."""
    return [line.strip() for line in text.splitlines()
            if re.search(r"-m pip |^\s*rm -rf|^\s*# torchdoctor cannot", line)]


def run_pasted(lines: list[str], cwd: Path) -> None:
    """Paste each line into bash in an empty folder (PATH without pip: nothing installs), as a user would."""
    for line in lines:
        subprocess.run(["bash", "-c", line], capture_output=True, cwd=cwd, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)})


def test_a_hostile_target_path_and_dist_info_print_commands_that_run_nothing_else(world, tmp_path):
    python = hostile_machine(tmp_path / "machine")
    env = base_env(world)
    res = run_cli(["check", "--no-smoke", "--python", str(python)], env, cwd=tmp_path)
    assert res.returncode == 1, res.summary()
    lines = command_lines(res.out)
    assert any("-m pip install" in line for line in lines), res.summary()
    refused = "nvidia-x: the version read from the machine is not a PEP 440 version"
    assert any(refused in line for line in lines)
    assert not any("--force-reinstall" in line for line in lines), lines
    paste = tmp_path / "paste"
    paste.mkdir()
    # rm -rf would delete the planted folder: paste only what would not change the fake machine itself.
    run_pasted([line for line in lines if not line.startswith("rm ")], paste)
    assert list(paste.iterdir()) == [], "pasting a printed command ran code"
    assert not list(tmp_path.rglob("PWNED")), "pasting a printed command ran code"

    # The same machine read back from its JSON report (as another machine would): the same commands.
    res = run_cli(["check", "--no-smoke", "--json", "--python", str(python)], env, cwd=tmp_path)
    report = tmp_path / "report.json"
    report.write_bytes(res.stdout)
    data = json.loads(res.stdout)
    assert data["plan"]["steps"][0]["command"].startswith("'")
    res = run_cli(["check", "--from", str(report)], env, cwd=tmp_path)
    assert res.returncode == 1, res.summary()
    from_lines = command_lines(res.out)
    assert [line for line in from_lines if "-m pip" in line] == [line for line in lines if "-m pip" in line]
    run_pasted([line for line in from_lines if not line.startswith("rm ")], paste)
    assert not list(tmp_path.rglob("PWNED"))


def test_a_windows_cuda_home_path_is_quoted_for_powershell():
    """A machine path in PowerShell double quotes would run its ``$(...)``: the CUDA_HOME line is
    single-quoted through the one quoting (doctor/model/shells.py), like every other command (issue 27)."""
    from doctor.model import shells as sh

    path = "C:\\CUDA\\$(Remove-Item -Recurse ~)\\v12.6"
    line = "$env:CUDA_HOME = " + sh.quote(path, sh.POWERSHELL)
    assert line == "$env:CUDA_HOME = 'C:\\CUDA\\$(Remove-Item -Recurse ~)\\v12.6'"
