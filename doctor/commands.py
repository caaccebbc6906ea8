"""What `check` and `fix` do, between parsing the command line and rendering: probe (or read a
report), diagnose, choose the exit code, render. Kept apart from cli.py so that tests and other
commands can call it without typer."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from doctor import exitcodes
from doctor.findings import ERROR, WARNING


@dataclass
class CheckOptions:
    python: str | None = None
    smoke: bool = True
    json: bool = False
    table: Path | None = None
    verbose: bool = False
    smoke_timeout: float = 60.0
    device: str = "all"
    strict: bool = False
    ignore: list[str] = field(default_factory=list)


def exit_code_for(findings, strict: bool = False) -> int:
    failing = {ERROR, WARNING} if strict else {ERROR}
    return exitcodes.FINDINGS if any(f.severity in failing for f in findings) else exitcodes.OK


def diagnose_machine(opts: CheckOptions):
    """Load the table, probe, diagnose. Returns (table, diagnosis)."""
    from doctor.diagnose import diagnose
    from doctor.probes.collect import ProbeOptions, collect
    from doctor.table import load_table

    table = load_table(opts.table)
    snapshot = collect(ProbeOptions(python=opts.python, smoke=opts.smoke, smoke_timeout=opts.smoke_timeout,
                                    device=opts.device))
    diag = diagnose(snapshot, table)
    if opts.ignore:
        diag.findings = [f for f in diag.findings if f.id not in set(opts.ignore)]
    return table, diag


def table_meta(table) -> dict:
    return {"version": table.table_version, "verified_on": table.verified_on, "path": str(table.path)}


def make_report(table, diag, code: int) -> dict:
    from doctor.report import build_report

    return build_report(diag.snapshot, table_meta(table), diag.findings, diag.checks, diag.plan.to_dict(), code)


def emit(report: dict, diag, opts: CheckOptions, mode: str = "check") -> None:
    if opts.json:
        from doctor.render.json import render_json

        sys.stdout.write(render_json(report))
        return
    from doctor.render.text import render_text

    render_text(report, diag, verbose=opts.verbose, mode=mode)


def run_check(opts: CheckOptions) -> int:
    table, diag = diagnose_machine(opts)
    code = exit_code_for(diag.findings, opts.strict)
    emit(make_report(table, diag, code), diag, opts)
    return code


def run_fix(opts: CheckOptions, dry_run: bool) -> int:
    table, diag = diagnose_machine(opts)
    code = exit_code_for(diag.findings)
    emit(make_report(table, diag, code), diag, opts, mode="fix")
    if not dry_run:
        print("torchdoctor fix only prints the plan in this version: run the commands above yourself "
              "(or pass --dry-run to say so explicitly).", file=sys.stderr)
    return code
