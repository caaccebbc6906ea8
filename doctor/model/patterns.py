"""``lazy_compile``: a regular expression compiled when it is first used, not when its module is imported.

Every run imports some fifty modules that each compile a few patterns at import time, most of which that run
never uses (the smoke-test texts, conda and NGC build strings, lock files): ~8 ms of a static `check`. A
``LazyPattern`` compiles on the first attribute asked of it and then keeps the compiled pattern's methods as
its own attributes, so later calls cost what a compiled pattern's do. It stands in for a pattern only where
its methods are called (``_RE.match(text)``); ``re.match(_RE, ...)`` or ``isinstance(_RE, re.Pattern)`` need
a real one.
"""

from __future__ import annotations

import re

_METHODS = ("match", "search", "fullmatch", "findall", "finditer", "sub", "subn", "split")


class LazyPattern:
    def __init__(self, pattern: str, flags: int = 0):
        self._source = (pattern, flags)

    def __getattr__(self, name: str):
        if name.startswith("__"):  # copy, pickle and friends probing for hooks: not a pattern's business
            raise AttributeError(name)
        compiled = re.compile(*self._source)
        for method in _METHODS:
            self.__dict__[method] = getattr(compiled, method)
        self.__dict__.update(pattern=compiled.pattern, flags=compiled.flags, groups=compiled.groups,
                             groupindex=compiled.groupindex)
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_compile({self._source[0]!r}, {self._source[1]!r})"


def lazy_compile(pattern: str, flags: int = 0) -> LazyPattern:
    return LazyPattern(pattern, flags)
