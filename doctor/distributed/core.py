"""`torchdoctor distributed`: check that the ranks of a job can talk to each other, and agree.

Run it the way a training job runs::

    torchrun --nproc-per-node 8 -m doctor.distributed --json -o dist.json
    srun --ntasks-per-node 8 python -m doctor.distributed      # MASTER_ADDR exported

Each rank (see doctor/distributed_child.py) checks itself and the collectives; rank 0 gathers
every rank's result, turns them into findings (this module, pure functions over plain dicts) and
writes the report. This module is imported in the target interpreter next to torch: it must stay
Python 3.8 compatible and import neither typer nor rich (nor torch at module level: the
torchdoctor CLI imports it too, for `launch_command` and `render_text`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections import Counter
from typing import Any

from doctor import __version__, exitcodes
from doctor.model.findings import ERROR, INFO, WARNING, Finding, Fix

DISTRIBUTED_SCHEMA_VERSION = 1
DEFAULT_TIMEOUT_S = 60.0
NCCL_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
TORCH_DIST_DOCS = "https://pytorch.org/docs/stable/distributed.html"
TORCHRUN_DOCS = "https://pytorch.org/docs/stable/elastic/run.html"

# The fields on which every rank should agree, as (snapshot key, label).
AGREED_FIELDS = (
    ("torch_version", "torch build"),
    ("cuda_version", "CUDA (torch.version.cuda)"),
    ("nccl_version", "NCCL"),
    ("driver_version", "NVIDIA driver"),
)


# --- failure classification (pure; tested on recorded messages) ------------------------------------

RENDEZVOUS = "rendezvous"
NCCL_NETWORK = "nccl-network"
NCCL_TIMEOUT = "nccl-timeout"
NCCL_CUDA = "nccl-cuda"
NCCL_OTHER = "nccl"
PEER_DIED = "peer-died"
COLLECTIVE_TIMEOUT = "timeout"
WRONG_RESULT = "wrong-result"
OTHER = "other"

_PATTERNS = (
    (
        NCCL_TIMEOUT,
        re.compile(r"Watchdog caught collective operation timeout|milliseconds before timing out"),
    ),
    (
        NCCL_NETWORK,
        re.compile(
            r"NCCL.*(remote process exited or there was a network error|socketStartConnect|No route to host"
            r"|Connection refused|NET/IB|NET/Socket)|ncclRemoteError",
            re.I | re.S,
        ),
    ),
    (NCCL_CUDA, re.compile(r"NCCL.*unhandled cuda error|ncclUnhandledCudaError", re.I | re.S)),
    (
        NCCL_OTHER,
        re.compile(r"NCCL error|ncclSystemError|ncclInternalError|ncclInvalidUsage|ProcessGroupNCCL"),
    ),
    (
        RENDEZVOUS,
        re.compile(
            r"TCPStore|DistStoreError|client socket has timed out|rendezvous|Connection refused"
            r"|connect\(\) timed out|Name or service not known|Temporary failure in name resolution",
            re.I,
        ),
    ),
    (PEER_DIED, re.compile(r"Connection closed by peer|Connection reset by peer|Broken pipe|EOF", re.I)),
    (COLLECTIVE_TIMEOUT, re.compile(r"timed out|timeout|failed to pass monitoredBarrier", re.I)),
)


def classify_failure(message: str, error_type: str = "") -> str:
    """The likely kind of a rank's failure, from its exception type and text."""
    if error_type == "WrongResult":
        return WRONG_RESULT
    if error_type == "RankMissing":
        return RENDEZVOUS
    if error_type == "Timeout":  # our own watchdog gave up on this rank
        return PEER_DIED if "SIGTERM" in (message or "") else COLLECTIVE_TIMEOUT
    for kind, pattern in _PATTERNS:
        if pattern.search(message or ""):
            return kind
    return OTHER


# One line for a rank that cannot reach rank 0 and must say on its own what to look at.
HINTS = {
    RENDEZVOUS: "check that MASTER_ADDR:MASTER_PORT is reachable from this node; ",
    NCCL_NETWORK: "rerun with NCCL_DEBUG=INFO; set NCCL_SOCKET_IFNAME; ",
    NCCL_TIMEOUT: "a rank hung; test with NCCL_P2P_DISABLE=1; ",
    NCCL_CUDA: "rerun with NCCL_DEBUG=INFO; test with NCCL_P2P_DISABLE=1; ",
    NCCL_OTHER: "rerun with NCCL_DEBUG=INFO; ",
    PEER_DIED: "another rank died; ",
}


def parse_monitored_barrier_ranks(message: str) -> list[int]:
    """Ranks named by Gloo's monitored_barrier: "Ranks 1, 2 failed to pass monitoredBarrier"."""
    match = re.search(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier", message or "")
    if not match:
        return []
    return sorted({int(part) for part in re.findall(r"\d+", match.group(1))})


def _nccl_fix(kind: str) -> Fix:
    commands = ["export NCCL_DEBUG=INFO  # then rerun: NCCL logs which transport and interface fails"]
    if kind == NCCL_NETWORK:
        summary = (
            "NCCL could not reach another node: pick the right network interface, or test without InfiniBand."
        )
        commands += [
            "ip -br addr  # find the interface that carries traffic between the nodes",
            "export NCCL_SOCKET_IFNAME=<interface, e.g. eth0 or ib0>",
            "export NCCL_IB_DISABLE=1  # a test: if this works, the InfiniBand / RoCE setup is at fault",
        ]
    elif kind == NCCL_TIMEOUT:
        summary = (
            "A collective hung until the watchdog fired: a rank stopped, or GPU peer-to-peer transfers hang "
            "(common with PCIe ACS / IOMMU on, or in VMs)."
        )
        commands += [
            "export NCCL_P2P_DISABLE=1  # a test: if this works, GPU peer-to-peer is at fault (check ACS/IOMMU)",
            "export NCCL_IB_DISABLE=1  # a test across nodes",
        ]
    elif kind == NCCL_CUDA:
        summary = (
            "NCCL hit a CUDA error: check the driver supports torch's CUDA, then test without peer-to-peer."
        )
        commands += ["export NCCL_P2P_DISABLE=1  # a test: if this works, GPU peer-to-peer is at fault"]
    else:
        summary = "NCCL failed: rerun with NCCL_DEBUG=INFO to see which step, interface or transport."
        commands += [
            "export NCCL_SOCKET_IFNAME=<interface, e.g. eth0>",
            "export NCCL_P2P_DISABLE=1  # a test without GPU peer-to-peer",
            "export NCCL_IB_DISABLE=1  # a test without InfiniBand",
        ]
    return Fix(summary=summary, commands=commands, links=[NCCL_DOCS])


def _rendezvous_fix(master: str) -> Fix:
    host, _, port = master.rpartition(":")
    return Fix(
        summary=(
            "Every rank must reach MASTER_ADDR:MASTER_PORT (the node running rank 0): export an address the "
            "other nodes can resolve, and open the port in the firewall."
        ),
        commands=[
            "nc -zv {} {}  # from a node whose rank is missing".format(
                host or "$MASTER_ADDR", port or "$MASTER_PORT"
            ),
            "export MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)  # under Slurm",
            "export MASTER_PORT=29500  # a free port, the same on every node",
        ],
        links=[TORCHRUN_DOCS],
    )


# --- the analysis: rank results -> findings (pure) ---------------------------------------------------


def majority_value(values: dict[int, Any]) -> Any:
    """The value most ranks hold; a tie goes to the value of the lowest rank among the tied."""
    counts = Counter(values.values())
    best = max(counts.values())
    for rank in sorted(values):
        if counts[values[rank]] == best:
            return values[rank]
    return None  # pragma: no cover - values is never empty here


def find_version_mismatches(ranks: list[dict]) -> list[Finding]:
    findings = []
    for key, label in AGREED_FIELDS:
        values = {}
        for entry in ranks:
            value = (entry.get("snapshot") or {}).get(key)
            if value is not None:
                values[int(entry["rank"])] = str(value)
        if len(set(values.values())) < 2:
            continue
        majority = majority_value(values)
        odd = {rank: value for rank, value in sorted(values.items()) if value != majority}
        names = ", ".join(f"rank {r} ({_node_of(ranks, r)}) has {v}" for r, v in odd.items())
        findings.append(
            Finding(
                id="distributed-version-mismatch",
                severity=ERROR,
                title=f"{label}: {names}; the other ranks have {majority}",
                detail=(
                    f"Ranks of one job must run the same {label}: a mismatch fails in NCCL/Gloo with unhelpful errors, "
                    "hangs, or silently computes with different kernels."
                ),
                evidence={"field": key, "majority": majority, "odd_ranks": odd, "values": values},
                fix=_mismatch_fix(key, majority, odd),
            )
        )
    return findings


def _mismatch_fix(key: str, majority: str, odd: dict[int, str]) -> Fix:
    ranks = ", ".join(str(r) for r in odd)
    if key == "torch_version":
        return Fix(
            summary=f"Install torch {majority} on the node(s) of rank {ranks} (or the same build on every node).",
            commands=[torch_install_command(majority)],
            links=["https://pytorch.org/get-started/previous-versions/"],
        )
    if key == "driver_version":
        return Fix(summary=f"Install NVIDIA driver {majority} on the node(s) of rank {ranks}.")
    return Fix(
        summary="Use the same torch build on every node: its {} comes with the wheel (rank {} differs).".format(
            key.replace("_version", "").upper(), ranks
        )
    )


def torch_install_command(version: str) -> str:
    """pip command for a torch build: "2.6.0+cu126" -> the cu126 index; no local tag -> PyPI."""
    public, _, local = version.partition("+")
    if local and re.fullmatch(r"cpu|cu\d+|rocm[\d.]+|xpu", local):
        return f"python -m pip install torch=={public} --index-url https://download.pytorch.org/whl/{local}"
    return f"python -m pip install torch=={public}"


def find_failures(ranks: list[dict], master: str) -> list[Finding]:
    """Missing ranks by number, then each distinct failure kind with the ranks that hit it."""
    findings = []
    missing = [e for e in ranks if e.get("status") == "missing"]
    never = [e["rank"] for e in missing if not e.get("snapshot")]
    lost = [e for e in missing if e.get("snapshot")]
    if never:
        findings.append(
            Finding(
                id="distributed-rendezvous-timeout",
                severity=ERROR,
                title=f"{_ranks(never)} never reached the rendezvous at {master}",
                detail=(
                    "These ranks did not check in at the store on MASTER_ADDR:MASTER_PORT within the timeout: the "
                    "address is wrong or not resolvable from their node, the port is closed by a firewall, or the "
                    "process never started (see the launcher's log for that rank)."
                ),
                evidence={"missing_ranks": never, "master": master},
                fix=_rendezvous_fix(master),
            )
        )
    if lost:
        parts = []
        for entry in lost:
            parts.append(
                "rank {} ({}) stopped {}".format(entry["rank"], entry.get("node") or "?", _where(entry))
            )
        findings.append(
            Finding(
                id="distributed-rank-missing",
                severity=ERROR,
                title="{} stopped answering".format(_ranks([e["rank"] for e in lost])),
                detail="; ".join(parts)
                + ". It died (out of memory, a crash) or hung; its own log has the cause.",
                evidence={"ranks": {e["rank"]: e.get("progress") for e in lost}},
                fix=Fix(
                    summary="Read that rank's own output (torchrun prints its exit code; Slurm: the task's log).",
                    links=[TORCHRUN_DOCS],
                ),
            )
        )
    by_kind: dict[str, list[dict]] = {}
    for entry in ranks:
        error = entry.get("error")
        if not error:
            continue
        kind = classify_failure(error.get("message", ""), error.get("type", ""))
        by_kind.setdefault(kind, []).append(entry)
    for kind, entries in by_kind.items():
        findings.append(_failure_finding(kind, entries, master, missing))
    return findings


def _where(entry: dict) -> str:
    """ "during 'all_reduce'" or "after 'init_process_group'", from the progress it published."""
    progress = entry.get("progress")
    if not isinstance(progress, dict):
        return "during '{}'".format(progress or "?")
    if progress.get("current"):
        return "during '{}'".format(progress["current"])
    completed = progress.get("completed") or []
    return f"after '{completed[-1]}'" if completed else "before its first check"


def _failure_finding(kind: str, entries: list[dict], master: str, missing: list[dict]) -> Finding:
    ranks = [e["rank"] for e in entries]
    first = entries[0]["error"]
    stage = first.get("stage", "?")
    message = error_summary(first.get("message", ""))
    evidence = {"ranks": ranks, "stage": stage, "errors": {e["rank"]: e["error"] for e in entries}}
    named = parse_monitored_barrier_ranks(first.get("message", ""))
    if named:
        evidence["ranks_that_did_not_arrive"] = named
    if kind.startswith("nccl"):
        return Finding(
            id="distributed-nccl-error",
            severity=ERROR,
            title=f"NCCL failed on {_ranks(ranks)} during {stage}",
            detail=message,
            evidence=evidence,
            fix=_nccl_fix(kind),
        )
    if kind == RENDEZVOUS:
        return Finding(
            id="distributed-rendezvous-timeout",
            severity=ERROR,
            title=f"{_ranks(ranks)} could not rendezvous at {master} ({stage})",
            detail=message,
            evidence=evidence,
            fix=_rendezvous_fix(master),
        )
    if kind == WRONG_RESULT:
        return Finding(
            id="distributed-wrong-result",
            severity=ERROR,
            title=f"{stage} returned wrong values on {_ranks(ranks)}",
            detail=message
            + " The transport corrupts data: rerun with NCCL_P2P_DISABLE=1 to test peer-to-peer.",
            evidence=evidence,
            fix=_nccl_fix(NCCL_OTHER),
        )
    culprits = named or [e["rank"] for e in missing]
    if kind == PEER_DIED:
        title = f"{_ranks(ranks)} lost the connection to a peer during {stage}"
        detail = "A peer process closed the connection: it died. " + message
    elif kind == COLLECTIVE_TIMEOUT:
        title = f"{stage} timed out on {_ranks(ranks)}"
        detail = "A rank did not join the collective within the timeout. " + message
    else:
        title = f"{_ranks(ranks)} failed during {stage}"
        detail = message
    if culprits:
        title += f" ({_ranks(culprits)} did not answer)"
    return Finding(
        id="distributed-collective-failed",
        severity=ERROR,
        title=title,
        detail=detail,
        evidence=dict(evidence, culprits=culprits),
        fix=Fix(
            summary="Look at the rank that did not answer first; its own log has the cause.",
            links=[TORCH_DIST_DOCS],
        ),
    )


def slowest_rank(ranks: list[dict]) -> dict | None:
    """The rank whose all_reduce took longest at the largest swept size, with the median."""
    timed = []
    for entry in ranks:
        rows = entry.get("bandwidth") or []
        if rows:
            largest = max(rows, key=lambda row: row.get("bytes", 0))
            timed.append((float(largest.get("seconds", 0.0)), entry, largest))
    if not timed:
        return None
    timed.sort(key=lambda item: item[0])
    seconds, entry, row = timed[-1]
    median = (
        timed[len(timed) // 2][0]
        if len(timed) % 2
        else (timed[len(timed) // 2 - 1][0] + timed[len(timed) // 2][0]) / 2
    )
    return {
        "rank": entry["rank"],
        "node": entry.get("node"),
        "bytes": row.get("bytes"),
        "seconds": seconds,
        "median_seconds": median,
        "busbw_gbps": row.get("busbw_gbps"),
    }


def find_slow_rank(ranks: list[dict], factor: float = 2.0) -> list[Finding]:
    """With 3+ ranks, one rank much slower than the median is worth a look (2 ranks: no majority)."""
    slow = slowest_rank(ranks)
    if not slow or len([e for e in ranks if e.get("bandwidth")]) < 3:
        return []
    if slow["median_seconds"] <= 0 or slow["seconds"] < factor * slow["median_seconds"]:
        return []
    return [
        Finding(
            id="distributed-slow-rank",
            severity=WARNING,
            title="rank {} ({}) measured {:.1f}x the median all_reduce time".format(
                slow["rank"], slow["node"], slow["seconds"] / slow["median_seconds"]
            ),
            detail="One slow rank (a slow link, a throttled GPU, a busy host) sets the pace of every collective. "
            "Each rank times its own all_reduce after a barrier, so the collective itself hides much of a "
            "slow rank: treat this as a lead, and confirm with NCCL_DEBUG=INFO or nvidia-smi on that node.",
            evidence=slow,
        )
    ]


def find_peer_access_off(ranks: list[dict]) -> list[Finding]:
    """NVLink between two GPUs but torch says peer access is off: P2P disabled (driver, VM, ACS)."""
    findings = []
    for entry in ranks:
        topo = entry.get("topology") or {}
        links = (topo.get("nvml") or {}).get("links") or {}
        matrix = topo.get("peer_access") or []
        off = []
        for pair, kind in sorted(links.items()):
            if kind != "NVLINK":
                continue
            i, _, j = pair.partition("-")
            i, j = int(i), int(j)
            if _peer(matrix, i, j) is False or _peer(matrix, j, i) is False:
                off.append([i, j])
        if off:
            findings.append(
                Finding(
                    id="gpu-peer-access-off",
                    severity=WARNING,
                    title="{}: peer access is off between NVLink-connected GPUs {}".format(
                        entry.get("node"), ", ".join(f"{i}-{j}" for i, j in off)
                    ),
                    detail=(
                        "NVML reports an active NVLink but torch.cuda.can_device_access_peer is False: transfers go "
                        "through host memory, far slower. Usual causes: a VM or container without P2P, "
                        "NCCL_P2P_DISABLE set, or a driver/fabric manager problem (NVSwitch systems)."
                    ),
                    evidence={"node": entry.get("node"), "pairs": off, "links": links, "peer_access": matrix},
                    fix=Fix(
                        summary="Check `nvidia-smi topo -p2p r` and the fabric manager; unset NCCL_P2P_DISABLE.",
                        commands=[
                            "nvidia-smi topo -m",
                            "nvidia-smi topo -p2p r",
                            "systemctl status nvidia-fabricmanager",
                        ],
                    ),
                )
            )
    return findings


def _peer(matrix: list, i: int, j: int) -> bool | None:
    try:
        return matrix[i][j]
    except (IndexError, TypeError):
        return None


def analyze(ranks: list[dict], master: str) -> list[Finding]:
    findings = find_failures(ranks, master)
    findings += find_version_mismatches(ranks)
    findings += find_peer_access_off(ranks)
    findings += find_slow_rank(ranks)
    for finding in findings:
        finding.rule = "distributed"
    return findings


def build_report(
    ranks: list[dict],
    world_size: int,
    backend: str,
    launcher: str,
    master: str,
    timeout_s: float,
    seams: dict[str, str] | None = None,
    note: str = "",
) -> dict:
    """Rank 0's report: every rank's result, the findings, and an exit code."""
    ranks = sorted(ranks, key=lambda e: e["rank"])
    findings = analyze(ranks, master)
    errors = sum(f.severity == ERROR for f in findings)
    exit_code = exitcodes.FINDINGS if errors else exitcodes.OK
    rank0 = next((e for e in ranks if e["rank"] == 0), {})
    report = {
        "distributed_schema_version": DISTRIBUTED_SCHEMA_VERSION,
        "tool": {"name": "torchdoctor", "version": __version__},
        "world_size": world_size,
        "backend": backend,
        "launcher": launcher,
        "master": master,
        "timeout_s": timeout_s,
        "status": "failed" if errors else "ok",
        "note": note,
        "ranks": ranks,
        "missing_ranks": [e["rank"] for e in ranks if e.get("status") == "missing"],
        "bandwidth": rank0.get("bandwidth") or [],
        "slowest_rank": slowest_rank(ranks),
        "topology": {e.get("node") or str(e["rank"]): e["topology"] for e in ranks if e.get("topology")},
        "findings": [dataclasses.asdict(f) for f in findings],
        "summary": {
            "errors": errors,
            "warnings": sum(f.severity == WARNING for f in findings),
            "infos": sum(f.severity == INFO for f in findings),
            "exit_code": exit_code,
        },
    }
    if seams:
        report["test_seams"] = dict(seams)  # never let a staged failure pass for a real one
    return report


def missing_entry(rank: int, published: dict) -> dict:
    """A rank that sent no result: what it published in the store (hello, progress, error)."""
    hello = published.get("hello") or {}
    error = published.get("error")
    return {
        "rank": rank,
        "node": hello.get("hostname"),
        "local_rank": None,
        "status": "failed" if error else "missing",
        "snapshot": hello,
        "progress": published.get("stage"),
        "steps": [],
        "bandwidth": [],
        "topology": None,
        "error": error,
        "seconds": None,
    }


# --- rendering (plain text: rich is not available in the target interpreter) -----------------------


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


def _node_of(ranks: list[dict], rank: int) -> str:
    for entry in ranks:
        if entry["rank"] == rank:
            return str(entry.get("node") or "?")
    return "?"


def _join(ranks: list) -> str:
    return ", ".join(str(r) for r in ranks)


def _ranks(ranks: list) -> str:
    """ "rank 1" or "ranks 0, 2"."""
    return ("rank " if len(ranks) == 1 else "ranks ") + _join(ranks)


def error_summary(message: str) -> str:
    """The first lines of an error, plus NCCL's "Last error:" line (the one that names the cause)."""
    lines = [line.strip() for line in (message or "").strip().splitlines() if line.strip()]
    keep = lines[:2]
    for i, line in enumerate(lines):
        if line.startswith("Last error:") and i + 1 < len(lines) and lines[i + 1] not in keep:
            keep += [line, lines[i + 1]]
            break
    return "\n".join(keep)


def _first_lines(text: str, count: int) -> str:
    return "\n".join((text or "").strip().splitlines()[:count])


# --- launching from the torchdoctor CLI (which never imports torch) ---------------------------------


def launch_command(python: str, nproc_per_node: int, args: list[str] | None = None) -> list[str]:
    """argv to run the check on this node with the target interpreter's torchrun."""
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(nproc_per_node),
        "-m",
        "doctor.distributed",
    ] + list(args or [])


def run_local(
    python: str,
    nproc_per_node: int,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    extra_args: list[str] | None = None,
    runner: Any = None,
    env: dict[str, str] | None = None,
) -> tuple[dict | None, Any]:
    """Run torchrun on this node; return (rank 0's report or None, the RunResult)."""
    import tempfile

    from doctor.runner import run

    runner = runner or run
    child_env = dict(os.environ if env is None else env)
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, child_env.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="torchdoctor-dist-") as tmp:
        out = os.path.join(tmp, "report.json")
        args = ["--json", "-o", out, "--timeout", str(timeout_s)] + list(extra_args or [])
        argv = launch_command(python, nproc_per_node, args)
        # rendezvous + collectives + sweep each bounded by timeout_s; torchrun start-up on top
        result = runner(argv, timeout=4 * timeout_s + 60, env=child_env)
        try:
            with open(out) as fh:
                return json.load(fh), result
        except (OSError, ValueError):
            return None, result


# --- the rank entry point ---------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m doctor.distributed",
        description="Check torch.distributed across the ranks of a job (run under torchrun or srun).",
    )
    parser.add_argument("--json", action="store_true", help="rank 0 writes JSON instead of text")
    parser.add_argument("-o", "--output", help="rank 0 writes the report to this file (default: stdout)")
    parser.add_argument("--backend", default="auto", help="auto (NCCL on CUDA, else Gloo), nccl or gloo")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds for rendezvous and each collective"
    )
    parser.add_argument(
        "--deadline", type=float, default=None, help="seconds before a rank gives up (default 4x timeout)"
    )
    parser.add_argument(
        "--sizes", default="", help="all_reduce sweep sizes, e.g. 1K,1M,64M (default by backend)"
    )
    parser.add_argument("--iters", type=int, default=5, help="timed all_reduce iterations per size")
    parser.add_argument("--no-topology", action="store_true", help="skip the peer-access / NVLink facts")
    return parser.parse_args(argv)


def parse_sizes(text: str) -> tuple:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    sizes = []
    for part in text.split(","):
        part = part.strip().upper().rstrip("B").rstrip("I")
        if not part:
            continue
        match = re.fullmatch(r"(\d+)([KMG]?)", part)
        if not match:
            raise ValueError(f"bad size {part!r} (use e.g. 4K, 1M, 64M)")
        sizes.append(int(match.group(1)) * units[match.group(2)])
    return tuple(sizes)


def main(argv: list[str] | None = None) -> int:
    from doctor.target import rank as child

    try:
        args = parse_args(argv)
        sizes = parse_sizes(args.sizes)
    except ValueError as exc:
        print(f"torchdoctor distributed: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    env = dict(os.environ)
    renv = child.read_rank_env(env)
    if renv.error:
        print(f"torchdoctor distributed: {renv.error}", file=sys.stderr)
        return exitcodes.USAGE
    seams = child.read_seams(env)
    state = child.RankState(env=renv)
    deadline = args.deadline or 4 * args.timeout
    watchdog = child.Watchdog(deadline, lambda reason: _give_up(state, args, seams, reason)).start()
    child.maybe_die(seams, renv.rank, "before-rendezvous")
    try:
        import torch
        import torch.distributed as dist
    except Exception as exc:  # ImportError, or a broken torch raising anything at import
        print(f"torchdoctor distributed: import torch failed: {exc}", file=sys.stderr)
        return exitcodes.REQUIREMENT
    return run_rank(torch, dist, _import_nvml(), state, args, sizes, seams, watchdog)


def run_rank(
    torch: Any,
    dist: Any,
    nvml: Any,
    state: Any,
    args: argparse.Namespace,
    sizes: tuple,
    seams: dict,
    watchdog: Any,
) -> int:
    """One rank's whole check; rank 0 also writes the report. torch/dist/nvml may be stand-ins."""
    from doctor.target import rank as child

    renv = state.env
    rank, world = renv.rank, renv.world_size
    results = None
    try:
        state.snapshot = child.run_step(
            state, "snapshot", lambda: child.light_snapshot(torch, rank, renv.local_rank, seams, nvml)
        )
        state.backend = child.choose_backend(torch, dist, args.backend)
        state.store = child.run_step(
            state, "rendezvous", lambda: child.connect_store(dist, renv, args.timeout)
        )
        child.publish(state, "hello", state.snapshot)
        if rank == 0:
            missing = child.wait_for_ranks(state.store, world, args.timeout)
            if missing:
                raise RankMissing(missing)
        child.run_step(
            state,
            "init_process_group",
            lambda: child.init_group(torch, dist, state, state.store, args.timeout),
        )
        child.maybe_die(seams, rank, "before-collectives")
        device = child.device_for(torch, state)
        child.run_step(state, "all_reduce", lambda: child.check_all_reduce(torch, dist, device, rank, world))
        child.run_step(state, "broadcast", lambda: child.check_broadcast(torch, dist, device, rank))
        child.run_step(
            state,
            "barrier",
            lambda: child.check_barrier(dist, state.backend, args.timeout, getattr(device, "index", 0) or 0),
        )
        sweep = sizes or (child.NCCL_SIZES if state.backend == "nccl" else child.GLOO_SIZES)
        state.bandwidth = child.run_step(
            state,
            "bandwidth",
            lambda: child.sweep_all_reduce(torch, dist, device, sweep, world, iters=args.iters),
        )
        if renv.local_rank == 0 and not args.no_topology:
            state.topology = child.node_topology(torch, nvml)
        state.stage = "gather"
        child.publish(state, "result", state.result())
        results = child.gather_results(dist, state)
    except RankMissing as exc:
        state.stage = "rendezvous"
        results = [state.result()] + [
            _entry_from_published(r, child.read_rank_from_store(state.store, r), arrived=r not in exc.ranks)
            for r in range(1, world)
        ]
    except Exception:
        pass  # run_step recorded it in state.error
    if not watchdog.finish():
        _wait_for_watchdog()
    if rank != 0:
        if state.error:
            kind = classify_failure(state.error["message"], state.error["type"])
            print(
                "torchdoctor distributed: rank {}: {} failed: {} ({}rank 0 writes the report)".format(
                    rank, state.error["stage"], _first_lines(state.error["message"], 1), HINTS.get(kind, "")
                ),
                file=sys.stderr,
            )
            return exitcodes.FINDINGS
        _destroy(dist)
        return exitcodes.OK
    if results is None:  # rank 0 failed, or gather_object did: read what the others published
        import time

        # One shared grace period for all ranks, not one per rank: 64 silent ranks must not take minutes.
        deadline = time.monotonic() + min(args.timeout, 5.0)
        results = [state.result()] + [
            _entry_from_published(r, _collect(child, state.store, r, deadline)) for r in range(1, world)
        ]
    report = build_report(
        [r for r in results if r],
        world,
        state.backend,
        renv.launcher,
        f"{renv.master_addr}:{renv.master_port}",
        args.timeout,
        seams,
        note="; ".join(step["message"] for step in state.steps if step.get("status") == "fallback"),
    )
    _write(report, args)
    if not state.error:
        _destroy(dist)
    return report["summary"]["exit_code"]


def _wait_for_watchdog() -> None:
    """The watchdog fired first: it writes the report and ends the process; don't race it."""
    import time

    while True:
        time.sleep(60)


class RankMissing(Exception):
    def __init__(self, ranks: list[int]):
        super().__init__(f"{_ranks(ranks)} did not reach the rendezvous")
        self.ranks = ranks


def _entry_from_published(rank: int, published: dict | None, arrived: bool = False) -> dict:
    published = published or {}
    if published.get("result"):
        return published["result"]
    entry = missing_entry(rank, published)
    if arrived and entry["status"] == "missing":
        entry["status"] = "waiting"  # it checked in; the job could not start without the missing ranks
    return entry


def _collect(child: Any, store: Any, rank: int, deadline: float) -> dict:
    """Give a failing rank until ``deadline`` (time.monotonic) to publish its own error, then read what it left."""
    import time

    if store is None:
        return {}
    while True:
        published = child.read_rank_from_store(store, rank)
        if published.get("result") or published.get("error") or time.monotonic() >= deadline:
            return published
        time.sleep(0.1)


def _give_up(state: Any, args: argparse.Namespace, seams: dict, reason: str) -> None:
    """Called by the watchdog thread: report what is known, without touching collectives."""
    from doctor.target import rank as child

    renv = state.env
    if state.error is None:
        state.error = {
            "stage": state.stage,
            "type": "Timeout",
            "message": f"{reason} during {state.stage}",
        }
        child.publish(state, "error", state.error)
    if renv.rank != 0:
        print(
            "torchdoctor distributed: rank {}: {}".format(renv.rank, state.error["message"]), file=sys.stderr
        )
        return
    if state.store is not None:
        try:
            from datetime import timedelta

            state.store.set_timeout(timedelta(seconds=2))
        except Exception:
            pass
    results = [state.result()] + [
        _entry_from_published(
            r, child.read_rank_from_store(state.store, r) if state.store is not None else {}
        )
        for r in range(1, renv.world_size)
    ]
    report = build_report(
        results,
        renv.world_size,
        state.backend,
        renv.launcher,
        f"{renv.master_addr}:{renv.master_port}",
        args.timeout,
        seams,
        note=reason,
    )
    _write(report, args)


def _write(report: dict, args: argparse.Namespace) -> None:
    text = json.dumps(report, indent=2, default=str) + "\n" if args.json else render_text(report)
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, args.output)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _destroy(dist: Any) -> None:
    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:
        pass


def _import_nvml() -> Any:
    try:
        import pynvml

        return pynvml
    except Exception:
        return None


if __name__ == "__main__":
    sys.exit(main())
