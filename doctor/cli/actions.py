"""What `check`, `report` and `fleet summarize` do with their parameters, typer-free: the typer commands
(commands.py) and the fast path (fast.py) both call these, so the two ways of reading a command line run the
same code.

The parameters are the typer commands' own, with the same names and defaults (tests/test_cli_fast.py holds
the two in step); ``output_format`` is the --format value as a string.
"""

from __future__ import annotations

from doctor.errors import DoctorError

TYPE_CHECKING = False
if TYPE_CHECKING:  # in annotations only: pathlib (with urllib.parse and ipaddress) costs ~4.5 ms of every start
    from pathlib import Path


def use_language(lang: str | None, fmt: str | None = None) -> None:
    """This command's language, chosen before anything is said (doctor/app/language.py)."""
    from doctor.app.language import use_language as use

    use(lang, fmt)


def chosen_format(json_out: bool, chosen: str | None, default: str = "text") -> str:
    """--format, or --json (its alias); both at once must agree."""
    if json_out and chosen is not None and chosen != "json":
        from doctor.app.language import Msg

        raise DoctorError(Msg("--json and --format {format} contradict each other: pick one", format=chosen))
    return "json" if json_out else (chosen if chosen is not None else default)


def check(
    python: str | None = None,
    no_smoke: bool = False,
    json_out: bool = False,
    table: Path | None = None,
    verbose: bool = False,
    quiet: bool = False,
    smoke_timeout: float = 60.0,
    device: str = "all",
    strict: bool = False,
    ignore: list[str] | None = None,
    from_: list[Path] | None = None,
    output_format: str | None = None,
    output: Path | None = None,
    no_redact: bool = False,
    require: list[str] | None = None,
    min_gpus: int | None = None,
    min_compute_capability: str | None = None,
    min_gpu_memory: str | None = None,
    torch_spec: str | None = None,
    cuda: str | None = None,
    config: Path | None = None,
    no_driver_change: bool = False,
    index_url_base: str | None = None,
    no_cache: bool = False,
    mirror: str | None = None,
    lang: str | None = None,
) -> int:
    from doctor.app.check import run_check
    from doctor.app.options import CheckOptions

    use_language(lang, chosen_format(json_out, output_format))
    return run_check(CheckOptions(
        python=python, smoke=not no_smoke, json=json_out, table=table, verbose=verbose,
        smoke_timeout=smoke_timeout, device=device, strict=strict, ignore=list(ignore or []),
        inputs=list(from_ or []), format=output_format, output=output,
        redact=not no_redact, require=list(require or []), min_gpus=min_gpus,
        min_compute_capability=min_compute_capability, min_gpu_memory=min_gpu_memory, torch=torch_spec,
        cuda=cuda, config=config, quiet=quiet, no_driver_change=no_driver_change, index_url_base=index_url_base,
        cache=not no_cache,
        mirror=mirror,
    ))


def report(
    output: Path | None = None,
    output_format: str | None = None,
    json_out: bool = False,
    quiet: bool = False,
    no_redact: bool = False,
    python: str | None = None,
    no_smoke: bool = False,
    table: Path | None = None,
    smoke_timeout: float = 60.0,
    torch_spec: str | None = None,
    no_driver_change: bool = False,
    index_url_base: str | None = None,
    no_cache: bool = False,
    mirror: str | None = None,
    lang: str | None = None,
) -> int:
    from doctor.app.check import run_report
    from doctor.app.options import CheckOptions

    fmt = chosen_format(json_out, output_format, "json")
    use_language(lang, fmt)
    return run_report(CheckOptions(
        python=python, smoke=not no_smoke, table=table, smoke_timeout=smoke_timeout,
        format=fmt, output=output, redact=not no_redact, quiet=quiet,
        torch=torch_spec, no_driver_change=no_driver_change, index_url_base=index_url_base, cache=not no_cache,
        mirror=mirror,
    ))


def fleet_summarize(
    reports: list[Path],
    output_format: str | None = None,
    json_out: bool = False,
    markdown: bool = False,
    output: Path | None = None,
    quiet: bool = False,
    lang: str | None = None,
) -> int:
    from doctor.app.fleet import summarize_command

    if markdown:
        if json_out or (output_format is not None and output_format != "markdown"):
            other = "--json" if json_out else f"--format {output_format}"
            from doctor.app.language import Msg

            raise DoctorError(Msg("{other} and --markdown contradict each other: pick one", other=other))
        output_format = "markdown"
    fmt = chosen_format(json_out, output_format)
    use_language(lang, fmt)
    return summarize_command([str(r) for r in reports], fmt == "json", fmt == "markdown",
                             str(output) if output else None, quiet=quiet)
