"""Expected errors: each becomes one clear line on stderr and a documented exit code."""

from __future__ import annotations

from doctor import exitcodes


class DoctorError(Exception):
    """An expected failure (bad input, unreadable file). ``str()`` is the one line shown."""

    exit_code = exitcodes.USAGE

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class TableError(DoctorError):
    """The compatibility table is missing, malformed or fails validation (names file and field)."""


class ReportError(DoctorError):
    """A report or collect_env text given to --from cannot be read."""
