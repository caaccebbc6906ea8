"""The views of `torchdoctor explain`: each cause with the line it was read from, what it means, whether
this machine has it, and the fix (the check's exact command when confirmed). Rendered from the
explain report dict alone."""

from __future__ import annotations

from doctor.model.i18n import Msg, localize, tr
from doctor.render.console import console
from doctor.render.markdown import as_list, as_object, cell, fenced

VERDICT = {  # glyph, style, label (the signatures' own texts are said from the catalog's "signatures")
    "confirmed": ("✗", "red", Msg("confirmed on this machine")),
    "unknown": ("?", "yellow", Msg("could not be confirmed here")),
    "text-only": ("!", "yellow", Msg("from the text (probing cannot see this)")),
    "not-probed": ("!", "yellow", Msg("from the text alone (--no-probe)")),
    "ruled-out": ("✓", "green", Msg("ruled out on this machine")),
}


PASTED = {  # the same verdicts, said of the machine a collect_env paste or a report describes
    "confirmed": Msg("confirmed on the pasted machine"),
    "unknown": Msg("could not be confirmed from the paste"),
    "ruled-out": Msg("ruled out on the pasted machine"),
}


def _verdict(cause: dict, pasted: bool = False) -> tuple:
    glyph, style, label = VERDICT.get(cause.get("verdict"), ("?", "", str(cause.get("verdict"))))
    if pasted and cause.get("verdict") in PASTED:
        label = PASTED[cause["verdict"]]
    return glyph, style, localize(label)


def _headline(report: dict) -> str:
    causes = as_list(report.get("causes"))
    lines = as_object(report.get("input")).get("lines", 0)
    if not causes and as_object(report.get("rediagnosed")):
        return tr("no known error message; a {kind} paste of {lines} line(s)",
                  kind=str(as_object(report.get("rediagnosed")).get("kind")), lines=lines)
    if not causes:
        return tr("no known error message in {lines} line(s)", lines=lines)
    return tr("{count} known cause(s) in {lines} line(s)", count=len(causes), lines=lines)


def _interpreter(report: dict) -> str | None:
    """Which Python was checked, when the report suggests a change (a cause stands): a fix names its
    target."""
    interp = as_object(as_object(as_object(report.get("check")).get("snapshot")).get("interpreter"))
    standing = [c for c in as_list(report.get("causes")) if as_object(c).get("verdict") != "ruled-out"]
    if not standing or not report.get("probed") or not interp.get("path"):
        return None
    reason = (localize(Msg("the traceback's site-packages")) if report.get("interpreter_from_traceback")
              else interp.get("reason") or localize(Msg("unknown")))
    return tr("The fixes below are for {path} (chosen: {reason}).", path=interp["path"], reason=reason)


def render_explain(report: dict, verbose: bool = False, file=None, width: int | None = None,
                   terminal: bool | None = None) -> None:
    """``terminal``: False for a file written with -o (never styled); None lets rich decide."""
    from rich.text import Text

    con = console(file, width, terminal=terminal)
    con.print(Text(tr("torchdoctor explain · signatures {version} "
        "· ", version=report.get('signatures_version', '?'))
                   + _headline(report), style="bold"))
    for note in as_object(report.get("input")).get("notes") or []:
        con.print(Text("  " + tr("note: {note}", note=note), style="dim"))
    pasted = as_object(report.get("rediagnosed"))
    if pasted:
        said = tr("this is a {kind} paste: the machine it describes was diagnosed as `{command}` would "
                  "(not this machine)", kind=str(pasted.get("kind")), command=str(pasted.get("as")))
        con.print(Text("  " + said, style="bold"))
    elif _interpreter(report):
        con.print(Text("  " + _interpreter(report)), soft_wrap=True)
    elif report.get("probed") and report.get("interpreter"):
        how = tr("from the traceback") if report.get("interpreter_from_traceback") else tr("the one checked")
        con.print(Text("  " + tr("interpreter looked at: {python} ({how})", python=str(report["interpreter"]),
                                 how=how), style="dim"))
    con.print()
    for cause in as_list(report.get("causes")):
        glyph, style, label = _verdict(cause, bool(pasted))
        # assembled, so that the glyph's bold stays on the glyph (a Text's own style spills onto what is
        # appended)
        line = Text.assemble((f"  {glyph} ", f"bold {style}".strip()), (str(cause.get("id")), style),
                             f"  {localize(cause.get('title'))}  ", (f"[{label}]", style))
        con.print(line)
        match = as_object(cause.get("match"))
        con.print(Text("      " + tr("line {line}: "
            "{text}", line=match.get('line'), text=str(match.get('text'))),
                       style="dim"), soft_wrap=True)
        con.print(Text(f"      {localize(cause.get('meaning'))}"))
        for name, value in as_object(cause.get("decoded")).items():
            meaning = tr("{name} means {value}", name=str(name), value=str(value))
            con.print(Text("      " + meaning, style="dim"))
        if cause.get("why") and cause.get("verdict") != "not-probed":
            con.print(Text(f"      {localize(cause['why'])}", style="dim"))
        check = as_object(cause.get("check"))
        fix = as_object(check.get("fix"))
        if check.get("detail") and verbose:
            con.print(Text(f"      {localize(check['detail'])}", style="dim"))
        planned = check.get("id") in set(
            as_list(as_object(as_object(report.get("check")).get("plan")).get("addresses"))
        )
        if cause.get("verdict") != "ruled-out":
            con.print(Text("      " + tr("fix: "
                "{summary}", summary=localize(fix.get('summary') or cause.get('fix')))))
            for command in [] if planned else fix.get("commands") or []:
                con.print(Text(f"        {command}", style="bold"), soft_wrap=True)
        if verbose:
            con.print(Text("      " + tr("wording of torch {versions}; source: {source}",
                                           versions=cause.get('torch_versions'), source=cause.get('source')),
                           style="dim"))
        con.print()
    if not as_list(report.get("causes")) and not pasted:
        con.print("  " + tr("Nothing here matches a known message. `torchdoctor check` looks at the machine "
            "itself."))
        con.print()
    if pasted:
        _pasted_findings(con, as_object(report.get("check")))
    _plan(con, as_object(report.get("check")), pasted=bool(pasted))


def _pasted_findings(con, check: dict) -> None:
    from rich.text import Text

    findings = [f for f in as_list(check.get("findings")) if isinstance(f, dict)
                and f.get("severity") in ("error", "warning")]
    if not findings:
        con.print(Text("  " + tr("The pasted machine has no error or warning finding."), style="dim"))
        con.print()
        return
    con.print(Text(tr("What `torchdoctor check --from` finds on the pasted machine:"), style="bold"))
    for f in findings:
        glyph = "✗" if f.get("severity") == "error" else "!"
        con.print(Text(f"  {glyph} {f.get('id')}  {localize(f.get('title'))}"))
    con.print()


def _plan(con, check: dict, pasted: bool = False) -> None:
    from rich.text import Text

    plan = as_object(check.get("plan"))
    steps = [s for s in as_list(plan.get("steps")) if isinstance(s, dict)]
    if not steps:
        return
    con.print(Text(tr("Fix plan for the pasted machine (run it there):") if pasted
                   else tr("Fix plan for this machine (torchdoctor fix carries it out):"), style="bold"))
    for i, step in enumerate(steps, 1):
        con.print(Text(f"  {i}. {localize(step.get('description'))}"))
        if step.get("command"):
            con.print(Text(f"     {step['command']}", style="bold"), soft_wrap=True)


def render_explain_markdown(report: dict) -> str:
    parts = [f"### torchdoctor explain: {_headline(report)}", ""]  # (the headline in the run's language)
    if _interpreter(report):
        parts += [cell(_interpreter(report)), ""]
    causes = [c for c in as_list(report.get("causes")) if isinstance(c, dict)]
    if causes:
        parts += [f"| | {tr('cause')} | {tr('verdict')} | {tr('line')} |", "| --- | --- | --- | --- |"]
        for c in causes:
            glyph, _style, label = _verdict(c)
            parts.append(f"| {glyph} | `{cell(c.get('id'), code=True)}` {cell(localize(c.get('title')))} | "
                f"{cell(label)} | "
                         f"{cell(as_object(c.get('match')).get('line'))} |")
        parts.append("")
    for c in causes:
        match = as_object(c.get("match"))
        fix = as_object(as_object(c.get("check")).get("fix"))
        parts += [f"**`{cell(c.get('id'), code=True)}`**: {cell(localize(c.get('meaning')))}", ""]
        parts += fenced(str(match.get("text") or ""), "text")
        parts += [cell(tr("Fix: {summary}", summary=localize(fix.get('summary') or c.get('fix')))), ""]
        commands = [str(x) for x in as_list(fix.get("commands")) if x]
        if commands:
            parts += fenced("\n".join(commands), "sh")
    return "\n".join(parts).rstrip("\n") + "\n"
