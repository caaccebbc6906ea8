"""The command line. Heavy modules (rich, pynvml, the probes) are imported inside the commands,
so that `torchdoctor --help` stays fast. `main(argv) -> int` is the one entry point; every
expected error becomes one line on stderr and a documented exit code (doctor/exitcodes.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from doctor import __version__, exitcodes
from doctor.errors import DoctorError

app = typer.Typer(
    name="torchdoctor",
    help="Find out why PyTorch does not fit this machine (driver, CUDA build, GPU architecture, "
    "companions, Python) and print the exact command that fixes it.",
    epilog=exitcodes.HELP.replace("\n", "\n\n"),
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,  # locals can hold secrets; errors are handled in main()
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

PythonOpt = Annotated[str | None, typer.Option("--python", help="Interpreter (or venv/conda folder) to inspect. "
                                               "Default: VIRTUAL_ENV, CONDA_PREFIX, ./.venv, python3 on PATH.")]
NoSmokeOpt = Annotated[bool, typer.Option("--no-smoke", help="Do not import torch (no import probe, no smoke test).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print only the JSON report on stdout.")]
TableOpt = Annotated[Path | None, typer.Option("--table", help="Use this compatibility table instead of the bundled one.")]
VerboseOpt = Annotated[bool, typer.Option("-v", "--verbose", help="Show details, evidence and passed checks.")]
SmokeTimeoutOpt = Annotated[float, typer.Option("--smoke-timeout", help="Time limit for the smoke test, seconds.")]
DeviceOpt = Annotated[str, typer.Option("--device", help="Smoke-test only this device index (default: all).")]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 1).")]
IgnoreOpt = Annotated[list[str] | None, typer.Option("--ignore", help="Ignore this finding id (repeatable).")]


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


@app.command()
def check(
    python: PythonOpt = None,
    no_smoke: NoSmokeOpt = False,
    json_out: JsonOpt = False,
    table: TableOpt = None,
    verbose: VerboseOpt = False,
    smoke_timeout: SmokeTimeoutOpt = 60.0,
    device: DeviceOpt = "all",
    strict: StrictOpt = False,
    ignore: IgnoreOpt = None,
) -> None:
    """Probe this machine and the target interpreter, judge them against the compatibility table,
    print findings and the fix."""
    from doctor.commands import CheckOptions, run_check

    raise typer.Exit(run_check(CheckOptions(
        python=python, smoke=not no_smoke, json=json_out, table=table, verbose=verbose,
        smoke_timeout=smoke_timeout, device=device, strict=strict, ignore=list(ignore or []),
    )))


@app.command()
def fix(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
    python: PythonOpt = None,
    no_smoke: NoSmokeOpt = False,
    json_out: JsonOpt = False,
    table: TableOpt = None,
    verbose: VerboseOpt = False,
    smoke_timeout: SmokeTimeoutOpt = 60.0,
) -> None:
    """Print the fix plan (--dry-run). Carrying it out is not implemented yet: fix only prints."""
    from doctor.commands import CheckOptions, run_fix

    raise typer.Exit(run_fix(CheckOptions(
        python=python, smoke=not no_smoke, json=json_out, table=table, verbose=verbose,
        smoke_timeout=smoke_timeout,
    ), dry_run=dry_run))


@app.command("rules")
def list_rules() -> None:
    """List every rule and the finding ids it can report."""
    from doctor.rules import all_rules

    for rule in all_rules():
        print(f"{rule.id}: {rule.summary}")
        for finding_id in rule.ids:
            print(f"    {finding_id}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        # Without standalone mode, click returns a command's typer.Exit code instead of raising it.
        result = app(args=args, prog_name="torchdoctor", standalone_mode=False)
        return result if isinstance(result, int) else exitcodes.OK
    except typer.Exit as exc:  # includes click.exceptions.Exit
        return exc.exit_code
    except typer.Abort:
        print("torchdoctor: interrupted", file=sys.stderr)
        return exitcodes.INTERRUPTED
    except typer.TyperException as exc:  # usage errors (typer's bundled click exceptions)
        show = getattr(exc, "show", None)
        if show:
            show()
        else:
            print(f"torchdoctor: error: {exc}", file=sys.stderr)
        code = getattr(exc, "exit_code", exitcodes.USAGE)
        return code if code in (exitcodes.OK, exitcodes.USAGE) else exitcodes.USAGE
    except DoctorError as exc:
        print(f"torchdoctor: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("torchdoctor: interrupted", file=sys.stderr)
        return exitcodes.INTERRUPTED
    except BrokenPipeError:
        return exitcodes.OK
    except Exception as exc:  # noqa: BLE001 - the one place unexpected errors are turned into a report
        _internal_error(exc)
        return exitcodes.INTERNAL


def _internal_error(exc: BaseException) -> None:
    import os
    import platform
    import traceback

    print(f"torchdoctor: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
    tb = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
    print(f"  please report it with: torchdoctor {__version__}, Python {platform.python_version()}, "
          f"{platform.platform()}, at {where}", file=sys.stderr)
    if os.environ.get("TORCHDOCTOR_DEBUG"):
        traceback.print_exception(exc)
    else:
        print("  (set TORCHDOCTOR_DEBUG=1 for the full traceback)", file=sys.stderr)
