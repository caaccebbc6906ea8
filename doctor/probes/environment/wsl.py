"""WSL: whether this is WSL, which one (WSL 1 has no GPU), and what can shadow the Windows driver's libraries
in /usr/lib/wsl/lib (a Linux driver installed inside WSL: its files, its dpkg packages, its nvidia-smi).

``read_wsl_markers`` is the one place that decides "this is WSL": the host probe
(``doctor/probes/host.py``) and, through it, the NVIDIA probe take its answer. Any one marker is
enough; they are checked in this order: /dev/dxg (the GPU paravirtualisation device),
/usr/lib/wsl/lib (the Windows driver's libraries), /proc/version naming Microsoft/WSL, $WSL_DISTRO_NAME.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping

from doctor.compat.wsl import wsl_version
from doctor.model.environment import LdSoConf, Wsl
from doctor.probes.environment.files import exists, read_text, scandir_names, under
from doctor.probes.environment.libraries import DRIVER_LIB

WSL_LIB_DIR = "/usr/lib/wsl/lib"
# A Linux driver's own files carry the full driver version (libnvidia-ml.so.550.54.14).
_LINUX_DRIVER_FILE = re.compile(r"^lib(?:cuda|nvidia-ml)\.so\.(\d{3}(?:\.\d+)+)$")
_EVIDENCE = {"/proc/version": "/proc/version mentions "
    "Microsoft/WSL", "WSL_DISTRO_NAME": "WSL_DISTRO_NAME is set"}


def read_wsl_markers(root: str, env: Mapping[str, str]) -> list[str]:
    """The WSL2 markers found, in the documented order: "/dev/dxg", "/usr/lib/wsl/lib", "/proc/version",
    "WSL_DISTRO_NAME". WSL2 has no NVIDIA kernel module and no visible PCI bus; the GPU is reached
    through /dev/dxg and the Windows driver injects its libraries into /usr/lib/wsl/lib."""
    markers = [path for path in ("/dev/dxg", WSL_LIB_DIR) if exists(root, path)]
    version = (read_text(root, "/proc/version", 4096) or "").lower()
    if "microsoft" in version or "wsl" in version:
        markers.append("/proc/version")
    if env.get("WSL_DISTRO_NAME"):
        markers.append("WSL_DISTRO_NAME")
    return markers


def parse_ld_so_conf(text: str) -> list[str]:
    """Directories listed in one ld.so.conf.d file (comments and include lines dropped)."""
    dirs = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("include") and line.startswith("/"):
            dirs.append(line)
    return dirs


def _driver_libs(root: str, directory: str) -> list[str]:
    return [n for n in scandir_names(under(root, directory)) or [] if DRIVER_LIB.match(n)]


def read_ld_so_conf(root: str) -> list[LdSoConf]:
    """/etc/ld.so.conf.d in the order ldconfig reads it (the include glob is sorted)."""
    confs = []
    for name in scandir_names(under(root, "/etc/ld.so.conf.d")) or []:
        if not name.endswith(".conf"):
            continue
        dirs = parse_ld_so_conf(read_text(root, os.path.join("/etc/ld.so.conf.d", name)) or "")
        confs.append(LdSoConf(
            file=f"/etc/ld.so.conf.d/{name}",
            dirs=dirs,
            # the WSL folder itself is where the driver libraries belong: never an offender
            driver_libs={d: _driver_libs(root, d) for d in dirs if d.rstrip("/") != WSL_LIB_DIR},
        ))
    return confs


def read_linux_driver(root: str) -> list[str]:
    """A Linux driver installed inside WSL: its libraries, its kernel module state, its dkms tree."""
    found = []
    for libdir in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        for name in scandir_names(under(root, libdir)) or []:
            if _LINUX_DRIVER_FILE.match(name):
                full = os.path.join(libdir, name)
                target = os.path.realpath(under(root, full))
                if WSL_LIB_DIR not in target and "/wsl/" not in target:
                    found.append(full)
    found += [
        p for p in ("/proc/driver/nvidia", "/var/lib/dkms/nvidia", "/sys/module/nvidia") if exists(root, p)
    ]
    return found


# The packages of a Linux NVIDIA driver (Ubuntu/Debian names, and NVIDIA's own CUDA repository's
# cuda-drivers).
_DRIVER_PACKAGE = re.compile(
    r"^(?:nvidia-driver(?:-\S+)?|libnvidia-compute-\d+|nvidia-dkms-\S+|nvidia-utils-\d+|nvidia-kernel-\S+"
    r"|nvidia-headless-\S+|libnvidia-gl-\d+|cuda-drivers(?:-\d+)?|nvidia-open(?:-\S+)?)$"
)


def read_kernel_release(root: str) -> str | None:
    """/proc/sys/kernel/osrelease, else the release in /proc/version ("Linux version 4.4.0-19041-Microsoft
    ...")."""
    text = (read_text(root, "/proc/sys/kernel/osrelease", 4096) or "").strip()
    if text:
        return text
    match = re.match(r"Linux version (\S+)", read_text(root, "/proc/version", 4096) or "")
    return match.group(1) if match else None


def parse_dpkg_status(text: str) -> list[str]:
    """The installed packages of a Linux NVIDIA driver in /var/lib/dpkg/status, sorted."""
    found = set()
    for block in text.split("\n\n"):
        name = re.search(r"^Package:\s*(\S+)", block, re.MULTILINE)
        status = re.search(r"^Status:\s*(.+)$", block, re.MULTILINE)
        if (
            name
            and status
            and status.group(1).strip().endswith(" installed")
            and _DRIVER_PACKAGE.match(name.group(1))
        ):
            found.add(name.group(1))
    return sorted(found)


def probe_wsl(root: str, env: Mapping[str, str]) -> Wsl:
    evidence = [_EVIDENCE.get(marker, f"{marker} exists") for marker in read_wsl_markers(root, env)]
    if not evidence:
        return Wsl(is_wsl=False, evidence=[])
    release = read_kernel_release(root)
    return Wsl(
        is_wsl=True,
        evidence=evidence,
        wsl_lib_dir_exists=exists(root, WSL_LIB_DIR),
        ld_so_conf=read_ld_so_conf(root),
        linux_driver=read_linux_driver(root),
        version=wsl_version(release or "", exists(root, "/dev/dxg")),
        kernel_release=release,
        distro=env.get("WSL_DISTRO_NAME") or None,
        driver_packages=parse_dpkg_status(read_text(root, "/var/lib/dpkg/status", 64 << 20) or ""),
        nvidia_smi=shutil.which("nvidia-smi", path=env.get("PATH", "")),
    )
