"""Output that survives any encoding. When stdout or stderr cannot encode what torchdoctor prints (a
redirected stdout on Windows is often cp1252; PYTHONIOENCODING=ascii; LANG=C on an old system), the stream
is wrapped: our glyphs become ASCII stand-ins (✓ → +, ✗ → x, ≤ → <=, → → ->, … → ...), and any other
character it cannot encode becomes a JSON-style escape (\\u00e9), so nothing is lost silently and JSON
stays valid. Nothing is wrapped on a stream that can encode them (the usual UTF-8 terminal or pipe).

``guard_streams`` is called by doctor/cli/__init__.py before anything is printed; it costs one ``str.encode``.
"""

from __future__ import annotations

import sys

# Stand-ins never contain a quote, a backslash or a control character, so they cannot break JSON or shells.
ASCII = {
    "✓": "+", "✗": "x", "·": "-", "≤": "<=", "≥": ">=", "→": "->", "←": "<-", "…": "...", "—": "--",
    "–": "-", "−": "-", "×": "x", "•": "*", "≈": "~", "’": "'", "‘": "'", "“": "'", "”": "'", "²": "^2",
    "µ": "u", "❌": "[x]", "⚠": "[!]", "ℹ": "[i]", "✅": "[+]", "\ufe0f": "",
    # rich's spinner and box drawing, should they reach a stream that cannot show them
    "─": "-", "━": "-", "│": "|", "┃": "|",
}
PROBE = "✓✗≤→…·—"  # what our own output needs; a stream that can encode these needs no wrapper


def can_encode(stream, text: str = PROBE) -> bool:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def fit(text: str, encoding: str) -> str:
    """``text`` with every character ``encoding`` cannot hold replaced by its stand-in or escape."""
    out = []
    for ch in text:
        try:
            ch.encode(encoding)
        except UnicodeEncodeError:
            if ch in ASCII:
                out.append(ASCII[ch])
            else:
                code = ord(ch)
                if code > 0xFFFF:  # a surrogate pair, as JSON writes it
                    code -= 0x10000
                    out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
                else:
                    out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


class FittingWriter:
    """A text stream that writes only what its encoding can hold (see ``fit``); everything else is the
    wrapped stream's (``encoding``, ``isatty``, ``fileno``, ``buffer``...), so rich and click treat it
    like the stream it wraps."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self._encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            "".encode(self._encoding)
        except LookupError:
            self._encoding = "ascii"

    def write(self, text: str) -> int:
        try:
            text.encode(self._encoding)
        except UnicodeEncodeError:
            text = fit(text, self._encoding)
        return self._stream.write(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def guard_streams() -> None:
    """Wrap sys.stdout and sys.stderr where they cannot encode our glyphs."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        if stream is not None and not isinstance(stream, FittingWriter) and not can_encode(stream):
            setattr(sys, name, FittingWriter(stream))
