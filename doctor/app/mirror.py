"""``--mirror NAME`` (check, report, fix): the preset (doctor/plan/mirrors.py) checked before use. The plan
is written for the mirror; then one request (doctor/probes/mirror.py) asks the mirror for the listing that
must name the plan's torch wheel. When it does not, the same facts are judged again for the official index
(nothing is probed twice) and a line on stderr says why."""

from __future__ import annotations

import sys

from doctor.errors import DoctorError
from doctor.model.i18n import Msg, localize


def mirror_option(value: str | None, *others: str | bool | None):
    """``--mirror`` as a preset; a usage error when unknown or beside another source (``others``: the values
    of --index-url-base, --find-links, --no-index)."""
    if not value:
        return None
    from doctor.plan.mirrors import PRESETS, parse_mirror

    mirror = parse_mirror(value)
    if mirror is None:
        raise DoctorError(Msg("--mirror {value}: give one of {names}, or NAME=URL", value=repr(value),
                              names=", ".join(PRESETS)))
    if any(others):
        raise DoctorError(Msg("--mirror and --index-url-base, --find-links or --no-index contradict each "
            "other: "
                              "pick one"))
    return mirror


def checked_mirror(mirror, diag, rejudge):
    """The diagnosis whose plan the mirror can serve: ``diag`` when one request finds the torch wheel there,
    else ``rejudge()`` (the same facts, the official index), with a line on stderr that says why."""
    from doctor.plan.commands import DEFAULT_INDEX_BASE
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
    _tell(Msg("mirror {name} cannot serve this plan ({why}): installing from the official index {index} "
        "instead",
              name=mirror.name, why=why, index=DEFAULT_INDEX_BASE))
    if mirror.source() is None:
        return diag  # written for the official index from the start
    return rejudge()


def _tell(message: Msg) -> None:
    print(f"torchdoctor: {localize(message)}", file=sys.stderr)
