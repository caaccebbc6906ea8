"""rich's ``Text`` and ``Console``, as much of them as the text view uses, for output that is no terminal.

Where the text view goes to a pipe or a file, rich prints no colour and, with soft wrap, no line breaks of its
own: each ``print`` is its parts joined, then a newline. These stand-ins print exactly that without importing
rich (~40 ms). tests/test_render_plain.py holds the two to the same bytes.
"""

from __future__ import annotations


class Text:
    """A run of text in parts, each with its style, under the text's own style. The plain console drops the
    styles (no terminal, no colour); the terminal one (ansi.py) writes them as rich does."""

    def __init__(self, text: str = "", style: str = "") -> None:
        self.style = style or ""
        self.parts: list[tuple[str, str]] = [(str(text), "")]

    @classmethod
    def assemble(cls, *parts) -> Text:
        text = cls()
        for part in parts:
            text.append(*part) if isinstance(part, tuple) else text.append(part)
        return text

    def append(self, text: str, style: str | None = None) -> Text:
        self.parts.append((str(text), style or ""))
        return self

    def restyle(self, style: str) -> Text:
        """The text's own style (rich: ``Text.assemble(..., style=...)``)."""
        self.style = style or ""
        return self

    @property
    def plain(self) -> str:
        return "".join(text for text, _ in self.parts)

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
