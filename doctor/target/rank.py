"""The per-rank side of `torchdoctor distributed`: runs INSIDE the target interpreter, with torch.

Launched once per rank (``torchrun --nproc-per-node N -m doctor.distributed.core`` or ``srun python -m
doctor.distributed.core``). Each rank takes a light snapshot, joins a process group with a timeout,
checks all_reduce / broadcast / barrier on known values, times an all_reduce sweep, and sends its
result to rank 0. torch, torch.distributed and pynvml are passed in (tests give stand-ins);
nothing here imports typer or rich, and the code stays Python 3.8 compatible (old torch builds).

Every rank also publishes its progress to the rendezvous store (``hello/R``, ``stage/R``,
``error/R``, ``result/R``), which survives a broken process group: that is how rank 0 names a
rank that died or never arrived, even when no collective works any more.

Test seams (honoured only so that tests can stage a bad rank; a report says when one was active):
  TORCHDOCTOR_TEST_FAKE_TORCH_VERSION_RANK=R:VERSION   rank R reports torch VERSION
  TORCHDOCTOR_TEST_EXIT_RANK=R[:STAGE]                 rank R dies (os._exit(17)) at STAGE:
                                                       "before-rendezvous" or "before-collectives"
"""

from __future__ import annotations

import json
import os
import platform
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

FAKE_VERSION_SEAM = "TORCHDOCTOR_TEST_FAKE_TORCH_VERSION_RANK"
EXIT_RANK_SEAM = "TORCHDOCTOR_TEST_EXIT_RANK"
SEAM_EXIT_CODE = 17
DEFAULT_PORT = 29500

# all_reduce sweep sizes in bytes: tiny on CPU/Gloo (a check, not a benchmark), NCCL-sized on GPUs.
GLOO_SIZES = (4 << 10, 256 << 10, 1 << 20)
NCCL_SIZES = (1 << 20, 16 << 20, 128 << 20)

# NVML topology levels (nvmlGpuTopologyLevel_t), named the way `nvidia-smi topo -m` names them.
TOPOLOGY_LEVELS = {0: "SAME-BOARD", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


# --- where this rank sits ------------------------------------------------------------------------


@dataclass
class RankEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = DEFAULT_PORT
    launcher: str = "single"  # "torchrun", "slurm", "env", "single"
    agent_store: bool = False  # torchrun's agent hosts the store: every rank is a client
    store_prefix: str = "torchdoctor"
    error: str | None = None  # the variables are inconsistent: why


def read_rank_env(env: dict[str, str]) -> RankEnv:
    """Rank, world size and rendezvous address from torchrun's variables, else Slurm's."""
    renv = RankEnv()
    try:
        if env.get("RANK") is not None and env.get("WORLD_SIZE") is not None:
            renv.rank = int(env["RANK"])
            renv.world_size = int(env["WORLD_SIZE"])
            renv.local_rank = int(env.get("LOCAL_RANK", "0"))
            renv.launcher = "torchrun" if env.get("TORCHELASTIC_RUN_ID") else "env"
        elif env.get("SLURM_PROCID") is not None and env.get("SLURM_NTASKS") is not None:
            renv.rank = int(env["SLURM_PROCID"])
            renv.world_size = int(env["SLURM_NTASKS"])
            renv.local_rank = int(env.get("SLURM_LOCALID", "0"))
            renv.launcher = "slurm"
        port = env.get("MASTER_PORT")
        renv.master_port = int(port) if port else DEFAULT_PORT
    except ValueError as exc:
        renv.error = f"bad rank variable: {exc}"
        return renv
    addr = env.get("MASTER_ADDR")
    if not addr and renv.launcher == "slurm":
        addr = first_slurm_host(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "")
    renv.master_addr = addr or "127.0.0.1"
    if renv.world_size > 1 and not addr:
        renv.error = "MASTER_ADDR is not set (export the address of the node that runs rank 0)"
    if not 0 <= renv.rank < max(renv.world_size, 1):
        renv.error = f"rank {renv.rank} is outside the world size {renv.world_size}"
    renv.agent_store = env.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    run_id = env.get("TORCHELASTIC_RUN_ID") or env.get("SLURM_JOB_ID", "") + "." + env.get(
        "SLURM_STEP_ID", ""
    )
    renv.store_prefix = "torchdoctor/{}/{}".format(
        run_id.strip("."), env.get("TORCHELASTIC_RESTART_COUNT", "0")
    )
    return renv


def first_slurm_host(nodelist: str) -> str:
    """The first host of a Slurm node list: "gpu[07-09,12],cpu01" -> "gpu07"."""
    nodelist = nodelist.strip()
    if not nodelist:
        return ""
    head = nodelist.split(",", 1)[0] if "[" not in nodelist.split(",", 1)[0] else nodelist
    if "[" not in head:
        return head
    prefix, _, rest = head.partition("[")
    first = rest.split("]", 1)[0].split(",", 1)[0].split("-", 1)[0]
    return prefix + first


# --- test seams ------------------------------------------------------------------------------------


def read_seams(env: dict[str, str]) -> dict[str, str]:
    return {k: env[k] for k in (FAKE_VERSION_SEAM, EXIT_RANK_SEAM) if env.get(k)}


def _seam_for_rank(value: str | None, rank: int) -> str | None:
    """ "1:2.5.1+cpu" -> "2.5.1+cpu" for rank 1, None for the others; "1" -> "" for rank 1."""
    if not value:
        return None
    who, _, what = value.partition(":")
    try:
        return what if int(who) == rank else None
    except ValueError:
        return None


def maybe_die(seams: dict[str, str], rank: int, stage: str) -> None:
    wanted = _seam_for_rank(seams.get(EXIT_RANK_SEAM), rank)
    if wanted is not None and (wanted or "before-collectives") == stage:
        os._exit(SEAM_EXIT_CODE)  # a crash: no cleanup, nothing published


# --- the light snapshot ----------------------------------------------------------------------------


def read_driver_version(nvml: Any = None, sys_root: str = "/") -> tuple[str | None, str]:
    """(driver version, source): NVML when it loads, else /sys/module/nvidia/version."""
    if nvml is not None:
        try:
            nvml.nvmlInit()
            try:
                return _text(nvml.nvmlSystemGetDriverVersion()), "nvml"
            finally:
                nvml.nvmlShutdown()
        except Exception as exc:  # NVMLError_*, missing library: fall through to sysfs
            why = f"nvml: {exc}"
        else:  # pragma: no cover - the try returns
            why = ""
    else:
        why = "nvml: not importable"
    try:
        with open(os.path.join(sys_root, "sys/module/nvidia/version")) as fh:
            return fh.read().strip() or None, "/sys/module/nvidia/version"
    except OSError:
        return None, why + "; /sys/module/nvidia/version: absent"


def light_snapshot(torch: Any, rank: int, local_rank: int, seams: dict[str, str], nvml: Any = None) -> dict:
    """What every rank reports about itself; cheap (no device work beyond naming the device)."""
    snap = {
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "python": platform.python_version(),
        "torch_version": str(torch.__version__),
        "cuda_version": getattr(torch.version, "cuda", None),
        "hip_version": getattr(torch.version, "hip", None),
        "nccl_version": None,
        "cuda_available": False,
        "device_count": 0,
        "device": None,
        "driver_version": None,
        "driver_source": "",
    }
    fake = _seam_for_rank(seams.get(FAKE_VERSION_SEAM), rank)
    if fake:
        snap["torch_version"] = fake
    try:
        snap["cuda_available"] = bool(torch.cuda.is_available())
        snap["device_count"] = int(torch.cuda.device_count()) if snap["cuda_available"] else 0
    except Exception as exc:
        snap["cuda_error"] = _first_line(exc)
    if snap["cuda_available"] and snap["device_count"]:
        index = local_rank % snap["device_count"]
        try:
            props = torch.cuda.get_device_properties(index)
            snap["device"] = {
                "index": index,
                "name": props.name,
                "capability": f"{props.major}.{props.minor}",
                "total_memory_mib": int(props.total_memory) // (1 << 20),
            }
        except Exception as exc:
            snap["device"] = {"index": index, "error": _first_line(exc)}
    if snap["cuda_version"]:
        snap["nccl_version"] = read_nccl_version(torch)
    if snap["cuda_version"] or snap["cuda_available"]:
        snap["driver_version"], snap["driver_source"] = read_driver_version(nvml)
    return snap


def read_nccl_version(torch: Any) -> str | None:
    """torch.cuda.nccl.version(): a tuple (2, 21, 5) in torch >= 1.13, an int 2708 before."""
    try:
        version = torch.cuda.nccl.version()
    except Exception:
        return None
    if isinstance(version, (tuple, list)):
        return ".".join(str(part) for part in version)
    if isinstance(version, int):  # NCCL_VERSION_CODE: 2708 or 21903
        if version >= 10000:
            return f"{version // 10000}.{version // 100 % 100}.{version % 100}"
        return f"{version // 1000}.{version // 100 % 10}.{version % 100}"
    return str(version)


# --- peer access and NVML topology (one multi-GPU node) ---------------------------------------------


def peer_access_matrix(torch: Any) -> list[list[bool | None]]:
    """matrix[i][j]: torch.cuda.can_device_access_peer(i, j); None on the diagonal or on error."""
    count = int(torch.cuda.device_count())
    matrix: list[list[bool | None]] = []
    for i in range(count):
        row: list[bool | None] = []
        for j in range(count):
            if i == j:
                row.append(None)
                continue
            try:
                row.append(bool(torch.cuda.can_device_access_peer(i, j)))
            except Exception:
                row.append(None)
        matrix.append(row)
    return matrix


def _torch_pci_ids(torch: Any) -> list[tuple[int, int, int] | None]:
    """(domain, bus, device) per torch device index, to map torch's order onto NVML's."""
    ids: list[tuple[int, int, int] | None] = []
    for i in range(int(torch.cuda.device_count())):
        try:
            props = torch.cuda.get_device_properties(i)
            ids.append((int(props.pci_domain_id), int(props.pci_bus_id), int(props.pci_device_id)))
        except Exception:  # older torch: no pci_* on the properties
            ids.append(None)
    return ids


def nvml_topology(nvml: Any, torch_pci: list[tuple[int, int, int] | None]) -> dict:
    """Per pair of torch devices: "NVLINK" (any active link between them) or the PCIe level."""
    topo: dict = {"links": {}, "mapping": "pci", "error": None}
    try:
        nvml.nvmlInit()
    except Exception as exc:
        topo["error"] = f"nvml: {exc}"
        return topo
    try:
        handles = _handles_in_torch_order(nvml, torch_pci, topo)
        bus_of = {}
        for index, handle in enumerate(handles):
            bus_of[_normal_bus_id(nvml.nvmlDeviceGetPciInfo(handle).busId)] = index
        nvlinks = set()
        for i, handle in enumerate(handles):
            for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
                try:
                    if nvml.nvmlDeviceGetNvLinkState(handle, link) != getattr(
                        nvml, "NVML_FEATURE_ENABLED", 1
                    ):
                        continue
                    remote = _normal_bus_id(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)
                except Exception:  # NotSupported (no NVLink on this GPU), InvalidArgument past the last link
                    continue
                j = bus_of.get(remote)
                if j is not None and j != i:  # a remote NVSwitch is not a GPU: no direct pair
                    nvlinks.add((min(i, j), max(i, j)))
        for i in range(len(handles)):
            for j in range(i + 1, len(handles)):
                if (i, j) in nvlinks:
                    kind = "NVLINK"
                else:
                    try:
                        level = nvml.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j])
                        kind = TOPOLOGY_LEVELS.get(int(level), f"LEVEL-{level}")
                    except Exception as exc:
                        kind = f"unknown ({exc})"
                topo["links"][f"{i}-{j}"] = kind
    except Exception as exc:
        topo["error"] = f"nvml: {exc}"
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass
    return topo


def _handles_in_torch_order(nvml: Any, torch_pci: list, topo: dict) -> list:
    count = int(nvml.nvmlDeviceGetCount())
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    by_pci = {}
    for handle in handles:
        info = nvml.nvmlDeviceGetPciInfo(handle)
        by_pci[(int(info.domain), int(info.bus), int(info.device))] = handle
    if torch_pci and all(pci in by_pci for pci in torch_pci):
        return [by_pci[pci] for pci in torch_pci]
    # No PCI ids from torch: assume the same order (true with CUDA_DEVICE_ORDER=PCI_BUS_ID and no
    # CUDA_VISIBLE_DEVICES); say so in the facts.
    topo["mapping"] = "assumed-same-order"
    return handles[: len(torch_pci)] if torch_pci else handles


def _normal_bus_id(bus_id: Any) -> str:
    """ "00000000:01:00.0" (NVML) and "0000:01:00.0" (legacy, sysfs) -> the same key."""
    text = _text(bus_id).strip().lower()
    parts = text.split(":")
    if len(parts) == 3:
        try:
            return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
        except ValueError:
            pass
    return text


def node_topology(torch: Any, nvml: Any) -> dict | None:
    """Peer access and NVML links for this node's GPUs; None with fewer than two GPUs."""
    try:
        if not torch.cuda.is_available() or int(torch.cuda.device_count()) < 2:
            return None
        result = {"peer_access": peer_access_matrix(torch), "nvml": None}
        if nvml is None:
            result["nvml"] = {"links": {}, "mapping": "", "error": "nvml: not importable"}
        else:
            result["nvml"] = nvml_topology(nvml, _torch_pci_ids(torch))
        return result
    except Exception as exc:
        return {"peer_access": [], "nvml": None, "error": _first_line(exc)}


# --- the checks ------------------------------------------------------------------------------------


@dataclass
class RankState:
    """What this rank did so far; the watchdog reads it when the rank has to stop early."""

    env: RankEnv
    snapshot: dict = field(default_factory=dict)
    steps: list = field(default_factory=list)
    bandwidth: list = field(default_factory=list)
    topology: dict | None = None
    backend: str = ""
    started: float = field(default_factory=time.monotonic)
    stage: str = "start"
    error: dict | None = None
    store: Any = None

    def result(self) -> dict:
        return {
            "rank": self.env.rank,
            "local_rank": self.env.local_rank,
            "node": self.snapshot.get("hostname") or socket.gethostname(),
            "status": "failed" if self.error else "ok",
            "stage": self.stage,
            "backend": self.backend,
            "snapshot": self.snapshot,
            "steps": list(self.steps),
            "bandwidth": list(self.bandwidth),
            "topology": self.topology,
            "error": self.error,
            "seconds": round(time.monotonic() - self.started, 3),
        }


def run_step(state: RankState, name: str, func: Any) -> Any:
    """Run one check, time it, record it; a failure is recorded with its text, then re-raised."""
    state.stage = name
    publish(state, "stage", progress(state, name))
    start = time.perf_counter()
    try:
        value = func()
    except Exception as exc:
        seconds = time.perf_counter() - start
        state.steps.append(
            {"name": name, "status": "failed", "seconds": round(seconds, 4), "message": _text_of(exc)}
        )
        state.error = {"stage": name, "type": type(exc).__name__, "message": _text_of(exc)}
        publish(state, "error", state.error)
        raise
    state.steps.append(
        {"name": name, "status": "ok", "seconds": round(time.perf_counter() - start, 4), "message": ""}
    )
    publish(state, "stage", progress(state, ""))
    return value


def progress(state: RankState, current: str) -> dict:
    """What the store says about a rank in flight: the step it is in and the steps it passed."""
    return {"current": current, "completed": [s["name"] for s in state.steps if s["status"] == "ok"]}


def publish(state: RankState, key: str, value: Any) -> None:
    """Best effort: put this rank's progress in the store (it outlives a broken process group)."""
    if state.store is None:
        return
    try:
        state.store.set(f"{key}/{state.env.rank}", json.dumps(value, default=str))
    except Exception:
        pass


def connect_store(dist: Any, renv: RankEnv, timeout_s: float) -> Any:
    """The rendezvous store: a client of torchrun's agent store, else hosted by rank 0."""
    is_master = renv.rank == 0 and not renv.agent_store
    kwargs = {"timeout": timedelta(seconds=timeout_s), "wait_for_workers": False}
    try:
        store = dist.TCPStore(renv.master_addr, renv.master_port, renv.world_size, is_master, **kwargs)
    except TypeError:  # torch < 1.10 has no wait_for_workers
        kwargs.pop("wait_for_workers")
        store = dist.TCPStore(renv.master_addr, renv.master_port, renv.world_size, is_master, **kwargs)
    return dist.PrefixStore(renv.store_prefix, store)


def wait_for_ranks(store: Any, world_size: int, timeout_s: float, poll_s: float = 0.05) -> list[int]:
    """Wait until every rank said hello; return the ranks that did not within timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        missing = [r for r in range(world_size) if not _store_has(store, f"hello/{r}")]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(poll_s)


def _store_has(store: Any, key: str) -> bool:
    try:
        return bool(store.check([key]))
    except Exception:
        return False


def read_rank_from_store(store: Any, rank: int) -> dict:
    """What rank `rank` published: its result when it finished, else hello/stage/error."""
    info: dict = {"rank": rank}
    for key in ("result", "hello", "stage", "error"):
        full = f"{key}/{rank}"
        if not _store_has(store, full):
            continue
        try:
            info[key] = json.loads(_text(store.get(full)))
        except Exception:
            continue
    return info


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
        message = f"gather_object failed ({_first_line(exc)}); results read from the store"
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


# --- the watchdog: a rank never hangs the check ------------------------------------------------------


class Watchdog:
    """Ends the rank at the deadline or on SIGTERM (torchrun stops the others when one rank dies).

    Python runs signal handlers only in the main thread, which may sit inside a C++ collective; so
    SIGTERM is blocked in every thread and this thread takes it with sigtimedwait. `on_fire(reason)`
    runs at most once, then the process exits with `exit_code`.
    """

    def __init__(self, deadline_s: float, on_fire: Any, exit_code: int = 1):
        self.deadline_s = deadline_s
        self.on_fire = on_fire
        self.exit_code = exit_code
        self.lock = threading.Lock()
        self.done = False
        self._thread = threading.Thread(target=self._watch, name="torchdoctor-watchdog", daemon=True)

    def start(self) -> Watchdog:
        import signal

        self._signals = {signal.SIGTERM}
        if hasattr(signal, "pthread_sigmask") and hasattr(signal, "sigtimedwait"):
            signal.pthread_sigmask(signal.SIG_BLOCK, self._signals)  # before torch starts its threads
        self._thread.start()
        return self

    def finish(self) -> bool:
        """The main thread is about to write its own result: True when the watchdog has not fired."""
        with self.lock:
            if self.done:
                return False
            self.done = True
            return True

    def _watch(self) -> None:
        import signal

        deadline = time.monotonic() + self.deadline_s
        reason = ""
        while not reason:
            left = deadline - time.monotonic()
            if left <= 0:
                reason = f"deadline of {self.deadline_s:.0f}s reached"
                break
            if hasattr(signal, "sigtimedwait"):
                got = signal.sigtimedwait(self._signals, min(left, 1.0))
                if got is not None:
                    reason = "stopped by the launcher (SIGTERM)"
            else:  # macOS: no sigtimedwait; the deadline still holds
                time.sleep(min(left, 1.0))
            with self.lock:
                if self.done:
                    return
        with self.lock:
            if self.done:
                return
            self.done = True
        try:
            self.on_fire(reason)
        except BaseException as exc:  # the report could not be written: say why, still exit
            import sys

            print(f"torchdoctor distributed: {reason} ({type(exc).__name__}: {exc})", file=sys.stderr)
        finally:
            os._exit(self.exit_code)


# --- helpers ---------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _text_of(exc: BaseException, limit: int = 2000) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text[:limit]
