"""The hostile suite's fixtures: the shared fake machine, and one scheduler for every expensive run.

Each corpus case is a CLI run of about a second; some hostile ones end only at their time limit; the
orphan scenarios wait on real time limits; the interrupted fixes run real pip. One after another that is
minutes on two cores. So the first test that asks for ``jobs`` starts the runs of every *selected* test
(after -k and deselection) of every module that defines ``hostile_jobs(jobs, items)``: runs that mostly
wait go to a wide pool, the others to a pool of a few workers. Each test then waits for its own run and
asserts on it. The runs are independent (own folders, own marker variables), so overlapping them is safe.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hostile import World, build_world  # noqa: E402

_SELECTED = pytest.StashKey[list]()
CPU_WORKERS = int(os.environ.get("HOSTILE_WORKERS", "4"))
IDLE_WORKERS = 24


def pytest_configure(config):
    config.addinivalue_line("markers", "hostile: hostile inputs and interruptions (tests/hostile/README.md)")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    config.stash[_SELECTED] = list(items)


@pytest.fixture(scope="session")
def world(tmp_path_factory) -> World:
    return build_world(tmp_path_factory.mktemp("hostile-world"))


class Jobs:
    """Keyed runs on three pools: "idle" (runs that mostly wait: hangs, signals, time limits), "cpu", and
    "setup" for what other runs wait on (so a dependency never queues behind the runs waiting for it)."""

    def __init__(self, world: World, tmp_path_factory):
        self.world = world
        self.tmp = tmp_path_factory
        self.pools = {
            "idle": ThreadPoolExecutor(IDLE_WORKERS, thread_name_prefix="hostile-idle"),
            "cpu": ThreadPoolExecutor(CPU_WORKERS, thread_name_prefix="hostile-cpu"),
            "setup": ThreadPoolExecutor(2, thread_name_prefix="hostile-setup"),
        }
        self.futures: dict[object, Future] = {}
        self.lock = threading.Lock()

    def submit(self, key, kind: str, fn) -> Future:
        with self.lock:
            if key not in self.futures:
                self.futures[key] = self.pools[kind].submit(fn)
            return self.futures[key]

    def result(self, key, kind: str | None = None, fn=None):
        """The run's result (its exception re-raised here, pytest.skip included); submitted now if it was
        not (a test run on its own)."""
        if fn is not None:
            self.submit(key, kind or "cpu", fn)
        return self.futures[key].result()

    def close(self) -> None:
        for future in self.futures.values():
            future.cancel()
        for pool in self.pools.values():
            pool.shutdown(wait=True)


@pytest.fixture(scope="session")
def jobs(request, world, tmp_path_factory):
    scheduler = Jobs(world, tmp_path_factory)
    by_module: dict = {}
    # Under pytest-xdist each worker collects every test but runs only some: start nothing ahead there
    # (each test then submits its own run when it asks for it).
    selected = [] if hasattr(request.config, "workerinput") else request.config.stash.get(_SELECTED, [])
    for item in selected:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "hostile_jobs"):
            by_module.setdefault(module, []).append(item)
    # Slowest first: the interrupted fixes (real pip) and the orphans, then the corpus.
    order = {"test_interrupt_fix": 0, "test_orphans": 1}
    for module in sorted(by_module, key=lambda m: order.get(m.__name__, 9)):
        module.hostile_jobs(scheduler, by_module[module])
    yield scheduler
    scheduler.close()
