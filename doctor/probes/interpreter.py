"""What torch the target interpreter has installed, read without importing torch.

Layers: ``choose_interpreter`` (doctor/probes/target_python.py, documented precedence) → ``run_inspector``
runs ``inspector.py`` in that interpreter through the runner → ``parse_inspector_output`` (pure) turns its
JSON into ``Interpreter`` + ``TorchInstall`` + the ``environment.python`` section (``PythonFacts``).
Every failure (not found, hang, crash, garbage, too-old Python) becomes data, never an exception.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any

from doctor.compat.builds import cuda_from_requires
from doctor.model.environment import Conda, CondaRecord, DistRecord, PythonFacts, UserSite
from doctor.model.snapshot import Dist, Interpreter, TorchInstall
from doctor.model.versions import cuda_from_tag
from doctor.probes.target_python import run_inspector
from doctor.runner import RunResult, run

# --- running the inspector -------------------------------------------------------------------------


def inspect_interpreter(
    path: str, reason: str, runner: Callable[..., RunResult] = run, timeout: float = 20.0
) -> tuple[Interpreter, TorchInstall]:
    """The interpreter and its torch install; see ``inspect_interpreter_full``."""
    interpreter, install, _ = inspect_interpreter_full(path, reason, runner=runner, timeout=timeout)
    return interpreter, install


def inspect_interpreter_full(
    path: str, reason: str, runner: Callable[..., RunResult] = run, timeout: float = 20.0
) -> tuple[Interpreter, TorchInstall, PythonFacts]:
    """Run ``inspector.py`` in the target interpreter and map its JSON. Never raises.

    The file runs by path with the environment unchanged (PYTHONPATH, user site and .pth files
    count, as they do for the user's ``import torch``); the script drops its own folder from
    sys.path first. The third value is what the collector stores as ``snapshot.environment.python``.
    """
    result, nonce = run_inspector(path, runner, timeout)
    return parse_inspector_output(path, reason, result, nonce)


def parse_inspector_output(
    path: str, reason: str, result: RunResult, nonce: str | None = None
) -> tuple[Interpreter, TorchInstall, PythonFacts]:
    """Map one run of the inspector (a ``RunResult``) to the snapshot's data. Pure. ``nonce``: the token
    the run was given; the object that carries it is the inspector's."""
    data = _find_json(result.stdout, nonce)
    if data is None:
        failed = _failed(path, reason, _failure_text(path, result))
        failed[0].error_lines = useful_lines(result.stderr) or None
        return failed
    if data.get("error"):
        raw = data.get("interpreter") or {}
        interpreter = Interpreter(
            path=path,
            reason=reason,
            version=str(raw.get("version") or ""),
            implementation=str(raw.get("implementation") or ""),
            error=str(data.get("detail") or data["error"]),
        )
        install = TorchInstall(status="error", detail=interpreter.error or "")
        return interpreter, install, _python_environment(path, {}, error=interpreter.error)

    raw = data.get("interpreter") or {}
    real, found_as = resolve_launcher(path, raw.get("executable"))
    interpreter = Interpreter(
        path=real,
        found_as=found_as,
        reason=reason,
        version=str(raw.get("version") or ""),
        implementation=str(raw.get("implementation") or ""),
        bits=raw.get("bits") if isinstance(raw.get("bits"), int) else None,
        free_threaded=bool(raw.get("free_threaded")),
        machine=raw.get("machine") if isinstance(raw.get("machine"), str) else None,
        prefix=str(raw.get("prefix") or ""),
        env_kind=str(raw.get("env_kind") or ""),
        externally_managed=bool(raw.get("externally_managed")),
    )
    return interpreter, _torch_install(data), _python_environment(path, data)


def _find_json(stdout: str, nonce: str | None = None) -> dict[str, Any] | None:
    """The inspector's object among whatever else the interpreter printed (a chatty sitecustomize or .pth,
    before it or at exit after it): the one carrying this run's ``nonce``; one with another nonce never
    counts (an object without any: a recorded output from before nonces)."""
    text = stdout.strip()
    candidates = [text] + [line.strip() for line in reversed(text.splitlines())]
    fallback = None
    for candidate in candidates:
        if not candidate.startswith("{"):
            continue
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if not isinstance(data, dict) or "inspector" not in data:
            continue
        if nonce is not None and data.get("nonce") == nonce:
            return data
        if "nonce" not in data and fallback is None:
            fallback = data
    return fallback


def _failure_text(path: str, result: RunResult) -> str:
    if result.not_found:
        return f"the interpreter {path} was not found"
    if result.timed_out:
        return f"the interpreter {path} did not answer within {result.seconds:.0f}s (it hung while starting)"
    if result.error:
        return f"the interpreter {path} could not start: {result.error}"
    last_err = _last_line(result.stderr)
    if result.signal or result.returncode not in (0, None):
        how = result.describe().split(" ", 1)[1]  # "exited with 1", "killed by SIGSEGV"
        how = "was " + how if how.startswith("killed") else how
        return f"the inspector {how} in {path}" + (f": {last_err}" if last_err else "")
    shown = _last_line(result.stdout) or "nothing"
    return f"the inspector printed no JSON in {path} (got: {shown[:120]!r})" + (
        f"; stderr: {last_err}" if last_err else ""
    )


# A traceback's frames ("  File ...", the source line under it) say where, not why.
_FRAME = re.compile(r'^\s+File "|^Traceback \(most recent call last\)|^\s+\^+\s*$')


def useful_lines(stderr: str, limit: int = 8) -> list[str]:
    """The lines of a failed interpreter's stderr that say why (frames and blank lines dropped), the last
    ``limit`` of them, each at most 300 characters: "Fatal Python error: ...", "ModuleNotFoundError: ..."."""
    kept: list[str] = []
    skip_source = False
    for line in stderr.splitlines():
        if not line.strip():
            continue
        if _FRAME.match(line):
            skip_source = line.lstrip().startswith("File ")
            continue
        if skip_source and line.startswith("    "):  # the source line printed under a frame
            skip_source = False
            continue
        skip_source = False
        kept.append(line.rstrip()[:300])
    return kept[-limit:]


def resolve_launcher(path: str, executable: object) -> tuple[str, str | None]:
    """(the interpreter itself, how it was found). A pyenv or asdf shim is a script that starts the real
    interpreter: report the real one (the target's sys.executable), which is also what commands must name
    (a shim picks its Python by folder and can pick another one elsewhere), and keep the shim as how it was
    found. A path that is the same file as sys.executable (a venv's python, a symlink) is kept as given."""
    real = str(executable or "")
    if not real or real == path:
        return path, None
    try:
        same = os.path.samefile(real, path)
    except OSError:
        same = os.path.realpath(real) == os.path.realpath(path)
    if same:
        return path, None
    return real, f"{path} ({launcher_kind(path)})"


def launcher_kind(path: str) -> str:
    parts = path.replace("\\", "/").lower()
    for name in ("pyenv", "asdf", "mise", "rtx"):
        if f"/.{name}/" in parts or f"/{name}/" in parts:
            return (
                f"a{'n' if name == 'asdf' else ''} {name} shim"
                if "/shims/" in parts
                else f"a {name} launcher"
            )
    if "/shims/" in parts:
        return "a shim"
    return "a launcher"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _failed(path: str, reason: str, why: str) -> tuple[Interpreter, TorchInstall, PythonFacts]:
    return (
        Interpreter(path=path, reason=reason, error=why),
        TorchInstall(status="error", detail=why),
        _python_environment(path, {}, error=why),
    )


# --- mapping the inspector's JSON ----------------------------------------------------------------


def _torch_install(data: dict[str, Any]) -> TorchInstall:
    packages = data.get("packages") or {}
    torch = packages.get("torch")
    install = TorchInstall(
        torchvision=_dist(packages.get("torchvision")),
        torchaudio=_dist(packages.get("torchaudio")),
    )
    stale = [d for d in data.get("dists") or [] if d.get("name") == "torch"]
    leftovers = data.get("leftovers") or []
    if torch and torch.get("folder") and not torch.get("version") and torch["folder"] in leftovers:
        # An install killed half way: the files partly there, the metadata not yet (no whole build to
        # import). Not installed, so the plan installs it; the leftovers finding says what to remove.
        install.status = "absent"
        install.detail = (f"a half-written torch at {torch['folder']}: no dist-info describes it "
                          "(an install stopped)")
        return install
    if torch and torch.get("origin"):
        install.status = "ok"
        install.torch = _dist(torch)
        install.cuda_from_requires = parse_cuda_from_requires(install.torch.requires if install.torch else [])
        if not torch.get("version"):
            install.detail = f"torch at {torch.get('folder')} has no dist-info (source tree or copied in?)"
        return install
    install.status = "absent"
    if torch and torch.get("folder"):
        install.detail = (
            f"a torch folder without __init__.py (left over from an uninstall?) at {torch['folder']}"
        )
    elif stale:
        install.detail = f"torch metadata but no torch package (stale dist-info) at {stale[0].get('path')}"
    else:
        install.detail = "torch is not installed in this interpreter"
    return install


def _dist(raw: dict[str, Any] | None) -> Dist | None:
    if not raw:
        return None
    version_py = raw.get("version_py") or {}
    build_version = _str_or_none(version_py.get("__version__"))
    cuda = _str_or_none(version_py.get("cuda"))
    if cuda is None and "cuda" not in version_py:
        # torchvision/torchaudio compute `cuda` at import time; their local tag says it instead.
        cuda = cuda_from_tag(build_version or raw.get("version") or "")
    return Dist(
        name=str(raw.get("name") or ""),
        version=str(raw.get("version") or ""),
        build_version=build_version,
        cuda=cuda,
        hip=_str_or_none(version_py.get("hip")),
        xpu=_str_or_none(version_py.get("xpu")),
        git_version=_str_or_none(version_py.get("git_version")),
        requires=[str(r) for r in raw.get("requires") or []],
        installer=_str_or_none(raw.get("installer")),
        location=str(raw.get("location") or ""),
        has_libtorch_cuda=raw.get("has_libtorch_cuda"),
        has_libtorch_hip=raw.get("has_libtorch_hip"),
    )


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _python_environment(path: str, data: dict[str, Any], error: str | None = None) -> PythonFacts:
    """The inspector's view around torch: the ``python`` section of the snapshot's environment."""
    raw = data.get("interpreter") or {}
    user_site = raw.get("user_site") or {}
    conda = data.get("conda")
    return PythonFacts(
        executable=str(raw.get("executable") or path),
        sys_path=list(raw.get("sys_path") or []),
        user_site=UserSite(enabled=bool(user_site.get("enabled")), path=user_site.get("path")),
        dists=[DistRecord(**{k: d.get(k) for k in _DIST_KEYS}) for d in data.get("dists") or []],
        torch_origin=data.get("torch_origin"),
        conda=None if conda is None else Conda(
            prefix=conda.get("prefix"),
            is_base=conda.get("is_base"),
            records=[CondaRecord(**{k: r.get(k) for k in _CONDA_KEYS}) for r in conda.get("records") or []],
        ),
        pyvenv_cfg=raw.get("pyvenv_cfg"),
        externally_managed_text=raw.get("externally_managed_text"),
        problems=list(data.get("problems") or []),
        leftovers=[str(p) for p in data.get("leftovers") or [] if isinstance(p, str)] or None,
        installed=_installed(data.get("installed")),
        markers=_markers(data.get("markers")),
        pythonpath=data.get("pythonpath") if isinstance(data.get("pythonpath"), str) else None,
        error=error,
    )


def _installed(raw: Any) -> list[list[str]] | None:
    if not isinstance(raw, list):
        return None
    return [[str(x) for x in row[:3]] for row in raw if isinstance(row, list) and len(row) >= 2]


def _markers(raw: Any) -> dict[str, str] | None:
    if not isinstance(raw, dict):
        return None
    return {str(k): str(v) for k, v in raw.items()}


_DIST_KEYS = ("name", "version", "location", "installer", "path")
_CONDA_KEYS = ("name", "version", "build", "channel")


# --- pure parsers ----------------------------------------------------------------------------------

# "nvidia-cuda-runtime-cu12==12.4.127; ..." (old style), "cuda-toolkit[cublas,...]==13.0.3; ..." (CUDA 13+),
# "nvidia-cuda-runtime==13.0.96.*" (what cuda-toolkit's extras pull). Names are compared normalised.
# The parser lives with the build logic; the name stays for this module's callers and tests.
parse_cuda_from_requires = cuda_from_requires

