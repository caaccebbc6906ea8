"""doctor/probes/project.py reads uv.lock and poetry.lock as TOML: the resolved torch versions, and a file
that is not TOML is a problem of the project section, never a traceback."""

from __future__ import annotations

import pytest

from doctor.probes.project import parse_lock, probe_project, read_project

UV_LOCK = '''version = 1
requires-python = ">=3.10"

[[package]]
name = "numpy"
version = "2.0.0"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "torch"
version = "2.5.1+cu124"
source = { registry = "https://download.pytorch.org/whl/cu124" }
dependencies = [
    { name = "filelock" },
]

[[package]]
name = "Torch"
version = "2.5.1"
source = { registry = "https://pypi.org/simple" }
resolution-markers = ["sys_platform == 'darwin'"]

[[package]]
name = "torch"
source = { editable = "vendor/torch" }
'''

POETRY_LOCK = '''[[package]]
name = "torch"
version = "2.3.1"
description = "Tensors and Dynamic neural networks in Python with strong GPU acceleration"
optional = false
python-versions = ">=3.8.0"
files = [
    {file = "torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl", hash = "sha256:00"},
]

[metadata]
lock-version = "2.0"
'''


def test_every_resolved_torch_of_a_lock_file_in_its_order():
    assert [(p.spec, p.source) for p in parse_lock(UV_LOCK, "uv.lock")] == [
        ("==2.5.1+cu124", "uv.lock"), ("==2.5.1", "uv.lock")]  # one without a version resolves nothing
    poetry = parse_lock(POETRY_LOCK, "poetry.lock")
    assert [(p.spec, p.source) for p in poetry] == [("==2.3.1", "poetry.lock")]
    assert parse_lock('version = 1\npackage = "torch"\n', "uv.lock") == []  # not a list of tables


@pytest.mark.parametrize("text", ['[[package]]\nname = "torch"\nversion = "2.5.1"\nname = "x"\n',
                                  '[[package]\nname = "torch"\n', "a = " + "[" * 100_000, "\x00"])
def test_a_lock_file_that_is_not_toml_is_a_problem_not_a_traceback(tmp_path, text):
    (tmp_path / "uv.lock").write_text(text, encoding="utf-8")
    project = read_project(tmp_path)
    assert project.files == ["uv.lock"] and project.pins == []
    (problem,) = project.problems
    assert problem.startswith("uv.lock: invalid TOML: ") and "\n" not in problem
    problems = []
    assert parse_lock(text, "poetry.lock", problems) == []
    assert problems[0].startswith("poetry.lock: invalid TOML")


def test_the_probe_reads_a_lock_beside_the_environment(tmp_path):
    (tmp_path / "poetry.lock").write_text(POETRY_LOCK, encoding="utf-8")
    (tmp_path / ".venv").mkdir()
    project = probe_project(str(tmp_path / ".venv"), "/", "venv")
    assert project.why is None
    assert [(p.spec, p.source) for p in project.pins] == [("==2.3.1", "poetry.lock")]
    assert project.problems == []
