"""Where a report goes: the chosen format, the redaction policy for shared output, files, and the
GitHub step summary. Renderers only turn a report into text; the writing happens here."""

from __future__ import annotations

import sys

from doctor.app.options import CheckOptions
from doctor.errors import DoctorError

# Meant to be pasted, published or uploaded (a job summary can be public; JUnit files become CI artifacts):
# redacted on stdout too, unless --no-redact.
SHARED_FORMATS = ("markdown", "github", "junit")
# What shared output written with --no-redact says of itself, once (JSON: "redacted": false).
NOT_REDACTED = ("Not redacted (--no-redact): user and host names, home paths, GPU UUIDs, addresses and "
                "tokens are as they were.")


def _redacted(report: dict, opts: CheckOptions) -> dict:
    fmt = opts.output_format
    if opts.shared or opts.output is not None or fmt in SHARED_FORMATS:
        if not opts.redact:
            return {**report, "redacted": False}
        from doctor.render.redact import redact_report

        return redact_report(report)
    return report


def _said(report: dict) -> bool:
    """Whether this output must say it is not redacted."""
    return report.get("redacted") is False


def render(report: dict, opts: CheckOptions, mode: str = "check") -> str | None:
    """The chosen format as text, or None for the human text renderer (which prints itself)."""
    import os

    fmt = opts.output_format
    report = _redacted(report, opts)
    if fmt == "json":
        from doctor.app.streams import can_encode
        from doctor.render.json import render_json

        return render_json(report, ascii_only=opts.output is None and not can_encode(sys.stdout))
    from doctor.render.sanitize import sanitize

    report = sanitize(report)  # every other format reaches a terminal or a page: nothing raw
    if fmt == "markdown":
        from doctor.render.markdown import render_markdown

        return (f"> **{NOT_REDACTED}**\n\n" if _said(report) else "") + render_markdown(report)
    if fmt == "github":
        from doctor.render.github import annotation, render_github

        said = annotation("warning", "torchdoctor", NOT_REDACTED) + "\n" if _said(report) else ""
        text = said + render_github(report)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        return text + (_append_step_summary(summary, report) if summary else "")
    if fmt == "junit":
        from doctor.render.junit import render_junit

        text = render_junit(report)
        if _said(report):  # a comment after the XML declaration (readers skip it; "--" cannot be in one)
            head, _, rest = text.partition("\n")
            text = f"{head}\n<!-- {NOT_REDACTED.replace('--no-redact', 'no-redact')} -->\n{rest}"
        return text
    from doctor.render.text import render_text

    if opts.output is not None:
        import io

        buf = io.StringIO()
        if _said(report):
            buf.write(NOT_REDACTED + "\n")
        render_text(report, verbose=opts.verbose, mode=mode, file=buf, width=100, quiet=opts.quiet,
                    terminal=False)  # a file: never styled, whatever FORCE_COLOR says
        return buf.getvalue()
    if _said(report):
        sys.stdout.write(NOT_REDACTED + "\n")
    render_text(report, verbose=opts.verbose, mode=mode, quiet=opts.quiet)
    return None


def _append_step_summary(path: str, report: dict) -> str:
    """Append the Markdown report to GITHUB_STEP_SUMMARY; a summary that cannot be written becomes a
    ::warning:: line rather than failing the CI step."""
    from doctor.errors import one_line
    from doctor.model.files import write_text
    from doctor.render.github import annotation
    from doctor.render.markdown import render_markdown

    said = f"> **{NOT_REDACTED}**\n\n" if _said(report) else ""
    try:  # GITHUB_STEP_SUMMARY naming a FIFO nobody reads is an error at once, not a hang
        write_text(path, said + render_markdown(report) + "\n", append=True)
    except OSError as exc:
        why = exc.strerror or str(exc)
        return annotation("warning", "torchdoctor", one_line(f"could not write the step summary to {path}: "
            f"{why}")) + "\n"
    return ""


def deliver(text: str | None, opts: CheckOptions) -> None:
    if text is None:
        return
    if opts.output is None:
        sys.stdout.write(text)
        return
    from doctor.errors import one_line
    from doctor.model.files import write_text

    try:
        opts.output.parent.mkdir(parents=True, exist_ok=True)
        write_text(opts.output, text)
    except OSError as exc:
        raise DoctorError(f"cannot write {opts.output}: {exc.strerror or exc}") from exc
    if not opts.quiet:
        print(one_line(f"torchdoctor: wrote {opts.output}"), file=sys.stderr)


def emit(report: dict, opts: CheckOptions, mode: str = "check") -> None:
    deliver(render(report, opts, mode), opts)
