"""Reading a snapshot back takes a value its reader would return unchanged as it is (doctor/model/snapshot.py,
``_as_is``). Over the mutated reports (tests/mutated_reports.py) and values of every wrong type in every
field, that must give the same snapshot, or the same error naming the same field, as reading every value
through its reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mutated_reports import mutate

from doctor.model import snapshot as S

ROOT = Path(__file__).resolve().parents[1]


def read_both(data):
    """(fast, plain): from_dict as it is, and with no value taken as is; each a snapshot or the error text."""
    out = []
    for plain in (False, True):
        S._reader.cache_clear()
        S._as_is.cache_clear()
        original = S._as_is
        if plain:
            S._as_is = lambda tp: frozenset()
        try:
            out.append(S.Snapshot.from_dict(json.loads(json.dumps(data))))
        except S.SnapshotFormatError as exc:
            out.append(f"error: {exc}")
        finally:
            S._as_is = original
            S._reader.cache_clear()
    return out


def leaves(data, path=()):
    if isinstance(data, dict):
        for k, v in data.items():
            yield from leaves(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data[:2]):
            yield from leaves(v, (*path, i))
    yield path


def put(data, path, value):
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


BASE = json.loads((ROOT / "tests" / "golden" / "rtx5090-cu126.json").read_text())["snapshot"]


def test_mutated_reports_read_the_same():
    for i in range(0, 200, 9):
        fast, plain = read_both(mutate({"snapshot": BASE}, i)["snapshot"])
        assert fast == plain


@pytest.mark.parametrize("value", [None, True, 0, 1.5, "x", [], {}, ["a"], [1]])
def test_every_field_with_a_wrong_value_reads_or_fails_the_same(value):
    for path in [p for p in leaves(BASE) if p]:
        data = json.loads(json.dumps(BASE))
        put(data, path, value)
        fast, plain = read_both(data)
        assert fast == plain, path
