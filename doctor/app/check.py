"""`torchdoctor check` and `torchdoctor report`: probe this machine (or read reports back with --from),
judge, render, and return the exit code."""

from __future__ import annotations

import json
from pathlib import Path

from doctor import exitcodes
from doctor.app.options import CheckOptions, validate
from doctor.app.output import _redacted, deliver, emit
from doctor.app.run import (
    diagnose_machine,
    exit_code_for,
    judge,
    make_report,
    report_crashes,
    requested_for,
    requirements_for,
    writer_for,
)
from doctor.errors import DoctorError, ReportError


def run_check(opts: CheckOptions) -> int:
    validate(opts)
    req = requirements_for(opts)
    if opts.inputs:
        from doctor.table.load import load_table

        return _run_from(opts, load_table(opts.table), req)
    table, diag = diagnose_machine(opts, requirements=req)
    code = exit_code_for(diag.findings, diag.strict)
    emit(make_report(table, diag, code), opts)
    report_crashes(diag.findings)
    return code


def run_report(opts: CheckOptions) -> int:
    """`torchdoctor report`: the JSON (or Markdown) report, redacted by default; 0 once written (3 when a
    rule crashed: the report is then incomplete)."""
    opts.shared = True
    table, diag = diagnose_machine(opts, requirements=torch_requirement(opts))
    code = exit_code_for(diag.findings)
    emit(make_report(table, diag, code), opts)
    report_crashes(diag.findings)
    return exitcodes.INTERNAL if code == exitcodes.INTERNAL else exitcodes.OK


def _expand_inputs(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(
                sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".json", ".txt", ".md"))
            )
        else:
            files.append(path)
    if not files:
        raise ReportError(f"--from {', '.join(map(str, paths))}: no report files found")
    return files


def torch_requirement(opts: CheckOptions):
    """``--torch`` outside `check` (report, fix): the torch the run must end with, as the requirement the plan
    answers (None without it). `check` reads the whole of its requirements with requirements_for."""
    if not opts.torch:
        return None
    from doctor.model.requirements import Requirements, validate_requirements

    req = Requirements(torch=opts.torch)
    validate_requirements(req, "command line")
    return req


def rediagnose(path: Path, table, req, opts: CheckOptions | None = None):
    """A report or collect_env text read back and diagnosed with the current rules and table (and this run's
    options: --torch, --no-driver-change, the mirror)."""
    from doctor.inputs.reports import read_input_file, read_report

    snapshot, _meta = read_report(read_input_file(str(path)), str(path))
    if opts is None:
        return judge(snapshot, table, req)
    writer = writer_for(opts)
    return judge(snapshot, table, req, writer(snapshot) if writer else None, requested_for(opts, req))


def _run_from(opts: CheckOptions, table, req) -> int:
    files = _expand_inputs(opts.inputs)
    if len(files) == 1:
        diag = rediagnose(files[0], table, req, opts)
        code = exit_code_for(diag.findings, diag.strict)
        emit(make_report(table, diag, code), opts)
        report_crashes(diag.findings)
        return code
    # Many reports: one line each (text) or one JSON report per line; unreadable ones are listed, not fatal.
    if opts.output_format not in ("text", "json"):
        raise DoctorError(f"--format {opts.output_format} takes one report; {len(files)} were given "
                          "(use text or json for many)")
    worst, lines = exitcodes.OK, []
    for path in files:
        try:
            diag = rediagnose(path, table, req, opts)
        except ReportError as exc:  # its message already names the file
            lines.append(json.dumps({"source": str(path), "error": str(exc)}) if opts.output_format == "json"
                         else f"unreadable: {exc}")
            worst = max(worst, exitcodes.USAGE)
            continue
        code = exit_code_for(diag.findings, diag.strict)
        worst = max(worst, code)
        report_crashes(diag.findings)
        if opts.output_format == "json":
            report = _redacted(make_report(table, diag, code), opts)
            report["source"] = str(path)
            lines.append(json.dumps(report, separators=(",", ":")))
        else:
            from doctor.model.findings import ERROR

            ids = ", ".join(f.id for f in diag.findings if f.severity == ERROR) or "ok"
            lines.append(f"{path}: exit {code}: {ids}")
    deliver("\n".join(lines) + "\n", opts)
    return worst
