"""Findings: what the rules conclude. Plain data with a stable id; rules return them, never print."""

from __future__ import annotations

import functools
from copy import deepcopy
from dataclasses import dataclass, field, fields, is_dataclass

from doctor.model.i18n import Msg, _rebuild

TYPE_CHECKING = False
if TYPE_CHECKING:  # in annotations only (the rank side, doctor.distributed.entry, imports this module too)
    from typing import Any

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)
INTERNAL_ERROR_ID = "internal-rule-error"  # a rule that crashed: its own finding, exit 3


# Action kinds: what a fix asks a package manager (or the shell) to do.
INSTALL = "install"  # install these pins (from the index of ``variant``)
REINSTALL = "reinstall"  # the same, forced over what is there
UNINSTALL = "uninstall"  # remove these packages
VENV = "venv"  # make a virtual environment at ``text``, then install the pins into it
SHELL = "shell"  # a command line that is not a package manager's (``text``), kept in its place
CONDA_REMOVE = "conda-remove"  # remove these conda packages from the environment at ``text`` (its prefix)
ACTION_KINDS = (INSTALL, REINSTALL, UNINSTALL, VENV, SHELL, CONDA_REMOVE)


@dataclass(frozen=True)
class Action:
    """One step of a fix, as data. The plan's one command builder (doctor/plan/commands.py) writes every
    action out for this run: the installer (pip or uv), the mirror, the shell's quoting. So a finding
    can never print a different index or installer than the plan beside it."""

    kind: str
    packages: tuple[str, ...] = ()  # pins "torch==2.7.1+cu128" or bare names
    variant: str | None = None  # the wheel index the pins come from ("cu128"); None: the default index
    python: str | None = None  # the interpreter to act on; None: the target interpreter
    text: str = ""  # SHELL: the line itself; VENV: the folder of the new environment
    # The pins are the plan's: the exact torch (and companions) the environment ends with, from the plan's
    # index. ``packages`` and ``variant`` are then only the fallback when the plan names none. So a finding
    # that reinstalls torch can never name another build than the plan beside it.
    plan: bool = False
    # ``packages`` are requirements as torch's metadata declares them (extras and ranges: "numpy<2"), not pins
    declared: bool = False


@dataclass
class Fix:
    summary: str = ""  # one sentence: what to do
    commands: list[str] = field(default_factory=list)  # exact, copy-pasteable, one per line
    links: list[str] = field(default_factory=list)
    # When set, ``commands`` is written from these by the plan's command builder (not part of the report).
    actions: list[Action] = field(default_factory=list, metadata={"report": False})


@dataclass
class Finding:
    id: str  # stable kebab-case, e.g. "gpu-arch-unsupported"
    severity: str  # ERROR, WARNING or INFO
    title: str  # one line
    detail: str = ""  # why, in a few sentences
    evidence: dict[str, Any] = field(default_factory=dict)  # the facts the conclusion rests on
    fix: Fix | None = None
    unverified: list[str] = field(default_factory=list)  # table rows marked unverified that it rests on
    rule: str = ""  # the rule that produced it (filled by the engine)


# A check's state. Every check is in one of the first four; CRASHED is torchdoctor's own bug (the rule
# raised), which fails the run with exit 3.
PASSED = "passed"  # the rule looked and found nothing
FAILED = "failed"  # the rule produced findings
# the rule does not apply here (note: why: --no-smoke, not WSL, not in a collect_env text)
SKIPPED = "skipped"
UNKNOWN = "unknown"  # the rule applies but a fact it needs is missing (note: which, and why)
CRASHED = "crashed"
CHECK_STATES = (PASSED, FAILED, SKIPPED, UNKNOWN, CRASHED)


@dataclass
class CheckResult:
    """One rule's outcome: passed, failed (it has findings), skipped or unknown (``note`` says why),
    or crashed (an internal error)."""

    rule: str
    summary: str
    status: str  # one of CHECK_STATES
    note: str = ""


def as_report_dict(obj) -> dict[str, Any]:
    """A finding or check as the report holds it: its fields, without working data (``actions``)."""
    out = {}
    for name in _report_fields(type(obj)):
        value = getattr(obj, name)
        if value is None or type(value) in _ATOMS:
            out[name] = value  # what deepcopy gives for text, numbers, true/false
        elif type(value) in _COPIED:
            out[name] = _copied(value)
        elif is_dataclass(value):
            out[name] = as_report_dict(value)
        else:
            out[name] = _copied(value)
    return out


_ATOMS = frozenset((str, int, float, bool))


def _copied(value):
    """``copy.deepcopy`` of evidence (dicts and lists of text, numbers and messages) without its memo and
    dispatch: most of the time of building a report. Anything else still goes through deepcopy."""
    cls = type(value)
    if value is None or cls in _ATOMS:
        return value
    if cls is dict:
        return {k if type(k) in _ATOMS else deepcopy(k): _copied(v) for k, v in value.items()}
    if cls is list:
        return [_copied(v) for v in value]
    if cls is Msg:
        return _rebuild(value.template, _copied(value.params), value.structural, str(value))
    return deepcopy(value)


_COPIED = frozenset((dict, list, Msg))


@functools.lru_cache(maxsize=None)  # noqa: UP033 - the rank side imports this on Python 3.8 (no functools.cache)
def _report_fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls) if f.metadata.get("report", True))
