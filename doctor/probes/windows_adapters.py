"""The display adapters of a Windows machine, read from the registry with ``winreg``: Windows has no
/sys/bus/pci, but each adapter's driver key under the Display class names its PCI vendor and device id
(``MatchingDeviceId``, "pci\\ven_1002&dev_744c") and its name (``DriverDesc``). The AMD and Intel GPU facts on
Windows come from here. Tests pass a fake ``winreg`` module: there is no Windows machine to read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The Display device class (GUID_DEVCLASS_DISPLAY); one numbered subkey per installed adapter driver.
DISPLAY_CLASS_KEY = r"SYSTEM\CurrentControlSet\Control\Class\{4d36e968-e325-11ce-bfc1-08002be10318}"
_PCI_ID = re.compile(r"pci\\ven_([0-9a-f]{4})&dev_([0-9a-f]{4})", re.IGNORECASE)
_MAX_ADAPTERS = 64


@dataclass(frozen=True)
class DisplayAdapter:
    vendor: str  # "0x1002"
    device: str  # "0x744c"
    name: str  # DriverDesc: "AMD Radeon RX 7900 XTX"
    key: str  # the driver key, as the evidence names it


def read_display_adapters(winreg=None) -> list[DisplayAdapter] | None:
    """The PCI display adapters, in the registry's order; None when the registry cannot be read (not
    Windows). A key without a PCI id (a remote-desktop or virtual adapter) is left out."""
    if winreg is None:
        try:
            import winreg  # Windows only
        except ImportError:
            return None
    found = []
    try:
        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, DISPLAY_CLASS_KEY) as cls:
            for i in range(_MAX_ADAPTERS):
                try:
                    name = winreg.EnumKey(cls, i)
                except OSError:  # no more subkeys
                    break
                if name.isdigit():
                    adapter = _adapter(winreg, f"{DISPLAY_CLASS_KEY}\\{name}")
                    if adapter is not None:
                        found.append(adapter)
    except OSError:
        return None
    return found


def _adapter(winreg, path: str) -> DisplayAdapter | None:
    try:
        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, path) as key:
            matching = _value(winreg, key, "MatchingDeviceId")
            desc = _value(winreg, key, "DriverDesc")
    except OSError:  # access denied to one adapter's key: the others still count
        return None
    m = _PCI_ID.search(matching or "")
    if m is None:
        return None
    return DisplayAdapter(vendor="0x" + m.group(1).lower(), device="0x" + m.group(2).lower(),
                          name=(desc or "").strip(), key="HKLM\\" + path)


def _value(winreg, key, name: str) -> str | None:
    try:
        value, _kind = winreg.QueryValueEx(key, name)
    except OSError:
        return None
    return value if isinstance(value, str) else None
