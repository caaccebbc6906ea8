"""The ways out of a wheel problem, as plan steps (pure): install a wheel (into the target interpreter, or
into a new virtual environment when the target is an externally managed system Python), or update the driver
and keep torch. Each way is written with the run's one command builder (doctor/plan/commands.py) and can be
described as structured data (the plan's ``alternatives``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from doctor.compat.distributions import PYTORCH_CONDA
from doctor.compat.drivers import DriverAdvice
from doctor.compat.installs import conda_torch
from doctor.compat.wheels import Fit, packages_for, wheel_pins
from doctor.model.findings import INSTALL, Action
from doctor.model.i18n import Msg
from doctor.model.snapshot import Snapshot
from doctor.model.versions import split_local, variant_of
from doctor.plan.commands import Commands, conda_remove_argv, index_url, render_argv

if TYPE_CHECKING:  # annotations only: importing it would load all of compat (wheels, table) with the plan
    from doctor.compat.assessment import Assessment

# where the plan makes an environment for an externally managed Python (in the working folder)
VENV_FOLDER = ".venv"
PEP_668 = "https://peps.python.org/pep-0668/"


@dataclass(slots=True)
class Step:
    kind: str  # "driver", "venv", "remove", "install"
    description: str
    command: str | None = None
    argv: list[str] | None = None


def externally_managed(snap: Snapshot) -> bool:
    """PEP 668: pip refuses to install into this interpreter (a marked system Python, not a venv or conda
    env)."""
    interp = snap.interpreter
    return bool(interp.externally_managed) and interp.env_kind not in (
        "venv",
        "uv-venv",
        "conda",
        "conda-base",
    )


def installed_pins(snap: Snapshot) -> tuple[list[str], str | None]:
    """The installed torch and companions pinned exactly as their metadata names them, from where they came: a
    local tag names the wheel index (``torch==2.7.1+cu128`` from cu128), an untagged version the installer's
    default index (PyPI). What a finding that reinstalls torch installs when the plan installs nothing else.
    Empty when torch is not installed or its local tag names no index (a ``+git`` source build); the plan asks
    for none for a distribution's own torch either (doctor/plan/distributions.py own_build)."""
    dist = snap.install.torch
    if dist is None or not dist.version:
        return [], None
    local = split_local(dist.version)[1]
    variant = variant_of(dist.version)
    if local and not variant:
        return [], None  # a local tag that names no index: nothing can reinstall it from anywhere
    pins = [f"torch=={dist.version}"]
    for name in ("torchvision", "torchaudio"):
        companion = getattr(snap.install, name)
        if companion is not None and companion.version:
            pins.append(f"{name}=={companion.version}")
    return pins, variant


def describe(fit: Fit | None, snap: Snapshot, index_base: str) -> dict | None:
    if fit is None:
        return None
    w = fit.wheel
    return {
        "torch": w.torch, "torchvision": w.torchvision, "torchaudio": w.torchaudio, "variant": w.variant,
        "cuda": w.cuda, "index_url": index_url(w.variant, index_base) if snap.host.os != "darwin" else None,
        "driver": fit.driver.level, "label": w.label,
    }


def venv_python(commands: Commands) -> str:
    return commands.venv_python(VENV_FOLDER)


def install_steps(fit: Fit, facts: Assessment, commands: Commands, reason: str, after: str = "",
                  conda: str | None = None) -> tuple[list[Step], list[str], list[str]]:
    """(steps, notes, pins) that install ``fit``: conda's packages out first where conda owns torch; a virtual
    environment first where the target refuses pip (PEP 668); then the one install command."""
    snap, table, machine = facts.snap, facts.table, facts.machine
    steps: list[Step] = []
    notes: list[str] = []
    pins, dropped = wheel_pins(fit, snap, packages_for(snap), table, machine)
    notes += dropped
    variant = fit.wheel.variant if snap.host.os != "darwin" else None  # macOS wheels come from PyPI
    python = None
    if externally_managed(snap):
        python = venv_python(commands)
        argv = commands.venv_argv(VENV_FOLDER)
        steps.append(Step("venv", Msg("Create a virtual environment {folder} in this folder: {python} is "
            "externally "
                                      "managed (PEP 668) and pip refuses to install into "
                                      "it.", folder=VENV_FOLDER,
                                      python=snap.interpreter.path or Msg("this "
                                          "Python")), render_argv(argv, commands.os), argv))
        notes.append(f"{snap.interpreter.path} is marked EXTERNALLY-MANAGED ({PEP_668}): torch goes into the "
            "new "
                     f"environment {VENV_FOLDER}; run your code with {python}. Debian and Ubuntu need the "
                     "python3-venv package for -m venv (sudo apt install python3-venv). torchdoctor never "
                     "adds "
                     "--break-system-packages.")
    else:
        owned = conda_torch(snap).remove_before_pip
        if owned and snap.interpreter.prefix:
            # pip over conda's torch leaves two owners of the same files: conda's must go first. (Only the
            # pytorch channel's builds get here: conda-forge's and other channels' are never replaced, see
            # advise().)
            names = [r.name for r in owned]
            argv = conda_remove_argv(conda or commands.conda, snap.interpreter.prefix, names)
            steps.append(Step("remove", Msg("Remove the conda packages that own torch ({names}) from this "
                                            "environment; pip installs the wheels "
                                            "next.", names=", ".join(names)), render_argv(argv, commands.os),
                              argv))
            replaced = ("the pytorch channel's conda build with PyTorch's pip wheels (that channel's last "
                "release "
                        "was 2.5)") if facts.origin.kind == PYTORCH_CONDA else \
                "conda's build of torch with PyTorch's pip wheels"
            notes.append("conda owns torch in this environment: the wheels go in with pip after conda's "
                         f"packages are removed (conda will not know about them). This replaces {replaced}.")
    argv = commands.argv(Action(INSTALL, tuple(pins), variant, python=python))
    where = Msg(" into {folder}", folder=VENV_FOLDER) if python else ""
    steps.append(Step("install", Msg("Install torch {label}{where}{after} ({reason}).", label=fit.wheel.label,
                                     where=where, after=after, reason=reason),
                      render_argv(argv, commands.os), argv))
    return steps, notes, pins


def driver_step(advice: DriverAdvice, cuda: str | None, label: str) -> Step:
    """The driver update, as a step nobody runs for the user (fix never installs a driver)."""
    needs = Msg(": CUDA {cuda} (torch {label}) needs it", cuda=cuda, label=label) if cuda else ""
    return Step(
        "driver",
        Msg("Install {sentence}{needs}.", sentence=advice.sentence, needs=needs),
        advice.commands[0] if advice.commands else None,
    )


def way(
    kind: str,
    summary: str,
    steps: list[Step],
    target: dict | None = None,
    cost_text: str = "",
    driver: DriverAdvice | None = None,
    available: bool = True,
    why_not: str = "",
    primary: bool = False,
) -> dict:
    """One way out as data (the plan's ``alternatives``): what it does, what it costs, its steps. ``kind``:
    "driver" (update the driver, keep torch), "wheel" (install another torch), "python" (another Python);
    ``primary``: the way the plan's own steps take."""
    return {
        "kind": kind, "primary": primary, "summary": summary, "cost": cost_text, "available": available,
        "why_not": why_not,
        "target": target, "driver": driver.as_dict() if driver else None,
        "steps": [{"kind": s.kind, "description": s.description, "command": s.command, "argv": s.argv}
                  for s in steps],
    }
