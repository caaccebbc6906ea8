"""Time `fleet summarize` over a generated fleet: 10,000 reports with a few planted odd nodes.

    python benchmarks/fleet_bench.py [--nodes 10000] [--keep DIR]

Each report is built by doctor.model.report.build_report from a real Snapshot (so it has the shape
`torchdoctor check --json` writes), then varied per node. Prints the generation time, the
summarize time and whether exactly the planted nodes came out as odd. tests/test_fleet.py
imports `write_fleet` from here to check correctness on the same fleet (not the time).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from doctor.model.environment import Environment  # noqa: E402
from doctor.model.findings import ERROR, Finding, Fix  # noqa: E402
from doctor.model.report import build_report  # noqa: E402
from doctor.model.snapshot import (  # noqa: E402
    Dist,
    Fact,
    Gpu,
    Nvidia,
    SmokeStep,
    Snapshot,
    TorchInstall,
    TorchRuntime,
)

DRIVER = "570.124.06"
TORCH = "2.13.0+cu128"
GPU = "NVIDIA H100 80GB HBM3"
FIX_COMMAND = "python -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
# The smoke test's time differs on every real node (as do memory, disk and timings): each report here differs
# from the others in it, not only in the host name, so no reader can skip a report as a repeat of another.
RUNTIME_SECONDS = 2.4321

# node index -> what is planted there (and the dimension the summary must flag)
OUTLIERS = {
    137: ("driver", "550.54.15"),
    4242: ("torch_build", "2.12.1+cu126"),
    9001: ("gpu", "NVIDIA A100-SXM4-80GB"),
    7777: ("finding", "torch-cuda-mismatch"),
}


def template_report() -> dict:
    snapshot = Snapshot(
        tool_version="0.1.0",
        collected_at="2026-11-29T12:00:00Z",
        nvidia=Nvidia(
            status="ok",
            driver_version=Fact(DRIVER, "nvml"),
            cuda_driver_version=Fact("12.8", "nvml"),
            gpus=[
                Gpu(index=i, name=GPU, compute_capability=Fact("9.0", "nvml"), memory_total_mib=81559)
                for i in range(8)
            ],
        ),
        install=TorchInstall(
            status="ok", torch=Dist(name="torch", version=TORCH, build_version=TORCH, cuda="12.8")
        ),
        runtime=TorchRuntime(status="ok", seconds=RUNTIME_SECONDS, torch_version=TORCH, cuda_version="12.8",
                             backend="cuda", cuda_available=True, device_count=8,
                             steps=[SmokeStep("import", "ok", 1.9), SmokeStep("matmul", "ok", 0.012, device=0)]),
        environment=Environment(hostname="node00000"),
    )
    table = {"version": "2026.11.29", "verified_on": "2026-11-29", "path": "builtin"}
    return build_report(snapshot, table, [], [], {"status": "nothing-to-do", "steps": []}, 0)


def node_seconds(index: int) -> float:
    return round(RUNTIME_SECONDS + index / 100_000, 5)


def node_report(template: dict, index: int) -> dict:
    report = copy.deepcopy(template)
    report["snapshot"]["environment"]["hostname"] = f"node{index:05d}"
    report["snapshot"]["runtime"]["seconds"] = node_seconds(index)
    planted = OUTLIERS.get(index)
    if planted is None:
        return report
    what, value = planted
    if what == "driver":
        report["snapshot"]["nvidia"]["driver_version"]["value"] = value
    elif what == "torch_build":
        report["snapshot"]["install"]["torch"]["build_version"] = value
    elif what == "gpu":
        report["snapshot"]["nvidia"]["gpus"][3]["name"] = value
    elif what == "finding":
        finding = Finding(value, ERROR, "torch's CUDA does not match", fix=Fix("reinstall", [FIX_COMMAND]))
        from dataclasses import asdict

        report["findings"].append(asdict(finding))
        report["plan"] = {
            "status": "planned",
            "steps": [{"kind": "pip", "description": "reinstall", "command": FIX_COMMAND}],
        }
        report["summary"]["errors"] = 1
    return report


def write_fleet(folder: str, nodes: int = 10_000, broken: bool = True) -> set[str]:
    """Write `nodes` reports under folder/rackNN/; return the names of the planted odd nodes."""
    template = template_report()
    plain = json.dumps(template)  # hostname "node00000": healthy nodes differ in the name and the smoke test's time
    assert plain.count(f'"seconds": {RUNTIME_SECONDS}') == 1
    for index in range(nodes):
        rack = os.path.join(folder, f"rack{index // 500:02d}")
        os.makedirs(rack, exist_ok=True)
        if index in OUTLIERS:
            text = json.dumps(node_report(template, index))
        else:
            text = plain.replace('"hostname": "node00000"', f'"hostname": "node{index:05d}"').replace(
                f'"seconds": {RUNTIME_SECONDS}', f'"seconds": {node_seconds(index)}')
        with open(os.path.join(rack, f"node{index:05d}.json"), "w") as fh:
            fh.write(text)
    if broken:  # one truncated upload: must be listed as unreadable, not crash the run
        with open(os.path.join(folder, "rack00", "truncated.json"), "w") as fh:
            fh.write('{"report_schema_version": 1, "snapsh')
    return {f"node{i:05d}" for i in OUTLIERS if i < nodes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--keep", help="write the fleet here and keep it")
    args = parser.parse_args(argv)
    folder = args.keep or tempfile.mkdtemp(prefix="torchdoctor-fleet-")
    try:
        start = time.perf_counter()
        planted = write_fleet(folder, args.nodes)
        generated = time.perf_counter() - start
        from doctor.app.fleet import summarize_paths

        start = time.perf_counter()
        summary = summarize_paths([folder])
        seconds = time.perf_counter() - start
        found = {odd["node"] for odd in summary.odd}
        print(f"generated {args.nodes} reports in {generated:.2f}s")
        print(
            f"fleet summarize: {len(summary.nodes)} nodes, {len(summary.unreadable)} unreadable in {seconds:.2f}s"
        )
        print(f"odd nodes: {sorted(found)}; planted: {sorted(planted)}; exact match: {found == planted}")
        return 0 if found == planted else 1
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
