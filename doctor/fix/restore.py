"""The way back, written before anything changes: the restore file (every torch-family build that
was there, exactly, and the whole environment for reference) and the one command that puts those
builds back. The commands come from doctor/plan/commands.py like every other."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from doctor.fix.environment import LOCAL_OS
from doctor.model.versions import normalize_name, variant_of
from doctor.plan import installers
from doctor.plan.commands import InstallSource, pin_problem, reinstall_argv, render_argv, uninstall_argv
from doctor.render.sanitize import printable

TORCH_TRIO = ("torch", "torchvision", "torchaudio")


def restore_pins(before: dict[str, str]) -> list[str]:
    """Every package of torch's family that was there before, exact: torch, torchvision, torchaudio, then
    triton and the CUDA wheels (nvidia-*, cuda-*) that the fix may change along with them."""
    family = [n for n in _valid(before) if installers.in_torch_family(n)]
    order = [n for n in TORCH_TRIO if n in family] + sorted(n for n in family if n not in TORCH_TRIO)
    return [f"{n}=={before[n]}" for n in order]


def _valid(before: dict[str, str]) -> dict[str, str]:
    """The distributions whose name and version packaging accepts: only those are written into the restore
    file and its command (a version is whatever a METADATA file says; it could hold a newline that turns a
    comment into a requirement line, or pip options)."""
    return {n: v for n, v in before.items() if pin_problem(f"{n}=={v}") is None}


def restore_removals(before: dict[str, str], added: list[str]) -> list[str]:
    """The torch-family packages the fix adds that were not there before: pins cannot remove them."""
    names = dict.fromkeys(normalize_name(n) for n in added)
    return [n for n in names if n not in before and installers.in_torch_family(n) and pin_problem(n) is None]


def restore_argvs(
    installer: str,
    python: str,
    before: dict[str, str],
    added: list[str],
    source: InstallSource,
    path: str,
    uv: str = "uv",
    clean: list[str] | None = None,
) -> list[list[str]]:
    """The commands, run in order, that put the old state back: clear what an interrupted install left
    (``clean``: doctor/fix/rollback.py's ``clean_argv``, so that the file works after any interruption,
    SIGKILL included), uninstall the torch-family packages the fix adds (``added``: the plan's pins and the
    dry run's new packages), then reinstall every old torch-family build, exactly, from the index its tag
    names."""
    out = [clean] if clean else []
    removals = restore_removals(before, added)
    if removals:
        # pip and uv skip (exit 0) names that are not installed, e.g. after a step failed early.
        out.append(uninstall_argv(installer, python, removals, uv))
    pins = restore_pins(before)
    if pins:
        # torch's own tag names the index; the other tags (a CUDA wheel of another build) are extra ones.
        variants = [v for v in (variant_of(p.partition("==")[2]) for p in pins) if v]
        primary = variant_of(before.get("torch")) or (variants[0] if variants else None)
        extra = tuple(dict.fromkeys(v for v in variants if v != primary))
        out.append(reinstall_argv(installer, python, path, primary, source, uv, extra))
    return out


def restore_command(argvs: list[list[str]]) -> str:
    """One line for the user: the commands joined by ``&&`` (POSIX shells, cmd, PowerShell 7)."""
    return " && ".join(render_argv(a, LOCAL_OS) for a in argvs) or "nothing to restore"


def restore_text(
    python: str,
    before: dict[str, str],
    command: str,
    conda_records: list[dict],
    when: str,
    removals: list[str] = (),
    previewed: bool = True,
    cleans: bool = False,
) -> str:
    lines = [
        # printable: a newline in a path or a conda record would end the comment and start a requirement line
        f"# torchdoctor restore file, written {when} before `torchdoctor fix` changed {printable(python)}",
        "# Restore the previous state with:",
        f"#   {command}",
    ]
    if cleans:
        lines += [
            "# Its first part (python -c ...) removes what an interrupted install leaves in site-packages:",
            "# pip's ~-renamed stashes, torch-family *.dist-info without RECORD or INSTALLER, and package",
            "# folders that no whole install owns any more.",
        ]
    pins = restore_pins(before)
    if removals:
        lines.append(
            "# It uninstalls what the fix adds to torch's family that was not there before: "
            + ", ".join(removals)
            + "."
        )
    if pins:
        lines += [
            "# It reinstalls the builds below exactly, without their dependencies (those were in place "
            "before",
            "# the fix): torch, torchvision, torchaudio, triton and the CUDA wheels (nvidia-*, cuda-*), so "
            "that",
            "# torch gets back the CUDA libraries it was built against. Wheels without a local tag come from",
            "# the index of torch's tag: the PyTorch index hosts the ones its CUDA builds depend on.",
        ]
    lines.append("# Packages outside torch's family are not touched by this command.")
    if not previewed:
        lines.append(
            "# The install was not previewed: packages it adds beyond the plan's pins are not uninstalled "
            "by this command (compare with the list at the end)."
        )
    for r in conda_records:
        lines.append(
            printable(f"# conda had: {r.get('name')}={r.get('version')}={r.get('build')} "
                      f"(channel {r.get('channel') or '?'}); reinstall with conda if you go back to "
                      "conda's torch")
        )
    for pin in pins:
        variant = variant_of(pin.partition("==")[2])
        lines.append(
            pin + (f"  # from the /whl/{variant} index" if variant else "  # from the default index")
        )
    if not pins:
        lines.append("# no package of torch's family was installed before: the command above only removes")
    valid = _valid(before)
    if len(valid) < len(before):
        lines.append(f"# Left out: {len(before) - len(valid)} distribution(s) whose name or version is not "
                     "valid (PEP 508 / PEP 440); they cannot be pinned.")
    lines.append("# The whole environment before the fix (for reference; not reinstalled by the command):")
    lines += [f"#   {n}=={v}" for n, v in sorted(valid.items())]
    return "\n".join(lines) + "\n"


def restore_path(cwd: Path, given: Path, now: _dt.datetime | None = None) -> Path:
    """--restore-file, absolute: the restore command must work from any directory. (Without it the file
    goes to the state folder: doctor/fix/state.py, which also writes it, never over another file.)"""
    return (cwd / Path(given).expanduser()).absolute()
