"""Human output: the machine in a few lines, findings with ✓ / ! / ✗, then the fix block.

Rendered from the report dict alone, so a report read back with --from looks the same as a live
check. rich handles colour: none when piped, NO_COLOR respected; commands are printed without
markup or wrapping so they can be copied as they are.
"""

from __future__ import annotations

import sys

# Findings by severity, checks by state. Glyphs outside ASCII have ASCII stand-ins where the output
# cannot encode them (doctor/app/streams.py).
GLYPH = {"error": ("✗", "red"), "warning": ("!", "yellow"), "info": ("i", "cyan"), "passed": ("✓", "green"),
         "skipped": ("-", "dim"), "unknown": ("?", "yellow"), "crashed": ("✗", "red")}


def console(file=None, width: int | None = None):
    from rich.console import Console

    return Console(file=file or sys.stdout, highlight=False, soft_wrap=True, width=width)


def _kit(plain: bool):
    """(make a console, Text): rich's, or for output that reaches no terminal the stand-ins of plain.py, which
    print the same bytes without importing rich."""
    if plain:
        from doctor.render import plain as kit

        return (lambda file, width: kit.Console(file or sys.stdout)), kit.Text
    from rich.text import Text

    return console, Text


def _fact(f: dict | None) -> str | None:
    if not f:
        return None
    return f.get("value")


def machine_lines(snap: dict) -> list[tuple[str, str]]:
    host, nv, interp, inst, rt = (snap.get(k) or {} for k in ("host", "nvidia", "interpreter", "install", "runtime"))
    rows = []
    osline = f"{host.get('os', '?')}-{host.get('machine', '?')}"
    extras = [x for x in (host.get("libc"), "WSL2" if host.get("wsl") else None, host.get("container")) if x]
    rows.append(("OS", osline + (f" ({', '.join(extras)})" if extras else "")))
    driver = _fact(nv.get("driver_version"))
    max_cuda = nv.get("cuda_driver_version") or {}
    if driver:
        src = max_cuda.get("source") or (nv.get("driver_version") or {}).get("source", "")
        rows.append(("Driver", f"{driver} · supports CUDA ≤ {max_cuda.get('value') or '?'}" + (f" ({src})" if src else "")))
    else:
        rows.append(("Driver", f"none ({nv.get('status', 'unknown')}" + (f": {nv.get('detail')}" if nv.get("detail") else "") + ")"))
    for g in nv.get("gpus") or []:
        cc = (g.get("compute_capability") or {})
        mem = f" · {g['memory_total_mib']} MiB" if g.get("memory_total_mib") else ""
        ccs = f" · CC {cc.get('value')}" + (" (from table)" if str(cc.get("source", "")).startswith("table") else "") if cc.get("value") else " · CC ?"
        rows.append((f"GPU {g.get('index')}", f"{g.get('name')}{ccs}{mem}"))
    found = f"; found as {interp['found_as']}" if interp.get("found_as") else ""
    if interp.get("error"):
        why = [str(line) for line in interp.get("error_lines") or [] if str(line) not in str(interp["error"])]
        rows.append(("Python", "\n".join([f"{interp.get('path') or '?'}: {interp.get('error')}", *why])))
    elif not interp.get("path"):  # a collect_env text names the version, not the interpreter
        rows.append(("Python", f"{interp.get('version') or '?'} (from {interp.get('reason') or '?'}, which does not "
                               "state its path)"))
    else:
        rows.append(("Python", f"{interp.get('path')} · {interp.get('version')} · {interp.get('env_kind') or '?'} "
                               f"(chosen: {interp.get('reason')}{found})"))
    torch = inst.get("torch")
    if torch:
        label = torch.get("build_version") or torch.get("version")
        cuda = f"CUDA {torch['cuda']}" if torch.get("cuda") else ("ROCm " + torch["hip"] if torch.get("hip") else "no CUDA")
        parts = [f"{label} ({cuda})"]
        for name in ("torchvision", "torchaudio"):
            d = inst.get(name)
            if d:
                parts.append(f"{name} {d.get('build_version') or d.get('version')}")
        rows.append(("torch", " · ".join(parts)))
    elif interp.get("error"):
        rows.append(("torch", "not known: the interpreter could not be inspected"))
    else:
        rows.append(("torch", "not installed" if inst.get("status") == "absent" else (inst.get("detail") or inst.get("status", "?"))))
    status = rt.get("status")
    if status == "skipped":
        rows.append(("Runtime", rt.get("detail") or "not run"))
    elif status == "ok":
        rows.append(("Runtime", _runtime_ok(rt)))
    elif status:
        secs = f" after {rt['seconds']:.1f}s" if isinstance(rt.get("seconds"), (int, float)) else ""
        rows.append(("Runtime", f"{status}{secs}: {rt.get('detail') or ''}".strip()))
    return rows


def _runtime_ok(rt: dict) -> str:
    """torch imported: how long the import itself took, what it ran on, how long the whole test took."""
    steps = [s for s in rt.get("steps") or [] if isinstance(s, dict)]
    imported = next((s for s in steps if s.get("name") == "import"), None)
    secs = imported.get("seconds") if imported else None
    head = f"torch {rt.get('torch_version') or '?'} imported" + (
        f" in {secs:.1f}s" if isinstance(secs, (int, float)) else "")
    backend = rt.get("backend")
    parts = [head]
    if backend == "cpu":
        parts.append("no accelerator: the CPU was tested")
    elif backend:
        count = rt.get("device_count")
        parts.append(f"backend {backend}" + (f", {count} device(s)" if count is not None else ""))
    work = [s for s in steps if s.get("name") != "import"]
    if not work:
        parts.append(f"nothing computed ({rt['detail']})" if rt.get("detail") else "nothing computed")
    else:
        failed = sum(1 for s in work if s.get("status") == "failed")
        total = rt.get("seconds")
        parts.append(f"smoke test {total:.1f}s in all" if isinstance(total, (int, float)) else "smoke test ran")
        if failed:
            parts.append(f"{failed} step(s) failed")
    return " · ".join(parts)


def _row(con, Text, key: str, value: str) -> None:
    """One aligned machine row; a value of several lines continues under the value column."""
    lines = [line.rstrip() for line in str(value).splitlines() if line.strip()] or [""]
    con.print(Text.assemble((f"  {key:<9} ", "bold"), lines[0]))
    for more in lines[1:]:
        con.print(Text(f"{'':12}{more.strip()}"))


def _check_lines(con, Text, checks: list[dict], show: set[str]) -> None:
    for c in checks:
        status = c.get("status") if isinstance(c, dict) else None
        if not isinstance(status, str) or status not in show:
            continue
        glyph, style = GLYPH.get(status, ("?", ""))
        line = Text.assemble(("  " + glyph + " ", style), str(c.get("summary") or c.get("rule")))
        if status in ("skipped", "unknown") and c.get("note"):
            line.append(f"  ({status}: {c['note']})", style="dim" if status == "skipped" else "yellow")
        con.print(line)


def render_text(report: dict, verbose: bool = False, mode: str = "check", file=None, width=None,
                quiet: bool = False, plain: bool = False) -> None:
    """The human view. ``quiet``: only what needs doing (findings and the fix), nothing when healthy.
    ``plain``: the output reaches no terminal (a pipe, a file): the same bytes, without rich."""
    from doctor.render.verdict import plan_line, verdict_line

    make_console, Text = _kit(plain)  # noqa: N806 - the class, whichever kit it comes from
    con = make_console(file, width)
    snap = report.get("snapshot") or {}
    table = report.get("table") or {}
    tool = report.get("tool") or {}
    findings = report.get("findings") or []
    checks = report.get("checks") or []
    if quiet and not findings and (report.get("summary") or {}).get("exit_code", 0) == 0:
        return
    if not quiet:
        con.print(Text(f"torchdoctor {tool.get('version', '?')} · compat table {table.get('version', '?')}",
                       style="bold"))
        if snap.get("origin") and snap.get("origin") != "probe":
            con.print(Text(f"(re-diagnosed from a {snap['origin']}, not probed here)", style="dim"))
        con.print()
        for key, value in machine_lines(snap):
            _row(con, Text, key, value)
        steps = (snap.get("runtime") or {}).get("steps") or []
        if steps and verbose:
            for s in steps:
                secs = f"{s['seconds']:.3f}s" if s.get("seconds") is not None else "-"
                con.print(Text(f"            {s.get('status'):<7} {s.get('name'):<16} {secs:>8}  "
                               f"{s.get('message', '')}"))
        con.print()
        # Every check's state: all of them with -v or when nothing was found; the unknown ones always
        # (a gap in what was checked is worth a line); failed checks show as their findings below.
        show = {"passed", "skipped", "unknown"} if verbose or not findings else {"unknown"}
        _check_lines(con, Text, checks, show)

    for f in findings:
        glyph, style = GLYPH.get(str(f.get("severity")), ("?", ""))
        line = Text.assemble((f"  {glyph} ", f"bold {style}".strip()), (str(f.get("id")), style),
                             f"  {f.get('title')}")
        con.print(line)
        if f.get("detail") and (verbose or f.get("severity") == "error"):
            con.print(Text(f"      {f['detail']}", style="dim"))
        fix = f.get("fix") or {}
        if fix.get("summary") and (verbose or not fix.get("commands")):
            con.print(Text(f"      fix: {fix['summary']}"))
        if fix.get("commands") and f.get("id") not in set((report.get("plan") or {}).get("addresses") or []):
            for cmd in fix["commands"]:
                con.print(Text(f"        {cmd}", style="bold"), soft_wrap=True)
        if verbose and f.get("evidence"):
            for k, v in f["evidence"].items():
                con.print(Text(f"      · {k}: {v}", style="dim"))
        if f.get("unverified"):
            con.print(Text(f"      (rests on unverified table rows: {', '.join(f['unverified'])})", style="yellow"))
    if findings or not quiet:
        con.print()
    con.print(Text(f"  {verdict_line(report)}", style="bold"))

    plan = report.get("plan") or {}
    con.print()
    status = plan.get("status")
    closing = plan_line(report)
    if closing is not None:
        code = (report.get("summary") or {}).get("exit_code", 0)
        con.print(Text(closing, style="green" if code == 0 else "yellow"))
    elif status == "none":
        con.print(Text(f"Fix: {plan.get('reason')}", style="yellow"))
    elif status == "manual":
        con.print(Text("Fix: no command can fix this automatically:", style="yellow"))
        for n in plan.get("notes") or []:
            con.print(Text(f"  {n}"))
    elif plan:
        title = "Fix plan" + (" (torchdoctor fix --dry-run: nothing was changed)" if mode == "fix" else "")
        con.print(Text(title + ":", style="bold"))
        for i, step in enumerate(plan.get("steps") or [], 1):
            con.print(Text(f"  {i}. {step.get('description')}"))
            if step.get("command"):
                con.print(Text(f"     {step['command']}", style="bold"), soft_wrap=True)
        for n in plan.get("notes") or []:
            con.print(Text(f"  note: {n}", style="dim"))
        if plan.get("unverified"):
            con.print(Text(f"  (this choice rests on unverified table rows: {', '.join(plan['unverified'])})",
                           style="yellow"))
