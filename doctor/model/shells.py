"""Command lines for people to paste: one quoting per shell, whose output names exactly the argv it was given.

What torchdoctor prints as a command is pasted into a shell, so every argument that came from elsewhere (a
path, a version read from a folder name, a report from another machine) must reach the program as itself and
never run. Each shell gets its own documented quoting:

- POSIX (bash, zsh, sh): bare where the argument holds only ``[A-Za-z0-9_./:+@%,-]`` (and ``=`` in double
  quotes, as pins are usually written: ``"torch==2.7.1+cu128"``); anything else in single quotes, as
  ``shlex.quote`` writes them (``'`` as ``'"'"'``), where ``$``, backticks, ``!`` and ``\\`` are plain
  text. ``shlex.split`` reads the line back as the argv. An argument with a control character is written
  ``$'...'`` (bash, zsh, ksh) with the character escaped, so that no raw TAB or escape sequence reaches the
  terminal and the command still names the same file; surrogate-escaped bytes (a path that is not UTF-8)
  become ``\\xNN``.
- PowerShell: bare where safe, in double quotes where nothing inside expands (no ``$``, backtick or
  double quote of any kind), else in single quotes with ``'`` (and PowerShell's typographic single quotes)
  doubled. A quoted program gets the call operator ``&``. Refused: control characters, a double quote
  (PowerShell 5.1 passes it to programs mangled) and an empty argument (5.1 drops it).
- cmd: bare where safe, else in double quotes (where ``&``, ``|``, ``<``, ``>``, ``^`` and ``(`` are plain),
  a trailing backslash doubled for the program's own parsing. Refused: ``%`` and ``!`` (expanded even
  inside double quotes), a double quote (it would end the quoted part and free ``&`` and ``|``) and control
  characters.

A refused argument raises ``Unrepresentable`` from ``quote``; ``render`` then returns a comment line (``#``;
cmd: ``rem``) that says why, never a command that would do something else. Stdlib only, Python 3.8
compatible: rank 0 of a distributed check writes its hints with it inside the target interpreter.
"""

from __future__ import annotations

import re

POSIX = "posix"
POWERSHELL = "powershell"
CMD = "cmd"
SHELLS = (POSIX, POWERSHELL, CMD)

_POSIX_BARE = re.compile(r"[A-Za-z0-9_./:+@%,-]+")
_POSIX_DOUBLE = re.compile(r"[A-Za-z0-9_./:+@%,=-]+")  # no $, `, \, ", ! inside: nothing expands
_POWERSHELL_BARE = re.compile(r"[A-Za-z0-9_./:\\+-]+")
_CMD_BARE = re.compile(r"[A-Za-z0-9_./:\\+=@,-]+")
# C0, DEL, C1 and surrogates (a path's undecodable bytes, as surrogateescape holds them).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_POWERSHELL_EXPANDS = re.compile("[$`\"\u201c\u201d\u201e]")  # what is live inside PowerShell's double quotes
_POWERSHELL_SINGLE = re.compile("['\u2018\u2019\u201a\u201b]")  # PowerShell reads all of these as '
_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\\": "\\\\", "'": "\\'", "!": "\\x21"}


class Unrepresentable(ValueError):
    """An argument this shell cannot be given safely; the message says why."""


def shell_for(os_name: str) -> str:
    """The shell commands are written for on an OS: PowerShell on Windows, POSIX elsewhere."""
    return POWERSHELL if os_name == "windows" else POSIX


def quote(arg: str, shell: str = POSIX, first: bool = False) -> str:
    """One argument for ``shell``; ``first``: it is the program (quoted, it needs PowerShell's ``&``)."""
    if shell == POWERSHELL:
        return _powershell(arg, first)
    if shell == CMD:
        return _cmd(arg)
    return _posix(arg)


def render(argv: list[str], shell: str = POSIX) -> str:
    """The whole command line; where an argument cannot be written safely, a comment line saying why."""
    try:
        return " ".join(quote(arg, shell, first=i == 0) for i, arg in enumerate(argv))
    except Unrepresentable as exc:
        return refusal(shell, str(exc))


def refusal(shell: str, why: str) -> str:
    """A line that a shell reads as a comment: pasted, it does nothing (zsh without interactive comments runs
    ``#`` as a command that is not found: so nothing in it may expand or quote)."""
    why = _NOT_PLAIN.sub(" ", why)
    return ("rem " if shell == CMD else "# ") + f"torchdoctor cannot write this command safely: {why}"


_NOT_PLAIN = re.compile(r"[^A-Za-z0-9 ,.:=+/_-]")


def _posix(arg: str) -> str:
    if _CONTROL.search(arg):
        return _ansi_c(arg)
    if _POSIX_BARE.fullmatch(arg):
        return arg
    if "=" in arg and not arg.startswith("=") and _POSIX_DOUBLE.fullmatch(arg):  # zsh expands a leading =
        return f'"{arg}"'
    return "'" + arg.replace("'", "'\"'\"'") + "'"


def _ansi_c(arg: str) -> str:
    """bash/zsh ``$'...'``: control characters as escapes, ``!`` too (never history expansion)."""
    out = []
    for char in arg:
        code = ord(char)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for a byte that is not UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            raise Unrepresentable("an argument holds a lone surrogate, which no shell can pass on")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0x80 <= code <= 0x9F:  # a character, not a byte: \x80 would be the byte
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    return "$'" + "".join(out) + "'"


def _powershell(arg: str, first: bool) -> str:
    if not arg:
        raise Unrepresentable("an empty argument, which Windows PowerShell 5.1 drops")
    if _CONTROL.search(arg):
        raise Unrepresentable("an argument holds a control character, which Windows paths cannot hold")
    if '"' in arg:
        raise Unrepresentable("an argument holds a double quote, which Windows PowerShell 5.1 mangles")
    if _POWERSHELL_BARE.fullmatch(arg):
        return arg
    if _POWERSHELL_EXPANDS.search(arg):
        quoted = "'" + _POWERSHELL_SINGLE.sub(lambda m: m.group(0) * 2, arg) + "'"
    else:
        quoted = f'"{arg}"'
    return "& " + quoted if first else quoted


def _cmd(arg: str) -> str:
    if _CONTROL.search(arg):
        raise Unrepresentable("an argument holds a control character")
    for char, why in (("%", "a percent sign, which cmd expands even inside double quotes"),
                      ("!", "an exclamation mark, which cmd expands where delayed expansion is on"),
                      ('"', "a double quote, which would end the quoted part in cmd")):
        if char in arg:
            raise Unrepresentable("an argument holds " + why)
    if _CMD_BARE.fullmatch(arg):
        return arg
    # Inside double quotes & | < > ^ ( ) are text to cmd; the program's own parser (the C runtime's) reads
    # backslashes before the closing quote as escapes, so a trailing run is doubled.
    trailing = len(arg) - len(arg.rstrip("\\"))
    return '"' + arg + "\\" * trailing + '"'
