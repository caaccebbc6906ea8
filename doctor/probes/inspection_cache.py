"""What the target interpreter told us last time, kept until something it depends on changes.

The inspector (``doctor/target/inspector.py``) costs a start of the target interpreter and ~20 ms of reading
(~35 ms in all, the critical path of ``check --no-smoke``). Its answer depends only on files and on a few
environment variables, so it is cached the way uv caches interpreter facts: an entry is found by a **key**
of what is known before anything runs, and used only while every file in its **watch list** still has the
``stat`` it had when the answer was recorded. A changed key, a changed file, or a corrupt or unreadable
entry means a fresh inspection, never a stale answer.

The key: the cache format, torchdoctor's version and ``inspector.py`` itself (size and mtime), the
interpreter path as given and its real path, the environment variables that change ``sys.path`` (every
``PYTHON*`` one, ``HOME``/``USERPROFILE``/``APPDATA`` for the user site) and the working directory when
``PYTHONPATH`` holds a relative entry (Python resolves those against it).

The watch list (``stat``: mtime and ctime in ns, size, inode, device, type; or "absent"): the interpreter as
given (the link and its target) and as ``sys.executable``, the environment's ``bin`` folder (a replaced
``python``), ``pyvenv.cfg``, ``conda-meta`` (conda adds and removes a record per package), every ``sys.path``
entry and the user site even when absent (installing or removing a package adds or removes a folder there),
the ``.pth`` files, ``sitecustomize.py``, ``usercustomize.py`` and ``EXTERNALLY-MANAGED`` in those folders
(edited in place, they would not change the folder), and the folders, ``version.py``, ``__init__.py`` and
dist-info (``METADATA``, ``RECORD``) of torch, torchvision and torchaudio and of every distribution listed.

Not cached: an interpreter that is a launcher (a pyenv or asdf shim picks its Python by folder and
variables), an answer with an error or a problem, and an answer whose files changed within
``RACY_SECONDS`` before the inspection started (a ``pip install`` running beside it could have been half
seen: the next run records it). Not tracked: a site hook (a ``.pth`` line, ``sitecustomize``) that reads other
environment variables or the clock; ``--no-cache`` or ``TORCHDOCTOR_NO_CACHE=1`` bypass the cache.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping

from doctor import __version__
from doctor.probes.cache import file_signature as _signature
from doctor.probes.cache import read_keyed_entry, write_keyed_entry

TYPE_CHECKING = False
if TYPE_CHECKING:  # in annotations only: importing typing costs ~4 ms of every start
    from typing import Any

FORMAT = 1
FOLDER = "interpreters"
RACY_SECONDS = 2.0  # a file changed this close to the inspection may have been read half-changed
_HOME_VARIABLES = ("HOME", "USERPROFILE", "APPDATA")
_SITE_HOOKS = ("sitecustomize.py", "usercustomize.py", "EXTERNALLY-MANAGED")
_PACKAGES = ("torch", "torchvision", "torchaudio")


class InspectionCache:
    """The inspector's answers under ``folder`` (the user's cache folder, doctor/model/cache.py)."""

    def __init__(self, folder: str | os.PathLike, inspector: str | os.PathLike, env: Mapping[str, str] | None = None,
                 cwd: str | None = None):
        self.folder = os.path.join(os.fspath(folder), FOLDER)
        self.inspector = str(inspector)
        self.env = os.environ if env is None else env
        self.cwd = cwd or os.getcwd()

    # --- the key ------------------------------------------------------------------------------------

    def key(self, python: str) -> dict[str, Any]:
        variables = {k: v for k, v in self.env.items() if k.startswith("PYTHON") or k in _HOME_VARIABLES}
        entries = self.env.get("PYTHONPATH", "").split(os.pathsep) if "PYTHONPATH" in self.env else []
        relative = any(not os.path.isabs(entry) for entry in entries)
        return {
            "format": FORMAT,
            "tool": __version__,
            "inspector": _signature(self.inspector),
            "python": python,
            "real": os.path.realpath(python),
            "env": sorted(variables.items()),
            "cwd": self.cwd if relative else None,
        }

    # --- reading ------------------------------------------------------------------------------------

    def lookup(self, python: str) -> str | None:
        """The inspector's stdout recorded for ``python``, when nothing it depends on has changed; else None."""
        try:
            entry = read_keyed_entry(self.folder, self.key(python))
            if entry is None:
                return None
            watch, stdout = entry.get("watch"), entry.get("stdout")
            if not isinstance(watch, list) or not isinstance(stdout, str):
                return None
            for item in watch:
                path, follow, sig = item
                if _signature(path, follow) != sig:
                    return None
            return stdout
        except (ValueError, TypeError, OSError, RecursionError):
            return None  # a corrupt entry is a miss; the fresh answer overwrites it

    # --- writing ------------------------------------------------------------------------------------

    def store(self, python: str, stdout: str, started: float) -> bool:
        """Record the inspector's stdout for ``python`` (when it can be trusted: module docstring). ``started``:
        time.time() when the inspection began."""
        try:
            data = _answer(stdout)
            if data is None:
                return False
            watch = watch_list(python, data)
            if watch is None:
                return False
            racy = int((started - RACY_SECONDS) * 1e9)
            if any(sig is not None and sig[0] >= racy for _, _, sig in watch):
                return False
            return write_keyed_entry(self.folder, self.key(python),
                                     {"watch": watch, "stdout": stdout, "stored": time.time()})
        except (ValueError, TypeError, OSError, RecursionError):
            return False


def _answer(stdout: str) -> dict[str, Any] | None:
    """The inspector's JSON object when it is a whole, clean answer (no error, no problem), else None."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                return None
            if not isinstance(data, dict) or "inspector" not in data or data.get("error") or data.get("problems"):
                return None
            return data
    return None


def watch_list(python: str, data: dict[str, Any]) -> list[list[Any]] | None:
    """[[path, follow links, signature], ...] of everything the answer rests on (module docstring); None when the
    answer must not be cached (a launcher: the interpreter that answered is not the file that was run)."""
    interp = data.get("interpreter") or {}
    executable = str(interp.get("executable") or "")
    try:
        if not executable or not os.path.samefile(executable, python):
            return None
    except OSError:
        return None
    prefix = str(interp.get("prefix") or "")
    paths: list[tuple[str, bool]] = [(python, False), (python, True), (executable, True),
                                     (os.path.dirname(os.path.abspath(python)), True)]
    if prefix:
        paths += [(os.path.join(prefix, "pyvenv.cfg"), True), (os.path.join(prefix, "conda-meta"), True)]
    folders = [str(p) for p in interp.get("sys_path") or [] if isinstance(p, str)]
    user_site = (interp.get("user_site") or {}).get("path")
    if isinstance(user_site, str):
        folders.append(user_site)
    for folder in folders:
        paths.append((folder or ".", True))
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        paths += [(os.path.join(folder, n), True) for n in sorted(names) if n.endswith(".pth") or n in _SITE_HOOKS]
    packages = data.get("packages") or {}
    for name in _PACKAGES:
        package = packages.get(name) or {}
        for where in (package.get("folder"), package.get("origin")):
            if isinstance(where, str) and where:
                paths.append((where, True))
        if isinstance(package.get("folder"), str) and package["folder"]:
            paths.append((os.path.join(package["folder"], "version.py"), True))
        dist = package.get("dist_path")
        if isinstance(dist, str) and dist:
            paths += [(dist, True), (os.path.join(dist, "METADATA"), True), (os.path.join(dist, "RECORD"), True)]
    for record in data.get("dists") or []:
        if isinstance(record, dict) and isinstance(record.get("path"), str):
            paths.append((record["path"], True))
    for leftover in data.get("leftovers") or []:
        if isinstance(leftover, str):
            paths.append((leftover, True))
    seen: set[tuple[str, bool]] = set()
    watch = []
    for path, follow in paths:
        if (path, follow) not in seen:
            seen.add((path, follow))
            watch.append([path, follow, _signature(path, follow)])
    return watch
