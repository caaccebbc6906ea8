"""The distributed analysis: every rank's result -> findings (pure functions over plain dicts).

Rank 0 runs this inside the target interpreter (Python 3.8+, stdlib only, maybe no ``packaging``);
``torchdoctor distributed`` never does (it renders rank 0's report). The failure kinds come from
doctor/distributed/failures.py, the fixes from doctor/distributed/fixes.py.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from doctor.distributed.failures import (
    COLLECTIVE_TIMEOUT,
    NCCL_OTHER,
    PEER_DIED,
    RENDEZVOUS,
    WRONG_RESULT,
    classify_failure,
    error_summary,
    parse_monitored_barrier_ranks,
    ranks_text,
)
from doctor.distributed.fixes import TORCH_DIST_DOCS, TORCHRUN_DOCS, mismatch_fix, nccl_fix, rendezvous_fix
from doctor.model.findings import ERROR, WARNING, Finding, Fix
from doctor.plan.commands import Commands

# The fields on which every rank should agree, as (snapshot key, label).
AGREED_FIELDS = (
    ("torch_version", "torch build"),
    ("cuda_version", "CUDA (torch.version.cuda)"),
    ("nccl_version", "NCCL"),
    ("driver_version", "NVIDIA driver"),
)


def majority_value(values: dict[int, Any]) -> Any:
    """The value most ranks hold; a tie goes to the value of the lowest rank among the tied."""
    counts = Counter(values.values())
    best = max(counts.values())
    for rank in sorted(values):
        if counts[values[rank]] == best:
            return values[rank]
    return None  # pragma: no cover - values is never empty here


def find_version_mismatches(ranks: list[dict], commands: Commands | None = None) -> list[Finding]:
    """Ranks whose torch, CUDA, NCCL or driver differs from the majority; ``commands`` writes the fix."""
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
                    f"Ranks of one job must run the same {label}: a mismatch fails in NCCL/Gloo with "
                    "unhelpful errors, "
                    "hangs, or silently computes with different kernels."
                ),
                evidence={"field": key, "majority": majority, "odd_ranks": odd, "values": values},
                fix=mismatch_fix(key, majority, odd, commands),
            )
        )
    return findings



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
                title=f"{ranks_text(never)} never reached the rendezvous at {master}",
                detail=(
                    "These ranks did not check in at the store on MASTER_ADDR:MASTER_PORT within the "
                    "timeout: the "
                    "address is wrong or not resolvable from their node, the port is closed by a firewall, "
                    "or the "
                    "process never started (see the launcher's log for that rank)."
                ),
                evidence={"missing_ranks": never, "master": master},
                fix=rendezvous_fix(master),
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
                title="{} stopped answering".format(ranks_text([e["rank"] for e in lost])),
                detail="; ".join(parts)
                + ". It died (out of memory, a crash) or hung; its own log has the cause.",
                evidence={"ranks": {e["rank"]: e.get("progress") for e in lost}},
                fix=Fix(
                    summary="Read that rank's own output (torchrun prints its exit code; Slurm: the task's "
                        "log).",
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
            title=f"NCCL failed on {ranks_text(ranks)} during {stage}",
            detail=message,
            evidence=evidence,
            fix=nccl_fix(kind),
        )
    if kind == RENDEZVOUS:
        return Finding(
            id="distributed-rendezvous-timeout",
            severity=ERROR,
            title=f"{ranks_text(ranks)} could not rendezvous at {master} ({stage})",
            detail=message,
            evidence=evidence,
            fix=rendezvous_fix(master),
        )
    if kind == WRONG_RESULT:
        return Finding(
            id="distributed-wrong-result",
            severity=ERROR,
            title=f"{stage} returned wrong values on {ranks_text(ranks)}",
            detail=message
            + " The transport corrupts data: rerun with NCCL_P2P_DISABLE=1 to test peer-to-peer.",
            evidence=evidence,
            fix=nccl_fix(NCCL_OTHER),
        )
    culprits = named or [e["rank"] for e in missing]
    if kind == PEER_DIED:
        title = f"{ranks_text(ranks)} lost the connection to a peer during {stage}"
        detail = "A peer process closed the connection: it died. " + message
    elif kind == COLLECTIVE_TIMEOUT:
        title = f"{stage} timed out on {ranks_text(ranks)}"
        detail = "A rank did not join the collective within the timeout. " + message
    else:
        title = f"{ranks_text(ranks)} failed during {stage}"
        detail = message
    if culprits:
        title += f" ({ranks_text(culprits)} did not answer)"
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
            detail="One slow rank (a slow link, a throttled GPU, a busy host) sets the pace of every "
                "collective. "
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
                        "NVML reports an active NVLink but torch.cuda.can_device_access_peer is False: "
                        "transfers go "
                        "through host memory, far slower. Usual causes: a VM or container without P2P, "
                        "NCCL_P2P_DISABLE set, or a driver/fabric manager problem (NVSwitch systems)."
                    ),
                    evidence={"node": entry.get("node"), "pairs": off, "links": links, "peer_access": matrix},
                    fix=Fix(
                        summary="Check `nvidia-smi topo -p2p r` and the fabric manager; unset "
                            "NCCL_P2P_DISABLE.",
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


def analyze(ranks: list[dict], master: str, commands: Commands | None = None) -> list[Finding]:
    findings = find_failures(ranks, master)
    findings += find_version_mismatches(ranks, commands)
    findings += find_peer_access_off(ranks)
    findings += find_slow_rank(ranks)
    for finding in findings:
        finding.rule = "distributed"
    return findings


def _node_of(ranks: list[dict], rank: int) -> str:
    for entry in ranks:
        if entry["rank"] == rank:
            return str(entry.get("node") or "?")
    return "?"
