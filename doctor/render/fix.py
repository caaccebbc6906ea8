"""What `torchdoctor fix` prints while it works: the summary before consent, the steps' progress and
output, a failure with the restore command, and the before -> after comparison.

Each function takes what doctor/fix decided (plain values, or the fix's own objects read by their
attributes) and prints it on the consoles it is given: stdout's for the run, stderr's for errors.
Nothing here decides anything. Commands are printed without markup and without wrapping, so that
they can be copied as they are; every string from elsewhere (paths, the installer's output and package
names, pip's configuration) goes through render/sanitize.py first, so nothing raw reaches the terminal.
"""

from __future__ import annotations

from doctor.model.i18n import localize, tr
from doctor.render.sanitize import printable


def _text(text: str, style: str = "", multiline: bool = False):
    from rich.text import Text

    return Text(printable(text, multiline=multiline), style=style)


def _say(con, text: str, style: str = "") -> None:
    """One line on a console whose terminal may be gone (SIGHUP): a failed write loses only the line."""
    try:
        con.print(_text(text, style), soft_wrap=True)
    except (OSError, ValueError):
        pass


def show_installer(con, installer: str, why: str) -> None:
    con.print(_text("  " + tr("installer: {installer} ({why})", installer=installer, why=why)))


def show_project(con, kind: str, lock: str, change: str, dry_run: bool) -> None:
    """A uv/poetry project: the pyproject.toml change instead of an install."""
    con.print(
        _text(
            f"This is a {kind} project: change pyproject.toml instead of the environment, so that "
            f"{lock} stays the truth{'' if dry_run else ' (nothing was changed; --force installs anyway)'}:",
            style="bold",
        )
    )
    con.print(_text(change, multiline=True), soft_wrap=True)


def show_nothing_to_run(con, healthy: bool) -> None:
    con.print(tr("Nothing to change.") if healthy else tr("Nothing torchdoctor can run: see above."))


def show_driver_first(err) -> None:
    err.print("torchdoctor: " + tr(
        "the NVIDIA driver must be updated first (step 1): torchdoctor does not install "
        "drivers. Update it, reboot, then run torchdoctor fix again."
    ))


def show_unresolvable(err, result) -> None:
    """The dry run failed: the installer's own last lines say why."""
    err.print("torchdoctor: " + tr("the installer could not resolve the plan ({result}); nothing was "
        "changed:",
                                   result=result.describe()))
    for line in (result.stdout + "\n" + result.stderr).strip().splitlines()[-15:]:
        err.print(_text(f"  | {line}"))


def show_execution(
    con, interp, installer: str, why: str, preview, steps, warnings: list[str], restore_path, restore_cmd: str
) -> None:
    """The summary before consent: the target, the installer, what the dry run said changes, each step
    (``steps``: the runnable ones), the warnings, and the way back."""
    con.print(
        _text(
            tr("torchdoctor fix will change {path} ({kind}, Python {version})", path=interp.path,
               kind=interp.env_kind or "?", version=interp.version),
            style="bold",
        )
    )
    show_installer(con, installer, why)
    removed = [c for c in preview.changes if c.old is not None]
    con.print(_text("  " + tr("remove:    {what}", what=", ".join(f"{c.name} {c.old}" for c in removed)
                                 or tr("nothing"))))
    con.print(_text("  " + tr("install:   {what}", what=", ".join(f"{c.name} {c.new}" for c in preview.changes
                                                                  if c.new) or "?")))
    if preview.download_bytes is not None:
        con.print("  " + tr("download:  {size}", size=_size(preview.download_bytes)))
    else:
        con.print("  " + tr("download:  size unknown (known only for local files with pip)"))
    if preview.note:
        con.print(_text("  " + tr("note: {note}", note=preview.note)))
    for number, step in enumerate(steps, 1):
        con.print(_text("  " + tr("step {number}/{count}: {description}", number=number, count=len(steps),
                                  description=localize(step.description))))
        con.print(_text(f"    {step.command}", style="bold"), soft_wrap=True)
    if preview.outside:
        con.print(_text("  ! " + tr("also changes packages outside torch: {names}",
                                    names=", ".join(map(str, preview.outside))), style="yellow"))
    for w in warnings:
        con.print(_text(f"  ! {localize(w)}", style="yellow"))
    con.print(_text("  " + tr("restore file: {path} (written before anything "
        "changes)", path=str(restore_path))))
    con.print("  " + tr("restore with:"), markup=False)
    con.print(_text(f"    {restore_cmd}"), soft_wrap=True)
    con.print(_text("  " + tr("interrupted (Ctrl-C, SIGTERM, SIGHUP) or failing, fix stops the installer and "
                              "restores.")))


def show_not_confirmed(err) -> None:
    err.print("torchdoctor: " + tr("not confirmed; nothing was changed."))


def show_restore_written(con, path) -> None:
    con.print(_text(tr("Wrote the restore file {path}", path=str(path))))


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
        if self.rich:
            self.rich.update(self.task, description=f"step {number}/{self.total}")
        _say(self.console, f"step {number}/{self.total}: {description}", "bold")
        _say(self.console, f"  $ {command}")

    def line(self, text: str) -> None:
        """One line of the step's own output, as it comes."""
        _say(self.console, f"  | {text}", "dim")

    def done(self) -> None:
        if self.rich:
            self.rich.advance(self.task)


def show_interrupted(err, number: int, total: int, why: str) -> None:
    _say(err, f"torchdoctor: interrupted ({why}) during step {number}/{total}: the installer was stopped.")


def show_step_failed(err, number: int, total: int, description: str, result) -> None:
    _say(err, f"torchdoctor: step {number}/{total} failed ({result.describe()}): {description}")
    for line in (result.stdout or "").strip().splitlines()[-10:]:
        _say(err, f"  | {line}")


def show_untouched(err) -> None:
    _say(err, "torchdoctor: nothing had changed yet: the environment is as it was.")


def show_restoring(err, path) -> None:
    _say(err, f"torchdoctor: restoring the builds from before (restore file {path})...")


def show_cleared(err, removed: list) -> None:
    """What an interrupted installer left that was cleared before the restore."""
    if removed:
        names = ", ".join(str(p).rstrip("/").rsplit("/", 1)[-1] for p in removed)
        _say(err, f"  cleared what the stopped installer left: {names}")


def restore_line(err):
    """on_line for the restore commands' output."""
    return lambda line: _say(err, f"  | {line}", "dim")


def show_restored(err, still_different: list, check) -> None:
    """The restore ran; ``still_different``: what differs from before; ``check``: pip check's result."""
    if still_different:
        _say(err, "torchdoctor: restored, but these differ from "
            "before: " + ", ".join(map(str, still_different)))
    else:
        _say(err, "torchdoctor: restored: every package is as it was before the fix.")
    if check.ok:
        _say(err, "  pip check: no broken requirements.")
    else:
        _say(err, f"  pip check ({check.describe()}):")
        for line in (check.stdout + "\n" + check.stderr).strip().splitlines()[-10:]:
            _say(err, f"  | {line}")


def show_restore_failed(err, result, restore_cmd: str) -> None:
    _say(err, f"torchdoctor: the restore failed ({result.describe()}); once the cause is fixed, restore "
        "with:")
    _say(err, f"  {restore_cmd}")


def show_restore_interrupted(err, restore_cmd: str) -> None:
    _say(err, "torchdoctor: interrupted again while restoring; pip's leftovers were cleared. Restore with:")
    _say(err, f"  {restore_cmd}")


def show_foreign(err, foreign: list, unread: bool) -> None:
    """After the install: torch wheels that came from a source the plan does not name (or pip's report of
    the install could not be read, so where they came from is unknown)."""
    if unread:
        _say(err, "torchdoctor: pip's report of the install could not be read: where the wheels came from is "
                  "unknown; rolling back.")
    for name, url in foreign:
        _say(err, f"torchdoctor: {name} came from {url}, a source the plan does not name; rolling back.")


def show_not_the_plans(err, wrong: list) -> None:
    """After a uv install: torch-family files that are not those of the plan's wheels."""
    for name, why in wrong:
        _say(err, f"torchdoctor: {name} is not what the plan's sources serve: {why}; rolling back.")


def show_restore_command(err, restore_cmd: str) -> None:
    _say(err, f"  restore command (if anything still differs): {restore_cmd}")


def show_changed(con, err, changed: list, outside: list) -> None:
    """What the two freezes say changed; ``outside``: those of them outside torch's family."""
    con.print(_text(tr("Changed: {what}", what=", ".join(map(str, changed)) or tr("nothing"))))
    if outside:
        err.print(_text("torchdoctor: " + tr("warning: packages outside torch changed too: {names}",
                                             names=", ".join(map(str, outside)))))


def show_checking_again(con, smoke: bool) -> None:
    con.print(tr("Checking again (with the smoke test)...") if smoke else tr("Checking again..."))


def show_outcome(con, err, outcome, addresses: list[str], restore_cmd: str) -> None:
    """Before -> after; then either what the fix did not resolve (with the way back) or what it fixed."""
    con.print(_text("  " + tr(
        "before → after: gone {gone}; remaining {remaining}; new {new}", gone=", ".join(outcome.gone) or "-",
        remaining=", ".join(outcome.remaining) or "-", new=", ".join(outcome.appeared) or "-")))
    if outcome.torch_now is not None:
        con.print(_text("  " + tr("torch is now {version}", version=outcome.torch_now)))
    if outcome.broken:
        what = ["torch is gone"] if outcome.torch_gone else []
        what += [f"new error {i}" for i in outcome.new_errors]
        _say(err, f"torchdoctor: the fix made things worse ({', '.join(what)}): a failed fix, rolling back.")
        return
    if outcome.unresolved:
        err.print(_text("torchdoctor: " + tr("the fix did not resolve {ids}. Restore with:",
                                             ids=", ".join(outcome.unresolved))))
        err.print(_text(f"  {restore_cmd}"), soft_wrap=True)
        return
    con.print(_text(tr("Fixed: {what}.", what=", ".join(addresses) or tr("the plan ran"))))


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"
