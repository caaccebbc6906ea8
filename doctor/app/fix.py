"""`torchdoctor fix`: the run's diagnosis handed to doctor/fix, which shows the plan, asks, carries it
out and checks again. ``--mirror``: the plan is written for the mirror, then one request checks that the
mirror serves the torch wheel it installs; when it does not, the plan is written again for the official
index (the facts are not probed twice) and a line says so."""

from __future__ import annotations

from doctor.app.mirror import checked_mirror, mirror_option
from doctor.app.options import CheckOptions, source_from_options, validate
from doctor.app.output import emit
from doctor.app.run import (
    diagnose_machine,
    exit_code_for,
    judge,
    make_report,
    requested_for,
    requirements_for,
)
from doctor.fix.run import FixOptions
from doctor.plan.commands import InstallSource

__all__ = ["FixOptions", "run_fix"]  # the command line builds FixOptions through the app


def run_fix(opts: CheckOptions, fix) -> int:
    """Carry out the plan (doctor/fix/run.py); ``fix.dry_run`` only prints it. fix diagnoses through
    ``diagnose_machine`` with its own ``commands``, so the plan is written once, with fix's installer
    and this source."""
    from doctor.fix.run import Machine
    from doctor.fix.run import run_fix as carry_out
    from doctor.fix.state import refuse_existing

    validate(opts)
    mirror = mirror_option(fix.mirror, fix.index_url_base, fix.find_links, fix.no_index)
    fix.source = source_from_options(fix.index_url_base, fix.find_links, fix.no_index)
    if mirror is not None and mirror.source() is not None:
        fix.source = mirror.source()
    if not fix.dry_run:
        refuse_existing(fix.restore_file)  # never written over, never through a symlink: said before probing
    # What check reads (--torch, and [tool.torchdoctor] of ./pyproject.toml: its ignore and torch), so that
    # check and fix never disagree about what is wrong and which torch to end with.
    req = requirements_for(opts)

    def diagnose(options, commands=None):
        table, diag = diagnose_machine(options, commands=commands, requirements=req)
        if mirror is not None and commands is not None:
            def official():
                fix.source = InstallSource()
                return judge(diag.snapshot, table, req, commands(diag.snapshot), requested_for(options, req))

            diag = checked_mirror(mirror, diag, official)
        return table, diag

    return carry_out(
        opts, fix, Machine(diagnose=diagnose, report=make_report, emit=emit, exit_code=exit_code_for)
    )
