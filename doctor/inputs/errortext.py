"""Error-message signatures for ``torchdoctor explain``: load them, normalise pasted text, match, rank.

Users arrive with an error message, not a machine description. This module turns whatever they paste
(one line, a traceback, a pip or CI log of any size, a GitHub issue with Markdown, ANSI colours, CRLF,
HTML entities, text in another language around the message) into candidate findings, each with the
same id ``torchdoctor check`` uses for that cause, ranked by how specific the match is.

Pure and stdlib-only: the only input is the text (str, bytes, or an iterable of pieces of either, such
as the blocks of a file being read) and the signature data (normally ``compat_tables/signatures.json``);
nothing is read from disk, run or printed.

Bounded memory and linear time, whatever the input:

* the text is streamed: it is decoded, normalised and searched in blocks of whole lines, and only the
  matches are kept (per finding: the best one and counts; the first ``MAX_MATCHES`` in full), never
  the text, so a log of any size is searched from its first line to its last,
* a line longer than ``MAX_LINE_CHARS`` is searched up to there and the rest skipped (and counted),
* long lines are cut into overlapping chunks of at most ``MAX_CHUNK_CHARS``,
* every signature has literal "needles" derived from its pattern; a plain substring search over the
  lower-cased block finds the only chunks its regex is run on,
* patterns are validated on load: no nested quantifiers, no unbounded quantifier on a group, no
  back-references, so no pattern can backtrack catastrophically inside a bounded chunk.

What could not be read is counted and said in the notes: bytes that were not valid UTF-8, NUL and
other control characters, lines cut at ``MAX_LINE_CHARS``.

A signature can span lines (``lines``: the pattern runs on that many lines joined by spaces, starting
at the line with its needle) and can be judged (``judge`` names a function over its named groups whose
answer must equal the row's ``outcome``): torch's capability range warning says on two lines which GPU
and which range, and whether the GPU is below the range, just above it or a major above decides the
cause.

API::

    sigs = load_signatures(json_text_or_dict)            # doctor/compat/signatures.py; ValueError if bad
    result = explain_text(pasted, sigs)                  # -> Explanation
    result = explain_stream(iter(read_block, b""), sigs) # the same for a stream of pieces
    result.findings[0].finding                           # e.g. "gpu-arch-unsupported"
"""

from __future__ import annotations

import bisect
import codecs
import html
import re
from collections.abc import Iterable
from dataclasses import dataclass

from doctor.compat.signatures import SignatureSet, load_signatures  # noqa: F401 - part of the matcher's API

PIECE_CHARS = 1 << 20  # str input is fed in pieces of this many characters, like a file read in blocks
MAX_LINE_CHARS = 1 << 20  # a line is searched up to here; the rest of it is skipped and counted
MAX_CHUNK_CHARS = 4096  # regexes only ever run on this much text at once
CHUNK_OVERLAP = 512  # a message split by the chunking still lies whole in one chunk
MAX_MATCHES = 1000  # raw matches kept for the caller (the first ones); ranking counts them all
MAX_CANDIDATES = 5000  # chunks one row's regex may run on per block (earliest first): bounds hostile input
SHOWN_CHARS = 200  # a match over several lines is shown in at most this many characters
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
# control characters (counted: binary junk shows up here) and invisible format characters (zero-width
# spaces, a BOM: removed without a word)
_CONTROL_RE = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]")
_INVISIBLE_RE = re.compile(r"[\u200b-\u200d\u2060\ufeff]")
# what the UTF-8 decoder's surrogateescape left for each byte that was not UTF-8
_ESCAPED_BYTE_RE = re.compile("[\udc80-\udcff]")


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
    notes: tuple[str, ...]  # what could not be read as it was, with counts (bytes replaced, lines cut, ...)
    lines: int  # lines in the normalised text


# --- reading: pieces of bytes or text -> blocks of normalised lines ----------------------------------


def _first_break(text: str) -> int:
    ends = [at for at in (text.find("\n"), text.find("\r")) if at != -1]
    return min(ends) if ends else -1


def _last_break(text: str, end: int | None = None) -> int:
    end = len(text) if end is None else end
    return max(text.rfind("\n", 0, end), text.rfind("\r", 0, end))


class _Reader:
    """Decodes pieces (bytes: UTF-8, or UTF-16 with a BOM; or str) and hands out text blocks that end at a
    line break, each normalised into lines. Holds at most one unfinished line (cut at MAX_LINE_CHARS)."""

    def __init__(self) -> None:
        self._decoder = None
        self._utf8 = True
        self._head = b""  # the first bytes, until the BOM can be told
        self._pending = ""  # the unfinished last line
        self._skipping = False  # inside the rest of a line cut at MAX_LINE_CHARS
        self._eat_lf = False  # the cut line ended with CR at a piece's end: a following LF belongs to it
        self.invalid_bytes = self.nul = self.control = self.cut_lines = self.cut_chars = 0

    def feed(self, piece: str | bytes) -> list[list[str]]:
        if isinstance(piece, (bytes, bytearray, memoryview)):
            piece = bytes(piece)
        elif not isinstance(piece, str):
            raise TypeError(f"explain needs str or bytes, not {type(piece).__name__}")
        blocks = []
        # pieces of at most PIECE_CHARS: only the line that was pending can then grow past MAX_LINE_CHARS
        for at in range(0, len(piece), PIECE_CHARS):
            part = piece[at : at + PIECE_CHARS]
            text = part if isinstance(part, str) else self._decode(part, final=False)
            blocks += [self._lines(t) for t in self._take(text)]
        return blocks

    def finish(self) -> list[list[str]]:
        text = self._decode(b"", final=True) if (self._decoder is not None or self._head) else ""
        return [self._lines(t) for t in self._take(text, final=True)]

    def _decode(self, data: bytes, final: bool) -> str:
        if self._decoder is None:
            self._head += data
            if len(self._head) < 2 and not final:
                return ""
            data, self._head = self._head, b""
            if data.startswith((b"\xff\xfe", b"\xfe\xff")):
                self._decoder, self._utf8 = codecs.getincrementaldecoder("utf-16")(errors="replace"), False
            else:
                self._decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        text = self._decoder.decode(data, final)
        if self._utf8:
            if _ESCAPED_BYTE_RE.search(text):
                text, count = _ESCAPED_BYTE_RE.subn("\ufffd", text)
                self.invalid_bytes += count
        elif "\ufffd" in text:
            self.invalid_bytes += text.count("\ufffd")
        return text

    def _take(self, text: str, final: bool = False) -> list[str]:
        """The text blocks this piece completes (each ends at a line break, except at the end)."""
        out = []
        if self._eat_lf and text:
            self._eat_lf = False
            if text.startswith("\n"):
                text = text[1:]
        if self._skipping:
            at = _first_break(text)
            if at == -1:
                self.cut_chars += len(text)
                return out
            self.cut_chars += at
            if text[at] == "\r":
                if at + 1 < len(text):
                    at += text[at + 1] == "\n"
                else:
                    self._eat_lf = True
            text, self._skipping = text[at + 1 :], False
        text = self._pending + text
        first = _first_break(text)
        if first > MAX_LINE_CHARS:  # the pending line ends here, too long: search its start only
            self.cut_lines += 1
            self.cut_chars += first - MAX_LINE_CHARS
            text = text[:MAX_LINE_CHARS] + text[first:]
        end = _last_break(text)
        if not final and end >= 0 and end == len(text) - 1 and text[end] == "\r":
            end = _last_break(text, end)  # a CR at the very end may be the first half of CRLF
        if final:
            end = len(text) - 1
        out.append(text[: end + 1]) if end >= 0 else None
        self._pending = text[end + 1 :]
        if len(self._pending) > MAX_LINE_CHARS:
            out.append(self._pending[:MAX_LINE_CHARS] + "\n")
            self.cut_lines += 1
            self.cut_chars += len(self._pending) - MAX_LINE_CHARS
            self._pending, self._skipping = "", True
        return [t for t in out if t]

    def _lines(self, text: str) -> list[str]:
        """Normalise a block of whole lines: NULs, control characters and ANSI/OSC escapes (and their caret
        notation) out, CRLF and lone CR to LF, HTML entities to characters (non-breaking spaces to
        spaces), Markdown code fences, block quote markers and ** emphasis out."""
        if "\x00" in text:
            # UTF-16 without a BOM, or binary: keep the ASCII that is there
            self.nul += text.count("\x00")
            text = text.replace("\x00", "")
        if "\x1b" in text or "^[[" in text:
            text = _ANSI_RE.sub("", text)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "&" in text:
            text = html.unescape(text)
        text, count = _CONTROL_RE.subn("", text)
        self.control += count
        text = _INVISIBLE_RE.sub("", text).replace("\xa0", " ")  # &nbsp; and pasted non-breaking spaces
        # whole-block passes (C speed) rather than a Python loop over the lines
        if "```" in text or "~~~" in text:
            text = _FENCE_RE.sub("", text)
        if ">" in text:
            text = _QUOTE_RE.sub("", text)
        text = text.replace("**", "")
        lines = text.split("\n")
        if not lines[-1]:
            lines.pop()  # the newline that ends the last line starts no line of its own
        return lines

    def notes(self) -> list[str]:
        notes = []
        if self.invalid_bytes:
            notes.append(f"{self.invalid_bytes} byte(s) were not valid UTF-8 text and were replaced")
        if self.nul:
            notes.append(f"{self.nul} NUL byte(s) were removed")
        if self.control:
            notes.append(f"{self.control} other control character(s) were removed")
        if self.cut_lines:
            notes.append(
                f"{self.cut_lines} line(s) longer than {MAX_LINE_CHARS} characters were searched up to "
                f"there: {self.cut_chars} character(s) after that were not searched"
            )
        return notes


def _pieces(data: str | bytes) -> Iterable[str | bytes]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
    elif not isinstance(data, str):
        raise TypeError(f"explain needs str or bytes, not {type(data).__name__}")
    return (data[i : i + PIECE_CHARS] for i in range(0, len(data), PIECE_CHARS))


def normalize_text(data: str | bytes) -> tuple[list[str], list[str]]:
    """(lines, notes): the pasted text as plain lines, and what could not be read as it was. For small
    input (it holds every line); explain_text and explain_stream never hold the text."""
    reader = _Reader()
    lines: list[str] = []
    for piece in _pieces(data):
        for block in reader.feed(piece):
            lines += block
    for block in reader.finish():
        lines += block
    return lines, reader.notes()


# --- what the numbers in a message mean -----------------------------------------------------------------


def decode_cuda_version(number: str | None) -> str | None:
    """CUDA's integer version (cudaDriverGetVersion, "found version 11040") as "11.4"."""
    if not number or not number.isdigit() or not 1000 <= int(number) < 100000:
        return None
    value = int(number)
    return f"{value // 1000}.{value % 1000 // 10}"


# torch 1.x printed "cuda runtime error (N)" with the runtime's error numbers before CUDA 11 renumbered them
# (cuda_runtime_api.h of CUDA 10.2): the number alone says which error it was.
OLD_CUDA_ERRORS = {
    2: "cudaErrorMemoryAllocation: out of memory",
    4: "cudaErrorLaunchFailure: a kernel failed",
    6: "cudaErrorLaunchTimeout: a kernel ran too long (display watchdog)",
    8: "cudaErrorInvalidDeviceFunction: no kernel for this GPU's architecture",
    10: "cudaErrorInvalidDevice: no such device index",
    30: "cudaErrorUnknown: the driver is in a bad state",
    35: "cudaErrorInsufficientDriver: the driver is older than the CUDA runtime",
    38: "cudaErrorNoDevice: no CUDA-capable GPU (or none visible)",
    46: "cudaErrorDevicesUnavailable: the GPU is busy or in exclusive mode",
    48: "cudaErrorNoKernelImageForDevice: no kernel image for this GPU",
    59: "cudaErrorAssert: a device-side assert fired (an index out of range)",
    77: "cudaErrorIllegalAddress: an illegal memory access",
}


def decode_runtime_error(number: str | None) -> str | None:
    """torch 1.x's "cuda runtime error (8)" as "cudaErrorInvalidDeviceFunction: ..." (CUDA < 11 numbering)."""
    if not number or not number.isdigit():
        return None
    return OLD_CUDA_ERRORS.get(int(number))


# --- judges: a signature whose cause depends on the numbers in the message ----------------------------


def _capability(text: str | None) -> tuple[int, int] | None:
    match = re.fullmatch(r"(\d{1,3})\.(\d{1,3})", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def capability_range(groups: dict[str, str]) -> str | None:
    """Where the GPU's capability (``cc``) lies against the build's range (``min`` - ``max``):
    "below-min", "above-max-same-major" (sm_120 kernels run on sm_121: harmless), "above-max-newer-major"
    (no kernel of the GPU's major: a newer torch), "within"; None when a number is missing."""
    cc, low, high = (_capability(groups.get(k)) for k in ("cc", "min", "max"))
    if cc is None or low is None or high is None:
        return None
    if cc < low:
        return "below-min"
    if cc > high:
        return "above-max-same-major" if cc[0] == high[0] else "above-max-newer-major"
    return "within"


def versions_differ(groups: dict[str, str]) -> str | None:
    """"differ" when nvidia-smi's own version (``smi``) is not the driver's (``driver``), else "same"."""
    smi, driver = groups.get("smi"), groups.get("driver")
    if not smi or not driver:
        return None
    return "same" if smi == driver else "differ"


JUDGES = {"capability-range": capability_range, "versions-differ": versions_differ}


# --- matching --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Hit:
    match: Match
    start: int  # offset in the line
    end: int


class _Matcher:
    """Searches blocks of normalised lines and keeps what ranking needs: per finding its best match,
    how often it matched and which signatures did; the first MAX_MATCHES matches in full."""

    def __init__(self, signatures: SignatureSet) -> None:
        self.signatures = signatures
        self.window = max((s.lines for s in signatures.signatures), default=1)
        self.carry: list[str] = []  # the last lines of a block, searched with the next (lookahead)
        self.base = 1  # line number of carry[0] / the next block's first line
        self.best: dict[str, Match] = {}
        self.counts: dict[str, int] = {}
        self.others: dict[str, dict[str, None]] = {}
        self.matches: list[Match] = []
        self.split_lines = 0  # searched lines longer than MAX_CHUNK_CHARS
        self.unsearched: dict[str, int] = {}  # signature -> candidate chunks not searched (MAX_CANDIDATES)

    def feed(self, lines: list[str], final: bool = False) -> None:
        lines = self.carry + lines if self.carry else lines
        count = len(lines) if final else max(0, len(lines) - (self.window - 1))
        if count:
            self._search(lines, count)
        self.carry = lines[count:]
        self.base += count

    def _search(self, lines: list[str], count: int) -> None:
        """Search lines[:count] as start lines; the lines after them are there for multi-line signatures."""
        chunks = self._chunks(lines, count)
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
        first_chunk = {}  # line index -> its first chunk (a window starts at the line's start)
        for index, (at, _, _) in enumerate(chunks):
            first_chunk.setdefault(at, index)

        where: dict[str, list[int]] = {}  # needle -> chunks that contain it (needles repeat across rows)
        found: dict[tuple[str, int, int], _Hit] = {}
        for sig in self.signatures.signatures:
            span = sig.lines
            candidates: set[int] = set()
            for needle in sig.needles:
                if needle not in where:
                    where[needle] = _chunks_containing(haystack, starts, needle)
                if span == 1:
                    candidates.update(i for i in where[needle] if chunks[i][0] < count)
                    continue
                # a match spanning lines starts on the needle's line or on one of the span - 1 before it
                for index in where[needle]:
                    at = chunks[index][0]
                    if at < count:
                        candidates.add(index)  # the needle's own piece (a long line has several)
                    candidates.update(first_chunk[s] for s in range(max(0, at - span + 1), min(at, count)))
            if not candidates:
                continue
            ordered = sorted(candidates)
            if len(ordered) > MAX_CANDIDATES:
                self.unsearched[sig.id] = self.unsearched.get(sig.id, 0) + len(ordered) - MAX_CANDIDATES
                ordered = ordered[:MAX_CANDIDATES]
            judge = JUDGES.get(sig.judge) if sig.judge else None
            for index in ordered:
                at, offset, text = chunks[index]
                own = len(text)
                if span > 1:  # the following lines too (each as much as one chunk holds), joined by spaces
                    text += "".join(" " + line[:MAX_CHUNK_CHARS] for line in lines[at + 1 : at + span])
                for m in sig.regex.finditer(text):
                    if m.start() >= own:
                        break  # it starts on a later line: found from that line's own window
                    key = (sig.id, at, offset + m.start())
                    if key in found:
                        continue
                    groups = {k: v for k, v in m.groupdict().items() if v}
                    if judge is not None and judge(groups) != sig.outcome:
                        continue
                    shown = m.group(0) if span == 1 else _shown(m.group(0))
                    match = Match(sig.id, sig.finding, sig.specificity, self.base + at, shown, groups)
                    found[key] = _Hit(match, offset + m.start(), offset + m.end())
        self._keep(found.values())

    def _chunks(self, lines: list[str], count: int) -> list[tuple[int, int, str]]:
        """(index of the line, offset in the line, text) pieces of at most MAX_CHUNK_CHARS, overlapping, of
        every line (those after ``count`` are the lookahead, searched as start lines with the next block)."""
        chunks = []
        step = MAX_CHUNK_CHARS - CHUNK_OVERLAP
        for at, line in enumerate(lines):
            if len(line) <= MAX_CHUNK_CHARS:
                chunks.append((at, 0, line))
                continue
            self.split_lines += at < count
            for start in range(0, len(line) - CHUNK_OVERLAP, step):
                chunks.append((at, start, line[start : start + MAX_CHUNK_CHARS]))
        return chunks

    def _keep(self, hits: Iterable[_Hit]) -> None:
        by_line: dict[int, list[_Hit]] = {}
        for hit in hits:
            by_line.setdefault(hit.match.line, []).append(hit)
        for line in sorted(by_line):
            here = by_line[line]
            explained = any(h.match.specificity >= FALLBACK_SPECIFICITY for h in here)
            kept = [
                h
                for h in here
                if (h.match.specificity >= FALLBACK_SPECIFICITY or not explained) and not _covered(h, here)
            ]
            for hit in sorted(kept, key=lambda h: (-h.match.specificity, h.match.signature)):
                self._count(hit.match)

    def _count(self, m: Match) -> None:
        self.counts[m.finding] = self.counts.get(m.finding, 0) + 1
        self.others.setdefault(m.finding, {})[m.signature] = None
        current = self.best.get(m.finding)
        if current is None or (-m.specificity, m.line) < (-current.specificity, current.line):
            self.best[m.finding] = m
        if len(self.matches) < MAX_MATCHES:
            self.matches.append(m)

    def notes(self) -> list[str]:
        notes = []
        if self.split_lines:
            notes.append(f"{self.split_lines} line(s) longer than {MAX_CHUNK_CHARS} characters were searched "
                         "in overlapping pieces")
        for sig, skipped in self.unsearched.items():
            notes.append(f"{sig}: {skipped} candidate piece(s) were not searched (over {MAX_CANDIDATES} "
                         "in a block)")
        return notes


def _shown(text: str) -> str:
    """A match over several lines as one line to show: blanks collapsed, the middle of a long one left out
    (its named groups keep every value)."""
    text = " ".join(text.split())
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 60] + " … " + text[-57:]


def _covered(hit: _Hit, here: list[_Hit]) -> bool:
    """A general message inside a more specific one of another cause on the same line (the old "Found
    GPU0 ... cuda capability 12.1" prefix of the range warning) is not a cause of its own."""
    return any(
        o.match.specificity > hit.match.specificity
        and o.match.finding != hit.match.finding
        and o.start <= hit.start
        and hit.end <= o.end
        for o in here
    )


def explain_stream(pieces: Iterable[str | bytes], signatures: SignatureSet) -> Explanation:
    """Every known signature in a stream of pieces (bytes or str, e.g. a file's blocks), in bounded
    memory: the pieces are searched as they come and only the matches are kept."""
    reader = _Reader()
    matcher = _Matcher(signatures)
    lines = 0
    for piece in pieces:
        for block in reader.feed(piece):
            lines += len(block)
            matcher.feed(block)
    for block in reader.finish():
        lines += len(block)
        matcher.feed(block)
    matcher.feed([], final=True)
    return Explanation(
        findings=_rank(matcher, signatures),
        matches=tuple(matcher.matches),
        notes=tuple(reader.notes() + matcher.notes()),
        lines=lines,
    )


def explain_text(data: str | bytes, signatures: SignatureSet) -> Explanation:
    """Every known signature in the pasted text, as ranked candidate findings. Never raises on input."""
    return explain_stream(_pieces(data), signatures)


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


def _rank(matcher: _Matcher, signatures: SignatureSet) -> tuple[ExplainedFinding, ...]:
    """One finding per id: its best match (most specific, then earliest); findings ranked the same way."""
    ranked = sorted(matcher.best.values(), key=lambda m: (-m.specificity, m.line, m.finding))
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
                occurrences=matcher.counts[m.finding],
                also_matched=tuple(s for s in matcher.others[m.finding] if s != m.signature),
            )
        )
    return tuple(out)
