"""The Intel PCI and macOS facts (doctor/probes/intel.py, doctor/probes/apple.py) over fake roots and a fake
sysctlbyname."""

from __future__ import annotations

import ctypes

from doctor.probes.apple import _sysctl, read_macos
from doctor.probes.intel import read_pci_intel_displays


def test_intel_display_devices_only(tmp_path):
    devices = tmp_path / "sys/bus/pci/devices"
    pci = (("0000:00:02.0", "0x8086", "0x030000", "0x7d55"),  # Meteor Lake iGPU
           ("0000:03:00.0", "0x8086", "0x030000", "0x56A0"),  # Arc A770
           ("0000:00:1f.3", "0x8086", "0x040300", "0x7e28"),  # audio
           ("0000:01:00.0", "0x10de", "0x030000", "0x2684"))  # an NVIDIA GPU
    for address, vendor, klass, device in pci:
        folder = devices / address
        folder.mkdir(parents=True)
        (folder / "vendor").write_text(vendor + "\n")
        (folder / "class").write_text(klass + "\n")
        (folder / "device").write_text(device + "\n")
    assert read_pci_intel_displays(str(tmp_path)) == ["0x7d55", "0x56a0"]
    assert read_pci_intel_displays(str(tmp_path / "nowhere")) is None


def test_macos_facts_only_on_macos():
    assert read_macos("linux") == (None, None, None)


class FakeLibc:
    """sysctlbyname(3): the size first (oldp NULL), then the value."""

    def __init__(self, values):
        self.values = values

    def sysctlbyname(self, name, oldp, oldlenp, newp, newlen):
        value = self.values.get(name.decode())
        if value is None:
            return -1
        data = value if isinstance(value, bytes) else ctypes.c_int(value)
        size = ctypes.cast(oldlenp, ctypes.POINTER(ctypes.c_size_t))
        if oldp is None:
            size[0] = len(data) if isinstance(data, bytes) else ctypes.sizeof(data)
            return 0
        raw = data if isinstance(data, bytes) else bytes(data)
        ctypes.memmove(oldp, raw, len(raw))
        return 0


def test_sysctl_values():
    libc = FakeLibc({"machdep.cpu.brand_string": b"Apple M2 Pro\0", "sysctl.proc_translated": 1})
    assert _sysctl(libc, "machdep.cpu.brand_string") == "Apple M2 Pro"
    assert _sysctl(libc, "sysctl.proc_translated", as_int=True) == 1
    assert _sysctl(libc, "kern.osproductversion") is None
