"""The command line as typer reads it: every command, its options and help. Heavy modules (rich, pynvml,
the probes) are imported inside the commands, so that `torchdoctor --help` stays fast. The entry point,
``doctor.cli.main``, comes here for whatever the fast path (fast.py) does not read itself.
"""

from __future__ import annotations

import contextlib
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from doctor import __version__, exitcodes
from doctor.cli import actions

app = typer.Typer(
    name="torchdoctor",
    help="Find out why PyTorch does not fit this machine (driver, CUDA build, GPU architecture, "
    "companions, Python) and print the exact command that fixes it.\n\n\b\nExamples:\n  torchdoctor check\n"
    "  torchdoctor check --python ~/venv/bin/python -v\n  torchdoctor fix --dry-run\n"
    "  torchdoctor explain \"no kernel image is available for execution on the device\"",
    epilog="\b\n" + exitcodes.HELP,  # \b: click keeps the lines as they are
    # --install-completion / --show-completion: typer imports its completion modules whether or not they
    # are offered, so offering them costs nothing measurable (README, "Performance").
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,  # locals can hold secrets; errors are handled in main()
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

PythonOpt = Annotated[str | None, typer.Option("--python", help="Interpreter (or venv/conda folder) to inspect. "
                                               "Default: VIRTUAL_ENV, CONDA_PREFIX, ./.venv, python3 on PATH.")]
NoSmokeOpt = Annotated[bool, typer.Option("--no-smoke", help="Do not import torch (no import probe, no smoke test).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="The same as --format json: only JSON on stdout.")]
QuietOpt = Annotated[bool, typer.Option("-q", "--quiet", help="No progress and no notices on stderr; with text "
                                        "output, only what needs doing (nothing when healthy).")]
TableOpt = Annotated[Path | None, typer.Option("--table", help="Use this compatibility table instead of the bundled one.")]
VerboseOpt = Annotated[bool, typer.Option("-v", "--verbose", help="Show details, evidence and every check's state.")]
SmokeTimeoutOpt = Annotated[float, typer.Option("--smoke-timeout", help="Time limit for the smoke test, seconds.")]
DeviceOpt = Annotated[str, typer.Option("--device", help="Smoke-test only this device index, or all; a device "
                                       "this machine does not have is a usage error.")]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 1).")]
IgnoreOpt = Annotated[list[str] | None, typer.Option("--ignore", help="Ignore this finding id (repeatable; "
                                                     "`torchdoctor rules` lists them).")]
OutputOpt = Annotated[Path | None, typer.Option("-o", "--output", help="Write the output to this file "
                                                "(redacted unless --no-redact).")]
NoRedactOpt = Annotated[bool, typer.Option("--no-redact", help="Keep user/host names, home paths, GPU UUIDs, "
                                           "IPs and every environment variable in shared output.")]
TorchOpt = Annotated[str | None, typer.Option(
    "--torch", help='The torch to end with, a PEP 440 specifier ("==2.3.1", ">=2.5,<2.8"): the plan installs the '
    "variant of it that fits this machine (default: the project's pins, else the installed version). check: the "
    "installed torch must match it too (exit 4).")]
NoDriverChangeOpt = Annotated[bool, typer.Option(
    "--no-driver-change", help="The driver stays as it is: the plan's first way is a torch that runs on it "
    "(automatic in a container or a cluster job).")]
NoCacheOpt = Annotated[bool, typer.Option(
    "--no-cache", help="Ask the target interpreter afresh and read its GPU libraries again instead of reusing "
    "their last answers from the cache (~/.cache/torchdoctor; also TORCHDOCTOR_NO_CACHE=1).")]
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
    actions.use_language(lang, fmt)


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


class ReportFormat(str, Enum):
    json = "json"
    markdown = "markdown"


class TextOrJson(str, Enum):
    text = "text"
    json = "json"


class FleetFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class ExplainFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


def _format(json_out: bool, chosen: Enum | None, default: str = "text") -> str:
    """--format, or --json (its alias); both at once must agree."""
    return actions.chosen_format(json_out, chosen.value if chosen is not None else None, default)


FromOpt = Annotated[list[Path] | None, typer.Option(
    "--from", help="Re-diagnose a torchdoctor JSON report, a pasted Markdown report or the output of "
    "`python -m torch.utils.collect_env` (a file, or a folder of them; repeatable) instead of probing.")]
FormatOpt = Annotated[Format | None, typer.Option("--format", help="text (the default), json, markdown (to paste "
                                                  "into an issue), github (Actions annotations), junit.",
                                                  show_default=False)]
RequireOpt = Annotated[list[str] | None, typer.Option("--require", help="CI: fail (exit 4) unless this is "
                                                      "usable: cuda, rocm, mps, gpu or cpu (repeatable).")]


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
    raise typer.Exit(actions.check(
        python=python, no_smoke=no_smoke, json_out=json_out, table=table, verbose=verbose, quiet=quiet,
        smoke_timeout=smoke_timeout, device=device, strict=strict, ignore=ignore, from_=from_,
        output_format=output_format.value if output_format else None, output=output, no_redact=no_redact,
        require=require, min_gpus=min_gpus, min_compute_capability=min_compute_capability,
        min_gpu_memory=min_gpu_memory, torch_spec=torch_spec, cuda=cuda, config=config,
        no_driver_change=no_driver_change, index_url_base=index_url_base, no_cache=no_cache, mirror=mirror, lang=lang,
    ))


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
    raise typer.Exit(actions.report(
        output=output, output_format=output_format.value if output_format else None, json_out=json_out,
        quiet=quiet, no_redact=no_redact, python=python, no_smoke=no_smoke, table=table,
        smoke_timeout=smoke_timeout, torch_spec=torch_spec, no_driver_change=no_driver_change,
        index_url_base=index_url_base, no_cache=no_cache, mirror=mirror, lang=lang,
    ))


@app.command(short_help="Carry out the fix plan with pip or uv (--dry-run: only print it).")
def fix(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
    python: PythonOpt = None,
    no_smoke: NoSmokeOpt = False,
    output_format: Annotated[TextOrJson | None, typer.Option(
        "--format", help="text (the default) or json: the report before the fix on stdout, the run on stderr.",
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
    no_index: Annotated[bool, typer.Option("--no-index", help="Only --find-links: offline installs.")] = False,
    mirror: MirrorOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Change a PEP 668, conda base or uv/poetry project "
                                        "environment anyway; allow changes outside torch under --yes.")] = False,
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
    raise typer.Exit(run_fix(CheckOptions(
        python=python, smoke=not no_smoke, json=_format(json_out, output_format) == "json", table=table,
        verbose=verbose, smoke_timeout=smoke_timeout, device=device, quiet=quiet, torch=torch_spec,
        no_driver_change=no_driver_change, cache=not no_cache,
    ), FixOptions(
        dry_run=dry_run, yes=yes, installer=installer.value, index_url_base=index_url_base, find_links=find_links,
        no_index=no_index, force=force, restore_file=restore_file, mirror=mirror,
    )))


fleet_app = typer.Typer(help="Summarise the reports of many nodes.\n\n\b\nExample:\n"
                        "  torchdoctor fleet summarize reports/", no_args_is_help=True, add_completion=False,
                        rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]})
app.add_typer(fleet_app, name="fleet")


@fleet_app.command("summarize", short_help="Summarise node reports: counts, odd nodes out, the fix per group.")
def fleet_summarize(
    reports: Annotated[list[Path], typer.Argument(help="Report files, or folders of *.json reports.")],
    output_format: Annotated[FleetFormat | None, typer.Option(
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
    raise typer.Exit(actions.fleet_summarize(
        reports=reports, output_format=output_format.value if output_format else None, json_out=json_out,
        markdown=markdown, output=output, quiet=quiet, lang=lang,
    ))


@app.command(short_help="Check torch.distributed across N ranks with torchrun.")
def distributed(
    nproc_per_node: Annotated[int, typer.Option("--nproc-per-node", help="Ranks to start on this node.")] = 2,
    python: PythonOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Time limit of each collective, seconds.")] = 60.0,
    output_format: Annotated[TextOrJson | None, typer.Option(
        "--format", help="text (the default) or json.", show_default=False)] = None,
    json_out: JsonOpt = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the report to this file.")] = None,
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
    raise typer.Exit(run_distributed(python, nproc_per_node, timeout, _format(json_out, output_format) == "json",
                                     output, quiet=quiet))


@app.command(short_help="Explain an error message and check its cause on this machine.")
def explain(
    message: Annotated[list[str] | None, typer.Argument(
        help="A file holding the error (a log, a traceback, a pasted issue), - for stdin, or the message itself. "
        "Without it, a piped stdin is read.", show_default=False)] = None,
    no_probe: Annotated[bool, typer.Option("--no-probe", help="Do not probe this machine: the answer rests on "
                                           "the text alone.")] = False,
    smoke: Annotated[bool, typer.Option("--smoke", help="Also run the smoke test (imports torch) while probing.")]
    = False,
    python: PythonOpt = None,
    json_out: JsonOpt = False,
    output_format: Annotated[ExplainFormat | None, typer.Option("--format", help="text (the default), json or "
                                                                "markdown.", show_default=False)] = None,
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
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the list to this file.")] = None,
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


@contextlib.contextmanager
def _only_the_command(args: list[str]):
    """typer turns every command's signature into click parameters before it parses anything (~10 ms for the
    twenty of them). When the first word names a command, only that one is built; when no word names one (the
    top-level help, --version), the commands are built from their names and help alone. What is printed is the
    same: a command's usage line names only itself, and the top-level help lists every command."""
    def name_of(c) -> str:
        return c.name or c.callback.__name__.lower().replace("_", "-")

    if os.environ.get("_TORCHDOCTOR_COMPLETE"):  # shell completion: click resolves the words itself
        yield
        return
    first = args[0] if args else ""
    commands = [c for c in app.registered_commands if name_of(c) == first]
    groups = [g for g in app.registered_groups if g.name == first]
    saved = app.registered_commands, app.registered_groups
    if commands or groups:
        app.registered_commands, app.registered_groups = commands, groups
    elif not {name_of(c) for c in app.registered_commands} & set(args):
        import copy
        import inspect

        def outline(c):
            stub = copy.copy(c)
            stub.name, stub.callback = name_of(c), _never_run
            stub.help = c.help if c.help is not None else inspect.getdoc(c.callback)
            return stub

        app.registered_commands = [outline(c) for c in app.registered_commands]
    try:
        yield
    finally:
        app.registered_commands, app.registered_groups = saved


def _never_run() -> None:
    """Stands in for a command in the top-level help, where no command runs."""
    raise RuntimeError("a command outline was invoked")


def run(args: list[str]) -> int:
    """The command line read by typer: what the fast path (doctor/cli/fast.py) leaves to it. typer's own
    exceptions end here; the others are the caller's (doctor/cli/__init__.py)."""
    try:
        # Without standalone mode, click returns a command's typer.Exit code instead of raising it.
        with _only_the_command(args):
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
