"""Markdown for a GitHub issue: a short summary table, the findings, the fix, the full JSON folded away.

Pure: takes the report dict (already redacted by the caller unless --no-redact) and returns text.
"""

from __future__ import annotations

import json
import re
from typing import Any

from doctor.model.i18n import Msg, localize, tr
from doctor.render.sanitize import json_bidi
from doctor.render.verdict import (
    checks_text,
    driver_words,
    exit_code,
    headline,
    no_gpu,
    plan_line,
    torch_warnings,
    torch_words,
)

ICONS = {"error": "❌", "warning": "⚠️", "info": "ℹ️"}
# The summary table's labels as people read them (summary_rows keeps the English ones: JUnit property names).
LABELS = {"NVIDIA driver": Msg("NVIDIA driver"), "GPUs": Msg("GPUs"), "Environment": Msg("Environment"),
          "Platform": Msg("Platform"), "torch import": Msg("torch import"),
          "torch warnings": Msg("torch warnings")}
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
STATES = {"skipped": Msg("skipped"), "unknown": Msg("unknown")}


def render_markdown(report: dict) -> str:
    snap = as_object(report.get("snapshot"))
    findings = by_severity(f for f in as_list(report.get("findings")) if isinstance(f, dict))
    parts = [f"### torchdoctor: {cell(headline(report))}", ""]

    parts += ["| | |", "| --- | --- |"]
    for label, value in summary_rows(snap):
        parts.append(f"| {localize(LABELS.get(label, label))} | {cell(value)} |")
    parts.append("")

    if findings:
        parts += [f"| | id | {tr('finding')} |", "| --- | --- | --- |"]
        for f in findings:
            icon = ICONS.get(str(f.get("severity")), "•")
            parts.append(f"| {icon} | `{cell(f.get('id'), code=True)}` | {cell(localize(f.get('title')))} |")
        parts.append("")
    else:
        parts += [tr("No problems found."), ""]

    parts += check_lines(report)

    closing = plan_line(report)
    if closing is not None:
        parts += [cell(closing), ""]
    notes, commands = fix_lines(report)
    if closing is not None and exit_code(report) in (0, None) and not any(
            f.get("severity") in ("error", "warning") for f in findings):
        notes, commands = [], []  # the text says "nothing to change": so does this
    if notes or commands:
        parts += [f"**{tr('Fix')}**", ""]
        parts += [f"- {cell(localize(n))}" for n in notes]
        if notes:
            parts.append("")
        if commands:
            parts += [*fenced("\n".join(commands), "bash"), ""]

    full = json_bidi(json.dumps(report, indent=2, ensure_ascii=False, default=str))
    parts += [
        f"<details><summary>{tr('Full report (JSON)')}</summary>",
        "",
        *fenced(full, "json"),
        "",
        "</details>",
        "",
    ]
    parts.append(f"<sub>{cell(_footer(report))}</sub>")
    return "\n".join(parts) + "\n"


def summary_rows(snap: dict) -> list[tuple[str, str]]:
    """(label, value) pairs for the summary table; shared with other renderers."""
    install, runtime, nvidia = (
        as_object(snap.get("install")),
        as_object(snap.get("runtime")),
        as_object(snap.get("nvidia")),
    )
    interp, host = as_object(snap.get("interpreter")), as_object(snap.get("host"))
    torch = as_object(install.get("torch"))

    if torch:
        build = torch.get("build_version") or torch.get("version") or "?"
        kind = _build_kind(torch)
        torch_text = f"{build} ({kind})"
        if torch.get("build_version") and torch.get("version") and torch["version"] != torch["build_version"]:
            torch_text += f", dist {torch['version']}"
    elif runtime.get("torch_version"):
        torch_text = str(runtime["torch_version"])
    else:
        torch_text = torch_words(snap) or "?"
    for name in ("torchvision", "torchaudio"):
        dist = as_object(install.get(name))
        if dist:
            torch_text += f"; {name} {dist.get('build_version') or dist.get('version')}"

    driver = _fact(nvidia.get("driver_version"))
    max_cuda = _fact(nvidia.get("cuda_driver_version"))
    driver_text = (
        f"{driver} (max CUDA {max_cuda or localize(Msg('unknown'))})" if driver else driver_words(nvidia)
    )

    gpus = []
    for gpu in as_list(nvidia.get("gpus")):
        gpu = as_object(gpu)
        cc = _fact(gpu.get("compute_capability"))
        extra = [f"CC {cc}" if cc else f"CC {localize(Msg('unknown'))}"]
        if gpu.get("memory_total_mib"):
            extra.append(f"{gpu['memory_total_mib']} MiB")
        gpus.append(f"{gpu.get('index', '?')}: {gpu.get('name') or '?'} ({', '.join(extra)})")
    if not gpus:
        for dev in as_list(runtime.get("devices")):
            dev = as_object(dev)
            gpus.append(
                f"{dev.get('index', '?')}: {dev.get('name') or '?'} (CC {dev.get('capability') or '?'})"
            )

    python = " ".join(str(x) for x in (interp.get("version"), interp.get("implementation")) if x) or "?"
    if interp.get("free_threaded"):
        python += " (free-threaded)"
    kind = str(interp.get("env_kind") or "?")
    if interp.get("externally_managed"):
        kind += ", externally managed"

    platform = f"{host.get('os') or '?'}-{host.get('machine') or '?'}"
    extras = [host.get("libc"), "WSL" if host.get("wsl") else None, host.get("container")]
    platform += "".join(f", {x}" for x in extras if x)

    status = runtime.get("status") or "?"
    import_text = str(status)
    if status == "ok":
        backend = runtime.get("backend") or "?"
        available = runtime.get("cuda_available")
        import_text = f"ok, backend {backend}" + (
            f", cuda available {available}" if available is not None else ""
        )
    elif runtime.get("detail"):
        import_text += f": {runtime['detail']}"

    if gpus:
        gpus_text = "<br>".join(gpus)
    elif no_gpu(nvidia):
        gpus_text = localize(Msg("no GPU"))
    elif nvidia.get("status") in (None, "unknown"):
        gpus_text = localize(Msg("unknown"))
    else:
        gpus_text = localize(Msg("none found"))
    warned = torch_warnings(runtime)
    return [
        ("torch", torch_text),
        ("NVIDIA driver", str(driver_text)),
        ("GPUs", gpus_text),
        ("Python", python),
        ("Environment", kind),
        ("Platform", platform),
        ("torch import", import_text),
        *([("torch warnings", "<br>".join(warned))] if warned else []),
    ]  # every value is a str, whatever types a hand-edited report holds


def fix_lines(report: dict) -> tuple[list[str], list[str]]:
    """(notes, commands): the plan's steps when it has any, else the findings' own fix commands."""
    plan = as_object(report.get("plan"))
    notes: list[str] = []
    commands: list[str] = []
    steps = [s for s in as_list(plan.get("steps")) if isinstance(s, dict)]
    for step in steps:
        if step.get("command"):
            commands.append(str(step["command"]))
        elif step.get("description"):
            notes.append(str(step["description"]))
    if not steps:  # the findings' own commands; a note's are no fix of anything
        for f in as_list(report.get("findings")):
            if as_object(f).get("severity") not in ("error", "warning"):
                continue
            fix = as_object(as_object(f).get("fix"))
            for cmd in as_list(fix.get("commands")):
                if cmd not in commands:
                    commands.append(str(cmd))
    return notes, commands


def check_lines(report: dict) -> list[str]:
    """The checks by state, and the ones that were skipped or unknown with why (folded when many)."""
    counts = checks_text(report)
    if not counts:
        return []
    code = as_object(report.get("summary")).get("exit_code")
    lines = [f"**{tr('Checks')}**: "
        f"{cell(counts)}" + (f" ({tr('exit {code}', code=code)})" if isinstance(code, int)
                                                       else ""), ""]
    gaps = [c for c in as_list(report.get("checks")) if isinstance(c, dict) and c.get("status") in ("skipped",
                                                                                                  "unknown")]
    if gaps:
        rows = [f"| {tr('state')} | {tr('check')} | {tr('why')} |", "| --- | --- | --- |"]
        rows += [f"| {cell(localize(STATES.get(c.get('status'), c.get('status'))))} | "
                 f"{cell(localize(c.get('summary') or c.get('rule')))} | {cell(localize(c.get('note')))} |"
                 for c in gaps]
        lines += [f"<details><summary>{tr('Not checked: {count}', count=len(gaps))}</summary>", "", *rows, "",
                  "</details>", ""]
    return lines


def by_severity(findings) -> list[dict]:
    """Errors first, then warnings, then notes; the report's order within each."""
    return sorted(findings, key=lambda f: SEVERITY_ORDER.get(str(f.get("severity")), 3))


def _build_kind(torch: dict) -> str:
    if torch.get("cuda"):
        return f"CUDA {torch['cuda']}"
    if torch.get("hip"):
        return f"ROCm/HIP {torch['hip']}"
    if torch.get("xpu"):
        return f"XPU {torch['xpu']}"
    return "CPU build"


def _footer(report: dict) -> str:
    tool, table = as_object(report.get("tool")), as_object(report.get("table"))
    text = tr("torchdoctor {version}, report format {schema}", version=tool.get('version', '?'),
              schema=report.get('report_schema_version', '?'))
    if table.get("version"):
        text += tr(", compatibility table {table}", table=table['version'])
        if table.get("verified_on"):
            text += tr(" (verified {date})", date=table['verified_on'])
    return text


def fenced(text: str, lang: str) -> list[str]:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{lang}", text, fence]


def cell(value: Any, code: bool = False) -> str:
    text = " ".join(str(value if value is not None else "").split())
    if not code:
        # "<redacted>" would vanish as an unknown HTML tag; keep our own <br> line breaks.
        text = (
            text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("&lt;br&gt;", "<br>")
        )
    return text.replace("|", "\\|").replace("`", "'" if code else "`")


def _fact(value: Any) -> str | None:
    if isinstance(value, dict):
        v = value.get("value")
        return None if v is None else str(v)
    return None


def as_object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []
