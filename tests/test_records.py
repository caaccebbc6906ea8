"""``@record`` (doctor/model/records.py) behaves as ``@dataclass`` without the dataclasses module: the same
fields, ``__init__`` (bound without compiling for a class's first calls, compiled later), repr, equality, hash
and errors, and ``fields``/``replace``/``asdict`` as dataclasses' own."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from doctor.model import records
from doctor.model.records import record


def make(kind: str, frozen: bool):
    deco = dataclasses.dataclass(frozen=frozen) if kind == "dataclass" else record(frozen=frozen)
    field = dataclasses.field if kind == "dataclass" else records.field

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
    with pytest.raises(records.FrozenInstanceError):
        obj.name = "b"


def test_fields_replace_asdict_and_class_attributes_as_dataclasses_gives_them():
    for frozen in (False, True):
        reference, ours = make("dataclass", frozen), make("record", frozen)
        want = [(f.name, f.init, f.repr, f.compare, f.kw_only, f.default is dataclasses.MISSING,
                 f.default_factory is dataclasses.MISSING) for f in dataclasses.fields(reference)]
        got = [(f.name, f.init, f.repr, f.compare, f.kw_only, f.default is records.MISSING,
                f.default_factory is records.MISSING) for f in records.fields(ours)]
        assert got == want
        for name in ("name", "count", "tags", "hidden", "made", "note"):
            assert (name in vars(ours)) == (name in vars(reference)), name
            assert getattr(ours, name, None) == getattr(reference, name, None), name
        a, b = reference("a", 1, [2], note="n"), ours("a", 1, [2], note="n")
        assert state(dataclasses.replace(a, count=5)) == state(records.replace(b, count=5))
        assert dataclasses.asdict(a) == records.asdict(b)
        assert (type(b).__hash__ is None) == (type(a).__hash__ is None) == (not frozen)
        assert b == ours("a", 1, [2], note="n") and b != ours("b")
        with pytest.raises(ValueError):
            records.replace(b, hidden=3)
    # records' helpers take a stdlib dataclass too
    plain = make("dataclass", False)("x")
    assert [f.name for f in records.fields(plain)] == [f.name for f in dataclasses.fields(plain)]
    assert records.is_record(plain) and records.asdict(plain) == dataclasses.asdict(plain)


def test_declaration_errors_are_dataclass_s():
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @record
        class Bad:
            a: int = 0
            b: int

    with pytest.raises(ValueError, match="mutable default"):
        @record
        class Mutable:
            a: list = []  # noqa: RUF012 - the point of the test

    @record
    class WithClassVar:
        a: int = 0
        kinds: ClassVar[tuple] = ("x",)

    assert [f.name for f in records.fields(WithClassVar)] == ["a"]


def test_the_model_never_imports_dataclasses():
    """The point of records: the model, the table, the plan and the runner load without the dataclasses module.
    (Not asserted for ``inspect``: packaging 26 imports it itself, in packaging.version.)"""
    import subprocess
    import sys

    code = ("import sys\nimport doctor.model.snapshot, doctor.model.findings, doctor.model.environment, "
            "doctor.table.compat, doctor.plan.plan, doctor.runner\n"
            "print('dataclasses' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
