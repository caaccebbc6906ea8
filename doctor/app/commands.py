"""What `check` and `fix` do, between parsing the command line and rendering: probe (or read a
report), diagnose, choose the exit code, render. Kept apart from cli.py so that tests and other
commands can call it without typer."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from doctor import exitcodes
from doctor.model.findings import ERROR, WARNING
from doctor.plan.commands import DEFAULT_INDEX_BASE, InstallSource


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
    inputs: list[Path] = field(default_factory=list)  # --from: reports / collect_env texts / folders
    format: str | None = None  # text, json, markdown, github, junit (None: text, or json with --json)
    output: Path | None = None
    redact: bool = True
    shared: bool = False  # output meant for others (`report`): redacted even on stdout
    require: list[str] = field(default_factory=list)
    min_gpus: int | None = None
    min_compute_capability: str | None = None
    min_gpu_memory: str | None = None
    torch: str | None = None
    cuda: str | None = None
    config: Path | None = None

    @property
    def output_format(self) -> str:
        return self.format or ("json" if self.json else "text")


def exit_code_for(findings, strict: bool = False) -> int:
    """1 for error findings (and warnings with --strict); 4 when a CI requirement is not met."""
    if any(f.rule == "requirements" for f in findings):
        return exitcodes.REQUIREMENT
    failing = {ERROR, WARNING} if strict else {ERROR}
    return exitcodes.FINDINGS if any(f.severity in failing for f in findings) else exitcodes.OK


def diagnose_machine(opts: CheckOptions, commands=None):
    """Load the table, probe, diagnose. Returns (table, diagnosis). ``commands``: (snapshot) -> Commands,
    how this run writes its commands once the facts are in (fix: its installer and source); default pip
    from the PyTorch index."""
    from doctor.probes.collect import ProbeOptions, collect
    from doctor.table.load import load_table

    validate(opts)
    table = load_table(opts.table)
    python = _require_interpreter(opts.python) if opts.python else None
    snapshot = collect(ProbeOptions(python=python, smoke=opts.smoke, smoke_timeout=opts.smoke_timeout,
                                    device=opts.device), meanwhile=_import_judges)
    # collect() imported the diagnosis modules while the children ran: off the critical path.
    from doctor.app.diagnose import diagnose

    diag = diagnose(snapshot, table, commands=commands(snapshot) if commands else None)
    return table, diag


def _import_judges() -> None:
    """What diagnosis imports anyway (rules, plan): ~20 ms of imports done while the probe children run."""
    import doctor.app.diagnose  # noqa: F401
    from doctor.rules import all_rules

    all_rules()


def _require_interpreter(python: str) -> str:
    """The interpreter --python names; one that is not there is a usage error (exit 2), not a finding."""
    import os

    from doctor.errors import DoctorError
    from doctor.probes.interpreter import choose_interpreter

    path, reason = choose_interpreter(python, os.environ, os.getcwd())
    if path is None:
        raise DoctorError(reason)
    if os.name == "posix" and not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise DoctorError(f"--python {python}: {path} is not an executable file")
    return path


def validate(opts: CheckOptions) -> None:
    """Option values that can only be wrong: one line and exit 2 before any probing."""
    from doctor.errors import DoctorError

    if opts.device != "all" and not opts.device.isdigit():
        raise DoctorError(f"--device {opts.device!r}: give a device index (0, 1, ...) or 'all'")
    if not opts.smoke_timeout > 0:
        raise DoctorError(f"--smoke-timeout {opts.smoke_timeout}: must be a positive number of seconds")
    if opts.json and opts.format not in (None, "json"):
        raise DoctorError(f"--json and --format {opts.format} contradict each other: pick one")
    if opts.config is not None and not opts.config.is_file():
        raise DoctorError(f"--config {opts.config}: no such file")


def table_meta(table) -> dict:
    return {"version": table.table_version, "verified_on": table.verified_on, "path": str(table.path)}


def make_report(table, diag, code: int) -> dict:
    from doctor.model.report import build_report

    return build_report(diag.snapshot, table_meta(table), diag.findings, diag.checks, diag.plan.to_dict(), code)


def emit(report: dict, opts: CheckOptions, mode: str = "check") -> None:
    deliver(render(report, opts, mode), opts)


def _requirements(opts: CheckOptions):
    """Requirements from the command line merged over [tool.torchdoctor] (the command line wins);
    None when neither states any (the common case: nothing to import or check)."""
    path = opts.config or Path("pyproject.toml")
    stated = (opts.require or opts.min_gpus is not None or opts.min_compute_capability or opts.min_gpu_memory
              or opts.torch or opts.cuda)
    if not stated and not opts.config and not path.is_file():
        return None
    from doctor.app.requirements import (
        Requirements,
        load_pyproject_requirements,
        merge,
        validate_requirements,
    )

    cli = Requirements(require=list(opts.require), min_gpus=opts.min_gpus,
                       min_compute_capability=opts.min_compute_capability, min_gpu_memory=opts.min_gpu_memory,
                       torch=opts.torch, cuda=opts.cuda, strict=opts.strict, ignore=list(opts.ignore))
    validate_requirements(cli, "command line")
    from_file = None
    if opts.config:
        from_file = load_pyproject_requirements(str(path))
    elif path.is_file():
        from doctor.errors import DoctorError

        try:  # ./pyproject.toml counts only when it states [tool.torchdoctor]; someone else's may not parse
            from_file = load_pyproject_requirements(str(path))
        except DoctorError:
            from_file = None
    return merge(cli, from_file)


def apply_requirements(diag, req, ignore: list[str] = ()) -> None:
    """Add the unmet CI requirements as findings, then drop the ignored ids (--ignore and the config's)."""
    if req is not None:
        from doctor.app.requirements import check_requirements

        diag.findings.extend(check_requirements(diag.snapshot, req))
        ignore = [*ignore, *req.ignore]
    if ignore:
        diag.findings = [f for f in diag.findings if f.id not in set(ignore)]


def _expand_inputs(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".json", ".txt", ".md")))
        else:
            files.append(path)
    if not files:
        from doctor.errors import ReportError

        raise ReportError(f"--from {', '.join(map(str, paths))}: no report files found")
    return files


def rediagnose(path: Path, table, req, ignore: list[str] = ()):
    """A report or collect_env text read back and diagnosed with the current rules and table."""
    from doctor.app.diagnose import diagnose
    from doctor.inputs.reports import read_input_file, read_report

    snapshot, _meta = read_report(read_input_file(str(path)), str(path))
    diag = diagnose(snapshot, table)
    apply_requirements(diag, req, ignore)
    return diag


def render(report: dict, opts: CheckOptions, mode: str = "check") -> str | None:
    """The chosen format as text, or None for the human text renderer (which prints itself)."""
    fmt = opts.output_format
    if opts.redact and (opts.shared or opts.output is not None or fmt in ("markdown", "github")):
        from doctor.render.redact import redact_report

        report = redact_report(report)  # output meant to be shared (a GitHub job summary can be public)
    if fmt == "json":
        from doctor.render.json import render_json

        return render_json(report)
    if fmt == "markdown":
        from doctor.render.markdown import render_markdown

        return render_markdown(report)
    if fmt == "github":
        import os

        from doctor.render.github import render_github

        return render_github(report, os.environ.get("GITHUB_STEP_SUMMARY"))
    if fmt == "junit":
        from doctor.render.junit import render_junit

        return render_junit(report, strict=opts.strict)
    if opts.output is not None:
        import io

        from doctor.render.text import render_text

        buf = io.StringIO()
        render_text(report, verbose=opts.verbose, mode=mode, file=buf, width=100)
        return buf.getvalue()
    from doctor.render.text import render_text

    render_text(report, verbose=opts.verbose, mode=mode)
    return None


def deliver(text: str | None, opts: CheckOptions) -> None:
    if text is None:
        return
    if opts.output is None:
        sys.stdout.write(text)
        return
    try:
        opts.output.parent.mkdir(parents=True, exist_ok=True)
        opts.output.write_text(text, encoding="utf-8")
    except OSError as exc:
        from doctor.errors import DoctorError

        raise DoctorError(f"cannot write {opts.output}: {exc.strerror or exc}") from exc
    print(f"torchdoctor: wrote {opts.output}", file=sys.stderr)


def run_check(opts: CheckOptions) -> int:
    from doctor.table.load import load_table

    validate(opts)
    req = _requirements(opts)
    strict = opts.strict or (req is not None and req.strict)
    if opts.inputs:
        return _run_from(opts, load_table(opts.table), req, strict)
    table, diag = diagnose_machine(opts)
    apply_requirements(diag, req, opts.ignore)
    code = exit_code_for(diag.findings, strict)
    deliver(render(make_report(table, diag, code), opts), opts)
    return code


def _run_from(opts: CheckOptions, table, req, strict: bool) -> int:
    files = _expand_inputs(opts.inputs)
    if len(files) == 1:
        diag = rediagnose(files[0], table, req, opts.ignore)
        code = exit_code_for(diag.findings, strict)
        deliver(render(make_report(table, diag, code), opts), opts)
        return code
    # Many reports: one line each (text) or one JSON report per line; unreadable ones are listed, not fatal.
    import json

    from doctor.errors import DoctorError, ReportError

    if opts.output_format not in ("text", "json"):
        raise DoctorError(f"--format {opts.output_format} takes one report; {len(files)} were given "
                          "(use text or json for many)")
    worst, lines = exitcodes.OK, []
    for path in files:
        try:
            diag = rediagnose(path, table, req, opts.ignore)
        except ReportError as exc:  # its message already names the file
            lines.append(json.dumps({"source": str(path), "error": str(exc)}) if opts.output_format == "json"
                         else f"unreadable: {exc}")
            worst = max(worst, exitcodes.USAGE)
            continue
        code = exit_code_for(diag.findings, strict)
        worst = max(worst, code)
        if opts.output_format == "json":
            report = make_report(table, diag, code)
            if opts.redact and (opts.shared or opts.output is not None):
                from doctor.render.redact import redact_report

                report = redact_report(report)
            report["source"] = str(path)
            lines.append(json.dumps(report, separators=(",", ":")))
        else:
            ids = ", ".join(f.id for f in diag.findings if f.severity == ERROR) or "ok"
            lines.append(f"{path}: exit {code}: {ids}")
    deliver("\n".join(lines) + "\n", opts)
    return worst


def run_report(opts: CheckOptions) -> int:
    """`torchdoctor report`: the JSON (or Markdown) report, redacted by default; 0 once written."""
    opts.shared = True
    table, diag = diagnose_machine(opts)
    code = exit_code_for(diag.findings)
    deliver(render(make_report(table, diag, code), opts), opts)
    return exitcodes.OK


def run_fix(opts: CheckOptions, fix) -> int:
    """Carry out the plan (doctor/fixer.py); ``fix.dry_run`` only prints it."""
    from doctor.fix.run import Machine
    from doctor.fix.run import run_fix as carry_out

    validate(opts)
    fix.source = source_from_options(fix.index_url_base, fix.find_links, fix.no_index)
    return carry_out(opts, fix, Machine(diagnose=diagnose_machine, report=make_report, emit=emit,
                                        exit_code=exit_code_for))


def run_distributed(python: str | None, nproc: int, timeout: float, as_json: bool, output: Path | None) -> int:
    """`torchdoctor distributed`: torchrun in the target interpreter; rank 0's report rendered here."""
    import json
    import os

    from doctor.distributed.launch import run_local
    from doctor.errors import DoctorError
    from doctor.probes.interpreter import choose_interpreter
    from doctor.render.distributed import render_text

    path, reason = choose_interpreter(python, os.environ, os.getcwd())
    if path is None:
        raise DoctorError(f"no interpreter to run torchrun with: {reason}")
    report, result = run_local(path, nproc, timeout)
    if report is None:
        tail = (result.stderr or result.stdout or "").strip().splitlines()[-1:] or [""]
        raise DoctorError(f"torchrun in {path} produced no report ({result.describe()}): {tail[0]}",
                          exitcodes.FINDINGS)
    text = json.dumps(report, indent=2) + "\n" if as_json else render_text(report)
    deliver(text, CheckOptions(output=output))
    return int(report.get("summary", {}).get("exit_code", exitcodes.OK))


def source_from_options(index_url_base: str | None, find_links: str | None, no_index: bool) -> InstallSource:
    """Validate and normalise the command-line source options (a local folder becomes a file:// URL)."""
    from doctor.errors import DoctorError

    if no_index and not find_links:
        raise DoctorError("--no-index needs --find-links DIR_OR_URL (where the wheels are)")
    base = DEFAULT_INDEX_BASE
    if index_url_base:
        base = index_url_base.strip()
        if "://" not in base:
            folder = Path(base).expanduser()
            if not folder.is_dir():
                raise DoctorError(f"--index-url-base {index_url_base!r}: not a URL and not a folder")
            base = folder.resolve().as_uri()
        base = base.rstrip("/")
    links = find_links
    if links and "://" not in links:
        folder = Path(links).expanduser()
        if not folder.exists():
            raise DoctorError(f"--find-links {find_links!r}: no such folder")
        links = str(folder.resolve())
    return InstallSource(base, links, no_index, bool(index_url_base))
