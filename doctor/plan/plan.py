"""The fix plan: from the findings, one ordered list of exact commands (pure). docs/plan.md describes it.

The torch the user has, or asks for (``--torch``, the project's pins), wins. When it runs on this GPU once the
driver is newer, the first way out is the driver, with torch kept; the other way, the nearest release that
runs on today's driver, is named beside it with what it costs. Where the driver cannot be changed
(``--no-driver-change``, a container, a cluster job) the other way comes first. Both are in ``alternatives``
as data.

Driver steps come before wheel steps. Wheel pins carry the local version tag (``torch==2.7.1+cu128``) so that
pip cannot answer "Requirement already satisfied" when only the build changes; torch, torchvision and
torchaudio always move together. An externally managed Python (PEP 668) gets a virtual environment to install
into.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from doctor.compat.distributions import NIGHTLY, SOURCE
from doctor.compat.drivers import DriverChange, driver_advice
from doctor.compat.interpreters import install_hint, python_in_range, venv_line
from doctor.compat.wheels import (
    AS_ASKED,
    AS_ASKED_AFTER_DRIVER,
    NO_PYTHON,
    NO_WHEEL_FOR_GPUS,
    Choice,
    Fit,
    Machine,
    choose_on_python,
    in_spec,
    public_spec,
    python_label,
)
from doctor.compat.wheels import change_cost as cost
from doctor.model.findings import INSTALL as INSTALL_ACTION
from doctor.model.findings import Action, Finding
from doctor.model.i18n import Msg
from doctor.model.snapshot import Snapshot, TorchPin, as_plain
from doctor.model.versions import minor_key
from doctor.plan.commands import Commands, render_argv
from doctor.plan.distributions import advise, cuda_range_for, own_build
from doctor.plan.ways import (
    VENV_FOLDER,
    Step,
    describe,
    driver_step,
    install_steps,
    installed_pins,
    packages_for,
    way,
    wheel_pins,
)

if TYPE_CHECKING:  # annotations only: importing it would load all of compat (wheels, table) with the plan
    from doctor.compat.assessment import Assessment

__all__ = ["DRIVER_FIRST", "HEALTHY", "INSTALL", "MANUAL", "NONE", "Plan", "Step", "WHEEL_FINDINGS",
           "attach_commands", "build_plan", "commands_for", "wheel_pins"]

# Findings whose remedy is a different torch wheel.
WHEEL_FINDINGS = {
    "torch-not-installed", "torch-cpu-build", "torch-wrong-vendor-build", "driver-too-old",
    "gpu-arch-unsupported", "gpus-need-different-wheels", "torchvision-mismatch", "torchaudio-mismatch",
    "gpu-arch-needs-ptx", "cudnn-unsupported-gpu", "requirement-torch", "torch-version-unavailable",
    "rocm-gfx-unsupported", "xpu-wheel-needed",
}

HEALTHY = "healthy"  # nothing to change
INSTALL = "install"  # run the wheel command
DRIVER_FIRST = "driver-first"  # update the driver, then run the wheel command (if any)
MANUAL = "manual"  # no command can fix it (e.g. no wheel for this Python): see the findings
NONE = "none"  # problems exist but none is fixed by changing wheels


@dataclass(slots=True)
class Plan:
    status: str
    reason: str = ""
    python: str = ""
    target: dict | None = None
    # The other wheel: with a driver choice, the other way's (today's nearest release, or torch kept after the
    # driver update); otherwise the newest release that also fits, when the target is another one.
    alternative: dict | None = None
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)  # the finding ids this plan resolves
    unverified: list[str] = field(default_factory=list)
    wanted: dict | None = None  # the torch asked for: {"spec": "==2.3.1", "source": "--torch"}
    driver_change: dict = field(default_factory=lambda: {"possible": True, "why": ""})
    driver: dict | None = None  # the driver the first way needs (minimum, branch, commands, source)
    # The ways out when there is a choice (driver or another torch; another Python): each as data
    # (plan/ways.py way()), the one the steps take marked "primary".
    alternatives: list[dict] = field(default_factory=list)
    pins: list[str] = field(default_factory=list)  # the exact builds the environment ends with
    pins_variant: str | None = None  # the index they come from ("cu128"; None: the installer's default)

    def to_dict(self) -> dict:
        return as_plain(self)  # dataclasses.asdict without its deepcopy of every string

    @property
    def commands(self) -> list[str]:
        return [s.command for s in self.steps if s.command]


def commands_for(snap: Snapshot, **options) -> Commands:
    """The command builder for this snapshot's interpreter and OS (options: installer, source, uv)."""
    # without a path (a collect_env paste): the py launcher on Windows, which has no python3
    default = "py" if snap.host.os == "windows" else "python3"
    return Commands(python=snap.interpreter.path or default, os=snap.host.os or "linux", **options)


@dataclass(slots=True)
class _Run:
    """What every part of one plan shares."""

    facts: Assessment
    commands: Commands
    findings: list[Finding]
    conda: str | None

    @property
    def snap(self) -> Snapshot:
        return self.facts.snap

    @property
    def table(self):
        return self.facts.table

    @property
    def machine(self) -> Machine:
        return self.facts.machine

    @property
    def wanted(self) -> TorchPin | None:
        return self.facts.wanted

    @property
    def change(self) -> DriverChange:
        return self.facts.driver_change

    def steps_for(self, fit: Fit, reason: str, after: str = "") -> tuple[list[Step], list[str], list[str]]:
        return install_steps(fit, self.facts, self.commands, reason, after, self.conda)

    def describe(self, fit: Fit | None) -> dict | None:
        return describe(fit, self.snap, self.commands.source.index_base)


def build_plan(facts: Assessment, findings: list[Finding], commands: Commands | None = None,
               conda: str | None = None) -> Plan:
    """``commands`` (the installer, the mirror or find-links, the shell; default: pip from
    download.pytorch.org) only changes how the commands are written; ``conda``: the conda executable
    for the removal steps when conda owns torch (default: the one ``commands`` names)."""
    snap, table = facts.snap, facts.table
    commands = commands or commands_for(snap)
    run = _Run(facts, commands, findings, conda)
    plan = Plan(
        "", python=commands.python, driver_change={"possible": run.change.possible, "why": run.change.why}
    )
    if run.wanted is not None:
        plan.wanted = {"spec": run.wanted.spec, "source": run.wanted.source}
    # What a finding that reinstalls torch installs when the plan installs nothing else: the installed builds,
    # exactly; never for a distribution's own torch (conda-forge, NGC, Jetson, a source build), which pip must
    # not replace behind the user's back.
    plan.pins, plan.pins_variant = ([], None) if own_build(facts) is not None else installed_pins(snap)
    wheel_ids = sorted({f.id for f in findings if f.id in WHEEL_FINDINGS})
    if not wheel_ids:
        errors = [f for f in findings if f.severity == "error"]
        if errors:
            plan.status, plan.reason = (
                NONE,
                "the problems found are not fixed by a different torch wheel; see each finding's fix",
            )
        else:
            plan.status, plan.reason = HEALTHY, "nothing to change"
        return plan
    plan.addresses = wheel_ids
    own = advise(facts, findings, commands)
    if own is not None:
        # A distribution's own torch (conda-forge, NGC, Jetson, a source build, another conda channel) is
        # never replaced with pip wheels here: the plan says what fits that distribution, or stops at the
        # diagnosis.
        plan.status, plan.reason, plan.notes = MANUAL, own.reason, list(own.notes)
        plan.pins, plan.pins_variant = [], None
        if own.origin.kind == SOURCE:
            alternative = _wheel_alternative(run)
            if alternative:
                plan.notes.append(alternative)
        return plan
    if any(f.id == "gpus-need-different-wheels" for f in findings):
        # No wheel serves every GPU: one environment per group, spelled out in that finding's fix.
        plan.status, plan.reason = MANUAL, "no single wheel serves every GPU"
        plan.notes = ["Use one environment per GPU group: see the commands under gpus-need-different-wheels."]
        plan.addresses = []  # that finding's own commands are the fix: shown with it
        return plan
    choice = facts.choice
    if choice.unavailable:
        return _unavailable(run, plan, choice)
    if choice.target is not None:
        return _install(run, plan, choice)
    if choice.needs_driver is not None:
        return _driver_or_today(run, plan, choice)
    plan.status, plan.reason = MANUAL, choice.reason
    plan.notes.append(choice.reason)
    machine = run.machine
    reach = cuda_range_for(table, machine.gpu_ccs) if machine.gpu_ccs else None
    if choice.code == NO_WHEEL_FOR_GPUS and reach:
        plan.notes.append(f"CUDA {reach[0]} to {reach[1]} can compile kernels for these GPUs: only a build "
            "made "
                          "with one of them for exactly these architectures (a source build with "
                          "TORCH_CUDA_ARCH_LIST) would run.")
    elif choice.code == NO_WHEEL_FOR_GPUS and machine.gpu_ccs:
        plan.notes.append("No CUDA version the table knows can compile kernels for these GPUs.")
    return plan


def _asked(run: _Run, choice: Choice) -> str:
    """The choice's reason with who asked for the version: "torch==2.3.1, as asked by --torch", "..., as
    pinned by requirements.txt:2"."""
    reason = choice.reason
    if run.wanted is None or choice.code not in (AS_ASKED, AS_ASKED_AFTER_DRIVER):
        return reason
    verb = "asked" if run.wanted.source.startswith(("--", "[tool.torchdoctor]")) else "pinned"
    return reason.replace(", as asked", f", as {verb} by {run.wanted.source}")


def _same_build(run: _Run, fit: Fit) -> bool:
    build = run.facts.build
    return (build is not None and build.variant == fit.wheel.variant and build.version == fit.wheel.torch
            and not _companions_wrong(run.findings))


def _install(run: _Run, plan: Plan, choice: Choice) -> Plan:
    snap, fit = run.snap, choice.target
    build = run.facts.build
    plan.target, plan.alternative = run.describe(fit), run.describe(choice.alternative)
    plan.unverified = list(fit.wheel.unverified)
    if _same_build(run, fit):
        plan.status = NONE
        plan.reason = (f"torch {build.label} is already the build that fits this machine; no other wheel "
            "fixes "
                       "the findings: see each finding's fix")
        return plan
    reason = _asked(run, choice)
    if build is not None and run.facts.origin.kind == NIGHTLY:
        plan.notes.append(f"This replaces the nightly build torch {build.version} with the release "
            f"{fit.wheel.label}.")
        if minor_key(build.version) == fit.wheel.minor:
            reason = f"the {fit.wheel.minor} release in place of the nightly"
    steps, notes, pins = run.steps_for(fit, reason)
    plan.status, plan.reason, plan.steps = INSTALL, reason, steps
    plan.notes += notes
    plan.pins, plan.pins_variant = pins, fit.wheel.variant if snap.host.os != "darwin" else None
    _common_notes(run, plan, fit, choice)
    return plan


def _common_notes(run: _Run, plan: Plan, fit: Fit, choice: Choice) -> None:
    snap = run.snap
    machine = run.machine
    if machine.free_threaded:
        tag = python_label(machine).rpartition(", ")[2].rstrip(")")
        plan.notes.append(f"Python {tag} is a free-threaded build: only releases with {tag} wheels count "
                          f"(torch {fit.wheel.torch} has them; the table lists each release's free-threaded "
                          "builds).")
    if (
        "torchaudio" in packages_for(snap)
        and fit.wheel.torchaudio is None
        and snap.install.torchaudio is not None
    ):
        plan.notes.append(f"torchaudio has no release for torch {fit.wheel.minor}; uninstall it or keep "
                          "using an older torch if you need it.")
    if choice.alternative is not None:
        plan.notes.append(Msg("Newest release that also fits: torch "
            "{label}.", label=choice.alternative.wheel.label))
    if fit.driver.level == "minor-compat":
        plan.notes.append(Msg("CUDA {cuda} is newer than the driver's CUDA {driver_cuda}; it runs through "
                              "minor-version compatibility.", cuda=fit.wheel.cuda,
                              driver_cuda=run.machine.driver_max_cuda))


def _driver_or_today(run: _Run, plan: Plan, choice: Choice) -> Plan:
    """The torch kept (or asked for) runs once the driver is newer: the driver is the first way, today's
    nearest release the other; where the driver cannot be changed, today's release comes first (if it is what
    was asked for: a version outside the user's specifier is only offered, never installed)."""
    snap, keep, today = run.snap, choice.needs_driver, choice.today
    build = run.facts.build
    anchor = build.version if build is not None and choice.asked is None else choice.asked
    advice = driver_advice(run.table, snap, keep.wheel.cuda or "", keep.driver, run.change)
    driver_now = snap.nvidia.driver_version.value or "the installed driver"
    keeps = _same_build(run, keep)
    driver_steps = [driver_step(advice, keep.wheel.cuda, keep.wheel.label)]
    keep_pins = plan.pins
    notes: list[str] = []
    if not keeps:
        steps, notes, keep_pins = run.steps_for(keep, _asked(run, choice), Msg(" after the driver update"))
        driver_steps += steps
    driver_way = way("driver", f"Install {advice.summary} and keep torch {keep.wheel.label}",
                     driver_steps, run.describe(keep), "a driver update and a reboot", advice,
                     run.change.possible, run.change.why)
    today_way, today_steps, today_notes, today_pins = None, [], [], []
    spec = public_spec(run.wanted.spec) if run.wanted is not None else None
    if today is not None:
        why = f"the nearest release that runs on driver {driver_now}" + (
            f": {cost(anchor, today)}" if cost(anchor, today) else "")
        today_steps, today_notes, today_pins = run.steps_for(today, why)
        outside = (
            ""
            if in_spec(spec, today.wheel.torch)
            else f", outside {run.wanted.spec} asked by {run.wanted.source}"
        )
        today_way = way(
            "wheel",
            f"Keep driver {driver_now}: install torch {today.wheel.label} instead"
            f" ({cost(anchor, today)}{outside})",
            today_steps,
            run.describe(today),
            cost(anchor, today),
        )
    today_first = not run.change.possible and today is not None and in_spec(spec, today.wheel.torch)
    if today_first:
        plan.status, plan.steps, plan.notes = INSTALL, today_steps, today_notes
        plan.reason = (f"the driver is not changed here ({run.change.why}); torch {today.wheel.torch} is the "
                       f"nearest release that runs on driver {driver_now} ({cost(anchor, today)})")
        plan.target, plan.unverified = run.describe(today), list(today.wheel.unverified)
        plan.alternative = run.describe(keep)  # the other way's wheel: torch kept, once the driver is newer
        plan.pins, plan.pins_variant = today_pins, today.wheel.variant if snap.host.os != "darwin" else None
        today_way["primary"] = True
        plan.alternatives = [today_way, driver_way]
        plan.notes.append(Msg("Keeping torch {label} needs {sentence}.", label=keep.wheel.label,
                               sentence=advice.sentence))
        return plan
    plan.driver, plan.target, plan.unverified = (
        advice.as_dict(),
        run.describe(keep),
        list(keep.wheel.unverified),
    )
    plan.alternative = run.describe(today)  # the other way's wheel: the nearest release on today's driver
    plan.reason = _asked(run, choice)
    driver_way["primary"] = run.change.possible
    plan.alternatives = [driver_way] + ([today_way] if today_way else [])
    if not run.change.possible:
        # The version asked for needs a driver this run cannot change: nothing to install here.
        plan.status, plan.steps = MANUAL, []
        plan.notes.append(Msg("torch {label} needs "
            "{sentence}.", label=keep.wheel.label, sentence=advice.sentence))
        if today_way is not None:
            plan.notes.append(f"Or, on driver {driver_now}: {today_way['summary']}: "
                f"{today_steps[-1].command}")
        return plan
    plan.status, plan.steps, plan.notes = DRIVER_FIRST, driver_steps, notes
    if not keeps:
        plan.pins, plan.pins_variant = keep_pins, keep.wheel.variant if snap.host.os != "darwin" else None
    if keeps:
        plan.notes.append(Msg("torch {label} stays: it runs once the driver is updated.", label=build.label))
    if today_way is not None:
        plan.notes.append(Msg("Or keep driver {driver} and install torch {label} instead ({cost}): {command}",
                              driver=driver_now, label=today.wheel.label, cost=cost(anchor, today),
                              command=today_steps[-1].command))
    return plan


def _unavailable(run: _Run, plan: Plan, choice: Choice) -> Plan:
    """The version asked for cannot be had on this machine: say why, and the nearest workable choices (another
    Python for it; the nearest release here), each with its commands. Nothing is installed in its place."""
    plan.status, plan.reason = MANUAL, choice.reason
    plan.notes.append(f"{choice.reason} (asked by "
        f"{run.wanted.source})." if run.wanted else f"{choice.reason}.")
    plan.pins, plan.pins_variant = [], None
    if choice.unavailable == NO_PYTHON and choice.asked:
        other = _other_python_way(run, choice.asked)
        if other is not None:
            plan.alternatives.append(other)
            plan.notes.append(other["summary"] + (": "
                f"{' && '.join(s['command'] for s in other['steps'] if s['command'])}"
                                                  if other["steps"] else ""))
    near = choice.nearest
    if near is not None:
        steps, notes, _ = run.steps_for(near, f"the nearest release that {'runs' if near.runs else 'fits'} "
            "here")
        anchor = choice.asked
        summary = f"Or use torch {near.wheel.label} ({cost(anchor, near)})" if anchor else \
            f"Or use torch {near.wheel.label}"
        plan.alternatives.append(way("wheel", summary, steps, run.describe(near), cost(anchor, near)))
        plan.notes.append(f"{summary}: {steps[-1].command}")
    return plan


def _other_python_way(run: _Run, asked: str) -> dict | None:
    """The version asked for, in a new environment of a Python that has its wheels (one on this machine, or
    fetched by uv; else what to install)."""
    release = run.table.release(asked)
    if release is None:
        return None
    machine = run.machine
    other = python_in_range(run.snap, release.python_min, release.python_max)
    if other is None:
        return None
    there, pick = choose_on_python(run.table, machine, other.version, asked)
    fit = pick.target or pick.needs_driver
    summary = f"Or use Python {other.version} for torch {asked}"
    if fit is None:
        return way("python", summary, [], None, "another Python", available=False, why_not=pick.reason)
    if not other.available:
        return way("python", summary, [], run.describe(fit), "another Python", available=False,
                   why_not=install_hint(other))
    pins, _ = wheel_pins(fit, run.snap, packages_for(run.snap), run.table, there)
    commands = replace(run.commands, python=other.path or other.version)
    python = commands.venv_python(VENV_FOLDER)
    make = venv_line(other, VENV_FOLDER, run.snap.host.os == "windows")
    argv = commands.argv(Action(INSTALL_ACTION, tuple(pins), fit.wheel.variant if run.snap.host.os != "darwin"
                                else None, python=python))
    steps = [Step("venv", Msg("Create {folder} with Python {version} ({path})", folder=VENV_FOLDER,
                              version=other.version, path=other.path) if other.path else
                  Msg("Create {folder} with Python {version} (uv fetches it)", folder=VENV_FOLDER,
                      version=other.version), make),
             Step("install", Msg("Install torch {label} into "
                 "{folder}.", label=fit.wheel.label, folder=VENV_FOLDER), render_argv(argv, commands.os),
                  argv)]
    return way("python", summary, steps, run.describe(fit), "another Python")


def _wheel_alternative(run: _Run) -> str | None:
    """For a source build: the wheel that would fit, as an explicit alternative that says what it replaces."""
    snap = run.snap
    fit = run.facts.unpinned.target
    if fit is None:
        return None
    pins, _ = wheel_pins(fit, snap, packages_for(snap), run.table, run.machine)
    variant = fit.wheel.variant if snap.host.os != "darwin" else None
    line = render_argv(run.commands.argv(Action(INSTALL_ACTION, tuple(pins), variant)), run.commands.os)
    return (
        f"Or replace the source build with PyTorch's wheel torch {fit.wheel.label} (this replaces your "
        "source "
        f"build): {line}"
    )


def _companions_wrong(findings: list[Finding]) -> bool:
    return any(f.id in ("torchvision-mismatch", "torchaudio-mismatch") for f in findings)


def attach_commands(findings: list[Finding], plan: Plan) -> None:
    """Give each wheel finding the plan's exact command, so JSON consumers see it per finding too."""
    commands = plan.commands
    if not commands:
        return
    for f in findings:
        if f.id in WHEEL_FINDINGS and f.fix is not None and not f.fix.commands:
            f.fix.commands = list(commands)
