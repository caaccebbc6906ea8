"""rich's ``Text`` and ``Console``, as much of them as the text view uses, for output that is no terminal.

Where the text view goes to a pipe or a file, rich prints no colour and, with soft wrap, no line breaks of its
own: each ``print`` is its parts joined, then a newline. These stand-ins print exactly that without importing
rich (~40 ms). tests/test_render_plain.py holds the two to the same bytes.
"""

from __future__ import annotations


class Text:
    """A run of text; styles are accepted and dropped (no terminal, no colour)."""

    def __init__(self, text: str = "", style: str = "") -> None:
        del style
        self._parts = [str(text)]

    @classmethod
    def assemble(cls, *parts) -> Text:
        text = cls()
        for part in parts:
            text.append(*part) if isinstance(part, tuple) else text.append(part)
        return text

    def append(self, text: str, style: str | None = None) -> Text:
        del style
        self._parts.append(str(text))
        return self

    @property
    def plain(self) -> str:
        return "".join(self._parts)

    def __str__(self) -> str:
        return self.plain


class Console:
    """Writes each printed line as it is (rich on a pipe with soft wrap: tabs expanded, as rich does)."""

    def __init__(self, file) -> None:
        self.file = file

    def print(self, *objects, style: str | None = None, soft_wrap: bool | None = None, end: str = "\n") -> None:
        del style, soft_wrap
        line = " ".join(str(o) for o in objects)
        self.file.write(line.expandtabs(8) + end)
