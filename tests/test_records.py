"""``@record`` (doctor/model/records.py) behaves as ``@dataclass``: the first calls of a class bind their
arguments without compiling an ``__init__``, later ones use the compiled one; both must give the same objects
and the same errors as dataclass itself."""

from __future__ import annotations

import dataclasses
from dataclasses import field

import pytest

from doctor.model import records
from doctor.model.records import record


def make(kind: str, frozen: bool):
    deco = dataclasses.dataclass(frozen=frozen) if kind == "dataclass" else record(frozen=frozen)

    @deco
    class Thing:
        name: str
        count: int = 0
        tags: list = field(default_factory=list)
        hidden: int = field(default=7, init=False)
        made: list = field(default_factory=lambda: ["x"], init=False)
        note: str | None = field(default=None, kw_only=True)

        def __post_init__(self):
            object.__setattr__(self, "seen", len(self.tags))

    return Thing


CALLS = [
    (("a",), {}),
    (("a", 3), {}),
    (("a", 3, [1, 2]), {}),
    ((), {"name": "b", "tags": [1]}),
    (("a",), {"count": 2, "note": "n"}),
    ((), {"name": "c", "count": 1, "tags": [], "note": None}),
]
BAD = [
    ((), {}),  # missing name
    (("a", 1, [], 9), {}),  # too many positional
    (("a",), {"name": "b"}),  # twice
    (("a",), {"bogus": 1}),  # unexpected
    (("a",), {"hidden": 1}),  # init=False
]


def state(obj) -> dict:
    return dict(vars(obj))


@pytest.mark.parametrize("frozen", [False, True])
def test_the_binder_and_the_compiled_init_build_what_dataclass_builds(frozen, monkeypatch):
    reference = make("dataclass", frozen)
    for compile_after in (10**6, 0):  # every call bound, then every call compiled
        monkeypatch.setattr(records, "_COMPILE_AFTER", compile_after)
        ours = make("record", frozen)
        for args, kwargs in CALLS:
            want, got = reference(*args, **kwargs), ours(*args, **kwargs)
            assert state(got) == state(want)
            assert repr(got).split("(", 1)[1] == repr(want).split("(", 1)[1]
        binding = ours.__dict__["__init__"].__closure__ is not None  # the lazy __init__ is a closure
        assert binding == (compile_after > 0)


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("args,kwargs", BAD)
def test_a_call_that_does_not_bind_raises_dataclass_s_own_error(frozen, args, kwargs):
    reference, ours = make("dataclass", frozen), make("record", frozen)
    with pytest.raises(TypeError) as want:
        reference(*args, **kwargs)
    with pytest.raises(TypeError) as got:
        ours(*args, **kwargs)
    assert str(got.value).split("__init__() ", 1)[-1] == str(want.value).split("__init__() ", 1)[-1]


def test_a_class_built_often_gets_the_compiled_init():
    cls = make("record", False)
    first = cls.__dict__["__init__"]
    for i in range(records._COMPILE_AFTER):
        cls(str(i))
    assert cls.__dict__["__init__"] is first  # still binding
    cls("one more")
    assert cls.__dict__["__init__"] is not first
    assert state(cls("z", 2)) == state(make("dataclass", False)("z", 2))


def test_a_frozen_record_stays_frozen_after_binding():
    cls = make("record", True)
    obj = cls("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        obj.name = "b"
