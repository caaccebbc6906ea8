"""``@record``: a dataclass that is cheaper to define, for the modules every run imports.

``dataclasses.dataclass`` compiles a ``__repr__`` and an ``__eq__`` (and, frozen, a ``__hash__``) of its own
for every class, and ``inspect.signature``-s a class without a docstring to write one: ~0.5 ms a class on
Python 3.11, ~35 ms of every ``check`` over the snapshot, findings and table rows. ``@record`` lets dataclass
write ``__init__`` (and the frozen guards) and installs shared versions of the rest that behave the same: the
same repr text, equality over the ``compare`` fields of the same class only, the hash dataclass would give
(frozen: of the hashed fields; mutable: none), a class's own ``__repr__``/``__eq__``/``__hash__`` kept.
"""

from __future__ import annotations

import dataclasses
import functools
from operator import attrgetter


def record(cls=None, /, *, frozen: bool = False):
    """``@record`` / ``@record(frozen=True)``: ``@dataclass`` / ``@dataclass(frozen=True)`` (module docstring)."""

    def wrap(c):
        own = c.__dict__
        has_repr, has_eq, has_hash = "__repr__" in own, "__eq__" in own, "__hash__" in own
        if not own.get("__doc__"):
            c.__doc__ = f"{c.__name__}(...)"  # dataclass would compute the signature in full (inspect)
        has_init = "__init__" in own
        # dataclass compiles (exec) an __init__ and, frozen, a __setattr__ and a __delattr__ per class: ~0.3 ms
        # a class. The guards are shared closures here, and __init__ is compiled on the first call, so a class
        # whose objects only come out of a pickle (the cached table) never pays for it.
        c = dataclasses.dataclass(c, init=False, frozen=False, repr=False, eq=False)
        fields = dataclasses.fields(c)
        if frozen:
            _freeze(c, frozenset(f.name for f in fields))
        if not has_init:
            c.__init__ = _lazy_init(c, frozen)
        if not has_repr:
            c.__repr__ = _repr([f.name for f in fields if f.repr])
        if not has_eq:
            key = _key([f.name for f in fields if f.compare])
            c.__eq__ = _eq(key)
            if not has_hash:  # what dataclass(eq=True) does: frozen hashes its fields, mutable is unhashable
                hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
                c.__hash__ = _hash(_key(hashed)) if frozen else None
        return c

    return wrap if cls is None else wrap(cls)


def _freeze(cls, names: frozenset[str]) -> None:
    """The ``__setattr__``/``__delattr__`` of ``dataclass(frozen=True)``, as closures rather than compiled."""

    def __setattr__(self, name, value):
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name):
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    __setattr__.__qualname__ = f"{cls.__qualname__}.__setattr__"
    __delattr__.__qualname__ = f"{cls.__qualname__}.__delattr__"
    cls.__setattr__, cls.__delattr__ = __setattr__, __delattr__
    cls.__dataclass_params__.frozen = True  # what dataclass(frozen=True) records (subclass checks read it)


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
    positional, allowed, required, fields = [], set(), [], []
    for f in dataclasses.fields(cls):
        factory = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        fields.append((f.name, f.init, f.default, factory))
        if not f.init:
            continue
        allowed.add(f.name)
        if not getattr(f, "kw_only", False):
            positional.append(f.name)
        if factory is None and f.default is dataclasses.MISSING:
            required.append(f.name)
    return positional, allowed, required, fields, hasattr(cls, "__post_init__")


def _bind(self, spec, args, kwargs, frozen: bool) -> bool:
    """What the compiled ``__init__`` does, for a call whose arguments bind; False (nothing set) for one that
    does not."""
    positional, allowed, required, fields, post_init = spec
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
    for name, init, default, factory in fields:
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
    for f in dataclasses.fields(cls):
        name, value = f.name, f.name
        if f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{name}"] = f.default_factory
            if f.init:
                param = f"{name}=_HAS_FACTORY"
                value = f"_factory_{name}() if {name} is _HAS_FACTORY else {name}"
            else:
                param, value = None, f"_factory_{name}()"
        elif not f.init:
            continue
        elif f.default is dataclasses.MISSING:
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
