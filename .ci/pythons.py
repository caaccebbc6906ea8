"""The quick test suite (-m "not slow") on other Pythons: the lowest one pyproject.toml declares and the
newest.

    python .ci/pythons.py 3.10 3.13

For each version: find a real interpreter (pyenv's, then pythonX.Y on PATH, then `uv python find`), make
`.venv-X.Y` in the checkout (reused when it is already that Python), install torchdoctor with its test
extras into it, run `pytest -m "not slow"`. The installs run one after the other (they share the checkout),
the test runs side by side; each one's output is printed when it is done.

A version that cannot be found is skipped with a loud line, and fails the run when CI is set (.ci/run sets
it; GitHub and GitLab set it too): CI must not pass by testing less than it says.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def runs(python: str, version: str) -> bool:
    try:
        done = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and done.stdout.strip() == version


def find(version: str) -> str | None:
    candidates: list[str] = []
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    if shutil.which("pyenv"):
        done = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=30)
        pyenv_root = done.stdout.strip() or pyenv_root
    found = sorted(Path(pyenv_root, "versions").glob(f"{version}.*"),
                   key=lambda p: [int(x) if x.isdigit() else -1 for x in p.name.split(".")])
    candidates += [str(p / "bin" / "python") for p in reversed(found)]
    on_path = shutil.which(f"python{version}")  # a pyenv shim there may not run this version: checked below
    if on_path:
        candidates.append(on_path)
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if Path(uv).exists():
        done = subprocess.run([uv, "python", "find", "--system", version], capture_output=True, text=True,
                              timeout=60)
        if done.returncode == 0 and done.stdout.strip():
            candidates.append(done.stdout.strip())
    return next((c for c in candidates if Path(c).exists() and runs(c, version)), None)


def prepare(version: str, base: str) -> tuple[Path | None, str]:
    """The venv's python with torchdoctor[test] installed, or (None, why)."""
    venv = REPO / f".venv-{version}"
    python = venv / "bin" / "python"
    if not runs(str(python), version):
        shutil.rmtree(venv, ignore_errors=True)
        made = subprocess.run([base, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
        if made.returncode != 0:
            return None, f"python{version} -m venv failed: {made.stderr.strip()[-500:]}"
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e",
                           ".[test]"], cwd=REPO, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        return None, f"pip install -e '.[test]' failed on Python {version}:\n{done.stdout}{done.stderr}"
    return python, ""


def main(versions: list[str]) -> int:
    strict = bool(os.environ.get("CI"))
    failed, started = [], []
    for version in versions:
        base = find(version)
        if base is None:
            print(f"pythons: SKIPPED Python {version}: not found (pyenv install {version}, or "
                  f"uv python install {version})" + (" - CI is set, so this fails the run" if strict else ""),
                  flush=True)
            if strict:
                failed.append(version)
            continue
        print(f"pythons: Python {version} is {base}; installing torchdoctor[test] into "
            f".venv-{version}", flush=True)
        python, why = prepare(version, base)
        if python is None:
            print(f"pythons: FAILED Python {version}: {why}", flush=True)
            failed.append(version)
            continue
        log = tempfile.TemporaryFile(mode="w+")
        proc = subprocess.Popen(
            [str(python), "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider"],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started.append((version, proc, log, time.monotonic()))
    for version, proc, log, began in started:
        code = proc.wait()
        log.seek(0)
        lines = log.read().rstrip().splitlines()
        shown = lines if code else lines[-3:]
        print(f"pythons: Python {version}: pytest -m 'not slow' exited {code} after "
            f"{time.monotonic() - began:.0f}s")
        print("\n".join("  " + line for line in shown), flush=True)
        if code:
            failed.append(version)
    if failed:
        print(f"pythons: failed on {', '.join(failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or ["3.10", "3.13"]))
