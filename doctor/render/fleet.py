"""The fleet summary for people: rich tables, or Markdown for a ticket or a wiki page.

Pure over the summary's JSON data (doctor/app/fleet.py ``summary_to_dict``), the same data
`--json` prints, so every view shows the same numbers in the same order. The commands shown as a group's
fix are the ones torchdoctor wrote from the report's facts; a report's own commands are never shown.
"""

from __future__ import annotations

from typing import Any

from doctor.render.sanitize import printable

# How the odd-node dimensions are named on screen, in display order.
DIMENSION_LABELS = {
    "driver": "NVIDIA driver",
    "torch_build": "torch build",
    "gpu_models": "GPU models",
    "findings": "finding set",
}
NONE = "(none)"
SHOW_AT_MOST = 50  # rows of odd nodes / names per fix group in the human and Markdown views


def render_markdown(summary: dict) -> str:
    unreadable = summary.get("unreadable") or []
    odd_nodes = summary.get("odd_nodes") or []
    out = [f"## torchdoctor fleet: {summary.get('nodes', 0)} node(s)", ""]
    if unreadable:
        out.append(f"{len(unreadable)} report(s) could not be read (listed at the end).")
        out.append("")
    for key, title in (
        ("findings", "Findings (nodes)"),
        ("driver", "NVIDIA driver (nodes)"),
        ("torch_build", "torch build (nodes)"),
        ("gpu_model", "GPU model (GPUs)"),
    ):
        counts = (summary.get("counts") or {}).get(key) or {}
        out += [f"### {title}", "", "| value | count |", "| --- | ---: |"]
        out += [f"| {_md(value)} | {count} |" for value, count in counts.items()] or [f"| {NONE} | 0 |"]
        out.append("")
    out += ["### Odd nodes out", ""]
    if odd_nodes:
        out += ["| node | differs from the majority |", "| --- | --- |"]
        for odd in odd_nodes[:SHOW_AT_MOST]:
            out.append(f"| {_md(odd['node'])} | {_md(_differs_text(odd, summary))} |")
        if len(odd_nodes) > SHOW_AT_MOST:
            out.append(f"| ... | {len(odd_nodes) - SHOW_AT_MOST} more (see --json) |")
    else:
        out.append("None: every node matches the majority.")
    out += ["", "### Fix per group", ""]
    for group in summary.get("fix_groups") or []:
        out.append(f"**{group['count']} node(s)**: {_md(_names(group['nodes']))}")
        out.append("")
        if group["commands"]:
            out += ["```sh", *map(printable, group["commands"]), "```"]
        else:
            out.append(_md(_no_commands(group)))
        if _other_text(group):
            out += ["", _md(_other_text(group))]
        out.append("")
    if unreadable:
        out += ["### Unreadable reports", ""]
        out += [f"- `{printable(u['path']).replace('`', chr(39))}`: {_md(u['reason'])}" for u in unreadable]
        out.append("")
    return "\n".join(out)


def render_human(summary: dict, console: Any = None) -> None:
    """rich tables on `console` (a rich Console; default stdout's)."""
    from rich.table import Table
    from rich.text import Text

    from doctor.render.console import console as make_console

    # tables fit the width; numbers stand out
    console = console or make_console(soft_wrap=False, highlight=True)
    unreadable = summary.get("unreadable") or []
    odd_nodes = summary.get("odd_nodes") or []
    console.print(
        f"[bold]torchdoctor fleet[/bold]: {summary.get('nodes', 0)} node(s), {len(unreadable)} unreadable"
    )

    def cell(value: Any) -> Text:  # report values are text, never rich markup ("[/]" in a GPU name)
        return Text(printable(value, multiline=True))

    for key, title, unit in (
        ("findings", "Findings", "nodes"),
        ("driver", "NVIDIA driver", "nodes"),
        ("torch_build", "torch build", "nodes"),
        ("gpu_model", "GPU model", "GPUs"),
    ):
        table = Table(title=title, title_justify="left")
        table.add_column("value")
        table.add_column(unit, justify="right")
        for value, count in ((summary.get("counts") or {}).get(key) or {}).items():
            table.add_row(cell(value), str(count))
        if not table.row_count:
            table.add_row(NONE, "0")
        console.print(table)
    if odd_nodes:
        table = Table(title=f"Odd nodes out ({len(odd_nodes)})", title_justify="left")
        table.add_column("node")
        table.add_column("differs from the majority")
        for odd in odd_nodes[:SHOW_AT_MOST]:
            table.add_row(cell(odd["node"]), cell(_differs_text(odd, summary)))
        if len(odd_nodes) > SHOW_AT_MOST:
            table.add_row("...", f"{len(odd_nodes) - SHOW_AT_MOST} more (see --json)")
        console.print(table)
    else:
        console.print("Odd nodes out: none, every node matches the majority.")
    # Not a table: a command in a cell wraps across rows and can no longer be copied. Each command gets a
    # line of its own, never wrapped.

    console.print(Text("Fix per group", style="italic"))
    for group in summary.get("fix_groups") or []:
        console.print(Text.assemble((f"  {group['count']} node(s)", "bold"), f": {_names(group['nodes'])}"))
        for command in group["commands"] or []:
            console.print(Text(f"    {printable(command)}"), soft_wrap=True)
        if not group["commands"]:
            console.print(Text(f"    {printable(_no_commands(group))}"))
        if _other_text(group):
            console.print(Text(f"    {printable(_other_text(group))}", style="dim"), soft_wrap=True)
    for item in unreadable:
        line = Text("unreadable", style="yellow")
        line.append(f" {printable(item['path'])}: {printable(item['reason'])}")
        console.print(line, highlight=False)


def _no_commands(group: dict) -> str:
    if group.get("not_derived"):
        return f"no fix written: {group['not_derived']}"
    if group.get("reported"):
        return f"nothing to run: torchdoctor finds no fix in the facts of {group.get('reported_by')}'s report"
    return "no fix needed"


def _other_text(group: dict) -> str:
    """A report's own commands are its text, not a fix (one report can say "curl ... | sh"): shown nowhere
    but in --json, and said to differ where they do."""
    if group.get("reported") and group["reported"] != group.get("commands"):
        return (f"the report of {group.get('reported_by')} listed other commands: not shown as a fix "
                "(--json keeps them as reported)")
    return ""


def _differs_text(odd: dict, summary: dict) -> str:
    majority = summary.get("majority") or {}
    return "; ".join(
        f"{DIMENSION_LABELS.get(d, d)} {value} (majority "
        f"{majority.get(d)})" for d, value in odd["differs"].items()
    )


def _names(names: list[str], at_most: int = 10) -> str:
    shown = ", ".join(names[:at_most])
    return shown + (f" and {len(names) - at_most} more" if len(names) > at_most else "")


def _md(text: Any) -> str:
    """A value in a Markdown table cell: printable, no live HTML, no cell break, no line break."""
    text = printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("`", "\\`")
