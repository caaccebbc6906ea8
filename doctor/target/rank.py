"""The per-rank side of `torchdoctor distributed`: runs INSIDE the target interpreter, with torch.

Launched once per rank (``torchrun --nproc-per-node N -m doctor.distributed`` or ``srun python -m
doctor.distributed``; doctor/distributed/entry.py drives the steps). Each rank takes a light snapshot
(rank_snapshot.py), joins a process group with a timeout, checks all_reduce / broadcast / barrier on
known values and times an all_reduce sweep (rank_collectives.py), reads its node's peer access and
NVLink facts (rank_topology.py), and sends its result to rank 0. This module holds what every step
shares: where the rank sits, its state and steps, the store, the test seams and the watchdog.
torch, torch.distributed and pynvml are passed in (tests give stand-ins); these modules import
only each other and the stdlib, and stay Python 3.8 compatible (old torch builds).

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


def seam_for_rank(value: str | None, rank: int) -> str | None:
    """ "1:2.5.1+cpu" -> "2.5.1+cpu" for rank 1, None for the others; "1" -> "" for rank 1."""
    if not value:
        return None
    who, _, what = value.partition(":")
    try:
        return what if int(who) == rank else None
    except ValueError:
        return None


def maybe_die(seams: dict[str, str], rank: int, stage: str) -> None:
    wanted = seam_for_rank(seams.get(EXIT_RANK_SEAM), rank)
    if wanted is not None and (wanted or "before-collectives") == stage:
        os._exit(SEAM_EXIT_CODE)  # a crash: no cleanup, nothing published



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
            {"name": name, "status": "failed", "seconds": round(seconds, 4), "message": exception_text(exc)}
        )
        state.error = {"stage": name, "type": type(exc).__name__, "message": exception_text(exc)}
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
            info[key] = json.loads(as_text(store.get(full)))
        except Exception:
            continue
    return info


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


def as_text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def exception_text(exc: BaseException, limit: int = 2000) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text[:limit]
