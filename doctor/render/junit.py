"""JUnit XML for CI test reporters: one testcase per check, failures for error findings, <skipped> for a
check that did not run (``type="skipped"``: it does not apply, with why) or could not tell
(``type="unknown"``: a fact was missing), <error> for a rule that crashed.

Warnings go to <system-out>, or become failures when the run was strict (the report's
``summary.strict``: --strict or the config's ``strict``).
Built with ElementTree so escaping is right; characters XML 1.0 forbids are dropped first.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from doctor.model.i18n import localize, tr
from doctor.render.markdown import as_list, as_object, summary_rows

_XML_INVALID = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(value: object) -> str:
    return _XML_INVALID.sub("", str(value if value is not None else ""))


def _describe(finding: dict) -> str:
    lines = [f"[{finding.get('severity')}] {finding.get('id')}: {localize(finding.get('title'))}"]
    if finding.get("detail"):
        lines.append(str(localize(finding["detail"])))
    fix = as_object(finding.get("fix"))
    if fix.get("summary"):
        lines.append(tr("Fix: {summary}", summary=fix["summary"]))
    lines += [f"  {c}" for c in as_list(fix.get("commands"))]
    return "\n".join(lines)


def render_junit(report: dict) -> str:
    strict = bool(as_object(report.get("summary")).get("strict"))
    checks = [c for c in as_list(report.get("checks")) if isinstance(c, dict)]
    findings = [f for f in as_list(report.get("findings")) if isinstance(f, dict)]
    by_rule: dict[str, list[dict]] = {}
    for f in findings:
        by_rule.setdefault(str(f.get("rule") or f.get("id") or "torchdoctor"), []).append(f)

    cases = [(str(c.get("rule")), c) for c in checks]
    known = {name for name, _ in cases}
    cases += [
        (rule, {"rule": rule, "status": "failed", "summary": ""}) for rule in by_rule if rule not in known
    ]

    suite = ET.Element("testsuite", name="torchdoctor")
    props = ET.SubElement(suite, "properties")
    for label, value in summary_rows(as_object(report.get("snapshot"))):
        ET.SubElement(props, "property", name=_clean(label), value=_clean(value.replace("<br>", "; ")))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for rule, check in cases:
        counts["tests"] += 1
        case = ET.SubElement(suite, "testcase", classname="torchdoctor", name=_clean(rule))
        own = by_rule.get(rule, [])
        failing = [
            f for f in own if f.get("severity") == "error" or (strict and f.get("severity") == "warning")
        ]
        others = [f for f in own if f not in failing]
        status = check.get("status")
        if status == "crashed":
            counts["errors"] += 1
            ET.SubElement(case, "error", message=_clean(check.get("note") or "rule crashed"), type="crashed")
        elif failing:
            counts["failures"] += 1
            first = failing[0]
            failure = ET.SubElement(
                case, "failure", message=_clean(localize(first.get("title"))), type=_clean(first.get("id"))
            )
            failure.text = _clean("\n\n".join(_describe(f) for f in failing))
        elif status in ("skipped", "unknown"):
            # JUnit has no "unknown": a check that could not tell did not pass either, so it is skipped,
            # typed and worded so that the two stay apart.
            counts["skipped"] += 1
            note = check.get("note") or status
            ET.SubElement(case, "skipped", type=status,
                          message=_clean(localize(note) if status == "skipped" else tr("unknown: "
                              "{note}", note=note)))
        if others:
            ET.SubElement(case, "system-out").text = _clean("\n\n".join(_describe(f) for f in others))
    for key, value in counts.items():
        suite.set(key, str(value))
    root = ET.Element("testsuites", name="torchdoctor", **{k: str(v) for k, v in counts.items()})
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
