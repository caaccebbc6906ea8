"""torchdoctor's own Python does not run what the environment's PYTHONPATH holds (issue 27).

A project folder on PYTHONPATH with a ``json.py`` that never returns, or a ``typer.py`` that prints and fails,
used to hang or crash torchdoctor itself. Such a run now starts again with ``-E`` (doctor/cli/__init__.py),
and the target interpreter still gets PYTHONPATH, as the user's ``import torch`` does. (A module that Python's
own start-up imports, ``re`` or ``importlib`` through a ``.pth`` file, runs before any of torchdoctor can: run
torchdoctor with ``python -I -m doctor`` where PYTHONPATH cannot be trusted; docs/safety.md.)
"""

from __future__ import annotations

import os

import pytest
from hostile import base_env, run_cli

pytestmark = pytest.mark.hostile


@pytest.mark.parametrize("args", [["rules", "--format", "json"], ["check", "--no-smoke", "--json"]])
def test_modules_on_pythonpath_do_not_run_in_torchdoctor(world, tmp_path, args):
    shadow = tmp_path / "project"
    shadow.mkdir()
    if args[0] == "rules":  # the target imports json too (its inspector): a hang there is the target's, said
        (shadow / "json.py").write_text("import time\ntime.sleep(3600)\n")
    (shadow / "typer.py").write_text("print('typer from the project')\nraise SystemExit(7)\n")
    env = base_env(world)
    env["PYTHONPATH"] = f"{env['PYTHONPATH']}{os.pathsep}{shadow}"
    more = ["--python", str(world.py)] if args[0] == "check" else []
    res = run_cli([*args, *more], env, cwd=tmp_path, limit=30)
    assert not res.timed_out and res.returncode in (0, 1), res.summary()
    assert "typer from the project" not in res.text, res.summary()
    assert res.out.lstrip().startswith("{"), res.summary()


def test_the_runner_closes_the_pipes_of_every_child():
    """``run`` and ``stream_run`` close their ends of a child's pipes when it is done (before: left to the
    garbage collector, with a ResourceWarning each, a few descriptors per command of a long fix)."""
    import gc
    import sys
    import warnings

    from doctor.runner import run, stream_run

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(5):
            run([sys.executable, "-c", "print('x')"], timeout=30)
            run([sys.executable, "-c", "import sys; print(sys.stdin.read())"], timeout=30, stdin="in")
            stream_run([sys.executable, "-c", "print('y')"], 30, lambda line: None)
        gc.collect()
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert not unclosed, unclosed[:3]


def test_an_index_from_the_environment_is_attributed(world, tmp_path):
    """TORCHDOCTOR_INDEX_URL_BASE (a profile, a CI secret) changes every install command: said once, with
    where it came from and without the URL's credentials; not when --index-url-base gave it."""
    env = base_env(world, TORCHDOCTOR_INDEX_URL_BASE="https://ci:s3cret@mirror.example.org/whl")
    res = run_cli(["check", "--no-smoke", "--python", str(world.py)], env, cwd=tmp_path, limit=60)
    assert res.returncode == 1, res.summary()
    line = "the index is https://***@mirror.example.org/whl, from TORCHDOCTOR_INDEX_URL_BASE"
    assert res.err.count(line) == 1 and "s3cret" not in res.err, res.summary()
    given = run_cli(["check", "--no-smoke", "--python", str(world.py), "--index-url-base",
                     "https://ci:s3cret@mirror.example.org/whl"], env, cwd=tmp_path, limit=60)
    assert "from TORCHDOCTOR_INDEX_URL_BASE" not in given.err, given.summary()


@pytest.mark.skipif(os.name != "posix", reason="fork and setsid")
def test_daemons_the_target_starts_do_not_outlive_the_run(world, tmp_path):
    """A target whose start-up code (a sitecustomize) starts a daemon in a session of its own, out of reach of
    the process-group kill: gone when torchdoctor exits (before: it stayed)."""
    from fakeenv import make_fake_env, site_packages

    py = make_fake_env(tmp_path / "venv", torch="2.6.0+cu126", cuda="12.6")
    (site_packages(tmp_path / "venv") / "sitecustomize.py").write_text(
        "import os\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execv('/bin/sleep', ['sleep', '3600'])\n"
        "    os._exit(0)\n"
        "os.wait()\n"
    )
    res = run_cli(["check", "--no-smoke", "--python", str(py)], base_env(world), cwd=tmp_path, limit=60)
    assert res.returncode == 1, res.summary()
    assert not res.leftovers, res.leftovers
