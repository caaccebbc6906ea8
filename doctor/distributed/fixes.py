"""What to do about a distributed finding: NCCL variables, rendezvous checks, the install command.

Pure and stdlib only: rank 0 builds these inside the target interpreter (Python 3.8+, maybe no
``packaging``). The install hint is an ``Action`` written out by the plan's one command builder,
so its index, mirror, installer and quoting are those of every other command torchdoctor prints.
"""

from __future__ import annotations

from doctor.distributed.failures import NCCL_CUDA, NCCL_NETWORK, NCCL_TIMEOUT
from doctor.model.findings import INSTALL, Action, Fix
from doctor.model.versions import split_local, variant_of
from doctor.plan.commands import Commands, InstallSource

NCCL_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
TORCH_DIST_DOCS = "https://pytorch.org/docs/stable/distributed.html"
TORCHRUN_DOCS = "https://pytorch.org/docs/stable/elastic/run.html"
PREVIOUS_VERSIONS = "https://pytorch.org/get-started/previous-versions/"

# The hint's interpreter is whichever `python` runs on the odd node: rank 0 cannot know its path there.
DEFAULT_COMMANDS = Commands(python="python")


def commands_from_env(env) -> Commands:
    """How rank 0 writes its install hints: ``python`` (every node has its own path) and the PyTorch index, or
    the mirror TORCHDOCTOR_INDEX_URL_BASE names (the same variable `check`, `report` and `fix` read), so the
    hints point where the plan's commands do."""
    base = (env.get("TORCHDOCTOR_INDEX_URL_BASE") or "").strip().rstrip("/")
    if not base or "://" not in base:
        return DEFAULT_COMMANDS
    return Commands(python="python", source=InstallSource(base, base_given=True))


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
            "export NCCL_P2P_DISABLE=1  # a test: if this works, GPU peer-to-peer is at fault (check "
            "ACS/IOMMU)",
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


def mismatch_fix(key: str, majority: str, odd: dict[int, str], commands: Commands | None = None) -> Fix:
    ranks = ", ".join(str(r) for r in odd)
    if key == "torch_version":
        return Fix(
            summary=f"Install torch {majority} on the node(s) of rank {ranks} (or the same build on every "
                "node).",
            commands=[torch_install_command(majority, commands)],
            links=[PREVIOUS_VERSIONS],
        )
    if key == "driver_version":
        return Fix(summary=f"Install NVIDIA driver {majority} on the node(s) of rank {ranks}.")
    return Fix(
        summary="Use the same torch build on every node: its {} comes with the wheel (rank {} "
            "differs).".format(
            key.replace("_version", "").upper(), ranks
        )
    )


def torch_install_action(version: str) -> Action:
    """Install exactly ``version``: "2.6.0+cu126" from the cu126 index; no index tag -> the default index.

    A local tag that names no index ("+gitabc": a source build) cannot be installed from anywhere,
    so the pin keeps only the public version then.
    """
    variant = variant_of(version)
    pin = version if variant else split_local(version)[0]
    return Action(INSTALL, (f"torch=={pin}",), variant)


def torch_install_command(version: str, commands: Commands | None = None) -> str:
    """The install line for ``version``, written by ``commands`` (default: ``python``, the PyTorch index)."""
    return (commands or DEFAULT_COMMANDS).line(torch_install_action(version))
