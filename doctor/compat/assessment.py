"""What the rules and the fix plan know about one machine, derived once per diagnosis (pure).

The installed torch's build and who built it, the facts the wheel choice reads, where a CUDA build's arch list
comes from, the torch asked for, whether this run may change the driver, and the wheel that fits: each is
worked out here once, from the snapshot and the table, and every rule and the plan read it from here.
doctor/app/diagnose.py makes it after the table has filled in what the probes could not tell.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from doctor.compat.accelerators import accelerators
from doctor.compat.builds import Build, torch_build
from doctor.compat.coverage import ArchSource, arch_source
from doctor.compat.distributions import Origin, torch_origin
from doctor.compat.drivers import DriverChange, driver_change
from doctor.compat.forward import ForwardCompatUse, forward_compat_in_use
from doctor.compat.pins import wanted_torch
from doctor.compat.wheels import Choice, Machine, choose, machine_from_snapshot
from doctor.model.snapshot import Snapshot, TorchPin


@dataclass(frozen=True)
class Assessment:
    snap: Snapshot
    table: object  # the CompatTable; None where a rule that reads only the snapshot is judged without one
    build: Build | None  # the installed torch's build; None when torch is not installed or could not be read
    origin: Origin  # who built the installed torch
    machine: Machine  # the facts the wheel choice reads
    wanted: TorchPin | None  # the torch asked for (--torch, [tool.torchdoctor] torch, the project's pins)
    driver_change: DriverChange  # whether this run may change the driver, and why not
    coverage: ArchSource | None  # where a CUDA build's arch list comes from (None: another build, no table)
    choice: Choice | None  # the wheel for this machine, honouring ``wanted`` (None: no table)
    unpinned: Choice | None  # the same, as if no torch were asked for (``choice`` itself when none is)
    # A cuda-compat libcuda the loader picks first (doctor/compat/forward.py); where it works on these GPUs,
    # ``machine`` carries its driver version and CUDA, since that is the driver torch gets.
    forward: ForwardCompatUse | None = None


def assess(snap: Snapshot, table) -> Assessment:
    build = torch_build(snap)
    origin = torch_origin(snap)
    machine = machine_from_snapshot(snap, build, accelerators(table))
    wanted = wanted_torch(snap)
    coverage = choice = unpinned = None
    forward = forward_compat_in_use(snap, table) if table is not None else None
    if forward is not None and forward.effective:
        machine = replace(machine, driver_version=forward.copy.version, driver_max_cuda=forward.max_cuda)
    if table is not None:
        if build is not None and build.kind == "cuda":
            coverage = arch_source(snap, table, build, origin)
        installed = build.version if build is not None else None
        unpinned = choose(table, machine, installed)
        choice = choose(table, machine, installed, wanted=wanted.spec) if wanted is not None else unpinned
    return Assessment(snap, table, build, origin, machine, wanted, driver_change(snap), coverage, choice,
                      unpinned, forward)
