"""Messages as data: every human-facing text torchdoctor builds is a ``Msg``, said in the user's language only
when it is rendered (docs/i18n.md).

A ``Msg`` is a ``str`` whose value is the English text, so JSON, tests and every caller that treats it as a
string keep working unchanged; it also carries its English template and named parameters:

    Msg("torch {build} has no kernels for GPU {index} {name} ({sm})", build=..., index=..., name=..., sm=...)

Renderers call ``localize(value)`` at the last moment: in English that is the value itself (nothing is
loaded); in another language the catalog's template (doctor/locale/<lang>.json, English template -> translated
template, the same named placeholders) formatted with the parameters, each localized in turn. A text without a
catalog entry stays English. A plain string (a report read back with --from, a probe's reason) is looked up
by its English form too: exactly, or against the templates with placeholders.

The catalog is read only when a language other than English is asked for, so English start-up costs nothing
more. Stdlib only and Python 3.8 compatible: rank 0 of a distributed check imports the model.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager

TYPE_CHECKING = False
if TYPE_CHECKING:  # in annotations only (the rank side, doctor.distributed.entry, imports this module too)
    from typing import Any

EN = "en"
ZH = "zh"
LANGUAGES = (EN, ZH)
# Locales whose language has a catalog. Traditional Chinese (zh_TW, zh_HK, zh_MO, zh_Hant) has none yet:
# English.
_ZH_LOCALE = r"(?i)^zh(?:$|[_-](?:CN|SG|Hans)|[.@])"  # patterns are compiled when first used (re's cache)


class Msg(str):
    """A human-facing text: the English value, plus the template and parameters it was made from."""

    def __new__(cls, template: str, **params: Any) -> Msg:
        self = str.__new__(cls, template.format(**params))
        self.template = template
        self.params = params
        self.structural = False  # a concatenation or a join: no catalog entry, only its parts are said
        return self

    # Concatenation keeps what each part is ("..." + Msg(...) + "..."): a structural message of the parts.
    def __add__(self, other: Any) -> Any:
        if not isinstance(other, str):
            return NotImplemented
        return concat(self, other)

    def __radd__(self, other: Any) -> Any:
        if not isinstance(other, str):
            return NotImplemented
        return concat(other, self)

    def __reduce__(self) -> tuple:  # copy.deepcopy, pickle
        return (_rebuild, (self.template, dict(self.params), self.structural, str(self)))

    def __deepcopy__(self, memo: dict) -> Msg:
        import copy

        return _rebuild(self.template, copy.deepcopy(self.params, memo), self.structural, str(self))

    def __copy__(self) -> Msg:
        return self

    def map(self, func) -> Msg:
        """The same message with ``func`` applied to its value and to every text parameter (sanitising,
        redaction): what it says stays what it was made from."""
        params = {k: (v.map(func) if isinstance(v, Msg) else func(v) if isinstance(v, str) else v)
                  for k, v in self.params.items()}
        return _rebuild(self.template, params, self.structural, func(str(self)))


def N_(template: str) -> str:
    """Marks a template made into a ``Msg`` later (``Msg(template, n=...)``), so the catalog test finds it."""
    return template


def _rebuild(template: str, params: dict, structural: bool, value: str) -> Msg:
    self = str.__new__(Msg, value)
    self.template, self.params, self.structural = template, params, structural
    return self


def concat(*parts: Any) -> Any:
    """The parts as one text; each part keeps its own translation."""
    flat: list = []
    for part in parts:
        if isinstance(part, Msg) and part.structural and "sep" not in part.params:
            flat += [part.params[f"_{i}"] for i in range(len(part.params))]
        elif part != "":
            flat.append(part)
    if not any(isinstance(p, Msg) for p in flat):
        return "".join(flat)
    params = {f"_{i}": p for i, p in enumerate(flat)}
    return _rebuild("".join("{" + k + "}" for k in params), params, True, "".join(flat))


def join(sep: str, parts: Any) -> Any:
    """``sep.join(parts)`` that keeps each part's translation (a separator is said the language's way)."""
    parts = list(parts)
    if not any(isinstance(p, Msg) for p in parts) and not isinstance(sep, Msg):
        return sep.join(parts)
    params: dict = {"sep": sep}
    params.update((f"_{i}", p) for i, p in enumerate(parts))
    template = "{sep}".join("{_" + str(i) + "}" for i in range(len(parts)))
    return _rebuild(template, params, True, sep.join(parts))


# --- the language of this run ------------------------------------------------------------------------

_state = {"lang": EN, "chosen": False}


def set_language(lang: str) -> None:
    _state["lang"] = lang if lang in LANGUAGES else EN
    _state["chosen"] = True


def language_chosen() -> bool:
    """Whether this run has chosen its language yet (an error before that is said in the environment's)."""
    return bool(_state["chosen"])


def current_language() -> str:
    return _state["lang"]


@contextmanager
def language(lang: str):
    """``with language("zh"):`` renders in that language, then goes back."""
    before = _state["lang"]
    set_language(lang)
    try:
        yield
    finally:
        _state["lang"] = before


def language_of_locale(value: str | None) -> str:
    """"zh_CN.UTF-8" -> "zh"; "C.UTF-8", "en_US", "de_DE", "zh_TW" (no catalog) -> "en"."""
    return ZH if value and re.match(_ZH_LOCALE, value.strip()) else EN


def language_from_env(env: Any = None) -> str:
    """The language of the environment, POSIX's way: the first of LC_ALL, LC_MESSAGES and LANG that is set
    and not empty decides."""
    env = os.environ if env is None else env
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(name)
        if value:
            return language_of_locale(value)
    return EN


def parse_language(value: str) -> str | None:
    """What ``--lang`` accepts: en, zh, and their locale spellings (zh_CN, zh-CN, zh-Hans); None otherwise."""
    text = (value or "").strip()
    if text.lower() in ("en", "c", "posix") or re.match(r"^en[_-]", text, re.I):
        return EN
    if re.match(_ZH_LOCALE, text):
        return ZH
    return None


# --- saying a text -------------------------------------------------------------------------------------


def localize(value: Any, lang: str | None = None) -> Any:
    """``value`` in ``lang`` (default: this run's language). English, and anything that is not text, is
    returned as it is."""
    lang = lang or _state["lang"]
    if lang == EN or not isinstance(value, str):
        return value
    catalog = _catalog(lang)
    if isinstance(value, Msg):
        return _say(value, catalog, lang)
    return catalog.lookup(value)


def tr(template: str, **params: Any) -> str:
    """A renderer's own text, said now: ``localize(Msg(template, **params))``."""
    return localize(Msg(template, **params))


def _say(msg: Msg, catalog: Catalog, lang: str) -> str:
    params = {k: _param(v, catalog, lang) for k, v in msg.params.items()}
    if msg.structural:
        if "sep" in params:
            params["sep"] = catalog.separators.get(msg.params["sep"], params["sep"])
        return msg.template.format(**params)
    template = catalog.messages.get(msg.template)
    if template is None:
        return msg.template.format(**params)
    return template.format(**params)


def _param(value: Any, catalog: Catalog, lang: str) -> Any:
    if isinstance(value, Msg):
        return _say(value, catalog, lang)
    if isinstance(value, str) and " " in value:  # prose from elsewhere (a probe's reason); never a bare word
        return catalog.lookup(value)
    return value


_SPEC = r"\{(\w+)(?:![rsa])?(?::[^{}]*)?\}"  # a placeholder: {name}, {name!r}, {name:.1f}


class Catalog:
    """One language's messages: English template -> translated template (doctor/locale/<lang>.json)."""

    def __init__(self, messages: dict, separators: dict | None = None) -> None:
        self.messages = messages
        self.separators = separators or {}
        self._patterns: list | None = None

    def lookup(self, text: str) -> str:
        """A plain English text in this language: by its exact template, or by a template with placeholders
        that matches it whole, where the template's own words are long enough to be sure (12 characters) and
        every placeholder captures one word (a version, a path, an id: never prose, which would be guessed
        at); else the text itself, in English."""
        exact = self.messages.get(text)
        if exact is not None and "{" not in text:
            return exact
        if " " not in text:
            return text
        for chunks, pattern, target in self._templates():
            if all(chunk in text for chunk in chunks):
                match = pattern.fullmatch(text)
                if match and not any(re.search(r"\s", v) for v in match.groupdict().values()):
                    return target.format(**match.groupdict())
        return text

    def _templates(self) -> list:
        if self._patterns is None:
            found = []
            for english, target in self.messages.items():
                names = [m.group(1) for m in re.finditer(_SPEC, english)]
                if not names or len(set(names)) != len(names):
                    continue
                chunks = [c.replace("{{", "{").replace("}}", "}") for c in re.split(_SPEC, english)[::2]]
                literal = [c for c in chunks if c]
                regex = "".join(re.escape(c) + (f"(?P<{names[i]}>.*?)" if i < len(names) else "")
                                for i, c in enumerate(chunks))
                if sum(map(len, literal)) < 12:
                    continue
                found.append((sorted(literal, key=len, reverse=True)[:1], re.compile(regex, re.S),
                              re.sub(_SPEC, r"{\1}", target), sum(map(len, literal))))
            found.sort(key=lambda t: -t[3])  # the most specific template first
            self._patterns = [t[:3] for t in found]
        return self._patterns


_catalogs: dict = {}


def catalog_path(lang: str) -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "locale", f"{lang}.json")


def _catalog(lang: str) -> Catalog:
    if lang not in _catalogs:
        import json

        try:
            with open(catalog_path(lang), encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            data = {}
        messages: dict = {}
        for section in (data.get("messages") or {}).values():
            messages.update(section)
        _catalogs[lang] = Catalog(messages, data.get("separators") or {})
    return _catalogs[lang]


# --- width on a terminal -------------------------------------------------------------------------------


def cells(text: str) -> int:
    """How many terminal columns ``text`` takes: East Asian wide and full-width characters count two,
    combining marks none (the same count as rich.cells.cell_len for what torchdoctor prints)."""
    if text.isascii():
        return len(text)
    import unicodedata

    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def pad(text: str, width: int) -> str:
    """``text`` left-aligned in ``width`` terminal columns (``f"{text:<{width}}"`` for wide characters)."""
    return text + " " * max(0, width - cells(text))
