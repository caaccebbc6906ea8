"""Apple: an x86_64 Python on Apple silicon (Rosetta 2) gets only the last Intel-Mac torch (2.2.x) and no MPS;
a macOS older than a release's MPS floor has no MPS. The macOS floors of the wheels are table data
(compat_tables/accelerators.json); the plan never proposes a wheel this macOS cannot install.
"""

from __future__ import annotations

from doctor.compat.accelerators import accelerators, is_rosetta
from doctor.compat.assessment import Assessment
from doctor.model.findings import ERROR, SHELL, WARNING, Action, Finding, Fix
from doctor.model.i18n import Msg
from doctor.rules import Rule, skipped

PYTHON_MAC = "https://www.python.org/downloads/macos/"
NATIVE_PYTHON = (
    "uv python install 3.12  # or: /opt/homebrew/bin/brew install python",
    "python3 -c 'import platform; print(platform.machine())'  # arm64",
    "python3 -m venv .venv && .venv/bin/python -m pip install torch",
)


def check_rosetta(facts: Assessment) -> list[Finding]:
    snap = facts.snap
    if snap.host.os != "darwin":
        return skipped(Msg("not macOS"))
    if not is_rosetta(snap):
        return []
    cpu = snap.host.cpu or Msg("Apple silicon")
    build = facts.build
    ev = {"host.cpu": snap.host.cpu, "interpreter.machine": snap.interpreter.machine or snap.host.machine,
          "host.translated": snap.host.translated, "torch": build.label if build else None,
          "python": snap.interpreter.path or snap.interpreter.version}
    return [Finding(
        "python-under-rosetta", ERROR,
        Msg("this Python is an x86_64 build running under Rosetta 2 on an {cpu}", cpu=cpu),
        Msg("An Intel-Mac Python installs only the Intel-Mac torch wheels, which end at torch 2.2.2, and "
            "they have no MPS: torch.backends.mps.is_available() is False and everything runs on the CPU, "
            "translated. A native arm64 Python gets every current release with MPS."),
        ev, Fix(Msg("Install a native arm64 Python (python.org's universal2 installer, Homebrew under "
                    "/opt/homebrew, or uv), check it says arm64, and make the environment again with it."),
                actions=[Action(SHELL, text=line) for line in NATIVE_PYTHON], links=[PYTHON_MAC]),
    )]


def check_mps_macos(facts: Assessment) -> list[Finding]:
    snap, table = facts.snap, facts.table
    host = snap.host
    # the target interpreter's machine where it was read (torchdoctor itself may run under Rosetta)
    if host.os != "darwin" or (snap.interpreter.machine or host.machine) != "arm64":
        return skipped(Msg("not an Apple silicon Python"))
    build = facts.build
    if build is None:
        return skipped(Msg("torch is not installed"))
    if not host.macos:
        return skipped(Msg("the macOS version is not known"))
    floor = accelerators(table).macos_floor(build.version, host.platform)
    if floor is None or floor.mps_on(host.macos) is not False:
        return []
    return [Finding(
        "macos-too-old-for-torch", WARNING,
        Msg("torch {label} has no MPS on macOS {macos}: it needs macOS {need}", label=build.label,
            macos=host.macos, need=floor.mps_min_macos),
        Msg("torch.backends.mps.is_available() is False and everything runs on the CPU ({source}).",
            source=floor.source),
        {"torch": build.label, "macos": host.macos, "mps_min_macos": floor.mps_min_macos},
        Fix(Msg("Update macOS to {need} or newer.", need=floor.mps_min_macos)),
    )]


RULES = [
    Rule("rosetta", Msg("Python runs natively on Apple silicon"), check_rosetta, ("python-under-rosetta",)),
    Rule("mps-macos", Msg("this macOS runs the torch build's MPS backend"), check_mps_macos,
         ("macos-too-old-for-torch",)),
]
