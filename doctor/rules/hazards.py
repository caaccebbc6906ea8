"""Hazard rules: the environment around torch, beyond version numbers.

One rule per family: containers, /dev/shm, CPU quota, memory, *_VISIBLE_DEVICES, library
shadowing (LD_LIBRARY_PATH / CUDA_HOME), mixed and duplicate installs, interpreter hygiene, WSL2.
Each ``check_*`` is a pure function of (snapshot, table). The facts come from
``snapshot.environment`` (``doctor/probes/environment.py`` and, under "python", the inspector);
reports from older versions may lack any of them, so every read is defensive and a missing
section means "nothing to say", never an error.
"""

from __future__ import annotations

import math
import shlex
from typing import Any

from doctor.compat.builds import torch_build
from doctor.model import snapshot as S
from doctor.model.findings import ERROR, INFO, INSTALL, SHELL, UNINSTALL, VENV, WARNING, Action, Finding, Fix
from doctor.model.versions import normalize_name, version_tuple
from doctor.rules import Rule

GIB = 1024**3
MIB = 1024**2
WSL_LIB_DIR = "/usr/lib/wsl/lib"
TORCH_TRIO = ("torch", "torchvision", "torchaudio")


# --- reading the snapshot defensively ------------------------------------------------------------


def _section(snap: S.Snapshot, key: str) -> dict[str, Any]:
    env = snap.environment if isinstance(snap.environment, dict) else {}
    value = env.get(key)
    return value if isinstance(value, dict) else {}


def _mm(version: Any) -> tuple[int, int | None] | None:
    """'12.4.127' -> (12, 4); '12' -> (12, None); None when it does not start with a number."""
    parts = version_tuple(str(version or ""))
    if not parts:
        return None
    return parts[0], (parts[1] if len(parts) > 1 else None)


def _mm_text(version: Any) -> str:
    mm = _mm(version)
    if mm is None:
        return str(version)
    return f"{mm[0]}.{mm[1]}" if mm[1] is not None else str(mm[0])


def _torch_cuda(snap: S.Snapshot) -> str | None:
    build = torch_build(snap)
    if build is not None and build.kind == "cuda":
        return build.cuda or snap.runtime.cuda_version
    return None


def _is_cuda_build(snap: S.Snapshot) -> bool:
    build = torch_build(snap)
    return build is not None and build.kind == "cuda"



def _install(snap: S.Snapshot, kind: str = INSTALL, venv: str = "") -> Action:
    """torch, torchvision and torchaudio again, from the index of the installed build's variant."""
    build = torch_build(snap)
    variant = build.variant if build is not None and build.kind in ("cuda", "cpu", "rocm", "xpu") else None
    return Action(kind, TORCH_TRIO, variant, text=venv)


def _gib(nbytes: float | int | None) -> str:
    return "?" if nbytes is None else f"{nbytes / GIB:.1f} GiB"


def _container_kind(snap: S.Snapshot) -> str | None:
    return _section(snap, "container").get("kind") or snap.host.container


def _usable_gpus(snap: S.Snapshot) -> list[S.Gpu]:
    return list(snap.nvidia.gpus) if snap.nvidia.status == S.NVIDIA_OK else []


def _export(variable: str, dirs: list[str], windows: bool = False) -> str:
    """The command that sets the library path to ``dirs`` (or unsets it when empty)."""
    if windows:
        return f'$env:{variable} = "{";".join(dirs)}"'
    if not dirs:
        return f"unset {variable}"
    return f"export {variable}={shlex.quote(':'.join(dirs))}"


def _split_path(value: str | None, windows: bool = False) -> list[str]:
    return [d for d in (value or "").split(";" if windows else ":") if d]


def _same_dir(a: str, b: str) -> bool:
    return a.rstrip("/\\") == b.rstrip("/\\")


# --- containers ---------------------------------------------------------------------------------

_LEAD_RULE_STATUSES = (S.NVIDIA_CONTAINER_LOST, S.NVIDIA_MISMATCH, S.NVIDIA_NO_PERMISSION)


def _gpu_remedy(kind: str | None) -> Fix:
    if kind == "kubernetes":
        return Fix(
            "Request a GPU in the pod spec (resources.limits: nvidia.com/gpu: 1) and make sure the NVIDIA "
            "device plugin (or the GPU operator) runs on the node.",
            [
                "kubectl get nodes -o custom-columns=NAME:.metadata.name,GPUS:.status.allocatable.nvidia\\.com/gpu"
            ],
            ["https://github.com/NVIDIA/k8s-device-plugin"],
        )
    if kind == "podman":
        return Fix(
            "Recreate the container with the GPUs passed through CDI (generate the CDI spec on the host once).",
            [
                "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml  # on the host",
                "podman run --device nvidia.com/gpu=all <image> ...",
            ],
            ["https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html"],
        )
    return Fix(
        "Recreate the container with the GPUs passed in (docker run --gpus all); the host needs the NVIDIA "
        "Container Toolkit configured as a Docker runtime.",
        [
            "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker  # on the host",
            "docker run --gpus all <image> ...",
        ],
        ["https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"],
    )


def check_containers(snap: S.Snapshot, table) -> list[Finding]:
    facts = _section(snap, "container")
    kind = _container_kind(snap)
    status = snap.nvidia.status
    # The core rule explains the other broken states (container-lost-gpu-access, ...): no duplicates.
    if not kind or status in _LEAD_RULE_STATUSES:
        return []
    expects = []
    build = torch_build(snap)
    if build is not None and build.kind == "cuda":
        expects.append(f"torch {build.label} is a CUDA build")
    nvd = facts.get("nvidia_visible_devices")
    hidden_by_nvd = nvd is not None and nvd.strip().lower() in ("", "void", "none")
    if nvd is not None and not hidden_by_nvd:
        expects.append(f"NVIDIA_VISIBLE_DEVICES={nvd}")
    if facts.get("cuda_image"):
        expects.append("a CUDA image (" + ", ".join(facts.get("cuda_image_evidence") or []) + ")")
    gpu_nodes = facts.get("gpu_device_nodes")
    driver_works = status == S.NVIDIA_OK and bool(snap.nvidia.gpus)
    evidence = {
        "container": kind,
        "container.evidence": facts.get("evidence", []),
        "device_nodes": facts.get("device_nodes", []),
        "nvidia.status": status,
        "expects_gpu": expects,
    }
    findings = []
    if not driver_works and (gpu_nodes == 0 or status in (S.NVIDIA_NO_GPU, S.NVIDIA_NO_DRIVER)):
        if not expects:
            return []
        # A CUDA torch that cannot run is an error; a GPU variable or a CUDA image env var a strong hint;
        # a toolkit folder alone (devel images double as CPU CI images) only worth mentioning.
        cuda_torch = build is not None and build.kind == "cuda"
        hinted = (nvd is not None and not hidden_by_nvd) or any(
            not e.startswith("/") for e in facts.get("cuda_image_evidence") or []
        )
        severity = ERROR if cuda_torch else WARNING if hinted else INFO
        nodes = "no /dev/nvidia* device nodes" if gpu_nodes == 0 else "no working NVIDIA driver"
        if hidden_by_nvd and expects:
            fix = _gpu_remedy(kind)
            fix.summary = (
                "Recreate the container with NVIDIA_VISIBLE_DEVICES=all (or the GPUs you want). "
                + fix.summary
            )
            if kind not in ("kubernetes", "podman"):
                fix.commands[-1] = "docker run --gpus all -e NVIDIA_VISIBLE_DEVICES=all <image> ..."
            findings.append(
                Finding(
                    "nvidia-visible-devices-hides-all",
                    severity,
                    f"NVIDIA_VISIBLE_DEVICES={nvd!r} gives this container no GPU",
                    f"Inside this {kind} container there are {nodes}. The NVIDIA container runtime reads "
                    f"NVIDIA_VISIBLE_DEVICES when the container starts: 'void' or empty injects nothing, 'none' injects "
                    "the driver libraries but no GPU. torch will report torch.cuda.is_available() == False.",
                    evidence | {"NVIDIA_VISIBLE_DEVICES": nvd},
                    fix,
                )
            )
        elif expects:
            findings.append(
                Finding(
                    "container-no-gpu-access",
                    severity,
                    f"this {kind} container has no GPU access ({nodes})",
                    f"The environment expects a GPU ({'; '.join(expects)}), but the container was started without "
                    'the NVIDIA runtime passing the GPUs in, so torch sees no device ("Found no NVIDIA driver on your '
                    'system" or torch.cuda.is_available() == False). GPUs are given to a container when it is '
                    "created; nothing inside it can add them.",
                    evidence,
                    _gpu_remedy(kind),
                )
            )
        return findings
    caps = facts.get("nvidia_driver_capabilities")
    if (gpu_nodes or driver_works) and caps is not None and build is not None and build.kind == "cuda":
        wanted = {c.strip().lower() for c in caps.split(",")}
        if not wanted & {"compute", "all"}:
            findings.append(
                Finding(
                    "container-missing-compute-capability",
                    WARNING,
                    f"NVIDIA_DRIVER_CAPABILITIES={caps!r} does not include 'compute'",
                    "The NVIDIA container runtime mounts libcuda only for the 'compute' capability; with 'utility' "
                    "alone nvidia-smi works but CUDA (and so torch) finds no driver.",
                    evidence | {"NVIDIA_DRIVER_CAPABILITIES": caps},
                    Fix(
                        "Recreate the container with NVIDIA_DRIVER_CAPABILITIES=compute,utility.",
                        ["docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility <image> ..."],
                    ),
                )
            )
    return findings


# --- /dev/shm -----------------------------------------------------------------------------------

SHM_MIN = 1 * GIB
# A batch of 64 RGB 224x224 float32 images; DataLoader keeps prefetch_factor (2) batches per worker in shm.
_TYPICAL_BATCH = 64 * 3 * 224 * 224 * 4
SHM_ERRORS = (
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
    "DataLoader worker (pid(s) …) exited unexpectedly",
)


def check_shm(snap: S.Snapshot, table) -> list[Finding]:
    shm = _section(snap, "shm")
    total = shm.get("total_bytes")
    if not isinstance(total, int) or total >= SHM_MIN:
        return []
    kind = _container_kind(snap)
    workers = _recommended_workers(_section(snap, "cpu")) or 1
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
        "shm.free_bytes": shm.get("free_bytes"),
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


def _cpu_budget(cpu: dict[str, Any]) -> int | None:
    budget = cpu.get("budget")
    if isinstance(budget, int) and budget > 0:
        return budget
    visible = cpu.get("affinity") or cpu.get("cpu_count")
    quota = cpu.get("quota_cpus")
    candidates = [n for n in (visible, math.ceil(quota) if quota else None) if n]
    return max(1, min(candidates)) if candidates else None


def _recommended_workers(cpu: dict[str, Any]) -> int | None:
    """num_workers for a DataLoader: the real CPU budget minus one for the main process."""
    budget = _cpu_budget(cpu)
    return None if budget is None else max(0, budget - 1)


def check_cpu_quota(snap: S.Snapshot, table) -> list[Finding]:
    cpu = _section(snap, "cpu")
    budget = _cpu_budget(cpu)
    visible = cpu.get("affinity") or cpu.get("cpu_count")
    count = cpu.get("cpu_count")
    if budget is None or not visible:
        return []
    quota = cpu.get("quota_cpus")
    workers = _recommended_workers(cpu)
    evidence = {
        k: cpu.get(k) for k in ("cpu_count", "affinity", "cgroup", "quota_cpus", "quota_source", "quota_raw")
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
                f"{cpu.get('quota_source') or 'The cgroup'} limits this process to {quota:g} CPUs, but "
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
    mem = _section(snap, "memory")
    total, available, swap = mem.get("total_bytes"), mem.get("available_bytes"), mem.get("swap_total_bytes")
    if not isinstance(total, int):
        return []
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
                f"RAM ({_gib(total)}) is smaller than the GPUs' memory ({_gib(gpu_mib * MIB)})",
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
        in_container = _container_kind(snap)
        findings.append(
            Finding(
                "no-swap-small-ram",
                INFO,
                f"no swap and only {_gib(total)} of RAM",
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
                f"only {_gib(available)} of {_gib(total)} RAM is available",
                "Other processes hold most of the RAM; loading a model or starting DataLoader workers may be killed "
                "by the OOM killer.",
                evidence,
                Fix("Find what holds the memory and stop it.", ["ps aux --sort=-rss | head"]),
            )
        )
    return findings


# --- CUDA_VISIBLE_DEVICES -----------------------------------------------------------------------


def _strtoul(text: str) -> int:
    """torch's ``_strtoul``: the integer a string starts with, -1 when none (W213 torch/cuda/__init__.py)."""
    if not text:
        return -1
    idx = 0
    for idx, char in enumerate(text):
        if not (char.isdigit() or (idx == 0 and char in "+-")):
            break
        if idx + 1 == len(text):
            idx += 1
    try:
        return int(text[:idx]) if idx > 0 else -1
    except ValueError:  # a lone "+" or "-": torch would raise here; CUDA ignores the entry
        return -1


def parse_visible_devices(value: str) -> dict[str, Any]:
    """Parse CUDA_VISIBLE_DEVICES the way torch's ``_parse_visible_devices`` does (PROBES.md §3.5).

    Returns {"kind": "index"|"uuid"|"mig", "entries": [...], "duplicate": entry or None,
    "ignored": [entries after the first invalid/negative one]}. A repeated entry empties the list.
    """
    raw = value.split(",")
    if value.startswith(("GPU-", "MIG-")):
        prefix = value[:4]
        kind = "uuid" if prefix == "GPU-" else "mig"
        entries: list[Any] = []
        for pos, elem in enumerate(raw):
            if elem in entries:
                return {"kind": kind, "entries": [], "duplicate": elem, "ignored": []}
            if not elem.startswith(prefix):
                return {"kind": kind, "entries": entries, "duplicate": None, "ignored": raw[pos:]}
            entries.append(elem)
        return {"kind": kind, "entries": entries, "duplicate": None, "ignored": []}
    entries = []
    for pos, elem in enumerate(raw):
        number = _strtoul(elem.strip())
        if number in entries:
            return {"kind": "index", "entries": [], "duplicate": elem.strip(), "ignored": []}
        if number < 0:
            return {"kind": "index", "entries": entries, "duplicate": None, "ignored": raw[pos:]}
        entries.append(number)
    return {"kind": "index", "entries": entries, "duplicate": None, "ignored": []}


def map_visible_devices(parsed: dict[str, Any], gpus: list[S.Gpu]) -> tuple[list[S.Gpu], list[str]]:
    """The GPUs torch will see, in order, and the entries that match none (they end the list)."""
    seen: list[S.Gpu] = []
    entries = parsed["entries"]
    for pos, entry in enumerate(entries):
        if parsed["kind"] == "index":
            match = next((g for g in gpus if g.index == entry), None)
        else:
            hits = [g for g in gpus if g.uuid and g.uuid.startswith(entry)]
            match = hits[0] if len(hits) == 1 else None  # ambiguous prefixes match nothing
        if match is None or match in seen:
            return seen, [str(e) for e in entries[pos:]]
        seen.append(match)
    return seen, []


def _describe(gpu: S.Gpu) -> str:
    return f"GPU {gpu.index} {gpu.name}" + (f" ({gpu.uuid})" if gpu.uuid else "")


def check_visible_devices(snap: S.Snapshot, table) -> list[Finding]:
    facts = _section(snap, "visible_devices")
    build = torch_build(snap)
    if build is not None and build.kind == "rocm":
        return []  # ROCm reads HIP_/ROCR_VISIBLE_DEVICES first; not modelled here
    gpus = _usable_gpus(snap)
    value = facts.get("CUDA_VISIBLE_DEVICES")
    order = facts.get("CUDA_DEVICE_ORDER")
    mixed = len({g.name for g in gpus}) > 1
    order_note = ""
    if mixed and order != "PCI_BUS_ID":
        order_note = (
            " These GPUs differ, and CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, "
            "so CUDA's indices may not be nvidia-smi's."
        )
    if value is None:
        if mixed and order != "PCI_BUS_ID":
            return [
                Finding(
                    "cuda-device-order-differs",
                    INFO,
                    "cuda:0 may not be nvidia-smi's GPU 0 on this mixed-GPU machine",
                    "CUDA numbers devices fastest first by default, nvidia-smi and NVML by PCI bus, so cuda:N and "
                    "nvidia-smi's GPU N can be different cards. Set CUDA_DEVICE_ORDER=PCI_BUS_ID so both agree.",
                    {"gpus": [_describe(g) for g in gpus], "CUDA_DEVICE_ORDER": order},
                    Fix("Make CUDA number GPUs like nvidia-smi.", ["export CUDA_DEVICE_ORDER=PCI_BUS_ID"]),
                )
            ]
        return []
    parsed = parse_visible_devices(value)
    evidence = {
        "CUDA_VISIBLE_DEVICES": value,
        "parsed": [str(e) for e in parsed["entries"]],
        "CUDA_DEVICE_ORDER": order,
        "gpus": [_describe(g) for g in gpus],
    }
    expect_gpu = bool(gpus) or (build is not None and build.kind == "cuda")
    severity = WARNING if expect_gpu else INFO
    if parsed["duplicate"] is not None:
        unique = list(dict.fromkeys(e.strip() for e in value.split(",")))
        return [
            Finding(
                "cuda-visible-devices-duplicate",
                severity,
                f"CUDA_VISIBLE_DEVICES={value!r} repeats {parsed['duplicate']!r}, which hides every GPU",
                "CUDA (and torch, which parses it the same way) treats a repeated entry as an invalid list and "
                "shows no device at all: torch.cuda.is_available() == False.",
                evidence | {"duplicate": parsed["duplicate"]},
                Fix("List each GPU once.", [f"export CUDA_VISIBLE_DEVICES={shlex.quote(','.join(unique))}"]),
            )
        ]
    shown, unmatched = map_visible_devices(parsed, gpus) if gpus and parsed["kind"] != "mig" else (None, [])
    ignored = [str(e).strip() for e in parsed["ignored"]] + unmatched
    if not parsed["entries"] or shown == []:
        reason = (
            "is empty"
            if not value.strip()
            else f"starts with {ignored[0]!r}, which " + ("matches no GPU" if unmatched else "is not a GPU")
        )
        return [
            Finding(
                "cuda-visible-devices-hides-all",
                severity,
                f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU",
                f"The value {reason}; CUDA stops reading the list at the first entry that is negative, invalid or "
                "matches no device, so torch sees no GPU (torch.cuda.is_available() == False)."
                + (f" This machine has {len(gpus)} GPU(s)." if gpus else ""),
                evidence | {"ignored": ignored},
                Fix(
                    "Unset it, or list the GPUs to use (nvidia-smi -L shows indices and UUIDs).",
                    ["unset CUDA_VISIBLE_DEVICES", "nvidia-smi -L"],
                ),
            )
        ]
    findings = []
    if ignored:
        kept = [str(e) for e in parsed["entries"]][: len(shown) if shown is not None else None]
        findings.append(
            Finding(
                "cuda-visible-devices-no-match",
                WARNING,
                f"CUDA_VISIBLE_DEVICES={value!r}: {', '.join(map(repr, ignored))} ignored",
                f"CUDA stops at the first entry that is invalid, negative or matches no GPU, and drops the rest; torch "
                f"sees only {', '.join(kept)}." + (f" This machine has {len(gpus)} GPU(s)." if gpus else ""),
                evidence | {"ignored": ignored},
                Fix(
                    "List only GPUs that exist (nvidia-smi -L shows indices and UUIDs).",
                    [f"export CUDA_VISIBLE_DEVICES={shlex.quote(','.join(kept))}", "nvidia-smi -L"],
                ),
            )
        )
    if shown and (len(shown) < len(gpus) or [g.index for g in shown] != sorted(g.index for g in shown)):
        mapping = "; ".join(f"cuda:{i} = {_describe(g)}" for i, g in enumerate(shown))
        by_index = parsed["kind"] == "index"
        findings.append(
            Finding(
                "cuda-visible-devices-subset",
                INFO,
                f"torch sees {len(shown)} of {len(gpus)} GPUs: {mapping}",
                f"CUDA_VISIBLE_DEVICES={value!r} selects and orders the GPUs torch sees."
                + (order_note if by_index else ""),
                evidence | {"mapping": mapping},
                Fix(
                    "Set CUDA_DEVICE_ORDER=PCI_BUS_ID so the indices mean nvidia-smi's.",
                    ["export CUDA_DEVICE_ORDER=PCI_BUS_ID"],
                )
                if by_index and order_note
                else None,
            )
        )
    return findings


# --- library shadowing --------------------------------------------------------------------------

# Library family -> the pip distributions that ship it (CUDA 12 names, then CUDA 13 names).
_FAMILY_DISTS = {
    "cudnn": ("nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-cudnn-cu11", "nvidia-cudnn"),
    "cublas": ("nvidia-cublas-cu12", "nvidia-cublas", "nvidia-cublas-cu11"),
    "nvjitlink": ("nvidia-nvjitlink-cu12", "nvidia-nvjitlink"),
    "cudart": ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu11"),
    "nccl": ("nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-nccl-cu11"),
    "cusparse": ("nvidia-cusparse-cu12", "nvidia-cusparse", "nvidia-cusparse-cu11"),
}
# Families whose library version follows torch's CUDA major.minor (cuSPARSE, cuDNN and NCCL do not).
_FOLLOWS_CUDA = ("cudart", "nvjitlink", "cublas")


def expected_lib_versions(snap: S.Snapshot) -> dict[str, tuple[str, str]]:
    """Family -> (version, where it came from) for the libraries the installed torch uses."""
    expected: dict[str, tuple[str, str]] = {}
    dists = _section(snap, "python").get("dists") or []
    for family, names in _FAMILY_DISTS.items():
        for dist in dists:  # sys.path order: the first one is the one imported
            if isinstance(dist, dict) and normalize_name(dist.get("name")) in names and dist.get("version"):
                expected[family] = (str(dist["version"]), f"{dist['name']} {dist['version']}")
                break
    cuda = _torch_cuda(snap)
    if cuda:
        for family in _FOLLOWS_CUDA:
            expected.setdefault(family, (cuda, f"torch's CUDA {cuda}"))
    return expected


def _symptom(family: str, wheel: str, found: str) -> str:
    w, f = _mm(wheel) or (0, 0), _mm(found) or (0, 0)
    if family == "nvjitlink":
        return f"undefined symbol: __nvJitLinkComplete_{w[0]}_{w[1]}, version libnvJitLink.so.{w[0]}"
    if family == "cusparse":
        return f"libcusparse.so.{w[0]}: undefined symbol: __nvJitLinkAddData_{w[0]}_{w[1]}, version libnvJitLink.so.{w[0]}"
    if family == "cudnn":
        return (
            f"cuDNN version incompatibility: PyTorch was compiled  against ({w[0]}, {w[1]}, …) but found runtime "
            f"version ({f[0]}, {f[1]}, …)"
        )
    if family == "cublas":
        return f"libcublas.so.{w[0]}: undefined symbol: cublasLt…, version libcublasLt.so.{w[0]}"
    return f"undefined symbol … lib{family}.so.{w[0]}"


def check_library_shadowing(snap: S.Snapshot, table) -> list[Finding]:
    return _check_ld_library_path(snap) + _check_cuda_home(snap)


def _check_ld_library_path(snap: S.Snapshot) -> list[Finding]:
    libs = _section(snap, "libraries")
    dirs = [d for d in libs.get("dirs") or [] if isinstance(d, dict)]
    if not dirs or not _is_cuda_build(snap):
        return []  # a CPU build loads no CUDA library
    expected = expected_lib_versions(snap)
    offending: list[dict[str, Any]] = []
    for entry in dirs:
        for lib in entry.get("libs") or []:
            family = lib.get("family")
            found = lib.get("real_version") or lib.get("version")
            if family not in expected or not found:
                continue
            wheel, source = expected[family]
            have, want = _mm(found), _mm(wheel)
            # Same major = same soname, so the dynamic loader can pick this file instead of the wheel's.
            # Only an older minor breaks: newer CUDA libraries keep the symbols of older minors
            # (the failures seen are "undefined symbol: __nvJitLinkComplete_12_4" from a 12.1 library).
            if have and want and have[0] == want[0] and None not in (have[1], want[1]) and have[1] < want[1]:
                offending.append(
                    {
                        "dir": entry.get("path"),
                        "file": lib.get("file"),
                        "version": found,
                        "family": family,
                        "wheel_version": wheel,
                        "wheel_source": source,
                    }
                )
    if not offending:
        return []
    windows = snap.host.os == "windows" or libs.get("variable") == "PATH"
    variable = libs.get("variable") or ("PATH" if windows else "LD_LIBRARY_PATH")
    bad_dirs = list(dict.fromkeys(o["dir"] for o in offending))
    keep = [d for d in _split_path(libs.get("value"), windows) if not any(_same_dir(d, b) for b in bad_dirs)]
    symptoms = list(dict.fromkeys(_symptom(o["family"], o["wheel_version"], o["version"]) for o in offending))
    listing = "; ".join(
        f"{o['dir']}/{o['file']} ({_mm_text(o['version'])}, torch's wheel has "
        f"{_mm_text(o['wheel_version'])} from {o['wheel_source']})"
        for o in offending
    )
    runtime_text = f"{snap.runtime.detail} {snap.runtime.stderr_tail}"
    broke = snap.runtime.status in ("import-error", "crashed", "error") and (
        "undefined symbol" in runtime_text or "cuDNN version incompatibility" in runtime_text
    )
    return [
        Finding(
            "library-path-shadows-cuda-libs",
            ERROR if broke else WARNING,
            f"{variable} puts other CUDA library versions ahead of torch's own",
            f"{listing}. The dynamic loader searches {variable} before the wheel's nvidia/*/lib folders for "
            "libraries that torch's libraries load indirectly (cuBLAS loads cuBLASLt, cuSPARSE loads nvJitLink, "
            "cuDNN loads its sub-libraries), so these files can be picked instead. Typical errors: "
            + "; ".join(f'"{s}"' for s in symptoms)
            + ".",
            {"variable": variable, "value": libs.get("value"), "offending": offending},
            Fix(
                f"Take those folders out of {variable} (also where it is set: ~/.bashrc, the module system, the "
                "container image).",
                [_export(variable, keep, windows)],
            ),
        )
    ]


def _check_cuda_home(snap: S.Snapshot) -> list[Finding]:
    home = _section(snap, "cuda_home")
    toolkit, torch_cuda = home.get("version"), _torch_cuda(snap)
    have, want = _mm(toolkit), _mm(torch_cuda)
    if not have or not want or have == want:
        return []
    what = home.get("variable") or "the default toolkit"
    return [
        Finding(
            "cuda-home-version-mismatch",
            INFO,
            f"{what} ({home.get('path')}) is CUDA {_mm_text(toolkit)}, torch was built with CUDA {_mm_text(torch_cuda)}",
            "This matters only when building CUDA extensions (torch.utils.cpp_extension, pip installs that compile): "
            f'"The detected CUDA version ({_mm_text(toolkit)}) mismatches the version that was used to compile PyTorch '
            f'({_mm_text(torch_cuda)}). Please make sure to use the same CUDA versions." (an error when the major '
            "versions differ, a warning otherwise).",
            {"cuda_home": home, "torch.cuda": torch_cuda},
            Fix(
                f"Before building extensions, point CUDA_HOME at a CUDA {_mm_text(torch_cuda)} toolkit.",
                [f"export CUDA_HOME=/usr/local/cuda-{_mm_text(torch_cuda)}"],
            ),
        )
    ]


# --- mixed and duplicate installs ---------------------------------------------------------------

_CONDA_TORCH = ("pytorch", "pytorch-gpu", "pytorch-cpu", "libtorch")
_CONDA_CUDA = ("pytorch-cuda", "cudatoolkit")


def _torch_dists(py: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in py.get("dists") or [] if isinstance(d, dict) and normalize_name(d.get("name")) == "torch"]


def _in_dir(location: Any, directory: Any) -> bool:
    if not location or not directory:
        return False
    loc, base = str(location).rstrip("/\\"), str(directory).rstrip("/\\")
    return loc == base or loc.startswith(base + "/") or loc.startswith(base + "\\")


def check_mixed_installs(snap: S.Snapshot, table) -> list[Finding]:
    py = _section(snap, "python")
    if not py:
        return []
    findings: list[Finding] = []
    torches = _torch_dists(py)
    conda = py.get("conda") if isinstance(py.get("conda"), dict) else {}
    records = [r for r in conda.get("records") or [] if isinstance(r, dict)]
    prefix = conda.get("prefix") or snap.interpreter.prefix
    conda_torch = [r for r in records if normalize_name(r.get("name")) in _CONDA_TORCH]
    conda_cuda = [r for r in records if normalize_name(r.get("name")) in _CONDA_CUDA]
    pip_torch = [d for d in torches if d.get("installer") in ("pip", "uv")]
    reinstall = _install(snap)
    uninstall = Action(UNINSTALL, TORCH_TRIO)

    if conda_torch and pip_torch:
        names = [r["name"] for r in conda_torch + conda_cuda] + [
            r["name"] for r in records if normalize_name(r.get("name")) in ("torchvision", "torchaudio")
        ]
        findings.append(
            Finding(
                "mixed-conda-pip-torch",
                WARNING,
                "torch is installed both by conda and by "
                + "/".join(sorted({d["installer"] for d in pip_torch})),
                f"conda-meta in {prefix} records "
                + ", ".join(f"{r.get('name')} {r.get('version')} ({r.get('build')})" for r in conda_torch)
                + " while the torch dist-info there was written by "
                + pip_torch[0]["installer"]
                + f" (torch {pip_torch[0].get('version')}). The two package managers overwrite each other's files, so "
                "the torch you import can mix both builds. Keep one: the pip wheel (the official conda 'pytorch' channel "
                "stopped at 2.5).",
                {"conda.records": conda_torch + conda_cuda, "dists": pip_torch, "conda.prefix": prefix},
                Fix(
                    "Remove the conda packages, then reinstall the pip wheels so their files are whole again.",
                    actions=[
                        Action(SHELL, text=f"conda remove -p {shlex.quote(str(prefix))} {' '.join(dict.fromkeys(names))}"),
                        uninstall,
                        reinstall,
                    ],
                ),
            )
        )

    user = py.get("user_site") if isinstance(py.get("user_site"), dict) else {}
    user_path = user.get("path") if user.get("enabled") else None
    in_user = [d for d in torches if _in_dir(d.get("location"), user_path)]
    elsewhere = [d for d in torches if d not in in_user]
    listing = "; ".join(
        f"torch {d.get('version')} in {d.get('location')} ({d.get('installer') or 'unknown'})"
        for d in torches
    )
    if in_user and elsewhere:
        findings.append(
            Finding(
                "user-site-torch-shadows",
                WARNING,
                f"a torch in the user site ({user_path}) shadows the environment's own",
                f"{listing}. The user site comes before site-packages on sys.path, so `import torch` loads "
                f"torch {in_user[0].get('version')} from {in_user[0].get('location')}, not the environment's "
                f"torch {elsewhere[0].get('version')}.",
                {"dists": torches, "user_site": user, "torch_origin": py.get("torch_origin")},
                Fix(
                    "Remove the user-site copy (pip removes the first one on sys.path, which is the user site), or "
                    "ignore the user site with PYTHONNOUSERSITE=1.",
                    actions=[uninstall, Action(SHELL, text="export PYTHONNOUSERSITE=1  # alternatively, keep it but ignore it")],
                ),
            )
        )
    elif len(torches) > 1:
        origin = py.get("torch_origin")
        winner = next((d for d in torches if origin and _in_dir(origin, d.get("location"))), torches[0])
        findings.append(
            Finding(
                "duplicate-torch-installs",
                WARNING,
                f"{len(torches)} torch distributions are visible on sys.path",
                f"{listing}. `import torch` loads the one from {winner.get('location')} (torch "
                f"{winner.get('version')}), while pip and importlib.metadata may report another; stale files from the "
                "other copy cause confusing version and import errors.",
                {"dists": torches, "torch_origin": origin},
                Fix(
                    "Uninstall until no torch is left (pip removes one copy per run), then install once.",
                    actions=[uninstall] * len(torches) + [reinstall],
                ),
            )
        )

    torch_cuda = _torch_cuda(snap)
    if conda_cuda and pip_torch and torch_cuda:
        bad = [r for r in conda_cuda if _mm(r.get("version")) and _mm(r.get("version")) != _mm(torch_cuda)]
        if bad:
            findings.append(
                Finding(
                    "conda-cuda-mismatch",
                    WARNING,
                    "conda's "
                    + ", ".join(f"{r['name']} {r.get('version')}" for r in bad)
                    + f" does not match the pip wheel's CUDA {torch_cuda}",
                    "The pip wheel brings its own CUDA libraries (nvidia-* wheels); conda's CUDA packages in the same "
                    "environment put other versions of the same libraries on the library path of this environment.",
                    {"conda.records": bad, "torch.cuda": torch_cuda, "conda.prefix": prefix},
                    Fix(
                        "Remove the conda CUDA packages; the wheel does not need them.",
                        [f"conda remove -p {shlex.quote(str(prefix))} " + " ".join(r["name"] for r in bad)],
                    ),
                )
            )
    return findings


# --- interpreter hygiene ------------------------------------------------------------------------


def check_interpreter_hygiene(snap: S.Snapshot, table) -> list[Finding]:
    interp = snap.interpreter
    if interp.error or not interp.path:
        return []
    findings = []
    evidence = {
        "interpreter.path": interp.path,
        "interpreter.env_kind": interp.env_kind,
        "interpreter.prefix": interp.prefix,
        "interpreter.bits": interp.bits,
    }
    windows = snap.host.os == "windows"
    if interp.bits == 32:
        findings.append(
            Finding(
                "python-32-bit",
                ERROR,
                f"{interp.path} is a 32-bit Python: no torch wheels exist for it",
                'PyTorch publishes 64-bit wheels only; pip answers "Could not find a version that satisfies the '
                'requirement torch (from versions: none)".',
                evidence,
                Fix(
                    "Install a 64-bit Python and create the environment with it.",
                    ["py -3.12-64 -m venv .venv" if windows else "uv venv --python 3.12 .venv"],
                ),
            )
        )
    py = _section(snap, "python")
    if interp.externally_managed and interp.env_kind not in ("venv", "uv-venv", "conda"):
        text = (py.get("externally_managed_text") or "").strip()
        findings.append(
            Finding(
                "externally-managed-python",
                WARNING,
                f"{interp.path} is the system Python, marked EXTERNALLY-MANAGED (PEP 668)",
                'pip refuses to install into it ("error: externally-managed-environment"), and forcing it with '
                "--break-system-packages can break the distribution's own tools. Use a virtual environment."
                + (f" The distribution says: {text.splitlines()[0][:200]}" if text else ""),
                evidence,
                Fix(
                    "Create a virtual environment and install torch there (Debian/Ubuntu may need "
                    "`sudo apt install python3-venv` first).",
                    actions=[_install(snap, VENV, ".venv")],
                ),
            )
        )
    elif interp.env_kind == "conda-base" or (
        isinstance(py.get("conda"), dict) and py["conda"].get("is_base")
    ):
        mm = ".".join(interp.version.split(".")[:2]) or "3.12"
        findings.append(
            Finding(
                "conda-base-environment",
                WARNING,
                f"the target is conda's base environment ({interp.prefix or interp.path})",
                "Installing torch into base ties it to conda's own dependencies; an upgrade of either can break the "
                "other, and conda refuses to remove packages base needs. Use a separate environment.",
                evidence,
                Fix(
                    "Create an environment for torch and install it there.",
                    actions=[
                        Action(SHELL, text=f"conda create -n torch python={mm}"),
                        Action(SHELL, text="conda activate torch"),
                        Action(INSTALL, TORCH_TRIO, _install(snap).variant, python="python"),
                    ],
                ),
            )
        )
    return findings


# --- WSL2 ---------------------------------------------------------------------------------------


def check_wsl(snap: S.Snapshot, table) -> list[Finding]:
    wsl = _section(snap, "wsl")
    if not (wsl.get("is_wsl") or snap.host.wsl):
        return []
    findings = []
    libs = _section(snap, "libraries")
    dirs = [d for d in libs.get("dirs") or [] if isinstance(d, dict)]
    offenders = []
    for entry in dirs:
        if _same_dir(str(entry.get("path")), WSL_LIB_DIR):
            break  # everything after the WSL folder is searched later: harmless
        if entry.get("driver_libs"):
            offenders.append(entry)
    conf_offenders = []
    for conf in wsl.get("ld_so_conf") or []:
        if any(_same_dir(d, WSL_LIB_DIR) for d in conf.get("dirs") or []):
            break
        for directory, names in (conf.get("driver_libs") or {}).items():
            if names:
                conf_offenders.append({"file": conf.get("file"), "dir": directory, "driver_libs": names})
    if offenders or conf_offenders:
        commands = []
        if offenders:
            bad = [e["path"] for e in offenders]
            rest = [
                d
                for d in _split_path(libs.get("value"))
                if not any(_same_dir(d, b) for b in bad) and not _same_dir(d, WSL_LIB_DIR)
            ]
            commands.append(_export("LD_LIBRARY_PATH", [WSL_LIB_DIR] + rest))
        for conf in dict.fromkeys(o["file"] for o in conf_offenders):
            commands.append(f"sudo mv {shlex.quote(conf)} {shlex.quote(conf)}.disabled && sudo ldconfig")
        where = [f"{e['path']} ({', '.join(e['driver_libs'])}) in LD_LIBRARY_PATH" for e in offenders] + [
            f"{o['dir']} ({', '.join(o['driver_libs'])}) from {o['file']}" for o in conf_offenders
        ]
        findings.append(
            Finding(
                "wsl-library-path-order",
                WARNING,
                f"libcuda/libnvidia-ml are found before {WSL_LIB_DIR}",
                "On WSL2 the Windows driver provides libcuda.so and libnvidia-ml.so in /usr/lib/wsl/lib; copies found "
                f"earlier ({'; '.join(where)}) cannot talk to the GPU, so nvidia-smi fails and torch sees no device.",
                {"offending": where, "LD_LIBRARY_PATH": libs.get("value")},
                Fix(f"Put {WSL_LIB_DIR} first.", commands),
            )
        )
    linux_driver = wsl.get("linux_driver") or []
    if linux_driver:
        files = [p for p in linux_driver if ".so." in p]
        commands = [f"sudo apt-get purge $(dpkg -S {shlex.quote(f)} | cut -d: -f1)" for f in files[:1]]
        if any("dkms" in p or "/proc/driver" in p or "/sys/module" in p for p in linux_driver):
            commands.append("dkms status  # then: sudo apt-get purge the nvidia-dkms-* package it names")
        commands.append("sudo ldconfig")
        findings.append(
            Finding(
                "wsl-linux-driver-installed",
                WARNING,
                "a Linux NVIDIA driver is installed inside WSL",
                "Under WSL2 the Windows NVIDIA driver is the driver; NVIDIA's CUDA on WSL guide says not to install a "
                f"Linux display driver in the distribution. Its libraries shadow the ones in {WSL_LIB_DIR} "
                f"and break CUDA. Found: {', '.join(linux_driver)}.",
                {"linux_driver": linux_driver},
                Fix(
                    "Remove the Linux driver packages (keep the CUDA toolkit, if any); update the driver on Windows "
                    "instead.",
                    commands,
                    ["https://docs.nvidia.com/cuda/wsl-user-guide/index.html"],
                ),
            )
        )
    return findings


RULES = [
    Rule(
        "containers",
        "a container that should have a GPU has one",
        check_containers,
        (
            "container-no-gpu-access",
            "nvidia-visible-devices-hides-all",
            "container-missing-compute-capability",
        ),
    ),
    Rule("shm", "/dev/shm is large enough for DataLoader workers", check_shm, ("shm-too-small",)),
    Rule(
        "cpu-quota",
        "the CPU quota matches the CPUs torch sees",
        check_cpu_quota,
        ("cpu-quota-low", "cpu-budget"),
    ),
    Rule(
        "memory",
        "RAM and swap fit the GPUs",
        check_memory,
        ("ram-smaller-than-gpu-memory", "no-swap-small-ram", "low-available-memory"),
    ),
    Rule(
        "visible-devices",
        "CUDA_VISIBLE_DEVICES selects real GPUs",
        check_visible_devices,
        (
            "cuda-visible-devices-hides-all",
            "cuda-visible-devices-duplicate",
            "cuda-visible-devices-no-match",
            "cuda-visible-devices-subset",
            "cuda-device-order-differs",
        ),
    ),
    Rule(
        "library-shadowing",
        "no other CUDA libraries shadow torch's own",
        check_library_shadowing,
        ("library-path-shadows-cuda-libs", "cuda-home-version-mismatch"),
    ),
    Rule(
        "mixed-installs",
        "one torch, installed by one package manager",
        check_mixed_installs,
        (
            "mixed-conda-pip-torch",
            "duplicate-torch-installs",
            "user-site-torch-shadows",
            "conda-cuda-mismatch",
        ),
    ),
    Rule(
        "interpreter-hygiene",
        "the target Python is a 64-bit, user-owned environment",
        check_interpreter_hygiene,
        ("python-32-bit", "externally-managed-python", "conda-base-environment"),
    ),
    Rule(
        "wsl",
        "WSL2 uses the Windows driver's libraries",
        check_wsl,
        ("wsl-library-path-order", "wsl-linux-driver-installed"),
    ),
]
