"""Resources: a /dev/shm too small for DataLoader workers, a CPU quota below the CPUs torch sees, RAM and
swap."""

from __future__ import annotations

import math

from doctor.compat.assessment import Assessment
from doctor.model.environment import Cpu, Memory, Shm
from doctor.model.findings import INFO, WARNING, Finding, Fix
from doctor.model.i18n import Msg
from doctor.rules import skipped
from doctor.rules.hazards.common import GIB, MIB, container_kind, gib, missing, unread

# --- /dev/shm -----------------------------------------------------------------------------------

SHM_MIN = 1 * GIB
# A batch of 64 RGB 224x224 float32 images; DataLoader keeps prefetch_factor (2) batches per worker in shm.
_TYPICAL_BATCH = 64 * 3 * 224 * 224 * 4
SHM_ERRORS = (
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory "
    "(shm).",
    "DataLoader worker (pid(s) …) exited unexpectedly",
)


def check_shm(facts: Assessment) -> list[Finding]:
    snap = facts.snap
    if snap.host.os == "windows":
        return skipped(Msg("no /dev/shm on Windows"))
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
    detail = Msg(
        "/dev/shm holds {value:.0f} MiB. DataLoader workers hand every batch to the main process through "
        "shared memory: with {workers} worker(s) and the default prefetch_factor=2, {value2} batches sit in "
        "/dev/shm at once (64 RGB 224x224 float32 images alone take {value3:.0f} MiB each, about "
        '{value4:.0f} MiB in all). When it fills up the workers die with: "{SHM_ERRORS}" and '
        '"{SHM_ERRORS2}".',
        value=total / MIB,
        workers=workers,
        value2=2 * workers,
        value3=_TYPICAL_BATCH / MIB,
        value4=need / MIB,
        SHM_ERRORS=SHM_ERRORS[0],
        SHM_ERRORS2=SHM_ERRORS[1],
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
            Msg("Mount an in-memory emptyDir on /dev/shm in the pod spec: volumes: [{{name: dshm, emptyDir: "
                "{{medium: "
            "Memory, sizeLimit: 8Gi}}}}] and, in the container, volumeMounts: [{{name: dshm, mountPath: "
            "/dev/shm}}]."),
            [],
            ["https://kubernetes.io/docs/concepts/storage/volumes/#emptydir"],
        )
    elif kind:
        engine = "podman" if kind == "podman" else "docker"
        fix = Fix(
            Msg("Recreate the container with a larger /dev/shm (or share the host's IPC namespace)."),
            [f"{engine} run --shm-size=8g <image> ...", f"{engine} run --ipc=host <image> ..."],
        )
    else:
        fix = Fix(
            Msg("Remount /dev/shm larger (make it permanent in /etc/fstab), or use num_workers=0."),
            ["sudo mount -o remount,size=8G /dev/shm"],
        )
    severity = WARNING if kind else INFO
    where = f"in this {kind} container" if kind else "on this machine"
    return [
        Finding(
            "shm-too-small",
            severity,
            Msg("/dev/shm is only {value:.0f} MiB {where}", value=total / MIB, where=where),
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


def check_cpu_quota(facts: Assessment) -> list[Finding]:
    snap = facts.snap
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
        k: getattr(cpu, k)
        for k in ("cpu_count", "affinity", "cgroup", "quota_cpus", "quota_source", "quota_raw")
    }
    evidence |= {"budget": budget, "recommended_num_workers": workers}
    fix = Fix(
        Msg("Size the DataLoader and torch's threads to {budget} CPU(s): DataLoader(..., "
            "num_workers={workers}) "
        "and torch.set_num_threads({budget}), or:", budget=budget, workers=workers),
        [f"export OMP_NUM_THREADS={budget}"],
    )
    if isinstance(quota, (int, float)) and quota < visible / 2:
        return [
            Finding(
                "cpu-quota-low",
                WARNING,
                Msg(
                    "the cgroup CPU quota ({quota:g} CPUs) is far below the {visible} CPUs this process sees",
                    quota=quota,
                    visible=visible,
                ),
                Msg(
                    "{quota_source} limits this process to {quota:g} CPUs, but "
                    "os.sched_getaffinity() shows {visible}. torch sizes its intra-op thread pool and the "
                    "DataLoader's "
                    "suggested max workers from the visible CPUs (torch's cpu_count ignores CFS quotas), so "
                    "{visible} threads share {quota:g} CPUs and get throttled. Use at most {workers} "
                    "DataLoader workers.",
                    quota_source=cpu.quota_source or "The cgroup",
                    quota=quota,
                    visible=visible,
                    workers=workers,
                ),
                evidence,
                fix,
            )
        ]
    if count and budget < count:
        why = Msg("a CPU quota of {quota:g}", quota=quota) if quota else Msg("an affinity mask of "
            "{visible}", visible=visible)
        return [
            Finding(
                "cpu-budget",
                INFO,
                Msg("this process may use {budget} of the machine's {count} CPUs: use "
                    "num_workers={workers}", budget=budget, count=count, workers=workers),
                Msg("{capitalize} CPUs limits this process. A DataLoader with more than {workers} workers "
                "(plus the main process) only adds context "
                "switches.", capitalize=why.capitalize(), workers=workers),
                evidence,
                fix,
            )
        ]
    return []


# --- memory -------------------------------------------------------------------------------------

SMALL_RAM = 16 * GIB


def check_memory(facts: Assessment) -> list[Finding]:
    snap = facts.snap
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
                Msg("RAM ({gib}) is smaller than the GPUs' memory "
                    "({gib2})", gib=gib(total), gib2=gib(gpu_mib * MIB)),
                Msg("Checkpoints pass through host RAM on their way to the GPU (torch.load maps to the CPU "
                    "first unless "
                "told otherwise), so a model that fills the GPUs may not fit in RAM while loading."),
                evidence,
                Fix(
                    Msg("Load checkpoints straight to the device and memory-mapped: torch.load(path, "
                        "mmap=True, "
                    "map_location=\"cuda\"), or add swap/RAM.")
                ),
            )
        )
    if isinstance(swap, int) and swap == 0 and total < SMALL_RAM:
        in_container = container_kind(snap)
        findings.append(
            Finding(
                "no-swap-small-ram",
                INFO,
                Msg("no swap and only {gib} of RAM", gib=gib(total)),
                Msg("Without swap the kernel's OOM killer ends the process the moment RAM runs out; "
                    "DataLoader workers "
                "then die with \"DataLoader worker (pid …) is killed by signal: Killed.\""),
                evidence,
                Fix(
                    Msg("Add a swap file")
                    + (Msg(" on the host (a container cannot add swap)") if in_container else "")
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
                Msg("only {gib} of {gib2} RAM is available", gib=gib(available), gib2=gib(total)),
                Msg("Other processes hold most of the RAM; loading a model or starting DataLoader workers "
                    "may be killed "
                "by the OOM killer."),
                evidence,
                Fix(Msg("Find what holds the memory and stop it."), ["ps aux --sort=-rss | head"]),
            )
        )
    return findings
