import os
import sys

# tests import their helpers (factory, fakeenv, realtorch) as plain modules
sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _state_folder(tmp_path_factory):
    """`fix` keeps restore files and locks in the user's state folder (doctor/fix/state.py): in tests, a
    throw-away one, inherited by every CLI the tests start (unless a test sets its own)."""
    folder = tmp_path_factory.mktemp("xdg-state")
    previous = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = previous


@pytest.fixture(autouse=True, scope="session")
def _cache_folder(tmp_path_factory):
    """What the target interpreter said is cached in the user's cache folder (doctor/probes/inspection_cache.py):
    in tests, a throw-away one, so no test reads or fills the real ~/.cache (unless a test sets its own)."""
    folder = tmp_path_factory.mktemp("xdg-cache")
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous
