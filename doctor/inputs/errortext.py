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

    sigs = load_signatures(json_text_or_dict)            # -> SignatureSet, ValueError on a bad row
    result = explain_text(pasted, sigs)                  # -> Explanation
    result.findings[0].finding                           # e.g. "gpu-arch-unsupported"
"""

from __future__ import annotations

import bisect
import html
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1
MAX_INPUT_CHARS = 4_000_000  # about the last 4 MB of a log; older text is dropped (and said so)
MAX_CHUNK_CHARS = 4096  # regexes only ever run on this much text at once
CHUNK_OVERLAP = 512  # a message split by the chunking still lies whole in one chunk
MAX_MATCHES = 1000  # raw matches kept for the caller; ranking uses them all
MAX_CANDIDATES = 5000  # pieces one signature's regex may run on (earliest first): bounds hostile input
MIN_NEEDLE = 4  # shortest literal that is selective enough to prefilter on
FALLBACK_SPECIFICITY = (
    20  # below this a signature is a fallback: it only counts on lines nothing else explains
)
MAX_BOUND = 1000  # largest {m,n} a pattern may use

_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_DATE_RE = re.compile(r"^\d{4}\.\d{2}\.\d{2}$")
_URL_RE = re.compile(r"^https://[^\s]+$")

_FIELDS = {
    "id": str,
    "finding": str,
    "pattern": str,
    "specificity": int,
    "title": str,
    "meaning": str,
    "fix": str,
    "torch_versions": str,
    "source": str,
    "examples": list,
}
_OPTIONAL_FIELDS = {"related": list}

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


# --- data ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    """One row of signatures.json, with its compiled regex and the needles that prefilter it."""

    id: str
    finding: str
    pattern: str
    specificity: int
    title: str
    meaning: str
    fix: str
    torch_versions: str
    source: str
    examples: tuple[str, ...]
    related: tuple[str, ...]
    regex: re.Pattern = field(repr=False, compare=False)
    needles: tuple[str, ...] = ()  # lower-case; a chunk is a candidate if it contains any of them


@dataclass(frozen=True)
class SignatureSet:
    schema_version: int
    signatures_version: str
    signatures: tuple[Signature, ...]

    def by_id(self, signature_id: str) -> Signature:
        for sig in self.signatures:
            if sig.id == signature_id:
                return sig
        raise KeyError(signature_id)


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


# --- loading and validation ------------------------------------------------------------------------


def load_signatures(data: str | bytes | Mapping[str, Any]) -> SignatureSet:
    """Parse and validate signature data; any problem is one ValueError line naming the row and field."""
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"signatures: not valid JSON ({exc})") from None
    if not isinstance(data, Mapping):
        raise ValueError("signatures: the top level must be a JSON object")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise ValueError(f"signatures: schema_version must be {SCHEMA_VERSION}, got {version!r}")
    sig_version = data.get("signatures_version")
    if not isinstance(sig_version, str) or not _DATE_RE.match(sig_version):
        raise ValueError(f"signatures: signatures_version must be YYYY.MM.DD, got {sig_version!r}")
    rows = data.get("signatures")
    if not isinstance(rows, list) or not rows:
        raise ValueError("signatures: 'signatures' must be a non-empty list")
    seen: set[str] = set()
    sigs = []
    for index, row in enumerate(rows):
        sig = _load_row(index, row)
        if sig.id in seen:
            raise ValueError(f"signatures: row {index} ({sig.id}): field 'id': duplicate id")
        seen.add(sig.id)
        sigs.append(sig)
    return SignatureSet(SCHEMA_VERSION, sig_version, tuple(sigs))


def _load_row(index: int, row: Any) -> Signature:
    where = f"signatures: row {index}"
    if not isinstance(row, Mapping):
        raise ValueError(f"{where}: must be an object")
    if isinstance(row.get("id"), str):
        where += f" ({row['id']})"

    def bad(name: str, why: str) -> ValueError:
        return ValueError(f"{where}: field '{name}': {why}")

    unknown = sorted(set(row) - set(_FIELDS) - set(_OPTIONAL_FIELDS))
    if unknown:
        raise bad(unknown[0], "unknown field")
    for name, kind in _FIELDS.items():
        if name not in row:
            raise bad(name, "missing")
        value = row[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise bad(name, f"must be a {kind.__name__}")
        if kind is str and not value.strip():
            raise bad(name, "must not be empty")
    for name in ("id", "finding"):
        if not _ID_RE.match(row[name]):
            raise bad(name, f"{row[name]!r} is not a kebab-case id")
    if not 0 <= row["specificity"] <= 100:
        raise bad("specificity", "must be between 0 and 100")
    if not _URL_RE.match(row["source"]):
        raise bad("source", "must be an https:// URL")
    examples = row["examples"]
    if not examples or not all(isinstance(e, str) and e.strip() for e in examples):
        raise bad("examples", "must be a non-empty list of non-empty strings")
    related = row.get("related", [])
    if not isinstance(related, list) or not all(isinstance(r, str) and _ID_RE.match(r) for r in related):
        raise bad("related", "must be a list of kebab-case finding ids")
    pattern = row["pattern"]
    try:
        regex = re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise bad("pattern", f"does not compile ({exc})") from None
    problem = _unsafe_pattern(pattern)
    if problem:
        raise bad("pattern", problem)
    needles = _needles(pattern)
    if needles is None:
        raise bad(
            "pattern",
            f"every top-level alternative needs a literal of at least {MIN_NEEDLE} characters "
            "(it is what keeps matching linear)",
        )
    return Signature(
        id=row["id"],
        finding=row["finding"],
        pattern=pattern,
        specificity=row["specificity"],
        title=row["title"],
        meaning=row["meaning"],
        fix=row["fix"],
        torch_versions=row["torch_versions"],
        source=row["source"],
        examples=tuple(examples),
        related=tuple(related),
        regex=regex,
        needles=needles,
    )


def _unsafe_pattern(pattern: str) -> str | None:
    """Why a pattern could backtrack badly, or None.

    A small scanner over the pattern text: it tracks groups, notes whether a group contains a
    quantifier, and rejects (a) a repeating quantifier applied to a group that itself contains one
    (``(a+)+``, ``(?:x{1,9}y){2}``; an optional ``(...)?`` is fine), (b) unbounded quantifiers (``*``,
    ``+``, ``{n,}``) on a group, (c) bounds above MAX_BOUND, (d) back-references. Quantifiers on a single
    character or class stay allowed.
    """
    if len(pattern) > 2000:
        return "longer than 2000 characters"
    stack: list[bool] = []  # per open group: does it contain a quantifier?
    last: str | None = None  # what the next quantifier would apply to: "atom", "group", "group+q"
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 < n and (pattern[i + 1].isdigit() and pattern[i + 1] != "0" or pattern[i + 1] == "k"):
                return "back-references are not allowed"
            i += 2
            last = "atom"
            continue
        if c == "[":
            i = _skip_class(pattern, i)
            last = "atom"
            continue
        if c == "(":
            if pattern.startswith("(?P=", i):
                return "back-references are not allowed"
            if pattern.startswith("(?P<", i):
                close = pattern.find(">", i)
                if close == -1:
                    return "unterminated group name"
                i = close + 1
            elif pattern.startswith(("(?<=", "(?<!"), i):
                i += 4
            elif pattern.startswith(("(?:", "(?=", "(?!"), i):
                i += 3
            elif pattern.startswith("(?", i):
                return "only (?:...), (?P<name>...) and lookarounds are allowed as group syntax"
            else:
                i += 1
            stack.append(False)
            last = None
            continue
        if c == ")":
            if not stack:
                return "unbalanced ')'"
            had_quantifier = stack.pop()
            if had_quantifier and stack:
                stack[-1] = True  # the enclosing group now contains a quantifier too
            last = "group+q" if had_quantifier else "group"
            i += 1
            continue
        quant = _quantifier_at(pattern, i)
        if quant is not None:
            end, unbounded, upper = quant
            if upper is not None and upper > MAX_BOUND:
                return f"bound {{{upper}}} is above {MAX_BOUND}"
            if last == "group+q" and (unbounded or (upper or 0) > 1):
                # an optional group (?) cannot repeat, so only a repeated one can backtrack badly
                return "nested quantifier (a repeated group that contains a quantifier)"
            if last == "group" and unbounded:
                return "unbounded quantifier on a group; bound it, e.g. {0,20}"
            if stack:
                stack[-1] = True
            i = end
            if i < n and pattern[i] in "?+":  # lazy or possessive suffix
                i += 1
            last = None
            continue
        last = "atom" if c not in "|^$" else None
        i += 1
    if stack:
        return "unbalanced '('"
    return None


def _skip_class(pattern: str, i: int) -> int:
    """Index just past the character class starting at pattern[i] == '['."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


_BRACE_RE = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")


def _quantifier_at(pattern: str, i: int) -> tuple[int, bool, int | None] | None:
    """(end index, unbounded?, upper bound) when a quantifier starts at pattern[i]."""
    c = pattern[i]
    if c in "*+":
        return i + 1, True, None
    if c == "?":
        return i + 1, False, 1
    if c == "{":
        m = _BRACE_RE.match(pattern, i)
        if m and (m.group(1) or m.group(3)):
            if m.group(2) and not m.group(3):
                return m.end(), True, None
            upper = int(m.group(3) or m.group(1))
            return m.end(), False, upper
    return None


_LITERAL_ESCAPES = set(".^$*+?()[]{}|\\/-\"'#&~!%@,:;<>=` ")


def _needles(pattern: str) -> tuple[str, ...] | None:
    """The longest literal of each top-level alternative, lower-cased; None if one has none.

    A match of the pattern must contain the needle of the alternative that matched, so searching the
    text for the needles (a C-speed substring search) finds every place the regex can match.
    """
    alternatives: list[list[str]] = [[]]  # literal runs per alternative
    run: list[str] = []
    i, n = 0, len(pattern)

    def close_run() -> None:
        if run:
            alternatives[-1].append("".join(run))
            run.clear()

    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt in _LITERAL_ESCAPES:
                run.append(nxt)
            else:
                close_run()  # \d, \w, \s, \b, ...
            i += 2
        elif c == "[":
            close_run()
            i = _skip_class(pattern, i)
        elif c == "(":
            close_run()
            depth = 0
            while i < n:
                ch = pattern[i]
                if ch == "\\":
                    i += 2
                    continue
                if ch == "[":
                    i = _skip_class(pattern, i)
                    continue
                depth += ch == "("
                depth -= ch == ")"
                i += 1
                if depth == 0:
                    break
        elif c == "|":
            close_run()
            alternatives.append([])
            i += 1
        elif _quantifier_at(pattern, i) is not None:
            # the quantifier makes the previous character optional or repeated: not a fixed literal
            if run:
                run.pop()
            close_run()
            i = _quantifier_at(pattern, i)[0]
            if i < n and pattern[i] in "?+":
                i += 1
        elif c in ".^$":
            close_run()
            i += 1
        else:
            run.append(c)
            i += 1
    close_run()
    needles = []
    for runs in alternatives:
        best = max((r.strip() for r in runs), key=len, default="")
        if len(best) < MIN_NEEDLE:
            return None
        needles.append(best.lower())
    return tuple(dict.fromkeys(needles))


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
    return text.split("\n"), notes


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
