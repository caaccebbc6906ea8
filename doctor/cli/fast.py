"""The fast path: a `check`, `report` or `fleet summarize` command line read without typer and click.

Importing typer (and the click it bundles) and building a command costs ~25 ms, a fifth of a static
`check`. The command lines people and CI type are plain: the command, then options from the table below
(and for `fleet summarize`, the report paths: any word that does not start with "-").
Those are read here, with click's own rules for them (``--opt value``, ``--opt=value``, the last of a
repeated option, ``multiple`` options collected in order), into the very keyword arguments the typer
command passes to actions.py. Anything else returns None and typer reads the line: help, other commands,
an unknown word, a value that is not one of an option's choices or does not convert, a value that starts
with "-", combined short flags, "--", shell completion. So usage errors and help always come from typer,
and a line is never read two ways. tests/test_cli_fast.py holds this table to the typer commands (names,
kinds, defaults) and compares what the two read for many command lines.
"""

from __future__ import annotations

import os
from collections.abc import Callable

FLAG, TEXT, PATH, FLOAT, INT = "flag", "text", "path", "float", "int"


# option word -> (parameter, kind, multiple); a tuple kind lists the choices (click's Choice, case-sensitive)
_SHARED = {
    "--python": ("python", TEXT, False),
    "--no-smoke": ("no_smoke", FLAG, False),
    "--json": ("json_out", FLAG, False),
    "-q": ("quiet", FLAG, False),
    "--quiet": ("quiet", FLAG, False),
    "--table": ("table", PATH, False),
    "--smoke-timeout": ("smoke_timeout", FLOAT, False),
    "-o": ("output", PATH, False),
    "--output": ("output", PATH, False),
    "--no-redact": ("no_redact", FLAG, False),
    "--torch": ("torch_spec", TEXT, False),
    "--no-driver-change": ("no_driver_change", FLAG, False),
    "--index-url-base": ("index_url_base", TEXT, False),
    "--no-cache": ("no_cache", FLAG, False),
    "--mirror": ("mirror", TEXT, False),
    "--lang": ("lang", TEXT, False),
}
CHECK = {
    **_SHARED,
    "-v": ("verbose", FLAG, False),
    "--verbose": ("verbose", FLAG, False),
    "--device": ("device", TEXT, False),
    "--strict": ("strict", FLAG, False),
    "--ignore": ("ignore", TEXT, True),
    "--from": ("from_", PATH, True),
    "--format": ("output_format", ("text", "json", "markdown", "github", "junit"), False),
    "--require": ("require", TEXT, True),
    "--min-gpus": ("min_gpus", INT, False),
    "--min-compute-capability": ("min_compute_capability", TEXT, False),
    "--min-gpu-memory": ("min_gpu_memory", TEXT, False),
    "--cuda": ("cuda", TEXT, False),
    "--config": ("config", PATH, False),
}
REPORT = {**_SHARED, "--format": ("output_format", ("json", "markdown"), False)}
FLEET_SUMMARIZE = {
    "--format": ("output_format", ("text", "json", "markdown"), False),
    "--json": ("json_out", FLAG, False),
    "--markdown": ("markdown", FLAG, False),
    "-o": ("output", PATH, False),
    "--output": ("output", PATH, False),
    "-q": ("quiet", FLAG, False),
    "--quiet": ("quiet", FLAG, False),
    "--lang": ("lang", TEXT, False),
}
# action (doctor/cli/actions.py) -> its option table; the words that name it; its positional parameter, if any
# (a list of paths, one at least)
OPTIONS = {"check": CHECK, "report": REPORT, "fleet_summarize": FLEET_SUMMARIZE}
WORDS = {"check": ("check",), "report": ("report",), "fleet_summarize": ("fleet", "summarize")}
POSITIONAL = {"fleet_summarize": "reports"}
# Environment variables an option reads when it is not given (click's envvar): typer resolves those.
ENVVARS = ("TORCHDOCTOR_INDEX_URL_BASE",)


def fast_command(args: list[str], environ=None) -> Callable[[], int] | None:
    """The command to run for ``args``, or None when typer must read them (module docstring)."""
    parsed = parse(args, environ)
    if parsed is None:
        return None
    name, params = parsed
    from doctor.cli import actions

    run = getattr(actions, name)
    return lambda: run(**params)


def parse(args: list[str], environ=None) -> tuple[str, dict] | None:
    """(action, keyword arguments) for a plain `check` / `report` / `fleet summarize` line, else None."""
    environ = os.environ if environ is None else environ
    command = next((name for name, named in WORDS.items() if tuple(args[: len(named)]) == named), None)
    if command is None or environ.get("_TORCHDOCTOR_COMPLETE"):
        return None
    if any(environ.get(name) is not None for name in ENVVARS):
        return None
    table = OPTIONS[command]
    positional = POSITIONAL.get(command)
    params: dict[str, object] = {}
    seen: set[str] = set()
    words = args[len(WORDS[command]) :]
    i = 0
    while i < len(words):
        word = words[i]
        if positional and word and not word.startswith("-"):
            params.setdefault(positional, []).append(_path(word))  # type: ignore[union-attr]
            i += 1
            continue
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        spec = table.get(name)
        if spec is None:
            return None
        param, kind, multiple = spec
        if kind == FLAG:
            if eq:
                return None  # click: a flag takes no value
            params[param] = True
            i += 1
            continue
        if eq:
            raw = inline
        elif i + 1 < len(words):
            raw = words[i + 1]
            i += 1
        else:
            return None  # an option missing its value: typer's usage error
        i += 1
        if raw == "" or raw.startswith("-"):
            return None  # click would take it as the value, or refuse it: typer decides
        value = _convert(raw, kind)
        if value is None:
            return None
        if multiple:
            params.setdefault(param, []).append(value)  # type: ignore[union-attr]
        elif param in seen:
            return None  # a repeated single option (click keeps the last): rare, left to typer
        else:
            params[param] = value
        seen.add(param)
    if positional and positional not in params:
        return None  # typer's usage error: the argument is required
    return command, params


def _path(raw: str):
    """A Path, as typer gives it; pathlib (~4.5 ms with urllib.parse) is imported only for a command line that
    names a file."""
    from pathlib import Path

    return Path(raw)


def _convert(raw: str, kind) -> object | None:
    if kind == TEXT:
        return raw
    if kind == PATH:
        return _path(raw)
    if isinstance(kind, tuple):
        return raw if raw in kind else None
    # click's FLOAT and INT call float() and int() on the text; anything they refuse is typer's usage error
    try:
        return float(raw) if kind == FLOAT else int(raw)
    except ValueError:
        return None
