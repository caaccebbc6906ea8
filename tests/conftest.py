import os
import sys

# tests import their helpers (factory, fakeenv, realtorch) as plain modules
sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402


def _throwaway_xdg(tmp_path_factory, variable: str):
    """Point an XDG folder variable at a fresh temporary folder for the session, then put it back."""
    folder = tmp_path_factory.mktemp(variable.lower().replace("_home", "").replace("_", "-"))
    previous = os.environ.get(variable)
    os.environ[variable] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop(variable, None)
    else:
        os.environ[variable] = previous


@pytest.fixture(autouse=True, scope="session")
def _state_folder(tmp_path_factory):
    """`fix` keeps restore files and locks in the user's state folder (doctor/fix/state.py): in tests, a
    throw-away one, inherited by every CLI the tests start (unless a test sets its own)."""
    yield from _throwaway_xdg(tmp_path_factory, "XDG_STATE_HOME")


@pytest.fixture(autouse=True, scope="session")
def _cache_folder(tmp_path_factory):
    """The user's cache folder, where tools the tests start (pip) keep theirs: in tests, a throw-away one, so
    no test reads or fills the real ~/.cache (unless a test sets its own)."""
    yield from _throwaway_xdg(tmp_path_factory, "XDG_CACHE_HOME")
