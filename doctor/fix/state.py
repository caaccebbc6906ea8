"""Where `fix` keeps its state and how it writes there: the restore files and the lock on an environment.

- The state folder is the user's, never the working directory (`fix --yes` run from an empty folder
  leaves it empty): ``$XDG_STATE_HOME/torchdoctor`` (an absolute XDG_STATE_HOME only, as the XDG spec
  says), else ``~/.local/state/torchdoctor``; macOS ``~/Library/Application Support/torchdoctor``;
  Windows ``%LOCALAPPDATA%\\torchdoctor``. Restore files go to its ``restore/`` folder.
- A restore file is created, never written over: written whole under a temporary name beside it (mode
  0600, ``O_EXCL | O_NOFOLLOW``), fsynced, then hard-linked to its name (which fails on any existing name, a
  symlink dangling or not); a name that exists gets a ``-2``, ``-3``... suffix when torchdoctor chose it,
  and is refused (one line, exit 2) when the user did (``--restore-file``). A full disk or an unwritable
  folder is one line, exit 2, before anything is installed, and leaves no file behind.
- The lock is an advisory ``flock`` (Windows: ``msvcrt.locking``) on ``<prefix>/.torchdoctor-fix.lock`` in the
  environment itself, held for the whole fix: a second `fix` on the same environment refuses at once with
  the first one's pid, whoever runs it, with whatever $HOME, by whatever path (a symlink, a bind mount: the
  lock is on the file, so on the environment's own inode). An environment where that file cannot be
  created (not writable) is refused. The kernel drops the lock when its holder dies, SIGKILL included.
"""

from __future__ import annotations

import datetime as _dt
import errno
import os
import sys
from collections.abc import Callable
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


def default_restore_path(env: dict | None, now: _dt.datetime) -> Path:
    """restore/torchdoctor-restore-<UTC time>-<pid>.txt in the state folder (created when written)."""
    name = f"torchdoctor-restore-{now.strftime('%Y%m%dT%H%M%SZ')}-{os.getpid()}.txt"
    return state_dir(env) / "restore" / name


def create_file(path: Path, text: str | Callable[[Path], str], chosen_by_user: bool) -> Path:
    """Create ``path`` with ``text`` (or ``text(the path it gets)``: a restore file names itself), never
    over an existing file or through a symlink. A name torchdoctor chose gets a numbered suffix when taken;
    one the user chose is refused. Returns the path written.

    The text goes to a temporary name beside it first, flushed to the disk (fsync), and only a whole file is
    then linked to the name: a full disk or a killed run leaves no empty or cut file under it (which would
    block the name and restore nothing). Any failure is one line, before anything is installed."""
    if not chosen_by_user:
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:
            pass  # writing below says why
    candidate = path
    for attempt in range(2, 100):
        temporary = _write_temporary(path, text(candidate) if callable(text) else text)
        try:
            _publish(temporary, candidate)
            return candidate
        except FileExistsError:
            if chosen_by_user:
                raise DoctorError(
                    f"--restore-file {path} exists: torchdoctor never writes over a file; give a new name",
                    exitcodes.USAGE,
                ) from None
            candidate = path.with_name(f"{path.stem}-{attempt}{path.suffix}")
        except OSError as exc:
            raise _unwritable(candidate, exc) from None
        finally:
            try:
                os.unlink(temporary)
            except OSError:
                pass
    raise DoctorError(f"cannot find a free name for the restore file beside {path}", exitcodes.USAGE)


def _write_temporary(path: Path, text: str) -> str:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    temporary = str(path.with_name(f".{path.name}.{os.getpid()}.tmp"))
    try:
        fd = os.open(temporary, flags, 0o600)
    except OSError as exc:
        raise _unwritable(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8", "surrogateescape"))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise _unwritable(path, exc) from None
    return temporary


def _publish(temporary: str, name: Path) -> None:
    """Give the whole file its name, never over another: a hard link fails when the name exists (symlinks
    included). Where the file system has no hard links, a rename after a check (Windows' rename never
    replaces a file)."""
    try:
        os.link(temporary, name, follow_symlinks=False)
        return
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
    if os.path.lexists(name):
        raise FileExistsError(errno.EEXIST, "exists", str(name))
    os.rename(temporary, name)


def _unwritable(path: Path, exc: OSError) -> DoctorError:
    return DoctorError(
        f"cannot write the restore file {path}: {exc.strerror or exc}; nothing was changed. Free some space "
        "or pass --restore-file PATH on another disk",
        exitcodes.USAGE,
    )


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
        # the environment's prefix; without one, the folder above the python's bin/ (plan.python)
        folder = prefix if not os.path.isfile(prefix or "") else os.path.dirname(os.path.dirname(prefix))
        self.path = Path(folder or ".") / LOCK_NAME
        self.fd: int | None = None

    def __enter__(self) -> EnvironmentLock:
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.path, flags, 0o644)
        except OSError as exc:
            raise DoctorError(
                f"cannot lock {self.prefix} for the fix: {self.path}: {exc.strerror or exc}; fix keeps its "
                "lock in the environment it changes, and changes only one it can write to (run it as the "
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
