"""GitHub Actions output: one workflow-command annotation per finding, and one notice listing the checks
that were skipped or unknown (the app writes the step summary).

Format and escaping follow GitHub's "Workflow commands" documentation: in the message, ``%``,
CR and LF are percent-encoded; in properties (``title=``) also ``:`` and ``,``.
"""

from __future__ import annotations

from doctor.model.i18n import Msg, localize, tr
from doctor.render.markdown import as_list, as_object
from doctor.render.verdict import checks_text

LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, title: str, message: str) -> str:
    return f"::{level} title={escape_property(title)}::{escape_data(message)}"


_STATES = {"skipped": Msg("skipped"), "unknown": Msg("unknown")}


def render_github(report: dict) -> str:
    """Annotations, one per line."""
    lines = []
    findings = as_list(report.get("findings"))
    for f in findings:
        if not isinstance(f, dict):
            continue
        level = LEVELS.get(str(f.get("severity")), "notice")
        message = str(localize(f.get("title") or ""))
        fix = as_object(f.get("fix"))
        if fix.get("summary"):
            message += f" — {localize(fix['summary'])}"
        commands = [str(c) for c in as_list(fix.get("commands")) if c]
        if commands:
            message += "\n" + "\n".join(commands)
        lines.append(annotation(level, str(f.get("id") or "torchdoctor"), message))
    if not lines:
        lines.append(annotation("notice", "torchdoctor", tr("no problems found")))
    gaps = [c for c in as_list(report.get("checks")) if isinstance(c, dict) and c.get("status") in ("skipped",
                                                                                                  "unknown")]
    if gaps:
        # One notice for the checks that did not pass or fail, so a green run does not read as "all checked".
        listed = "\n".join(
            tr(
                "{state}: {summary} ({note})",
                state=_STATES.get(c.get("status"), c.get("status")),
                summary=localize(c.get("summary") or c.get("rule")),
                note=c.get("note") or Msg("no reason"),
            )
            for c in gaps
        )
        lines.append(annotation("notice", "torchdoctor checks", f"{checks_text(report)}\n{listed}"))
    return "\n".join(lines) + "\n"
