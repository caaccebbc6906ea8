"""The hostile suite's fixtures: the shared fake machine, and the corpus runner.

Each corpus case is one CLI run of about a second, and some hostile ones are stopped only by their time
limit; run one after another they would take minutes on two cores. ``corpus`` therefore starts the runs
of every *selected* case (after -k / deselection) on a few worker threads as soon as the first test asks,
in test order, and each test waits for its own. The runs are independent (own folders, own marker
variables), so this is safe; the assertions stay in the tests.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from cases import Case, Ctx  # noqa: E402
from hostile import World, base_env, build_world, run_cli  # noqa: E402

_SELECTED = pytest.StashKey[list]()
WORKERS = int(os.environ.get("HOSTILE_WORKERS", "6"))


def pytest_configure(config):
    config.addinivalue_line("markers", "hostile: hostile inputs and interruptions (tests/hostile/README.md)")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    selected = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if isinstance(params.get("case"), Case):
            selected.append(params["case"])
    config.stash[_SELECTED] = selected


@pytest.fixture(scope="session")
def world(tmp_path_factory) -> World:
    return build_world(tmp_path_factory.mktemp("hostile-world"))


class Corpus:
    def __init__(self, world: World, root: Path, selected: list[Case]):
        self.world, self.root, self.selected = world, root, selected
        self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="hostile")
        self.futures: dict[str, Future] = {}

    def result(self, case: Case):
        if not self.futures:
            # The ones with a time bound of their own are the slow hostile ones: start those first.
            for c in sorted(self.selected, key=lambda c: c.max_seconds is None):
                self.futures[c.name] = self.pool.submit(self.run, c)
        if case.name not in self.futures:
            self.futures[case.name] = self.pool.submit(self.run, case)
        return self.futures[case.name].result()

    def run(self, case: Case):
        tmp = self.root / case.name
        tmp.mkdir(parents=True)
        ctx = Ctx(self.world, tmp, base_env(self.world), tmp)
        try:
            args = case.build(ctx)
        except BaseException as exc:  # pytest.skip included: re-raised in the test's own thread
            return ctx, exc
        outcome = run_cli(args, ctx.env, cwd=ctx.cwd, limit=case.limit, stdin=ctx.stdin, settle=case.settle)
        return ctx, outcome

    def close(self):
        for future in self.futures.values():
            future.cancel()
        self.pool.shutdown(wait=True)


@pytest.fixture(scope="session")
def corpus(request, world, tmp_path_factory):
    runner = Corpus(world, tmp_path_factory.mktemp("hostile-cases"), request.config.stash.get(_SELECTED, []))
    yield runner
    runner.close()
