"""Generate schema/report.schema.json from the dataclasses the report is made of.

    python schema/generate.py           # rewrite schema/report.schema.json
    python schema/generate.py --check   # exit 1 if the checked-in file differs

The snapshot part is derived from doctor/model/snapshot.py (its environment sections from
doctor/model/environment.py), findings and checks from doctor/model/findings.py,
so a field added to a dataclass shows up here on the next run (and tests/test_report_schema.py fails
until the file is regenerated). The report envelope and the free-form plan are written out by hand below.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from doctor.model import environment as environment_module  # noqa: E402
from doctor.model import findings as findings_module  # noqa: E402
from doctor.model import snapshot as snapshot_module  # noqa: E402
from doctor.model.report import REPORT_SCHEMA_VERSION  # noqa: E402

SCHEMA_PATH = ROOT / "schema" / "report.schema.json"
SCHEMA_ID = "urn:torchdoctor:report-schema:1"  # a name, not a URL to fetch

# Closed vocabularies worth enforcing; other strings stay open so that a new status is not a break.
ENUMS = {
    ("Finding", "severity"): list(findings_module.SEVERITIES),
    ("CheckResult", "status"): list(findings_module.CHECK_STATES),
}


def type_schema(tp: Any, defs: dict[str, Any], owner: str = "", name: str = "") -> dict[str, Any]:
    """JSON Schema for one annotation; dataclasses go to $defs and are referenced."""
    if dataclasses.is_dataclass(tp):
        if tp.__name__ not in defs:
            defs[tp.__name__] = {}  # placeholder: stops recursion on self-references
            defs[tp.__name__] = dataclass_schema(tp, defs)
        return {"$ref": f"#/$defs/{tp.__name__}"}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        options = [type_schema(a, defs, owner, name) for a in args if a is not type(None)]
        nullable = type(None) in args
        if len(options) == 1 and nullable and set(options[0]) == {"type"}:
            return {"type": [options[0]["type"], "null"]}
        return {"anyOf": options + ([{"type": "null"}] if nullable else [])}
    if origin is list:
        return {"type": "array", "items": type_schema(args[0], defs, owner, name)}
    if origin is dict:
        if args and args[1] is not Any:  # dict[str, X]: say what the values are
            return {"type": "object", "additionalProperties": type_schema(args[1], defs, owner, name)}
        return {"type": "object"}
    if tp is Any:
        return {}
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if tp in simple:
        schema: dict[str, Any] = {"type": simple[tp]}
        if (owner, name) in ENUMS:
            schema["enum"] = ENUMS[(owner, name)]
        return schema
    raise TypeError(f"no JSON Schema mapping for {owner}.{name}: {tp!r}")


def dataclass_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    # the models import Any for type checkers only
    hints = typing.get_type_hints(cls, localns={"Any": typing.Any})
    # fields marked metadata={"report": False} are working data, not part of the report
    fields = [f for f in dataclasses.fields(cls) if f.metadata.get("report", True)]
    # the docstring's first paragraph, its lines joined (a sentence may be wrapped at 110 columns)
    doc = " ".join(line.strip() for line in (cls.__doc__ or "").strip().split("\n\n")[0].splitlines())
    schema: dict[str, Any] = {"type": "object"}
    if doc and not doc.startswith(f"{cls.__name__}("):  # dataclass's generated signature is no doc
        schema["description"] = doc
    schema["properties"] = {f.name: type_schema(hints[f.name], defs, cls.__name__, f.name) for f in fields}
    # An environment section (doctor/model/environment.py) writes some keys only when the probe stated them,
    # and one that could not be read is only {"why": ...}: nothing in it is required.
    written = {f.name: f.metadata.get(environment_module.WRITTEN) for f in fields}
    if environment_module.ALONE_WHEN_UNREAD in written.values():
        schema["description"] = (schema.get("description", "") + " Sparse: keys come and go with what the "
            "probe "
                                 "could read; a section that could not be read is only {\"why\": "
                                 "...}.").strip()
        schema["required"] = []
    else:
        schema["required"] = [name for name, how in written.items() if how is None]
    # Newer minor versions may add fields; readers ignore what they do not know (schema/README.md).
    schema["additionalProperties"] = True
    return schema


def build_schema() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    snapshot_ref = type_schema(snapshot_module.Snapshot, defs)
    finding_ref = type_schema(findings_module.Finding, defs)
    check_ref = type_schema(findings_module.CheckResult, defs)
    nullable_string = {"type": ["string", "null"]}
    defs["PlanStep"] = {
        "type": "object",
        "properties": {
            "kind": {"type": "string"},
            "description": {"type": "string"},
            "command": nullable_string,
            "argv": {"type": ["array", "null"], "items": {"type": "string"}},
        },
        "additionalProperties": True,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "torchdoctor report",
        "description": (
            "What `torchdoctor check --json` writes and `check --from FILE` reads back. Generated by "
            "schema/generate.py from doctor/snapshot.py and doctor/findings.py; see schema/README.md."
        ),
        "type": "object",
        "required": [
            "report_schema_version",
            "tool",
            "table",
            "snapshot",
            "checks",
            "findings",
            "plan",
            "summary",
        ],
        "additionalProperties": True,
        "properties": {
            "report_schema_version": {"type": "integer", "const": REPORT_SCHEMA_VERSION},
            "tool": {
                "type": "object",
                "required": ["name", "version"],
                "properties": {"name": {"const": "torchdoctor"}, "version": {"type": "string"}},
                "additionalProperties": True,
            },
            "table": {
                "type": "object",
                "properties": {
                    "version": nullable_string,
                    "verified_on": nullable_string,
                    "path": nullable_string,
                },
                "additionalProperties": True,
            },
            "snapshot": snapshot_ref,
            "checks": {"type": "array", "items": check_ref},
            "findings": {"type": "array", "items": finding_ref},
            "plan": {
                "type": "object",
                "description": "The fix plan; free-form beyond these keys (doctor/plan/plan.py, "
                    "docs/plan.md).",
                "properties": {
                    "status": {"type": "string"},
                    "steps": {"type": "array", "items": {"$ref": "#/$defs/PlanStep"}},
                    "target": {"type": ["object", "null"]},
                    "notes": {"type": "array", "items": {"type": "string"}},
                    "wanted": {"type": ["object", "null"]},
                    "driver": {"type": ["object", "null"]},
                    "driver_change": {"type": "object"},
                    "alternatives": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "kind": {"type": "string"},
                                "primary": {"type": "boolean"},
                                "summary": {"type": "string"},
                                "cost": {"type": "string"},
                                "available": {"type": "boolean"},
                                "steps": {"type": "array", "items": {"$ref": "#/$defs/PlanStep"}},
                            },
                            "additionalProperties": True,
                        },
                    },
                    "pins": {"type": "array", "items": {"type": "string"}},
                },
                "additionalProperties": True,
            },
            "redacted": {
                "type": "boolean",
                "description": "false: written with --no-redact where torchdoctor redacts (report, -o, "
                "markdown, github, junit); absent otherwise, and in reports of older versions.",
            },
            "summary": {
                "type": "object",
                "required": ["errors", "warnings", "infos", "exit_code"],
                "properties": {
                    "errors": {"type": "integer", "minimum": 0},
                    "warnings": {"type": "integer", "minimum": 0},
                    "infos": {"type": "integer", "minimum": 0},
                    "exit_code": {"type": "integer"},
                    "strict": {"type": "boolean", "description": "Warnings failed the run too (since 0.2)."},
                    "checks": {
                        "type": "object",
                        "description": "How many checks are in each state (since 0.2).",
                        "additionalProperties": {"type": "integer", "minimum": 0},
                    },
                },
                "additionalProperties": True,
            },
        },
        "$defs": dict(sorted(defs.items())),
    }


def render_schema() -> str:
    return json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = render_schema()
    if "--check" in argv:
        current = SCHEMA_PATH.read_text(encoding="utf-8") if SCHEMA_PATH.exists() else ""
        if current != text:
            print(f"{SCHEMA_PATH} is out of date: run python schema/generate.py", file=sys.stderr)
            return 1
        return 0
    SCHEMA_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
