"""`torchdoctor fix`: carry out the plan, safely.

The order is the safety: diagnose, with every command written for fix's installer and source from
the start; refuse what must not be changed (consent.py: PEP 668, conda base; project.py: a uv or
poetry project whose lock file would be bypassed); take the lock on the environment (state.py: a
second fix refuses); resolve the install as a dry run and show every package it would change
(preview.py); ask; write the restore file (restore.py, into the state folder, never over a file); run
each step with its output streamed; compare the environment before and after; diagnose again and show
before -> after (verify.py). Nothing is changed before consent and the restore file. A step that is
interrupted (Ctrl-C, SIGTERM, SIGHUP: the installer's process group is stopped) or fails is rolled
back at once (rollback.py: pip's debris cleared, the old builds reinstalled, pip check); when even that
cannot finish, the exact restore command is printed. Installers run from argv lists built by
doctor/plan/commands.py, never through a shell. What it prints: doctor/render/fix.py.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from doctor import exitcodes
from doctor.errors import DoctorError
from doctor.fix import consent, installed_wheels, sources
from doctor.fix import environment as fixenv
from doctor.fix.preview import Preview, diff_freeze, outside_torch, preview_install, read_pip_report
from doctor.fix.project import LOCK_FILES, project_change, project_packages, target_project
from doctor.fix.restore import restore_argvs, restore_command, restore_path, restore_removals, restore_text
from doctor.fix.rollback import SiteFolders, clean_argv, clear_debris, debris
from doctor.fix.state import EnvironmentLock, create_file, default_restore_path
from doctor.fix.verify import compare
from doctor.plan import installers
from doctor.plan.commands import (
    PIP,
    UV,
    Commands,
    InstallSource,
    check_argv,
    pin_problem,
    render_argv,
    with_only_named_sources,
    with_report_argv,
)
from doctor.plan.plan import DRIVER_FIRST, HEALTHY, INSTALL, commands_for
from doctor.render import fix as view
from doctor.render.console import console
from doctor.runner import STOP_GRACE_S, RunResult, run, signal_name, stream_run


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
    mirror: str | None = None  # --mirror NAME (doctor/plan/mirrors.py), checked and resolved by the app
    # from the index options, validated by the caller
    source: InstallSource = field(default_factory=InstallSource)


@dataclass
class Machine:
    """The system boundary of `fix`, swappable in tests."""

    runner: object = run
    stream: object = stream_run
    stdin: object = None
    env: dict | None = None
    cwd: Path | None = None
    now: object = None
    # (CheckOptions, commands=None) -> (table, Diagnosis): the app's probe-and-judge run. ``commands``,
    # (snapshot) -> Commands, writes every command of the diagnosis (findings and plan) once the facts
    # are in; the Diagnosis keeps the Commands it returned. None: pip from the PyTorch index.
    diagnose: object = None
    report: object = None  # (table, Diagnosis, exit code) -> the report dict
    emit: object = None  # (report, CheckOptions, mode) -> None: renders and writes it
    exit_code: object = None  # (findings) -> int
    lock: object = EnvironmentLock  # (prefix, env) -> the context manager that holds the environment


@dataclass
class FixCommands:
    """How fix writes its commands, decided once the snapshot is in: the installer ``--installer`` asks
    for (auto: uv where uv made the environment or installed torch), fix's source, the uv and conda
    found here. The app's diagnose calls it, so the findings and the plan are written with these from
    the start. Remembers why the installer was chosen, for the "installer: uv (why)" line."""

    fix: FixOptions
    env: dict
    why: str = ""
    written: Commands | None = None

    def __call__(self, snap) -> Commands:
        installer, self.why = installers.choose_installer(self.fix.installer, snap)
        uv = (fixenv.find_uv(self.env) or "uv") if installer == UV else "uv"
        conda = self.env.get("CONDA_EXE") or "conda"
        self.written = commands_for(snap, installer=installer, source=self.fix.source, uv=uv, conda=conda)
        return self.written


def run_fix(opts, fix: FixOptions, machine: Machine) -> int:
    m = machine
    env = dict(os.environ if m.env is None else m.env)
    cwd = m.cwd or Path.cwd()
    stdin = m.stdin or sys.stdin

    write = FixCommands(fix, env)
    table, diag = m.diagnose(opts, commands=write)
    if diag.commands is not write.written:
        # Running commands for another installer or index than the ones shown would be a silent lie.
        raise RuntimeError("Machine.diagnose did not write the diagnosis with fix's commands")
    snap, plan, commands = diag.snapshot, diag.plan, diag.commands
    code = m.exit_code(diag.findings)
    project = (
        target_project(snap.interpreter.prefix, cwd, env)
        if plan.status in (INSTALL, DRIVER_FIRST) and plan.target
        else None
    )

    if fix.dry_run:
        m.emit(m.report(table, diag, code), opts, mode="fix")
        if not opts.json:
            con = console()
            if commands.installer != PIP and plan.steps:
                view.show_installer(con, commands.installer, write.why)
            if project:
                _show_project(con, project, plan, snap, commands.source, dry_run=True)
        return code

    con = console(sys.stderr if opts.json else None)
    err = console(sys.stderr)
    # With --json, stdout carries the report (the state before the fix); the run itself goes to stderr.
    m.emit(m.report(table, diag, code), opts, mode="check")
    if not opts.json:
        con.print()
    if plan.status == HEALTHY or not plan.steps:
        view.show_nothing_to_run(con, plan.status == HEALTHY)
        return code
    if plan.status == DRIVER_FIRST:
        view.show_driver_first(err)
        return code
    consent.refuse_protected(snap, fix.force)
    if project and not fix.force:
        _show_project(con, project, plan, snap, commands.source, dry_run=False)
        return exitcodes.OK
    consent.refuse_without_terminal(fix.yes, stdin)
    # One fix at a time per environment: a second one refuses here, before its installer runs at all.
    with m.lock(snap.interpreter.prefix or plan.python, env):
        return _carry_out(m, opts, fix, write, diag, con, err, env, stdin)


def _carry_out(
    m: Machine, opts, fix: FixOptions, write: FixCommands, diag, con, err, env: dict, stdin
) -> int:
    """Preview, consent, the restore file, the steps and the check after them, under the lock. A step that
    is interrupted or fails is rolled back (doctor/fix/rollback.py)."""
    snap, plan, commands = diag.snapshot, diag.plan, diag.commands
    # What the installer would do, and the way back, before asking.
    python, installer = plan.python, commands.installer
    pip_ver = fixenv.installer_ready(installer, write.why, python, env, m.runner)
    # What the installer takes from its settings: pip's, one that installs elsewhere is refused before
    # anything runs; uv runs without them (sources.py), in an environment of its own.
    settings = sources.read(installer, snap.interpreter.prefix or "", env, m.cwd or Path.cwd())
    if installer == UV:
        env, dropped = sources.uv_environment(env)
    else:
        sources.refuse_redirects(settings, installer)
    before = fixenv.read_freeze(python, m.runner)
    if before is None:
        raise DoctorError(f"could not list the packages of {python}", exitcodes.FIX_FAILED)
    install_steps = [s for s in plan.steps if s.kind == "install" and s.argv]
    # The argv's exact pins (a path holding "==" is not one: it fails packaging's checks).
    pins = [a for a in install_steps[0].argv if "==" in a and pin_problem(a) is None] if install_steps else []

    # Preview: the installer resolves the plan without changing anything.
    preview = preview_install(installer, _as_run(installer, install_steps[0].argv), before, pip_ver, m.runner,
                              env) if install_steps else Preview()
    if isinstance(preview, RunResult):
        view.show_unresolvable(err, preview)
        return exitcodes.FIX_FAILED
    warnings = []
    # Where the plan's wheels can be read here, what uv installed is compared with them afterwards.
    local = bool(install_steps) and installed_wheels.local_sources(install_steps[0].argv) is not None
    if installer == UV:
        warnings += sources.uv_warnings(settings, dropped, checked_after=local)
    else:
        warnings += fixenv.config_warnings(fixenv.read_pip_config(python, m.runner), pins)
        extra = sources.extra_sources(settings, install_steps[0].argv) if install_steps else []
        warnings += [sources.source_warning(s, installer) for s in extra]
    # Where the torch wheels would come from, before anything changes: pip's dry run says it.
    foreign = sources.foreign(preview.origins, install_steps[0].argv, pins) if install_steps else []

    now = m.now or _dt.datetime.now(_dt.timezone.utc)
    chosen = fix.restore_file is not None
    path = (
        restore_path(m.cwd or Path.cwd(), fix.restore_file, now) if chosen else default_restore_path(env, now)
    )
    # What the fix adds: the plan's pins and what the dry run brings in (the restore uninstalls those).
    added = [p.partition("==")[0] for p in pins] + preview.added
    runnable = [s for s in plan.steps if s.argv]

    # The site-packages folders as they are now: the rollback and the restore file's clean-up step start here.
    site = SiteFolders.read(python, m.runner)
    clean = clean_argv(python, site)

    def way_back(at: Path) -> Restore:
        argvs = restore_argvs(installer, python, before, added, commands.source, str(at), commands.uv, clean)
        return Restore(at, argvs, restore_command(argvs))

    back = way_back(path)
    view.show_execution(
        con, snap.interpreter, installer, write.why, preview, runnable, warnings, path, back.command
    )
    sources.refuse_foreign(foreign, installer)
    consent.refuse_outside_changes(preview.outside, fix.yes, fix.force)
    if not fix.yes and not consent.ask(con, stdin):
        view.show_not_confirmed(err)
        return exitcodes.REFUSED

    text = lambda command: restore_text(  # noqa: E731 - the file names the command that names the file
        python, before, command, installers.conda_torch_records(snap), now.isoformat(timespec="seconds"),
        restore_removals(before, added), previewed=not preview.note, cleans=clean is not None,
    )
    # The name may be taken (a fix in the same second): the file names its own path, whichever it gets.
    written = create_file(path, lambda at: text(way_back(at).command), chosen_by_user=chosen)
    back = way_back(written)
    view.show_restore_written(con, written)

    def roll_back() -> bool:
        return _roll_back(m, con, err, python, installer, before, site, back, env)

    # Only now does anything change. pip also writes its --report of each install: where each wheel came from.
    with tempfile.TemporaryDirectory(prefix="torchdoctor-") as tmp:
        reports = {}
        if installer == PIP and (pip_ver is None or pip_ver >= fixenv.MIN_PIP_REPORT):
            reports = {n: os.path.join(tmp, f"step{n}.json")
                       for n, s in enumerate(runnable, 1) if s.kind == "install"}
        argvs = [with_report_argv(s.argv, reports[n]) if n in reports else _as_run(installer, s.argv)
                 for n, s in enumerate(runnable, 1)]
        stopped = _run_steps(m, con, runnable, env, argvs)
        installed = [read_pip_report(path) for path in reports.values()] if stopped is None else []
    if stopped is not None:
        number, why, result = stopped
        if result is None:
            view.show_interrupted(err, number, len(runnable), why)
        else:
            view.show_step_failed(err, number, len(runnable), runnable[number - 1].description, result)
        roll_back()
        return exitcodes.INTERRUPTED if result is None else exitcodes.FIX_FAILED
    if installed:
        unread = any(origins is None for origins in installed)
        came = [o for origins in installed for o in origins or []]
        foreign = sources.foreign(came, install_steps[0].argv, pins)
        if unread or foreign:
            view.show_foreign(err, [(n, sources.shown(u)) for n, u in foreign], unread)
            roll_back()
            view.show_restore_command(err, back.command)
            return exitcodes.FIX_FAILED

    changed = diff_freeze(before, fixenv.read_freeze(python, m.runner) or {})
    if installer == UV and local:
        # uv says nowhere where a wheel came from: the installed files against the plan's wheels.
        wrong = installed_wheels.not_the_plans(changed, site.folders, install_steps[0].argv, pins)
        if wrong:
            view.show_not_the_plans(err, wrong)
            roll_back()
            view.show_restore_command(err, back.command)
            return exitcodes.FIX_FAILED
    view.show_changed(con, err, changed, outside_torch(changed))
    return _verify(m, con, err, opts, diag, plan, back.command, roll_back)


def _as_run(installer: str, argv: list[str]) -> list[str]:
    """The argv fix runs for a step: uv's with only the plan's sources (doctor/fix/sources.py)."""
    return with_only_named_sources(argv) if installer == UV else argv


@dataclass
class Restore:
    path: Path
    argvs: list[list[str]]
    command: str


def _show_project(con, kind: str, plan, snap, source: InstallSource, dry_run: bool) -> None:
    change = project_change(kind, plan.target, project_packages(snap.install), source)
    view.show_project(con, kind, LOCK_FILES[kind], change, dry_run)


def _run_steps(m: Machine, con, steps, env: dict, argvs: list) -> tuple[int, str, RunResult | None] | None:
    """Each step in turn (``argvs``: what runs for each: its argv, or pip's with --report), output streamed.
    None when all ran; else (the step's number, how it stopped, its result: None when interrupted). The
    step's process group is stopped before this returns."""
    with view.Progress(con, len(steps)) as progress:
        for number, (step, argv) in enumerate(zip(steps, argvs, strict=True), 1):
            progress.start(number, step.description, step.command or render_argv(step.argv, fixenv.LOCAL_OS))
            try:
                result = m.stream(argv, fixenv.STEP_TIMEOUT, progress.line, env, **_quick_stop(m))
            except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP raised as one (app/process.py)
                return number, _signal_of(exc), None
            if not result.ok:
                return number, result.describe(), result
            progress.done()
    return None


def _quick_stop(m: Machine) -> dict:
    """The real streaming runner stops an interrupted installer within seconds, not the timeout's grace."""
    return {"interrupt_grace": STOP_GRACE_S} if m.stream is stream_run else {}


def _signal_of(exc: BaseException) -> str:
    signum = getattr(exc, "signum", None)
    return signal_name(signum) if signum else "Ctrl-C"


def _roll_back(m: Machine, con, err, python, installer, before, site, back: Restore, env: dict) -> bool:
    """Bring the builds from before back (doctor/fix/rollback.py); True when the environment is whole.
    Interrupted again, or failing, it clears pip's debris and prints the exact command instead."""
    try:
        now = fixenv.read_freeze(python, m.runner)
        if now == before and not debris(site):
            view.show_untouched(err)
            return True
        view.show_restoring(err, back.path)
        view.show_cleared(err, clear_debris(site))
        for argv in back.argvs:
            result = m.stream(_as_run(installer, argv), fixenv.STEP_TIMEOUT, view.restore_line(err), env,
                              **_quick_stop(m))
            if not result.ok:
                clear_debris(site)
                view.show_restore_failed(err, result, back.command)
                return False
        clear_debris(site)
        # The environment's own distributions: PYTHONPATH's (a checkout on it, say) are not the fix's
        # business.
        clean = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        uv = fixenv.find_uv(env) or "uv"
        check = m.runner(check_argv(installer, python, uv), timeout=300.0, env=clean)
        view.show_restored(err, diff_freeze(before, fixenv.read_freeze(python, m.runner) or {}), check)
        return check.ok
    except KeyboardInterrupt:
        clear_debris(site)
        view.show_restore_interrupted(err, back.command)
        return False


def _verify(m: Machine, con, err, opts, before, plan, restore_cmd: str, roll_back) -> int:
    """Diagnose again (with the smoke test unless --no-smoke) and compare: the plan's findings must be gone.
    torch gone, or a new error, is a failed fix: rolled back (``roll_back``), the restore command printed."""
    view.show_checking_again(con, opts.smoke)
    _, after = m.diagnose(opts)
    outcome = compare(before, after, plan.addresses)
    view.show_outcome(con, err, outcome, plan.addresses, restore_cmd)
    if outcome.broken:
        roll_back()
        view.show_restore_command(err, restore_cmd)
        return exitcodes.FIX_FAILED
    if outcome.unresolved:
        return exitcodes.FIX_FAILED
    return m.exit_code(after.findings) if outcome.appeared else exitcodes.OK
