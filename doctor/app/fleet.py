"""`torchdoctor fleet summarize REPORTS...`: many machines' JSON reports, one picture.

The reports are read by doctor/inputs/nodes.py; this module counts findings, drivers, torch builds
and GPU models, names the nodes that differ from the majority, and groups the nodes by the fix they
need (pure functions after the read). The human and Markdown views are doctor/render/fleet.py;
``summarize_command`` is what the typer command in doctor/cli/commands.py runs.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor import exitcodes
from doctor.errors import DoctorError
from doctor.inputs.nodes import NONE, UNKNOWN, NodeReport, read_node_reports

# The dimensions on which a node can be the odd one out, in display order (NodeReport attributes).
DIMENSIONS = ("driver", "torch_build", "gpu_models", "findings")


@dataclass(slots=True)
class FleetSummary:
    nodes: list[NodeReport] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (path, one-line reason)
    counts: dict[str, Counter] = field(
        default_factory=dict
    )  # "findings", "driver", "torch_build", "gpu_model"
    majority: dict[str, str] = field(default_factory=dict)
    odd: list[dict[str, Any]] = field(default_factory=list)  # {"node", "path", "differs": {dim: value}}
    # {"commands" (torchdoctor's, from the first report's facts), "reported" (that report's own text),
    #  "reported_by", "report" (its path), "nodes", "count"[, "not_derived": why no commands were written]}
    fix_groups: list[dict[str, Any]] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0: every report read, no odd node, no error finding; 1: otherwise; 2: nothing readable."""
        if not self.nodes:
            return exitcodes.USAGE
        if self.unreadable or self.odd or any(n.errors for n in self.nodes):
            return exitcodes.FINDINGS
        return exitcodes.OK


# --- summarizing (pure) ---------------------------------------------------------------------------


def summarize(nodes: list[NodeReport], unreadable: list[tuple[str, str]] | None = None) -> FleetSummary:
    summary = FleetSummary(nodes=nodes, unreadable=list(unreadable or []))
    # One list per dimension, each counted by a Counter.
    columns = {dimension: [getattr(n, dimension) for n in nodes] for dimension in DIMENSIONS}
    summary.counts = {
        "findings": Counter(i for n in nodes for i in n.finding_ids),
        "driver": Counter(columns["driver"]),
        "torch_build": Counter(columns["torch_build"]),
        "gpu_model": _gpu_model_counts(nodes),
    }
    for dimension in DIMENSIONS:
        # A node is odd only against a real majority (more than half of the known values), and an
        # unknown value is no vote: three unknown drivers must not make the two known ones "odd".
        values = Counter(columns[dimension])
        values.pop(UNKNOWN, None)
        if values:
            value, count = values.most_common(1)[0]
            if 2 * count > sum(values.values()):
                summary.majority[dimension] = value
    voted = [(d, summary.majority[d], columns[d]) for d in DIMENSIONS if d in summary.majority]
    for i, node in enumerate(nodes):
        differs = {}
        for dimension, majority, column in voted:
            value = column[i]
            if value != majority and value != UNKNOWN:
                differs[dimension] = value
        if differs:
            summary.odd.append({"node": node.node, "path": node.path, "differs": differs})
    groups: dict[tuple[str, ...], list[NodeReport]] = {}
    for node in nodes:
        groups.setdefault(node.plan_commands, []).append(node)
    # Grouped by the commands each report lists, but those are the report's text, not a fix: a report can say
    # anything ("curl ... | sh"). rederive() writes each group's commands from its first report's facts.
    summary.fix_groups = [
        {"commands": [], "reported": list(commands), "reported_by": members[0].node,
         "report": members[0].path, "count": len(members), "nodes": [n.node for n in members]}
        for commands, members in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    ]
    return summary


def rederive(summary: FleetSummary, diagnose=None) -> FleetSummary:
    """Each group's commands, written by torchdoctor from its first report's facts with today's rules and
    table, as `check --from` does; the report's own commands stay only as ``reported`` (by
    ``reported_by``), never as the fix. ``diagnose``: (path) -> the plan's commands (tests)."""
    groups = [g for g in summary.fix_groups if g["reported"]]  # a report without a fix needs none written
    if groups and diagnose is None:
        from doctor.table.load import load_table

        table = load_table()
        diagnose = lambda path: _commands_from(path, table)  # noqa: E731
    for group in groups:
        try:
            group["commands"] = diagnose(group["report"])
        except DoctorError as exc:
            group["not_derived"] = str(exc)
    return summary


def _commands_from(path: str, table) -> list[str]:
    from doctor.app.check import rediagnose

    diag = rediagnose(Path(path), table, None)
    return [step.command for step in diag.plan.steps if step.command]


def _gpu_model_counts(nodes: list[NodeReport]) -> Counter:
    """GPUs per model over the fleet (from "8x NAME, 2x OTHER")."""
    counts: Counter = Counter()
    for node in nodes:
        if node.gpu_models == NONE:
            continue
        for part in node.gpu_models.split(", "):
            number, _, model = part.partition("x ")
            counts[model] += int(number) if number.isdigit() else 1
    return counts


def summarize_paths(paths: Iterable[str]) -> FleetSummary:
    return rederive(summarize(*read_node_reports(paths)))


def summary_to_dict(summary: FleetSummary) -> dict[str, Any]:
    """The summary as JSON data: what `--json` prints and what the renderers take."""
    return {
        "fleet_schema_version": 1,
        "nodes": len(summary.nodes),
        "unreadable": [{"path": p, "reason": r} for p, r in summary.unreadable],
        "counts": {key: dict(counter.most_common()) for key, counter in summary.counts.items()},
        "majority": dict(summary.majority),
        "odd_nodes": summary.odd,
        "fix_groups": summary.fix_groups,
        "exit_code": summary.exit_code,
    }


# --- the command ----------------------------------------------------------------------------------


def summarize_command(
    reports: list[str], as_json: bool = False, markdown: bool = False, output: str | None = None,
    quiet: bool = False,
) -> int:
    """`fleet summarize`: read, summarise, write one view to ``output`` or stdout; the exit code."""
    from doctor.errors import DoctorError
    from doctor.render.fleet import render_human, render_markdown

    if as_json and markdown:
        raise DoctorError("--json and --markdown: choose one")
    from doctor.app.options import CheckOptions
    from doctor.app.output import deliver
    from doctor.errors import one_line
    from doctor.render.sanitize import sanitize

    summary = summarize_paths(reports)
    if not summary.nodes:
        reasons = "; ".join(f"{p}: {r}" for p, r in summary.unreadable[:3]) or "no *.json found"
        print(one_line(f"torchdoctor fleet: no readable report ({reasons})"), file=sys.stderr)
        return exitcodes.USAGE
    data = summary_to_dict(summary)
    if as_json:
        text = json.dumps(data, indent=2) + "\n"  # exact: JSON escapes control characters itself
    elif markdown:
        text = render_markdown(sanitize(data))
    elif output:
        import io

        from doctor.render.console import console

        buffer = io.StringIO()
        render_human(sanitize(data), console(buffer, width=120, soft_wrap=False, no_color=True))
        text = buffer.getvalue()
    else:
        render_human(sanitize(data))
        return summary.exit_code
    deliver(text, CheckOptions(output=Path(output) if output else None, quiet=quiet))
    return summary.exit_code
