"""A real CPU torch for tests: a py3.11 venv with torch 2.13.0+cpu installed from /opt/wheels.

Usage (any test module)::

    from realtorch import real_cpu_torch_python

    @pytest.mark.slow
    def test_something(tmp_path_factory):
        python = real_cpu_torch_python(tmp_path_factory)  # skips (with the reason) if impossible
        ...

The venv is built once and reused across sessions and engineers at
``/tmp/torchdoctor-realtorch-cache/<wheel file stem>`` (building takes about a minute; a lock file
serialises concurrent builds; ``.torchdoctor-complete`` marks a finished build). torch's pure-Python
dependencies (filelock, sympy, networkx, jinja2, fsspec, typing-extensions) come from the local
package index so ``import torch`` really works; if they cannot be installed, torch is installed
with ``--no-deps`` (metadata and files still real, import may fail: the marker says which).
Delete the folder to force a rebuild. The venv must not be modified by tests.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from fakeenv import find_python

WHEEL_DIR = Path("/opt/wheels")
WHEEL_GLOB = "torch-2.13.0+cpu-cp311-cp311-*.whl"
CACHE = Path("/tmp/torchdoctor-realtorch-cache")
COMPLETE = ".torchdoctor-complete"


def real_cpu_torch_wheel() -> Path | None:
    found = sorted(WHEEL_DIR.glob(WHEEL_GLOB)) if WHEEL_DIR.is_dir() else []
    return found[-1] if found else None


def real_cpu_torch_python(tmp_path_factory=None) -> Path:
    """The python of a venv holding the real CPU torch wheel; ``pytest.skip`` when not possible.

    ``tmp_path_factory`` is accepted for a stable signature (and used only if /tmp is not writable).
    """
    wheel = real_cpu_torch_wheel()
    if wheel is None:
        pytest.skip(f"no real CPU torch wheel matching {WHEEL_DIR / WHEEL_GLOB}")
    base = find_python("3.11")
    if base is None:
        pytest.skip("no Python 3.11 interpreter (pyenv or python3.11 on PATH) for the cp311 torch wheel")
    cache = CACHE
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        if tmp_path_factory is None:
            pytest.skip(f"cannot create {CACHE}")
        cache = tmp_path_factory.getbasetemp() / "realtorch-cache"
        cache.mkdir(parents=True, exist_ok=True)
    venv = cache / wheel.name[: -len(".whl")]
    python = venv / "bin" / "python"
    import fcntl  # POSIX only; imported here so merely importing this module works everywhere

    with open(cache / (venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be building the same venv
        if not (venv / COMPLETE).exists():
            _build(base, venv, wheel)
    return python


def _build(base: str, venv: Path, wheel: Path) -> None:
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
    done = subprocess.run(pip + [str(wheel)], capture_output=True, text=True, timeout=900)
    how = "with-deps"
    if done.returncode != 0:
        done = subprocess.run(pip + ["--no-deps", str(wheel)], capture_output=True, text=True, timeout=900)
        how = "no-deps"
    if done.returncode != 0:
        pytest.skip(f"could not install {wheel.name}: {done.stderr.strip().splitlines()[-1:]}")
    (venv / COMPLETE).write_text(how + "\n")
