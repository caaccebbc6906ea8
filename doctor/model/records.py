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
        c = dataclasses.dataclass(c, frozen=frozen, repr=False, eq=False)
        fields = dataclasses.fields(c)
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
