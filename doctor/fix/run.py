"""`torchdoctor fix`: carry out the plan, safely.

The order is the safety: diagnose; refuse what must not be changed (PEP 668, conda base, a uv or
poetry project whose lock file would be bypassed); resolve the install as a dry run and show
every package it would change; ask; write the restore file; run each step with its output
streamed; compare the environment before and after; diagnose again and show before -> after.
Nothing is changed before consent and the restore file. Installers run from argv lists, never
through a shell.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from doctor import exitcodes
from doctor.errors import DoctorError
from doctor.fix import environment as fixenv
from doctor.model.versions import normalize_name, variant_of
from doctor.plan import installers
from doctor.plan.commands import (
    PIP,
    UV,
    InstallSource,
    dry_run_argv,
    install_argv,
    render_argv,
    uninstall_argv,
)
from doctor.plan.plan import (
    DRIVER_FIRST,
    HEALTHY,
    INSTALL,
    WHEEL_FINDINGS,
    Plan,
    build_plan,
    commands_for,
)
from doctor.runner import RunResult, run, stream_run  # noqa: F401 - stream_run: the default Machine.stream

STEP_TIMEOUT = 3600.0  # a CUDA torch is 1-3 GB; a slow mirror can take long, a hung one must not hang us
TORCH_TRIO = ("torch", "torchvision", "torchaudio")

# fix runs its commands on this machine: they are shown in this machine's shell syntax.
_LOCAL_OS = "windows" if sys.platform == "win32" else "linux"


@dataclass
class FixOptions:
    dry_run: bool = False
    yes: bool = False
    installer: str = installers.AUTO
    index_url_base: str | None = None
    find_links: str | None = None
    no_index: bool = False
    force: bool = False
    restore_file: Path | None = None
    source: InstallSource = field(default_factory=InstallSource)  # from the index options, validated by the caller


@dataclass
class Change:
    name: str
    old: str | None  # None: newly installed
    new: str | None  # None: removed

    def __str__(self) -> str:
        if self.old is None:
            return f"{self.name} {self.new} (new)"
        if self.new is None:
            return f"{self.name} {self.old} (removed)"
        return f"{self.name} {self.old} → {self.new}"


@dataclass
class Preview:
    """What the dry run said the install would do."""

    changes: list[Change] = field(default_factory=list)
    download_bytes: int | None = None  # None: unknown (only local files have a size we can read)
    note: str = ""  # e.g. "pip 21.3 has no --dry-run --report: not previewed"

    @property
    def outside(self) -> list[Change]:
        """Upgrades, downgrades and removals of packages that are not torch's own (new ones are fine)."""
        return [c for c in self.changes if c.old is not None and not installers.in_torch_family(c.name)]


# --- pure helpers ------------------------------------------------------------------------------------



def parse_pip_report(data: dict, before: dict[str, str], stat=os.path.getsize) -> Preview:
    """pip's ``--report`` JSON (pip >= 22.2) against the environment before -> changes and download size."""
    changes, size, known = [], 0, True
    for item in data.get("install") or []:
        meta = item.get("metadata") or {}
        name = normalize_name(meta.get("name") or "")
        new = meta.get("version")
        if before.get(name) != new:
            changes.append(Change(name, before.get(name), new))
        url = ((item.get("download_info") or {}).get("url")) or ""
        parsed = urlparse(url)
        if parsed.scheme == "file":
            try:
                size += stat(unquote(parsed.path))
            except OSError:
                known = False
        else:
            known = False
    return Preview(sorted(changes, key=lambda c: c.name), size if known else None)


def parse_uv_dry_run(text: str, before: dict[str, str]) -> Preview:
    """uv's dry-run lines ' - torch==2.5.1+cpu' / ' + torch==2.5.1+cu121' -> changes."""
    removed, added = {}, {}
    for line in text.splitlines():
        match = re.match(r"^\s*([+-])\s+([A-Za-z0-9._-]+)==(\S+)", line)
        if match:
            (added if match[1] == "+" else removed)[normalize_name(match[2])] = match[3]
    changes = [
        Change(n, removed.get(n, before.get(n)), added.get(n)) for n in sorted(set(removed) | set(added))
    ]
    return Preview([c for c in changes if c.old != c.new], None)


def diff_freeze(before: dict[str, str], after: dict[str, str]) -> list[Change]:
    names = sorted(set(before) | set(after))
    return [Change(n, before.get(n), after.get(n)) for n in names if before.get(n) != after.get(n)]


def detect_project(cwd: Path) -> str | None:
    """'uv' or 'poetry' when the folder is a project that pins its environment in a lock file."""
    if (cwd / "uv.lock").is_file():
        return "uv"
    if (cwd / "poetry.lock").is_file():
        return "poetry"
    try:
        text = (cwd / "pyproject.toml").read_text(errors="replace")
    except OSError:
        return None
    if re.search(r"^\[+tool\.uv[.\]]", text, re.M):
        return "uv"
    if re.search(r"^\[+tool\.poetry[.\]]", text, re.M):
        return "poetry"
    return None


def target_project(prefix: str | None, cwd: Path, env: dict | None = None) -> str | None:
    """The uv/poetry project whose environment ``prefix`` is, or None.

    First the folder that holds the environment (a project's ``.venv`` lives in the project); then the
    working directory, but only when the environment is plausibly its own: inside it, in poetry's cache
    of virtualenvs, or named by ``UV_PROJECT_ENVIRONMENT``. ``fix --python ~/other/.venv`` run from
    inside an unrelated project is not that project's business."""
    if not prefix:
        return detect_project(cwd)
    where = Path(prefix)
    kind = detect_project(where.parent)
    if kind:
        return kind
    here = _real(cwd)
    target = _real(where)
    uv_env = (env or {}).get("UV_PROJECT_ENVIRONMENT")
    owned = (
        target == here
        or here in target.parents
        or (where.parent.name == "virtualenvs" and "pypoetry" in (p.lower() for p in where.parts))
        or (bool(uv_env) and _real(cwd / Path(uv_env).expanduser()) == target)
    )
    return detect_project(cwd) if owned else None


def _real(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return Path(os.path.abspath(path))


def project_change(kind: str, target: dict, packages: list[str], source: InstallSource) -> str:
    """The pyproject.toml change that pins the plan's wheels through the project (uv or poetry)."""
    variant = target["variant"]
    name = f"pytorch-{variant}"
    url = source.find_links if source.find_links and not source.base_given else target.get("index_url")
    versions = {p: target.get(p) for p in packages if target.get(p)}
    if kind == "uv":
        flat = '\nformat = "flat"' if url == source.find_links else ""
        lines = [
            "[[tool.uv.index]]",
            f'name = "{name}"',
            f'url = "{url}"{flat}',
            "explicit = true",
            "",
            "[tool.uv.sources]",
        ]
        lines += [f'{p} = {{ index = "{name}" }}' for p in versions]
        lines += ["", "# and in [project] dependencies:"]
        lines += [f'#   "{p}=={v}+{variant}",' for p, v in versions.items()]
        lines += ["# then: uv lock && uv sync"]
    else:
        lines = [
            "[[tool.poetry.source]]",
            f'name = "{name}"',
            f'url = "{url}"',
            'priority = "explicit"',
            "",
            "[tool.poetry.dependencies]",
        ]
        lines += [f'{p} = {{version = "=={v}+{variant}", source = "{name}"}}' for p, v in versions.items()]
        lines += ["# then: poetry lock && poetry install"]
    return "\n".join(lines)


def restore_pins(before: dict[str, str]) -> list[str]:
    """Every package of torch's family that was there before, exact: torch, torchvision, torchaudio, then
    triton and the CUDA wheels (nvidia-*, cuda-*) that the fix may change along with them."""
    family = [n for n in before if installers.in_torch_family(n)]
    order = [n for n in TORCH_TRIO if n in family] + sorted(n for n in family if n not in TORCH_TRIO)
    return [f"{n}=={before[n]}" for n in order]


def restore_removals(before: dict[str, str], added: list[str]) -> list[str]:
    """The torch-family packages the fix adds that were not there before: pins cannot remove them."""
    names = dict.fromkeys(normalize_name(n) for n in added)
    return [n for n in names if n not in before and installers.in_torch_family(n)]


def restore_argvs(
    installer: str,
    python: str,
    before: dict[str, str],
    added: list[str],
    source: InstallSource,
    path: str,
    uv: str = "uv",
) -> list[list[str]]:
    """The commands, run in order, that put the old state back: uninstall the torch-family packages the
    fix adds (``added``: the plan's pins and the dry run's new packages), then reinstall every old
    torch-family build, exactly, from the index its tag names."""
    out = []
    removals = restore_removals(before, added)
    if removals:
        # pip and uv skip (exit 0) names that are not installed, e.g. after a step failed early.
        out.append(uninstall_argv(installer, python, removals, uv))
    pins = restore_pins(before)
    if pins:
        out.append(_reinstall_argv(installer, python, before, pins, source, path, uv))
    return out


def restore_command(argvs: list[list[str]]) -> str:
    """One line for the user: the commands joined by ``&&`` (POSIX shells, cmd, PowerShell 7)."""
    return " && ".join(render_argv(a, _LOCAL_OS) for a in argvs) or "nothing to restore"


def _reinstall_argv(installer, python, before, pins, source, path, uv) -> list[str]:
    variants = [v for v in (variant_of(p.partition("==")[2]) for p in pins) if v]
    primary = variant_of(before.get("torch")) or (variants[0] if variants else None)
    extra = tuple(dict.fromkeys(v for v in variants if v != primary))
    argv = install_argv(installer, python, [], primary, source, uv, extra, requirements=path)
    # Reinstall exactly these builds even where metadata says they are there (a half-done install can
    # leave that), and nothing else: their dependencies were in place before the fix.
    force = ["--reinstall", "--no-deps"] if installer == UV else ["--force-reinstall", "--no-deps"]
    at = argv.index(path) + 1
    return argv[:at] + force + argv[at:]


def restore_text(
    python: str,
    before: dict[str, str],
    command: str,
    conda_records: list[dict],
    when: str,
    removals: list[str] = (),
    previewed: bool = True,
) -> str:
    lines = [
        f"# torchdoctor restore file, written {when} before `torchdoctor fix` changed {python}",
        "# Restore the previous state with:",
        f"#   {command}",
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
            "# It reinstalls the builds below exactly, without their dependencies (those were in place before",
            "# the fix): torch, torchvision, torchaudio, triton and the CUDA wheels (nvidia-*, cuda-*), so that",
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
            f"# conda had: {r.get('name')}={r.get('version')}={r.get('build')} "
            f"(channel {r.get('channel') or '?'}); reinstall with conda if you go back to conda's torch"
        )
    for pin in pins:
        variant = variant_of(pin.partition("==")[2])
        lines.append(
            pin + (f"  # from the /whl/{variant} index" if variant else "  # from the default index")
        )
    if not pins:
        lines.append("# no package of torch's family was installed before: the command above only removes")
    lines.append("# The whole environment before the fix (for reference; not reinstalled by the command):")
    lines += [f"#   {n}=={v}" for n, v in sorted(before.items())]
    return "\n".join(lines) + "\n"


def default_restore_path(cwd: Path, now: _dt.datetime) -> Path:
    return cwd / f"torchdoctor-restore-{now.strftime('%Y%m%dT%H%M%SZ')}.txt"


def refusal(snap, force: bool) -> str | None:
    """Why this interpreter must not be changed (unless --force), with the venv advice; None when it may."""
    if force:
        return None
    interp = snap.interpreter
    advice = (
        "make a virtual environment and fix that one instead: python3 -m venv .venv && "
        "torchdoctor fix --python .venv (or pass --force to change it anyway)"
    )
    if interp.externally_managed:
        return f"refusing to change {interp.path}: it is externally managed (PEP 668); {advice}"
    if interp.env_kind == "conda-base":
        return (
            f"refusing to change the conda base environment {interp.prefix}: create one with "
            f"`conda create -n torch python={'.'.join(interp.version.split('.')[:2]) or '3.12'}`, activate it "
            "and run torchdoctor fix there (or pass --force to change base anyway)"
        )
    return None


# --- running a step: output streamed line by line (doctor.runner.stream_run) ----------------------------


class Progress:
    """The whole plan's progress: rich's bar on a terminal, plain "step 1/3: ..." lines otherwise."""

    def __init__(self, console, total: int):
        self.console = console
        self.total = total
        self.rich = None
        if console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as RichProgress

            self.rich = RichProgress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=False,
            )
            self.task = self.rich.add_task("fix", total=total)

    def __enter__(self):
        if self.rich:
            self.rich.__enter__()
        return self

    def __exit__(self, *exc):
        if self.rich:
            self.rich.__exit__(*exc)

    def start(self, number: int, description: str, command: str) -> None:
        from rich.text import Text

        if self.rich:
            self.rich.update(self.task, description=f"step {number}/{self.total}")
        self.console.print(Text(f"step {number}/{self.total}: {description}", style="bold"))
        self.console.print(Text(f"  $ {command}"), soft_wrap=True)

    def line(self, text: str) -> None:
        from rich.text import Text

        self.console.print(Text(f"  | {text}", style="dim"), soft_wrap=True)

    def done(self) -> None:
        if self.rich:
            self.rich.advance(self.task)


# --- the command ---------------------------------------------------------------------------------------


@dataclass
class Machine:
    """The system boundary of `fix`, swappable in tests."""

    runner: object = run
    stream: object = stream_run
    stdin: object = None
    env: dict | None = None
    cwd: Path | None = None
    now: object = None
    diagnose: object = None  # (CheckOptions) -> (table, Diagnosis): the app's probe-and-judge run
    report: object = None  # (table, Diagnosis, exit code) -> the report dict
    emit: object = None  # (report, CheckOptions, mode) -> None: renders and writes it
    exit_code: object = None  # (findings) -> int


def run_fix(opts, fix: FixOptions, machine: Machine | None = None) -> int:
    m = machine
    diagnose_machine, emit, exit_code_for, make_report = m.diagnose, m.emit, m.exit_code, m.report
    env = dict(os.environ if m.env is None else m.env)
    cwd = m.cwd or Path.cwd()
    stdin = m.stdin or sys.stdin
    diagnose = diagnose_machine
    source = fix.source

    table, diag = diagnose(opts)
    snap = diag.snapshot
    installer, why = installers.choose_installer(fix.installer, snap)
    uv = (fixenv.find_uv(env) or "uv") if installer == UV else "uv"
    conda = env.get("CONDA_EXE") or "conda"
    rebuild(diag, table, source, installer, uv, conda)
    plan: Plan = diag.plan
    code = exit_code_for(diag.findings)
    project = (
        target_project(snap.interpreter.prefix, cwd, env)
        if plan.status in (INSTALL, DRIVER_FIRST) and plan.target
        else None
    )

    if fix.dry_run:
        emit(make_report(table, diag, code), opts, mode="fix")
        if not opts.json:
            from doctor.render.text import console as _console

            con = _console()
            if installer != PIP and plan.steps:
                con.print(f"  installer: {installer} ({why})")
            if project:
                show_project(con, project, plan, snap, source, dry_run=True)
        return code

    from doctor.render.text import console as _console

    con = _console(sys.stderr if opts.json else None)
    err = _console(sys.stderr)
    # With --json, stdout carries the report (the state before the fix); the run itself goes to stderr.
    emit(make_report(table, diag, code), opts, mode="check")
    if not opts.json:
        con.print()
    if plan.status == HEALTHY or not plan.steps:
        con.print(
            "Nothing to change." if plan.status == HEALTHY else "Nothing torchdoctor can run: see above."
        )
        return code
    if plan.status == DRIVER_FIRST:
        err.print(
            "torchdoctor: the NVIDIA driver must be updated first (step 1): torchdoctor does not install "
            "drivers. Update it, reboot, then run torchdoctor fix again."
        )
        return code
    why_not = refusal(snap, fix.force)
    if why_not:
        raise DoctorError(why_not, exitcodes.REFUSED)
    if project and not fix.force:
        show_project(con, project, plan, snap, source, dry_run=False)
        return exitcodes.OK
    if not fix.yes and not _isatty(stdin):
        # Before the installer resolves anything: the dry run alone can download gigabytes.
        raise DoctorError(
            "stdin is not a terminal, so fix only prints the plan: pass --yes to carry it out "
            "(or --dry-run to just print it)",
            exitcodes.REFUSED,
        )

    python = plan.python
    if installer == UV and not fixenv.find_uv(env):
        raise DoctorError(
            "uv was chosen (" + why + ") but is not on PATH: install uv, or pass --installer pip"
        )
    pip_ver = fixenv.pip_version(python, m.runner) if installer == PIP else None
    if installer == PIP and pip_ver is None:
        raise DoctorError(f"{python} has no working pip: run `{python} -m ensurepip`, or pass --installer uv")

    before = fixenv.read_freeze(python, m.runner)
    if before is None:
        raise DoctorError(f"could not list the packages of {python}", exitcodes.FIX_FAILED)
    install_steps = [s for s in plan.steps if s.kind == "install" and s.argv]
    pins = [a for a in install_steps[0].argv if "==" in a] if install_steps else []

    # Preview: the installer resolves the plan without changing anything.
    preview = (
        preview_install(installer, install_steps[0].argv, before, pip_ver, m.runner)
        if install_steps
        else Preview()
    )
    if isinstance(preview, RunResult):
        err.print(
            f"torchdoctor: the installer could not resolve the plan ({preview.describe()}); "
            "nothing was changed:"
        )
        for line in (preview.stdout + "\n" + preview.stderr).strip().splitlines()[-15:]:
            err.print(f"  | {line}", markup=False)
        return exitcodes.FIX_FAILED
    warnings = []
    if installer == PIP:
        warnings += fixenv.config_warnings(fixenv.read_pip_config(python, m.runner), pins)
    warnings += [
        f"{k}={env[k]} is set: uv will use it"
        for k in sorted(env)
        if installer == UV
        and k in ("UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_CONSTRAINT", "UV_FIND_LINKS", "UV_NO_INDEX")
    ]

    now = m.now or _dt.datetime.now(_dt.timezone.utc)
    # Absolute, so that the restore command works from any directory.
    restore_path = (
        (cwd / Path(fix.restore_file).expanduser()) if fix.restore_file else default_restore_path(cwd, now)
    )
    restore_path = restore_path.absolute()
    added = [p.partition("==")[0] for p in pins] + [
        c.name for c in preview.changes if c.old is None and c.new is not None
    ]
    removals = restore_removals(before, added)
    restore_cmd = restore_command(
        restore_argvs(installer, python, before, added, source, str(restore_path), uv)
    )

    show_execution(con, snap, plan, installer, why, preview, warnings, restore_path, restore_cmd)
    if preview.outside and not fix.force and fix.yes:
        raise DoctorError(
            "refusing: the install would also change packages outside torch ("
            + ", ".join(map(str, preview.outside))
            + "); review it without --yes, or add --force",
            exitcodes.REFUSED,
        )
    if not fix.yes:
        con.print("Proceed? [y/N] ", end="", markup=False)
        answer = (stdin.readline() or "").strip().lower()
        if answer not in ("y", "yes"):
            err.print("torchdoctor: not confirmed; nothing was changed.")
            return exitcodes.REFUSED

    try:
        restore_path.write_text(
            restore_text(
                python,
                before,
                restore_cmd,
                installers.conda_torch_records(snap),
                now.isoformat(timespec="seconds"),
                removals,
                previewed=not preview.note,
            )
        )
    except OSError as exc:
        raise DoctorError(
            f"cannot write the restore file {restore_path}: {exc.strerror or exc}; pass --restore-file PATH",
            exitcodes.FIX_FAILED,
        ) from exc
    con.print(f"Wrote {restore_path}", markup=False)

    runnable = [s for s in plan.steps if s.argv]
    with Progress(con, len(runnable)) as progress:
        for number, step in enumerate(runnable, 1):
            progress.start(number, step.description, step.command or render_argv(step.argv, _LOCAL_OS))
            try:
                result = m.stream(step.argv, STEP_TIMEOUT, progress.line, env)
            except KeyboardInterrupt:
                err.print(f"torchdoctor: interrupted during step {number}/{len(runnable)}. Restore with:")
                err.print(f"  {restore_cmd}", markup=False, soft_wrap=True)
                return exitcodes.INTERRUPTED
            if not result.ok:
                return report_failure(err, number, len(runnable), step, result, restore_cmd)
            progress.done()

    after = fixenv.read_freeze(python, m.runner) or {}
    changed = diff_freeze(before, after)
    con.print("Changed: " + (", ".join(map(str, changed)) or "nothing"), markup=False)
    outside = [c for c in changed if c.old is not None and not installers.in_torch_family(c.name)]
    if outside:
        err.print(
            "torchdoctor: warning: packages outside torch changed too: " + ", ".join(map(str, outside)),
            markup=False,
        )
    return verify(con, err, opts, diagnose, diag, plan, restore_cmd, exit_code_for)


def rebuild(diag, table, source: InstallSource, installer: str, uv: str, conda: str) -> None:
    """The plan again with this source and installer; findings that carried the old commands get the new ones."""
    old = diag.plan.commands
    commands = commands_for(diag.snapshot, installer=installer, source=source, uv=uv)
    commands.fill(diag.findings)
    diag.plan = build_plan(diag.snapshot, table, diag.findings, commands, conda=conda)
    for f in diag.findings:
        if f.id in WHEEL_FINDINGS and f.fix is not None and f.fix.commands == old:
            f.fix.commands = list(diag.plan.commands)


def preview_install(
    installer: str, argv: list[str], before: dict[str, str], pip_ver, runner
) -> Preview | RunResult:
    """The dry run. A RunResult means it failed (nothing was changed)."""
    if installer == UV:
        res = runner(dry_run_argv(UV, argv, ""), timeout=STEP_TIMEOUT)
        if not res.ok:
            return res
        return parse_uv_dry_run(res.stdout + "\n" + res.stderr, before)
    if pip_ver is not None and pip_ver < fixenv.MIN_PIP_REPORT:
        return Preview(
            note=f"pip {'.'.join(map(str, pip_ver))} has no --dry-run --report (needs 22.2): "
            "the changes were not previewed; the before/after comparison still runs"
        )
    with tempfile.TemporaryDirectory(prefix="torchdoctor-") as tmp:
        report = os.path.join(tmp, "report.json")
        res = runner(dry_run_argv(PIP, argv, report), timeout=STEP_TIMEOUT)
        if not res.ok:
            return res
        try:
            with open(report, encoding="utf-8") as fh:
                return parse_pip_report(json.load(fh), before)
        except (OSError, ValueError) as exc:
            return Preview(note=f"pip's report could not be read ({exc}): changes not previewed")


def show_execution(
    con, snap, plan: Plan, installer, why, preview: Preview, warnings, restore_path, restore_cmd
):
    from rich.text import Text

    interp = snap.interpreter
    con.print(
        Text(
            f"torchdoctor fix will change {interp.path} ({interp.env_kind or '?'}, Python {interp.version})",
            style="bold",
        )
    )
    con.print(f"  installer: {installer} ({why})", markup=False)
    removed = [c for c in preview.changes if c.old is not None]
    con.print("  remove:    " + (", ".join(f"{c.name} {c.old}" for c in removed) or "nothing"), markup=False)
    con.print(
        "  install:   " + (", ".join(f"{c.name} {c.new}" for c in preview.changes if c.new) or "?"),
        markup=False,
    )
    if preview.download_bytes is not None:
        con.print(f"  download:  {_size(preview.download_bytes)}")
    else:
        con.print("  download:  size unknown (known only for local files with pip)")
    if preview.note:
        con.print(f"  note: {preview.note}", markup=False)
    runnable = [s for s in plan.steps if s.argv]
    for number, step in enumerate(runnable, 1):
        con.print(f"  step {number}/{len(runnable)}: {step.description}", markup=False)
        con.print(Text(f"    {step.command}", style="bold"), soft_wrap=True)
    if preview.outside:
        con.print(
            Text(
                "  ! also changes packages outside torch: " + ", ".join(map(str, preview.outside)),
                style="yellow",
            )
        )
    for w in warnings:
        con.print(Text(f"  ! {w}", style="yellow"))
    con.print(f"  restore file: {restore_path} (written before anything changes)", markup=False)
    con.print("  restore with:", markup=False)
    con.print(Text(f"    {restore_cmd}"), soft_wrap=True)


def report_failure(err, number, total, step, result: RunResult, restore_cmd) -> int:
    err.print(
        f"torchdoctor: step {number}/{total} failed ({result.describe()}): {step.description}", markup=False
    )
    for line in (result.stdout or "").strip().splitlines()[-10:]:
        err.print(f"  | {line}", markup=False)
    # pip rolls back what it uninstalled, but files of a half-extracted wheel can stay behind: the
    # restore command reinstalls the old builds over them.
    err.print("  the environment may be partly changed; restore the previous builds with:", markup=False)
    err.print(f"  {restore_cmd}", markup=False, soft_wrap=True)
    return exitcodes.FIX_FAILED


def verify(con, err, opts, diagnose, before_diag, plan: Plan, restore_cmd, exit_code_for) -> int:
    """Diagnose again (with the smoke test unless --no-smoke) and compare."""

    con.print("Checking again" + (" (with the smoke test)..." if opts.smoke else "..."))
    _, after = diagnose(opts)
    old_ids = {f.id for f in before_diag.findings}
    new_ids = {f.id for f in after.findings}
    gone, remaining, appeared = (
        sorted(old_ids - new_ids),
        sorted(old_ids & new_ids),
        sorted(new_ids - old_ids),
    )
    con.print(
        f"  before → after: gone {', '.join(gone) or '-'}; remaining {', '.join(remaining) or '-'}; "
        f"new {', '.join(appeared) or '-'}",
        markup=False,
    )
    torch_after = after.snapshot.install.torch
    if torch_after is not None:
        con.print(f"  torch is now {torch_after.build_version or torch_after.version}", markup=False)
    unresolved = sorted(set(plan.addresses) & new_ids)
    if unresolved:
        err.print(
            f"torchdoctor: the fix did not resolve {', '.join(unresolved)}. Restore with:", markup=False
        )
        err.print(f"  {restore_cmd}", markup=False, soft_wrap=True)
        return exitcodes.FIX_FAILED
    con.print("Fixed: " + (", ".join(plan.addresses) or "the plan ran") + ".", markup=False)
    return exit_code_for(after.findings) if appeared else exitcodes.OK


def show_project(con, kind: str, plan: Plan, snap, source: InstallSource, dry_run: bool) -> None:
    from rich.text import Text

    packages = ["torch"] + [
        n
        for n in ("torchvision", "torchaudio")
        if getattr(snap.install, n) is not None or snap.install.torch is None
    ]
    lock = "uv.lock" if kind == "uv" else "poetry.lock"
    con.print(
        Text(
            f"This is a {kind} project: change pyproject.toml instead of the environment, so that "
            f"{lock} stays the truth{'' if dry_run else ' (nothing was changed; --force installs anyway)'}:",
            style="bold",
        )
    )
    con.print(Text(project_change(kind, plan.target, packages, source)), soft_wrap=True)


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
