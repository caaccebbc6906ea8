"""A target interpreter whose start-up code talks (a sitecustomize printing a banner, and a JSON-looking line)
is still fixed (issue 27): before, `fix` said "no working pip" (pip's version was looked for on the first line
only) and could not list the packages (the whole stdout was parsed as JSON). Real pip, fixworld.py's small
index.
"""

from __future__ import annotations

import pytest
from fakeenv import site_packages
from fixworld import NEW, cli_env, fresh_venv, get_fix_world, has_builds, installed, pip_check
from hostile import base_env, run_cli

from doctor.fix.environment import last_json, parse_pip_version

pytestmark = [pytest.mark.hostile, pytest.mark.slow]


def test_start_up_chatter_is_not_taken_for_pip_or_its_answers():
    chatter = "Welcome to the lab cluster!\n{\"motd\": 1}\n"
    assert parse_pip_version(chatter + "pip 23.2.1 from /x/pip (python 3.12)\n") == (23, 2, 1)
    assert last_json(chatter + '[["torch", "2.6.0"]]\n') == [["torch", "2.6.0"]]


def test_fix_works_beside_a_chatty_sitecustomize(tmp_path):
    world = get_fix_world()
    if isinstance(world, str):
        pytest.skip(world)
    venv = fresh_venv(world, tmp_path / "venv")
    (site_packages(venv) / "sitecustomize.py").write_text(
        "print('Welcome to the lab cluster!')\nprint('{\"motd\": 1}')\n"
    )
    args = ["fix", "--yes", "--no-smoke", "--python", str(venv / "bin" / "python"),
            "--index-url-base", world.small.as_uri(), "--restore-file", str(tmp_path / "restore.txt")]
    res = run_cli(args, cli_env(world, base_env(None)), cwd=tmp_path, limit=240, needles=(str(venv),))
    assert "no working pip" not in res.err and "could not list" not in res.err, res.summary()
    assert res.returncode == 0, res.summary()
    assert has_builds(installed(venv), NEW) and pip_check(venv)[0] == 0
