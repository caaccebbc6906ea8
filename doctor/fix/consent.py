"""Whether fix may change this environment, and whether the user agreed.

Refused (exit 6) unless --force: a PEP 668 externally-managed interpreter and a conda base
environment (with the venv advice), and under --yes an install that would also change packages
outside torch's family. Without --yes someone must answer the prompt, so without a terminal fix
refuses before the installer resolves anything. uv/poetry projects: doctor/fix/project.py.
"""

from __future__ import annotations

import re

from doctor import exitcodes
from doctor.errors import DoctorError
from doctor.model.i18n import Msg, localize


def refusal(snap, force: bool) -> str | None:
    """Why this interpreter must not be changed (unless --force), with the venv advice; None when it may."""
    if force:
        return None
    interp = snap.interpreter
    advice = Msg(
        "make a virtual environment and fix that one instead: python3 -m venv .venv && "
        "torchdoctor fix --python .venv (or pass --force to change it anyway)"
    )
    if interp.externally_managed:
        return Msg("refusing to change {path}: it is externally managed (PEP 668); "
            "{advice}", path=interp.path,
                   advice=advice)
    if interp.env_kind == "conda-base":
        return Msg(
            "refusing to change the conda base environment {prefix}: create one with "
            "`conda create -n torch python={version}`, activate it "
            "and run torchdoctor fix there (or pass --force to change base anyway)", prefix=interp.prefix,
            version=_minor(interp.version),
        )
    return None


def _minor(version: str) -> str:
    """The minor version ("3.12" of "3.12.1") for the printed conda command; nothing else goes into it."""
    minor = ".".join((version or "").split(".")[:2])
    return minor if re.fullmatch(r"[0-9]+\.[0-9]+", minor) else "3.12"


def refuse_protected(snap, force: bool) -> None:
    why_not = refusal(snap, force)
    if why_not:
        raise DoctorError(why_not, exitcodes.REFUSED)


def refuse_without_terminal(yes: bool, stdin) -> None:
    """Nobody to ask and no --yes: refused. Checked before the dry run, which alone can download gigabytes."""
    if not yes and not _isatty(stdin):
        raise DoctorError(
            Msg("stdin is not a terminal, so fix only prints the plan: pass --yes to carry it out "
                "(or --dry-run to just print it)"),
            exitcodes.REFUSED,
        )


def refuse_outside_changes(outside: list, yes: bool, force: bool) -> None:
    """Under --yes nobody reviews what the dry run found: changes outside torch need --force. Asked
    interactively, the user sees them in the summary and decides."""
    if outside and yes and not force:
        raise DoctorError(
            Msg("refusing: the install would also change packages outside torch ({names}); review it without "
                "--yes, or add --force", names=", ".join(map(str, outside))),
            exitcodes.REFUSED,
        )


def ask(console, stdin) -> bool:
    """The prompt; only "y" or "yes" agrees (an empty answer or end of input does not)."""
    # the answer is y or yes in any language
    console.print(localize(Msg("Proceed? [y/N] ")), end="", markup=False)
    answer = (stdin.readline() or "").strip().lower()
    return answer in ("y", "yes")


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
