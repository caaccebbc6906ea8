"""The rank entry point: ``torchrun ... -m doctor.distributed`` / ``srun python -m doctor.distributed``.

Each rank checks itself and the collectives (doctor/target/rank*.py); rank 0 gathers every rank's
result, builds the report (doctor/distributed/report.py) and writes it as JSON or text
(doctor/render/distributed.py). Everything here runs in the target interpreter next to torch: stdlib
only at import time (torch is imported in ``main``), Python 3.8 compatible, no typer, no rich.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

from doctor import exitcodes
from doctor.distributed.failures import HINTS, classify_failure, first_lines, ranks_text
from doctor.distributed.fixes import commands_from_env
from doctor.distributed.launch import DEFAULT_TIMEOUT_S
from doctor.distributed.report import build_report, missing_entry
from doctor.render.distributed import render_text
from doctor.target import rank as rank_side
from doctor.target import rank_collectives as collectives
from doctor.target.rank_snapshot import light_snapshot
from doctor.target.rank_topology import node_topology


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m doctor.distributed",
        description="Check torch.distributed across the ranks of a job (run under torchrun or srun).",
    )
    parser.add_argument("--json", action="store_true", help="rank 0 writes JSON instead of text")
    parser.add_argument("-o", "--output", help="rank 0 writes the report to this file (default: stdout)")
    parser.add_argument("--backend", default="auto", help="auto (NCCL on CUDA, else Gloo), nccl or gloo")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds for rendezvous and each collective"
    )
    parser.add_argument(
        "--deadline", type=float, default=None, help="seconds before a rank gives up (default 4x timeout)"
    )
    parser.add_argument(
        "--sizes", default="", help="all_reduce sweep sizes, e.g. 1K,1M,64M (default by backend)"
    )
    parser.add_argument("--iters", type=int, default=5, help="timed all_reduce iterations per size")
    parser.add_argument("--no-topology", action="store_true", help="skip the peer-access / NVLink facts")
    return parser.parse_args(argv)


def parse_sizes(text: str) -> tuple:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    sizes = []
    for part in text.split(","):
        part = part.strip().upper().rstrip("B").rstrip("I")
        if not part:
            continue
        match = re.fullmatch(r"(\d+)([KMG]?)", part)
        if not match:
            raise ValueError(f"bad size {part!r} (use e.g. 4K, 1M, 64M)")
        sizes.append(int(match.group(1)) * units[match.group(2)])
    return tuple(sizes)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        sizes = parse_sizes(args.sizes)
    except ValueError as exc:
        print(f"torchdoctor distributed: {exc}", file=sys.stderr)
        return exitcodes.USAGE
    env = dict(os.environ)
    renv = rank_side.read_rank_env(env)
    if renv.error:
        print(f"torchdoctor distributed: {renv.error}", file=sys.stderr)
        return exitcodes.USAGE
    seams = rank_side.read_seams(env)
    state = rank_side.RankState(env=renv)
    deadline = args.deadline or 4 * args.timeout
    watchdog = rank_side.Watchdog(deadline, lambda reason: _give_up(state, args, seams, reason)).start()
    rank_side.maybe_die(seams, renv.rank, "before-rendezvous")
    try:
        import torch
        import torch.distributed as dist
    except Exception as exc:  # ImportError, or a broken torch raising anything at import
        print(f"torchdoctor distributed: import torch failed: {exc}", file=sys.stderr)
        return exitcodes.REQUIREMENT
    return run_rank(torch, dist, _import_nvml(), state, args, sizes, seams, watchdog)


def run_rank(
    torch: Any,
    dist: Any,
    nvml: Any,
    state: Any,
    args: argparse.Namespace,
    sizes: tuple,
    seams: dict,
    watchdog: Any,
) -> int:
    """One rank's whole check; rank 0 also writes the report. torch/dist/nvml may be stand-ins."""
    renv = state.env
    rank, world = renv.rank, renv.world_size
    results = None
    try:
        state.snapshot = rank_side.run_step(
            state, "snapshot", lambda: light_snapshot(torch, rank, renv.local_rank, seams, nvml)
        )
        state.backend = collectives.choose_backend(torch, dist, args.backend)
        state.store = rank_side.run_step(
            state, "rendezvous", lambda: rank_side.connect_store(dist, renv, args.timeout)
        )
        rank_side.publish(state, "hello", state.snapshot)
        if rank == 0:
            missing = rank_side.wait_for_ranks(state.store, world, args.timeout)
            if missing:
                raise RankMissing(missing)
        rank_side.run_step(
            state,
            "init_process_group",
            lambda: collectives.init_group(torch, dist, state, state.store, args.timeout),
        )
        rank_side.maybe_die(seams, rank, "before-collectives")
        device = collectives.device_for(torch, state)
        rank_side.run_step(
            state, "all_reduce", lambda: collectives.check_all_reduce(torch, dist, device, rank, world)
        )
        rank_side.run_step(state, "broadcast", lambda: collectives.check_broadcast(torch, dist, device, rank))
        rank_side.run_step(
            state,
            "barrier",
            lambda: collectives.check_barrier(
                dist, state.backend, args.timeout, getattr(device, "index", 0) or 0
            ),
        )
        sweep = sizes or (collectives.NCCL_SIZES if state.backend == "nccl" else collectives.GLOO_SIZES)
        state.bandwidth = rank_side.run_step(
            state,
            "bandwidth",
            lambda: collectives.sweep_all_reduce(torch, dist, device, sweep, world, iters=args.iters),
        )
        if renv.local_rank == 0 and not args.no_topology:
            state.topology = node_topology(torch, nvml)
        state.stage = "gather"
        rank_side.publish(state, "result", state.result())
        results = collectives.gather_results(dist, state)
    except RankMissing as exc:
        state.stage = "rendezvous"
        results = [state.result()] + [
            _entry_from_published(
                r, rank_side.read_rank_from_store(state.store, r), arrived=r not in exc.ranks
            )
            for r in range(1, world)
        ]
    except Exception:
        pass  # run_step recorded it in state.error
    if not watchdog.finish():
        _wait_for_watchdog()
    if rank != 0:
        if state.error:
            kind = classify_failure(state.error["message"], state.error["type"])
            print(
                "torchdoctor distributed: rank {}: {} failed: {} ({}rank 0 writes the report)".format(
                    rank, state.error["stage"], first_lines(state.error["message"], 1), HINTS.get(kind, "")
                ),
                file=sys.stderr,
            )
            return exitcodes.FINDINGS
        _destroy(dist)
        return exitcodes.OK
    if results is None:  # rank 0 failed, or gather_object did: read what the others published
        import time

        # One shared grace period for all ranks, not one per rank: 64 silent ranks must not take minutes.
        deadline = time.monotonic() + min(args.timeout, 5.0)
        results = [state.result()] + [
            _entry_from_published(r, _collect(state.store, r, deadline)) for r in range(1, world)
        ]
    report = build_report(
        [r for r in results if r],
        world,
        state.backend,
        renv.launcher,
        f"{renv.master_addr}:{renv.master_port}",
        args.timeout,
        seams,
        note="; ".join(step["message"] for step in state.steps if step.get("status") == "fallback"),
        commands=commands_from_env(os.environ),
    )
    _write(report, args)
    if not state.error:
        _destroy(dist)
    return report["summary"]["exit_code"]


def _wait_for_watchdog() -> None:
    """The watchdog fired first: it writes the report and ends the process; don't race it."""
    import time

    while True:
        time.sleep(60)


class RankMissing(Exception):
    def __init__(self, ranks: list[int]):
        super().__init__(f"{ranks_text(ranks)} did not reach the rendezvous")
        self.ranks = ranks


def _entry_from_published(rank: int, published: dict | None, arrived: bool = False) -> dict:
    published = published or {}
    if published.get("result"):
        return published["result"]
    entry = missing_entry(rank, published)
    if arrived and entry["status"] == "missing":
        entry["status"] = "waiting"  # it checked in; the job could not start without the missing ranks
    return entry


def _collect(store: Any, rank: int, deadline: float) -> dict:
    """Give a failing rank until ``deadline`` (time.monotonic) to publish its own error, then read what it
    left."""
    import time

    if store is None:
        return {}
    while True:
        published = rank_side.read_rank_from_store(store, rank)
        if published.get("result") or published.get("error") or time.monotonic() >= deadline:
            return published
        time.sleep(0.1)


def _give_up(state: Any, args: argparse.Namespace, seams: dict, reason: str) -> None:
    """Called by the watchdog thread: report what is known, without touching collectives."""
    renv = state.env
    if state.error is None:
        state.error = {
            "stage": state.stage,
            "type": "Timeout",
            "message": f"{reason} during {state.stage}",
        }
        rank_side.publish(state, "error", state.error)
    if renv.rank != 0:
        print(
            "torchdoctor distributed: rank {}: {}".format(renv.rank, state.error["message"]), file=sys.stderr
        )
        return
    if state.store is not None:
        try:
            from datetime import timedelta

            state.store.set_timeout(timedelta(seconds=2))
        except Exception:
            pass
    results = [state.result()] + [
        _entry_from_published(
            r, rank_side.read_rank_from_store(state.store, r) if state.store is not None else {}
        )
        for r in range(1, renv.world_size)
    ]
    report = build_report(
        results,
        renv.world_size,
        state.backend,
        renv.launcher,
        f"{renv.master_addr}:{renv.master_port}",
        args.timeout,
        seams,
        note=reason,
        commands=commands_from_env(os.environ),
    )
    _write(report, args)


def _write(report: dict, args: argparse.Namespace) -> None:
    text = json.dumps(report, indent=2, default=str) + "\n" if args.json else render_text(report)
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, args.output)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _destroy(dist: Any) -> None:
    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:
        pass


def _import_nvml() -> Any:
    try:
        import pynvml

        return pynvml
    except Exception:
        return None
