"""The wheel choice (doctor/compat/wheels.py) across many machines made from one real report (drivers, GPU
models and counts, torch builds; tests/mutated_reports.py) and mixed-GPU machines: a machine with its GPUs
counted and repeated gets what one with each capability once does, and each release's best wheel keeps the
installed variant first when it fits."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from mutated_reports import GPUS, mutate

from doctor.app.diagnose import enrich
from doctor.compat import wheels
from doctor.compat.builds import torch_build
from doctor.inputs.reports import read_report
from doctor.table.load import load_table

ROOT = Path(__file__).resolve().parents[1]


def machines(table):
    base = json.loads((ROOT / "tests" / "golden" / "rtx5090-cu126.json").read_text())
    for i in range(0, 700, 3):
        report = mutate(base, i)
        host = report["snapshot"]["host"]
        host["os"], host["machine"] = (
            ("windows", "x86_64") if i % 7 == 0 else ("linux", "aarch64" if i % 5 == 0 else "x86_64")
        )
        report["snapshot"]["interpreter"]["version"] = ("3.12.1", "3.9.7", "3.14.0", "3.10.2")[i % 4]
        if i % 2:  # mixed models on one machine
            for k, gpu in enumerate(report["snapshot"]["nvidia"]["gpus"]):
                gpu["name"], gpu["compute_capability"]["value"] = GPUS[(i + 3 * k) % len(GPUS)]
        snap, _ = read_report(json.dumps(report), f"r{i}.json")
        enrich(snap, table)
        build = torch_build(snap)
        yield wheels.machine_from_snapshot(snap, build, table.accelerators), build.version if build else None


ASKED = [None, "==2.9.0", ">=2.12", "<2.6"]


@pytest.fixture(scope="module")
def table():
    return load_table()


def answers(table, machine, installed):
    out = [wheels.choose(table, machine, installed, wanted=w) for w in ASKED]
    out.append(wheels.choose(table, machine, None))
    out += [wheels.choose(table, machine, None, ccs=(cc,)) for cc in machine.gpu_ccs]
    out.append(wheels.choose(table, replace(machine, python=None, free_threaded=False), None))
    return out


def test_how_many_gpus_does_not_change_the_choice(table):
    for machine, installed in list(machines(table))[:60]:
        many = replace(
            machine, gpu_ccs=machine.gpu_ccs * 3 + machine.gpu_ccs[:1], gpu_count=machine.gpu_count * 3 + 1
        )
        once = answers(table, machine, installed)
        assert answers(table, many, installed)[:5] == once[:5]


def test_best_in_release_keeps_the_installed_variant_first_when_it_fits(table):
    machine, _ = next(machines(table))
    release = table.release("2.9.0")
    patch = release.latest
    for variant in ("cu126", "cu128", "cu130", "cpu", None):
        m = replace(machine, installed_variant=variant)
        best = wheels.best_in_release(table, release, patch, m)
        fits = [wheels.fit(table, release, patch, v, m)
                for v in wheels.wanted_variants(release, m, table.accelerators)]
        ranked = wheels.rank_fits([f for f in fits if f.runs], variant)
        assert best == (ranked[0] if ranked else None)
