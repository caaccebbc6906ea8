"""One run, the same for every command: the interpreter chosen once → probes → rules (with the stated
requirements) → plan → exit code → report. `check`, `report`, `fix` and `--from` all go through here."""

from __future__ import annotations

from doctor import exitcodes
from doctor.app.options import CheckOptions, choose_interpreter, validate

# The findings, rules and requirements modules are imported where they are used: a check imports them while
# the target interpreter's children run (doctor/probes/collect.py), not before it starts them.


def exit_code_for(findings, strict: bool = False) -> int:
    """3 when a rule crashed (torchdoctor's bug: the verdict is incomplete); 4 when a CI requirement is not
    met; 1 for error findings (and warnings with --strict); else 0."""
    from doctor.model.findings import ERROR, WARNING
    from doctor.model.requirements import RULE as REQUIREMENTS_RULE
    from doctor.rules import INTERNAL_ERROR_ID

    if any(f.id == INTERNAL_ERROR_ID for f in findings):
        return exitcodes.INTERNAL
    if any(f.rule == REQUIREMENTS_RULE for f in findings):
        return exitcodes.REQUIREMENT
    failing = {ERROR, WARNING} if strict else {ERROR}
    return exitcodes.FINDINGS if any(f.severity in failing for f in findings) else exitcodes.OK


def requirements_for(opts: CheckOptions):
    """Requirements from the command line merged over [tool.torchdoctor] (the command line wins);
    None when neither states any (the common case: nothing to import or check)."""
    import os

    path = os.fspath(opts.config) if opts.config else "pyproject.toml"
    stated = (opts.require or opts.min_gpus is not None or opts.min_compute_capability or opts.min_gpu_memory
              or opts.torch or opts.cuda or opts.strict or opts.ignore)
    if not stated and not opts.config and not os.path.isfile(path):
        return None
    from doctor.app.config import load_pyproject_requirements
    from doctor.model.requirements import Requirements, merge, validate_requirements

    cli = Requirements(require=list(opts.require), min_gpus=opts.min_gpus,
                       min_compute_capability=opts.min_compute_capability, min_gpu_memory=opts.min_gpu_memory,
                       torch=opts.torch, cuda=opts.cuda, strict=opts.strict, ignore=list(opts.ignore))
    validate_requirements(cli, "command line")
    from doctor.app.listing import check_ignored

    check_ignored(cli.ignore, "--ignore")
    # ./pyproject.toml counts when it states [tool.torchdoctor]; then every error in it is reported (exit 2)
    shown = path if opts.config else os.path.join(os.getcwd(), path)  # errors name the file that was read
    from_file = (
        load_pyproject_requirements(shown, explicit=bool(opts.config)) if os.path.isfile(path) else None
    )
    if from_file is not None:
        check_ignored(from_file.ignore, f"{shown}: [tool.torchdoctor]: ignore")
        _say_what_the_file_changes(shown, from_file, opts)
    return merge(cli, from_file)


def _say_what_the_file_changes(path: str, from_file, opts: CheckOptions) -> None:
    """A cloned repository's pyproject.toml can drop findings (``ignore``) or choose the torch (``torch``):
    the verdict then rests on that file, so one line on stderr names it and what it set (not with -q)."""
    said = [f"ignore = {from_file.ignore!r}"] if from_file.ignore else []
    if from_file.torch and not opts.torch:
        said.append(f"torch = {from_file.torch!r}")
    if said and not opts.quiet:
        import sys

        from doctor.errors import one_line

        print(one_line(f"torchdoctor: {path} [tool.torchdoctor] applies: {'; '.join(said)}"), file=sys.stderr)


def requested_for(opts: CheckOptions, requirements=None):
    """What the user asked of this run: the torch to end with (``--torch``, else ``[tool.torchdoctor] torch``)
    and whether the driver may change (``--no-driver-change``). The plan and the rules follow it."""
    from doctor.model.snapshot import Requested, TorchPin

    torch = None
    if opts.torch:
        torch = TorchPin(opts.torch.strip(), "--torch")
    elif requirements is not None and requirements.torch:
        torch = TorchPin(requirements.torch.strip(), "[tool.torchdoctor] torch")
    return Requested(torch=torch, no_driver_change=opts.no_driver_change)


def writer_for(opts: CheckOptions):
    """(snapshot) -> Commands: how check and report write every command (pip, the PyTorch index or the mirror
    of ``--index-url-base`` / TORCHDOCTOR_INDEX_URL_BASE, this shell). None: the default."""
    from doctor.app.mirror import mirror_option

    mirror = mirror_option(opts.mirror, opts.index_url_base)
    if not opts.index_url_base and (mirror is None or mirror.source() is None):
        return None
    from doctor.app.options import source_from_options
    from doctor.plan.plan import commands_for

    source = mirror.source() if mirror is not None else source_from_options(opts.index_url_base, None, False)
    return lambda snapshot: commands_for(snapshot, source=source)


def judge(snapshot, table, requirements=None, commands=None, requested=None):
    """The diagnosis of a snapshot: rules (and the requirements rule when requirements are stated), the
    ignored ids dropped, then the plan. ``commands``: the Commands every command is written with;
    ``requested``: what the user asked of this run (requested_for)."""
    from doctor.app.diagnose import diagnose

    return diagnose(snapshot, table, commands=commands, requirements=requirements, requested=requested)


def diagnose_machine(opts: CheckOptions, commands=None, requirements=None):
    """Probe (loading the table while the children run), diagnose. Returns (table, diagnosis). ``commands``:
    (snapshot) -> Commands, how this run writes its commands once the facts are in (fix: its installer and
    source); default: the mirror of ``opts.index_url_base`` when given, else pip from the PyTorch index.
    ``requirements``: what the run must check besides the rules."""
    from doctor.app.progress import progress, wanted
    from doctor.probes.collect import ProbeOptions, collect

    validate(opts)
    commands = commands or writer_for(opts)
    interpreter = choose_interpreter(opts.python)
    loaded = {}

    def meanwhile():
        # The table is parsed while the target interpreter's children run; a broken one still ends the
        # run with exit 2 before any verdict (collect ends the children).
        from doctor.table.load import load_table

        loaded["table"] = load_table(opts.table)
        _import_judges()

    # progress on a terminal's stderr; never with -q, --json, or JSON going to stdout
    show = wanted(opts.quiet, opts.json or (opts.output_format == "json" and opts.output is None))
    with progress(show) as tell:
        snapshot = collect(
            ProbeOptions(
                interpreter=interpreter,
                smoke=opts.smoke,
                smoke_timeout=opts.smoke_timeout,
                device=opts.device,
                progress=tell,
            ),
            meanwhile=meanwhile,
        )
    if "table" not in loaded:  # meanwhile broke: load it again, and let its error be raised
        from doctor.table.load import load_table

        loaded["table"] = load_table(opts.table)
    table = loaded["table"]
    unusable(opts, snapshot)
    check_device(opts.device, snapshot)
    # collect() imported the diagnosis modules while the children ran: off the critical path.
    diag = judge(snapshot, table, requirements, commands(snapshot) if commands else None,
                 requested_for(opts, requirements))
    if opts.mirror:  # check and report: the mirror's plan only if the mirror serves it (fix checks its own)
        from doctor.app.mirror import checked_mirror, mirror_option

        diag = checked_mirror(mirror_option(opts.mirror), diag, lambda: judge(
            snapshot, table, requirements, None, requested_for(opts, requirements)))
    return table, diag


def check_device(device: str, snapshot) -> None:
    """``--device N`` on a machine without device N is a usage error (exit 2), never a verdict about the
    build. The count is torch's own when the smoke test saw devices, else the NVIDIA GPUs the driver lists
    (unless CUDA_VISIBLE_DEVICES renumbers them), else none when no NVIDIA GPU is there and torch is no
    ROCm/XPU build (those serve GPUs the NVIDIA probes cannot see); otherwise it is not judged."""
    if device in ("", "all") or not device.isdigit():
        return
    from doctor.compat.builds import torch_build
    from doctor.errors import DoctorError

    # No machine has a billion GPUs; a 5000-digit index must not reach int() (Python refuses to convert it).
    index = int(device) if len(device) <= 9 else 10**9
    shown = device if len(device) <= 12 else device[:12] + "..."
    rt, nv = snapshot.runtime, snapshot.nvidia
    visible = snapshot.environment.visible_devices
    renumbered = visible is not None and visible.CUDA_VISIBLE_DEVICES is not None
    build = torch_build(snapshot)
    if rt.device_count is not None and rt.device_count > 0:
        count, what = rt.device_count, f"torch sees {rt.device_count} device(s)"
    elif nv.status == "ok" and not renumbered:
        count, what = len(nv.gpus), f"the NVIDIA driver lists {len(nv.gpus)} GPU(s)"
    elif nv.status == "no-gpu" and not (build is not None and build.kind in ("rocm", "xpu")):
        count, what = 0, "no NVIDIA GPU was found" + (f": {nv.detail}" if nv.detail else "")
    else:
        return
    if index >= count:
        raise DoctorError(f"--device {shown}: this machine has no device {shown} ({what}); give an index "
            "below "
                          f"{count} or leave --device out" if count else
                          f"--device {shown}: this machine has no device {shown} ({what}); leave --device "
                          "out")


def unusable(opts: CheckOptions, snapshot) -> None:
    """An interpreter named with --python that cannot be used is a usage error (exit 2), like one that is not
    there: what it printed comes along, frames left out. One found by looking (VIRTUAL_ENV, ./.venv, PATH)
    that is broken is a finding about this machine instead (interpreter-unusable, exit 1)."""
    interp = snapshot.interpreter
    if opts.python and opts.python_named and interp.error:
        from doctor.errors import DoctorError

        lines = [line for line in interp.error_lines or [] if line not in interp.error]
        raise DoctorError(f"--python {opts.python}: {interp.error}", details=lines)


def _import_judges() -> None:
    """What diagnosis imports anyway (rules, plan), imported while the probe children run."""
    import doctor.app.diagnose  # noqa: F401
    from doctor.rules import all_rules

    all_rules()


def table_meta(table) -> dict:
    return {"version": table.table_version, "verified_on": table.verified_on, "path": str(table.path)}


def make_report(table, diag, code: int) -> dict:
    from doctor.model.report import build_report

    return build_report(
        diag.snapshot,
        table_meta(table),
        diag.findings,
        diag.checks,
        diag.plan.to_dict(),
        code,
        strict=diag.strict,
    )


def report_crashes(findings) -> None:
    """On stderr, whatever the format: a rule crashed, so this verdict is incomplete (exit 3)."""
    import sys

    from doctor.rules import INTERNAL_ERROR_ID

    for f in findings:
        if f.id == INTERNAL_ERROR_ID:
            print(f"torchdoctor: internal error in rule {f.evidence.get('rule')}: "
                f"{f.detail.split(' (at ')[0]} "
                  f"(at {f.evidence.get('at')}); the other checks ran, but this one did not: please report "
                  "it "
                  "(exit 3)", file=sys.stderr)
