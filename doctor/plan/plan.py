"""The fix plan: from the findings, one ordered list of exact commands (pure).

Driver steps come before wheel steps. Wheel pins carry the local version tag
(``torch==2.7.1+cu128``) so that pip cannot answer "Requirement already satisfied" when only
the build changes; torch, torchvision and torchaudio always move together.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from doctor.compat.builds import torch_build
from doctor.compat.distributions import NIGHTLY, PYTORCH_CONDA, SOURCE, torch_origin
from doctor.compat.installs import conda_torch
from doctor.compat.wheels import Fit, choose, machine_from_snapshot
from doctor.model.findings import INSTALL as INSTALL_ACTION
from doctor.model.findings import Action, Finding
from doctor.model.snapshot import Snapshot
from doctor.model.versions import minor_key
from doctor.plan.commands import Commands, conda_remove_argv, index_url, render_argv
from doctor.plan.distributions import advise, cuda_range_for

# Findings whose remedy is a different torch wheel.
WHEEL_FINDINGS = {
    "torch-not-installed", "torch-cpu-build", "torch-wrong-vendor-build", "driver-too-old",
    "gpu-arch-unsupported", "gpus-need-different-wheels", "torchvision-mismatch", "torchaudio-mismatch",
    "gpu-arch-needs-ptx", "cudnn-unsupported-gpu",
}

HEALTHY = "healthy"  # nothing to change
INSTALL = "install"  # run the wheel command
DRIVER_FIRST = "driver-first"  # update the driver, then run the wheel command
MANUAL = "manual"  # no command can fix it (e.g. no wheel for this Python): see the findings
NONE = "none"  # problems exist but none is fixed by changing wheels


@dataclass
class Step:
    kind: str  # "driver", "install", "note"
    description: str
    command: str | None = None
    argv: list[str] | None = None


@dataclass
class Plan:
    status: str
    reason: str = ""
    python: str = ""
    target: dict | None = None
    alternative: dict | None = None
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)  # the finding ids this plan resolves
    unverified: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def commands(self) -> list[str]:
        return [s.command for s in self.steps if s.command]


def wheel_pins(fit: Fit, snap: Snapshot, packages: list[str]) -> list[str]:
    w = fit.wheel
    tagged = snap.host.os != "darwin"  # macOS wheels come from PyPI without local tags
    versions = {"torch": w.torch, "torchvision": w.torchvision, "torchaudio": w.torchaudio}
    pins = []
    for name in packages:
        version = versions.get(name)
        if version is None:
            continue
        pins.append(f"{name}=={version}+{w.variant}" if tagged else f"{name}=={version}")
    return pins



def _packages(snap: Snapshot) -> list[str]:
    inst = snap.install
    if inst.torch is None:
        return ["torch", "torchvision", "torchaudio"]
    return ["torch"] + [n for n in ("torchvision", "torchaudio") if getattr(inst, n) is not None]


def commands_for(snap: Snapshot, **options) -> Commands:
    """The command builder for this snapshot's interpreter and OS (options: installer, source, uv)."""
    return Commands(python=snap.interpreter.path or "python3", os=snap.host.os or "linux", **options)


def _describe(fit: Fit | None, snap: Snapshot, index_base: str) -> dict | None:
    if fit is None:
        return None
    w = fit.wheel
    return {
        "torch": w.torch, "torchvision": w.torchvision, "torchaudio": w.torchaudio, "variant": w.variant,
        "cuda": w.cuda, "index_url": index_url(w.variant, index_base) if snap.host.os != "darwin" else None,
        "driver": fit.driver.level, "label": w.label,
    }


def build_plan(snap: Snapshot, table, findings: list[Finding], commands: Commands | None = None,
               conda: str | None = None) -> Plan:
    """``commands`` (the installer, the mirror or find-links, the shell; default: pip from
    download.pytorch.org) only changes how the commands are written; ``conda``: the conda executable
    for the removal steps when conda owns torch (default: the one ``commands`` names)."""
    commands = commands or commands_for(snap)
    index_base = commands.source.index_base
    python = commands.python
    wheel_ids = sorted({f.id for f in findings if f.id in WHEEL_FINDINGS})
    if not wheel_ids:
        errors = [f for f in findings if f.severity == "error"]
        if errors:
            return Plan(NONE, "the problems found are not fixed by a different torch wheel; see each finding's fix",
                        python)
        return Plan(HEALTHY, "nothing to change", python)

    own = advise(snap, table, findings, commands)
    if own is not None:
        # A distribution's own torch (conda-forge, NGC, Jetson, a source build, another conda channel) is never
        # replaced with pip wheels here: the plan says what fits that distribution, or stops at the diagnosis.
        plan = Plan(MANUAL, own.reason, python, notes=list(own.notes), addresses=wheel_ids)
        if own.origin.kind == SOURCE:
            alternative = _wheel_alternative(snap, table, commands)
            if alternative:
                plan.notes.append(alternative)
        return plan
    if any(f.id == "gpus-need-different-wheels" for f in findings):
        # No wheel serves every GPU: one environment per group, spelled out in that finding's fix.
        return Plan(MANUAL, "no single wheel serves every GPU", python,
                    notes=["Use one environment per GPU group: see the commands under gpus-need-different-wheels."])
    machine = machine_from_snapshot(snap)
    build = torch_build(snap)
    installed = build.version if build else None
    choice = choose(table, machine, installed)
    packages = _packages(snap)
    plan = Plan(INSTALL, choice.reason, python, addresses=wheel_ids)

    fit = choice.target
    if fit is None and choice.needs_driver is not None:
        fit = choice.needs_driver
        needed = fit.driver.needed or fit.driver.floor
        plan.status = DRIVER_FIRST
        plan.steps.append(Step(
            "driver",
            f"Install NVIDIA driver {needed or 'a newer release'} or later (supports CUDA {fit.wheel.cuda}); "
            "no published torch wheel runs on the installed driver. Reboot afterwards.",
        ))
    if fit is None:
        plan.status = MANUAL
        plan.notes.append(choice.reason)
        reach = cuda_range_for(table, machine.gpu_ccs) if machine.gpu_ccs else None
        if "kernels for every GPU" in choice.reason and reach:
            plan.notes.append(f"CUDA {reach[0]} to {reach[1]} can compile kernels for these GPUs: only a build made "
                              "with one of them for exactly these architectures (a source build with "
                              "TORCH_CUDA_ARCH_LIST) would run.")
        elif "kernels for every GPU" in choice.reason and machine.gpu_ccs:
            plan.notes.append("No CUDA version the table knows can compile kernels for these GPUs.")
        return plan

    plan.target = _describe(fit, snap, index_base)
    plan.alternative = _describe(choice.alternative, snap, index_base)
    plan.unverified = list(fit.wheel.unverified)
    pins = wheel_pins(fit, snap, packages)
    owned = conda_torch(snap).remove_before_pip
    if owned and snap.interpreter.prefix:
        # pip over conda's torch leaves two owners of the same files: conda's must go first. (Only the pytorch
        # channel's builds get here: conda-forge's and other channels' are never replaced, see advise().)
        names = [r.name for r in owned]
        argv = conda_remove_argv(conda or commands.conda, snap.interpreter.prefix, names)
        plan.steps.append(Step("remove", f"Remove the conda packages that own torch ({', '.join(names)}) "
                               "from this environment; pip installs the wheels next.",
                               render_argv(argv, commands.os), argv))
        origin = torch_origin(snap)
        replaced = ("the pytorch channel's conda build with PyTorch's pip wheels (that channel's last release was "
                    "2.5)") if origin.kind == PYTORCH_CONDA else "conda's build of torch with PyTorch's pip wheels"
        plan.notes.append("conda owns torch in this environment: the wheels go in with pip after conda's "
                          f"packages are removed (conda will not know about them). This replaces {replaced}.")
    origin = torch_origin(snap)
    if origin.kind == NIGHTLY and build is not None:
        plan.notes.append(f"This replaces the nightly build torch {build.version} with the release "
                          f"{fit.wheel.label}.")
    if build is not None and build.variant == fit.wheel.variant and build.version == fit.wheel.torch \
            and not _companions_wrong(findings):
        plan.notes.append(f"torch {build.label} stays: it runs once the driver is updated.")
        return plan
    # macOS wheels come from PyPI: no variant index there
    variant = fit.wheel.variant if snap.host.os != "darwin" else None
    argv = commands.argv(Action(INSTALL_ACTION, tuple(pins), variant))
    after = " after the driver update" if plan.status == DRIVER_FIRST else ""
    reason = choice.reason
    if build is not None and torch_origin(snap).kind == NIGHTLY and minor_key(build.version) == fit.wheel.minor:
        reason = f"the {fit.wheel.minor} release in place of the nightly"
    plan.steps.append(Step("install", f"Install torch {fit.wheel.label}{after} ({reason}).",
                           render_argv(argv, commands.os), argv))
    if "torchaudio" in packages and fit.wheel.torchaudio is None and snap.install.torchaudio is not None:
        plan.notes.append(f"torchaudio has no release for torch {fit.wheel.minor}; uninstall it or keep "
                          "using an older torch if you need it.")
    if choice.alternative is not None:
        plan.notes.append(f"Newest release that also fits: torch {choice.alternative.wheel.label}.")
    if fit.driver.level == "minor-compat":
        plan.notes.append(f"CUDA {fit.wheel.cuda} is newer than the driver's CUDA {machine.driver_max_cuda}; it "
                          "runs through minor-version compatibility.")
    return plan


def _wheel_alternative(snap: Snapshot, table, commands: Commands) -> str | None:
    """For a source build: the wheel that would fit, as an explicit alternative that says what it replaces."""
    build = torch_build(snap)
    choice = choose(table, machine_from_snapshot(snap), build.version if build else None)
    fit = choice.target
    if fit is None:
        return None
    pins = wheel_pins(fit, snap, _packages(snap))
    variant = fit.wheel.variant if snap.host.os != "darwin" else None
    line = render_argv(commands.argv(Action(INSTALL_ACTION, tuple(pins), variant)), commands.os)
    return f"Or replace the source build with PyTorch's wheel torch {fit.wheel.label} (this replaces your source " \
           f"build): {line}"


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
