"""The environment probe: hazards around torch that are not version numbers, one module per family.

``containers`` (container kind and GPU access), ``resources`` (/dev/shm, the CPU budget, RAM and swap),
``devices`` (*_VISIBLE_DEVICES), ``libraries`` (CUDA libraries on the library path, CUDA_HOME),
``wsl``, ``loader`` (which libcuda.so.1 the dynamic loader picks; cuda-compat) and ``windows`` (the long-path
setting). The rules that read these facts mirror them in ``doctor/rules/hazards/``; the sections are the
dataclasses of ``doctor/model/environment.py``.

Everything is read from files under ``root`` (a fake root in tests) and from the ``env`` mapping; no
subprocess is started. A section never raises: a failure inside one becomes that section with only
``why="probe failed: ..."``, and the others still run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping

from doctor.model.environment import SECTIONS, Environment, Wsl
from doctor.model.snapshot import Host
from doctor.probes.environment.containers import probe_container
from doctor.probes.environment.devices import probe_visible_devices
from doctor.probes.environment.libraries import probe_cuda_home, probe_libraries
from doctor.probes.environment.loader import probe_loader
from doctor.probes.environment.resources import probe_cpu, probe_memory, probe_shm
from doctor.probes.environment.windows import probe_windows
from doctor.probes.environment.wsl import probe_wsl

__all__ = ["probe_environment"]


def _host_os(host: Host | None) -> str:
    if host is not None and host.os:
        return host.os
    if sys.platform.startswith("win"):
        return "windows"
    return "darwin" if sys.platform == "darwin" else "linux"


def probe_environment(
    root: str = "/", env: Mapping[str, str] | None = None, host: Host | None = None
) -> Environment:
    """Every hazard section; ``python`` and ``hostname`` are the collector's to add."""
    env = os.environ if env is None else env
    host_os = _host_os(host)
    probes: dict[str, Callable[[], object]] = {
        "container": lambda: probe_container(root, env),
        "shm": lambda: probe_shm(root, host_os),
        "cpu": lambda: probe_cpu(root),
        "memory": lambda: probe_memory(root=root if host_os == "linux" else None),
        "visible_devices": lambda: probe_visible_devices(env),
        "libraries": lambda: probe_libraries(env, host_os),
        "cuda_home": lambda: probe_cuda_home(root, env),
        "wsl": lambda: probe_wsl(root, env) if host_os == "linux" else Wsl(is_wsl=False, evidence=[]),
        "loader": lambda: probe_loader(root, env) if host_os == "linux" else None,
        "windows": lambda: probe_windows() if host_os == "windows" else None,
    }
    sections = {}
    for key, probe in probes.items():
        try:
            sections[key] = probe()
        except Exception as exc:  # noqa: BLE001 - a probe never raises; the failure becomes data
            sections[key] = SECTIONS[key](why=f"probe failed: {type(exc).__name__}: {exc}")
    return Environment(**sections)
