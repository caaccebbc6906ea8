"""`torchdoctor fix`: the run's diagnosis handed to doctor/fix, which shows the plan, asks, carries it
out and checks again."""

from __future__ import annotations

from doctor.app.check import torch_requirement
from doctor.app.options import CheckOptions, source_from_options, validate
from doctor.app.output import emit
from doctor.app.run import diagnose_machine, exit_code_for, make_report
from doctor.fix.run import FixOptions

__all__ = ["FixOptions", "run_fix"]  # the command line builds FixOptions through the app


def run_fix(opts: CheckOptions, fix) -> int:
    """Carry out the plan (doctor/fix/run.py); ``fix.dry_run`` only prints it. fix diagnoses through
    ``diagnose_machine`` with its own ``commands``, so the plan is written once, with fix's installer
    and this source."""
    from doctor.fix.run import Machine
    from doctor.fix.run import run_fix as carry_out
    from doctor.fix.state import refuse_existing

    validate(opts)
    fix.source = source_from_options(fix.index_url_base, fix.find_links, fix.no_index)
    if not fix.dry_run:
        refuse_existing(fix.restore_file)  # never written over, never through a symlink: said before probing
    req = torch_requirement(opts)  # --torch: the torch the fix must end with (the plan answers it)

    def diagnose(options, commands=None):
        return diagnose_machine(options, commands=commands, requirements=req)

    return carry_out(opts, fix, Machine(diagnose=diagnose, report=make_report, emit=emit, exit_code=exit_code_for))
