"""Where `fix` keeps its state and how it writes there: the restore files and the lock on an environment.

- The state folder is the user's, never the working directory (`fix --yes` run from an empty folder
  leaves it empty): ``$XDG_STATE_HOME/torchdoctor`` (an absolute XDG_STATE_HOME only, as the XDG spec
  says), else ``~/.local/state/torchdoctor``; macOS ``~/Library/Application Support/torchdoctor``;
  Windows ``%LOCALAPPDATA%\\torchdoctor``. Restore files go to its ``restore/`` folder.
- A restore file is created, never written over: ``O_CREAT | O_EXCL`` (which also refuses a symlink,
  dangling or not) and ``O_NOFOLLOW``, mode 0600; a name that exists gets a ``-2``, ``-3``... suffix when
  torchdoctor chose it, and is refused (one line, exit 2) when the user did (``--restore-file``).
- The lock is an advisory ``flock`` (Windows: ``msvcrt.locking``) on ``<prefix>/.torchdoctor-fix.lock`` in the
  environment itself, held for the whole fix: a second `fix` on the same environment refuses at once with
  the first one's pid, whoever runs it, with whatever $HOME, by whatever path (a symlink, a bind mount: the
  lock is on the file, so on the environment's own inode). An environment where that file cannot be
  created (not writable) is refused. The kernel drops the lock when its holder dies, SIGKILL included.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
from pathlib import Path

from doctor import exitcodes
from doctor.errors import DoctorError

APP = "torchdoctor"
LOCK_NAME = ".torchdoctor-fix.lock"


def state_dir(env: dict | None = None, platform: str | None = None) -> Path:
    """The user's state folder for torchdoctor (module docstring); not created here."""
    env = os.environ if env is None else env
    platform = platform or sys.platform
    home = Path(env.get("HOME") or env.get("USERPROFILE") or os.path.expanduser("~"))
    if platform == "win32":
        base = env.get("LOCALAPPDATA") or str(home / "AppData" / "Local")
        return Path(base) / APP
    if platform == "darwin":
        return home / "Library" / "Application Support" / APP
    xdg = env.get("XDG_STATE_HOME") or ""
    return (Path(xdg) if os.path.isabs(xdg) else home / ".local" / "state") / APP


def _folder(env: dict | None, name: str) -> Path:
    folder = state_dir(env) / name
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise DoctorError(
            f"cannot create torchdoctor's state folder {folder}: {exc.strerror or exc}; "
            "set XDG_STATE_HOME to a writable folder, or pass --restore-file PATH",
            exitcodes.FIX_FAILED,
        ) from exc
    return folder


def default_restore_path(env: dict | None, now: _dt.datetime) -> Path:
    """restore/torchdoctor-restore-<UTC time>-<pid>.txt in the state folder (created when written)."""
    name = f"torchdoctor-restore-{now.strftime('%Y%m%dT%H%M%SZ')}-{os.getpid()}.txt"
    return state_dir(env) / "restore" / name


def create_file(path: Path, text: str, chosen_by_user: bool) -> Path:
    """Create ``path`` with ``text``, never over an existing file or through a symlink. A name torchdoctor
    chose gets a numbered suffix when taken; one the user chose is refused. Returns the path written."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    if not chosen_by_user:
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:
            pass  # the open below says why
    candidate = path
    for attempt in range(2, 100):
        try:
            fd = os.open(candidate, flags, 0o600)
            break
        except FileExistsError:
            if chosen_by_user:
                raise DoctorError(
                    f"--restore-file {path} exists: torchdoctor never writes over a file; give a new name",
                    exitcodes.USAGE,
                ) from None
            candidate = path.with_name(f"{path.stem}-{attempt}{path.suffix}")
        except OSError as exc:
            raise DoctorError(
                f"cannot write the restore file {candidate}: {exc.strerror or exc}; pass --restore-file PATH",
                exitcodes.FIX_FAILED,
            ) from exc
    else:
        raise DoctorError(f"cannot find a free name for the restore file beside {path}", exitcodes.FIX_FAILED)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return candidate


def refuse_existing(path: Path | None) -> None:
    """--restore-file naming something that exists (a symlink too): refused before anything is probed."""
    if path is not None and os.path.lexists(path):
        raise DoctorError(
            f"--restore-file {path} exists: torchdoctor never writes over a file; give a new name",
            exitcodes.USAGE,
        )


class EnvironmentLock:
    """Held while one fix changes one environment (module docstring). Use as a context manager."""

    def __init__(self, prefix: str, env: dict | None = None):
        self.prefix = prefix
        folder = prefix if os.path.isdir(prefix or "") else os.path.dirname(os.path.dirname(prefix or ""))
        self.path = Path(folder or ".") / LOCK_NAME
        self.fd: int | None = None

    def __enter__(self) -> EnvironmentLock:
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.path, flags, 0o644)
        except OSError as exc:
            raise DoctorError(
                f"cannot lock {self.prefix} for the fix: {self.path}: {exc.strerror or exc}; fix keeps its lock "
                "in the environment it changes, and changes only one it can write to (run it as the "
                "environment's owner)",
                exitcodes.REFUSED,
            ) from None
        try:
            _lock(fd)
        except OSError:
            holder = _read_holder(fd)
            os.close(fd)
            raise DoctorError(
                f"another torchdoctor fix{f' (pid {holder})' if holder else ''} is changing {self.prefix}: "
                "wait for it to finish, then run fix again",
                exitcodes.REFUSED,
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            except OSError:
                pass
            os.close(self.fd)  # closing drops the lock (the file stays: removing it would race a waiting fix)
            self.fd = None


def _lock(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _read_holder(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 32).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text.isdigit() else ""
