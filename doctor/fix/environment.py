"""What the installer sees of the target environment, read through the runner (I/O): the installed
distributions, pip's version and configuration, where uv is (what uv runs with: doctor/fix/sources.py);
and this machine's side: how long a step may run, which shell syntax its commands are shown in.
Used only while carrying out a fix."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from doctor.errors import DoctorError
from doctor.model.files import read_text
from doctor.model.versions import normalize_name
from doctor.plan.commands import PIP, UV, ensurepip_argv, pip_argv, render_argv
from doctor.runner import run

MIN_PIP_REPORT = (22, 2)  # pip install --dry-run --report
STEP_TIMEOUT = 3600.0  # a CUDA torch is 1-3 GB; a slow mirror can take long, a hung one must not hang us
# fix runs its commands on this machine: they are shown in this machine's shell syntax.
LOCAL_OS = "windows" if sys.platform == "win32" else "linux"

# Run by the target interpreter: every installed distribution as [name, version]. Python 3.8+, stdlib only.
FREEZE_SCRIPT = (
    "import importlib.metadata as m, json, sys\n"
    "out = sorted({(d.metadata['Name'] or '', d.version) for d in m.distributions() if d.metadata['Name']})\n"
    "sys.stdout.write(json.dumps(out))\n"
)


def read_freeze(python: str, runner=None, timeout: float = 60.0) -> dict[str, str] | None:
    """{normalised name: version} of the target environment, or None when it cannot be read."""
    res = (runner or run)([python, "-c", FREEZE_SCRIPT], timeout=timeout)
    if not res.ok:
        return None
    try:
        return {normalize_name(name): version for name, version in last_json(res.stdout)}
    except (ValueError, TypeError):
        return None


def last_json(stdout: str):
    """The last line of ``stdout`` that is JSON: what our one-line script printed, after whatever the
    interpreter's start-up code (a chatty sitecustomize or .pth) printed before it. ValueError if none."""
    for line in reversed((stdout or "").splitlines()):
        if line.strip().startswith(("[", "{")):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise ValueError("no JSON line")


def parse_pip_version(text: str) -> tuple[int, ...] | None:
    """'pip 23.2.1 from /x (python 3.12)' -> (23, 2, 1), on whichever line pip said it (start-up code may
    print before it)."""
    match = re.search(r"^\s*pip (\d+(?:\.\d+)*) from ", text or "", re.M)
    return tuple(int(x) for x in match[1].split(".")) if match else None


def pip_version(python: str, runner=None) -> tuple[int, ...] | None:
    res = (runner or run)(pip_argv(python, "--version"), timeout=60.0)
    return parse_pip_version(res.stdout) if res.ok else None


@dataclass
class PipConfig:
    values: dict[str, str] = field(
        default_factory=dict
    )  # "global.constraint" -> "/etc/xdg/pip/constraints.txt"


def parse_pip_config(text: str) -> PipConfig:
    """`pip config list` lines: ``global.index-url='https://...'`` or ``:env:.find-links='/x'``."""
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip("'\"")
    return PipConfig(values)


def read_pip_config(python: str, runner=None) -> PipConfig:
    res = (runner or run)(pip_argv(python, "config", "list"), timeout=60.0)
    return parse_pip_config(res.stdout) if res.ok else PipConfig()


def config_warnings(config: PipConfig, pins: list[str], read_text=None) -> list[str]:
    """What in the user's pip configuration constrains the fix. Respected, never stripped: said."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    read_text = read_text or _read_text
    wanted = {}
    for pin in pins:
        name, _, version = pin.partition("==")
        wanted[normalize_name(name)] = version
    out = []
    for key, value in sorted(config.values.items()):
        option = key.rpartition(".")[2]
        if option == "constraint":
            for path in value.split():
                for line in (read_text(path) or "").splitlines():
                    line = line.split("#")[0].strip()
                    if not line:
                        continue
                    try:
                        req = Requirement(line)
                    except InvalidRequirement:
                        continue
                    target = wanted.get(normalize_name(req.name))
                    if target is None:
                        continue
                    try:
                        ok = req.specifier.contains(Version(target), prereleases=True)
                    except InvalidVersion:
                        ok = True
                    verdict = (
                        "the target satisfies it" if ok else f"it forbids {req.name}=={target}: pip will fail"
                    )
                    out.append(f"pip config {key}={path} constrains {line}; {verdict}.")
    # Indexes and find-links locations are named, with the file or variable they come from, by
    # doctor/fix/sources.py: an exact pin does not keep torch from coming from them.
    return out


def installer_ready(installer: str, why: str, python: str, env: dict, runner=None) -> tuple[int, ...] | None:
    """Refuse an installer that is not there; for pip, its version (whether it can preview with --report)."""
    if installer == UV and not find_uv(env):
        raise DoctorError("uv was chosen (" + why + ") but is not on PATH: install uv, or pass --installer "
            "pip")
    if installer != PIP:
        return None
    version = pip_version(python, runner)
    if version is None:
        ensurepip = render_argv(ensurepip_argv(python), LOCAL_OS)
        raise DoctorError(f"{python} has no working pip: run `{ensurepip}`, or pass --installer uv")
    return version


def find_uv(env: dict | None = None, which=shutil.which) -> str | None:
    """uv on PATH, else the one installed beside torchdoctor (pip install torchdoctor[uv] / uv tool)."""
    env = os.environ if env is None else env
    found = which("uv", path=env.get("PATH"))
    if found:
        return found
    beside = Path(sys.executable).parent / ("uv.exe" if os.name == "nt" else "uv")
    return str(beside) if beside.is_file() else None


def _read_text(path: str) -> str | None:
    return read_text(path, 4 << 20)  # a constraints file: regular, bounded (doctor/model/files.py)
