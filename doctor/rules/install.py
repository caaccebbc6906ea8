"""The install: whether torch is installed in the target interpreter, whether its build kind fits the
hardware (a CUDA build for NVIDIA GPUs), whether torchvision and torchaudio match it, whether this Python has
torch wheels, and whether the compatibility table knows the installed release. Each ``check_*`` is a pure
function of the machine's assessment (doctor/compat/assessment.py).

Findings whose remedy is a different wheel leave ``fix.commands`` empty: the fix plan
(``doctor.plan.plan``) chooses the one target for all of them and fills the exact command in.
"""

from __future__ import annotations

from dataclasses import replace

from doctor.compat.assessment import Assessment
from doctor.compat.builds import companion_build
from doctor.compat.interpreters import install_hint, python_in_range, venv_line
from doctor.compat.wheels import NEEDS_OTHER_PYTHON, choose, python_label, python_ok
from doctor.model import snapshot as S
from doctor.model.findings import ERROR, WARNING, Finding, Fix
from doctor.model.i18n import Msg, join
from doctor.model.versions import version_tuple
from doctor.rules import (
    UNINSPECTED,
    Rule,
    gpu_list,
    no_gpu,
    not_observed,
    origin_name,
    skipped,
    unknown,
    without_torch,
)


def _gpus_usable(snap: S.Snapshot) -> bool:
    return snap.nvidia.status == S.NVIDIA_OK and bool(snap.nvidia.gpus)


# --- is torch there at all ----------------------------------------------------------------------


def check_torch_installed(facts: Assessment) -> list[Finding]:
    snap = facts.snap
    interp, inst = snap.interpreter, snap.install
    if interp.error:
        return [Finding(
            "interpreter-unusable", ERROR,
            Msg("the target interpreter could not be inspected: {error}", error=interp.error),
            Msg("Interpreter: {path} "
                "({reason}).", path=interp.path or Msg('(none found)'), reason=interp.reason),
            {"interpreter.path": interp.path, "interpreter.reason": interp.reason, "error": interp.error},
            Fix(Msg("Point torchdoctor at the Python you run your code with."),
                ["torchdoctor check --python /path/to/venv/bin/python"]),
        )]
    if inst.status == "absent":
        return [Finding(
            "torch-not-installed", ERROR,
            Msg("torch is not installed in {path}", path=interp.path or Msg("the Python collect_env ran in")
                if snap.origin == "collect_env" else interp.path),
            Msg("Interpreter chosen because: {reason}. The fix plan below installs the build that fits "
            "this machine.", reason=interp.reason) if interp.bits != 32 else
            Msg("Interpreter chosen because: {reason}. No torch wheel exists for a 32-bit Python: see "
                "python-32-bit.", reason=interp.reason),
            {"interpreter.path": interp.path, "interpreter.version": interp.version},
            Fix(Msg("Install the torch build chosen for this machine (see the fix plan).")
                if interp.bits != 32 else Msg("Install a 64-bit Python first (see python-32-bit).")),
        )]
    if inst.status == "unknown":  # e.g. a collect_env text that lists no packages: never "passed"
        return unknown(Msg("whether torch is installed is unknown ({detail}); {how} tells",
                           detail=inst.detail or Msg("the install was not read"),
                           how="python -m pip show torch"))
    if inst.status == "error":
        return [Finding(
            "torch-inspect-failed", WARNING,
            Msg("could not read the installed torch's metadata"),
            inst.detail, {"install.detail": inst.detail}, None,
        )]
    return []


# --- the build kind against the hardware ----------------------------------------------------------


def check_build_kind(facts: Assessment) -> list[Finding]:
    snap, build = facts.snap, facts.build
    if build is None:
        return without_torch(snap)
    if not _gpus_usable(snap):
        return no_gpu(snap)
    ev = {"torch": build.label, "build.evidence": build.evidence, "gpus": gpu_list(snap),
          "driver": snap.nvidia.driver_version.value}
    if build.kind == "cpu":
        windows = snap.host.os == "windows"
        detail = (Msg("torch {label} has no CUDA support, but this machine has a working NVIDIA GPU "
                  "({gpu_list}). torch.cuda.is_available() returns False and everything runs on the "
                  "CPU.", label=build.label, gpu_list=gpu_list(snap)))
        if windows:
            detail += (Msg(" On Windows, torch from PyPI is always a CPU build: CUDA builds come only from "
                       "https://download.pytorch.org/whl/cuXXX."))
        elif build.local is None and snap.host.machine == "aarch64":
            detail += Msg(" On Linux aarch64 the PyPI wheel of older releases is CPU-only.")
        return [Finding("torch-cpu-build", ERROR, Msg("a CPU-only torch on a machine with an NVIDIA "
            "GPU"), detail, ev,
                        Fix(Msg("Install a CUDA build of torch (see the fix plan).")))]
    if build.kind in ("rocm", "xpu"):
        return [
            Finding(
                "torch-wrong-vendor-build",
                ERROR,
                Msg("a {upper} build of torch on a machine with an NVIDIA GPU", upper=build.kind.upper()),
                Msg(
                    "torch {label} targets {upper} devices; it cannot use {gpu_list}.",
                    label=build.label,
                    upper=build.kind.upper(),
                    gpu_list=gpu_list(snap),
                ),
                ev,
                Fix(Msg("Install a CUDA build of torch (see the fix plan).")),
            )
        ]
    return []


# --- companions ---------------------------------------------------------------------------------


def check_companions(facts: Assessment) -> list[Finding]:
    snap, table, build = facts.snap, facts.table, facts.build
    inst = snap.install
    if build is None:
        return without_torch(snap)
    if inst.torchvision is None and inst.torchaudio is None:
        return skipped(Msg("neither torchvision nor torchaudio is installed"))
    findings = []
    release = table.release(build.version)
    patch = release.patch(build.version) if release else None
    for name in ("torchvision", "torchaudio"):
        dist = getattr(inst, name)
        if dist is None:
            continue
        comp = companion_build(snap, name)
        problems = []
        expected = getattr(patch, name) if patch else None
        spec = _torch_requirement(dist.requires)
        if spec is not None:
            # The companion's own declaration is what its build needs (and what pip enforces).
            full = f"{build.version}+{build.local}" if build.local else build.version  # ==2.7.1+cu128 pins
            if not (spec.contains(build.version, prereleases=True) or spec.contains(full, prereleases=True)):
                problems.append(Msg("{name} {version} requires torch{spec}, installed is "
                    "{version2}", name=name, version=comp.version, spec=spec, version2=build.version))
        elif expected and comp.version.split(".")[:2] != expected.split(".")[:2]:
            problems.append(Msg("torch {version} pairs with {name} {expected}, not "
                "{version2}", version=build.version, name=name, expected=expected, version2=comp.version))
        check = table.companion_cuda_check(name, comp.version)
        cuda_problem = _cuda_mismatch(name, comp, build, check)
        if cuda_problem:
            problems.append(cuda_problem)
        if problems:
            findings.append(Finding(
                f"{name}-mismatch", ERROR,
                Msg("{name} {label} does not match torch "
                    "{label2}", name=name, label=comp.label, label2=build.label),
                join("; ", problems) + Msg(". A mismatched {name} fails at import (\"operator "
                    "torchvision::nms does "
                "not exist\", \"Couldn't load custom C++ ops\", \"compiled with different CUDA "
                "versions\").", name=name),
                {name: comp.label, f"{name}.evidence": comp.evidence, "torch": build.label,
                 "torch.evidence": build.evidence, "expected": expected,
                 "cuda_check": f"{check.compares} ({check.versions})" if check else None},
                Fix(Msg("Reinstall torch and {name} together (see the fix plan).", name=name)),
            ))
    return findings


def _cuda_mismatch(name: str, comp, build, check) -> str | None:
    """Whether the companion's build refuses torch's at import: a CPU companion beside a CUDA torch (no CUDA
    kernels), or a CUDA version that differs in what that release compares (the table's companion_rules:
    torchvision up to 0.15.2 and torchaudio 0.13 to 2.11.0 compare major and minor, later ones the major
    only). Unknown builds are never a mismatch."""
    if comp.kind == "unknown" or build.kind == "unknown":
        return None
    if comp.kind != build.kind:
        return Msg(
            "{name} is a {kind} build ({evidence}), torch is {torch_kind}",
            name=name,
            kind=comp.variant or comp.kind,
            evidence=comp.evidence,
            torch_kind=build.variant or build.kind,
        )
    if comp.kind != "cuda" or not comp.cuda or not build.cuda:
        return None
    if comp.cuda_major != build.cuda_major:
        return Msg("{name} was built with CUDA {cuda} and torch with CUDA {torch_cuda}: a different "
            "major", name=name,
                   cuda=comp.cuda, torch_cuda=build.cuda)
    both_minor = "." in comp.cuda and "." in build.cuda
    if check is not None and check.compares == "major.minor" and both_minor and comp.cuda != build.cuda:
        return Msg("{name} {version} was built with CUDA {cuda} and torch with CUDA {torch_cuda}; {name} "
                   "{versions} compares major and minor at "
                   "import", name=name, version=comp.version, cuda=comp.cuda,
                   torch_cuda=build.cuda, versions=check.versions)
    return None


def _torch_requirement(requires: list[str]):
    """The SpecifierSet a companion's ``Requires-Dist: torch ...`` declares, or None."""
    from packaging.requirements import InvalidRequirement, Requirement

    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() == "torch" and str(req.specifier):
            return req.specifier
    return None


# --- Python ---------------------------------------------------------------------------------------


def check_python(facts: Assessment) -> list[Finding]:
    snap, table = facts.snap, facts.table
    py = snap.interpreter.version
    if not py or snap.interpreter.error:
        return unknown(UNINSPECTED) if snap.interpreter.error else not_observed(snap, Msg("the target "
            "Python's version"))
    if snap.interpreter.bits == 32:
        return skipped(Msg("a 32-bit Python: python-32-bit says so"))
    build, machine = facts.build, facts.machine
    if not snap.host.os or not snap.host.machine:
        return _python_without_architecture(facts)
    supported = [r for r in table.releases if python_ok(r, machine) and r.variants_for(machine.platform)]
    if not supported:
        ranges = ", ".join(f"{r.minor}: {r.python_min}-{r.python_max}" for r in table.releases[-3:])
        free = ""
        if machine.free_threaded:
            free = Msg(" Free-threaded builds: "
                "{builds}.", builds=join(", ", [Msg("{minor}: {builds}", minor=r.minor,
                       builds=", ".join(r.free_threaded) or Msg("none")) for r in table.releases[-3:]]))
        return [Finding(
            "python-unsupported", ERROR,
            Msg("no torch release has wheels for Python {python_label} on "
                "{platform}", python_label=python_label(machine), platform=machine.platform),
            Msg("pip will answer \"Could not find a version that satisfies the requirement torch (from "
                "versions: "
            "none)\". Recent releases support: {ranges}.{free}", ranges=ranges, free=free),
            {"python": py, "free_threaded": machine.free_threaded, "platform": machine.platform},
            _supported_python_fix(snap, table.releases[-1]),
        )]
    choice = facts.unpinned
    if choice.target is None and choice.needs_driver is None and choice.code == NEEDS_OTHER_PYTHON:
        relaxed = choose(table, replace(machine, python=None, free_threaded=False), None)
        needed = relaxed.target or relaxed.needs_driver
        release = (table.release(needed.wheel.torch) if needed else None) or table.releases[-1]
        return [Finding(
            "python-unsupported", ERROR,
            Msg("the torch this machine needs has no wheel for Python "
                "{python_label}", python_label=python_label(machine)),
            Msg("{reason}. pip would answer \"Could not find a version that "
            "satisfies the requirement\" or install an older build without kernels for this "
            "GPU.", reason=choice.reason),
            {"python": py, "free_threaded": machine.free_threaded, "platform": machine.platform,
             "reason": choice.reason},
            _supported_python_fix(snap, release),
        )]
    if build is not None:
        release = table.release(build.version)
        if release is not None and not release.supports_python(py):
            return [
                Finding(
                    "python-unsupported-by-torch",
                    WARNING,
                    Msg("torch {version} publishes no wheels for Python {py}", version=build.version, py=py),
                    Msg(
                        "torch {minor} supports Python {python_min} to {python_max}; this one is "
                        "probably a source build or was forced in. Upgrades will need a release that "
                        "supports this Python.",
                        minor=release.minor,
                        python_min=release.python_min,
                        python_max=release.python_max,
                    ),
                    {"python": py, "torch": build.label},
                )
            ]
    return []


def _python_without_architecture(facts: Assessment) -> list[Finding]:
    """The Python judged when the OS or the CPU architecture is not known (a collect_env paste whose lines
    name neither: "Microsoft Windows", "3.10.11 (64-bit runtime)"). Wheels are published per platform, so
    "no wheels on windows-" would be a verdict on a platform that does not exist: an error only when no
    platform of this OS has wheels for this Python, else unknown, naming the platforms that have them."""
    snap, table, machine = facts.snap, facts.table, facts.machine
    prefix = f"{snap.host.os}-" if snap.host.os else ""
    having = sorted({p for r in table.releases if python_ok(r, machine)
                     for p in r.variants if p.startswith(prefix)})
    missing = Msg("the CPU architecture") if snap.host.os else Msg("the OS")
    if having:
        return unknown(Msg("this {origin} does not name {missing}; torch has wheels for Python {python} on "
                           "{platforms}", origin=origin_name(snap), missing=missing,
                           python=python_label(machine), platforms=", ".join(having)))
    os_name = snap.host.os or Msg("any OS")
    return [Finding(
        "python-unsupported", ERROR,
        Msg("no torch release has wheels for Python {python_label} on "
            "{platform}", python_label=python_label(machine), platform=os_name),
        Msg("pip will answer \"Could not find a version that satisfies the requirement torch (from "
            "versions: none)\" whatever the CPU architecture. Recent releases support: {ranges}.",
            ranges=", ".join(f"{r.minor}: {r.python_min}-{r.python_max}" for r in table.releases[-3:])),
        {"python": snap.interpreter.version, "free_threaded": machine.free_threaded, "platform": os_name},
        _supported_python_fix(snap, table.releases[-1]),
    )]


def _supported_python_fix(snap: S.Snapshot, release) -> Fix:
    """A new environment with a Python the release has wheels for: an interpreter on this machine, else one uv
    fetches, else what to install. Never an interpreter that is not here."""
    other = python_in_range(snap, release.python_min, release.python_max)
    line = venv_line(other, ".venv", snap.host.os == "windows") if other else None
    if line is None:
        return Fix(install_hint(other) if other else Msg("Install a Python that torch supports, make a "
            "virtual "
                   "environment with it and install torch there."))
    return Fix(Msg("Create a virtual environment with Python {version} and install torch there (see the fix "
               "plan for the command).", version=other.version), [line])


def check_table_fresh(facts: Assessment) -> list[Finding]:
    snap, table, build = facts.snap, facts.table, facts.build
    if build is None:
        return without_torch(snap)
    if not table.releases:
        return []
    newest = table.releases[-1]
    have = version_tuple(build.version)
    if have and have[:2] > version_tuple(newest.minor)[:2]:
        return [Finding(
            "table-older-than-torch", WARNING,
            Msg("torch {version} is newer than this compatibility table (newest: "
                "{minor})", version=build.version, minor=newest.minor),
            Msg("Table {table_version} (verified {verified_on}) does not know this release; conclusions "
            "about it rest on the nearest older row. Update torchdoctor or pass "
            "--table.", table_version=table.table_version, verified_on=table.verified_on),
            {"torch": build.version, "table_version": table.table_version},
        )]
    return []


TORCH_INSTALLED = Rule(
    "torch-installed",
    Msg("torch is installed in the target interpreter"),
    check_torch_installed,
    ("interpreter-unusable", "torch-not-installed", "torch-inspect-failed"),
)
BUILD_KIND = Rule("build-kind", Msg("the torch build matches the hardware (CUDA build for NVIDIA GPUs)"),
                  check_build_kind, ("torch-cpu-build", "torch-wrong-vendor-build"))
COMPANIONS = Rule("companions", Msg("torchvision and torchaudio match torch"), check_companions,
                  ("torchvision-mismatch", "torchaudio-mismatch"))
PYTHON = Rule("python", Msg("this Python has torch wheels"), check_python,
              ("python-unsupported", "python-unsupported-by-torch"))
TABLE_FRESH = Rule("table-fresh", Msg("the compatibility table knows the installed torch"), check_table_fresh,
                   ("table-older-than-torch",))
