"""A cloned repository's ``./.venv`` is not run unless it is a real venv (issue 27, High).

Before, ``check``, ``report``, ``explain`` and ``fix --dry-run`` ran whatever ``./.venv/bin/python`` the
working folder held, without asking: a script there ran the repository's code, and a launcher there could name
another interpreter for the plan. Now an interpreter found in the working folder runs only when it is a venv
(``pyvenv.cfg``, ``bin/python`` a symlink to an interpreter outside the folder); otherwise one line on stderr
says it was refused and the next candidate (python3 on PATH) is inspected instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import base_env, run_cli, write_exe

pytestmark = [pytest.mark.hostile, pytest.mark.skipif(os.name != "posix", reason="POSIX venv layout")]

COMMANDS = [
    ["check", "--no-smoke"],
    ["report"],
    ["explain", "CUDA error: no kernel image is available for execution on the device"],
    ["fix", "--dry-run", "--no-smoke"],
]


def _clone(tmp_path: Path, world, kind: str) -> tuple[Path, Path]:
    """A working folder whose .venv/bin/python is hostile: a script that leaves a mark (``script``), or a
    launcher that leaves a mark and then runs the fake machine's torch venv (``launcher``)."""
    repo = tmp_path / "repo"
    mark = tmp_path / "ran"
    (repo / ".venv").mkdir(parents=True)
    (repo / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    body = f'#!/bin/sh\necho ran >> "{mark}"\n'
    if kind == "launcher":
        body += f'exec "{world.py}" "$@"\n'
    write_exe(repo / ".venv" / "bin" / "python", body)
    return repo, mark


@pytest.mark.parametrize("kind", ["script", "launcher"])
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_a_script_in_the_working_folder_never_runs(world, tmp_path, args, kind):
    repo, mark = _clone(tmp_path, world, kind)
    res = run_cli(args, base_env(world), cwd=repo, limit=60)
    assert res.returncode not in (3, None) and res.returncode >= 0, res.summary()
    assert not mark.exists(), f".venv/bin/python ran:\n{res.summary()}"
    assert "not running ./.venv/ of the working folder" in res.err, res.summary()
    assert len([line for line in res.err.splitlines() if "./.venv" in line]) == 1, res.summary()
    assert str(world.py) not in res.out, res.summary()


def test_a_real_venv_in_the_working_folder_is_chosen_and_said(world, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(repo / ".venv")], check=True)
    res = run_cli(["check", "--no-smoke"], base_env(world), cwd=repo, limit=60)
    assert res.returncode in (0, 1), res.summary()
    target = os.path.realpath(repo / ".venv" / "bin" / "python")
    said = " ".join(res.out.split())
    assert f"chosen: ./.venv in the working folder (a venv whose python is {target})" in said, res.summary()
    assert "not running ./.venv" not in res.err


def test_user_files_named_like_tilde_are_not_pip_leftovers(world, tmp_path):
    """``~$Report.docx`` (an Office lock file), ``~notes/`` and a stray ``*.dist-info`` in a folder on
    PYTHONPATH are the user's: check never offers to ``rm -rf`` them (before: interrupted-install-leftovers
    did)."""
    work = tmp_path / "work"
    (work / "~notes").mkdir(parents=True)
    (work / "~notes" / "todo.txt").write_text("mine\n")
    (work / "~$Report.docx").write_text("lock\n")
    (work / "draft-1.0.dist-info").mkdir()
    env = base_env(world)
    env["PYTHONPATH"] = f"{env['PYTHONPATH']}{os.pathsep}."
    res = run_cli(["check", "--no-smoke", "--json", "--python", str(world.py)], env, cwd=work, limit=60)
    assert res.returncode == 1, res.summary()
    import json

    ids = [f["id"] for f in json.loads(res.out)["findings"]]
    assert "interrupted-install-leftovers" not in ids, res.summary()
    assert "~notes" not in res.out and "Report.docx" not in res.out, res.summary()


def test_a_cloned_pyproject_that_changes_the_verdict_is_named_and_fix_agrees(world, tmp_path):
    """``[tool.torchdoctor] ignore`` in the working folder's pyproject.toml drops a finding: check names the
    file that did it, and fix reads the same file (before: check said healthy, fix planned an install)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[tool.torchdoctor]\nignore = ["gpu-arch-unsupported"]\n')
    env = base_env(world)
    check = run_cli(["check", "--no-smoke", "--python", str(world.py)], env, cwd=repo, limit=60)
    fix = run_cli(["fix", "--dry-run", "--no-smoke", "--python", str(world.py)], env, cwd=repo, limit=60)
    for res in (check, fix):
        assert res.returncode in (0, 1), res.summary()
        assert (
            f"{repo / 'pyproject.toml'} [tool.torchdoctor] applies: ignore = ['gpu-arch-unsupported']"
            in res.err
        )
    assert check.returncode == fix.returncode == 0, check.summary() + "\n" + fix.summary()
    assert "pip install" not in fix.out, fix.summary()
