"""rich's ``Text`` and ``Console`` on a terminal, as much of them as the text view uses, without importing rich
(~40 ms of every `check` typed at a terminal).

What rich prints there, with soft wrap and no highlighting: each ``print`` is the text's segments, then the
end. A segment is a maximal run of the text under one set of styles (each styled part is a run of its own;
unstyled parts next to each other are one), written as ``ESC[<codes>m`` + text + ``ESC[0m``, or bare when its
style has no codes. The codes are the attributes in rich's order (bold 1, dim 2, ...), then the colour
(standard colours are 30-37 in every colour system rich picks on POSIX); with NO_COLOR the colours are dropped
and the attributes kept. Anything outside that (a style word not below, a tab, a line break or a control
character, several objects in one print) is handed to rich itself for that print, so the bytes are rich's
whatever the text. tests/test_render_ansi.py holds the two to the same bytes.
"""

from __future__ import annotations

from doctor.render.plain import Text

ATTRIBUTES = {"bold": 1, "dim": 2, "italic": 3, "underline": 4, "blink": 5, "reverse": 7, "strike": 9}
COLORS = {"black": 30, "red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36, "white": 37}
_RICH_ONLY = frozenset("\t\n\r\x07\x08\x0b\x0c\x1b")  # what rich splits, expands or strips itself


def codes(style: str, no_color: bool) -> str | None:
    """The SGR codes of a style ("bold red" -> "1;31"), "" for none, None for a word this kit does not know."""
    attributes, color = set(), None
    for word in style.split():
        if word in ATTRIBUTES:
            attributes.add(ATTRIBUTES[word])
        elif word in COLORS:
            color = COLORS[word]  # a later colour wins, as in rich's Style.combine
        else:
            return None
    found = [str(a) for a in sorted(attributes)]
    if color is not None and not no_color:
        found.append(str(color))
    return ";".join(found)


class Console:
    """Writes what rich's Console writes to a terminal, for the prints the text view makes (module docstring).
    ``no_color``: NO_COLOR is set (attributes without colours)."""

    def __init__(self, file, no_color: bool = False) -> None:
        self.file = file
        self.no_color = no_color
        self._rich = None

    def print(self, *objects, style: str | None = None, soft_wrap: bool | None = None, end: str = "\n") -> None:
        rendered = self._render(objects, style) if end == "\n" else None
        if rendered is None:
            self._rich_console().print(*(_to_rich(o) for o in objects), style=style, soft_wrap=soft_wrap, end=end)
            return
        self.file.write(rendered + end)

    def _render(self, objects, style: str | None) -> str | None:
        if style or len(objects) > 1:
            return None
        if not objects:
            return ""
        text = objects[0]
        if not isinstance(text, Text):
            text = Text(str(text))
        out = []
        plain = []  # unstyled parts next to each other: one segment
        for part, part_style in text.parts:
            if _RICH_ONLY.intersection(part):
                return None
            if not part:
                continue  # rich keeps no span for empty text: it splits nothing
            if not part_style:
                plain.append(part)
                continue
            if plain:
                out.append(self._segment("".join(plain), text.style))
                plain = []
            out.append(self._segment(part, f"{text.style} {part_style}"))
        if plain:
            out.append(self._segment("".join(plain), text.style))
        if any(segment is None for segment in out):
            return None
        return "".join(out)

    def _segment(self, text: str, style: str) -> str | None:
        if not text:
            return ""
        sgr = codes(style, self.no_color)
        if sgr is None:
            return None
        return f"\x1b[{sgr}m{text}\x1b[0m" if sgr else text

    def _rich_console(self):
        if self._rich is None:
            from rich.console import Console as RichConsole

            self._rich = RichConsole(file=self.file, highlight=False, soft_wrap=True)
        return self._rich


def _to_rich(obj):
    if not isinstance(obj, Text):
        return obj
    from rich.text import Text as RichText

    text = RichText(obj.parts[0][0], style=obj.style)
    for part, style in obj.parts[1:]:
        text.append(part, style=style or None)
    return text
