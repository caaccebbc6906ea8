"""The verdict of a report in words, shared by every format: the headline that agrees with the exit code,
the checks by state, and the line under the plan. Pure: the report dict in, strings out.
"""

from __future__ import annotations

import re
from typing import Any

from doctor.model.findings import INTERNAL_ERROR_ID
from doctor.model.i18n import N_, Msg, join, localize

STATES = ("passed", "failed", "skipped", "unknown", "crashed")
REQUIREMENTS_RULE = "requirements"  # doctor.model.requirements.RULE


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


# Counted words, said in the run's language: (one, many).
COUNTED = {
    "check": (N_("{n} check"), N_("{n} checks")),
    "error": (N_("{n} error"), N_("{n} errors")),
    "warning": (N_("{n} warning"), N_("{n} warnings")),
    "note": (N_("{n} note"), N_("{n} notes")),
    "requirement": (N_("{n} requirement"), N_("{n} requirements")),
}
STATE_COUNTS = {"passed": N_("{n} passed"), "failed": N_("{n} failed"), "skipped": N_("{n} skipped"),
                "unknown": N_("{n} unknown"), "crashed": N_("{n} crashed")}


def counted(n: int, word: str) -> Msg:
    """A count and its word: "1 error", "2 errors" (and their translations)."""
    one, many = COUNTED[word]
    return Msg(one if n == 1 else many, n=n)


def exit_code(report: dict) -> int | None:
    code = _obj(report.get("summary")).get("exit_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def check_counts(report: dict) -> dict[str, int]:
    """Checks per state, in STATES order (states with none left out)."""
    counts = {state: 0 for state in STATES}
    for check in _list(report.get("checks")):
        status = _obj(check).get("status")
        if isinstance(status, str) and status in counts:
            counts[status] += 1
    return {state: n for state, n in counts.items() if n}


def checks_text(report: dict) -> str:
    """ "14 checks: 10 passed, 1 failed, 2 skipped, 1 unknown" (empty when the report lists none)."""
    counts = check_counts(report)
    if not counts:
        return ""
    total = sum(counts.values())
    states = join(", ", [Msg(STATE_COUNTS[state], n=n) for state, n in counts.items()])
    return localize(Msg("{checks}: {states}", checks=counted(total, "check"), states=states))


def headline(report: dict) -> str:
    """What the run concluded, in the exit code's terms: "no problems found", "2 errors, 1 note",
    "3 requirements not met", "internal error in rule X"."""
    findings = [_obj(f) for f in _list(report.get("findings"))]
    summary = _obj(report.get("summary"))
    code = exit_code(report)
    crashed = [
        str(_obj(f.get("evidence")).get("rule") or "?") for f in findings if f.get("id") == INTERNAL_ERROR_ID
    ]
    unmet = [f for f in findings if f.get("rule") == REQUIREMENTS_RULE]
    others = [f for f in findings if f.get("id") != INTERNAL_ERROR_ID and f.get("rule") != REQUIREMENTS_RULE]
    counts = {sev: sum(1 for f in others if f.get("severity") == sev) for sev in ("error", "warning", "info")}
    words = [
        counted(counts["error"], "error"),
        counted(counts["warning"], "warning"),
        counted(counts["info"], "note"),
    ]
    words = [w for w, n in zip(words, counts.values(), strict=True) if n]
    parts = []
    if crashed:
        parts.append(Msg("internal error in rule {rules}: the verdict is "
            "incomplete", rules=", ".join(crashed)))
    if unmet:
        parts.append(Msg("{requirements} not met", requirements=counted(len(unmet), "requirement")))
    if words:
        strict = bool(summary.get("strict"))
        if not counts["error"] and counts["warning"] and strict and code == 1:
            words[0] = Msg("{warnings} (failing under --strict)", warnings=words[0])
        parts.append(join(", ", words))
    if not parts:
        return localize(Msg("no problems found"))
    if code == 0 and not counts["error"]:
        return localize(Msg("no errors: {parts}", parts=join("; ", parts)))
    return localize(join("; ", parts))


def verdict_line(report: dict) -> str:
    """The one summary line: the headline, the checks by state, and the exit code it agrees with."""
    parts = [headline(report)]
    checks = checks_text(report)
    if checks:
        parts.append(checks)
    code = exit_code(report)
    if code is not None:
        parts.append(localize(Msg("exit {code}", code=code)))
    return " · ".join(parts)


def plan_line(report: dict) -> str | None:
    """The line in place of a plan when the plan has no step: None when the plan has steps (or none at
    all)."""
    plan = _obj(report.get("plan"))
    status = plan.get("status")
    code = exit_code(report)
    if code == 3 and not plan.get("steps"):
        return localize(Msg("Fix: a rule crashed, so this machine was not fully checked; report it and check "
            "again."))
    findings = [_obj(f) for f in _list(report.get("findings"))]
    errors = [f for f in findings if f.get("severity") == "error"]
    if code == 4 and not plan.get("steps") and all(f.get("rule") == REQUIREMENTS_RULE for f in errors):
        return localize(Msg("Fix: nothing to install: this machine does not meet the requirements above."))
    if status != "healthy":
        return None
    if code in (0, None):
        if any(f.get("severity") == "warning" for f in findings):  # not "nothing" right under a warning's fix
            return localize(Msg("Fix: nothing to install; each warning above says what to change."))
        return localize(Msg("Fix: nothing to change."))
    return localize(Msg("Fix: no install command fixes this: follow each finding's fix above."))


# --- the machine in words every format shares (text, Markdown, JUnit, fleet say the same) -----------------

# The NVIDIA stack when no driver version is known, by the probe's status (doctor/model/snapshot.py).
NVIDIA_WORDS = {
    "no-gpu": N_("none: no GPU"),
    "no-driver": N_("none: an NVIDIA GPU is on the PCI bus but no driver answers"),
    "driver-library-mismatch": N_("not usable: the driver library and the kernel module differ (a reboot "
        "fixes it)"),
    "container-lost-gpu": N_("not usable: this container lost access to its GPUs"),
    "no-permission": N_("not usable: no permission to open the GPU devices"),
}


def driver_words(nvidia: Any) -> str | None:
    """The driver when none is known: "none: no GPU (why)", "unknown (why)", "not usable: ..." in the run's
    language; None when the report has a driver version (each format shows that its own way)."""
    nvidia = _obj(nvidia)
    if _obj(nvidia.get("driver_version")).get("value"):
        return None
    status = nvidia.get("status")
    words = Msg(NVIDIA_WORDS[status]) if status in NVIDIA_WORDS else Msg("unknown")
    detail = nvidia.get("detail") or _obj(nvidia.get("driver_version")).get("why")
    return localize(Msg("{state} ({detail})", state=words, detail=detail) if detail else words)


def no_gpu(nvidia: Any) -> bool:
    """The probe found no NVIDIA GPU at all (not: could not tell)."""
    return _obj(nvidia).get("status") == "no-gpu"


def torch_words(snapshot: Any) -> str | None:
    """torch when the report has no build of it: "not installed", or "unknown" with why; None when it has."""
    snapshot = _obj(snapshot)
    install, interp = _obj(snapshot.get("install")), _obj(snapshot.get("interpreter"))
    if _obj(install.get("torch")):
        return None
    if interp.get("error"):
        return localize(Msg("unknown: the interpreter could not be inspected"))
    if install.get("status") == "absent":
        return localize(Msg("not installed"))
    why = install.get("detail")
    return localize(Msg("unknown ({why})", why=why) if why else Msg("unknown"))


def torch_warnings(runtime: Any, at_most: int = 5) -> list[str]:
    """What torch itself warned while the smoke test ran (NumPy missing, a GPU it cannot use): the first
    line of each, as torch said it."""
    lines = [str(w).strip().splitlines()[0] for w in _list(_obj(runtime).get("warnings")) if str(w).strip()]
    return lines[:at_most]


# Table rows a conclusion rests on that nobody read from a primary artefact (doctor/compat: "torch 2.7:
# patches", "arch list 2.7/cu128", "cuda 12.8", ...), said in words. The first pattern that matches says it.
_ROW_WORDS = (
    (re.compile(r"torch (?P<minor>\S+): patches$"),
     N_("the patch releases of torch {minor} come from release notes and package listings, not from a wheel "
        "torchdoctor has read")),
    (re.compile(r"torch (?P<minor>\S+): variants\.(?P<platform>\S+)$"),
     N_("the CUDA builds of torch {minor} for {platform} come from release notes, not from a wheel "
         "torchdoctor "
        "has read")),
    (re.compile(r"arch list (?P<minor>[^/\s]+)/(?P<variant>\S+)$"),
     N_("the GPUs the torch {minor} {variant} build has kernels for come from PyTorch's build scripts, not "
         "from a "
        "wheel torchdoctor has read")),
    (re.compile(r"cuda (?P<cuda>\S+)$"),
     N_("the driver CUDA {cuda} needs comes from copies of NVIDIA's release notes, not from NVIDIA's own "
         "page")),
    (re.compile(r"cuda_toolkits (?P<cuda>\S+)$"),
     N_("the GPUs CUDA {cuda} can compile for come from compiler sources, not from NVIDIA's own notes")),
    (re.compile(r"cudnn (?P<cudnn>[^/\s]+)/CUDA (?P<cuda>\S+)$"),
     N_("the GPUs cuDNN {cudnn} supports come from NVIDIA's support matrices, not from the library itself")),
    (re.compile(r"cuDNN of torch (?P<minor>\S+) (?P<variant>\S+)$"),
     N_("the cuDNN of torch {minor} {variant} is inferred from the release's other builds")),
)


def rests_on_words(rows: Any) -> list[str]:
    """Each second-hand table row a verdict or a plan rests on, as a sentence (`-v` says these)."""
    out = []
    for row in _list(rows):
        row = str(row)
        for pattern, template in _ROW_WORDS:
            match = pattern.match(row)
            if match:
                out.append(localize(Msg(template, **match.groupdict())))
                break
        else:
            out.append(localize(Msg("the table row \"{row}\" is not confirmed from a primary "
                "source", row=row)))
    return out
