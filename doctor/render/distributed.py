"""The distributed report as plain text: a rank table, the all_reduce sweep, topology, findings.

Plain text, not rich: rank 0 writes this view inside the target interpreter (Python 3.8+, stdlib
only), and ``torchdoctor distributed`` prints the same view of the report it read back.
"""

from __future__ import annotations


def render_text(report: dict) -> str:
    lines = [
        "torchdoctor distributed: {} rank(s), backend {}, launcher {}, master {}: {}".format(
            report.get("world_size"),
            report.get("backend") or "?",
            report.get("launcher"),
            report.get("master"),
            str(report.get("status", "?")).upper(),
        )
    ]
    if report.get("note"):
        lines.append("  note: " + report["note"])
    if report.get("test_seams"):
        lines.append("  TEST SEAMS ACTIVE: {}".format(report["test_seams"]))
    header = ("rank", "node", "status", "torch", "cuda", "nccl", "driver", "seconds")
    rows = [header]
    for entry in report.get("ranks", []):
        snap = entry.get("snapshot") or {}
        rows.append(
            (
                str(entry.get("rank")),
                str(entry.get("node") or "?"),
                str(entry.get("status")),
                str(snap.get("torch_version") or "-"),
                str(snap.get("cuda_version") or "-"),
                str(snap.get("nccl_version") or "-"),
                str(snap.get("driver_version") or "-"),
                "-" if entry.get("seconds") is None else "{:.1f}".format(entry["seconds"]),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]  # noqa: B905
    if report.get("bandwidth"):
        lines.append(
            "all_reduce (rank 0):  size  time  algbw  busbw (busbw = algbw * 2(n-1)/n, as nccl-tests)"
        )
        for row in report["bandwidth"]:
            lines.append(
                "  {:>10}  {:>9.3f} ms  {:>8.3f} GB/s  {:>8.3f} GB/s".format(
                    _size(row["bytes"]), row["seconds"] * 1e3, row["algbw_gbps"], row["busbw_gbps"]
                )
            )
    slow = report.get("slowest_rank")
    if slow:
        lines.append(
            "slowest rank: {} ({}) {:.3f} ms at {} (median {:.3f} ms)".format(
                slow["rank"],
                slow.get("node"),
                slow["seconds"] * 1e3,
                _size(slow["bytes"]),
                slow["median_seconds"] * 1e3,
            )
        )
    for node, topo in sorted((report.get("topology") or {}).items()):
        lines.append(f"topology of {node}: {_topology_line(topo)}")
    findings = report.get("findings") or []
    if not findings:
        lines.append("no findings: every rank agrees and every collective worked")
    for finding in findings:
        mark = {"error": "x", "warning": "!", "info": "i"}.get(finding["severity"], "?")
        lines.append("[{}] {}: {}".format(mark, finding["id"], finding["title"]))
        if finding.get("detail"):
            lines.append("    " + _first_lines(finding["detail"], 3).replace("\n", "\n    "))
        fix = finding.get("fix") or {}
        if fix.get("summary"):
            lines.append("    fix: " + fix["summary"])
        for command in fix.get("commands") or []:
            lines.append("      " + command)
    return "\n".join(lines) + "\n"


def _topology_line(topo: dict) -> str:
    links = (topo.get("nvml") or {}).get("links") or {}
    matrix = topo.get("peer_access") or []
    parts = []
    for pair, kind in sorted(links.items()):
        i, _, j = pair.partition("-")
        peer = _peer(matrix, int(i), int(j))
        parts.append("{} {} p2p={}".format(pair, kind, {True: "on", False: "off"}.get(peer, "?")))
    error = (topo.get("nvml") or {}).get("error") or topo.get("error")
    return ", ".join(parts) or "no NVML links ({})".format(error or "none")


def _size(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):g} {unit}"
    return f"{nbytes} B"


def _peer(matrix: list, i: int, j: int) -> bool | None:
    try:
        return matrix[i][j]
    except (IndexError, TypeError):
        return None


def _first_lines(text: str, count: int) -> str:
    return "\n".join((text or "").strip().splitlines()[:count])
