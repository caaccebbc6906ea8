"""Why a rank failed: its exception text sorted into a few kinds (pure; tested on recorded messages).

Stdlib only and Python 3.8 compatible: rank 0 and every failing rank classify inside the target
interpreter. The kinds pick a finding and its fix (doctor/distributed/analysis.py, fixes.py).
"""

from __future__ import annotations

import re

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


def error_summary(message: str) -> str:
    """The first lines of an error, plus NCCL's "Last error:" line (the one that names the cause)."""
    lines = [line.strip() for line in (message or "").strip().splitlines() if line.strip()]
    keep = lines[:2]
    for i, line in enumerate(lines):
        if line.startswith("Last error:") and i + 1 < len(lines) and lines[i + 1] not in keep:
            keep += [line, lines[i + 1]]
            break
    return "\n".join(keep)


def first_lines(text: str, count: int) -> str:
    return "\n".join((text or "").strip().splitlines()[:count])


def ranks_text(ranks: list) -> str:
    """ "rank 1" or "ranks 0, 2"."""
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)
