"""``lazy_compile`` (doctor/model/patterns.py): compiled on first use, then the pattern's own methods."""

from __future__ import annotations

import copy
import re

from doctor.model.patterns import LazyPattern, lazy_compile


def test_it_answers_as_the_compiled_pattern_does():
    source, flags = r"(?P<major>\d+)\.(\d+)", re.IGNORECASE
    lazy, real = lazy_compile(source, flags), re.compile(source, flags)
    assert "match" not in vars(lazy)  # nothing compiled yet
    for text in ("12.4", "driver 550.54", "none", "3.10 and 3.11"):
        assert bool(lazy.match(text)) == bool(real.match(text))
        assert (lazy.search(text) and lazy.search(text).groups()) == (real.search(text) and real.search(text).groups())
        assert lazy.findall(text) == real.findall(text)
        assert lazy.sub("X", text) == real.sub("X", text)
        assert lazy.split(text) == real.split(text)
        assert bool(lazy.fullmatch(text)) == bool(real.fullmatch(text))
    assert (lazy.pattern, lazy.flags, lazy.groups, lazy.groupindex) == (
        real.pattern, real.flags, real.groups, real.groupindex)
    assert vars(lazy)["search"].__self__ is vars(lazy)["match"].__self__  # compiled once


def test_copying_and_hooks_do_not_compile_or_turn_it_into_something_else():
    lazy = lazy_compile(r"a+")
    assert isinstance(copy.deepcopy(lazy), LazyPattern)
    assert "match" not in vars(lazy)
    assert copy.copy(lazy).match("aa")


def test_a_bad_pattern_fails_when_used_with_re_s_own_error():
    lazy = lazy_compile(r"(unclosed")
    try:
        lazy.match("x")
    except re.error as exc:
        assert "missing )" in str(exc)
    else:
        raise AssertionError("no error")
