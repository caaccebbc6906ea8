"""Peer access and NVML topology of one multi-GPU node: which GPU pairs talk over NVLink, and
whether torch can reach one GPU from another. Read once per node (local rank 0).

Runs INSIDE the target interpreter (Python 3.8+, stdlib only; torch and pynvml are passed in).
"""

from __future__ import annotations

from typing import Any

from doctor.target.rank import as_text, first_line

# NVML topology levels (nvmlGpuTopologyLevel_t), named the way `nvidia-smi topo -m` names them.
TOPOLOGY_LEVELS = {0: "SAME-BOARD", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def peer_access_matrix(torch: Any) -> list[list[bool | None]]:
    """matrix[i][j]: torch.cuda.can_device_access_peer(i, j); None on the diagonal or on error."""
    count = int(torch.cuda.device_count())
    matrix: list[list[bool | None]] = []
    for i in range(count):
        row: list[bool | None] = []
        for j in range(count):
            if i == j:
                row.append(None)
                continue
            try:
                row.append(bool(torch.cuda.can_device_access_peer(i, j)))
            except Exception:
                row.append(None)
        matrix.append(row)
    return matrix


def _torch_pci_ids(torch: Any) -> list[tuple[int, int, int] | None]:
    """(domain, bus, device) per torch device index, to map torch's order onto NVML's."""
    ids: list[tuple[int, int, int] | None] = []
    for i in range(int(torch.cuda.device_count())):
        try:
            props = torch.cuda.get_device_properties(i)
            ids.append((int(props.pci_domain_id), int(props.pci_bus_id), int(props.pci_device_id)))
        except Exception:  # older torch: no pci_* on the properties
            ids.append(None)
    return ids


def nvml_topology(nvml: Any, torch_pci: list[tuple[int, int, int] | None]) -> dict:
    """Per pair of torch devices: "NVLINK" (any active link between them) or the PCIe level."""
    topo: dict = {"links": {}, "mapping": "pci", "error": None}
    try:
        nvml.nvmlInit()
    except Exception as exc:
        topo["error"] = f"nvml: {exc}"
        return topo
    try:
        handles = _handles_in_torch_order(nvml, torch_pci, topo)
        bus_of = {}
        for index, handle in enumerate(handles):
            bus_of[_normal_bus_id(nvml.nvmlDeviceGetPciInfo(handle).busId)] = index
        nvlinks = set()
        for i, handle in enumerate(handles):
            for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
                try:
                    if nvml.nvmlDeviceGetNvLinkState(handle, link) != getattr(
                        nvml, "NVML_FEATURE_ENABLED", 1
                    ):
                        continue
                    remote = _normal_bus_id(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)
                except Exception:  # NotSupported (no NVLink on this GPU), InvalidArgument past the last link
                    continue
                j = bus_of.get(remote)
                if j is not None and j != i:  # a remote NVSwitch is not a GPU: no direct pair
                    nvlinks.add((min(i, j), max(i, j)))
        for i in range(len(handles)):
            for j in range(i + 1, len(handles)):
                if (i, j) in nvlinks:
                    kind = "NVLINK"
                else:
                    try:
                        level = nvml.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j])
                        kind = TOPOLOGY_LEVELS.get(int(level), f"LEVEL-{level}")
                    except Exception as exc:
                        kind = f"unknown ({exc})"
                topo["links"][f"{i}-{j}"] = kind
    except Exception as exc:
        topo["error"] = f"nvml: {exc}"
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass
    return topo


def _handles_in_torch_order(nvml: Any, torch_pci: list, topo: dict) -> list:
    count = int(nvml.nvmlDeviceGetCount())
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    by_pci = {}
    for handle in handles:
        info = nvml.nvmlDeviceGetPciInfo(handle)
        by_pci[(int(info.domain), int(info.bus), int(info.device))] = handle
    if torch_pci and all(pci in by_pci for pci in torch_pci):
        return [by_pci[pci] for pci in torch_pci]
    # No PCI ids from torch: assume the same order (true with CUDA_DEVICE_ORDER=PCI_BUS_ID and no
    # CUDA_VISIBLE_DEVICES); say so in the facts.
    topo["mapping"] = "assumed-same-order"
    return handles[: len(torch_pci)] if torch_pci else handles


def _normal_bus_id(bus_id: Any) -> str:
    """ "00000000:01:00.0" (NVML) and "0000:01:00.0" (legacy, sysfs) -> the same key."""
    text = as_text(bus_id).strip().lower()
    parts = text.split(":")
    if len(parts) == 3:
        try:
            return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
        except ValueError:
            pass
    return text


def node_topology(torch: Any, nvml: Any) -> dict | None:
    """Peer access and NVML links for this node's GPUs; None with fewer than two GPUs."""
    try:
        if not torch.cuda.is_available() or int(torch.cuda.device_count()) < 2:
            return None
        result = {"peer_access": peer_access_matrix(torch), "nvml": None}
        if nvml is None:
            result["nvml"] = {"links": {}, "mapping": "", "error": "nvml: not importable"}
        else:
            result["nvml"] = nvml_topology(nvml, _torch_pci_ids(torch))
        return result
    except Exception as exc:
        return {"peer_access": [], "nvml": None, "error": first_line(exc)}
