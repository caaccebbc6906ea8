"""The target project's pins of torch: what its files say, read as text (never executed, never resolved).

Which folder is the project: the one that holds the target environment (a project's ``.venv`` lives in it),
else the working folder when the environment is plausibly its own (inside it, or the interpreter is not a
virtual environment at all); a project whose files mention no torch is not a project with pins.

Which files, each read up to ``LIMIT`` bytes: ``requirements*.txt`` (at most ``MAX_REQUIREMENTS`` of them, no
``-r`` include followed), ``pyproject.toml`` (``[project] dependencies`` and ``optional-dependencies``,
``[dependency-groups]``, ``[tool.poetry.dependencies]``), ``uv.lock`` and ``poetry.lock`` (the resolved
``torch`` version); the TOML files are read with tomllib (tomli before Python 3.11). Every statement naming
torch becomes a ``TorchPin`` with where it was; doctor/compat/pins.py combines them. What cannot be read is a
problem in the section, never an exception.
"""

from __future__ import annotations

import os
import re

from doctor.model.files import toml_module
from doctor.model.snapshot import Project, TorchPin

LIMIT = 8 << 20  # bytes read per file: lock files of large projects run to a few MiB
MAX_REQUIREMENTS = 16
PIN_FILES = ("uv.lock", "poetry.lock", "pyproject.toml")


def probe_project(prefix: str | None, cwd: str, env_kind: str = "") -> Project:
    """The pins of the project the target environment belongs to. Never raises."""
    try:
        folder = project_folder(prefix, cwd, env_kind)
        if folder is None:
            return Project(why="no project folder: neither the environment's folder nor the working folder "
                "holds "
                           "requirements*.txt, pyproject.toml, uv.lock or poetry.lock")
        return read_project(folder)
    except Exception as exc:  # noqa: BLE001 - a probe bug becomes a fact, never a dead run
        return Project(why=f"internal error in the project probe: {type(exc).__name__}: {exc}")


def _has_pin_files(folder: str) -> bool:
    try:
        return any(os.path.isfile(os.path.join(folder, name)) for name in PIN_FILES) or any(
            _is_requirements(name) for name in os.listdir(folder))
    except OSError:
        return False


def _is_requirements(name: str) -> bool:
    """``requirements*.txt``, as pathlib's glob matches it (without compiling a pattern on every check)."""
    name = os.path.normcase(name)  # glob ignores case where the file system does (Windows)
    return name.startswith("requirements") and name.endswith(".txt")


def project_folder(prefix: str | None, cwd: str, env_kind: str = "") -> str | None:
    """The environment's folder when it holds project files; else the working folder when the environment is
    inside it or is no virtual environment (a system or conda Python serves whatever folder it runs in)."""
    here = os.path.realpath(cwd)
    if prefix:
        target = os.path.realpath(prefix)
        holder = os.path.dirname(target)
        if _has_pin_files(holder):
            return holder
        if not (_within(target, here) or env_kind not in ("venv", "uv-venv")):
            return None
    return here if _has_pin_files(here) else None


def _within(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or below it (both real, absolute paths; case as the file system compares it)."""
    path, folder = os.path.normcase(path), os.path.normcase(folder)
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # another drive (Windows)
        return False


def read_project(folder: str | os.PathLike) -> Project:
    folder = os.fspath(folder)
    project = Project(folder=folder)
    for name in ("uv.lock", "poetry.lock"):
        text = _read(os.path.join(folder, name), project)
        if text is not None:
            project.files.append(name)
            project.pins += parse_lock(text, name, project.problems)
    text = _read(os.path.join(folder, "pyproject.toml"), project)
    if text is not None:
        project.files.append("pyproject.toml")
        project.pins += parse_pyproject(text, project.problems)
    try:
        requirements = sorted(
            name
            for name in os.listdir(folder)
            if _is_requirements(name) and os.path.isfile(os.path.join(folder, name))
        )[:MAX_REQUIREMENTS]
    except OSError as exc:
        requirements = []
        project.problems.append(f"cannot list {folder}: {exc.strerror or exc}")
    for name in requirements:
        text = _read(os.path.join(folder, name), project)
        if text is not None:
            project.files.append(name)
            project.pins += parse_requirements(text, name)
    return project


def _read(path: str, project: Project) -> str | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(LIMIT + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        project.problems.append(f"cannot read {os.path.basename(path)}: {exc.strerror or exc}")
        return None
    if len(data) > LIMIT:
        project.problems.append(f"{os.path.basename(path)}: only the first {LIMIT >> 20} MiB were read")
        data = data[:LIMIT]
    return data.decode("utf-8", errors="replace")


# --- parsers (pure) --------------------------------------------------------------------------------------


def _requirement(line: str, source: str) -> TorchPin | None:
    """A PEP 508 line naming torch, as a pin; None for anything else (or unreadable)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(line)
    except InvalidRequirement:
        return None
    if req.name.lower().replace("_", "-") != "torch":
        return None
    return TorchPin(str(req.specifier), source, str(req.marker) if req.marker else None)


def parse_requirements(text: str, name: str = "requirements.txt") -> list[TorchPin]:
    """The torch lines of a requirements file (options such as ``-r``, ``--index-url`` and hashes are
    skipped)."""
    pins = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = re.split(r"\s+#", raw, maxsplit=1)[0].strip()
        line = re.split(r"\s+--hash", line, maxsplit=1)[0].strip().rstrip("\\").strip()
        if not line or line.startswith(("-", "#")):
            continue
        pin = _requirement(line, f"{name}:{number}")
        if pin is not None:
            pins.append(pin)
    return pins


def _parse_toml(text: str, name: str, problems: list[str] | None) -> dict | None:
    """The TOML document ``text`` (the file ``name``); None, with the reason in ``problems``, when it cannot
    be read."""
    tomllib = toml_module()
    if tomllib is None:  # an install that skipped the tomli dependency on 3.10
        if problems is not None:
            problems.append(f"{name}: not read: Python 3.10 needs the tomli package")
        return None
    try:
        return tomllib.loads(text)
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError is a ValueError
        if problems is not None:
            why = exc if isinstance(exc, ValueError) else "nested too deeply"
            problems.append(f"{name}: invalid TOML: {why}")
        return None


def parse_lock(text: str, name: str, problems: list[str] | None = None) -> list[TorchPin]:
    """The resolved torch versions of a uv.lock or poetry.lock: its ``[[package]]`` tables named torch."""
    data = _parse_toml(text, name, problems)
    packages = data.get("package") if data is not None else None
    if not isinstance(packages, list):
        return []
    return [TorchPin(f"=={p['version']}", name) for p in packages if isinstance(p, dict)
            and str(p.get("name", "")).lower() == "torch" and isinstance(p.get("version"), str)]


def parse_pyproject(text: str, problems: list[str] | None = None) -> list[TorchPin]:
    """torch in ``[project] dependencies`` / ``optional-dependencies``, ``[dependency-groups]`` and
    ``[tool.poetry.dependencies]`` (poetry's ``^``, ``~`` and bare versions are translated to PEP 440)."""
    data = _parse_toml(text, "pyproject.toml", problems)
    if data is None:
        return []
    pins: list[TorchPin] = []
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    groups = [("[project] dependencies", project.get("dependencies"))]
    for key, value in (project.get("optional-dependencies") or {}).items() if isinstance(
            project.get("optional-dependencies"), dict) else ():
        groups.append((f"[project.optional-dependencies] {key}", value))
    for key, value in (data.get("dependency-groups") or {}).items() if isinstance(
            data.get("dependency-groups"), dict) else ():
        groups.append((f"[dependency-groups] {key}", value))
    for where, lines in groups:
        for line in lines if isinstance(lines, list) else ():
            pin = _requirement(line, f"pyproject.toml {where}") if isinstance(line, str) else None
            if pin is not None:
                pins.append(pin)
    poetry = ((data.get("tool") or {}).get("poetry") or {}) if isinstance(data.get("tool"), dict) else {}
    deps = poetry.get("dependencies") if isinstance(poetry, dict) else None
    if isinstance(deps, dict) and "torch" in deps:
        value = deps["torch"]
        version = value.get("version") if isinstance(value, dict) else value
        spec = poetry_spec(version) if isinstance(version, str) else None
        if spec is not None:
            pins.append(TorchPin(spec, "pyproject.toml [tool.poetry.dependencies]"))
    return pins


def poetry_spec(text: str) -> str | None:
    """Poetry's constraint as a PEP 440 specifier: "2.3.1" -> "==2.3.1", "^2.3" -> ">=2.3,<3.0",
    "~2.3.1" -> ">=2.3.1,<2.4"; PEP 440 text stays; "*" means none."""
    text = text.strip()
    if not text or text == "*":
        return None
    if re.fullmatch(r"\d+(\.\d+)*", text):
        return f"=={text}"
    match = re.fullmatch(r"([\^~])(\d+)(?:\.(\d+))?(?:\.(\d+))?", text)
    if match:
        op, major, minor, patch = match.groups()
        low = ".".join(p for p in (major, minor, patch) if p is not None)
        if op == "^":
            high = f"{int(major) + 1}.0" if int(major) > 0 or minor is None else f"0.{int(minor) + 1}"
        else:
            high = f"{major}.{int(minor) + 1}" if minor is not None else f"{int(major) + 1}.0"
        return f">={low},<{high}"
    return text
