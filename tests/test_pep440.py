"""doctor/model/pep440.py gives packaging's answers without importing packaging: every pair of a grid of
versions and specifiers (plain releases, what goes to packaging, and what is not a version at all), then
random ones. packaging here is the reference, imported by the test only."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from doctor.model.pep440 import normal_form, release_key, spec_contains

PLAIN = ["0", "0.0", "1", "1.0", "1.0.0", "2.7", "2.7.0", "2.7.1", "2.07", "2.7.01", "2.10", "2.8", "3.9",
         "3.13", "3.13.2", "3.14", "10.0", "12.8", "12.10", " 2.7 ", "2.7.0.0.0", "9.1.0.70",
         "1" + "0" * 30 + ".1"]
# Handed to packaging: pre/post/dev releases, epochs, a v prefix, local labels, odd spellings.
OTHER = ["2.7.0rc1", "2.7rc1", "2.7.0.post1", "2.7.0.dev0", "2.7.0a0", "1!2.7", "0!2.7", "v2.7", "V2.7",
         "2.7.0+cu128", "2.7.0a0+git1234", "2.7-1", "2.7.0-rc1", "2.7.0_post1", "3.13.0b4"]
NOT_VERSIONS = ["", " ", "2.7.x", "not-a-version", "2..7", ".2", "2.", "cu128", "٣.٩"]
SPECS = ["", ",", ">=3.9", "<3.14", ">=3.9,<3.14", " >= 3.9 , < 3.14 ,", "==2.7", "==2.7.0", "== 2.7.0",
         "!=2.7", ">2.7", ">2.7.0", "<2.7", "<=2.7", ">=2.7.1,!=2.7.2,<2.8", "==0", ">0", "<0.0.1",
         ">=2.10", "<2.8", ">=12.8", "==9.1.0.70",
         # to packaging
         "==2.7.*", "!=2.7.*", "~=2.7", "~=2.7.1", "===2.7", ">=2.7.0rc1", "==2.7+cu128", "<2.7.0.post1",
         ">v2.7", ">=1!2.0", ">=3.9,==2.7.*",
         # not specifiers
         ">=", "=>3.9", "3.9", ">=3.9;", ">=2.7.x", "<2.7+cu128"]


def reference(spec: str, version: str):
    try:
        wanted = Version(version)
    except InvalidVersion:
        return None
    return SpecifierSet(spec).contains(wanted, prereleases=True)


def answers(fn, *args):
    try:
        return ("value", fn(*args))
    except InvalidSpecifier:
        return ("invalid specifier",)


@pytest.mark.parametrize("spec", SPECS)
def test_every_version_against_every_specifier(spec):
    for version in PLAIN + OTHER + NOT_VERSIONS:
        assert answers(spec_contains, spec, version) == answers(reference, spec, version), (spec, version)


def test_release_keys_order_and_equate_as_packaging_does():
    for a, b in itertools.product(PLAIN, repeat=2):
        ka, kb = release_key(a), release_key(b)
        va, vb = Version(a), Version(b)
        assert (ka < kb, ka == kb, ka > kb) == (va < vb, va == vb, va > vb), (a, b)


def test_release_key_is_for_plain_releases_only():
    assert all(release_key(v) is None for v in OTHER + NOT_VERSIONS)
    assert release_key("2.7.0") == release_key("2.7") == (2, 7)


@pytest.mark.parametrize("version", PLAIN + OTHER)
def test_normal_form_is_packaging_str(version):
    assert normal_form(version) == str(Version(version))


@pytest.mark.parametrize("version", NOT_VERSIONS)
def test_normal_form_raises_what_packaging_raises(version):
    with pytest.raises(InvalidVersion):
        normal_form(version)


_release = st.lists(st.integers(0, 12), min_size=1, max_size=4).map(lambda parts: ".".join(map(str, parts)))
_clause = st.tuples(st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "~=", "==="]), _release,
                    st.sampled_from(["", ".*", "rc1", ".post1", "+cu128"]))


@settings(max_examples=400, deadline=None)
@given(st.lists(_clause, max_size=3), st.one_of(_release, st.tuples(_release, st.sampled_from(
    ["", "rc1", ".post2", ".dev0", "+cu121", "a0+git1"])).map("".join)))
def test_random_specifiers_and_versions(clauses, version):
    spec = ",".join(op + bound + tail for op, bound, tail in clauses)
    assert answers(spec_contains, spec, version) == answers(reference, spec, version), (spec, version)
