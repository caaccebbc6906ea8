"""Expected errors: each becomes one clear line on stderr and a documented exit code."""

from __future__ import annotations

import re

from doctor import exitcodes

# What a terminal must never get raw from a message that quotes an input: C0 controls (newlines too:
# the message is one line), DEL and C1 controls (0x9b is a CSI on some terminals).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")  # and bidi controls
MAX_MESSAGE = 1000


def one_line(text: str) -> str:
    """``text`` as one printable line: control characters shown escaped (``\\x1b``, ``\\n``), cut when
    long."""
    shown = _CONTROL.sub(lambda m: repr(m.group(0))[1:-1], str(text))
    return shown if len(shown) <= MAX_MESSAGE else shown[: MAX_MESSAGE - 3] + "..."


class DoctorError(Exception):
    """An expected failure (bad input, unreadable file). ``str()`` is the one line shown; ``details`` are
    lines of evidence printed indented under it (what a broken interpreter said), each printable too."""

    exit_code = exitcodes.USAGE

    def __init__(self, message: str, exit_code: int | None = None, details: list[str] | tuple[str, ...] = ()):
        super().__init__(one_line(message))
        self.message = message  # as made (a doctor.model.i18n.Msg is said in the run's language when shown)
        self.details = [one_line(line) for line in details]
        if exit_code is not None:
            self.exit_code = exit_code


class TableError(DoctorError):
    """The compatibility table is missing, malformed or fails validation (names file and field)."""


class ReportError(DoctorError):
    """A report or collect_env text given to --from cannot be read."""
