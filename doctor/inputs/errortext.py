"""Error-message signatures for ``torchdoctor explain``: load them, normalise pasted text, match, rank.

Users arrive with an error message, not a machine description. This module turns whatever they paste
(one line, a traceback, a pip or CI log, a GitHub issue with Markdown, ANSI colours, CRLF, HTML entities,
text in another language around the message) into candidate findings, each with the same id
``torchdoctor check`` uses for that cause, ranked by how specific the match is.

Pure and stdlib-only: the only input is the text (str or bytes) and the signature data (text or dict,
normally ``compat_tables/signatures.json``); nothing is read from disk, run or printed.

Linear time, whatever the input:

* the input is bounded (the last ``MAX_INPUT_CHARS`` characters are kept: errors sit at the end of logs),
* long lines are cut into overlapping chunks of at most ``MAX_CHUNK_CHARS``,
* every signature has literal "needles" derived from its pattern; a plain substring search over the
  whole lower-cased text finds the only chunks its regex is run on,
* patterns are validated on load: no nested quantifiers, no unbounded quantifier on a group, no
  back-references, so no pattern can backtrack catastrophically inside a bounded chunk.

API::

    sigs = load_signatures(json_text_or_dict)            # doctor/compat/signatures.py; ValueError if bad
    result = explain_text(pasted, sigs)                  # -> Explanation
    result.findings[0].finding                           # e.g. "gpu-arch-unsupported"
"""

from __future__ import annotations

import bisect
import html
import re
from dataclasses import dataclass

from doctor.compat.signatures import SignatureSet, load_signatures  # noqa: F401 - part of the matcher's API

MAX_INPUT_CHARS = 4_000_000  # about the last 4 MB of a log; older text is dropped (and said so)
MAX_CHUNK_CHARS = 4096  # regexes only ever run on this much text at once
CHUNK_OVERLAP = 512  # a message split by the chunking still lies whole in one chunk
MAX_MATCHES = 1000  # raw matches kept for the caller; ranking uses them all
MAX_CANDIDATES = 5000  # pieces one signature's regex may run on (earliest first): bounds hostile input
FALLBACK_SPECIFICITY = (
    20  # below this a signature is a fallback: it only counts on lines nothing else explains
)

# Terminal noise: CSI (colours, cursor moves), OSC (titles, hyperlinks; bounded so an unterminated one
# cannot swallow the log), other two-byte escapes, and the caret notation (^[[31m) logs show instead.
_ANSI_RE = re.compile(
    r"\x1b\[[0-?]{0,64}[ -/]{0,16}[@-~]"
    r"|\x1b\][^\x07\x1b\n]{0,2048}(?:\x07|\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
    r"|\^\[\[[0-9;?]{0,32}[A-Za-z]"
)
# Markdown: fence lines become empty (the numbering stays), block-quote markers go.
_FENCE_RE = re.compile(r"^[ \t]{0,3}(?:```|~~~)[\w+#.-]{0,40}[ \t]*$", re.MULTILINE)
_QUOTE_RE = re.compile(r"^[ \t]{0,3}(?:>[ \t]?){1,10}", re.MULTILINE)
# control characters and invisible format characters (zero-width spaces, a BOM inside the text)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b-\u200d\u2060\ufeff]")



# --- results ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    """One place a signature matched: 1-based line number in the normalised text."""

    signature: str
    finding: str
    specificity: int
    line: int
    text: str  # the matched substring
    groups: dict[str, str]  # named groups that captured something


@dataclass(frozen=True)
class ExplainedFinding:
    """One candidate cause: the best match for a finding id, with what it means and the fix."""

    finding: str
    signature: str
    specificity: int
    line: int
    text: str
    groups: dict[str, str]
    title: str
    meaning: str
    fix: str
    torch_versions: str
    source: str
    related: tuple[str, ...]
    occurrences: int  # matches of any signature for this finding
    also_matched: tuple[str, ...]  # other signature ids that point at the same finding


@dataclass(frozen=True)
class Explanation:
    findings: tuple[ExplainedFinding, ...]  # ranked: specificity, then first position
    matches: tuple[Match, ...]  # every match (capped at MAX_MATCHES), in text order
    notes: tuple[str, ...]  # what normalisation did that the user should know (truncation, ...)
    lines: int  # lines in the normalised text


# --- normalising pasted text -----------------------------------------------------------------------


def normalize_text(data: str | bytes) -> tuple[list[str], list[str]]:
    """(lines, notes): the pasted text as plain lines, and what was done to it that matters.

    Bytes are decoded as UTF-8 (UTF-16 when it has a BOM), undecodable bytes replaced. Then: keep the
    last MAX_INPUT_CHARS characters, drop NULs and control characters, strip ANSI/OSC escapes and their
    caret notation, CRLF and lone CR to LF, HTML entities to characters (non-breaking spaces to spaces),
    Markdown code fences, block quote markers and ** emphasis.
    """
    notes: list[str] = []
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        if len(raw) > MAX_INPUT_CHARS * 4:  # no decoded character is longer than 4 bytes
            raw = raw[-MAX_INPUT_CHARS * 4 :]
        if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
            text = raw.decode("utf-16", errors="replace")
        else:
            text = raw.decode("utf-8", errors="replace")
        if "\ufffd" in text:
            notes.append("some bytes were not valid UTF-8 and were replaced")
    elif isinstance(data, str):
        text = data
    else:
        raise TypeError(f"explain needs str or bytes, not {type(data).__name__}")
    if len(text) > MAX_INPUT_CHARS:
        dropped = len(text) - MAX_INPUT_CHARS
        text = text[-MAX_INPUT_CHARS:]
        notes.append(
            f"input is longer than {MAX_INPUT_CHARS} characters: the first {dropped} were dropped "
            "(line numbers count from the kept part)"
        )
    if "\x00" in text:
        text = text.replace("\x00", "")  # UTF-16 without a BOM, or binary: keep the ASCII that is there
        notes.append("NUL bytes were removed")
    if "\x1b" in text or "^[[" in text:
        text = _ANSI_RE.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "&" in text:
        text = html.unescape(text)
    text = _CONTROL_RE.sub("", text).replace("\xa0", " ")  # &nbsp; and pasted non-breaking spaces
    # whole-text passes (C speed) rather than a Python loop over the lines
    if "```" in text or "~~~" in text:
        text = _FENCE_RE.sub("", text)
    if ">" in text:
        text = _QUOTE_RE.sub("", text)
    text = text.replace("**", "")
    lines = text.split("\n")
    if len(lines) > 1 and not lines[-1]:
        lines.pop()  # the newline that ends the last line starts no line of its own
    return lines, notes


def _chunks(lines: list[str]) -> tuple[list[tuple[int, int, str]], bool]:
    """(line number, offset in the line, text) pieces of at most MAX_CHUNK_CHARS, overlapping."""
    if max(map(len, lines), default=0) <= MAX_CHUNK_CHARS:
        return [(number, 0, line) for number, line in enumerate(lines, 1)], False
    chunks = []
    step = MAX_CHUNK_CHARS - CHUNK_OVERLAP
    for number, line in enumerate(lines, 1):
        if len(line) <= MAX_CHUNK_CHARS:
            chunks.append((number, 0, line))
            continue
        for start in range(0, len(line) - CHUNK_OVERLAP, step):
            chunks.append((number, start, line[start : start + MAX_CHUNK_CHARS]))
    return chunks, True


# --- matching --------------------------------------------------------------------------------------


def explain_text(data: str | bytes, signatures: SignatureSet) -> Explanation:
    """Every known signature in the pasted text, as ranked candidate findings. Never raises on input."""
    lines, notes = normalize_text(data)
    chunks, split = _chunks(lines)
    if split:
        notes.append(f"lines longer than {MAX_CHUNK_CHARS} characters were searched in overlapping pieces")
    # One lower-cased copy of all chunks, joined by newlines: needles are found with str.find, then
    # mapped back to their chunk, so a regex only ever runs on a chunk that contains its needle.
    texts = [text for _, _, text in chunks]
    joined = "\n".join(texts)
    haystack = joined.lower()
    if len(haystack) != len(joined):  # a few characters (e.g. "İ") grow when lower-cased
        haystack = "".join(ch.lower()[:1] or ch for ch in joined)
    starts = [0]
    for text in texts:
        starts.append(starts[-1] + len(text) + 1)
    starts.pop()

    where: dict[str, list[int]] = {}  # needle -> chunks that contain it (needles repeat across rows)
    found: dict[tuple[str, int, int], Match] = {}
    for sig in signatures.signatures:
        candidates: set[int] = set()
        for needle in sig.needles:
            if needle not in where:
                where[needle] = _chunks_containing(haystack, starts, needle)
            candidates.update(where[needle])
        ordered = sorted(candidates)
        if len(ordered) > MAX_CANDIDATES:
            notes.append(
                f"{sig.id}: only the first {MAX_CANDIDATES} of {len(ordered)} candidate lines were searched"
            )
            ordered = ordered[:MAX_CANDIDATES]
        for index in ordered:
            number, offset, text = chunks[index]
            for m in sig.regex.finditer(text):
                key = (sig.id, number, offset + m.start())
                if key not in found:
                    groups = {k: v for k, v in m.groupdict().items() if v}
                    found[key] = Match(sig.id, sig.finding, sig.specificity, number, m.group(0), groups)

    explained = {m.line for m in found.values() if m.specificity >= FALLBACK_SPECIFICITY}
    matches = sorted(
        (m for m in found.values() if m.specificity >= FALLBACK_SPECIFICITY or m.line not in explained),
        key=lambda m: (m.line, -m.specificity, m.signature),
    )
    return Explanation(
        findings=_rank(matches, signatures),
        matches=tuple(matches[:MAX_MATCHES]),
        notes=tuple(notes),
        lines=len(lines),
    )


def _chunks_containing(haystack: str, starts: list[int], needle: str) -> list[int]:
    """Indexes of the chunks whose text contains needle (one str.find per hit, then skip the chunk)."""
    out = []
    at = haystack.find(needle)
    while at != -1:
        index = bisect.bisect_right(starts, at) - 1
        out.append(index)
        # the regex search of this chunk covers every match inside it: continue in the next chunk
        at = haystack.find(needle, starts[index + 1]) if index + 1 < len(starts) else -1
    return out


def _rank(matches: list[Match], signatures: SignatureSet) -> tuple[ExplainedFinding, ...]:
    """One finding per id: its best match (most specific, then earliest); findings ranked the same way."""
    best: dict[str, Match] = {}
    counts: dict[str, int] = {}
    others: dict[str, dict[str, None]] = {}
    for m in matches:
        counts[m.finding] = counts.get(m.finding, 0) + 1
        others.setdefault(m.finding, {})[m.signature] = None
        current = best.get(m.finding)
        if current is None or (-m.specificity, m.line) < (-current.specificity, current.line):
            best[m.finding] = m
    ranked = sorted(best.values(), key=lambda m: (-m.specificity, m.line, m.finding))
    out = []
    for m in ranked:
        sig = signatures.by_id(m.signature)
        out.append(
            ExplainedFinding(
                finding=m.finding,
                signature=m.signature,
                specificity=m.specificity,
                line=m.line,
                text=m.text,
                groups=m.groups,
                title=sig.title,
                meaning=sig.meaning,
                fix=sig.fix,
                torch_versions=sig.torch_versions,
                source=sig.source,
                related=sig.related,
                occurrences=counts[m.finding],
                also_matched=tuple(s for s in others[m.finding] if s != m.signature),
            )
        )
    return tuple(out)
