"""Reports of many machines made from one real report: another driver, GPU set and torch build each.

Used where a property must hold across many machines (the wheel choice, report copies, the snapshot
reader)."""

from __future__ import annotations

import copy

DRIVERS = ["535.183.01", "550.54.15", "560.35.03", "570.124.06", "575.57.08", "580.65.06", "470.256.02"]
GPUS = [
    ("NVIDIA H100 80GB HBM3", "9.0"),
    ("NVIDIA A100-SXM4-80GB", "8.0"),
    ("Tesla V100-SXM2-32GB", "7.0"),
    ("NVIDIA GeForce RTX 4090", "8.9"),
    ("NVIDIA GeForce RTX 5090", "12.0"),
    ("Tesla P100-PCIE-16GB", "6.0"),
    ("NVIDIA B200", "10.0"),
    ("Tesla K80", "3.7"),
]
TORCH_BUILDS = ["2.13.0+cpu", "2.13.0+cu128", "2.12.1+cu126", "2.9.0+cu130", "2.5.1+cu118", "2.6.0+cu124"]


def mutate(base: dict, i: int) -> dict:
    """Report number ``i``: the real report with another driver, GPU set and torch build."""
    report = copy.deepcopy(base)
    snap = report["snapshot"]
    driver = DRIVERS[i % len(DRIVERS)]
    name, cc = GPUS[(i // len(DRIVERS)) % len(GPUS)]
    build = TORCH_BUILDS[(i // 3) % len(TORCH_BUILDS)]
    nv = snap["nvidia"]
    fact = {"value": None, "source": "", "why": None}
    nv.update(
        status="ok",
        detail="",
        attempts=["nvml: ok"],
        driver_version=dict(fact, value=driver, source="nvml"),
        cuda_driver_version={"value": None, "source": "", "why": "left to the table"},
    )
    nv["gpus"] = [
        {
            "index": k,
            "name": name,
            "uuid": f"GPU-{i:08d}-{k}",
            "pci_bus_id": f"0000:{k:02x}:00.0",
            "compute_capability": dict(fact, value=cc, source="nvml"),
            "memory_total_mib": 81559,
        }
        for k in range(1 + i % 4)
    ]
    torch = (snap.get("install") or {}).get("torch")
    if torch:
        local = build.split("+")[1]
        cuda = None if local == "cpu" else f"{int(local[2:-1])}.{local[-1]}"
        torch.update(version=build, build_version=build, cuda=cuda, has_libtorch_cuda=cuda is not None)
    snap["collected_at"] = f"2026-01-01T00:{(i // 60) % 60:02d}:{i % 60:02d}+00:00"
    return report
