"""The way back when a fix stops half way (Ctrl-C, SIGTERM, SIGHUP, a failed step): put the builds from
before back, so that the old torch imports and ``pip check`` is clean, with no one to type anything.

An interrupted pip does not roll back (it does only on an Exception, and a signal is not one): it leaves
its stash of what it was replacing (``~orch``, ``~orch-2.6.0+cu126.dist-info``), a package folder half
written, a *.dist-info without RECORD that no pip can uninstall ("RECORD file not found"). The restore
command alone cannot get past those. So, in this order:

1. ``SiteFolders.read`` before anything changes: the target's site-packages folders and what is in them,
   and which torch-family package folders a complete dist-info (one with RECORD) owned;
2. after the stop, ``clear_debris``: what appeared since that is pip's debris goes (new ``~`` stashes, new
   torch-family dist-infos without RECORD, package folders of the torch family that no complete dist-info
   owns any more but one did before, or that were not there before). Nothing that was there before the
   fix is touched. These few file operations run with Ctrl-C/SIGTERM/SIGHUP held back;
3. the restore commands (uninstall what the fix added, reinstall every old torch-family build exactly);
4. ``pip check``.

When nothing changed yet (stopped while downloading) there is nothing to do. When the restore itself is
interrupted or fails, the debris is cleared again and the exact command is printed: after step 2 it works.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from doctor.fix.environment import last_json
from doctor.model.versions import normalize_name
from doctor.plan import installers
from doctor.runner import signals_held

# Run by the target interpreter: the folders pip installs into (Python 3.8+, stdlib only).
SITE_SCRIPT = (
    "import json, sysconfig\n"
    "print(json.dumps(sorted({sysconfig.get_path('purelib'), sysconfig.get_path('platlib')})))\n"
)
TRIO_FOLDERS = ("torch", "torchvision", "torchaudio", "torchgen", "functorch")

# The restore file's first command, run by the target interpreter: ``clear_debris`` for a later day, when
# torchdoctor may have been killed (SIGKILL, a power cut) and there is no record of what was there before.
# Arguments: the site-packages folders, ``--``, the package folders a complete dist-info owned before the fix.
# In each folder it removes pip's stashes (folders named the way pip's AdjacentTempDirectory names them),
# torch-family dist-infos without RECORD or INSTALLER, then those package folders when no complete dist-info
# owns them any more. Without it, pip cannot get past what a killed install left ("RECORD file not found",
# files of two builds in one folder). One line with no double quote, %, ! or ^: cmd and PowerShell take it.
CLEAN_SCRIPT = ";".join((
    "import os,re,shutil,sys",
    "a=sys.argv[1:];i=a.index('--')",
    r"S=re.compile(r'~[-~.=\x250-9]*\w[\w.+-]*$')",
    r"D=re.compile(r'(torch|torchvision|torchaudio|triton|pytorch_triton\w*|nvidia_\w+|cuda_\w+)"
    r"-[^-]+\.dist-info$',re.I)",
    "j=os.path.join",
    "w=lambda d,n:all(os.path.isfile(j(d,n,f)) for f in ('RECORD','INSTALLER'))"
    " and open(j(d,n,'RECORD'),'rb').read()[-1:]==b'\\n'",
    "o=lambda d:{l.split('/')[0] for n in os.listdir(d) if n.endswith('.dist-info') and w(d,n)"
    " for l in open(j(d,n,'RECORD'),errors='replace')}",
    "[shutil.rmtree(j(d,n),True) for d in a[:i] for n in os.listdir(d)"
    " if os.path.isdir(j(d,n)) and (S.match(n) or D.match(n) and not w(d,n))]",
    "[shutil.rmtree(j(d,p),True) for d in a[:i] for O in [o(d)] for p in a[i+1:]"
    " if os.path.isdir(j(d,p)) and p not in O]",
))


def clean_argv(python: str, state: SiteFolders) -> list[str] | None:
    """The restore file's clean-up command (CLEAN_SCRIPT) for these folders; None when there are none."""
    if not state.folders:
        return None
    owned = sorted({name for folder in state.folders for name in state.owned.get(folder, set())})
    return [python, "-c", CLEAN_SCRIPT, *state.folders, "--", *owned]


@dataclass
class SiteFolders:
    """The target's site-packages folders as they were before the fix."""

    folders: list[str] = field(default_factory=list)
    entries: dict[str, set[str]] = field(default_factory=dict)  # folder -> names in it
    owned: dict[str, set[str]] = field(default_factory=dict)  # folder -> package folders a RECORD owned

    @classmethod
    def read(cls, python: str, runner) -> SiteFolders:
        res = runner([python, "-c", SITE_SCRIPT], timeout=60.0)
        try:
            listed = last_json(res.stdout) if res.ok else []
            folders = [f for f in listed if isinstance(f, str) and os.path.isdir(f)]
        except ValueError:
            folders = []
        state = cls(folders)
        for folder in folders:
            state.entries[folder] = _names(folder)
            state.owned[folder] = _owned(folder, state.entries[folder])
        return state


def clear_debris(state: SiteFolders) -> list[str]:
    """Remove what an interrupted install left since ``state`` was read (module docstring, step 2);
    returns the paths removed. Signals are held back meanwhile: a half-removed folder helps no one."""
    removed: list[str] = []
    with signals_held():
        for folder in state.folders:
            before = state.entries.get(folder, set())
            now = _names(folder)
            complete = _owned(folder, now)
            for name in sorted(now - before):
                if name.startswith("~") or (
                    _is_dist_info(name) and _torch_family(name) and not _has_record(folder, name)
                ):
                    removed += _remove(os.path.join(folder, name))
            for name in TRIO_FOLDERS:
                if (
                    name in now
                    and name not in complete
                    and (name in state.owned.get(folder, set()) or name not in before)
                ):
                    removed += _remove(os.path.join(folder, name))
    return removed


def debris(state: SiteFolders) -> list[str]:
    """What ``clear_debris`` would remove now (nothing is removed)."""
    found = []
    for folder in state.folders:
        before, now = state.entries.get(folder, set()), _names(folder)
        complete = _owned(folder, now)
        found += [
            os.path.join(folder, n)
            for n in sorted(now - before)
            if n.startswith("~") or (_is_dist_info(n) and _torch_family(n) and not _has_record(folder, n))
        ]
        found += [
            os.path.join(folder, n)
            for n in TRIO_FOLDERS
            if n in now and n not in complete and (n in state.owned.get(folder, set()) or n not in before)
        ]
    return found


def _names(folder: str) -> set[str]:
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def _is_dist_info(name: str) -> bool:
    return name.endswith(".dist-info") and not name.startswith("~")


def _dist_name(name: str) -> str:
    return normalize_name(name[: -len(".dist-info")].split("-")[0])


def _torch_family(name: str) -> bool:
    return installers.in_torch_family(_dist_name(name))


def _has_record(folder: str, name: str) -> bool:
    """Whether the dist-info is whole: pip and uv write INSTALLER, then RECORD, when an install ends (a wheel
    brings a RECORD of its own, so one half extracted may have RECORD but never INSTALLER), and a RECORD ends
    with a newline (one cut off while written, by a killed uv, does not)."""
    if not all(os.path.isfile(os.path.join(folder, name, f)) for f in ("RECORD", "INSTALLER")):
        return False
    try:
        with open(os.path.join(folder, name, "RECORD"), "rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return False
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"
    except OSError:
        return False


def _owned(folder: str, names: set[str]) -> set[str]:
    """The torch-family package folders (TRIO_FOLDERS) that a dist-info with RECORD lists files in."""
    owned: set[str] = set()
    for name in names:
        if not (_is_dist_info(name) and _torch_family(name) and _has_record(folder, name)):
            continue
        try:
            with open(os.path.join(folder, name, "RECORD"), "rb") as handle:
                for line in handle:
                    top = line.split(b"/", 1)[0].split(b",", 1)[0].decode("utf-8", "replace")
                    if top in TRIO_FOLDERS:
                        owned.add(top)
        except OSError:
            continue
    return owned


def _remove(path: str) -> list[str]:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except OSError:
        return []
    return [path]
