"""Human output: the machine in a few lines, then what needs doing (errors, then warnings, each with its fix
under it), the checks that could not tell (`?`), the notes, the verdict and the fix block. `-v` adds every
check's state, the details and where second-hand facts come from; `-q` keeps only the errors, the warnings and
the fix, and prints nothing on a healthy machine.

Rendered from the report dict alone, so a report read back with --from looks the same as a live
check. rich handles colour: none when piped, NO_COLOR respected; commands are printed without
markup or wrapping so they can be copied as they are.
"""

from __future__ import annotations

from doctor.model.i18n import Msg, localize, pad, tr
from doctor.render.console import console
from doctor.render.verdict import driver_words, rests_on_words, torch_warnings, torch_words

# Findings by severity, checks by state. Glyphs outside ASCII have ASCII stand-ins where the output
# cannot encode them (doctor/app/streams.py).
GLYPH = {"error": ("✗", "red"), "warning": ("!", "yellow"), "info": ("i", "cyan"), "passed": ("✓", "green"),
         "skipped": ("-", "dim"), "unknown": ("?", "yellow"), "crashed": ("✗", "red")}


# Words said beside a check or a step: the state (a word from the report, never a template of its own).
STATE_WORDS = {
    "passed": Msg("passed"),
    "failed": Msg("failed"),
    "skipped": Msg("skipped"),
    "unknown": Msg("unknown"),
    "crashed": Msg("crashed"),
    "ok": Msg("ok"),
}
ORIGINS = {"collect_env": Msg("collect_env"), "report": Msg("report")}
LABEL_CELLS = 9  # the machine summary's label column, in terminal cells (a label in any language fits it)


def word(value) -> str:
    """A state word from the report in the run's language (an unknown one as it is)."""
    return str(localize(STATE_WORDS.get(value, value)))


SEVERITY_ORDER = ("error", "warning", "info")


def _severity_rank(finding: dict) -> int:
    severity = finding.get("severity")
    return SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else len(SEVERITY_ORDER)


def _unknown() -> str:
    return str(localize(Msg("unknown")))


def _fact(f: dict | None) -> str | None:
    if not f:
        return None
    return f.get("value")


def machine_lines(snap: dict) -> list[tuple[str, str]]:
    host, nv, interp, inst, rt = (
        snap.get(k) or {} for k in ("host", "nvidia", "interpreter", "install", "runtime")
    )
    rows = []
    osline = f"{host.get('os') or '?'}-{host.get('machine') or '?'}"  # "windows-?": the paste names no CPU
    wsl_version = ((snap.get("environment") or {}).get("wsl") or {}).get("version")
    wsl = ("WSL1" if wsl_version == 1 else "WSL2") if host.get("wsl") else None
    extras = [x for x in (host.get("libc"), wsl, host.get("container")) if x]
    rows.append((tr("OS"), osline + (f" ({', '.join(extras)})" if extras else "")))
    driver = _fact(nv.get("driver_version"))
    max_cuda = nv.get("cuda_driver_version") or {}
    if driver:
        src = max_cuda.get("source") or (nv.get("driver_version") or {}).get("source", "")
        if max_cuda.get("value"):
            supports = tr("{driver} · supports CUDA ≤ {cuda}", driver=driver, cuda=max_cuda["value"])
        else:
            supports = tr("{driver} · the highest CUDA it supports is unknown", driver=driver)
        rows.append((tr("Driver"), supports + (f" ({localize(src)})" if src else "")))
    else:  # "none: no GPU (why)", "unknown (why)": the words every format uses
        rows.append((tr("Driver"), driver_words(nv)))
    for g in nv.get("gpus") or []:
        cc = (g.get("compute_capability") or {})
        mem = f" · {g['memory_total_mib']} MiB" if g.get("memory_total_mib") else ""
        ccs = (
            (
                " · "
                + tr("CC {cc}", cc=cc.get("value"))
                + (tr(" (from table)") if str(cc.get("source", "")).startswith("table") else "")
            )
            if cc.get("value")
            else " · " + tr("CC {cc}", cc=_unknown())
        )
        rows.append((tr("GPU {index}", index=g.get('index')), f"{g.get('name')}{ccs}{mem}"))
    found = tr("; found as {path}", path=interp['found_as']) if interp.get("found_as") else ""
    if interp.get("error"):
        why = [
            str(localize(line))
            for line in interp.get("error_lines") or []
            if str(line) not in str(interp["error"])
        ]
        where = interp.get('path') or _unknown()
        rows.append(("Python", "\n".join([f"{where}: {localize(interp.get('error'))}", *why])))
    elif not interp.get("path"):  # a collect_env text names the version, not the interpreter
        rows.append(("Python", tr("{version} (from {reason}, which does not state its path)",
                                  version=interp.get('version') or _unknown(),
                                  reason=interp.get('reason') or _unknown())))
    else:
        rows.append(("Python", tr("{path} · {version} · {kind} (chosen: "
            "{reason}{found})", path=interp.get('path'),
                                  version=interp.get('version') or _unknown(),
                                  kind=interp.get('env_kind') or _unknown(),
                                  reason=interp.get('reason'), found=found)))
    torch = inst.get("torch")
    if torch:
        label = torch.get("build_version") or torch.get("version")
        cuda = (
            f"CUDA {torch['cuda']}"
            if torch.get("cuda")
            else ("ROCm " + torch["hip"] if torch.get("hip") else tr("no CUDA"))
        )
        parts = [f"{label} ({cuda})"]
        for name in ("torchvision", "torchaudio"):
            d = inst.get(name)
            if d:
                parts.append(f"{name} {d.get('build_version') or d.get('version')}")
        rows.append(("torch", " · ".join(parts)))
    else:  # "not installed", or unknown and why: the words every format uses
        rows.append(("torch", torch_words(snap)))
    status = rt.get("status")
    runtime = None
    if status == "skipped":
        runtime = localize(rt.get("detail")) or tr("not run")
    elif status == "ok":
        runtime = _runtime_ok(rt)
    elif status:
        secs = tr(" after "
            "{seconds:.1f}s", seconds=rt['seconds']) if isinstance(rt.get("seconds"), (int, float)) else ""
        runtime = f"{status}{secs}: {localize(rt.get('detail')) or ''}".strip()
    if runtime is not None:
        # what torch itself warned (NumPy missing, ...), a line each under the runtime
        warned = [tr("torch warned: {warning}", warning=w) for w in torch_warnings(rt)]
        rows.append((tr("Runtime"), "\n".join([str(runtime), *warned])))
    return rows


def _runtime_ok(rt: dict) -> str:
    """torch imported: how long the import itself took, what it ran on, how long the whole test took."""
    steps = [s for s in rt.get("steps") or [] if isinstance(s, dict)]
    imported = next((s for s in steps if s.get("name") == "import"), None)
    secs = imported.get("seconds") if imported else None
    version = rt.get('torch_version') or _unknown()
    head = tr("torch {version} imported in {seconds:.1f}s", version=version, seconds=secs) if isinstance(
        secs, (int, float)) else tr("torch {version} imported", version=version)
    backend = rt.get("backend")
    parts = [head]
    if backend == "cpu":
        parts.append(tr("no accelerator: the CPU was tested"))
    elif backend:
        count = rt.get("device_count")
        parts.append(tr("backend {backend}, {count} "
            "device(s)", backend=backend, count=count) if count is not None
                     else tr("backend {backend}", backend=backend))
    work = [s for s in steps if s.get("name") != "import"]
    if not work:
        parts.append(tr("nothing computed "
            "({why})", why=rt['detail']) if rt.get("detail") else tr("nothing computed"))
    else:
        failed = sum(1 for s in work if s.get("status") == "failed")
        total = rt.get("seconds")
        parts.append(tr("smoke test {seconds:.1f}s in all", seconds=total) if isinstance(total, (int, float))
                     else tr("smoke test ran"))
        if failed:
            parts.append(tr("{count} step(s) failed", count=failed))
    return " · ".join(parts)


def _row(con, key: str, value: str) -> None:
    """One aligned machine row; a value of several lines continues under the value column."""
    from rich.text import Text

    lines = [line.rstrip() for line in str(value).splitlines() if line.strip()] or [""]
    con.print(Text.assemble((f"  {pad(key, LABEL_CELLS)} ", "bold"), lines[0]))
    for more in lines[1:]:
        con.print(Text(f"{'':12}{more.strip()}"))


def _check_lines(con, checks: list[dict], show: set[str]) -> bool:
    """The checks in these states, a line each; whether there was any."""
    from rich.text import Text

    said = False
    for c in checks:
        status = c.get("status") if isinstance(c, dict) else None
        if not isinstance(status, str) or status not in show:
            continue
        glyph, style = GLYPH.get(status, ("?", ""))
        line = Text.assemble(("  " + glyph + " ", style), str(localize(c.get("summary") or c.get("rule"))))
        if status in ("skipped", "unknown") and c.get("note"):
            line.append(tr("  ({state}: {note})", state=word(status), note=c['note']),
                        style="dim" if status == "skipped" else "yellow")
        con.print(line)
        said = True
    return said


def render_text(report: dict, verbose: bool = False, mode: str = "check", file=None, width=None,
                quiet: bool = False, terminal: bool | None = None) -> None:
    """The human view. ``quiet``: only what needs doing (findings and the fix), nothing when healthy.
    ``terminal``: False for a file written with -o (never styled); None lets rich decide."""
    from rich.text import Text

    from doctor.render.verdict import verdict_line

    con = console(file, width, terminal=terminal)
    snap = report.get("snapshot") or {}
    table = report.get("table") or {}
    tool = report.get("tool") or {}
    findings = report.get("findings") or []
    checks = report.get("checks") or []
    code = (report.get("summary") or {}).get("exit_code", 0)
    ranked = sorted((f for f in findings if isinstance(f, dict)), key=_severity_rank)
    serious = [f for f in ranked if f.get("severity") in ("error", "warning")]
    notes = [f for f in ranked if f not in serious]
    if quiet and not serious and code == 0:
        return  # -q: nothing needs doing, nothing is said
    if not quiet:
        con.print(
            Text(
                tr(
                    "torchdoctor {version} · compat table {table}",
                    version=tool.get("version") or _unknown(),
                    table=table.get("version") or _unknown(),
                ),
                style="bold",
            )
        )
        if snap.get("origin") and snap.get("origin") != "probe":
            con.print(Text(tr("(re-diagnosed from a {origin}, not probed "
                "here)", origin=ORIGINS.get(snap['origin'], snap['origin'])),
                           style="dim"))
        con.print()
        for key, value in machine_lines(snap):
            _row(con, key, value)
        steps = (snap.get("runtime") or {}).get("steps") or []
        if steps and verbose:
            for s in steps:
                secs = f"{s['seconds']:.3f}s" if s.get("seconds") is not None else "-"
                con.print(Text(f"            {pad(word(s.get('status')), 7)} {s.get('name'):<16} {secs:>8}  "
                               f"{localize(s.get('message', ''))}"))
        con.print()

    # What needs doing first, each with its fix under it; then the checks that could not tell (every check's
    # state with -v); then the notes.
    addressed = set((report.get("plan") or {}).get("addresses") or [])
    for f in serious:
        _finding(con, f, verbose, quiet, addressed)
    said = bool(serious)
    if not quiet:
        said |= _check_lines(con, checks, {"passed", "skipped", "unknown"} if verbose else {"unknown"})
        for f in notes:
            _finding(con, f, verbose, quiet, addressed)
        said |= bool(notes)
    if said:
        con.print()
    con.print(Text(f"  {verdict_line(report)}", style="bold"))  # with the exit code it agrees with
    con.print()
    _plan(con, report, verbose, quiet, mode)


def _finding(con, f: dict, verbose: bool, quiet: bool, addressed: set) -> None:
    from rich.text import Text

    glyph, style = GLYPH.get(str(f.get("severity")), ("?", ""))
    con.print(Text.assemble((f"  {glyph} ", f"bold {style}".strip()), (str(f.get("id")), style),
                            f"  {localize(f.get('title'))}"))
    if f.get("detail") and not quiet and (verbose or f.get("severity") == "error"):
        con.print(Text(f"      {localize(f['detail'])}", style="dim"))
    fix = f.get("fix") or {}
    if fix.get("summary"):
        con.print(Text("      " + tr("fix: {summary}", summary=fix['summary'])))
    if fix.get("commands") and f.get("id") not in addressed:
        for cmd in fix["commands"]:
            con.print(Text(f"        {cmd}", style="bold"), soft_wrap=True)
    if verbose and f.get("evidence"):
        for k, v in f["evidence"].items():
            con.print(Text(f"      · {k}: {v}", style="dim"))
    if verbose:  # where a second-hand fact comes from, in words; without -v it is not said at all
        for words in rests_on_words(f.get("unverified")):
            con.print(Text("      " + tr("(how sure: {words})", words=words), style="dim"))


def _plan(con, report: dict, verbose: bool, quiet: bool, mode: str) -> None:
    from rich.text import Text

    from doctor.render.verdict import plan_line

    plan = report.get("plan") or {}
    status = plan.get("status")
    closing = plan_line(report)
    code = (report.get("summary") or {}).get("exit_code", 0)
    if closing is not None:
        con.print(Text(closing, style="green" if code == 0 else "yellow"))
    elif status == "none":
        con.print(Text(tr("Fix: {reason}", reason=plan.get('reason')), style="yellow"))
    elif status == "manual":
        con.print(Text(tr("Fix: no command can fix this automatically:"), style="yellow"))
        for n in plan.get("notes") or []:
            con.print(Text(f"  {localize(n)}"))
    elif plan:
        title = tr("Fix plan (torchdoctor fix --dry-run: nothing was "
            "changed):") if mode == "fix" else tr("Fix plan:")
        con.print(Text(title, style="bold"))
        for i, step in enumerate(plan.get("steps") or [], 1):
            con.print(Text(f"  {i}. {localize(step.get('description'))}"))
            if step.get("command"):
                con.print(Text(f"     {step['command']}", style="bold"), soft_wrap=True)
        for n in plan.get("notes") or []:
            con.print(Text("  " + tr("note: {note}", note=n), style="dim"))
        if verbose:
            for words in rests_on_words(plan.get("unverified")):
                con.print(Text("  " + tr("(how sure: {words})", words=words), style="dim"))
