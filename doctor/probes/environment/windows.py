"""Windows settings that decide whether torch installs, read from the registry with ``winreg``.

``LongPathsEnabled`` (HKLM\\SYSTEM\\CurrentControlSet\\Control\\FileSystem): without it, paths longer than
260 characters fail, and torch's wheels hold deep ones (pip: "[Errno 2] No such file or directory", with
its hint "This error might have occurred since this system does not have Windows Long Path support
enabled"). Tests pass a fake ``winreg`` module: there is no Windows machine to read.
"""

from __future__ import annotations

from doctor.model.environment import WindowsFacts

FILESYSTEM_KEY = r"SYSTEM\CurrentControlSet\Control\FileSystem"
LONG_PATHS_VALUE = "LongPathsEnabled"


def probe_windows(winreg=None) -> WindowsFacts:
    """The Windows facts; ``winreg``: the module to read the registry with (the real one by default)."""
    if winreg is None:
        try:
            import winreg  # Windows only
        except ImportError:
            return WindowsFacts(why="winreg is not available (not Windows)")
    try:
        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, FILESYSTEM_KEY) as key:
            value, _kind = winreg.QueryValueEx(key, LONG_PATHS_VALUE)
    except FileNotFoundError:
        return WindowsFacts(long_paths_enabled=False)  # the value absent: the default, disabled
    except OSError as exc:
        return WindowsFacts(why=f"HKLM\\{FILESYSTEM_KEY}\\{LONG_PATHS_VALUE} could not be read: {exc}")
    if not isinstance(value, int):
        return WindowsFacts(why=f"{LONG_PATHS_VALUE} is not a number: {value!r}")
    return WindowsFacts(long_paths_enabled=value == 1)
