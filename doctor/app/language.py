"""The language of a run: ``--lang``, else the environment's (LC_ALL, LC_MESSAGES, LANG), chosen once per
command before anything is said. Machine formats stay English: JSON always (its keys and values are read
by programs), GitHub annotations and JUnit unless ``--lang`` asks. doctor/model/i18n.py does the saying."""

from __future__ import annotations

from doctor.errors import DoctorError
from doctor.model.i18n import (
    EN,
    LANGUAGES,
    Msg,
    language_chosen,
    language_from_env,
    localize,
    parse_language,
    set_language,
)

MACHINE_FORMATS = ("json", "github", "junit")


def choose_language(option: str | None, fmt: str | None = None, env=None) -> str:
    if option is not None:
        lang = parse_language(option)
        if lang is None:
            raise DoctorError(Msg("--lang {value}: give one of "
                "{names}", value=repr(option), names=", ".join(LANGUAGES)))
        return lang
    if fmt in MACHINE_FORMATS:
        return EN
    return language_from_env(env)


def use_language(option: str | None, fmt: str | None = None) -> str:
    """Choose this run's language and make it the one every renderer says things in."""
    lang = choose_language(option, fmt)
    set_language(lang)
    return lang


def error_line(exc: BaseException) -> str:
    """``torchdoctor: error: ...`` in the run's language (DoctorError keeps its message as made)."""
    from doctor.errors import one_line

    lang = None if language_chosen() else language_from_env()
    message = getattr(exc, "message", None)
    text = one_line(localize(message, lang)) if isinstance(message, str) else str(exc)
    return localize(Msg("torchdoctor: error: {message}", message=text), lang)


def say(template: str, **params) -> str:
    """One line the app prints itself, in the run's language."""
    return localize(Msg(template, **params))


def usage_error_lines(args: list[str], usage: str, command: str, message: str) -> list[str] | None:
    """A usage error of the command line parser (typer/click: an unknown option, a missing value) in the
    language of the run, or None for English (click then prints its own). ``--lang`` is read from the
    arguments here, since parsing them is what failed; click's own message stays as click says it."""
    lang = None
    for i, arg in enumerate(args):
        value = arg.partition("=")[2] if arg.startswith("--lang=") else (
            args[i + 1] if arg == "--lang" and i + 1 < len(args) else None)
        if value is not None:
            lang = parse_language(value)
    lang = lang or language_from_env()
    if lang == EN:
        return None
    return [localize(Msg("Usage: {usage}", usage=usage), lang),
            localize(Msg("Try '{command} -h' for help.", command=command), lang), "",
            localize(Msg("Error: {message}", message=message), lang)]
