"""The torch the user or the project asks for (``--torch``, ``[tool.torchdoctor] torch``, the project's pins)
against what this machine can install (pure): a finding when no wheel of that version fits here, saying
exactly why (no wheel for this Python, OS or architecture; no variant with kernels for these GPUs; only a
driver this run cannot change runs it) and what the nearest workable choice is. The plan (doctor/plan/plan.py)
then installs nothing in its place: it lists those choices with their commands."""

from __future__ import annotations

from doctor.compat.assessment import Assessment
from doctor.compat.drivers import driver_advice
from doctor.compat.interpreters import install_hint, python_in_range, venv_line
from doctor.compat.wheels import (
    NO_PYTHON,
    change_cost,
    choose_on_python,
    packages_for,
    python_label,
    wheel_pins,
)
from doctor.model import snapshot as S
from doctor.model.findings import ERROR, INSTALL, SHELL, Action, Finding, Fix
from doctor.model.i18n import Msg
from doctor.rules import UNINSPECTED, Rule, skipped, unknown

VENV = ".venv"


def check_wanted_torch(facts: Assessment) -> list[Finding]:
    snap, table, pin = facts.snap, facts.table, facts.wanted
    if pin is None:
        return skipped(Msg("no torch version was asked for (--torch, [tool.torchdoctor] torch, the project's "
            "pins)"))
    if snap.interpreter.error:
        return unknown(UNINSPECTED)
    machine, build, choice = facts.machine, facts.build, facts.choice
    ev = {"wanted": pin.spec, "wanted.source": pin.source, "python": python_label(machine),
          "platform": machine.platform, "torch": build.label if build else None, "reason": choice.reason}
    near = choice.nearest
    if choice.unavailable:
        ev |= {"unavailable": choice.unavailable, "asked": choice.asked,
               "nearest": near.wheel.label if near else None}
        actions: list[Action] = []
        summary = (Msg("Ask for another torch (torch {label} is the nearest that fits "
            "here).", label=near.wheel.label)
                   if near else Msg("Ask for another torch."))
        if choice.unavailable == NO_PYTHON and choice.asked:
            summary, actions = _other_python(snap, table, machine, choice.asked, near)
        title = {NO_PYTHON: Msg("no torch {asked} wheel for Python {python}", asked=choice.asked,
                                python=python_label(machine))}.get(
            choice.unavailable, Msg("torch{spec} cannot be installed on this machine", spec=pin.spec))
        return [
            Finding(
                "torch-version-unavailable",
                ERROR,
                Msg("{title} (asked by {source})", title=title, source=pin.source),
                Msg("{reason}.", reason=choice.reason)
                + (
                    Msg(
                        " The nearest release that fits here is torch {label} ({change_cost}).",
                        label=near.wheel.label,
                        change_cost=change_cost(choice.asked, near),
                    )
                    if near
                    else ""
                ),
                ev,
                Fix(summary, actions=actions),
            )
        ]
    change = facts.driver_change
    keep = choice.needs_driver
    if keep is not None and choice.asked and not change.possible:
        advice = driver_advice(table, snap, keep.wheel.cuda or "", keep.driver, change)
        today = choice.today
        ev |= {"needs_driver": advice.minimum, "driver_change": change.why,
               "nearest": today.wheel.label if today else None}
        return [
            Finding(
                "torch-version-unavailable",
                ERROR,
                Msg(
                    "torch {asked} (asked by {source}) needs a newer driver than this machine can get here",
                    asked=choice.asked,
                    source=pin.source,
                ),
                Msg("torch {label} needs {sentence}.", label=keep.wheel.label, sentence=advice.sentence)
                + (
                    Msg(
                        " The nearest release that runs on driver {driver_version} is torch {label} "
                        "({change_cost}).",
                        driver_version=machine.driver_version,
                        label=today.wheel.label,
                        change_cost=change_cost(choice.asked, today),
                    )
                    if today
                    else ""
                ),
                ev,
                Fix(
                    Msg(
                        "Have the driver updated ({who}), or ask for torch {torch} (--torch =={torch}).",
                        who=change.who or Msg("by whoever manages this machine"),
                        torch=today.wheel.torch,
                    )
                    if today
                    else Msg(
                        "Have the driver updated ({who}), or ask for another torch.",
                        who=change.who or Msg("by whoever manages this machine"),
                    ),
                    links=list(advice.links),
                ),
            )
        ]
    return []


def _other_python(snap: S.Snapshot, table, machine, asked: str, near) -> tuple[str, list[Action]]:
    """The fix for a version without wheels for this Python: a new environment with a Python that has them
    (one on this machine; else uv fetches it; else what to install), or the nearest release on this Python."""
    release = table.release(asked)
    other = python_in_range(snap, release.python_min, release.python_max) if release else None
    ask_nearest = Msg(" or ask for torch {torch} on this Python (--torch "
        "=={torch})", torch=near.wheel.torch) if near else ""
    if other is None:
        return Msg("Use another Python{nearest}.", nearest=ask_nearest), []
    make = venv_line(other, VENV, snap.host.os == "windows")
    if make is None:
        return install_hint(other) + (Msg(" Or ask for torch {torch} on this Python.", torch=near.wheel.torch)
                                      if near else ""), []
    there, pick = choose_on_python(table, machine, other.version, asked)
    fit = pick.target or pick.needs_driver
    actions = [Action(SHELL, text=make)]
    if fit is not None:
        pins, _ = wheel_pins(fit, snap, packages_for(snap), table, there)  # the same pins as the plan's way
        python = f"{VENV}\\Scripts\\python.exe" if snap.host.os == "windows" else f"{VENV}/bin/python"
        variant = fit.wheel.variant if snap.host.os != "darwin" else None
        actions.append(Action(INSTALL, tuple(pins), variant, python=python))
    where = other.path or Msg("fetched by {uv}", uv=other.uv)
    return Msg("Make an environment with Python {version} ({where}) and install torch {asked} "
        "there{nearest}.",
               version=other.version, where=where, asked=asked, nearest=ask_nearest), actions


RULES = [
    Rule("wanted-torch", Msg("the torch version asked for, if any (--torch, the project's pins), can be "
        "installed here"),
         check_wanted_torch, ("torch-version-unavailable",)),
]
