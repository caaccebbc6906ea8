"""The one place rich consoles are made: one per output stream, for every human view (check's text, explain,
fix, fleet, the progress line).

rich decides everything about the stream itself: whether it is a terminal (isatty, FORCE_COLOR,
TTY_COMPATIBLE), colours (NO_COLOR, TERM=dumb) and the width (COLUMNS, the terminal's size). With soft wrap,
the default here, rich never breaks or pads a line, so commands can be copied as they are at any width.
rich is imported only when a console is made: JSON output never needs it.
"""

from __future__ import annotations

import sys


def console(file=None, width: int | None = None, *, terminal: bool | None = None, soft_wrap: bool = True,
            highlight: bool = False, no_color: bool | None = None):
    """A rich Console writing to ``file`` (stdout by default). ``terminal``: False for a file torchdoctor
    writes itself (-o), never styled whatever FORCE_COLOR says; None lets rich decide. ``highlight``: rich's
    highlighting of numbers and the like in plain strings (off: text is printed as it is)."""
    from rich.console import Console

    return Console(file=file or sys.stdout, width=width, force_terminal=terminal, soft_wrap=soft_wrap,
                   highlight=highlight, no_color=no_color)
