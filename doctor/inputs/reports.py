"""Reading reports back (`check --from FILE`): size and encoding guards, format detection, validation.

Every way an input can be wrong becomes one ``ReportError`` line that says what the file is and
what torchdoctor expected; nothing else escapes ``read_report`` (tests/test_fuzz_inputs.py holds that).
A report from an older torchdoctor is read anyway: fields it lacks take their defaults and are listed
in ``snapshot.unknowns`` so the rules and the reader know they were not observed.
"""

from __future__ import annotations

import functools
import json
import re
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from doctor import __version__
from doctor.errors import ReportError
from doctor.inputs.collect_env import looks_like_collect_env, parse_collect_env
from doctor.model.environment import ALONE_WHEN_UNREAD, WHEN_STATED, WRITTEN
from doctor.model.files import FileRefused, read_bytes
from doctor.model.findings import SEVERITIES
from doctor.model.report import REPORT_SCHEMA_VERSION
from doctor.model.snapshot import Fact, Snapshot, SnapshotFormatError, field_types

MAX_INPUT_BYTES = 20 * 1024 * 1024  # a report is ~20 KB; anything this big is not one
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema" / "report.schema.json"  # source checkouts

REPORT = "report"
COLLECT_ENV = "collect_env"
UNKNOWN = "unknown"

_TOP_KEYS = ("report_schema_version", "tool", "table", "snapshot", "checks", "findings", "plan", "summary")
_SUMMARY_KEYS = ("errors", "warnings", "infos", "exit_code")


# --- raw input ----------------------------------------------------------------------------------


def read_input_file(path: str) -> str:
    """The text of a --from file, refusing what is not a regular file (a FIFO, /dev/zero), huge files
    (counted on the bytes read, not on stat) and binary files before parsing anything."""
    try:
        data = read_bytes(path, MAX_INPUT_BYTES)
    except FileRefused as exc:
        if str(exc).startswith("more than"):
            raise ReportError(f"{path}: {exc}: too large for a report (limit "
                f"{_mb(MAX_INPUT_BYTES)})") from None
        raise ReportError(f"{path}: {exc}: save the report to a file and give that") from None
    except OSError as exc:
        raise ReportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return decode_input(data, path)


def decode_input(data: bytes, source: str) -> str:
    if len(data) > MAX_INPUT_BYTES:
        raise ReportError(
            f"{source}: {_mb(len(data))} is too large for a report (limit {_mb(MAX_INPUT_BYTES)})"
        )
    if b"\x00" in data[:65536]:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # PowerShell `>` writes UTF-16
            try:
                return data.decode("utf-16")
            except UnicodeDecodeError:
                pass
        raise ReportError(f"{source}: binary file (NUL bytes): expected a JSON report or collect_env text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ReportError(
            f"{source}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}): "
            "expected a JSON report or collect_env text"
        ) from None


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MB"


# --- what kind of input ------------------------------------------------------------------------


def detect_input_kind(text: str) -> str:
    """ "report" for a JSON object, "collect_env" for torch's environment text, else "unknown"."""
    if not isinstance(text, str):
        return UNKNOWN
    if text.lstrip("\ufeff \t\r\n").startswith("{") or _fenced_report(text) is not None:
        return REPORT
    if looks_like_collect_env(text):
        return COLLECT_ENV
    return UNKNOWN


# The <details> block of our own Markdown (render/markdown.py), pasted back from a GitHub issue: a line
# ```json (3 or more backticks), the JSON object, and a line with the same backticks.
_FENCE_OPEN = re.compile(r"(`{3,})json[ \t]*")


def _fenced_report(text: str) -> str | None:
    """The first ```json block holding a report, in one pass over the lines (linear: a paste full of
    fences that never close costs one read, not one read per fence)."""
    if "report_schema_version" not in text[:MAX_INPUT_BYTES]:
        return None
    fence, body = None, []
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if fence is None:
            opened = _FENCE_OPEN.fullmatch(line)
            if opened:
                fence, body = opened.group(1), []
        elif line.rstrip(" \t") == fence:
            block = "\n".join(body)
            if block.startswith("{") and '"report_schema_version"' in block:
                return block
            fence = None
        else:
            body.append(line)
    return None


# --- validation --------------------------------------------------------------------------------


def validate_report(data: Any) -> list[str]:
    """Problems with a report dict, one line each; [] when it is valid.

    Always runs a light structural check (no dependencies). When jsonschema is importable and the
    schema file is present (a source checkout, the tests) it also checks against
    schema/report.schema.json; jsonschema is a test dependency, never a runtime one.
    """
    errors = _light_check(data)
    errors.extend(e for e in _schema_check(data) if e not in errors)
    return errors


def _light_check(data: Any) -> list[str]:
    if not isinstance(data, dict):
        return [f"report: expected an object, got {_json_type(data)}"]
    errors = [f"report: missing key {key!r}" for key in _TOP_KEYS if key not in data]
    version = data.get("report_schema_version")
    if "report_schema_version" in data and (not isinstance(version, int) or isinstance(version, bool)):
        errors.append(f"report_schema_version: expected an integer, got {_json_type(version)}")
    elif isinstance(version, int) and version != REPORT_SCHEMA_VERSION:
        errors.append(f"report_schema_version: {version}, this torchdoctor reads {REPORT_SCHEMA_VERSION}")
    for key in ("tool", "table", "plan", "summary", "snapshot"):
        if key in data and not isinstance(data[key], dict):
            errors.append(f"{key}: expected an object, got {_json_type(data[key])}")
    if isinstance(data.get("tool"), dict) and not isinstance(data["tool"].get("version"), str):
        errors.append("tool.version: expected a string")
    if isinstance(data.get("snapshot"), dict):
        try:
            Snapshot.from_dict(data["snapshot"])
        except (SnapshotFormatError, TypeError) as exc:
            errors.append(str(exc))
    for key, required in (("checks", ("rule", "status")), ("findings", ("id", "severity", "title"))):
        items = data.get(key)
        if key not in data:
            continue
        if not isinstance(items, list):
            errors.append(f"{key}: expected a list, got {_json_type(items)}")
            continue
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                errors.append(f"{key}[{i}]: expected an object, got {_json_type(item)}")
                continue
            for name in required:
                if not isinstance(item.get(name), str):
                    errors.append(f"{key}[{i}].{name}: expected a string")
            if (
                key == "findings"
                and isinstance(item.get("severity"), str)
                and item["severity"] not in SEVERITIES
            ):
                errors.append(
                    f"findings[{i}].severity: {item['severity']!r} is not one of {', '.join(SEVERITIES)}"
                )
    if isinstance(data.get("summary"), dict):
        for name in _SUMMARY_KEYS:
            value = data["summary"].get(name)
            if not isinstance(value, int) or isinstance(value, bool):
                errors.append(f"summary.{name}: expected an integer, got {_json_type(value)}")
    return errors


def _schema_check(data: Any) -> list[str]:
    try:
        import jsonschema
    except ImportError:
        return []
    try:
        schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    validator = jsonschema.Draft202012Validator(schema)
    out = []
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        where = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in error.absolute_path)
        out.append(f"{where.replace('.[', '[') or 'report'}: {error.message}")
    return out


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# --- reading -----------------------------------------------------------------------------------


def read_report(text: str, source: str = "report") -> tuple[Snapshot, dict[str, Any]]:
    """Parse a --from input: a torchdoctor JSON report (bare, or the JSON block of our Markdown as
    pasted in an issue) or `python -m torch.utils.collect_env` text.

    Returns the snapshot (origin "report" or "collect_env") and meta: {"kind", "source",
    "tool_version", "report_schema_version", "table", "missing_fields", "original_origin"}.
    Raises ReportError (one line naming ``source``) for anything it cannot read.
    """
    if not isinstance(text, str):
        raise ReportError(f"{source}: expected text, got {type(text).__name__}")
    if len(text) > MAX_INPUT_BYTES:
        raise ReportError(
            f"{source}: {_mb(len(text))} is too large for a report (limit {_mb(MAX_INPUT_BYTES)})"
        )
    if "\x00" in text:
        raise ReportError(f"{source}: binary file (NUL bytes): expected a JSON report or collect_env text")
    kind = detect_input_kind(text)
    if kind == COLLECT_ENV:
        snapshot = parse_collect_env(text)
        meta = {
            "kind": COLLECT_ENV,
            "source": source,
            "tool_version": None,
            "report_schema_version": None,
            "table": None,
            "missing_fields": [],
            "original_origin": COLLECT_ENV,
        }
        return snapshot, meta
    if kind == UNKNOWN:
        stripped = text.strip()
        if not stripped:
            raise ReportError(f"{source}: empty file: expected a JSON report or collect_env text")
        if stripped[0] in '["0123456789-tfn':
            data = _loads(stripped, source)
            raise ReportError(
                f"{source}: JSON {_json_type(data)}, not a torchdoctor report (expected an object)"
            )
        raise ReportError(
            f"{source}: neither a torchdoctor JSON report nor `python -m torch.utils.collect_env` output"
        )
    stripped = text.lstrip("\ufeff \t\r\n")
    data = _loads(stripped if stripped.startswith("{") else (_fenced_report(text) or stripped), source)
    if not isinstance(data, dict):
        raise ReportError(f"{source}: JSON {_json_type(data)}, not a torchdoctor report (expected an object)")
    return _from_report_dict(data, source)


def _loads(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise ReportError(f"{source}: JSON nested too deeply to be a torchdoctor report") from None
    except ValueError as exc:
        # Cut off mid-way: the error is at the very end, or a string opened before it never closes
        # ("Unterminated string starting at" points at where the string began, not at the end).
        if isinstance(exc, json.JSONDecodeError) and (exc.pos >= len(text.rstrip())
                                                      or exc.msg.startswith("Unterminated string")):
            raise ReportError(
                f"{source}: truncated JSON (ends at line {exc.lineno}, column {exc.colno}): "
                "was the file cut off while being written or copied?"
            ) from None
        if isinstance(exc, json.JSONDecodeError):
            raise ReportError(
                f"{source}: invalid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
            ) from None
        raise ReportError(f"{source}: invalid JSON: {exc}") from None


def _from_report_dict(data: dict[str, Any], source: str) -> tuple[Snapshot, dict[str, Any]]:
    if "report_schema_version" not in data:
        raise ReportError(f"{source}: JSON object without 'report_schema_version': not a torchdoctor report")
    version = data["report_schema_version"]
    tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}
    tool_version = tool.get("version") if isinstance(tool.get("version"), str) else None
    writer = f"torchdoctor {tool_version}" if tool_version else "another torchdoctor"
    if not isinstance(version, int) or isinstance(version, bool):
        raise ReportError(
            f"{source}: report_schema_version is {json.dumps(version)[:40]}, expected an integer"
        )
    if version != REPORT_SCHEMA_VERSION:
        hint = (
            "upgrade torchdoctor to read it"
            if version > REPORT_SCHEMA_VERSION
            else "write a new report with this torchdoctor"
        )
        raise ReportError(
            f"{source}: report format {version} (written by {writer}); this torchdoctor {__version__} "
            f"reads format {REPORT_SCHEMA_VERSION} ({hint})"
        )
    raw = data.get("snapshot")
    if not isinstance(raw, dict):
        raise ReportError(f"{source}: report has no snapshot object (got {_json_type(raw)})")
    try:
        snapshot = Snapshot.from_dict(raw)
    except SnapshotFormatError as exc:
        raise ReportError(f"{source}: malformed report: {exc}") from None
    except (TypeError, ValueError, RecursionError) as exc:  # from_dict on hostile input
        raise ReportError(f"{source}: malformed report: {type(exc).__name__}: {exc}") from None
    odd = _odd_fact(snapshot)
    if odd:
        raise ReportError(f"{source}: malformed report: {odd}")
    missing = missing_fields(Snapshot, raw)
    if missing:
        snapshot.unknowns = list(snapshot.unknowns) + [
            f"{path}: not in this report (written by {writer}), assumed default" for path in missing
        ]
    original_origin = snapshot.origin
    snapshot.origin = REPORT
    table = data.get("table") if isinstance(data.get("table"), dict) else None
    meta = {
        "kind": REPORT,
        "source": source,
        "tool_version": tool_version,
        "report_schema_version": version,
        "table": table,
        "missing_fields": missing,
        "original_origin": original_origin,
    }
    return snapshot, meta


def _odd_fact(value: Any, where: str = "snapshot") -> str | None:
    """The first fact whose value is not a plain one (text, number, true/false or null): the rules compare
    facts as such, and a list where a version belongs would crash them."""
    if not _has_odd_fact(value):  # nearly always: no path strings built
        return None
    if isinstance(value, Fact):
        if value.value is None or isinstance(value.value, (str, int, float, bool)):
            return None
        return f"{where}.value: expected a string, a number or null, got {_json_type(value.value)}"
    if is_dataclass(value):
        for f in fields(value):
            found = _odd_fact(getattr(value, f.name), f"{where}.{f.name}")
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _odd_fact(item, f"{where}[{i}]")
            if found:
                return found
    return None


def _has_odd_fact(value: Any) -> bool:
    """Whether ``_odd_fact`` finds one: the same walk without the paths, into only the fields whose type can
    hold a fact (a report is read by type: a fact is never anywhere else)."""
    if isinstance(value, Fact):
        inner = value.value
        return not (inner is None or isinstance(inner, (str, int, float, bool)))
    if isinstance(value, list):
        return any(_has_odd_fact(item) for item in value)
    names = _fact_fields(type(value))
    return names is not None and any(_has_odd_fact(getattr(value, name)) for name in names)


@functools.cache
def _fact_fields(cls: type) -> tuple[str, ...] | None:
    """The fields of a dataclass's instances whose type can hold a Fact; None for anything else."""
    if cls is type or not is_dataclass(cls):
        return None
    return tuple(name for name, tp in field_types(cls) if _holds_fact(tp, frozenset((cls,))))


def _holds_fact(tp: Any, seen: frozenset) -> bool:
    if isinstance(tp, type) and issubclass(tp, Fact):
        return True
    if is_dataclass(tp):
        return tp not in seen and any(_holds_fact(t, seen | {tp}) for _, t in field_types(tp))
    return tp is Any or any(_holds_fact(arg, seen) for arg in typing.get_args(tp))


def missing_fields(cls: type, data: Any, where: str = "snapshot") -> list[str]:
    """Dataclass fields absent from ``data`` (recursively), as dotted paths; list items as "[]".

    The environment's sparse keys are never missing (doctor/model/environment.py): a key written only
    when stated, or any key of a section that may be just its reason, was simply not stated."""
    plan = _missing_plan(cls) if isinstance(data, dict) else None
    if plan is None:
        return []
    out: list[str] = []
    for name, stated_only, tp in plan:
        if name not in data:
            if not stated_only:
                out.append(f"{where}.{name}")
            continue
        if tp is None:
            continue
        value, path = data[name], f"{where}.{name}"
        if isinstance(value, list):
            for item in value:
                out.extend(p for p in missing_fields(tp, item, f"{path}[]") if p not in out)
        else:
            out.extend(missing_fields(tp, value, path))
    return out


@functools.cache
def _missing_plan(cls: type) -> tuple[tuple[str, bool, type | None], ...] | None:
    """Per field of ``cls``: (name, written only when stated, the dataclass it holds); None where nothing can
    be missing (not a dataclass, or a section that may be just its reason). Worked out once per class."""
    if not is_dataclass(cls) or _sparse(cls)[1]:
        return None
    stated_only = _sparse(cls)[0]
    return tuple((name, name in stated_only, _dataclass_in(tp)) for name, tp in field_types(cls))


@functools.cache
def _sparse(cls: type) -> tuple[frozenset[str], bool]:
    """(the fields written only when stated, whether the class is a section that may be just its reason)."""
    marks = {f.name: f.metadata.get(WRITTEN) for f in fields(cls)}
    stated_only = frozenset(name for name, mark in marks.items() if mark in (WHEN_STATED, ALONE_WHEN_UNREAD))
    return stated_only, ALONE_WHEN_UNREAD in marks.values()


@functools.cache  # per type, not per field of every report
def _dataclass_in(tp: Any) -> type | None:
    """The dataclass inside ``X``, ``X | None`` or ``list[X]``, if any."""
    if is_dataclass(tp):
        return tp
    for arg in typing.get_args(tp):
        found = _dataclass_in(arg)
        if found is not None:
            return found
    return None
