"""Which WSL a Linux kernel release belongs to: WSL 1 has no GPU at all, WSL 2 passes the Windows driver's
through.

Pure, so that the WSL probe (the kernel release it reads) and the rules (a report's or a collect_env text's
``Python platform`` release) decide it the same way.
"""

from __future__ import annotations


def wsl_version(kernel_release: str | None, dxg: bool = False) -> int | None:
    """2 for "5.15.167.4-microsoft-standard-WSL2" (and the older "4.19.104-microsoft-standard"), 1 for WSL 1's
    "4.4.0-19041-Microsoft", None when the release names neither. /dev/dxg exists only under WSL 2."""
    release = (kernel_release or "").lower()
    if dxg or "wsl2" in release or "microsoft-standard" in release:
        return 2
    if "microsoft" in release:
        return 1
    return None
