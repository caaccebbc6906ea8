"""torch's error messages as data (``compat_tables/signatures.json``): the rows, their validation on load, and
the bundled file read once. ``torchdoctor explain`` matches pasted text against the ``signatures`` rows
(doctor/inputs/errortext.py); the smoke-test rule (doctor/rules/runtime.py) matches what torch said on this
machine against rows it names, from that list where its wording is explain's and from the ``smoke_test`` list
where it differs, so torch's wording lives in one place. A pattern that could backtrack catastrophically is
refused here, so no matcher can be made slow by the text it is given. Pure but for reading the bundled file.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1
MIN_NEEDLE = 4  # shortest literal that is selective enough to prefilter on
MAX_BOUND = 1000  # largest {m,n} a pattern may use
MAX_FILE_BYTES = 4 << 20  # the bundled file is ~70 KB

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
_OPTIONAL_FIELDS = {"related": list, "lines": int, "judge": str, "outcome": str}
MAX_LINES = 40  # the most lines one row may span (a collect_env paste around its error)
# A judged row matches only when the judge's answer over its named groups is the row's ``outcome``; what each
# judge computes is in doctor/inputs/errortext.py (JUDGES), which must name the same ones.
JUDGES = ("capability-range", "versions-differ")
# A smoke_test row: torch's words and where they come from; the rule writes its findings itself.
_SMOKE_FIELDS = {"id": str, "finding": str, "pattern": str, "source": str, "examples": list}


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
    lines: int = 1  # the pattern runs on this many lines joined by spaces (a message printed over several)
    judge: str | None = None  # a function of the named groups (JUDGES) ...
    outcome: str | None = None  # ... whose answer must be this for the row to match


@dataclass(frozen=True)
class Wording:
    """One row of the ``smoke_test`` list: words of torch the smoke-test rule matches, for ``finding``."""

    id: str
    finding: str
    pattern: str
    source: str
    examples: tuple[str, ...]
    regex: re.Pattern = field(repr=False, compare=False)


@dataclass(frozen=True)
class SignatureSet:
    schema_version: int
    signatures_version: str
    signatures: tuple[Signature, ...]
    smoke_test: tuple[Wording, ...] = ()

    def by_id(self, signature_id: str) -> Signature:
        for sig in self.signatures:
            if sig.id == signature_id:
                return sig
        raise KeyError(signature_id)

    def regex(self, row_id: str) -> re.Pattern:
        """The compiled pattern of the row ``row_id`` of either list."""
        for row in (*self.signatures, *self.smoke_test):
            if row.id == row_id:
                return row.regex
        raise KeyError(row_id)


@functools.cache  # the tool's own data file: read and checked once per process, like the code that uses it
def bundled_signatures() -> SignatureSet:
    """compat_tables/signatures.json as shipped; OSError or a one-line ValueError when it cannot be used."""
    from doctor.model.files import read_bytes
    from doctor.table.files import bundled_path

    return load_signatures(read_bytes(bundled_path("signatures.json"), MAX_FILE_BYTES))


# --- loading and validation ------------------------------------------------------------------------


def load_signatures(data: str | bytes | Mapping[str, Any]) -> SignatureSet:
    """Parse and validate signature data; any problem is one ValueError line naming the row and field."""
    if isinstance(data, (str, bytes)):
        import json

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
    smoke = data.get("smoke_test", [])
    if not isinstance(smoke, list):
        raise ValueError("signatures: 'smoke_test' must be a list")
    seen: set[str] = set()
    sigs = [_unique(seen, index, _load_row(index, row), "row") for index, row in enumerate(rows)]
    words = [_unique(seen, index, _load_wording(index, row), "smoke_test row")
             for index, row in enumerate(smoke)]
    return SignatureSet(SCHEMA_VERSION, sig_version, tuple(sigs), tuple(words))


def _unique(seen: set[str], index: int, row, kind: str):
    """``row`` when no row of either list has its id yet (the smoke-test rule names rows by id)."""
    if row.id in seen:
        raise ValueError(f"signatures: {kind} {index} ({row.id}): field 'id': duplicate id")
    seen.add(row.id)
    return row


def _checked(row: Any, where: str, fields: dict, optional: dict):
    """``where`` with the row's id, and the ``bad`` that words a problem with one of its fields; a ValueError
    for a row that is not an object, a field unknown, missing, of the wrong type or empty."""
    if not isinstance(row, Mapping):
        raise ValueError(f"{where}: must be an object")
    if isinstance(row.get("id"), str):
        where += f" ({row['id']})"

    def bad(name: str, why: str) -> ValueError:
        return ValueError(f"{where}: field '{name}': {why}")

    unknown = sorted(set(row) - set(fields) - set(optional))
    if unknown:
        raise bad(unknown[0], "unknown field")
    for name, kind in fields.items():
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
    if not _URL_RE.match(row["source"]):
        raise bad("source", "must be an https:// URL")
    examples = row["examples"]
    if not examples or not all(isinstance(e, str) and e.strip() for e in examples):
        raise bad("examples", "must be a non-empty list of non-empty strings")
    return bad


def _compiled(pattern: str, bad) -> tuple[re.Pattern, tuple[str, ...]]:
    """The pattern compiled (case-insensitive, as every row is matched) and its needles; refused when it does
    not compile or could backtrack badly."""
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
    return regex, needles


def _load_row(index: int, row: Any) -> Signature:
    bad = _checked(row, f"signatures: row {index}", _FIELDS, _OPTIONAL_FIELDS)
    if not 0 <= row["specificity"] <= 100:
        raise bad("specificity", "must be between 0 and 100")
    related = row.get("related", [])
    if not isinstance(related, list) or not all(isinstance(r, str) and _ID_RE.match(r) for r in related):
        raise bad("related", "must be a list of kebab-case finding ids")
    lines = row.get("lines", 1)
    if not isinstance(lines, int) or isinstance(lines, bool) or not 1 <= lines <= MAX_LINES:
        raise bad("lines", f"must be an int between 1 and {MAX_LINES}")
    judge, outcome = row.get("judge"), row.get("outcome")
    if judge is not None and judge not in JUDGES:
        raise bad("judge", f"must be one of {', '.join(JUDGES)}")
    if (judge is None) != (outcome is None) or not (outcome is None or isinstance(outcome, str)
                                                    and _ID_RE.match(outcome)):
        raise bad("outcome", "a judged row needs both 'judge' and a kebab-case 'outcome'")
    regex, needles = _compiled(row["pattern"], bad)
    return Signature(
        id=row["id"],
        finding=row["finding"],
        pattern=row["pattern"],
        specificity=row["specificity"],
        title=row["title"],
        meaning=row["meaning"],
        fix=row["fix"],
        torch_versions=row["torch_versions"],
        source=row["source"],
        examples=tuple(row["examples"]),
        related=tuple(related),
        regex=regex,
        needles=needles,
        lines=lines,
        judge=judge,
        outcome=outcome,
    )


def _load_wording(index: int, row: Any) -> Wording:
    bad = _checked(row, f"signatures: smoke_test row {index}", _SMOKE_FIELDS, {})
    regex, _ = _compiled(row["pattern"], bad)
    for number, example in enumerate(row["examples"]):
        if not regex.search(example):
            raise bad("examples", f"example {number} does not match the pattern")
    return Wording(row["id"], row["finding"], row["pattern"], row["source"], tuple(row["examples"]), regex)


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
