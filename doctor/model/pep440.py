"""PEP 440 comparisons for plain release versions, without importing packaging (stdlib only).

Importing ``packaging.version`` and ``packaging.specifiers`` costs about 12 ms (they compile two large
regular expressions), more than a tenth of a whole ``check --no-smoke``. Nearly every version a check
compares is a plain release: the table's "2.7" and "12.8", a Python's "3.11.7", a companion's "0.22.1".
For those the rules are short, and they are applied here:

* a release is dot-separated numbers; trailing zeros do not count ("2.7" == "2.7.0"), leading zeros
  neither ("2.07" == "2.7");
* ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` compare releases; for a plain release candidate the
  exclusions PEP 440 adds to ``<`` and ``>`` (pre-, post-releases and local labels of the bound) never
  apply, so they are the tuple comparisons;
* a specifier set holds a version when every comma-separated part does ("" holds every version).

Everything else (pre-, post- and dev-releases, epochs, ``v`` prefixes, local labels in a specifier,
wildcards, ``~=`` and ``===``) goes to packaging, imported only then. tests/test_pep440.py holds the two
answers equal over every pair of a grid of versions and specifiers.
"""

from __future__ import annotations

import functools
import re

# ASCII digits only (\d also matches other scripts' digits); at most 40 per part (doctor/model/versions.py's
# limit), so int() is cheap and nothing here meets the 4,300-digit limit that packaging's int() would hit.
_RELEASE = re.compile(r"\s*([0-9]{1,40}(?:\.[0-9]{1,40})*)\s*")
_CLAUSE = re.compile(r"\s*(==|!=|<=|>=|<|>)\s*([0-9]{1,40}(?:\.[0-9]{1,40})*)\s*")


def release_key(text: str) -> tuple[int, ...] | None:
    """The comparison key of a plain release ("2.7.0" -> (2, 7)), or None when ``text`` is anything else."""
    match = _RELEASE.fullmatch(text)
    if match is None:
        return None
    parts = [int(part) for part in match.group(1).split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def normal_form(text: str) -> str:
    """packaging's ``str(Version(text))``: "2.07.1" -> "2.7.1" (trailing zeros stay: "2.7.0").

    Raises packaging's InvalidVersion for what is not a version at all.
    """
    match = _RELEASE.fullmatch(text)
    if match is not None:
        return ".".join(str(int(part)) for part in match.group(1).split("."))
    from packaging.version import Version

    return str(Version(text))


@functools.lru_cache(maxsize=1024)  # pure; the same few specifiers are asked of the same few versions
def spec_contains(spec: str, version: str) -> bool | None:
    """``SpecifierSet(spec).contains(Version(version), prereleases=True)``; None when ``version`` is not a
    version. Raises packaging's InvalidSpecifier as that would."""
    candidate = release_key(version)
    clauses = _plain_clauses(spec) if candidate is not None else None
    if clauses is None:
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version

        try:
            wanted = Version(version)
        except InvalidVersion:
            return None
        return SpecifierSet(spec).contains(wanted, prereleases=True)
    return all(_holds(candidate, op, bound) for op, bound in clauses)


@functools.lru_cache(maxsize=256)
def _plain_clauses(spec: str) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    clauses = []
    for part in spec.split(","):
        if not part.strip():
            continue  # packaging skips empty parts too: ">=3.9," is ">=3.9"
        match = _CLAUSE.fullmatch(part)
        if match is None:
            return None
        clauses.append((match.group(1), release_key(match.group(2))))
    return tuple(clauses)


def _holds(candidate: tuple[int, ...], op: str, bound: tuple[int, ...]) -> bool:
    if op == "==":
        return candidate == bound
    if op == "!=":
        return candidate != bound
    if op == ">=":
        return candidate >= bound
    if op == "<=":
        return candidate <= bound
    if op == ">":
        return candidate > bound
    return candidate < bound
