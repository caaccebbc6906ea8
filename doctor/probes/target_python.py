"""Which Python to diagnose, and the child every check starts first in it.

``choose_interpreter`` picks the interpreter whose torch the user runs (documented precedence) and says why;
``run_inspector`` runs doctor/target/inspector.py in it. Neither needs the snapshot's data classes, so a check
starts that child before it imports them and the two overlap; doctor/probes/interpreter.py reads what the
child printed.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping

from doctor.runner import RunResult, run

INSPECTOR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "target", "inspector.py"
)


def run_inspector(
    path: str, runner: Callable[..., RunResult] = run, timeout: float = 20.0
) -> tuple[RunResult, str]:
    """Run the inspector in ``path`` (by file path, the environment unchanged: PYTHONPATH, user site and .pth
    files count, as they do for the user's ``import torch``; the script drops its own folder from sys.path
    first). Returns the run and the nonce it was given: the JSON object carrying it is the inspector's."""
    nonce = os.urandom(8).hex()
    return runner([path, str(INSPECTOR), nonce], timeout=timeout), nonce


# --- choosing the interpreter ----------------------------------------------------------------------


# Where an environment folder keeps its python: venv/conda on POSIX, venv on Windows, conda on Windows.
_PYTHON_IN_ENV = ("bin/python", "bin/python3", "Scripts/python.exe", "python.exe")


def python_in_env(folder: str) -> str | None:
    """The python executable inside a venv or conda folder, or None."""
    for relative in _PYTHON_IN_ENV:
        candidate = os.path.join(folder, *relative.split("/"))
        if os.path.isfile(candidate):
            return candidate
    return None


OWN_ENVIRONMENT = "torchdoctor's own environment, which holds torch"


def own_environment_python() -> str | None:
    """The interpreter torchdoctor runs in, when its environment holds torch (a torch/ package in its
    site-packages, looked at on disk, never imported): torchdoctor installed beside torch and run by path
    (``.venv/bin/torchdoctor check`` in a Dockerfile or a CI job) is meant for that environment."""
    import sys
    import sysconfig

    paths = sysconfig.get_paths()
    for key in ("purelib", "platlib"):
        folder = paths.get(key)
        if folder and os.path.isfile(os.path.join(folder, "torch", "__init__.py")):
            return sys.executable or None
    return None


def choose_interpreter(
    python: str | None,
    env: Mapping[str, str],
    cwd: str,
    which: Callable[..., str | None] = shutil.which,
    own: Callable[[], str | None] = own_environment_python,
) -> tuple[str | None, str]:
    """Pick the interpreter whose torch the user runs, and say why.

    Order: ``--python`` (a file, an env folder, or a command on PATH), ``VIRTUAL_ENV``,
    ``CONDA_PREFIX``, torchdoctor's own environment when it holds torch, ``./.venv`` under cwd, then
    ``python3`` and ``python`` on PATH. An active venv beats conda because its python comes first on
    PATH. Returns (None, why) if none is found.
    """
    if python:
        return _explicit_python(python, env, cwd, which)

    skipped: list[str] = []
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        folder = env.get(variable)
        if not folder:
            continue
        found = python_in_env(folder)
        if found:
            return found, f"{variable}={folder}"
        skipped.append(f"{variable}={folder} has no python")

    mine = own()
    if mine:
        return mine, OWN_ENVIRONMENT

    dot_venv = os.path.join(cwd, ".venv")
    if os.path.isdir(dot_venv):
        found = python_in_env(dot_venv)
        if found:
            target, refusal = working_folder_venv(found, cwd)
            if target:
                return found, f"./.venv in the working folder (a venv whose python is {target})"
            skipped.append(f"./.venv refused: {refusal}")
        else:
            skipped.append("./.venv has no python")

    for name in ("python3", "python"):
        found = which(name, path=env.get("PATH"))
        if found:
            reason = f"{name} on PATH"
            return found, f"{reason} ({'; '.join(skipped)})" if skipped else reason
    why = (
        "no Python found: no --python, VIRTUAL_ENV, CONDA_PREFIX or ./.venv, and no python3 or python on PATH"
    )
    return None, f"{why} ({'; '.join(skipped)})" if skipped else why


def working_folder_venv(python: str, cwd: str, platform: str | None = None) -> tuple[str | None, str]:
    """(the interpreter it runs, "") when ``python`` found under the working folder may run, else (None, why).

    A cloned repository's ``.venv`` is not the user's: running whatever file sits there runs the repository's
    code. Only a real venv may: ``pyvenv.cfg`` beside ``bin/``, and ``bin/python`` a symlink to an interpreter
    outside the working folder (Windows: ``python.exe`` is a copy, so ``pyvenv.cfg``'s ``home`` must be
    outside it). A regular file or a script there is refused."""
    platform = platform or sys.platform
    root = os.path.realpath(cwd)
    folder = os.path.dirname(os.path.dirname(python)) if os.path.basename(os.path.dirname(python)) in (
        "bin", "Scripts") else os.path.dirname(python)
    cfg = os.path.join(folder, "pyvenv.cfg")
    if not os.path.isfile(cfg):
        return None, "no pyvenv.cfg (not a venv)"
    if platform == "win32":
        home = _pyvenv_home(cfg)
        if not home or not os.path.isabs(home):
            return None, "pyvenv.cfg names no home interpreter"
        target = os.path.join(home, "python.exe")
    else:
        if not os.path.islink(python):
            return None, f"{os.path.relpath(python, cwd)} is a regular file, not a venv's link to a python"
        target = os.path.realpath(python)
    if _inside(os.path.realpath(target), root):
        return None, f"{os.path.relpath(python, cwd)} leads to {target}, inside the working folder"
    if not os.path.isfile(target):
        return None, f"{os.path.relpath(python, cwd)} leads to {target}, which is not there"
    return target, ""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _pyvenv_home(cfg: str) -> str:
    try:
        with open(cfg, encoding="utf-8", errors="replace") as handle:
            lines = handle.read(65536).splitlines()
    except OSError:
        return ""
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip().lower() == "home":
            return value.strip()
    return ""


def _explicit_python(
    python: str, env: Mapping[str, str], cwd: str, which: Callable[..., str | None]
) -> tuple[str | None, str]:
    path = python if os.path.isabs(python) else os.path.join(cwd, python)
    if os.path.isdir(path):
        found = python_in_env(path)
        if found:
            return found, "--python"
        return None, f"--python {python}: no bin/python, Scripts\\python.exe or python.exe in that folder"
    if os.path.exists(path):
        return path, "--python"
    if os.sep not in python and "/" not in python:
        found = which(python, path=env.get("PATH"))
        if found:
            return found, "--python"
    return None, f"--python {python}: not found"
