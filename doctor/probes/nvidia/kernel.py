"""Raw sources in the kernel's files: the nvidia module's version (/sys, /proc) and the PCI bus scan
that tells "no NVIDIA GPU" from "a GPU without a driver". Everything reads under ``root`` (the
TORCHDOCTOR_SYSROOT seam), and "could not look" (None) is never mistaken for "found nothing".
"""

from __future__ import annotations

import os

from doctor.probes.host import read_text
from doctor.probes.nvidia.parsers import clip, parse_proc_version, parse_sys_module_version

SYS_MODULE_VERSION = "/sys/module/nvidia/version"
PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"
PCI_DEVICES = "/sys/bus/pci/devices"

NVIDIA_PCI_VENDOR = "0x10de"


def read_pci_nvidia_devices(root: str = "/") -> list[str] | None:
    """PCI addresses of NVIDIA display devices (vendor 0x10de, class 0x03xxxx), sorted.

    None when ``/sys/bus/pci/devices`` cannot be listed (not Linux, or a sandbox), so that
    "nothing found" is never mistaken for "could not look".
    """
    base = os.path.join(root, PCI_DEVICES.lstrip("/"))
    if not os.path.isdir(base):
        return None
    found = []
    try:
        names = os.listdir(base)
    except OSError:
        return None
    for name in names:  # each device's folder (no hidden entries), as glob's "*/vendor" would list them
        device = os.path.join(base, name)
        vendor_path = os.path.join(device, "vendor")
        if name.startswith(".") or not os.path.lexists(vendor_path):
            continue
        vendor = read_text("/", vendor_path) or ""
        klass = read_text("/", os.path.join(device, "class")) or ""
        if vendor.strip().lower() == NVIDIA_PCI_VENDOR and klass.strip().lower().startswith("0x03"):
            found.append(os.path.basename(device))
    return sorted(found)


def read_kernel_driver_version(root: str = "/") -> tuple[str | None, str, str]:
    """(version or None, source file, note) from /sys/module, then /proc; the note says why not."""
    notes = []
    for path, parser in (
        (SYS_MODULE_VERSION, parse_sys_module_version),
        (PROC_DRIVER_VERSION, parse_proc_version),
    ):
        text = read_text(root, path)
        if text is None:
            notes.append(f"{path} absent")
            continue
        version = parser(text)
        if version:
            return version, path, ""
        notes.append(f"{path} unreadable: {clip(text)[:80]!r}")
    return None, "", "; ".join(notes)
