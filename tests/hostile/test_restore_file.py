"""The restore file on a full disk, and beside a venv whose path holds a newline (issue 27), through the real
CLI and real pip (fixworld.py's small index).

Before: a full disk at the state folder or at ``--restore-file`` was an internal error (exit 3) that left a
0-byte file blocking the name; a newline in the venv's path broke the file. Now: one line, exit 2, before
anything is installed, and no file left; the file of a newline path holds only comments and exact pins.
The full disk is a 16 KiB tmpfs (mounted where this runs as root with the right to mount; skipped elsewhere:
tests/test_fix_transaction.py fakes ENOSPC at the write for every machine).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path

import pytest
from fixworld import OLD, cli_env, fresh_venv, get_fix_world, has_builds, installed
from hostile import base_env, run_cli

pytestmark = [pytest.mark.hostile, pytest.mark.slow]


@pytest.fixture(scope="module")
def world():
    found = get_fix_world()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@contextlib.contextmanager
def full_disk(folder: Path):
    folder.mkdir(parents=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(folder)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        try:
            with open(folder / "filler", "wb") as handle:
                while True:
                    handle.write(b"x" * 1024)
                    handle.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _fix(world, root: Path, *more: str, env_extra: dict | None = None, venv_name: str = "venv"):
    venv = fresh_venv(world, root / venv_name)
    env = cli_env(world, base_env(None))
    env.update(env_extra or {})
    args = ["fix", "--yes", "--no-smoke", "--python", str(venv / "bin" / "python"),
            "--index-url-base", world.small.as_uri(), *more]
    return venv, run_cli(args, env, cwd=root, limit=240, needles=(str(venv),))


@pytest.mark.skipif(os.name != "posix", reason="tmpfs")
@pytest.mark.parametrize("where", ["restore-file", "state-folder"])
def test_a_full_disk_is_one_line_before_anything_is_installed(world, tmp_path, where):
    with full_disk(tmp_path / "full") as full:
        if where == "restore-file":
            venv, res = _fix(world, tmp_path, "--restore-file", str(full / "restore.txt"))
        else:
            venv, res = _fix(world, tmp_path, env_extra={"XDG_STATE_HOME": str(full / "state")})
        left = sorted(p.name for p in full.rglob("*") if p.name != "filler")
    assert res.returncode == 2, res.summary()
    assert "Traceback" not in res.text and "No space left on device" in res.err, res.summary()
    assert [line for line in res.err.splitlines() if "restore file" in line][:1], res.summary()
    assert left in ([], ["state"], ["state", "torchdoctor"], ["restore", "state", "torchdoctor"]), left
    assert not [name for name in left if name.endswith(".txt") or name.endswith(".tmp")], left
    assert has_builds(installed(venv), OLD), "the venv changed although no restore file could be written"


def test_a_venv_path_with_a_newline_gets_a_whole_restore_file(world, tmp_path):
    restore = tmp_path / "restore.txt"
    venv, res = _fix(world, tmp_path, "--restore-file", str(restore), venv_name="new\nline")
    assert res.returncode in (0, 1, 5), res.summary()
    assert restore.is_file(), res.summary()
    for line in restore.read_text().splitlines():
        assert line.startswith("#") or "==" in line.split("#")[0] and " " not in line.split("  #")[0], line
    assert "\n" not in restore.read_text().splitlines()[2]
