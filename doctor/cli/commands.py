"""The command line as typer reads it: every command, its options and help. Each command builds the app's
option objects (doctor/app/options.py) and calls the app. Heavy modules (rich, pynvml, the probes) are
imported inside the commands, so that `torchdoctor --help` loads none of them. The entry point,
``doctor.cli.main``, calls ``run``.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from doctor import __version__, exitcodes
from doctor.errors import DoctorError

app = typer.Typer(
    name="torchdoctor",
    help="Find out why PyTorch does not fit this machine (driver, CUDA build, GPU architecture, "
    "companions, Python) and print the exact command that fixes it.\n\n\b\nExamples:\n  torchdoctor check\n"
    "  torchdoctor check --python ~/venv/bin/python -v\n  torchdoctor fix --dry-run\n"
    "  torchdoctor explain \"no kernel image is available for execution on the device\"",
    epilog="\b\n" + exitcodes.HELP,  # \b: click keeps the lines as they are
    add_completion=True,  # --install-completion / --show-completion
    no_args_is_help=True,
    pretty_exceptions_enable=False,  # locals can hold secrets; errors are handled in main()
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

PythonOpt = Annotated[str | None, typer.Option("--python", help="Interpreter (or venv/conda folder) to "
    "inspect. "
                                               "Default: VIRTUAL_ENV, CONDA_PREFIX, ./.venv, python3 on "
                                               "PATH.")]
NoSmokeOpt = Annotated[bool, typer.Option("--no-smoke", help="Do not import torch (no import probe, no smoke "
    "test).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="The same as --format json: only JSON on stdout.")]
QuietOpt = Annotated[bool, typer.Option("-q", "--quiet", help="No progress and no notices on stderr; with "
    "text "
                                        "output, only what needs doing (nothing when healthy).")]
TableOpt = Annotated[Path | None, typer.Option("--table", help="Use this compatibility table instead of the "
    "bundled one.")]
VerboseOpt = Annotated[bool, typer.Option("-v", "--verbose", help="Show details, evidence and every check's "
    "state.")]
SmokeTimeoutOpt = Annotated[float, typer.Option("--smoke-timeout", help="Time limit for the smoke test, "
    "seconds.")]
DeviceOpt = Annotated[str, typer.Option("--device", help="Smoke-test only this device index, or all; a "
    "device "
                                       "this machine does not have is a usage error.")]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 1).")]
IgnoreOpt = Annotated[list[str] | None, typer.Option("--ignore", help="Ignore this finding id (repeatable; "
                                                     "`torchdoctor rules` lists them).")]
OutputOpt = Annotated[Path | None, typer.Option("-o", "--output", help="Write the output to this file "
                                                "(redacted unless --no-redact).")]
NoRedactOpt = Annotated[bool, typer.Option("--no-redact", help="Keep user/host names, home paths, GPU UUIDs, "
                                           "IPs and every environment variable in shared output.")]
TorchOpt = Annotated[str | None, typer.Option(
    "--torch", help='The torch to end with, a PEP 440 specifier ("==2.3.1", ">=2.5,<2.8"): the plan installs '
        'the '
    "variant of it that fits this machine (default: the project's pins, else the installed version). check: "
    "the "
    "installed torch must match it too (exit 4).")]
NoDriverChangeOpt = Annotated[bool, typer.Option(
    "--no-driver-change", help="The driver stays as it is: the plan's first way is a torch that runs on it "
    "(automatic in a container or a cluster job).")]
NoCacheOpt = Annotated[bool, typer.Option(
    "--no-cache", help="Accepted and ignored: nothing is cached any more (also TORCHDOCTOR_NO_CACHE); "
    "the option will be removed in a later release.")]
IndexUrlBaseOpt = Annotated[str | None, typer.Option(
    "--index-url-base", envvar="TORCHDOCTOR_INDEX_URL_BASE",
    help="A mirror of https://download.pytorch.org/whl: <base>/cu128 must be a PEP 503 index.")]
MirrorOpt = Annotated[str | None, typer.Option(
    "--mirror", help="A PyTorch wheel mirror: nju (--index-url), aliyun or sjtu (-f with pinned +cuXXX), "
    "tuna (PyPI only: no CUDA builds); NAME=URL for that layout elsewhere. Checked with one request before "
    "use; the official index when it does not serve the wheel.", show_default=False)]
LangOpt = Annotated[str | None, typer.Option(
    "--lang", help="The language of what people read: en or zh (default: LC_ALL, LC_MESSAGES, LANG; "
    "JSON, github and junit stay English unless --lang is given).", show_default=False)]


def _use_language(lang: str | None, fmt: str | None = None) -> None:
    """This command's language, chosen before anything is said (doctor/app/language.py)."""
    from doctor.app.language import use_language

    use_language(lang, fmt)


def _no_cache_notice(no_cache: bool, quiet: bool) -> None:
    """--no-cache and TORCHDOCTOR_NO_CACHE turned off a cache that no longer exists: accepted for this release
    (command lines and CI jobs keep working), with one line each saying they can go (not under -q)."""
    if quiet:
        return
    from doctor.app.language import say

    if no_cache:
        print("torchdoctor: " + say("--no-cache is no longer needed: nothing is cached; the option will be "
                                    "removed in a later release"), file=sys.stderr)
    if os.environ.get("TORCHDOCTOR_NO_CACHE"):
        print("torchdoctor: " + say("TORCHDOCTOR_NO_CACHE is no longer needed: nothing is cached; the "
                                    "variable is ignored and can be unset"), file=sys.stderr)


class Installer(str, Enum):
    pip = "pip"
    uv = "uv"
    auto = "auto"


def _version_callback(value: bool) -> None:
    if value:
        print(f"torchdoctor {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version_callback, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    pass


# One output vocabulary: --format (the formats a command has), --json (= --format json), -o FILE, -q.
class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    github = "github"
    junit = "junit"


def _formats(*some: Format) -> type[Enum]:
    """The --format choices of a command that has only some formats, in this order: an Enum of Format's
    members, since typer offers an Enum's values as an option's choices."""
    return Enum("Format", [(f.name, f.value) for f in some], type=str)


ReportFormat = _formats(Format.json, Format.markdown)
TextOrJson = _formats(Format.text, Format.json)
TextJsonMarkdown = _formats(Format.text, Format.json, Format.markdown)


def _value(chosen: Enum | None) -> str | None:
    return chosen.value if chosen is not None else None


def _format(json_out: bool, chosen: Enum | None, default: str = "text") -> str:
    """--format, or --json (its alias); both at once must agree."""
    value = _value(chosen)
    if json_out and value not in (None, "json"):
        from doctor.app.language import Msg

        raise DoctorError(Msg("--json and --format {format} contradict each other: pick one", format=value))
    return "json" if json_out else (value or default)


FromOpt = Annotated[list[Path] | None, typer.Option(
    "--from", help="Re-diagnose a torchdoctor JSON report, a pasted Markdown report or the output of "
    "`python -m torch.utils.collect_env` (a file, or a folder of them; repeatable) instead of probing.")]
FormatOpt = Annotated[Format | None, typer.Option("--format", help="text (the default), json, markdown (to "
    "paste "
                                                  "into an issue), github (Actions annotations), junit.",
                                                  show_default=False)]
RequireOpt = Annotated[list[str] | None, typer.Option("--require", help="CI: fail (exit 4) unless this is "
                                                      "usable: cuda, rocm, xpu, mps, gpu or cpu "
                                                      "(repeatable).")]


@app.command(short_help="Diagnose this machine (or a report) and print the fix.")
def check(
    python: PythonOpt = None,
    no_smoke: NoSmokeOpt = False,
    json_out: JsonOpt = False,
    table: TableOpt = None,
    verbose: VerboseOpt = False,
    quiet: QuietOpt = False,
    smoke_timeout: SmokeTimeoutOpt = 60.0,
    device: DeviceOpt = "all",
    strict: StrictOpt = False,
    ignore: IgnoreOpt = None,
    from_: FromOpt = None,
    output_format: FormatOpt = None,
    output: OutputOpt = None,
    no_redact: NoRedactOpt = False,
    require: RequireOpt = None,
    min_gpus: Annotated[int | None, typer.Option("--min-gpus", help="CI: at least N usable GPUs.")] = None,
    min_compute_capability: Annotated[str | None, typer.Option(
        "--min-compute-capability", help="CI: GPUs of at least this compute capability, e.g. 8.0.")] = None,
    min_gpu_memory: Annotated[str | None, typer.Option(
        "--min-gpu-memory", help="CI: GPUs with at least this much memory, e.g. 40GB.")] = None,
    torch_spec: TorchOpt = None,
    cuda: Annotated[str | None, typer.Option("--cuda", help="CI: the torch build's CUDA version, e.g. 12.4 "
                                             "or 12.x.")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="pyproject.toml with [tool.torchdoctor] requirements (without it: ./pyproject.toml, "
        "when it has that table).")] = None,
    no_driver_change: NoDriverChangeOpt = False,
    index_url_base: IndexUrlBaseOpt = None,
    no_cache: NoCacheOpt = False,
    mirror: MirrorOpt = None,
    lang: LangOpt = None,
) -> None:
    """Probe this machine and the target interpreter (or read a report with --from), judge them against
    the compatibility table, print findings and the fix.

    \b
    Examples:
      torchdoctor check
      torchdoctor check --python ~/venv/bin/python -v
      torchdoctor check --no-smoke --require cuda --min-gpus 1 --format github
      torchdoctor check --from collect_env.txt
    """
    from doctor.app.check import run_check
    from doctor.app.options import CheckOptions

    _use_language(lang, _format(json_out, output_format))
    _no_cache_notice(no_cache, quiet)
    raise typer.Exit(run_check(CheckOptions(
        python=python, smoke=not no_smoke, json=json_out, table=table, verbose=verbose, quiet=quiet,
        smoke_timeout=smoke_timeout, device=device, strict=strict, ignore=list(ignore or []),
        inputs=list(from_ or []), format=_value(output_format), output=output, redact=not no_redact,
        require=list(require or []), min_gpus=min_gpus, min_compute_capability=min_compute_capability,
        min_gpu_memory=min_gpu_memory, torch=torch_spec, cuda=cuda, config=config,
        no_driver_change=no_driver_change, index_url_base=index_url_base, mirror=mirror,
    )))


@app.command(short_help="Write a redacted report to attach to a bug ticket.")
def report(
    output: OutputOpt = None,
    output_format: Annotated[ReportFormat | None, typer.Option(
        "--format", help="json (the default) or markdown.", show_default=False)] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    no_redact: NoRedactOpt = False,
    python: PythonOpt = None,
    no_smoke: NoSmokeOpt = False,
    table: TableOpt = None,
    smoke_timeout: SmokeTimeoutOpt = 60.0,
    torch_spec: TorchOpt = None,
    no_driver_change: NoDriverChangeOpt = False,
    index_url_base: IndexUrlBaseOpt = None,
    no_cache: NoCacheOpt = False,
    mirror: MirrorOpt = None,
    lang: LangOpt = None,
) -> None:
    """Write a report to attach to a bug ticket (redacted by default). Exits 0 once it is written,
    whatever it found.

    \b
    Examples:
      torchdoctor report -o report.json
      torchdoctor report --format markdown | xclip -selection clipboard
    """
    from doctor.app.check import run_report
    from doctor.app.options import CheckOptions

    fmt = _format(json_out, output_format, "json")
    _use_language(lang, fmt)
    _no_cache_notice(no_cache, quiet)
    raise typer.Exit(run_report(CheckOptions(
        python=python, smoke=not no_smoke, table=table, smoke_timeout=smoke_timeout, format=fmt,
        output=output, redact=not no_redact, quiet=quiet, torch=torch_spec, no_driver_change=no_driver_change,
        index_url_base=index_url_base, mirror=mirror,
    )))


@app.command(short_help="Carry out the fix plan with pip or uv (--dry-run: only print it).")
def fix(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
    python: PythonOpt = None,
    no_smoke: NoSmokeOpt = False,
    output_format: Annotated[TextOrJson | None, typer.Option(
        "--format", help="text (the default) or json: the report before the fix on stdout, the run on "
            "stderr.",
        show_default=False)] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    table: TableOpt = None,
    verbose: VerboseOpt = False,
    smoke_timeout: SmokeTimeoutOpt = 60.0,
    device: DeviceOpt = "all",
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Carry out the plan without asking (CI).")] = False,
    installer: Annotated[Installer, typer.Option("--installer", help="pip, uv, or auto: uv for environments "
                                                 "uv made, else pip.")] = Installer.auto,
    index_url_base: IndexUrlBaseOpt = None,
    find_links: Annotated[str | None, typer.Option(
        "--find-links", help="A folder or URL listing wheels (flat), passed to the installer as -f.")] = None,
    no_index: Annotated[bool, typer.Option("--no-index", help="Only --find-links: offline "
        "installs.")] = False,
    mirror: MirrorOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Change a PEP 668, conda base or uv/poetry project "
                                        "environment anyway; allow changes outside torch under "
                                        "--yes.")] = False,
    restore_file: Annotated[Path | None, typer.Option(
        "--restore-file", help="Where to record the builds before the fix; never over an existing file "
        "(default: a new file in ~/.local/state/torchdoctor/restore/).")] = None,
    torch_spec: TorchOpt = None,
    no_driver_change: NoDriverChangeOpt = False,
    no_cache: NoCacheOpt = False,
    lang: LangOpt = None,
) -> None:
    """Show the fix plan, ask, carry it out with pip or uv, and check again (--dry-run: only print it).

    \b
    Examples:
      torchdoctor fix --dry-run
      torchdoctor fix --python ~/venv/bin/python
      torchdoctor fix --yes --index-url-base https://mirror.example.org/pytorch/whl
      torchdoctor fix --mirror nju
    """
    from doctor.app.fix import FixOptions, run_fix
    from doctor.app.options import CheckOptions

    _use_language(lang, _format(json_out, output_format))
    _no_cache_notice(no_cache, quiet)
    raise typer.Exit(
        run_fix(
            CheckOptions(
                python=python,
                smoke=not no_smoke,
                json=_format(json_out, output_format) == "json",
                table=table,
                verbose=verbose,
                smoke_timeout=smoke_timeout,
                device=device,
                quiet=quiet,
                torch=torch_spec,
                no_driver_change=no_driver_change,
            ),
            FixOptions(
                dry_run=dry_run,
                yes=yes,
                installer=installer.value,
                index_url_base=index_url_base,
                find_links=find_links,
                no_index=no_index,
                force=force,
                restore_file=restore_file,
                mirror=mirror,
            ),
        )
    )


fleet_app = typer.Typer(help="Summarise the reports of many nodes.\n\n\b\nExample:\n"
                        "  torchdoctor fleet summarize reports/", no_args_is_help=True, add_completion=False,
                        rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]})
app.add_typer(fleet_app, name="fleet")


@fleet_app.command("summarize", short_help="Summarise node reports: counts, odd nodes out, the fix per "
    "group.")
def fleet_summarize(
    reports: Annotated[list[Path], typer.Argument(help="Report files, or folders of *.json reports.")],
    output_format: Annotated[TextJsonMarkdown | None, typer.Option(
        "--format", help="text (the default: tables), json, or markdown (for a ticket or a wiki page).",
        show_default=False)] = None,
    json_out: JsonOpt = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="The same as --format markdown.")] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write to this file.")] = None,
    quiet: QuietOpt = False,
    lang: LangOpt = None,
) -> None:
    """Counts per finding, driver, torch build and GPU model; the odd nodes out; the fix per group.

    \b
    Examples:
      torchdoctor fleet summarize reports/
      torchdoctor fleet summarize reports/ --format markdown -o fleet.md
    """
    from doctor.app.fleet import summarize_command

    if markdown:
        if json_out or (output_format is not None and output_format.value != "markdown"):
            other = "--json" if json_out else f"--format {output_format.value}"
            from doctor.app.language import Msg

            raise DoctorError(Msg("{other} and --markdown contradict each other: pick one", other=other))
        output_format = TextJsonMarkdown.markdown
    fmt = _format(json_out, output_format)
    _use_language(lang, fmt)
    raise typer.Exit(summarize_command([str(r) for r in reports], fmt == "json", fmt == "markdown",
                                       str(output) if output else None, quiet=quiet))


@app.command(short_help="Check torch.distributed across N ranks with torchrun.")
def distributed(
    nproc_per_node: Annotated[int, typer.Option("--nproc-per-node", help="Ranks to start on this node.")] = 2,
    python: PythonOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Time limit of each collective, "
        "seconds.")] = 60.0,
    output_format: Annotated[TextOrJson | None, typer.Option(
        "--format", help="text (the default) or json.", show_default=False)] = None,
    json_out: JsonOpt = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the report to this "
        "file.")] = None,
    quiet: QuietOpt = False,
    lang: LangOpt = None,
) -> None:
    """Run torchrun with N ranks in the target interpreter and check torch.distributed across them.
    For multi-node jobs run `torchrun ... -m doctor.distributed` or `srun python -m doctor.distributed`.

    \b
    Examples:
      torchdoctor distributed --nproc-per-node 8
      torchdoctor distributed --python ~/venv/bin/python --format json -o dist.json
    """
    from doctor.app.distributed import run_distributed

    _use_language(lang, _format(json_out, output_format))
    raise typer.Exit(
        run_distributed(
            python, nproc_per_node, timeout, _format(json_out, output_format) == "json", output, quiet=quiet
        )
    )


@app.command(short_help="Explain an error message and check its cause on this machine.")
def explain(
    message: Annotated[list[str] | None, typer.Argument(
        help="A file holding the error (a log, a traceback, a pasted issue), - for stdin, or the message "
            "itself. "
        "Without it, a piped stdin is read.", show_default=False)] = None,
    no_probe: Annotated[bool, typer.Option("--no-probe", help="Do not probe this machine: the answer rests "
        "on "
                                           "the text alone.")] = False,
    smoke: Annotated[bool, typer.Option("--smoke", help="Also run the smoke test (imports torch) while "
        "probing.")]
    = False,
    python: PythonOpt = None,
    json_out: JsonOpt = False,
    output_format: Annotated[TextJsonMarkdown | None, typer.Option(
        "--format", help="text (the default), json or markdown.", show_default=False)] = None,
    output: OutputOpt = None,
    quiet: QuietOpt = False,
    no_redact: NoRedactOpt = False,
    table: TableOpt = None,
    verbose: VerboseOpt = False,
    lang: LangOpt = None,
) -> None:
    """Explain an error message: find every known one in the text (a traceback, a pip or CI log, a pasted
    issue), give its cause and fix, and confirm or rule it out on this machine.

    \b
    Examples:
      python train.py 2>&1 | torchdoctor explain -
      torchdoctor explain "CUDA error: no kernel image is available for execution on the device"
      torchdoctor explain build.log --no-probe --format markdown
    """
    from doctor.app.explain import ExplainOptions, run_explain

    _use_language(lang, _format(json_out, output_format))
    raise typer.Exit(run_explain(ExplainOptions(
        inputs=list(message or []), probe=not no_probe, smoke=smoke, python=python, table=table,
        format=_format(json_out, output_format), output=output, redact=not no_redact, verbose=verbose,
        quiet=quiet,
    )))


@app.command("rules", short_help="List every rule and the finding ids it can report.")
def list_rules(
    output_format: Annotated[TextOrJson | None, typer.Option(
        "--format", help="text (the default) or json.", show_default=False)] = None,
    json_out: JsonOpt = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the list to this "
        "file.")] = None,
    lang: LangOpt = None,
) -> None:
    """List every rule and the finding ids it can report (what --ignore accepts).

    \b
    Examples:
      torchdoctor rules
      torchdoctor rules --json
    """
    from doctor.app.listing import run_rules_listing

    _use_language(lang, _format(json_out, output_format))
    raise typer.Exit(run_rules_listing(_format(json_out, output_format), output))


def run(args: list[str]) -> int:
    """The command line read by typer. typer's own exceptions end here; the others are the caller's
    (doctor/cli/__init__.py)."""
    try:
        # Without standalone mode, click returns a command's typer.Exit code instead of raising it.
        result = app(args=args, prog_name="torchdoctor", standalone_mode=False)
        if result == exitcodes.INTERRUPTED:  # typer turns Ctrl-C into Exit(130)
            print("torchdoctor: interrupted", file=sys.stderr)
        return result if isinstance(result, int) else exitcodes.OK
    except typer.Exit as exc:  # includes click.exceptions.Exit
        return exc.exit_code
    except typer.Abort:
        print("torchdoctor: interrupted", file=sys.stderr)
        return exitcodes.INTERRUPTED
    except typer.TyperException as exc:  # usage errors (typer's bundled click exceptions)
        show = getattr(exc, "show", None)
        lines = _usage_error_lines(args, exc)
        if lines:
            print("\n".join(lines), file=sys.stderr)
        elif show:
            show()
        else:
            print(f"torchdoctor: error: {exc}", file=sys.stderr)
        code = getattr(exc, "exit_code", exitcodes.USAGE)
        return code if code in (exitcodes.OK, exitcodes.USAGE) else exitcodes.USAGE


def _usage_error_lines(args: list[str], exc: BaseException) -> list[str] | None:
    """click's usage error in the run's language (doctor/app/language.py), or None to let click print it."""
    ctx = getattr(exc, "ctx", None)
    format_message = getattr(exc, "format_message", None)
    if ctx is None or format_message is None:
        return None
    from doctor.app.language import usage_error_lines

    usage = ctx.get_usage().removeprefix("Usage: ").strip()
    return usage_error_lines(args, usage, ctx.command_path, format_message())
