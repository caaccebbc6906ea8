"""`torchdoctor fleet summarize REPORTS...`: many machines' JSON reports, one picture.

Reads the reports `torchdoctor check --json` wrote on each node (files, or folders searched
recursively for ``*.json``), then counts findings, drivers, torch builds and GPU models, names the
nodes that differ from the majority, and groups the nodes by the fix they need. Pure functions over
dicts after the read; a file that cannot be read is listed with a one-line reason, never a
traceback. Plain ``json`` parsing, not ``Snapshot.from_dict``: 10,000 reports must take seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from doctor import exitcodes

# The dimensions on which a node can be the odd one out, in display order.
DIMENSIONS = (
    ("driver", "NVIDIA driver"),
    ("torch_build", "torch build"),
    ("gpu_models", "GPU models"),
    ("findings", "finding set"),
)
UNKNOWN = "(unknown)"
NONE = "(none)"
SHOW_AT_MOST = 50  # rows of odd nodes / names per fix group in the human and Markdown views


@dataclass
class NodeReport:
    node: str
    path: str
    driver: str = UNKNOWN
    torch_build: str = UNKNOWN
    gpu_models: str = NONE  # "8x NVIDIA H100 80GB HBM3", "(none)"
    findings: str = NONE  # sorted finding ids, comma-joined: the node's "finding set"
    finding_ids: tuple[str, ...] = ()
    errors: int = 0
    plan_commands: tuple[str, ...] = ()

    def value(self, dimension: str) -> str:
        return getattr(self, dimension)


@dataclass
class FleetSummary:
    nodes: list[NodeReport] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (path, one-line reason)
    counts: dict[str, Counter] = field(
        default_factory=dict
    )  # "findings", "driver", "torch_build", "gpu_model"
    majority: dict[str, str] = field(default_factory=dict)
    odd: list[dict[str, Any]] = field(default_factory=list)  # {"node", "path", "differs": {dim: value}}
    fix_groups: list[dict[str, Any]] = field(default_factory=list)  # {"commands", "nodes", "count"}

    @property
    def exit_code(self) -> int:
        """0: every report read, no odd node, no error finding; 1: otherwise; 2: nothing readable."""
        if not self.nodes:
            return exitcodes.USAGE
        if self.unreadable or self.odd or any(n.errors for n in self.nodes):
            return exitcodes.FINDINGS
        return exitcodes.OK


class UnreadableReport(ValueError):
    """A report file that is not a torchdoctor report; the message is the one-line reason."""


# --- reading --------------------------------------------------------------------------------------


def find_report_files(paths: Iterable[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Files as given, folders searched recursively for *.json (sorted); missing paths as unreadable."""
    files: list[str] = []
    missing: list[tuple[str, str]] = []
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs.sort()
                files.extend(os.path.join(root, n) for n in sorted(names) if n.endswith(".json"))
        elif os.path.exists(path):
            files.append(path)
        else:
            missing.append((path, "no such file or folder"))
    return files, missing


def read_node_report(path: str) -> NodeReport:
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read())
    except OSError as exc:
        raise UnreadableReport(exc.strerror or str(exc)) from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise UnreadableReport(f"not JSON: {str(exc).splitlines()[0][:120]}") from None
    return parse_node_report(data, path)


def parse_node_report(data: Any, path: str) -> NodeReport:
    """One report dict -> the facts the fleet view compares. Defensive: any shape may arrive."""
    if not isinstance(data, dict):
        raise UnreadableReport(f"expected a JSON object, got {type(data).__name__}")
    if "snapshot" not in data or "report_schema_version" not in data:
        raise UnreadableReport("not a torchdoctor report (no report_schema_version / snapshot)")
    if data.get("report_schema_version") != 1:
        raise UnreadableReport(f"report_schema_version {data.get('report_schema_version')!r} (this reads 1)")
    snapshot = _obj(data.get("snapshot"))
    environment = _obj(snapshot.get("environment"))
    nvidia = _obj(snapshot.get("nvidia"))
    torch = _obj(_obj(snapshot.get("install")).get("torch"))
    hostname = environment.get("hostname")
    # A redacted report says "<host>": then the file name (srun --output=reports/%N.json) names the node.
    node = hostname if isinstance(hostname, str) and hostname and hostname != "<host>" else _stem(path)
    driver = _obj(nvidia.get("driver_version")).get("value")
    build = torch.get("build_version") or torch.get("version")
    models = Counter(str(g.get("name") or "?") for g in _list(nvidia.get("gpus")) if isinstance(g, dict))
    findings = [f for f in _list(data.get("findings")) if isinstance(f, dict)]
    ids = tuple(sorted({str(f.get("id")) for f in findings if f.get("id")}))
    steps = [s for s in _list(_obj(data.get("plan")).get("steps")) if isinstance(s, dict)]
    return NodeReport(
        node=node,
        path=path,
        driver=str(driver) if driver else UNKNOWN,
        torch_build=str(build) if build else UNKNOWN,
        gpu_models=", ".join(f"{n}x {m}" for m, n in sorted(models.items())) or NONE,
        findings=", ".join(ids) or NONE,
        finding_ids=ids,
        errors=sum(f.get("severity") == "error" for f in findings),
        plan_commands=tuple(
            str(s["command"]) for s in steps if isinstance(s.get("command"), str) and s["command"]
        ),
    )


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _stem(path: str) -> str:
    name = os.path.basename(path)
    return name[: -len(".json")] if name.endswith(".json") else name


# --- summarizing (pure) ---------------------------------------------------------------------------


def summarize(nodes: list[NodeReport], unreadable: list[tuple[str, str]] | None = None) -> FleetSummary:
    summary = FleetSummary(nodes=nodes, unreadable=list(unreadable or []))
    summary.counts = {
        "findings": Counter(i for n in nodes for i in n.finding_ids),
        "driver": Counter(n.driver for n in nodes),
        "torch_build": Counter(n.torch_build for n in nodes),
        "gpu_model": _gpu_model_counts(nodes),
    }
    for dimension, _label in DIMENSIONS:
        # A node is odd only against a real majority (more than half of the known values), and an
        # unknown value is no vote: three unknown drivers must not make the two known ones "odd".
        values = Counter(v for v in (n.value(dimension) for n in nodes) if v != UNKNOWN)
        if values:
            value, count = values.most_common(1)[0]
            if 2 * count > sum(values.values()):
                summary.majority[dimension] = value
    for node in nodes:
        differs = {
            dimension: node.value(dimension)
            for dimension, _label in DIMENSIONS
            if dimension in summary.majority
            and node.value(dimension) not in (summary.majority[dimension], UNKNOWN)
        }
        if differs:
            summary.odd.append({"node": node.node, "path": node.path, "differs": differs})
    groups: dict[tuple[str, ...], list[str]] = {}
    for node in nodes:
        groups.setdefault(node.plan_commands, []).append(node.node)
    summary.fix_groups = [
        {"commands": list(commands), "count": len(names), "nodes": names}
        for commands, names in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    ]
    return summary


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
    files, unreadable = find_report_files(paths)
    nodes = []
    for path in files:
        try:
            nodes.append(read_node_report(path))
        except UnreadableReport as exc:
            unreadable.append((path, str(exc)))
    return summarize(nodes, unreadable)


# --- output ---------------------------------------------------------------------------------------


def summary_to_dict(summary: FleetSummary) -> dict[str, Any]:
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


def render_markdown(summary: FleetSummary) -> str:
    out = [f"## torchdoctor fleet: {len(summary.nodes)} node(s)", ""]
    if summary.unreadable:
        out.append(f"{len(summary.unreadable)} report(s) could not be read (listed at the end).")
        out.append("")
    for key, title in (
        ("findings", "Findings (nodes)"),
        ("driver", "NVIDIA driver (nodes)"),
        ("torch_build", "torch build (nodes)"),
        ("gpu_model", "GPU model (GPUs)"),
    ):
        counter = summary.counts.get(key) or Counter()
        out += [f"### {title}", "", "| value | count |", "| --- | ---: |"]
        out += [f"| {_md(value)} | {count} |" for value, count in counter.most_common()] or ["| (none) | 0 |"]
        out.append("")
    out += ["### Odd nodes out", ""]
    if summary.odd:
        out += ["| node | differs from the majority |", "| --- | --- |"]
        for odd in summary.odd[:SHOW_AT_MOST]:
            out.append(f"| {_md(odd['node'])} | {_md(_differs_text(odd, summary))} |")
        if len(summary.odd) > SHOW_AT_MOST:
            out.append(f"| ... | {len(summary.odd) - SHOW_AT_MOST} more (see --json) |")
    else:
        out.append("None: every node matches the majority.")
    out += ["", "### Fix per group", ""]
    for group in summary.fix_groups:
        out.append(f"**{group['count']} node(s)**: {_md(_names(group['nodes']))}")
        out.append("")
        if group["commands"]:
            out += ["```sh", *group["commands"], "```"]
        else:
            out.append("No fix needed.")
        out.append("")
    if summary.unreadable:
        out += ["### Unreadable reports", ""]
        out += [f"- `{path}`: {_md(reason)}" for path, reason in summary.unreadable]
        out.append("")
    return "\n".join(out)


def render_human(summary: FleetSummary, console: Any = None) -> None:
    """rich tables on `console` (a rich Console; default stdout)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    console.print(
        f"[bold]torchdoctor fleet[/bold]: {len(summary.nodes)} node(s), {len(summary.unreadable)} unreadable"
    )
    for key, title, unit in (
        ("findings", "Findings", "nodes"),
        ("driver", "NVIDIA driver", "nodes"),
        ("torch_build", "torch build", "nodes"),
        ("gpu_model", "GPU model", "GPUs"),
    ):
        table = Table(title=title, title_justify="left")
        table.add_column("value")
        table.add_column(unit, justify="right")
        for value, count in (summary.counts.get(key) or Counter()).most_common():
            table.add_row(value, str(count))
        if not table.row_count:
            table.add_row(NONE, "0")
        console.print(table)
    if summary.odd:
        table = Table(title=f"Odd nodes out ({len(summary.odd)})", title_justify="left")
        table.add_column("node")
        table.add_column("differs from the majority")
        for odd in summary.odd[:SHOW_AT_MOST]:
            table.add_row(odd["node"], _differs_text(odd, summary))
        if len(summary.odd) > SHOW_AT_MOST:
            table.add_row("...", f"{len(summary.odd) - SHOW_AT_MOST} more (see --json)")
        console.print(table)
    else:
        console.print("Odd nodes out: none, every node matches the majority.")
    table = Table(title="Fix per group", title_justify="left")
    table.add_column("nodes", justify="right")
    table.add_column("which")
    table.add_column("fix")
    for group in summary.fix_groups:
        table.add_row(
            str(group["count"]), _names(group["nodes"]), "\n".join(group["commands"]) or "no fix needed"
        )
    console.print(table)
    for path, reason in summary.unreadable:
        console.print(f"[yellow]unreadable[/yellow] {path}: {reason}", markup=True, highlight=False)


def _differs_text(odd: dict, summary: FleetSummary) -> str:
    labels = dict(DIMENSIONS)
    return "; ".join(
        f"{labels[d]} {value} (majority {summary.majority.get(d)})" for d, value in odd["differs"].items()
    )


def _names(names: list[str], at_most: int = 10) -> str:
    shown = ", ".join(names[:at_most])
    return shown + (f" and {len(names) - at_most} more" if len(names) > at_most else "")


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# --- command line ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m doctor.app.fleet",
        description="Summarize torchdoctor JSON reports from many nodes.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    summarize_cmd = sub.add_parser("summarize", help="counts, odd nodes out and the fix per group")
    summarize_cmd.add_argument("reports", nargs="+", help="report files or folders (searched for *.json)")
    fmt = summarize_cmd.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="JSON on stdout")
    fmt.add_argument("--markdown", action="store_true", help="Markdown (for a ticket or a wiki page)")
    summarize_cmd.add_argument("-o", "--output", help="write to this file instead of stdout")
    args = parser.parse_args(argv)
    summary = summarize_paths(args.reports)
    if not summary.nodes:
        reasons = "; ".join(f"{p}: {r}" for p, r in summary.unreadable[:3]) or "no *.json found"
        print(f"torchdoctor fleet: no readable report ({reasons})", file=sys.stderr)
        return exitcodes.USAGE
    if args.json:
        text = json.dumps(summary_to_dict(summary), indent=2) + "\n"
    elif args.markdown:
        text = render_markdown(summary)
    else:
        text = None
    if text is not None:
        if args.output:
            with open(args.output, "w") as fh:
                fh.write(text)
        else:
            sys.stdout.write(text)
    elif args.output:
        from rich.console import Console

        with open(args.output, "w") as fh:
            render_human(summary, Console(file=fh, width=120, no_color=True))
    else:
        render_human(summary)
    return summary.exit_code


if __name__ == "__main__":
    sys.exit(main())
