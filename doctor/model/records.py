"""``@record``: a dataclass for the modules every run imports, without the dataclasses module.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``): ~8 ms of every run before a
class is defined; then ``dataclass`` compiles an ``__init__``, a ``__repr__``, an ``__eq__`` (frozen: a
``__hash__`` and two guards) for every class: ~0.5 ms a class on Python 3.11, over the ~80 classes of the
snapshot, findings, plan and table rows. ``@record`` reads the fields as dataclass does (annotations in
order, a base's fields first, ``field()`` for factories and flags, ``ClassVar`` left out, unhashable defaults
refused) and installs shared versions of the methods that behave the same: the same ``__init__`` signature
and errors (bound without compiling for a class's first calls, then compiled), the same repr text, equality
over the ``compare`` fields of the same class only, the hash dataclass would give (frozen: of the hashed
fields; mutable: none), a class's own ``__init__``/``__repr__``/``__eq__``/``__hash__`` kept.

``field``, ``fields``, ``replace``, ``asdict``, ``is_record`` and ``MISSING`` are dataclasses' own for records;
``fields``, ``replace``, ``asdict`` and ``is_record`` accept a stdlib dataclass too (importing dataclasses then).
Runs on Python 3.8+ (doctor/distributed/ imports the model in the target interpreter).
"""

from __future__ import annotations

import functools
import sys
from operator import attrgetter

_FIELDS = "__record_fields__"


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a frozen record (dataclasses.FrozenInstanceError's counterpart)."""


class Field:
    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare", "metadata",
                 "kw_only")

    def __init__(self, default=MISSING, default_factory=MISSING, init=True, repr=True, hash=None, compare=True,
                 metadata=None, kw_only=False):
        self.name = self.type = None
        self.default, self.default_factory = default, default_factory
        self.init, self.repr, self.hash, self.compare, self.kw_only = init, repr, hash, compare, kw_only
        self.metadata = dict(metadata) if metadata else {}

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r}, default_factory={self.default_factory!r})"


def field(*, default=MISSING, default_factory=MISSING, init=True, repr=True, hash=None, compare=True,
          metadata=None, kw_only=False) -> Field:
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, init, repr, hash, compare, metadata, kw_only)


def is_record(obj) -> bool:
    """A record or stdlib dataclass (class or instance)."""
    return hasattr(obj, _FIELDS) or hasattr(obj, "__dataclass_fields__")


def fields(class_or_instance) -> tuple:
    """The fields in order; a stdlib dataclass's as records' ``Field`` (with this module's MISSING)."""
    found = getattr(class_or_instance, _FIELDS, None)
    if found is not None:
        return found
    if hasattr(class_or_instance, "__dataclass_fields__"):
        return _dataclass_fields(class_or_instance if isinstance(class_or_instance, type) else type(class_or_instance))
    raise TypeError("must be called with a record or dataclass type or instance")


@functools.lru_cache(maxsize=None)  # noqa: UP033 - Python 3.8 has no functools.cache
def _dataclass_fields(cls) -> tuple:
    import dataclasses

    def own(value):
        return MISSING if value is dataclasses.MISSING else value

    out = []
    for f in dataclasses.fields(cls):
        mine = Field(own(f.default), own(f.default_factory), f.init, f.repr, f.hash, f.compare, f.metadata,
                     getattr(f, "kw_only", False) is True)
        mine.name, mine.type = f.name, f.type
        out.append(mine)
    return tuple(out)


def replace(obj, **changes):
    """``dataclasses.replace``: a copy with ``changes``, built through ``__init__``."""
    if not hasattr(obj, _FIELDS):
        import dataclasses

        return dataclasses.replace(obj, **changes)
    for f in fields(obj):
        if not f.init:
            if f.name in changes:
                raise ValueError(f"field {f.name} is declared with init=False, it cannot be specified with replace()")
            continue
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


def asdict(obj):
    """``dataclasses.asdict``: records (and dataclasses) to dicts, recursively; other values deep-copied."""
    if is_record(obj) and not isinstance(obj, type):
        return {f.name: asdict(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[asdict(v) for v in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(asdict(v) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((asdict(k), asdict(v)) for k, v in obj.items())
    return deepcopy(obj)


def deepcopy(obj):
    """``copy.deepcopy``, imported when first needed: ``copy`` (with ``weakref``) costs ~1 ms of every start,
    for the values the converters here and in snapshot.py and findings.py almost never meet."""
    import copy

    return copy.deepcopy(obj)


def record(cls=None, /, *, frozen: bool = False):
    """``@record`` / ``@record(frozen=True)``: ``@dataclass`` / ``@dataclass(frozen=True)`` (module docstring)."""

    def wrap(c):
        own = c.__dict__
        has_repr, has_eq, has_hash = "__repr__" in own, "__eq__" in own, "__hash__" in own
        if not own.get("__doc__"):
            c.__doc__ = f"{c.__name__}(...)"  # dataclass would compute the signature in full (inspect)
        has_init = "__init__" in own
        found = _collect(c)
        setattr(c, _FIELDS, found)
        c.__match_args__ = tuple(f.name for f in found if f.init and not f.kw_only)
        if frozen:
            _freeze(c, frozenset(f.name for f in found))
        if not has_init:
            c.__init__ = _lazy_init(c, frozen)
        if not has_repr:
            c.__repr__ = _repr([f.name for f in found if f.repr])
        if not has_eq:
            key = _key([f.name for f in found if f.compare])
            c.__eq__ = _eq(key)
            if not has_hash:  # what dataclass(eq=True) does: frozen hashes its fields, mutable is unhashable
                hashed = [f.name for f in found if (f.compare if f.hash is None else f.hash)]
                c.__hash__ = _hash(_key(hashed)) if frozen else None
        return c

    return wrap if cls is None else wrap(cls)


def _collect(cls) -> tuple:
    """The fields as dataclass finds them: the bases' (in reverse MRO order), then this class's annotations in
    order, each one's class attribute set to its default or removed (a factory, no default)."""
    found = {}
    for base in cls.__mro__[-1:0:-1]:
        if is_record(base):
            for f in fields(base):
                found[f.name] = f
    for name, kind in _own_annotations(cls).items():
        if _class_var(kind):
            continue
        default = cls.__dict__.get(name, MISSING)
        f = default if isinstance(default, Field) else Field(default)
        f.name, f.type = name, kind
        if f.default is not MISSING and type(f.default).__hash__ is None:
            raise ValueError(f"mutable default {type(f.default)} for field {name} is not allowed: use default_factory")
        if isinstance(default, Field):
            if f.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        found[name] = f
    seen_default = False
    for f in found.values():
        if not f.init or f.kw_only:
            continue
        if f.default is not MISSING or f.default_factory is not MISSING:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
    return tuple(found.values())


def _own_annotations(cls) -> dict:
    """The class's own annotations (never a base's: Python 3.8 and 3.9 hand those on to a class without any)."""
    own = cls.__dict__.get("__annotations__")
    if own is None and sys.version_info >= (3, 10):
        own = getattr(cls, "__annotations__", None)  # 3.14 computes them on demand (PEP 649)
    return own or {}


def _class_var(kind) -> bool:
    """A ``ClassVar[...]`` annotation (a string under ``from __future__ import annotations``): no field."""
    text = kind if isinstance(kind, str) else repr(kind)
    return text.replace("typing.", "").lstrip().startswith("ClassVar")


def _freeze(cls, names: frozenset[str]) -> None:
    """The ``__setattr__``/``__delattr__`` of ``dataclass(frozen=True)``, as closures rather than compiled."""

    def __setattr__(self, name, value):
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name):
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    __setattr__.__qualname__ = f"{cls.__qualname__}.__setattr__"
    __delattr__.__qualname__ = f"{cls.__qualname__}.__delattr__"
    cls.__setattr__, cls.__delattr__ = __setattr__, __delattr__


_COMPILE_AFTER = 16  # calls; a class built more often than that (re-diagnosis, fleet) gets the compiled one


def _lazy_init(cls, frozen: bool):
    """An ``__init__`` that binds the arguments itself for the first calls, then compiles the one ``dataclass``
    would write and installs it. Compiling costs ~0.13 ms a class, ~7 ms of a `check` that builds most of its
    fifty classes a handful of times; a class built often pays it once and then runs at the compiled speed.
    Any call the binder does not take (a missing or unexpected argument) goes to the compiled ``__init__``, so
    its errors are dataclass's own."""
    spec = None
    calls = 0

    def __init__(self, *args, **kwargs):
        nonlocal spec, calls
        real = cls.__dict__["__init__"]
        if real is __init__:
            calls += 1
            if calls <= _COMPILE_AFTER:
                if spec is None:
                    spec = _init_spec(cls)
                if _bind(self, spec, args, kwargs, frozen):
                    return
            real = cls.__init__ = _compile_init(cls, frozen)
        real(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _init_spec(cls):
    """(positional names, names allowed as keywords, required names, (name, init, default, factory) per field,
    has __post_init__): what ``_compile_init`` reads, read once."""
    positional, allowed, required, spec = [], set(), [], []
    for f in fields(cls):
        factory = f.default_factory if f.default_factory is not MISSING else None
        spec.append((f.name, f.init, f.default, factory))
        if not f.init:
            continue
        allowed.add(f.name)
        if not getattr(f, "kw_only", False):
            positional.append(f.name)
        if factory is None and f.default is MISSING:
            required.append(f.name)
    return positional, allowed, required, spec, hasattr(cls, "__post_init__")


def _bind(self, spec, args, kwargs, frozen: bool) -> bool:
    """What the compiled ``__init__`` does, for a call whose arguments bind; False (nothing set) for one that
    does not."""
    positional, allowed, required, each, post_init = spec
    if len(args) > len(positional):
        return False
    values = dict(zip(positional, args))  # noqa: B905 - never longer (checked above); 3.8 has no strict=
    for name, value in kwargs.items():
        if name not in allowed or name in values:
            return False
        values[name] = value
    for name in required:
        if name not in values:
            return False
    assign = object.__setattr__ if frozen else setattr
    for name, init, default, factory in each:
        if init and name in values:
            value = values[name]
            if factory is not None and value is _HAS_FACTORY:
                value = factory()
        elif factory is not None:
            value = factory()
        elif not init:
            continue
        else:
            value = default
        assign(self, name, value)
    if post_init:
        self.__post_init__()
    return True


_HAS_FACTORY = type("_HasFactory", (), {"__repr__": lambda self: "<factory>"})()


def _compile_init(cls, frozen: bool):
    """dataclass's ``__init__``: the fields in order (keyword-only ones after ``*``), defaults and factories,
    ``object.__setattr__`` when frozen, then ``__post_init__``."""
    namespace = {"_HAS_FACTORY": _HAS_FACTORY, "_setattr": object.__setattr__}
    positional, keyword, body = [], [], []
    for f in fields(cls):
        name, value = f.name, f.name
        if f.default_factory is not MISSING:
            namespace[f"_factory_{name}"] = f.default_factory
            if f.init:
                param = f"{name}=_HAS_FACTORY"
                value = f"_factory_{name}() if {name} is _HAS_FACTORY else {name}"
            else:
                param, value = None, f"_factory_{name}()"
        elif not f.init:
            continue
        elif f.default is MISSING:
            param = name
        else:
            namespace[f"_default_{name}"] = f.default
            param = f"{name}=_default_{name}"
        if param:
            (keyword if getattr(f, "kw_only", False) else positional).append(param)  # 3.8: no kw_only
        body.append(f"_setattr(__self, {name!r}, {value})" if frozen else f"__self.{name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("__self.__post_init__()")
    params = ["__self", *positional, *(["*", *keyword] if keyword else [])]
    exec(f"def __init__({', '.join(params)}):\n    " + ("\n    ".join(body) or "pass"), namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _key(names: list[str]):
    if not names:
        return lambda self: ()
    if len(names) == 1:
        name = names[0]
        return lambda self: (getattr(self, name),)
    return attrgetter(*names)


def _repr(names: list[str]):
    def __repr__(self) -> str:
        return f"{self.__class__.__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    return __repr__


def _eq(key):
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _hash(key):
    def __hash__(self) -> int:
        return hash(key(self))

    return __hash__


def memo(maxsize: int = 4096):
    """``functools.lru_cache`` for a pure function whose arguments are nearly always hashable: a call with an
    unhashable one (a list where a hostile report put one) runs the function itself, as it did uncached."""

    def decorate(fn):
        cached = functools.lru_cache(maxsize=maxsize)(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            try:
                return cached(*args, **kwargs)
            except TypeError as exc:
                if "unhashable" not in str(exc):
                    raise
                return fn(*args, **kwargs)

        call.cache_clear = cached.cache_clear
        return call

    return decorate
