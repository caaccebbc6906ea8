"""Intel display devices on the PCI bus (vendor 0x8086, class 0x03xxxx), read under ``root`` (the
TORCHDOCTOR_SYSROOT seam): their device ids tell a discrete Arc or Data Center GPU from integrated graphics
(doctor/table/accelerators.py). None when the bus cannot be listed.
"""

from __future__ import annotations

import os

from doctor.model.files import read_text

PCI_DEVICES = "/sys/bus/pci/devices"
INTEL_PCI_VENDOR = "0x8086"


def read_pci_intel_displays(root: str = "/") -> list[str] | None:
    """The device ids ("0x56a0") of the Intel display devices, in PCI address order."""
    base = os.path.join(root, PCI_DEVICES.lstrip("/"))
    try:
        names = sorted(name for name in os.listdir(base) if not name.startswith("."))
    except OSError:
        return None
    found = []
    for name in names:
        vendor = (read_text(os.path.join(base, name, "vendor"), 64) or "").strip().lower()
        klass = (read_text(os.path.join(base, name, "class"), 64) or "").strip().lower()
        if vendor == INTEL_PCI_VENDOR and klass.startswith("0x03"):
            device = (read_text(os.path.join(base, name, "device"), 64) or "").strip().lower()
            if device:
                found.append(device)
    return found
