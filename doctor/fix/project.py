"""uv and poetry projects: their lock file is the truth about the environment, so fix changes
pyproject.toml instead (it prints the change) unless --force. Which project the target environment
belongs to, and the change that pins the plan's wheels through it."""

from __future__ import annotations

import os
import re
from pathlib import Path

from doctor.model.files import read_text
from doctor.plan.commands import InstallSource

LOCK_FILES = {"uv": "uv.lock", "poetry": "poetry.lock"}


def detect_project(cwd: Path) -> str | None:
    """'uv' or 'poetry' when the folder is a project that pins its environment in a lock file."""
    for kind, lock in LOCK_FILES.items():  # uv first
        if (cwd / lock).is_file():
            return kind
    text = read_text(cwd / "pyproject.toml", 4 << 20)  # regular and bounded: a FIFO named so is no project
    if text is None:
        return None
    if re.search(r"^\[+tool\.uv[.\]]", text, re.M):
        return "uv"
    if re.search(r"^\[+tool\.poetry[.\]]", text, re.M):
        return "poetry"
    return None


def target_project(prefix: str | None, cwd: Path, env: dict | None = None) -> str | None:
    """The uv/poetry project whose environment ``prefix`` is, or None.

    First the folder that holds the environment (a project's ``.venv`` lives in the project); then the
    working directory, but only when the environment is plausibly its own: inside it, in poetry's cache
    of virtualenvs, or named by ``UV_PROJECT_ENVIRONMENT``. ``fix --python ~/other/.venv`` run from
    inside an unrelated project is not that project's business."""
    if not prefix:
        return detect_project(cwd)
    where = Path(prefix)
    kind = detect_project(where.parent)
    if kind:
        return kind
    here = _real(cwd)
    target = _real(where)
    uv_env = (env or {}).get("UV_PROJECT_ENVIRONMENT")
    owned = (
        target == here
        or here in target.parents
        or (where.parent.name == "virtualenvs" and "pypoetry" in (p.lower() for p in where.parts))
        or (bool(uv_env) and _real(cwd / Path(uv_env).expanduser()) == target)
    )
    return detect_project(cwd) if owned else None


def _real(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return Path(os.path.abspath(path))


def project_packages(install) -> list[str]:
    """torch, and the companions the environment has (all three when torch is not installed yet)."""
    return ["torch"] + [
        n for n in ("torchvision", "torchaudio") if getattr(install, n) is not None or install.torch is None
    ]


def project_change(kind: str, target: dict, packages: list[str], source: InstallSource) -> str:
    """The pyproject.toml change that pins the plan's wheels through the project (uv or poetry)."""
    variant = target["variant"]
    name = f"pytorch-{variant}"
    url = source.find_links if source.find_links and not source.base_given else target.get("index_url")
    versions = {p: target.get(p) for p in packages if target.get(p)}
    if kind == "uv":
        flat = '\nformat = "flat"' if url == source.find_links else ""
        lines = [
            "[[tool.uv.index]]",
            f'name = "{name}"',
            f'url = "{url}"{flat}',
            "explicit = true",
            "",
            "[tool.uv.sources]",
        ]
        lines += [f'{p} = {{ index = "{name}" }}' for p in versions]
        lines += ["", "# and in [project] dependencies:"]
        lines += [f'#   "{p}=={v}+{variant}",' for p, v in versions.items()]
        lines += ["# then: uv lock && uv sync"]
    else:
        lines = [
            "[[tool.poetry.source]]",
            f'name = "{name}"',
            f'url = "{url}"',
            'priority = "explicit"',
            "",
            "[tool.poetry.dependencies]",
        ]
        lines += [f'{p} = {{version = "=={v}+{variant}", source = "{name}"}}' for p, v in versions.items()]
        lines += ["# then: poetry lock && poetry install"]
    return "\n".join(lines)
