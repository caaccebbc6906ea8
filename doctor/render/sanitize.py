"""The one sanitising step for external strings on their way to a terminal, Markdown, HTML-in-Markdown,
GitHub annotations or a printed command (JSON is left exact: it escapes control characters itself).

What torchdoctor prints comes largely from elsewhere: GPU names and error texts from NVML and
nvidia-smi, paths, a report or collect_env text read back with --from, pip's output, a table's
version. Any of them may carry an escape sequence that retitles the window or clears the screen,
a carriage return that overwrites the line, or a newline that forges a line of its own. So before
rendering, every string of the report (or summary) is made printable:

- C0 control characters (ESC, CR, BS, BEL, ...), DEL and the C1 range (0x80-0x9f; 0x9b is a CSI on
  some terminals) are shown escaped, as Python writes them: ``\\x1b``, ``\\r``, ``\\x9b``; so are the
  bidirectional controls (``\\u202e``), which reorder what is shown;
- TAB is shown as ``\\t`` (a terminal prints it as spaces, and a path that holds one would read as
  another path); newline likewise, except in the free-text fields that are meant to span lines
  (``MULTILINE_KEYS``: details, messages, stderr tails);
- rich markup is never interpreted in such strings: renderers print them as ``rich.text.Text`` (or
  through ``markup`` below), so ``[/]`` in a GPU name is text, not a tag.

Commands are quoted where they are built (doctor/model/shells.py: ``$'...'`` for control characters),
so that what is shown is still the command that runs.
"""

from __future__ import annotations

import re
from typing import Any

from doctor.model.i18n import Msg

# Bidirectional controls (U+202E and kin) reorder what a terminal or a browser shows: "evil\u202egnp.exe"
# reads as "evilexe.png". Shown escaped like the control characters.
BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNPRINTABLE = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{BIDI}]")  # everything but TAB and LF
_UNPRINTABLE_ONE_LINE = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{BIDI}]")  # TAB and LF too
_BIDI = re.compile(f"[{BIDI}]")

# Keys whose string values are prose that may span lines (report, summary and fix views).
MULTILINE_KEYS = frozenset(
    {"detail", "details", "message", "stderr_tail", "stdout_tail", "text", "summary", "why", "note",
     "notes", "meaning", "fix", "hint", "hints", "reason", "error"}
)


def _escape(match: re.Match) -> str:
    char = match.group(0)
    if char == "\t":
        return "\\t"
    if char == "\n":
        return "\\n"
    if char == "\r":
        return "\\r"
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def json_bidi(text: str) -> str:
    """JSON text with the bidirectional controls written as ``\\u202e`` escapes (the same data: they occur
    only inside strings), for JSON written with ``ensure_ascii=False``."""
    return _BIDI.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def printable(text: Any, multiline: bool = False) -> str:
    """``text`` with every control character shown escaped; with ``multiline`` newlines are kept (and a
    TAB too, which prose may hold)."""
    text = str(text)
    pattern = _UNPRINTABLE if multiline else _UNPRINTABLE_ONE_LINE
    return pattern.sub(_escape, text) if pattern.search(text) else text


def has_controls(text: str) -> bool:
    return bool(_UNPRINTABLE_ONE_LINE.search(text))


def sanitize(value: Any, key: str = "") -> Any:
    """A copy of ``value`` (a report, a summary, any JSON-like data) with every string ``printable``:
    dict keys too; prose under ``MULTILINE_KEYS`` keeps its line breaks."""
    if isinstance(value, Msg):  # the message stays one, its parameters made printable too
        return value.map(lambda text: printable(text, multiline=key in MULTILINE_KEYS))
    if isinstance(value, str):
        return printable(value, multiline=key in MULTILINE_KEYS)
    if isinstance(value, dict):
        return {
            (printable(k) if isinstance(k, str) else k): sanitize(v, k if isinstance(k, str) else key)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [sanitize(v, key) for v in value]
    return value


def markup(text: Any) -> str:
    """``text`` made printable and safe to put inside rich markup (``[bold]`` stays text)."""
    from rich.markup import escape

    return escape(printable(text))
