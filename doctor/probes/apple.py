"""macOS facts for the wheel and MPS judgements, read with sysctlbyname(3) through ctypes: no subprocess (a
``sysctl`` child is a native arm64 process and would not say whether *this* process is translated).

- ``machdep.cpu.brand_string``: "Apple M2 Pro" (on Intel Macs "Intel(R) Core(TM) i7-...");
- ``sysctl.proc_translated``: 1 when this process runs under Rosetta 2, 0 natively, absent on Intel Macs;
- ``kern.osproductversion``: "13.6.1", the macOS version the wheel tags compare with.

Never raises: what cannot be read is None.
"""

from __future__ import annotations

import sys


def _sysctl(libc, name: str, as_int: bool = False):
    import ctypes

    size = ctypes.c_size_t(0)
    key = name.encode()
    if libc.sysctlbyname(key, None, ctypes.byref(size), None, 0) != 0 or not size.value:
        return None
    if as_int:
        value = ctypes.c_int(0)
        size = ctypes.c_size_t(ctypes.sizeof(value))
        if libc.sysctlbyname(key, ctypes.byref(value), ctypes.byref(size), None, 0) != 0:
            return None
        return value.value
    buffer = ctypes.create_string_buffer(size.value)
    if libc.sysctlbyname(key, buffer, ctypes.byref(size), None, 0) != 0:
        return None
    return buffer.value.decode("utf-8", "replace").strip() or None


def read_macos(platform: str | None = None) -> tuple[str | None, bool | None, str | None]:
    """(CPU name, translated by Rosetta 2, macOS version) on macOS; (None, None, None) elsewhere."""
    if (platform or sys.platform) != "darwin":
        return None, None, None
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.dylib", use_errno=True)
        cpu = _sysctl(libc, "machdep.cpu.brand_string")
        translated = _sysctl(libc, "sysctl.proc_translated", as_int=True)
        version = _sysctl(libc, "kern.osproductversion")
    except (OSError, AttributeError, ValueError):
        return None, None, None
    return cpu, (bool(translated) if translated is not None else None), version
