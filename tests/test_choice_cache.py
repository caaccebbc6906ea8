"""The wheel choice's lookups are cached by the facts they read (doctor/compat/wheels.py): the GPUs'
capabilities, the driver, the platform, the Python, the installed build. Across the benchmark's mutated
reports (drivers, GPU models and counts, torch builds) and mixed-GPU machines, a warm cache must answer
exactly what a cold one does for each machine alone, and a machine with its GPUs counted and repeated what one
with each capability once does."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from doctor.app.diagnose import enrich
from doctor.compat import wheels
from doctor.compat.builds import torch_build
from doctor.inputs.reports import read_report
from doctor.table.load import load_table

ROOT = Path(__file__).resolve().parents[1]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench", ROOT / "benchmarks" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


bench = load_bench()


def clear() -> None:
    wheels._BEST.clear()
    wheels._usable.cache_clear()


def machines(table):
    base = json.loads((ROOT / "tests" / "golden" / "rtx5090-cu126.json").read_text())
    for i in range(0, 700, 3):
        report = bench.mutate(base, i)
        host = report["snapshot"]["host"]
        host["os"], host["machine"] = ("windows", "x86_64") if i % 7 == 0 else ("linux", "aarch64" if i % 5 == 0 else "x86_64")
        report["snapshot"]["interpreter"]["version"] = ("3.12.1", "3.9.7", "3.14.0", "3.10.2")[i % 4]
        if i % 2:  # mixed models on one machine
            for k, gpu in enumerate(report["snapshot"]["nvidia"]["gpus"]):
                gpu["name"], gpu["compute_capability"]["value"] = bench.GPUS[(i + 3 * k) % len(bench.GPUS)]
        snap, _ = read_report(json.dumps(report), f"r{i}.json")
        enrich(snap, table)
        build = torch_build(snap)
        yield wheels.machine_from_snapshot(snap, build), build.version if build else None


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


def plain_best(table, release, patch, machine, ccs=None, need_driver=True):
    """best_in_release as it was before its cache: every fit worked out, ranked by the installed variant."""
    fits = [wheels.fit(table, release, patch, v, machine, ccs) for v in wheels.wanted_variants(release, machine)]
    good = [f for f in fits if f.gpus_ok and (f.runs or not need_driver or not machine.nvidia_present)]
    ranked = wheels.rank_fits(good, machine.installed_variant)
    return ranked[0] if ranked else None


def plain_usable(table, platform, python, free_threaded, wanted):
    machine = wheels.Machine(platform, "", python, (), 0, False, None, None, None, free_threaded)
    spec = wheels.public_spec(wanted)
    return [(r, p) for r in table.releases if r.variants_for(platform)
            if (p := wheels.usable_patch(r, machine, spec)) is not None]


def test_the_cached_choice_is_the_uncached_one(table, monkeypatch):
    every = list(machines(table))
    clear()
    warm = [answers(table, m, v) for m, v in every]  # one pass, the caches shared by every machine
    monkeypatch.setattr(wheels, "best_in_release", plain_best)
    monkeypatch.setattr(wheels, "_usable", plain_usable)
    for (machine, installed), expected in zip(every, warm, strict=True):
        assert answers(table, machine, installed) == expected


def test_how_many_gpus_does_not_change_the_choice(table):
    for machine, installed in list(machines(table))[:60]:
        many = replace(machine, gpu_ccs=machine.gpu_ccs * 3 + machine.gpu_ccs[:1], gpu_count=machine.gpu_count * 3 + 1)
        clear()
        once = answers(table, machine, installed)
        clear()
        assert answers(table, many, installed)[:5] == once[:5]


def test_best_in_release_keeps_the_installed_variant_first_when_it_fits(table):
    machine, _ = next(machines(table))
    release = table.release("2.9.0")
    patch = release.latest
    clear()
    for variant in ("cu126", "cu128", "cu130", "cpu", None):
        m = replace(machine, installed_variant=variant)
        cached = wheels.best_in_release(table, release, patch, m)
        clear()
        fits = [wheels.fit(table, release, patch, v, m) for v in wheels.wanted_variants(release, m)]
        ranked = wheels.rank_fits([f for f in fits if f.runs], variant)
        assert cached == (ranked[0] if ranked else None)
