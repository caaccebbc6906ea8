"""The host probe: OS, machine, libc, WSL and container kind, from cheap file reads only.

No subprocess here: everything comes from ``platform`` and a few files under ``root`` (a fake
root directory in tests), so the probe costs well under a millisecond.
"""

from __future__ import annotations

import glob
import os
import platform as _platform
from collections.abc import Mapping
from types import ModuleType

from doctor.model.snapshot import Host

# platform.machine() spellings -> the compat table's names, per OS (arm64 means aarch64 on Linux).
_MACHINE_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "x86_64": "x86_64", "i386": "x86", "i686": "x86"}


def read_text(root: str, path: str) -> str | None:
    """Text of ``<root>/<path>``, or None when it is absent or unreadable."""
    try:
        with open(_under(root, path), encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except (OSError, ValueError):
        return None


def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def read_wsl_marker(root: str = "/") -> str | None:
    """The first WSL2 sign found ("/dev/dxg", "/usr/lib/wsl/lib", "/proc/version"), or None.

    WSL2 has no NVIDIA kernel module and no visible PCI bus; the GPU is reached through /dev/dxg
    and the Windows driver injects its libraries into /usr/lib/wsl/lib.
    """
    for path in ("/dev/dxg", "/usr/lib/wsl/lib"):
        if os.path.exists(_under(root, path)):
            return path
    version = read_text(root, "/proc/version") or ""
    if "microsoft" in version.lower() or "wsl" in version.lower():
        return "/proc/version"
    return None


def normalise_machine(system: str, machine: str) -> str:
    """``platform.machine()`` in the table's spelling: x86_64, aarch64 (Linux), arm64 (macOS)."""
    value = machine.strip().lower()
    if value in ("arm64", "aarch64"):
        # Linux and Windows-on-ARM wheels say aarch64/arm64 respectively; macOS always says arm64.
        return "arm64" if system in ("darwin", "windows") else "aarch64"
    return _MACHINE_ALIASES.get(value, value)


def parse_cgroup_container(text: str) -> str | None:
    """Container kind named in a /proc/<pid>/cgroup file, or None (cgroup v2 shows just "0::/")."""
    lowered = text.lower()
    if "kubepods" in lowered:
        return "kubernetes"
    if "libpod" in lowered:
        return "podman"
    if "docker" in lowered:
        return "docker"
    if "containerd" in lowered:
        return "containerd"
    return None


def detect_container(root: str = "/", env: Mapping[str, str] | None = None) -> str | None:
    """The container kind, or None on bare metal / a VM.

    Kubernetes is checked first: a pod on a Docker runtime also has /.dockerenv, and the
    remedies differ (pod spec vs ``docker run`` flags).
    """
    env = os.environ if env is None else env
    cgroups = (read_text(root, "/proc/1/cgroup") or "") + (read_text(root, "/proc/self/cgroup") or "")
    if env.get("KUBERNETES_SERVICE_HOST") or "kubepods" in cgroups.lower():
        return "kubernetes"
    if os.path.exists(_under(root, "/.dockerenv")):
        return "docker"
    if os.path.exists(_under(root, "/run/.containerenv")):
        return "podman"
    return parse_cgroup_container(cgroups)


def detect_libc(root: str, platform_module: ModuleType) -> str:
    """ "glibc 2.36", "musl" or "" (not Linux or unknown)."""
    try:
        lib, version = platform_module.libc_ver()
    except (OSError, ValueError):
        lib, version = "", ""
    if lib:
        return f"{lib} {version}".strip()
    # platform.libc_ver() knows only glibc; musl shows itself by its dynamic loader.
    for pattern in ("/lib/ld-musl-*.so.1", "/usr/lib/ld-musl-*.so.1"):
        if glob.glob(_under(root, pattern)):
            return "musl"
    return ""


def probe_host(
    root: str = "/", env: Mapping[str, str] | None = None, platform_module: ModuleType | None = None
) -> Host:
    """Describe this machine. Never raises: what cannot be read is left empty."""
    plat = platform_module or _platform
    system = (plat.system() or "").strip().lower()
    system = {"win32": "windows", "cygwin": "windows"}.get(system, system)
    host = Host(os=system, machine=normalise_machine(system, plat.machine() or ""))
    # Windows: release() is "10"/"11"; version() carries the build number that matters.
    host.os_release = (plat.version() if system == "windows" else plat.release()) or ""
    if system == "linux":
        host.libc = detect_libc(root, plat)
        host.wsl = read_wsl_marker(root) is not None
        host.container = detect_container(root, env)
    return host
