"""Resources: the size of /dev/shm, the CPUs this process may use (affinity and cgroup quota), RAM and
swap."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from doctor.model.environment import Cpu, Memory, Shm
from doctor.probes.environment.files import read_text, under

# --- /dev/shm -----------------------------------------------------------------------------------


def probe_shm(root: str, host_os: str) -> Shm:
    if host_os == "windows":
        return Shm(why="no /dev/shm on Windows")
    try:
        st = os.statvfs(under(root, "/dev/shm"))
    except (OSError, AttributeError) as exc:
        return Shm(path="/dev/shm", why=f"statvfs(/dev/shm) failed: {getattr(exc, 'strerror', None) or exc}")
    return Shm(path="/dev/shm", total_bytes=st.f_blocks * st.f_frsize, free_bytes=st.f_bavail * st.f_frsize)


# --- CPU budget ---------------------------------------------------------------------------------


def parse_cpu_max(text: str) -> float | None:
    """cgroup v2 ``cpu.max`` ("200000 100000" -> 2.0; "max 100000" -> None meaning unlimited)."""
    parts = text.split()
    if not parts or parts[0] == "max":
        return None
    try:
        quota = int(parts[0])
        period = int(parts[1]) if len(parts) > 1 else 100000
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def parse_cfs(quota_text: str, period_text: str) -> float | None:
    """cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (-1 means unlimited -> None)."""
    try:
        quota, period = int(quota_text.strip()), int(period_text.strip())
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def parse_mountinfo_cgroups(text: str) -> list[tuple[str, str, str, str]]:
    """cgroup mounts from /proc/self/mountinfo: (fstype, mount root, mount point, super options)."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, rest = left.split(), right.split()
        if len(fields) < 5 or len(rest) < 3 or rest[0] not in ("cgroup", "cgroup2"):
            continue
        mounts.append((rest[0], fields[3], fields[4], rest[2]))
    return mounts


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """/proc/self/cgroup -> {controller: path}; the v2 line ("0::/x") is stored under ""."""
    result = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            result[controller] = parts[2]
    return result


MAX_CGROUP_DEPTH = 64


def _walk_up(mount_point: str, mount_root: str, cgroup_path: str) -> list[str]:
    """Directories from the process's cgroup up to the mount point (the JVM's way of finding limits)."""
    rel = cgroup_path
    if mount_root not in ("/", "") and rel.startswith(mount_root):
        rel = rel[len(mount_root) :]
    rel = rel.strip("/")
    dirs = []
    # Each level is a path as long as its depth, so a walk is quadratic in it: a planted /proc/self/cgroup
    # 100,000 levels deep took minutes. Real hierarchies are a few levels deep (systemd's ~6); only the top
    # MAX_CGROUP_DEPTH levels, where containers set their limits, are walked.
    parts = rel.split("/", MAX_CGROUP_DEPTH)[:MAX_CGROUP_DEPTH] if rel else []
    for depth in range(len(parts), -1, -1):
        dirs.append(os.path.join(mount_point, *parts[:depth]) if depth else mount_point)
    return dirs


@dataclass(slots=True)
class CpuQuota:
    cgroup: str | None = None  # "v1", "v2"; None: no cgroup CPU controller files found
    quota_cpus: float | None = None
    quota_source: str | None = None
    quota_raw: str | None = None

    def lower(self, quota: float | None, source: str, raw: str) -> None:
        """Keep ``quota`` when it is the smallest seen so far."""
        if quota is not None and (self.quota_cpus is None or quota < self.quota_cpus):
            self.quota_cpus, self.quota_source, self.quota_raw = quota, source, raw


def read_cpu_quota(root: str) -> CpuQuota:
    """The smallest CPU quota on the path from this process's cgroup to the root, in CPUs."""
    mounts = parse_mountinfo_cgroups(read_text(root, "/proc/self/mountinfo") or "")
    cgroups = parse_proc_cgroup(read_text(root, "/proc/self/cgroup") or "")
    if not mounts:  # no mountinfo (fake roots, odd kernels): the usual mount points
        mounts = [("cgroup2", "/", "/sys/fs/cgroup", ""), ("cgroup", "/", "/sys/fs/cgroup/cpu", "cpu")]
        mounts.append(("cgroup", "/", "/sys/fs/cgroup/cpu,cpuacct", "cpu"))
    found = CpuQuota()
    for fstype, mount_root, mount_point, options in mounts:
        if fstype == "cgroup2":
            dirs = _walk_up(mount_point, mount_root, cgroups.get("", "/"))
            texts = [(d, read_text(root, os.path.join(d, "cpu.max"))) for d in dirs]
            texts = [(d, t) for d, t in texts if t is not None]
            if not texts:
                continue
            found.cgroup = "v2"
            for directory, text in texts:
                found.lower(parse_cpu_max(text), os.path.join(directory, "cpu.max"), text.strip())
        elif "cpu" in options.split(","):
            for directory in _walk_up(mount_point, mount_root, cgroups.get("cpu", "/")):
                quota_text = read_text(root, os.path.join(directory, "cpu.cfs_quota_us"))
                period_text = read_text(root, os.path.join(directory, "cpu.cfs_period_us"))
                if quota_text is None or period_text is None:
                    continue
                found.cgroup = found.cgroup or "v1"
                found.lower(parse_cfs(quota_text, period_text), os.path.join(directory, "cpu.cfs_quota_us"),
                            f"{quota_text.strip()} / {period_text.strip()}")
        if found.quota_cpus is not None:
            break
    return found


def cpu_budget(cpu_count: int | None, affinity: int | None, quota_cpus: float | None) -> int | None:
    """CPUs this process can really keep busy: min(affinity, ceil(quota)), at least 1."""
    candidates = [n for n in (affinity or cpu_count, math.ceil(quota_cpus) if quota_cpus else None) if n]
    return max(1, min(candidates)) if candidates else None


def probe_cpu(root: str, cpu_count: int | None = None, affinity: int | None = None) -> Cpu:
    if cpu_count is None:
        cpu_count = os.cpu_count()
    if affinity is None and hasattr(os, "sched_getaffinity"):
        try:
            affinity = len(os.sched_getaffinity(0))
        except OSError:
            affinity = None
    cpu = Cpu(cpu_count=cpu_count, affinity=affinity)
    if sys.platform.startswith("linux") or root not in ("", "/"):
        quota = read_cpu_quota(root)
        cpu.cgroup, cpu.quota_cpus = quota.cgroup, quota.quota_cpus
        cpu.quota_source, cpu.quota_raw = quota.quota_source, quota.quota_raw
        if quota.cgroup is None:
            cpu.why = "no cgroup CPU controller files found"
    cpu.budget = cpu_budget(cpu_count, affinity, cpu.quota_cpus)
    return cpu


# --- memory -------------------------------------------------------------------------------------


def parse_meminfo(text: str) -> dict[str, int] | None:
    """/proc/meminfo -> total, available and swap bytes; None when the fields are not all there."""
    values = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if name in ("MemTotal", "MemAvailable", "SwapTotal") and parts and parts[0].isdigit():
            values[name] = int(parts[0]) * 1024  # the file says kB and means KiB
    if len(values) < 3:
        return None
    return {"total_bytes": values["MemTotal"], "available_bytes": values["MemAvailable"],
            "swap_total_bytes": values["SwapTotal"]}


def probe_memory(
    virtual_memory: Callable[[], Any] | None = None,
    swap_memory: Callable[[], Any] | None = None,
    root: str | None = None,
) -> Memory:
    """RAM and swap. On Linux from ``<root>/proc/meminfo`` (psutil's own source, read under the fake root in
    tests); elsewhere, or when that file is unreadable, from psutil."""
    if root is not None and virtual_memory is None and swap_memory is None:
        text = read_text(root, "/proc/meminfo")
        parsed = parse_meminfo(text) if text else None
        if parsed is not None:
            return Memory(source="/proc/meminfo", **parsed)
    if virtual_memory is None or swap_memory is None:
        try:
            import psutil  # lazily: keeps `torchdoctor --help` and the rules free of it
        except ImportError as exc:
            return Memory(why=f"psutil is not importable: {exc}")
        virtual_memory = virtual_memory or psutil.virtual_memory
        swap_memory = swap_memory or psutil.swap_memory
    try:
        vm = virtual_memory()
        memory = Memory(source="psutil", total_bytes=int(vm.total), available_bytes=int(vm.available))
    except Exception as exc:  # noqa: BLE001 - psutil raises assorted OSError/RuntimeError per platform
        return Memory(why=f"psutil.virtual_memory() failed: {exc}")
    try:
        memory.swap_total_bytes = int(swap_memory().total)
    except Exception as exc:  # noqa: BLE001
        memory.swap_why = f"psutil.swap_memory() failed: {exc}"
    return memory
