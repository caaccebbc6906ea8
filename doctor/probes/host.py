"""The host probe: OS, machine, libc, WSL and container kind, from cheap file reads only.

No subprocess here: everything comes from ``platform`` and a few files under ``root`` (a fake
root directory in tests). WSL and the container kind
are decided once, by the environment probe's families (``doctor/probes/environment/wsl.py`` and
``containers.py``, where their precedence is documented); the host records their answer.
"""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Mapping
from types import ModuleType

from doctor.model.files import read_text as bounded_read_text
from doctor.model.snapshot import Host
from doctor.probes.environment.containers import detect_container
from doctor.probes.environment.wsl import read_wsl_markers

# platform.machine() spellings -> the compat table's names, per OS (arm64 means aarch64 on Linux).
_MACHINE_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "x86_64": "x86_64", "i386": "x86", "i686": "x86"}


def read_text(root: str, path: str, limit: int = 1 << 20) -> str | None:
    """Text of ``<root>/<path>`` (at most ``limit`` bytes), or None when it is absent, unreadable or not a
    regular file (a FIFO, a link to /dev/zero: doctor/model/files.py)."""
    return bounded_read_text(_under(root, path), limit)


def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def read_wsl_marker(root: str = "/") -> str | None:
    """The first WSL2 marker found in files ("/dev/dxg", "/usr/lib/wsl/lib", "/proc/version"), or None."""
    markers = read_wsl_markers(root, {})  # the file markers only: nvidia's message names the file
    return markers[0] if markers else None


def normalise_machine(system: str, machine: str) -> str:
    """``platform.machine()`` in the table's spelling: x86_64, aarch64 (Linux), arm64 (macOS)."""
    value = machine.strip().lower()
    if value in ("arm64", "aarch64"):
        # Linux and Windows-on-ARM wheels say aarch64/arm64 respectively; macOS always says arm64.
        return "arm64" if system in ("darwin", "windows") else "aarch64"
    return _MACHINE_ALIASES.get(value, value)


def detect_libc(root: str, platform_module: ModuleType) -> str:
    """ "glibc 2.36", "musl" or "" (not Linux or unknown)."""
    try:
        lib, version = platform_module.libc_ver()
    except (OSError, ValueError):
        lib, version = "", ""
    if lib:
        return f"{lib} {version}".strip()
    # platform.libc_ver() knows only glibc; musl shows itself by its dynamic loader.
    import glob

    for pattern in ("/lib/ld-musl-*.so.1", "/usr/lib/ld-musl-*.so.1"):
        if glob.glob(_under(root, pattern)):
            return "musl"
    return ""


def probe_host(
    root: str = "/", env: Mapping[str, str] | None = None, platform_module: ModuleType | None = None
) -> Host:
    """Describe this machine. Never raises: what cannot be read is left empty."""
    plat = platform_module or platform
    system = (plat.system() or "").strip().lower()
    system = {"win32": "windows", "cygwin": "windows"}.get(system, system)
    host = Host(os=system, machine=normalise_machine(system, plat.machine() or ""))
    # Windows: release() is "10"/"11"; version() carries the build number that matters.
    host.os_release = (plat.version() if system == "windows" else plat.release()) or ""
    if system == "linux":
        host.libc = detect_libc(root, plat)
        env = os.environ if env is None else env
        host.wsl = bool(read_wsl_markers(root, env))
        host.container = detect_container(root, env)[0]
        from doctor.probes.intel import read_pci_intel_displays

        host.intel_gpus = read_pci_intel_displays(root) or None  # none: nothing to write
    elif system == "windows":
        from doctor.probes.windows_adapters import read_display_adapters

        adapters = read_display_adapters() or []
        host.intel_gpus = [a.device for a in adapters if a.vendor == "0x8086"] or None
    elif system == "darwin":
        from doctor.probes.apple import read_macos

        host.cpu, host.translated, host.macos = read_macos("darwin")
    env = os.environ if env is None else env
    host.scheduler = detect_scheduler(env)
    host.pythons, host.uv = find_pythons(env)
    return host


# A job's own variables, set by the scheduler in every job (Slurm: SLURM_JOB_ID; PBS/Torque: PBS_JOBID;
# IBM LSF: LSB_JOBID; Grid Engine: JOB_ID beside SGE_ROOT; HTCondor: _CONDOR_JOB_AD).
_SCHEDULER_VARIABLES = (("slurm", ("SLURM_JOB_ID",)), ("pbs", ("PBS_JOBID",)), ("lsf", ("LSB_JOBID",)),
                        ("sge", ("JOB_ID", "SGE_ROOT")), ("htcondor", ("_CONDOR_JOB_AD",)))


def detect_scheduler(env: Mapping[str, str]) -> str | None:
    """The cluster scheduler whose job this process runs in, from its job variables; None outside a job."""
    for name, variables in _SCHEDULER_VARIABLES:
        if all(env.get(v) for v in variables):
            return name
    return None


def find_pythons(env: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """``python3.X`` interpreters on PATH by version ("3.12" -> its path), and uv: what a fix that needs
    another Python may name. Names on PATH only (no subprocess): an interpreter is named only where it is."""
    path = env.get("PATH", "")
    found = {}
    for minor in range(8, 16):
        exe = shutil.which(f"python3.{minor}", path=path)
        if exe:
            found[f"3.{minor}"] = exe
    return found, shutil.which("uv", path=path)
