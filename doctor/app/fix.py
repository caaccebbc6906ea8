"""`torchdoctor fix`: the run's diagnosis handed to doctor/fix, which shows the plan, asks, carries it
out and checks again. ``--mirror``: the plan is written for the mirror, then one request checks that the
mirror serves the torch wheel it installs; when it does not, the plan is written again for the official
index (the facts are not probed twice) and a line says so."""

from __future__ import annotations

import sys

from doctor.app.check import torch_requirement
from doctor.app.options import CheckOptions, source_from_options, validate
from doctor.app.output import emit
from doctor.app.run import diagnose_machine, exit_code_for, make_report
from doctor.errors import DoctorError
from doctor.fix.run import FixOptions
from doctor.model.i18n import Msg, localize

__all__ = ["FixOptions", "run_fix"]  # the command line builds FixOptions through the app


def run_fix(opts: CheckOptions, fix) -> int:
    """Carry out the plan (doctor/fix/run.py); ``fix.dry_run`` only prints it. fix diagnoses through
    ``diagnose_machine`` with its own ``commands``, so the plan is written once, with fix's installer
    and this source."""
    from doctor.fix.run import Machine
    from doctor.fix.run import run_fix as carry_out
    from doctor.fix.state import refuse_existing

    validate(opts)
    mirror = mirror_option(fix)
    fix.source = source_from_options(fix.index_url_base, fix.find_links, fix.no_index)
    if mirror is not None and mirror.source() is not None:
        fix.source = mirror.source()
    if not fix.dry_run:
        refuse_existing(fix.restore_file)  # never written over, never through a symlink: said before probing
    req = torch_requirement(opts)  # --torch: the torch the fix must end with (the plan answers it)

    def diagnose(options, commands=None):
        table, diag = diagnose_machine(options, commands=commands, requirements=req)
        if mirror is not None and commands is not None:
            diag = checked_mirror(mirror, fix, table, diag, options, commands, req)
        return table, diag

    return carry_out(opts, fix, Machine(diagnose=diagnose, report=make_report, emit=emit, exit_code=exit_code_for))


def mirror_option(fix):
    """``--mirror`` as a preset (doctor/plan/mirrors.py); a usage error when unknown or beside another source."""
    if not fix.mirror:
        return None
    from doctor.plan.mirrors import PRESETS, parse_mirror

    mirror = parse_mirror(fix.mirror)
    if mirror is None:
        raise DoctorError(Msg("--mirror {value}: give one of {names}, or NAME=URL", value=repr(fix.mirror),
                              names=", ".join(PRESETS)))
    if fix.index_url_base or fix.find_links or fix.no_index:
        raise DoctorError(Msg("--mirror and --index-url-base, --find-links or --no-index contradict each other: "
                              "pick one"))
    return mirror


def checked_mirror(mirror, fix, table, diag, options, commands, req):
    """The diagnosis whose plan the mirror can serve: this one when one request finds the torch wheel there,
    else the same facts judged again with the official index (and a line on stderr that says why)."""
    from doctor.app.run import judge, requested_for
    from doctor.plan.commands import DEFAULT_INDEX_BASE, InstallSource
    from doctor.plan.mirrors import cannot_serve, wanted_file
    from doctor.probes.mirror import probe_mirror

    plan = diag.plan
    if not plan.pins:
        return diag  # nothing to install: nothing to fetch
    why = cannot_serve(mirror, list(plan.pins), plan.pins_variant)
    if why is None:
        wanted = wanted_file(list(plan.pins))
        answer = probe_mirror(mirror.listing(plan.pins_variant), wanted)
        if answer.serves:
            _tell(Msg("mirror {name}: {url} serves {file}", name=mirror.name, url=answer.url, file=wanted[0]))
            return diag
        why = Msg("{url}: {why}", url=answer.url, why=answer.why)
    _tell(Msg("mirror {name} cannot serve this plan ({why}): installing from the official index {index} instead",
              name=mirror.name, why=why, index=DEFAULT_INDEX_BASE))
    if mirror.source() is None:
        return diag  # written for the official index from the start
    fix.source = InstallSource()
    return judge(diag.snapshot, table, req, commands(diag.snapshot), requested_for(options, req))


def _tell(message: Msg) -> None:
    print(f"torchdoctor: {localize(message)}", file=sys.stderr)
