"""What to do about a distributed finding: NCCL variables, rendezvous checks, the install command.

Pure and stdlib only: rank 0 builds these inside the target interpreter (Python 3.8+, maybe no
``packaging``).
"""

from __future__ import annotations

import re

from doctor.distributed.failures import NCCL_CUDA, NCCL_NETWORK, NCCL_TIMEOUT
from doctor.model.findings import Fix

NCCL_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
TORCH_DIST_DOCS = "https://pytorch.org/docs/stable/distributed.html"
TORCHRUN_DOCS = "https://pytorch.org/docs/stable/elastic/run.html"
PREVIOUS_VERSIONS = "https://pytorch.org/get-started/previous-versions/"


def nccl_fix(kind: str) -> Fix:
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


def rendezvous_fix(master: str) -> Fix:
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


def mismatch_fix(key: str, majority: str, odd: dict[int, str]) -> Fix:
    ranks = ", ".join(str(r) for r in odd)
    if key == "torch_version":
        return Fix(
            summary=f"Install torch {majority} on the node(s) of rank {ranks} (or the same build on every node).",
            commands=[torch_install_command(majority)],
            links=[PREVIOUS_VERSIONS],
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
