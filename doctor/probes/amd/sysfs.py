"""Raw sources in the kernel's files, read under ``root`` (the TORCHDOCTOR_SYSROOT seam): the AMD display
devices on the PCI bus, the KFD topology, the amdgpu module's version and the device files the ROCm runtime
opens. "Could not look" (None) is never mistaken for "found nothing".
"""

from __future__ import annotations

import os

from doctor.model.amd import AmdPciDevice, DeviceNode, KfdNode, gfx_from_target_version
from doctor.probes.amd.parsers import parse_kfd_properties, pci_address
from doctor.probes.host import read_text

PCI_DEVICES = "/sys/bus/pci/devices"
KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"
AMDGPU_VERSION = "/sys/module/amdgpu/version"
KFD_DEVICE = "/dev/kfd"
DRI = "/dev/dri"
AMD_PCI_VENDOR = "0x1002"


def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def _listdir(path: str) -> list[str] | None:
    try:
        return sorted(name for name in os.listdir(path) if not name.startswith("."))
    except OSError:
        return None


def read_pci_amd_devices(root: str = "/") -> list[AmdPciDevice] | None:
    """AMD display devices (vendor 0x1002, class 0x03xxxx) by address; None when the bus cannot be listed."""
    base = _under(root, PCI_DEVICES)
    names = _listdir(base)
    if names is None:
        return None
    found = []
    for name in names:
        device = os.path.join(base, name)
        vendor = (read_text("/", os.path.join(device, "vendor")) or "").strip().lower()
        klass = (read_text("/", os.path.join(device, "class")) or "").strip().lower()
        if vendor != AMD_PCI_VENDOR or not klass.startswith("0x03"):
            continue
        device_id = (read_text("/", os.path.join(device, "device")) or "").strip().lower()
        try:
            driver = os.path.basename(os.readlink(os.path.join(device, "driver")))
        except OSError:
            driver = None
        found.append(AmdPciDevice(address=name, device_id=device_id, pci_class=klass, driver=driver))
    return found


def read_kfd_nodes(root: str = "/") -> list[KfdNode] | None:
    """Every node of the KFD topology, by number; None when there is no topology (amdgpu without KFD, or
    not loaded)."""
    base = _under(root, KFD_NODES)
    names = _listdir(base)
    if names is None:
        return None
    nodes = []
    for name in sorted((n for n in names if n.isascii() and n.isdigit() and len(n) < 6), key=int):
        folder = os.path.join(base, name)
        props = parse_kfd_properties(read_text("/", os.path.join(folder, "properties"), limit=64 << 10) or "")
        label = (read_text("/", os.path.join(folder, "name"), limit=4096) or "").strip() or None
        version = props.get("gfx_target_version")
        minor = props.get("drm_render_minor")
        nodes.append(KfdNode(
            node=int(name),
            name=label,
            gfx_target_version=version,
            gfx=gfx_from_target_version(version),
            vendor_id=props.get("vendor_id"),
            device_id=props.get("device_id"),
            pci_address=pci_address(props.get("domain"), props.get("location_id")) if version else None,
            drm_render_minor=minor if version and minor else None,
        ))
    return nodes


def read_amdgpu_version(root: str = "/") -> str | None:
    """The amdgpu module's version (a DKMS build writes one; the kernel's own amdgpu has none)."""
    text = read_text(root, AMDGPU_VERSION, limit=4096)
    return text.strip() or None if text is not None else None


def render_nodes(root: str = "/") -> list[str]:
    """The /dev/dri/renderD* paths present (as they are named on the machine, not under ``root``)."""
    names = _listdir(_under(root, DRI)) or []
    return [f"{DRI}/{name}" for name in names if name.startswith("renderD")]


def device_node(root: str, path: str, access=os.access, groups=None) -> DeviceNode:
    """Whether ``path`` exists and this process may read and write it; its group and whether we are in it.

    ``access`` and ``groups`` (the process's group ids) are seams for tests, which run as root."""
    real = _under(root, path)
    try:
        info = os.stat(real)
    except OSError:
        return DeviceNode(path=path, exists=False)
    if groups is None:
        groups = set(os.getgroups()) | {os.getegid()} if hasattr(os, "getgroups") else set()
    return DeviceNode(
        path=path,
        exists=True,
        readable=access(real, os.R_OK),
        writable=access(real, os.W_OK),
        group=_group_name(info.st_gid, root),
        in_group=info.st_gid in groups if groups else None,
    )


def _group_name(gid: int, root: str = "/") -> str:
    """The group's name, as this machine's group database gives it (under a fake root: its /etc/group);
    the number when it has none (inside a container, a group only the host knows)."""
    if root not in ("", "/"):
        for line in (read_text(root, "/etc/group", limit=1 << 20) or "").splitlines():
            fields = line.split(":")
            if len(fields) >= 3 and fields[2].strip() == str(gid) and fields[0]:
                return fields[0]
        return str(gid)
    try:
        import grp

        return grp.getgrgid(gid).gr_name
    except (ImportError, KeyError):  # no grp module (Windows), or a group only the host knows
        return str(gid)
