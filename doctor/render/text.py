"""Human output: the machine in a few lines, findings with ✓ / ! / ✗, then the fix block.

Rendered from the report dict alone, so a report read back with --from looks the same as a live
check. rich handles colour: none when piped, NO_COLOR respected; commands are printed without
markup or wrapping so they can be copied as they are.
"""

from __future__ import annotations

import sys

GLYPH = {"error": ("✗", "red"), "warning": ("!", "yellow"), "info": ("i", "cyan"), "passed": ("✓", "green")}


def console(file=None, width: int | None = None):
    from rich.console import Console

    return Console(file=file or sys.stdout, highlight=False, soft_wrap=True, width=width)


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
    if interp.get("error"):
        rows.append(("Python", f"{interp.get('path') or '?'}: {interp.get('error')}"))
    else:
        rows.append(("Python", f"{interp.get('path')} · {interp.get('version')} · {interp.get('env_kind') or '?'} "
                               f"(chosen: {interp.get('reason')})"))
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
    else:
        rows.append(("torch", "not installed" if inst.get("status") == "absent" else (inst.get("detail") or inst.get("status", "?"))))
    status = rt.get("status")
    if status == "skipped":
        rows.append(("Runtime", rt.get("detail") or "not run"))
    elif status:
        secs = f" in {rt['seconds']:.1f}s" if rt.get("seconds") else ""
        if status == "ok":
            avail = rt.get("backend") or "?"
            rows.append(("Runtime", f"torch {rt.get('torch_version')} imported{secs} · backend {avail} · "
                                    f"devices {rt.get('device_count') if rt.get('device_count') is not None else '?'}"))
        else:
            rows.append(("Runtime", f"{status}{secs}: {rt.get('detail') or ''}".strip()))
    return rows


def render_text(report: dict, verbose: bool = False, mode: str = "check", file=None, width=None) -> None:
    from rich.text import Text

    con = console(file, width)
    snap = report.get("snapshot") or {}
    table = report.get("table") or {}
    tool = report.get("tool") or {}
    con.print(Text(f"torchdoctor {tool.get('version', '?')} · compat table {table.get('version', '?')}", style="bold"))
    if snap.get("origin") and snap.get("origin") != "probe":
        con.print(Text(f"(re-diagnosed from a {snap['origin']}, not probed here)", style="dim"))
    con.print()
    for key, value in machine_lines(snap):
        line = Text(f"  {key:<9} ", style="bold")
        line.append(str(value))
        con.print(line)
    steps = (snap.get("runtime") or {}).get("steps") or []
    if steps and verbose:
        for s in steps:
            secs = f"{s['seconds']:.3f}s" if s.get("seconds") is not None else "-"
            con.print(Text(f"            {s.get('status'):<7} {s.get('name'):<16} {secs:>8}  {s.get('message', '')}"))
    con.print()

    findings = report.get("findings") or []
    checks = report.get("checks") or []
    if verbose or not findings:
        for c in checks:
            if c.get("status") == "passed":
                glyph, style = GLYPH["passed"]
                con.print(Text(f"  {glyph} {c.get('summary')}", style=style))
    for f in findings:
        glyph, style = GLYPH.get(f.get("severity"), ("?", ""))
        line = Text(f"  {glyph} ", style=f"bold {style}")
        line.append(f"{f.get('id')}", style=style)
        line.append(f"  {f.get('title')}")
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
    if findings:
        con.print()
    summary = report.get("summary") or {}
    con.print(Text(f"  {summary.get('errors', 0)} error(s), {summary.get('warnings', 0)} warning(s), "
                   f"{summary.get('infos', 0)} note(s)", style="bold"))

    plan = report.get("plan") or {}
    con.print()
    status = plan.get("status")
    if status == "healthy":
        con.print(Text("Fix: nothing to change.", style="green"))
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
