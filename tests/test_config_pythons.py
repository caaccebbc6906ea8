"""Runs on every Python it declares, and a configuration that applies is never ignored.

The Python 3.10 test installs torchdoctor from this checkout (not editable: what `pipx install .` does) into
a real 3.10 venv, with the dependencies pyproject.toml declares for it (tomli), and runs `check` in a
folder that has a pyproject.toml: on 3.10 that needs the tomli backport of tomllib.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import find_python, make_fake_env

REPO = Path(__file__).resolve().parents[1]


def run(argv, cwd, env_extra=None, timeout=120):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH")}
    env.update(TORCHDOCTOR_NVML="0", NO_COLOR="1", **(env_extra or {}))
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def cli(args, cwd, env_extra=None):
    return run([sys.executable, "-m", "doctor", *args], cwd, dict(env_extra or {}, PYTHONPATH=str(REPO)))


@pytest.fixture
def machine(tmp_path):
    sysroot = tmp_path / "sysroot"
    sysroot.mkdir()
    python = make_fake_env(tmp_path / "venv", torch="2.13.0+cpu", cuda=None)
    project = tmp_path / "project"
    project.mkdir()
    return python, project, {"TORCHDOCTOR_SYSROOT": str(sysroot)}


# --- [tool.torchdoctor] errors are exit 2, naming the file, the key and what was expected --------------


@pytest.mark.parametrize(("body", "needles"), [
    ("[tool.torchdoctor]\nmin-gpu = 1\n", ["unknown key 'min-gpu'", "did you mean 'min-gpus'"]),
    ("[tool.torchdoctor]\nmin-gpus = '1'\n", ["min-gpus must be an integer, got '1'"]),
    ("[tool.torchdoctor]\nrequire = 'tpu'\n", ["require 'tpu' is not one of cuda, rocm, xpu, mps, gpu, cpu"]),
    ("[tool.torchdoctor\nmin-gpus = 1\n", ["invalid TOML", "line 1"]),
    ("[tool.torchdoctor]\nignore = "
        "['shm-to-small']\n", ["ignore shm-to-small", "did you mean shm-too-small"]),
])
def test_a_broken_config_in_the_working_folder_is_exit_2(machine, body, needles):
    python, project, env = machine
    (project / "pyproject.toml").write_text(body)
    res = cli(["check", "--no-smoke", "--python", str(python)], project, env)
    assert res.returncode == 2, res.stdout + res.stderr
    assert str(project / "pyproject.toml") in res.stderr  # the file, by its full path
    for needle in needles:
        assert needle in res.stderr
    assert res.stdout == "" and "Traceback" not in res.stderr


@pytest.mark.parametrize("body", [
    "[project]\nname = 'someone-else'\n",  # a pyproject.toml without the table is simply not a config
    "this is [not toml\n",  # someone else's broken file that never mentions torchdoctor is not ours
])
def test_a_pyproject_that_is_not_ours_is_not_a_config(machine, body):
    python, project, env = machine
    (project / "pyproject.toml").write_text(body)
    res = cli(["check", "--no-smoke", "--json", "--python", str(python)], project, env)
    assert res.returncode == 0, res.stderr
    assert "requirements" not in {c["rule"] for c in json.loads(res.stdout)["checks"]}


def test_a_valid_config_is_enforced(machine):
    python, project, env = machine
    (project / "pyproject.toml").write_text("[tool.torchdoctor]\nrequire = ['gpu']\n")
    res = cli(["check", "--no-smoke", "--json", "--python", str(python)], project, env)
    assert res.returncode == 4
    assert "requirement-gpu" in {f["id"] for f in json.loads(res.stdout)["findings"]}


# --- the lowest declared Python --------------------------------------------------------------------------


def declared_minimum() -> str:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if ln.startswith("requires-python"))
    return line.split(">=")[1].strip().strip('"')


@pytest.fixture(scope="module")
def lowest_python_tool(tmp_path_factory):
    """torchdoctor installed from this checkout into a venv of the lowest Python pyproject.toml declares."""
    version = declared_minimum()
    base = find_python(version)
    if base is None:
        pytest.skip(f"needs a real Python {version} (pyenv or python{version} on PATH)")
    root = tmp_path_factory.mktemp("lowest")
    source = root / "src"
    source.mkdir()
    for name in ("doctor", "compat_tables"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    venv = root / "venv"
    subprocess.run([base, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    python = venv / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        pytest.fail(f"pip install into Python {version} failed:\n{done.stdout}\n{done.stderr}")
    return version, python, venv / "bin" / "torchdoctor"


@pytest.mark.slow
def test_the_lowest_declared_python_runs_check_in_a_project_folder(lowest_python_tool, machine):
    version, python, tool = lowest_python_tool
    target, project, env = machine
    assert run([str(python), "-c", "import sys; print(sys.version)"], project).stdout.startswith(version)
    if tuple(int(x) for x in version.split(".")) < (3, 11):
        # the backport came with the install: pyproject.toml declares it for this Python
        assert run([str(python), "-c", "import tomli"], project).returncode == 0
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.torchdoctor]\nrequire = '
        '["cpu"]\n')
    res = run([str(tool), "check", "--no-smoke", "--json", "--python", str(target)], project, env)
    assert res.returncode == 0, res.stdout + res.stderr
    checks = {c["rule"]: c["status"] for c in json.loads(res.stdout)["checks"]}
    assert checks["requirements"] == "passed"  # [tool.torchdoctor] was read, on Python 3.10
    (project / "pyproject.toml").write_text("[tool.torchdoctor]\nmin-gpu = 1\n")
    res = run([str(tool), "check", "--no-smoke", "--python", str(target)], project, env)
    assert res.returncode == 2 and "unknown key 'min-gpu'" in res.stderr and "Traceback" not in res.stderr
