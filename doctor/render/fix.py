"""What `torchdoctor fix` prints while it works: the summary before consent, the steps' progress and
output, a failure with the restore command, and the before -> after comparison.

Each function takes what doctor/fix decided (plain values, or the fix's own objects read by their
attributes) and prints it on the consoles it is given: stdout's for the run, stderr's for errors.
Nothing here decides anything. Commands are printed without markup and without wrapping, so that
they can be copied as they are.
"""

from __future__ import annotations


def _text(text: str, style: str = ""):
    from rich.text import Text

    return Text(text, style=style)


def show_installer(con, installer: str, why: str) -> None:
    con.print(f"  installer: {installer} ({why})", markup=False)


def show_project(con, kind: str, lock: str, change: str, dry_run: bool) -> None:
    """A uv/poetry project: the pyproject.toml change instead of an install."""
    con.print(
        _text(
            f"This is a {kind} project: change pyproject.toml instead of the environment, so that "
            f"{lock} stays the truth{'' if dry_run else ' (nothing was changed; --force installs anyway)'}:",
            style="bold",
        )
    )
    con.print(_text(change), soft_wrap=True)


def show_nothing_to_run(con, healthy: bool) -> None:
    con.print("Nothing to change." if healthy else "Nothing torchdoctor can run: see above.")


def show_driver_first(err) -> None:
    err.print(
        "torchdoctor: the NVIDIA driver must be updated first (step 1): torchdoctor does not install "
        "drivers. Update it, reboot, then run torchdoctor fix again."
    )


def show_unresolvable(err, result) -> None:
    """The dry run failed: the installer's own last lines say why."""
    err.print(
        f"torchdoctor: the installer could not resolve the plan ({result.describe()}); "
        "nothing was changed:"
    )
    for line in (result.stdout + "\n" + result.stderr).strip().splitlines()[-15:]:
        err.print(f"  | {line}", markup=False)


def show_execution(
    con, interp, installer: str, why: str, preview, steps, warnings: list[str], restore_path, restore_cmd: str
) -> None:
    """The summary before consent: the target, the installer, what the dry run said changes, each step
    (``steps``: the runnable ones), the warnings, and the way back."""
    con.print(
        _text(
            f"torchdoctor fix will change {interp.path} ({interp.env_kind or '?'}, Python {interp.version})",
            style="bold",
        )
    )
    show_installer(con, installer, why)
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
    for number, step in enumerate(steps, 1):
        con.print(f"  step {number}/{len(steps)}: {step.description}", markup=False)
        con.print(_text(f"    {step.command}", style="bold"), soft_wrap=True)
    if preview.outside:
        con.print(_text("  ! also changes packages outside torch: " + ", ".join(map(str, preview.outside)),
                        style="yellow"))
    for w in warnings:
        con.print(_text(f"  ! {w}", style="yellow"))
    con.print(f"  restore file: {restore_path} (written before anything changes)", markup=False)
    con.print("  restore with:", markup=False)
    con.print(_text(f"    {restore_cmd}"), soft_wrap=True)


def show_not_confirmed(err) -> None:
    err.print("torchdoctor: not confirmed; nothing was changed.")


def show_restore_written(con, path) -> None:
    con.print(f"Wrote {path}", markup=False)


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
        self.console.print(_text(f"step {number}/{self.total}: {description}", style="bold"))
        self.console.print(_text(f"  $ {command}"), soft_wrap=True)

    def line(self, text: str) -> None:
        """One line of the step's own output, as it comes."""
        self.console.print(_text(f"  | {text}", style="dim"), soft_wrap=True)

    def done(self) -> None:
        if self.rich:
            self.rich.advance(self.task)


def show_interrupted(err, number: int, total: int, restore_cmd: str) -> None:
    err.print(f"torchdoctor: interrupted during step {number}/{total}. Restore with:")
    err.print(f"  {restore_cmd}", markup=False, soft_wrap=True)


def show_step_failed(err, number: int, total: int, description: str, result, restore_cmd: str) -> None:
    err.print(f"torchdoctor: step {number}/{total} failed ({result.describe()}): {description}", markup=False)
    for line in (result.stdout or "").strip().splitlines()[-10:]:
        err.print(f"  | {line}", markup=False)
    # pip rolls back what it uninstalled, but files of a half-extracted wheel can stay behind: the
    # restore command reinstalls the old builds over them.
    err.print("  the environment may be partly changed; restore the previous builds with:", markup=False)
    err.print(f"  {restore_cmd}", markup=False, soft_wrap=True)


def show_changed(con, err, changed: list, outside: list) -> None:
    """What the two freezes say changed; ``outside``: those of them outside torch's family."""
    con.print("Changed: " + (", ".join(map(str, changed)) or "nothing"), markup=False)
    if outside:
        err.print(
            "torchdoctor: warning: packages outside torch changed too: " + ", ".join(map(str, outside)),
            markup=False,
        )


def show_checking_again(con, smoke: bool) -> None:
    con.print("Checking again" + (" (with the smoke test)..." if smoke else "..."))


def show_outcome(con, err, outcome, addresses: list[str], restore_cmd: str) -> None:
    """Before -> after; then either what the fix did not resolve (with the way back) or what it fixed."""
    con.print(
        f"  before → after: gone {', '.join(outcome.gone) or '-'}; remaining {', '.join(outcome.remaining) or '-'}; "
        f"new {', '.join(outcome.appeared) or '-'}",
        markup=False,
    )
    if outcome.torch_now is not None:
        con.print(f"  torch is now {outcome.torch_now}", markup=False)
    if outcome.unresolved:
        err.print(
            f"torchdoctor: the fix did not resolve {', '.join(outcome.unresolved)}. Restore with:", markup=False
        )
        err.print(f"  {restore_cmd}", markup=False, soft_wrap=True)
        return
    con.print("Fixed: " + (", ".join(addresses) or "the plan ran") + ".", markup=False)


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"
