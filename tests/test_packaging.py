"""What an install from this checkout contains (`pipx install .`, `uv tool install .`, a wheel): every
package under doctor/, so that a non-editable install does not fail at its first import; the metadata an
index shows; and (slow) a real build, `twine check` and the wheel run from a clean venv."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # the backport pyproject.toml declares for 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def test_every_package_under_doctor_is_installed():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "doctor").rglob("__init__.py")}
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert "doctor.compat_tables" in listed and (REPO / "compat_tables" / "pytorch.json").is_file()


def test_tomli_is_declared_for_the_pythons_without_tomllib():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert config["project"]["requires-python"] == ">=3.10"
    assert any(d.replace(" ", "").startswith('tomli>=1.1;python_version<"3.11"') for d in
               config["project"]["dependencies"])


def test_the_message_catalogs_are_package_data():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "doctor.locale" in config["tool"]["setuptools"]["packages"]
    assert "*.json" in config["tool"]["setuptools"]["package-data"]["doctor.locale"]
    assert (REPO / "doctor" / "locale" / "zh.json").is_file()


def test_the_project_metadata_is_ready_for_an_index():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "BSD-3-Clause"  # an SPDX expression (setuptools>=77)
    assert project["readme"] == {"file": "README.md", "content-type": "text/markdown"}
    assert project["authors"] and project["keywords"]
    assert any(c.startswith("Programming Language :: Python :: 3.10") for c in project["classifiers"])
    # Only real addresses: none is known yet, so none is invented.
    for url in project.get("urls", {}).values():
        assert "example" not in url and "<" not in url


@pytest.mark.slow
def test_the_built_wheel_and_sdist_pass_twine_and_the_wheel_runs_in_a_clean_venv(tmp_path):
    """What an index would get: `python -m build` makes an sdist and a wheel (the wheel from the sdist, so
    a file missing from the sdist fails here), `twine check` accepts both, and the wheel installed into a
    fresh venv runs `torchdoctor check`."""
    pytest.importorskip("build", reason="needs `build` (the test extras install it)")
    pytest.importorskip("twine", reason="needs `twine` (the test extras install it)")
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = dist.glob("torchdoctor-*.whl")
    (sdist,) = dist.glob("torchdoctor-*.tar.gz")
    twine = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
                           capture_output=True, text=True, timeout=120)
    assert twine.returncode == 0, twine.stdout + twine.stderr

    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"compat_tables/pytorch.json", "compat_tables/signatures.json", "doctor/locale/zh.json",
            "README.md", "pyproject.toml"} <= names
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
    assert {"doctor/compat_tables/pytorch.json", "doctor/compat_tables/signatures.json",
            "doctor/locale/zh.json"} <= names

    venv = tmp_path / "clean"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", str(wheel)],
                   check=True, capture_output=True, timeout=600)
    # Outside the checkout and with no venv active, so that nothing comes from the source tree.
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH")}
    where = subprocess.run([str(bindir / "python"), "-c", "import doctor; print(doctor.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr
    for lang in ("en", "zh"):
        run = subprocess.run([str(bindir / "torchdoctor"), "check", "--no-smoke", "--lang", lang],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        # 1 where the interpreter it finds has no torch: the report is what matters, not the verdict.
        assert run.returncode in (0, 1), run.stdout + run.stderr
        assert run.stdout.startswith("torchdoctor "), run.stdout + run.stderr
        assert "Traceback" not in run.stdout + run.stderr
