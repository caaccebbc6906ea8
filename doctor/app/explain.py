"""`torchdoctor explain`: from the error message a user has to its cause on this machine.

The text (a file, stdin, or the words on the command line) is matched against the signature data
(compat_tables/signatures.json); every known message becomes a candidate cause with the id `check`
uses. Unless --no-probe, the machine is then probed like `check` (for the interpreter the traceback
came from when that one is here) and each candidate is confirmed, ruled out, or left unknown by what
the rules found. Exit 1 when a cause stands (confirmed, unknown, or not checkable by probing), 0 when
nothing was recognised or every candidate was ruled out, 2 for unreadable input.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

from doctor import __version__, exitcodes
from doctor.app.options import CheckOptions
from doctor.errors import DoctorError

EXPLAIN_SCHEMA_VERSION = 1
MAX_KEEP_BYTES = 64 * 1024 * 1024  # keep the last this much; the matcher looks at the last 4 MB anyway
MAX_READ_BYTES = 1024 * 1024 * 1024  # stop reading an endless stream (yes | torchdoctor explain -) here
_CHUNK = 1 << 20

CONFIRMED = "confirmed"  # the check found this very cause on this machine
RULED_OUT = "ruled-out"  # the check looked and this machine does not have it
UNKNOWN = "unknown"  # the check could not tell (a fact is missing)
TEXT_ONLY = "text-only"  # a cause probing cannot see (out of memory, a shape bug): the text is the evidence
NOT_PROBED = "not-probed"  # --no-probe: the answer rests on the text alone

# site-packages in a traceback: POSIX lib/pythonX.Y[t]/site-packages, Windows Lib\site-packages
_SITE_RE = re.compile(r"""(?P<prefix>(?:/|[A-Za-z]:\\)[^\s"'<>|:*?]*?)[/\\](?:lib[/\\]python3\.\d+t?|Lib)[/\\]site-packages""")


@dataclass(slots=True)
class ExplainOptions:
    inputs: list[str] = field(default_factory=list)  # a path, "-", or the words of a message
    probe: bool = True
    smoke: bool = False
    python: str | None = None
    table: Path | None = None
    format: str = "text"  # text, json, markdown
    output: Path | None = None
    redact: bool = True
    verbose: bool = False
    quiet: bool = False  # -q: no progress and no notices on stderr


def read_input(inputs: list[str], stdin=None) -> tuple[bytes, str, bool]:
    """(the bytes to explain, where they came from, whether reading stopped early). One existing path:
    that file; "-" or nothing with a piped stdin: stdin; anything else: the words themselves."""
    stdin = stdin or sys.stdin
    if len(inputs) == 1 and inputs[0] == "-" or not inputs:
        if not inputs and stdin.isatty():
            raise DoctorError("nothing to explain: give a file, - for stdin, or the message itself "
                              "(torchdoctor explain \"no kernel image is available ...\")")
        data, cut = _read_bounded(stdin.buffer if hasattr(stdin, "buffer") else stdin)
        return data, "stdin", cut
    if len(inputs) == 1 and os.path.lexists(inputs[0]):
        data, cut = _read_file(inputs[0])
        return data, inputs[0], cut
    return " ".join(inputs).encode("utf-8", "surrogateescape"), "command line", False


def _read_file(path: str) -> tuple[bytes, bool]:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise DoctorError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DoctorError(f"{path}: not a regular file (for a pipe, use: ... | torchdoctor explain -)")
        return _read_bounded(handle)


def _read_bounded(handle) -> tuple[bytes, bool]:
    """(the last MAX_KEEP_BYTES of at most MAX_READ_BYTES, whether reading stopped early): errors sit at
    the end of logs, and an endless stream must not keep us reading forever."""
    kept: list[bytes] = []
    size = total = 0
    while total < MAX_READ_BYTES:
        chunk = handle.read(_CHUNK)
        if not chunk:
            break
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8", "surrogateescape")
        kept.append(chunk)
        size += len(chunk)
        total += len(chunk)
        while size - len(kept[0]) >= MAX_KEEP_BYTES:
            size -= len(kept.pop(0))
    return b"".join(kept), total >= MAX_READ_BYTES


def signatures_path() -> Path:
    from doctor.table.files import bundled

    return bundled("signatures.json")


def load_bundled_signatures():
    from doctor.compat.signatures import bundled_signatures

    try:
        return bundled_signatures()
    except (OSError, ValueError) as exc:
        raise DoctorError(f"signatures {signatures_path()}: {exc}", exitcodes.USAGE) from None


def traceback_interpreter(text: str) -> str | None:
    """The interpreter a traceback came from, when its site-packages folder is on this machine."""
    from doctor.probes.interpreter import python_in_env

    for match in _SITE_RE.finditer(text[-200_000:]):
        prefix = match.group("prefix")
        found = python_in_env(prefix) if os.path.isdir(prefix) else None
        if found:
            return found
    return None


def verdicts(causes: list[dict], diag) -> None:
    """Confirm or rule out each cause by what the rules found on this machine (in place)."""
    from doctor.rules import all_rules

    rules_of: dict[str, list[str]] = {}  # a finding id can come from several rules (gpu-arch and runtime)
    for rule in all_rules():
        for fid in rule.ids:
            rules_of.setdefault(fid, []).append(rule.id)
    status_of = {c.rule: c.status for c in diag.checks}
    found = {f.id: f for f in diag.findings}
    for cause in causes:
        ids = [cause["id"], *cause.get("related", [])]
        hit = next((found[i] for i in ids if i in found), None)
        if hit is not None:
            cause["verdict"], cause["why"] = CONFIRMED, f"this machine has it: {hit.title}"
            cause["check"] = {"id": hit.id, "detail": hit.detail,
                              "fix": {"summary": hit.fix.summary if hit.fix else "",
                                      "commands": list(hit.fix.commands) if hit.fix else []}}
            continue
        rules = [r for i in ids for r in rules_of.get(i, [])]
        if not rules:
            cause["verdict"], cause["why"] = TEXT_ONLY, "probing cannot see this cause: the message is the evidence"
            continue
        statuses = {status_of.get(r) for r in rules}
        # a check that looked rules the cause out; one that was skipped (did not apply) neither confirms nor
        # rules out, so it does not stand in the way; an unknown one does
        if "passed" in statuses and statuses <= {"passed", "skipped"}:
            cause["verdict"] = RULED_OUT
            cause["why"] = ("the check looked and this machine does not have it: the message came from another "
                            "machine, another interpreter, or a different cause")
        else:
            # skipped (--no-smoke, not WSL) or unknown (a fact was missing): the check's own reason says why
            unknown = [f.title for f in diag.findings if f.rule in rules]
            unknown += [c.note for c in diag.checks if c.rule in rules and c.status != "passed" and c.note]
            cause["verdict"] = UNKNOWN
            cause["why"] = "the check could not tell" + (f": {unknown[0]}" if unknown else "")


def explain(opts: ExplainOptions, stdin=None) -> tuple[dict, int]:
    """The explain report and the exit code."""
    from doctor.inputs.errortext import explain_text

    data, source, cut = read_input(opts.inputs, stdin)
    sigs = load_bundled_signatures()
    result = explain_text(data, sigs)
    causes = [_cause(f) for f in result.findings]
    report = {
        "explain_schema_version": EXPLAIN_SCHEMA_VERSION,
        "tool": {"name": "torchdoctor", "version": __version__},
        "signatures_version": sigs.signatures_version,
        "input": {"source": source, "lines": result.lines, "notes": list(result.notes)
                  + ([f"stopped reading after {MAX_READ_BYTES >> 20} MiB"] if cut else [])},
        "probed": False,
        "causes": causes,
        "check": None,
    }
    if opts.probe and causes:
        from doctor.app.run import diagnose_machine, exit_code_for, make_report

        text = data.decode("utf-8", "replace")
        python = opts.python or traceback_interpreter(text)
        check = CheckOptions(python=python, smoke=opts.smoke, table=opts.table, quiet=opts.quiet,
                             json=opts.format == "json" and opts.output is None, python_named=bool(opts.python))
        table, diag = diagnose_machine(check)
        verdicts(causes, diag)
        report["probed"] = True
        report["interpreter_from_traceback"] = bool(python and not opts.python)
        report["check"] = make_report(table, diag, exit_code_for(diag.findings))
    else:
        for cause in causes:
            cause["verdict"], cause["why"] = NOT_PROBED, "--no-probe: this rests on the text alone"
    standing = [c for c in causes if c["verdict"] != RULED_OUT]
    return report, exitcodes.FINDINGS if standing else exitcodes.OK


def _cause(f) -> dict:
    return {
        "id": f.finding, "title": f.title, "meaning": f.meaning, "fix": f.fix, "related": list(f.related),
        "match": {"line": f.line, "text": f.text, "groups": dict(f.groups), "signature": f.signature,
                  "specificity": f.specificity, "occurrences": f.occurrences},
        "torch_versions": f.torch_versions, "source": f.source,
    }


def run_explain(opts: ExplainOptions) -> int:
    from doctor.app.output import deliver

    report, code = explain(opts)
    shared = opts.output is not None or opts.format == "markdown"
    if opts.redact and shared:
        from doctor.render.redact import redact_report

        report = redact_report(report)
    elif shared:  # --no-redact: the output says so (JSON: "redacted": false)
        report = {**report, "redacted": False}
    if opts.format == "json":
        from doctor.render.json import render_json

        text = render_json(report)
    elif opts.format == "markdown":
        from doctor.render.explain import render_explain_markdown

        text = render_explain_markdown(report)
    else:
        from doctor.render.explain import render_explain

        if opts.output is None:
            render_explain(report, verbose=opts.verbose)
            return code
        import io

        buf = io.StringIO()
        render_explain(report, verbose=opts.verbose, file=buf, width=100)
        text = buf.getvalue()
    if report.get("redacted") is False and opts.format != "json":
        from doctor.app.output import NOT_REDACTED

        text = (f"> **{NOT_REDACTED}**\n\n" if opts.format == "markdown" else NOT_REDACTED + "\n") + text
    deliver(text, CheckOptions(output=opts.output, quiet=opts.quiet))
    return code
