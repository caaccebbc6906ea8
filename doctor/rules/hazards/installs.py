"""Installs: torch from two package managers or in two places on sys.path, and interpreters torch should not
be installed into (32-bit, PEP 668 system Pythons, conda's base environment)."""

from __future__ import annotations

import ntpath
import os
import re
from dataclasses import dataclass
from typing import Any

from doctor.compat.assessment import Assessment
from doctor.compat.installs import conda_torch
from doctor.model import shells
from doctor.model.environment import DistRecord, PythonFacts
from doctor.model.findings import (
    CONDA_REMOVE,
    ERROR,
    INSTALL,
    REINSTALL,
    SHELL,
    UNINSTALL,
    VENV,
    WARNING,
    Action,
    Finding,
    Fix,
)
from doctor.model.i18n import Msg, concat
from doctor.model.snapshot import Snapshot, as_plain
from doctor.model.versions import normalize_name, variant_of
from doctor.rules import UNINSPECTED, not_observed, unknown
from doctor.rules.hazards.common import TORCH_TRIO, export, mm, reinstall, same_dir, split_path, torch_cuda
from doctor.table.rows import WindowsLongestPath

# --- mixed and duplicate installs ---------------------------------------------------------------


def _torch_dists(py: PythonFacts) -> list[DistRecord]:
    return [d for d in py.dists if normalize_name(d.name) == "torch"]


def _in_dir(location: Any, directory: Any) -> bool:
    if not location or not directory:
        return False
    loc, base = str(location).rstrip("/\\"), str(directory).rstrip("/\\")
    return loc == base or loc.startswith(base + "/") or loc.startswith(base + "\\")


def check_mixed_installs(facts: Assessment) -> list[Finding]:
    snap = facts.snap
    py = snap.environment.python
    leftovers = check_install_leftovers(facts)  # what an interrupted install left
    if py is None or py.error:
        if leftovers:
            return leftovers
        return unknown(UNINSPECTED) if py is not None else not_observed(snap, Msg("the target interpreter's "
            "packages"))
    findings: list[Finding] = leftovers
    torches = _torch_dists(py)
    conda = conda_torch(snap)
    prefix = conda.prefix or snap.interpreter.prefix
    pip_torch = [d for d in torches if d.installer in ("pip", "uv")]
    again = reinstall(facts.build)
    uninstall = Action(UNINSTALL, TORCH_TRIO)

    if conda.torch and pip_torch:
        names = [r.name for r in conda.torch + conda.cuda + conda.companions]
        findings.append(
            Finding(
                "mixed-conda-pip-torch",
                WARNING,
                Msg("torch is installed both by conda and "
                    "by ") + "/".join(sorted({d.installer for d in pip_torch})),
                Msg("conda-meta in {prefix} records ", prefix=prefix)
                + ", ".join(f"{r.name} {r.version} ({r.build})" for r in conda.torch)
                + Msg(" while the torch dist-info there was written by ")
                + pip_torch[0].installer
                + Msg(" (torch {version}). The two package managers overwrite each other's files, so "
                "the torch you import can mix both builds. Keep one: the pip wheel (the official conda "
                "'pytorch' channel "
                "stopped at 2.5).", version=pip_torch[0].version),
                {"conda.records": as_plain(list(conda.torch + conda.cuda)), "dists": as_plain(pip_torch),
                 "conda.prefix": prefix},
                Fix(
                    Msg("Remove the conda packages, then reinstall the pip wheels so their files are whole "
                        "again."),
                    actions=[
                        Action(CONDA_REMOVE, tuple(dict.fromkeys(names)), text=str(prefix)),
                        uninstall,
                        again,
                    ],
                ),
            )
        )

    user_path = py.user_site.path if py.user_site.enabled else None
    in_user = [d for d in torches if _in_dir(d.location, user_path)]
    elsewhere = [d for d in torches if d not in in_user]
    listing = "; ".join(f"torch {d.version} in {d.location} ({d.installer or 'unknown'})" for d in torches)
    if in_user and elsewhere:
        findings.append(
            Finding(
                "user-site-torch-shadows",
                WARNING,
                Msg(
                    "a torch in the user site ({user_path}) shadows the environment's own",
                    user_path=user_path,
                ),
                Msg(
                    "{listing}. The user site comes before site-packages on sys.path, so `import torch` "
                    "loads "
                    "torch {version} from {location}, not the environment's "
                    "torch {version2}.",
                    listing=listing,
                    version=in_user[0].version,
                    location=in_user[0].location,
                    version2=elsewhere[0].version,
                ),
                {
                    "dists": as_plain(torches),
                    "user_site": as_plain(py.user_site),
                    "torch_origin": py.torch_origin,
                },
                Fix(
                    Msg(
                        "Remove the user-site copy (pip removes the first one on sys.path, which is the user "
                        "site), or "
                        "ignore the user site with PYTHONNOUSERSITE=1."
                    ),
                    actions=[
                        uninstall,
                        Action(
                            SHELL, text="export PYTHONNOUSERSITE=1  # alternatively, keep it but ignore it"
                        ),
                    ],
                ),
            )
        )
    elif len(torches) > 1 and _pythonpath_shadow(snap, py, torches, facts.table) is not None:
        findings.append(_pythonpath_shadow(snap, py, torches, facts.table))
    elif len(torches) > 1:
        origin = py.torch_origin
        winner = next((d for d in torches if origin and _in_dir(origin, d.location)), torches[0])
        findings.append(
            Finding(
                "duplicate-torch-installs",
                WARNING,
                Msg("{len} torch distributions are visible on sys.path", len=len(torches)),
                Msg("{listing}. `import torch` loads the one from {location} (torch "
                "{version}), while pip and importlib.metadata may report another; stale files from the "
                "other copy cause confusing version and import "
                "errors.", listing=listing, location=winner.location, version=winner.version),
                {"dists": as_plain(torches), "torch_origin": origin},
                Fix(
                    Msg("Uninstall until no torch is left (pip removes one copy per run), then install "
                        "once."),
                    actions=[uninstall] * len(torches) + [again],
                ),
            )
        )

    cuda = torch_cuda(snap, facts.build)
    if conda.cuda and pip_torch and cuda:
        bad = [r for r in conda.cuda if mm(r.version) and mm(r.version) != mm(cuda)]
        if bad:
            findings.append(
                Finding(
                    "conda-cuda-mismatch",
                    WARNING,
                    Msg("conda's ")
                    + ", ".join(f"{r.name} {r.version}" for r in bad)
                    + Msg(" does not match the pip wheel's CUDA {cuda}", cuda=cuda),
                    Msg("The pip wheel brings its own CUDA libraries (nvidia-* wheels); conda's CUDA "
                        "packages in the same "
                    "environment put other versions of the same libraries on the library path of this "
                    "environment."),
                    {"conda.records": as_plain(bad), "torch.cuda": cuda, "conda.prefix": prefix},
                    Fix(
                        Msg("Remove the conda CUDA packages; the wheel does not need them."),
                        actions=[Action(CONDA_REMOVE, tuple(r.name for r in bad), text=str(prefix))],
                    ),
                )
            )
    return findings


def _pythonpath_shadow(snap: Snapshot, py: PythonFacts, torches: list[DistRecord], table) -> Finding | None:
    """The torch `import torch` loads sits in a $PYTHONPATH folder, ahead of the environment's own: the remedy
    is the variable, never an uninstall (pip would remove the environment's good torch first, or both)."""
    windows = snap.host.os == "windows"
    folders = split_path(py.pythonpath, windows)
    origin = py.torch_origin
    winner = next((d for d in torches if origin and _in_dir(origin, d.location)), None)
    if winner is None or not any(same_dir(str(winner.location), f) for f in folders):
        return None
    own = [d for d in torches if not any(same_dir(str(d.location), f) for f in folders)]
    if not own:
        return None
    keep = [f for f in folders if not same_dir(str(winner.location), f)]
    release = table.release(str(winner.version or "")) if winner.version and table is not None else None
    python = snap.interpreter.version
    foreign = release is not None and bool(python) and not release.supports_python(python)
    detail = Msg("$PYTHONPATH holds {folder}, and folders on PYTHONPATH come before site-packages: `import "
        "torch` "
                 "loads torch {version} from there, not the environment's torch {own} from {location}.",
                 folder=winner.location, version=winner.version, own=own[0].version, location=own[0].location)
    if foreign:
        detail += Msg(" torch {version} has no wheel for Python {python}: that copy cannot work here.",
                      version=winner.version, python=python)
    return Finding(
        "pythonpath-torch-shadows",
        ERROR if foreign else WARNING,
        Msg("a torch on PYTHONPATH ({folder}) shadows the environment's own", folder=winner.location),
        detail,
        {"dists": as_plain(torches), "pythonpath": py.pythonpath, "torch_origin": origin},
        Fix(
            Msg("Take {folder} out of PYTHONPATH (here and where it is set: a shell profile, an IDE or job "
                "configuration); the environment's torch is left as it is.", folder=winner.location),
            actions=[Action(SHELL, text=export("PYTHONPATH", keep, windows))],
        ),
    )


# --- what an interrupted install left --------------------------------------------------------------


def check_install_leftovers(facts: Assessment) -> list[Finding]:
    """pip renames what it replaces to "~name" while it installs and removes it at the end; a *.dist-info
    without RECORD is a distribution pip cannot uninstall ("RECORD file not found"). Either is what an
    install killed half way leaves (0.1.0's interrupted fix did)."""
    snap = facts.snap
    py = snap.environment.python
    if py is None or not py.leftovers:
        return []
    paths = list(py.leftovers)
    broken = [p for p in paths if _base(p).endswith(".dist-info") and not _base(p).startswith("~")]
    windows = snap.host.os == "windows"
    if windows:
        remove = "Remove-Item -Recurse -Force -LiteralPath " + ", ".join(shells.quote(p, shells.POWERSHELL)
                                                                         for p in paths)
    else:
        remove = "rm -rf -- " + " ".join(shells.quote(p) for p in paths)
    actions = [Action(SHELL, text=remove)]
    for path in broken:
        name, _, version = _base(path)[: -len(".dist-info")].partition("-")
        name = normalize_name(name)
        # A half-extracted wheel beside a whole install of the same name: that whole one is what stays.
        whole = [d.version for d in py.dists if normalize_name(d.name) == name and d.path not in paths
                 and d.version and os.path.dirname(str(d.path or "").rstrip("/\\")) == os.path.dirname(path)]
        version = whole[0] if whole else version
        if name and version:
            actions.append(Action(REINSTALL, (f"{name}=={version}",), variant_of(version)))
    folders = sorted({os.path.dirname(p.rstrip("/\\")) for p in paths})
    return [
        Finding(
            "interrupted-install-leftovers",
            ERROR if broken else WARNING,
            Msg("an interrupted install left {len} item(s) in "
                "{folders}", len=len(paths), folders=', '.join(folders)),
            Msg("pip moves what it replaces aside as \"~...\" while it installs and deletes it when it is "
                "done; ")
            + (Msg("{items} has no whole RECORD (none, one cut off, or one listing files that are not "
                "there), "
                   "so pip can neither uninstall nor upgrade it cleanly; ",
                   items=', '.join(_base(p) for p in broken)) if broken else "")
            + Msg("these were left when an install stopped half way. Left there, pip check and imports see a "
                "mix "
            "of two builds."),
            {"leftovers": paths},
            Fix(
                Msg("Remove the leftovers") + (Msg(", then reinstall what has no whole "
                    "RECORD") if broken else "")
                + Msg(" (a restore file from torchdoctor fix brings back the builds from before)."),
                actions=actions,
            ),
        )
    ]


def _base(path: str) -> str:
    return os.path.basename(path.rstrip("/\\"))


# --- interpreter hygiene ------------------------------------------------------------------------


def check_interpreter_hygiene(facts: Assessment) -> list[Finding]:
    snap = facts.snap
    interp = snap.interpreter
    if interp.error or not (interp.path or interp.bits == 32):
        return unknown(UNINSPECTED) if interp.error else not_observed(snap, Msg("the target interpreter"))
    findings = []
    evidence = {
        "interpreter.path": interp.path,
        "interpreter.env_kind": interp.env_kind,
        "interpreter.prefix": interp.prefix,
        "interpreter.bits": interp.bits,
    }
    windows = snap.host.os == "windows"
    if interp.bits == 32:
        findings.append(
            Finding(
                "python-32-bit",
                ERROR,
                Msg("{path} is a 32-bit Python: no torch wheels exist for it",
                    path=interp.path or Msg("the Python collect_env ran in")),
                Msg("PyTorch publishes 64-bit wheels only; pip answers \"Could not find a version that "
                    "satisfies the "
                "requirement torch (from versions: none)\"."),
                evidence,
                Fix(
                    Msg("Install a 64-bit Python and create the environment with it."),
                    ["py -3.12-64 -m venv .venv" if windows else "uv venv --python 3.12 .venv"],
                ),
            )
        )
    findings += _windows_findings(facts, evidence)
    py = snap.environment.python or PythonFacts()
    if interp.externally_managed and interp.env_kind not in ("venv", "uv-venv", "conda"):
        text = (py.externally_managed_text or "").strip()
        findings.append(
            Finding(
                "externally-managed-python",
                WARNING,
                Msg("{path} is the system Python, marked EXTERNALLY-MANAGED (PEP 668)", path=interp.path),
                Msg("pip refuses to install into it (\"error: externally-managed-environment\"), and forcing "
                    "it with "
                "--break-system-packages can break the distribution's own tools. Use a virtual environment.")
                + (Msg(" The distribution says: "
                    "{splitlines}", splitlines=text.splitlines()[0][:200]) if text else ""),
                evidence,
                Fix(
                    Msg("Create a virtual environment and install torch there (Debian/Ubuntu may need "
                    "`sudo apt install python3-venv` first)."),
                    actions=[reinstall(facts.build, VENV, ".venv")],
                ),
            )
        )
    elif interp.env_kind == "conda-base" or (py.conda is not None and py.conda.is_base):
        version = ".".join(interp.version.split(".")[:2]) or "3.12"
        findings.append(
            Finding(
                "conda-base-environment",
                WARNING,
                Msg("the target is conda's base environment ({prefix})", prefix=interp.prefix or interp.path),
                Msg("Installing torch into base ties it to conda's own dependencies; an upgrade of either "
                    "can break the "
                "other, and conda refuses to remove packages base needs. Use a separate environment."),
                evidence,
                Fix(
                    Msg("Create an environment for torch and install it there."),
                    actions=[
                        Action(SHELL, text=f"conda create -n torch python={version}"),
                        Action(SHELL, text="conda activate torch"),
                        Action(INSTALL, TORCH_TRIO, reinstall(facts.build).variant, python="python",
                               plan=True),
                    ],
                ),
            )
        )
    return findings


# The Microsoft Store's Python: C:\Users\<user>\AppData\Local\Microsoft\WindowsApps\
# PythonSoftwareFoundation.Python.3.12_qbz5n2kfra8p0\python.exe (and the folders under Program
# Files\WindowsApps).
_STORE_PYTHON = re.compile(r"[\\/]WindowsApps[\\/]PythonSoftwareFoundation\.Python\.3\.\d+", re.IGNORECASE)
LONG_PATHS_COMMAND = (
    'New-ItemProperty -Path "HKLM:\\SYSTEM\\CurrentControlSet\\Control\\FileSystem" -Name "LongPathsEnabled" '
    "-Value 1 -PropertyType DWORD -Force  # in an administrator PowerShell"
)
LONG_PATHS_DOC = "https://learn.microsoft.com/windows/win32/fileio/maximum-file-path-limitation"


# Windows without long paths refuses a file path of MAX_PATH (260) characters or more, the terminating NUL
# included: pip's write of it fails ([WinError 206], or [Errno 2] No such file or directory).
MAX_PATH = 260


@dataclass(frozen=True)
class PathFit:
    """How the deepest file of the torch an install writes fits under ``folder``: ``row`` None when the table
    does not know that release's wheels."""

    torch: str  # the build's version as its dist-info names it: "2.13.0+cu126"
    folder: str  # the site-packages it goes into
    row: WindowsLongestPath | None

    @property
    def member(self) -> str:
        return self.row.member_for(self.torch).replace("/", "\\") if self.row else ""

    @property
    def length(self) -> int | None:
        return self.row.length_for(self.torch) if self.row else None

    @property
    def total(self) -> int | None:
        # the folder, the separator, the member
        return len(self.folder) + 1 + self.length if self.length is not None else None


def _site_packages(snap: Snapshot, store: bool) -> str | None:
    """The folder an install of torch writes into: the installed torch's (a reinstall), else the interpreter's
    own <prefix>\\Lib\\site-packages where sys.path holds it (the Store's Python: its user site, since pip
    cannot write under WindowsApps); None when not known."""
    torch = snap.install.torch
    if torch is not None and torch.location:
        return torch.location.rstrip("\\/")
    prefix, py = snap.interpreter.prefix, snap.environment.python
    if py is None:
        return None
    if store:
        return (py.user_site.path or "").rstrip("\\/") or None
    if not prefix:
        return None
    own = ntpath.normcase(ntpath.join(prefix, "Lib", "site-packages"))
    return next((e.rstrip("\\/") for e in py.sys_path if ntpath.normcase(e.rstrip("\\/")) == own), None)


def _torch_to_install(facts: Assessment) -> str | None:
    """The torch an install would write, named as its dist-info is: the plan's target when it changes torch
    (a PyPI CPU wheel has no local tag, so the shortest name is taken: a lower bound). None when nothing is to
    be installed: a torch already there and kept was written whole, so its paths are no verdict."""
    installed = facts.snap.install.torch
    target = facts.choice.target if facts.choice is not None else None
    if target is not None and (installed is None or variant_of(installed.version) != target.wheel.variant
                               or installed.version.split("+")[0] != target.wheel.torch):
        wheel = target.wheel
        return wheel.torch if wheel.variant == "cpu" else f"{wheel.torch}+{wheel.variant}"
    return None


def path_fit(facts: Assessment, store: bool = False) -> PathFit | None:
    """The deepest file of the torch to install under the target's site-packages; None when the folder or the
    torch is not known."""
    folder, torch = _site_packages(facts.snap, store), _torch_to_install(facts)
    # Only a full Windows path (a drive or a UNC share) is the count Windows makes
    if not folder or not ntpath.splitdrive(folder)[0] or not torch:
        return None
    row = facts.table.windows_longest_path(torch) if facts.table is not None else None
    return PathFit(torch, folder, row)


def _windows_findings(facts: Assessment, evidence: dict) -> list[Finding]:
    snap = facts.snap
    interp, findings = snap.interpreter, []
    windows = snap.environment.windows
    long_paths_off = windows is not None and windows.long_paths_enabled is False
    store = bool(_STORE_PYTHON.search(interp.path or "") or _STORE_PYTHON.search(interp.found_as or ""))
    if store:
        version = ".".join(interp.version.split(".")[:2]) or "3.12"
        findings.append(Finding(
            "windows-store-python", WARNING,
            Msg("{path} is the Microsoft Store's Python", path=interp.path),
            Msg("It runs in an app container: what pip installs for it lands under AppData\\Local\\Packages\\"
                "PythonSoftwareFoundation.Python.{version}_...\\LocalCache, a path so deep that torch's "
                "files pass "
                "Windows' 260-character limit (pip: \"[Errno 2] No such file or directory\"), and other "
                "programs "
                "do not see that folder. The python.org installer, or a venv made with it, avoids both.",
                version=version),
            evidence | {"long_paths_enabled": windows.long_paths_enabled if windows else None},
            Fix(Msg("Install Python from python.org and create the environment with it:"),
                [f"py -{version}-64 -m venv .venv"], ["https://www.python.org/downloads/windows/"]),
        ))
    if long_paths_off:
        findings.append(_long_paths_finding(facts, store, evidence | {"long_paths_enabled": False}))
    return findings


def _long_paths_finding(facts: Assessment, store: bool, evidence: dict) -> Finding:
    fix = Fix(Msg("Enable long paths (administrator PowerShell), or keep the environment in a short folder "
                  "such as C:\\venvs\\torch."), [LONG_PATHS_COMMAND], [LONG_PATHS_DOC])
    why = Msg("LongPathsEnabled is not 1 under HKLM\\SYSTEM\\CurrentControlSet\\Control\\FileSystem, so "
              "paths longer than 260 characters fail. torch's wheels hold deep paths; under a long "
              "environment folder pip stops with \"[Errno 2] No such file or directory\" and its hint "
              "\"This error might have occurred since this system does not have Windows Long Path support "
              "enabled\".")
    fit = path_fit(facts, store)
    if fit is not None:
        evidence = evidence | {"site_packages": fit.folder, "torch": fit.torch,
                               "longest_member": fit.member or None, "longest_member_length": fit.length,
                               "longest_member_source": fit.row.wheel if fit.row else None}
    if fit is not None and fit.total is not None and fit.total >= MAX_PATH:
        # The length comes from PyPI's wheel of that release (a CUDA build's own is not read; its dist-info
        # name carries the local tag, counted): the deepest file is at least that long.
        return Finding(
            "windows-long-paths-disabled", ERROR,
            Msg("Windows long paths are disabled: installing torch {torch} into {folder} fails on its "
                "deepest file ({total} characters)", torch=fit.torch, folder=fit.folder, total=fit.total),
            Msg("LongPathsEnabled is not 1, so Windows refuses paths of 260 characters or more. The folder "
                "is {folder_len} characters, plus 1 for the separator, plus {member_len} for torch {torch}'s "
                "deepest file {member} (read from {wheel}): {total}, at or above 260. pip will fail with "
                "WinError 206 / [Errno 2] No such file or directory: '{folder}\\{member}'.",
                folder_len=len(fit.folder), member_len=fit.length, torch=fit.torch, member=fit.member,
                wheel=fit.row.wheel, total=fit.total, folder=fit.folder),
            evidence, fix)
    if store and facts.snap.install.torch is None and (fit is None or fit.total is None):
        # The Store's site-packages alone is ~140 characters: torch's deep files pass 260 there, so installing
        # torch fails (pytorch/pytorch#23823, zeyad-mansour/lunar#6). Where the count is known, it decides.
        return Finding(
            "windows-long-paths-disabled", ERROR,
            Msg("Windows long paths are disabled: installing torch into the Microsoft Store's Python fails "
                "on its deep file paths"), why, evidence, fix)
    if fit is None:
        more = ""
    elif fit.total is None:
        more = Msg(" How long torch {torch}'s deepest file is is not known (the table has no row for that "
                   "release), so whether it passes 260 characters in {folder} is not known.",
                   torch=fit.torch, folder=fit.folder)
    else:
        more = Msg(" Here torch {torch}'s deepest file makes {total} characters ({folder_len} + 1 + "
                   "{member_len}), below 260; a longer folder, or a build with more files, can still pass "
                   "it.",
                   torch=fit.torch, total=fit.total, folder_len=len(fit.folder), member_len=fit.length)
    return Finding(
        "windows-long-paths-disabled", WARNING,
        Msg("Windows long paths are disabled: installing torch can fail on its deep file paths"),
        concat(why, more), evidence, fix)
