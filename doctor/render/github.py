"""GitHub Actions output: one workflow-command annotation per finding (the app writes the step summary).

Format and escaping follow GitHub's "Workflow commands" documentation: in the message, ``%``,
CR and LF are percent-encoded; in properties (``title=``) also ``:`` and ``,``.
"""

from __future__ import annotations

from doctor.render.markdown import as_list, as_object

LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, title: str, message: str) -> str:
    return f"::{level} title={escape_property(title)}::{escape_data(message)}"


def render_github(report: dict) -> str:
    """Annotations, one per line."""
    lines = []
    findings = as_list(report.get("findings"))
    for f in findings:
        if not isinstance(f, dict):
            continue
        level = LEVELS.get(str(f.get("severity")), "notice")
        message = str(f.get("title") or "")
        fix = as_object(f.get("fix"))
        if fix.get("summary"):
            message += f" — {fix['summary']}"
        commands = [str(c) for c in as_list(fix.get("commands")) if c]
        if commands:
            message += "\n" + "\n".join(commands)
        lines.append(annotation(level, str(f.get("id") or "torchdoctor"), message))
    if not lines:
        lines.append(annotation("notice", "torchdoctor", "no problems found"))
    return "\n".join(lines) + "\n"
