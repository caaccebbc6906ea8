"""Resources: a /dev/shm too small for DataLoader workers, a CPU quota below the CPUs torch sees, RAM and swap."""

from __future__ import annotations

import math

from doctor.model import snapshot as S
from doctor.model.environment import Cpu, Memory, Shm
from doctor.model.findings import INFO, WARNING, Finding, Fix
from doctor.rules import skipped
from doctor.rules.hazards.common import GIB, MIB, container_kind, gib, missing, unread

# --- /dev/shm -----------------------------------------------------------------------------------

SHM_MIN = 1 * GIB
# A batch of 64 RGB 224x224 float32 images; DataLoader keeps prefetch_factor (2) batches per worker in shm.
_TYPICAL_BATCH = 64 * 3 * 224 * 224 * 4
SHM_ERRORS = (
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
    "DataLoader worker (pid(s) …) exited unexpectedly",
)


def check_shm(snap: S.Snapshot, table) -> list[Finding]:
    if snap.host.os == "windows":
        return skipped("no /dev/shm on Windows")
    gap = missing(snap, snap.environment.shm, "the size of /dev/shm")
    if gap is not None:
        return gap
    shm = snap.environment.shm or Shm()
    total = shm.total_bytes
    if not isinstance(total, int):
        return unread("the size of /dev/shm", shm)
    if total >= SHM_MIN:
        return []
    kind = container_kind(snap)
    workers = _recommended_workers(snap.environment.cpu or Cpu()) or 1
    need = max(workers, 1) * 2 * _TYPICAL_BATCH
    detail = (
        f"/dev/shm holds {total / MIB:.0f} MiB. DataLoader workers hand every batch to the main process through "
        f"shared memory: with {workers} worker(s) and the default prefetch_factor=2, {2 * workers} batches sit in "
        f"/dev/shm at once (64 RGB 224x224 float32 images alone take {_TYPICAL_BATCH / MIB:.0f} MiB each, about "
        f'{need / MIB:.0f} MiB in all). When it fills up the workers die with: "{SHM_ERRORS[0]}" and '
        f'"{SHM_ERRORS[1]}".'
    )
    evidence = {
        "shm.total_bytes": total,
        "shm.free_bytes": shm.free_bytes,
        "container": kind,
        "workers": workers,
        "estimated_need_bytes": need,
    }
    if kind == "kubernetes":
        fix = Fix(
            "Mount an in-memory emptyDir on /dev/shm in the pod spec: volumes: [{name: dshm, emptyDir: {medium: "
            "Memory, sizeLimit: 8Gi}}] and, in the container, volumeMounts: [{name: dshm, mountPath: /dev/shm}].",
            [],
            ["https://kubernetes.io/docs/concepts/storage/volumes/#emptydir"],
        )
    elif kind:
        engine = "podman" if kind == "podman" else "docker"
        fix = Fix(
            "Recreate the container with a larger /dev/shm (or share the host's IPC namespace).",
            [f"{engine} run --shm-size=8g <image> ...", f"{engine} run --ipc=host <image> ..."],
        )
    else:
        fix = Fix(
            "Remount /dev/shm larger (make it permanent in /etc/fstab), or use num_workers=0.",
            ["sudo mount -o remount,size=8G /dev/shm"],
        )
    severity = WARNING if kind else INFO
    where = f"in this {kind} container" if kind else "on this machine"
    return [
        Finding(
            "shm-too-small",
            severity,
            f"/dev/shm is only {total / MIB:.0f} MiB {where}",
            detail,
            evidence,
            fix,
        )
    ]


# --- CPU quota ----------------------------------------------------------------------------------


def _cpu_budget(cpu: Cpu) -> int | None:
    """The probe's budget; a report without one gets it from the same facts."""
    if isinstance(cpu.budget, int) and cpu.budget > 0:
        return cpu.budget
    visible = cpu.affinity or cpu.cpu_count
    candidates = [n for n in (visible, math.ceil(cpu.quota_cpus) if cpu.quota_cpus else None) if n]
    return max(1, min(candidates)) if candidates else None


def _recommended_workers(cpu: Cpu) -> int | None:
    """num_workers for a DataLoader: the real CPU budget minus one for the main process."""
    budget = _cpu_budget(cpu)
    return None if budget is None else max(0, budget - 1)


def check_cpu_quota(snap: S.Snapshot, table) -> list[Finding]:
    gap = missing(snap, snap.environment.cpu, "the CPU count and quota")
    if gap is not None:
        return gap
    cpu = snap.environment.cpu or Cpu()
    budget = _cpu_budget(cpu)
    visible = cpu.affinity or cpu.cpu_count
    count = cpu.cpu_count
    if budget is None or not visible:
        return unread("the number of CPUs this process may use", cpu)
    quota = cpu.quota_cpus
    workers = _recommended_workers(cpu)
    evidence = {
        k: getattr(cpu, k) for k in ("cpu_count", "affinity", "cgroup", "quota_cpus", "quota_source", "quota_raw")
    }
    evidence |= {"budget": budget, "recommended_num_workers": workers}
    fix = Fix(
        f"Size the DataLoader and torch's threads to {budget} CPU(s): DataLoader(..., num_workers={workers}) "
        f"and torch.set_num_threads({budget}), or:",
        [f"export OMP_NUM_THREADS={budget}"],
    )
    if isinstance(quota, (int, float)) and quota < visible / 2:
        return [
            Finding(
                "cpu-quota-low",
                WARNING,
                f"the cgroup CPU quota ({quota:g} CPUs) is far below the {visible} CPUs this process sees",
                f"{cpu.quota_source or 'The cgroup'} limits this process to {quota:g} CPUs, but "
                f"os.sched_getaffinity() shows {visible}. torch sizes its intra-op thread pool and the DataLoader's "
                f"suggested max workers from the visible CPUs (torch's cpu_count ignores CFS quotas), so "
                f"{visible} threads share {quota:g} CPUs and get throttled. Use at most {workers} DataLoader workers.",
                evidence,
                fix,
            )
        ]
    if count and budget < count:
        why = f"a CPU quota of {quota:g}" if quota else f"an affinity mask of {visible}"
        return [
            Finding(
                "cpu-budget",
                INFO,
                f"this process may use {budget} of the machine's {count} CPUs: use num_workers={workers}",
                f"{why.capitalize()} CPUs limits this process. A DataLoader with more than {workers} workers "
                "(plus the main process) only adds context switches.",
                evidence,
                fix,
            )
        ]
    return []


# --- memory -------------------------------------------------------------------------------------

SMALL_RAM = 16 * GIB


def check_memory(snap: S.Snapshot, table) -> list[Finding]:
    gap = missing(snap, snap.environment.memory, "RAM and swap")
    if gap is not None:
        return gap
    mem = snap.environment.memory or Memory()
    total, available, swap = mem.total_bytes, mem.available_bytes, mem.swap_total_bytes
    if not isinstance(total, int):
        return unread("the size of RAM", mem)
    gpu_mib = sum(g.memory_total_mib or 0 for g in snap.nvidia.gpus)
    evidence = {
        "ram.total_bytes": total,
        "ram.available_bytes": available,
        "swap.total_bytes": swap,
        "gpu.memory_total_mib": gpu_mib or None,
        "gpus": [f"GPU {g.index} {g.name}: {g.memory_total_mib} MiB" for g in snap.nvidia.gpus],
    }
    findings = []
    if gpu_mib and total < gpu_mib * MIB:
        findings.append(
            Finding(
                "ram-smaller-than-gpu-memory",
                INFO,
                f"RAM ({gib(total)}) is smaller than the GPUs' memory ({gib(gpu_mib * MIB)})",
                "Checkpoints pass through host RAM on their way to the GPU (torch.load maps to the CPU first unless "
                "told otherwise), so a model that fills the GPUs may not fit in RAM while loading.",
                evidence,
                Fix(
                    "Load checkpoints straight to the device and memory-mapped: torch.load(path, mmap=True, "
                    'map_location="cuda"), or add swap/RAM.'
                ),
            )
        )
    if isinstance(swap, int) and swap == 0 and total < SMALL_RAM:
        in_container = container_kind(snap)
        findings.append(
            Finding(
                "no-swap-small-ram",
                INFO,
                f"no swap and only {gib(total)} of RAM",
                "Without swap the kernel's OOM killer ends the process the moment RAM runs out; DataLoader workers "
                'then die with "DataLoader worker (pid …) is killed by signal: Killed."',
                evidence,
                Fix(
                    "Add a swap file"
                    + (" on the host (a container cannot add swap)" if in_container else "")
                    + ".",
                    []
                    if in_container
                    else [
                        "sudo fallocate -l 8G /swapfile && sudo chmod 600 /swapfile && sudo mkswap /swapfile "
                        "&& sudo swapon /swapfile"
                    ],
                ),
            )
        )
    if isinstance(available, int) and (available < 1 * GIB or available < total * 0.05):
        findings.append(
            Finding(
                "low-available-memory",
                INFO,
                f"only {gib(available)} of {gib(total)} RAM is available",
                "Other processes hold most of the RAM; loading a model or starting DataLoader workers may be killed "
                "by the OOM killer.",
                evidence,
                Fix("Find what holds the memory and stop it.", ["ps aux --sort=-rss | head"]),
            )
        )
    return findings
