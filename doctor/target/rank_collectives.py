"""The collectives every rank checks: process group, all_reduce / broadcast / barrier on known
values, an all_reduce bandwidth sweep, and gathering every rank's result at rank 0.

Runs INSIDE the target interpreter (Python 3.8+, stdlib only; torch and torch.distributed are
passed in, tests give stand-ins).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from doctor.target.rank import RankState, first_line

# all_reduce sweep sizes in bytes: tiny on CPU/Gloo (a check, not a benchmark), NCCL-sized on GPUs.
GLOO_SIZES = (4 << 10, 256 << 10, 1 << 20)
NCCL_SIZES = (1 << 20, 16 << 20, 128 << 20)


def choose_backend(torch: Any, dist: Any, wanted: str = "auto") -> str:
    if wanted and wanted != "auto":
        return wanted
    try:
        if torch.cuda.is_available() and dist.is_nccl_available():
            return "nccl"
    except Exception:
        pass
    return "gloo"


def init_group(torch: Any, dist: Any, state: RankState, store: Any, timeout_s: float) -> None:
    kwargs = {
        "backend": state.backend,
        "store": dist.PrefixStore("pg", store),
        "rank": state.env.rank,
        "world_size": state.env.world_size,
        "timeout": timedelta(seconds=timeout_s),
    }
    if state.backend == "nccl":
        torch.cuda.set_device(_device_index(torch, state.env.local_rank))
    dist.init_process_group(**kwargs)


def _device_index(torch: Any, local_rank: int) -> int:
    count = int(torch.cuda.device_count()) or 1
    return local_rank % count


def device_for(torch: Any, state: RankState) -> Any:
    if state.backend == "nccl":
        return torch.device("cuda", _device_index(torch, state.env.local_rank))
    return torch.device("cpu")


def check_all_reduce(torch: Any, dist: Any, device: Any, rank: int, world: int) -> None:
    """Rank r sends arange(n) + r; the sum is known exactly: world*arange(n) + world(world-1)/2."""
    n = 16
    tensor = torch.arange(n, dtype=torch.float32, device=device) + rank
    dist.all_reduce(tensor)
    got = [float(x) for x in tensor.cpu().tolist()]
    want = [float(world * i + world * (world - 1) // 2) for i in range(n)]
    if got != want:
        raise WrongResult(f"all_reduce returned {got[:4]} where {want[:4]} was expected")


def check_broadcast(torch: Any, dist: Any, device: Any, rank: int) -> None:
    n = 16
    if rank == 0:
        tensor = torch.arange(n, dtype=torch.float32, device=device) * 7
    else:
        tensor = torch.zeros(n, dtype=torch.float32, device=device)
    dist.broadcast(tensor, src=0)
    got = [float(x) for x in tensor.cpu().tolist()]
    want = [float(7 * i) for i in range(n)]
    if got != want:
        raise WrongResult(f"broadcast from rank 0 arrived as {got[:4]} where {want[:4]} was expected")


def check_barrier(dist: Any, backend: str, timeout_s: float, device_index: int = 0) -> None:
    if backend == "gloo" and hasattr(dist, "monitored_barrier"):
        # rank 0 names every rank that does not arrive in time ("Ranks 1, 2 failed to pass ...")
        dist.monitored_barrier(timeout=timedelta(seconds=timeout_s), wait_all_ranks=True)
    elif backend == "nccl":
        dist.barrier(device_ids=[device_index])
    else:
        dist.barrier()


def sweep_all_reduce(
    torch: Any, dist: Any, device: Any, sizes: tuple, world: int, iters: int = 5, warmup: int = 1
) -> list[dict]:
    """all_reduce timing per size; bus bandwidth as nccl-tests defines it: algbw * 2(n-1)/n."""
    synchronize = _synchronizer(torch, device)
    rows = []
    for nbytes in sizes:
        tensor = torch.ones(max(int(nbytes) // 4, 1), dtype=torch.float32, device=device)
        for _ in range(warmup):
            dist.all_reduce(tensor)
        synchronize()
        if getattr(device, "type", "cpu") == "cuda":
            dist.barrier(device_ids=[device.index])
        else:
            dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(tensor)
        synchronize()
        seconds = (time.perf_counter() - start) / max(iters, 1)
        rows.append(bandwidth_row(int(tensor.numel()) * 4, seconds, world))
    return rows


def bandwidth_row(nbytes: int, seconds: float, world: int) -> dict:
    algbw = nbytes / seconds / 1e9 if seconds > 0 else 0.0
    busbw = algbw * 2 * (world - 1) / world if world > 0 else 0.0
    return {"bytes": nbytes, "seconds": seconds, "algbw_gbps": algbw, "busbw_gbps": busbw}


def _synchronizer(torch: Any, device: Any) -> Any:
    if getattr(device, "type", "cpu") == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def gather_results(dist: Any, state: RankState) -> list | None:
    """Every rank's result at rank 0 (gather_object); None elsewhere, and None when it fails.

    Object collectives unpickle through ``tensor.numpy()`` (torch 2.13 ``_tensor_to_object``), so
    they fail where numpy is not installed: torch does not require it. Every rank has already put
    its result in the store, so rank 0 then reads them from there; the step says which path ran.
    """
    start = time.perf_counter()
    mine = state.result()
    out = [None] * state.env.world_size if state.env.rank == 0 else None
    try:
        dist.gather_object(mine, out, dst=0)
    except Exception as exc:
        message = f"gather_object failed ({first_line(exc)}); results read from the store"
        state.steps.append(
            {
                "name": "gather",
                "status": "fallback",
                "seconds": round(time.perf_counter() - start, 4),
                "message": message,
            }
        )
        return None
    state.steps.append(
        {"name": "gather", "status": "ok", "seconds": round(time.perf_counter() - start, 4), "message": ""}
    )
    return out


class WrongResult(Exception):
    """A collective completed but returned the wrong values."""
