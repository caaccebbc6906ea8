"""`torchdoctor explain`: from the error message a user has to its cause on this machine.

The text (a file, stdin, or the words on the command line) is streamed through the matcher
(doctor/inputs/errortext.py) in blocks, at any size, and matched against the signature data
(compat_tables/signatures.json); every known message becomes a candidate cause with the id `check`
uses. When the whole input is a collect_env paste or a torchdoctor JSON report, the machine it describes
is diagnosed as `check --from` does and the causes are judged there. Otherwise, unless --no-probe, this
machine is probed like `check` (for the interpreter the traceback came from when that one is here) and
each candidate is confirmed, ruled out, or left unknown by what the rules found and by the machine's
facts (doctor/app/explain_facts.py). Exit 1 when a cause stands (confirmed, unknown, or not checkable by
probing) or the pasted machine has an error finding, 0 when nothing was recognised or every candidate
was ruled out, 2 for unreadable input.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from doctor import __version__, exitcodes
from doctor.app.options import CheckOptions
from doctor.errors import DoctorError

EXPLAIN_SCHEMA_VERSION = 1
READ_BYTES = 1 << 20  # the input is read and searched in blocks of this size, never held whole
PASTE_BYTES = 4 << 20  # an input up to this size is also tried as a collect_env paste or a JSON report
TAIL_BYTES = 256 << 10  # the end of the input, kept to find the interpreter a traceback came from

CONFIRMED = "confirmed"  # the check found this very cause on this machine
RULED_OUT = "ruled-out"  # the check looked and this machine does not have it
UNKNOWN = "unknown"  # the check could not tell (a fact is missing)
TEXT_ONLY = "text-only"  # a cause probing cannot see (out of memory, a shape bug): the text is the evidence
NOT_PROBED = "not-probed"  # --no-probe: the answer rests on the text alone

# site-packages in a traceback: POSIX lib/pythonX.Y[t]/site-packages, Windows Lib\site-packages
_SITE_RE = re.compile(
    r"""(?P<prefix>(?:/|[A-Za-z]:\\)[^\s"'<>|:*?]*?)[/\\](?:lib[/\\]python3\.\d+t?|Lib)[/\\]site-packages"""
)


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


def open_input(inputs: list[str], stdin=None) -> tuple[Iterator[bytes], str]:
    """(the blocks of bytes to explain, where they come from). One existing path: that file; "-" or
    nothing with a piped stdin: stdin; anything else: the words themselves. Nothing is read yet."""
    stdin = stdin or sys.stdin
    if len(inputs) == 1 and inputs[0] == "-" or not inputs:
        if not inputs and stdin.isatty():
            raise DoctorError("nothing to explain: give a file, - for stdin, or the message itself "
                              "(torchdoctor explain \"no kernel image is available ...\")")
        return _blocks(stdin.buffer if hasattr(stdin, "buffer") else stdin, "stdin"), "stdin"
    if len(inputs) == 1 and os.path.lexists(inputs[0]):
        return _file_blocks(inputs[0]), inputs[0]
    return iter([" ".join(inputs).encode("utf-8", "surrogateescape")]), "command line"


def _file_blocks(path: str) -> Iterator[bytes]:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise DoctorError(f"{path}: cannot read: {exc.strerror or exc}") from None
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        handle.close()
        raise DoctorError(f"{path}: not a regular file (for a pipe, use: ... | torchdoctor explain -)")
    return _blocks(handle, path, close=True)


def _blocks(handle, name: str, close: bool = False) -> Iterator[bytes]:
    """The handle's bytes, READ_BYTES at a time, to its end (any size: the matcher keeps no text)."""
    try:
        while True:
            try:
                block = handle.read(READ_BYTES)
            except OSError as exc:
                raise DoctorError(f"{name}: cannot read: {exc.strerror or exc}") from None
            if not block:
                return
            yield block.encode("utf-8", "surrogateescape") if isinstance(block, str) else block
    finally:
        if close:
            handle.close()


class _Kept:
    """Passes the blocks on and keeps two bounded pieces of them: the whole input while it is no bigger
    than PASTE_BYTES (a collect_env paste or a report is read as one), and its last TAIL_BYTES."""

    def __init__(self, blocks: Iterator[bytes]) -> None:
        self.blocks = blocks
        self.head: bytearray | None = bytearray()
        self.tail = b""

    def __iter__(self) -> Iterator[bytes]:
        for block in self.blocks:
            if self.head is not None:
                self.head += block
                if len(self.head) > PASTE_BYTES:
                    self.head = None
            self.tail = (self.tail + block)[-TAIL_BYTES:]
            yield block

    def whole(self) -> bytes | None:
        return bytes(self.head) if self.head is not None else None


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
    from doctor.probes.target_python import python_in_env

    for match in _SITE_RE.finditer(text[-200_000:]):
        prefix = match.group("prefix")
        found = python_in_env(prefix) if os.path.isdir(prefix) else None
        if found:
            return found
    return None


def pasted_machine(data: bytes | None, source: str):
    """(kind, snapshot) when the whole input is a collect_env paste or a torchdoctor JSON report, else None:
    then `check --from` has a machine to diagnose, and that machine is the one the message came from."""
    if data is None or not _may_be_pasted_machine(data):
        return None
    from doctor.errors import ReportError
    from doctor.inputs.reports import COLLECT_ENV, REPORT, decode_input, detect_input_kind, read_report

    try:
        text = decode_input(data, source)
    except ReportError:
        return None
    kind = detect_input_kind(text)
    if kind not in (COLLECT_ENV, REPORT):
        return None
    try:
        snapshot, _meta = read_report(text, source)
    except ReportError:
        return None  # a log that merely starts with "{": explained from its text alone
    return kind, snapshot


# words only collect_env output or a torchdoctor report has: without one of them the parsers are not loaded
_PASTE_WORDS = (b"PyTorch version", b"Is debug build", b"CUDA used to build PyTorch",
                b"ROCM used to build PyTorch", b"Is CUDA available", b"report_schema_version")


def _may_be_pasted_machine(data: bytes) -> bool:
    return (data.lstrip()[:1] == b"{" or data.startswith((b"\xff\xfe", b"\xfe\xff"))
            or any(word in data for word in _PASTE_WORDS))


# what a check's own note says when it did not run; explain runs without the smoke test unless --smoke
_NO_SMOKE = "--no-smoke"


def _note(note: str) -> str:
    if _NO_SMOKE in note:
        return note.replace(_NO_SMOKE, "the smoke test did not run (explain --smoke runs it)")
    return note


def verdicts(causes: list[dict], diag, where: str = "this machine") -> None:
    """Confirm or rule out each cause by the machine's facts (doctor/app/explain_facts.py) and what the
    rules found there (in place). ``where``: "this machine", or the pasted machine for a collect_env
    paste or a report."""
    from doctor.app.explain_facts import fact_verdict
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
            cause["verdict"], cause["why"] = CONFIRMED, f"{where} has it: {hit.title}"
            cause["check"] = {"id": hit.id, "detail": hit.detail,
                              "fix": {"summary": hit.fix.summary if hit.fix else "",
                                      "commands": list(hit.fix.commands) if hit.fix else []}}
            continue
        fact = fact_verdict(cause["id"], diag.facts, cause["match"]["groups"]) if diag.facts else None
        if fact is not None:
            cause["verdict"], cause["why"] = fact
            continue
        rules = [r for i in ids for r in rules_of.get(i, [])]
        if not rules:
            cause["verdict"], cause["why"] = (
                TEXT_ONLY,
                "probing cannot see this cause: the message is the evidence",
            )
            continue
        statuses = {status_of.get(r) for r in rules}
        # a check that looked rules the cause out; one that was skipped (did not apply) neither confirms nor
        # rules out, so it does not stand in the way; an unknown one does
        if "passed" in statuses and statuses <= {"passed", "skipped"}:
            cause["verdict"] = RULED_OUT
            cause["why"] = (f"the check looked and {where} does not have it: the message came from another "
                            "machine, another interpreter, or a different cause")
        else:
            # skipped (no smoke test, not WSL) or unknown (a fact missing): the check's own reason says why
            unknown = [f.title for f in diag.findings if f.rule in rules]
            unknown += [c.note for c in diag.checks if c.rule in rules and c.status != "passed" and c.note]
            cause["verdict"] = UNKNOWN
            cause["why"] = "the check could not tell" + (f": {_note(str(unknown[0]))}" if unknown else "")


def explain(opts: ExplainOptions, stdin=None) -> tuple[dict, int]:
    """The explain report and the exit code."""
    from doctor.inputs.errortext import explain_stream

    blocks, source = open_input(opts.inputs, stdin)
    sigs = load_bundled_signatures()  # compiled once for the run
    kept = _Kept(blocks)
    result = explain_stream(kept, sigs)
    causes = [_cause(f) for f in result.findings]
    report = {
        "explain_schema_version": EXPLAIN_SCHEMA_VERSION,
        "tool": {"name": "torchdoctor", "version": __version__},
        "signatures_version": sigs.signatures_version,
        "input": {"source": source, "lines": result.lines, "notes": list(result.notes)},
        "probed": False,
        "causes": causes,
        "check": None,
    }
    pasted = pasted_machine(kept.whole(), source)
    if pasted is not None:
        # The paste describes the machine the message came from: diagnose it as `check --from` does,
        # not this one.
        from doctor.app.run import exit_code_for, judge, make_report
        from doctor.table.load import load_table

        kind, snapshot = pasted
        table = load_table(opts.table)
        diag = judge(snapshot, table)
        verdicts(causes, diag, where="the pasted machine")
        code = exit_code_for(diag.findings)
        report["rediagnosed"] = {"kind": kind, "as": "torchdoctor check --from", "exit_code": code}
        report["check"] = make_report(table, diag, code)
        standing = [c for c in causes if c["verdict"] != RULED_OUT]
        return report, exitcodes.FINDINGS if standing or code == exitcodes.FINDINGS else exitcodes.OK
    if opts.probe and causes:
        from doctor.app.run import diagnose_machine, exit_code_for, make_report

        text = kept.tail.decode("utf-8", "replace")
        python = opts.python or traceback_interpreter(text)
        check = CheckOptions(
            python=python,
            smoke=opts.smoke,
            table=opts.table,
            quiet=opts.quiet,
            json=opts.format == "json" and opts.output is None,
            python_named=bool(opts.python),
        )
        table, diag = diagnose_machine(check)
        verdicts(causes, diag)
        report["probed"] = True
        report["interpreter_from_traceback"] = bool(python and not opts.python)
        report["interpreter"] = diag.snapshot.interpreter.path or None
        report["check"] = make_report(table, diag, exit_code_for(diag.findings))
    else:
        for cause in causes:
            cause["verdict"], cause["why"] = NOT_PROBED, "--no-probe: this rests on the text alone"
    standing = [c for c in causes if c["verdict"] != RULED_OUT]
    return report, exitcodes.FINDINGS if standing else exitcodes.OK


def _cause(f) -> dict:
    cause = {
        "id": f.finding, "title": f.title, "meaning": f.meaning, "fix": f.fix, "related": list(f.related),
        "match": {"line": f.line, "text": f.text, "groups": dict(f.groups), "signature": f.signature,
                  "specificity": f.specificity, "occurrences": f.occurrences},
        "torch_versions": f.torch_versions, "source": f.source,
    }
    decoded = _decoded(f.groups)
    if decoded:
        cause["decoded"] = decoded
    return cause


def _decoded(groups) -> dict:
    """What the numbers in a message mean: CUDA's integer driver version ("found version 11040": 11.4), torch
    1.x's runtime error numbers."""
    from doctor.inputs.errortext import decode_cuda_version, decode_runtime_error

    decoded = {}
    cuda = decode_cuda_version(groups.get("found_version"))
    if cuda:
        decoded["found_version"] = f"CUDA {cuda}"
    error = decode_runtime_error(groups.get("runtime_code"))
    if error:
        decoded["runtime_code"] = error
    return decoded


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
        render_explain(report, verbose=opts.verbose, file=buf, width=100, terminal=False)
        text = buf.getvalue()
    if report.get("redacted") is False and opts.format != "json":
        from doctor.app.output import NOT_REDACTED

        text = (f"> **{NOT_REDACTED}**\n\n" if opts.format == "markdown" else NOT_REDACTED + "\n") + text
    deliver(text, CheckOptions(output=opts.output, quiet=opts.quiet))
    return code
