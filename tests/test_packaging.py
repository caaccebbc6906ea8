"""What an install from this checkout contains (`pipx install .`, `uv tool install .`, a wheel): every
package under doctor/, so that a non-editable install does not fail at its first import."""

from __future__ import annotations

import sys
from pathlib import Path

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
    assert "locale/*.json" in config["tool"]["setuptools"]["package-data"]["doctor"]
    assert (REPO / "doctor" / "locale" / "zh.json").is_file()
