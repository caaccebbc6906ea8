"""The GPU code last read from a library, kept while the library is the same file.

Reading torch's ``libtorch_cuda.so`` (doctor/probes/kernels.py: ~3000 header reads of a 500 MB file) costs
~8 ms alone on a warm page cache and ~45 ms on a cold one; inside a check, where it shares the interpreter
lock with the other probes, a second ``check --no-smoke --json`` on a CUDA machine took ~35 ms longer than
on a CPU one. What the reader finds depends only on the file's bytes, so it is kept in the user's cache
folder (doctor/probes/cache.py) under a **key** of everything it rests on, and used only while all of it
is unchanged:

- the library's real path and its ``stat``: mtime and ctime in ns, size, inode, device (pip replaces the file:
  a new inode; anything that writes to it changes its ctime, which no one can set back);
- the reader's code (kernels.py and binaries.py: size and mtime), torchdoctor's version, the cache format.

Not kept: a read that did not finish with an answer ("unknown": unreadable, timed out, a reader bug), a
library that changed while it was read, or within ``RACY_SECONDS`` before (a ``pip install`` writing it
beside us could have been half seen: the next run reads it again). A missing, corrupt or foreign entry is a
miss and a fresh read, never a wrong list. ``--no-cache`` / ``TORCHDOCTOR_NO_CACHE=1`` bypass it. A hit gives
the recorded answer as it was, ``seconds`` included (how long that read took).
"""

from __future__ import annotations

import os
import time

from doctor import __version__
from doctor.probes.cache import file_signature as _signature
from doctor.probes.cache import read_keyed_entry, write_keyed_entry

FORMAT = 1
FOLDER = "kernels"
RACY_SECONDS = 2.0
KEPT = ("ok", "no-gpu-code")  # finished reads; "unknown" and "absent" are worked out again
_READER = ("kernels.py", "binaries.py")  # the code the answer came from, beside this file


class KernelCache:
    """Answers of the kernel reader under ``folder`` (the user's cache folder)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = os.path.join(os.fspath(folder), FOLDER)

    def key(self, path: str | os.PathLike, what: str) -> dict | None:
        """What the answer for ``path`` rests on (module docstring); None when the file cannot be stat'ed."""
        real = os.path.realpath(path)
        library = _signature(real)
        if library is None:
            return None
        here = os.path.dirname(os.path.abspath(__file__))
        reader = [[name] + (_signature(os.path.join(here, name)) or [])[:3:2] for name in _READER]
        return {"format": FORMAT, "tool": __version__, "reader": reader, "what": what, "path": real,
                "library": library}

    def lookup(self, key: dict | None):
        """The BinaryKernels recorded under ``key``, or None."""
        if key is None:
            return None
        entry = read_keyed_entry(self.folder, key)  # a corrupt or foreign entry is a miss: the fresh read replaces it
        return _kernels(entry.get("kernels")) if entry is not None else None

    def store(self, key: dict | None, kernels, started: float) -> bool:
        """Record ``kernels`` (read from the file ``key`` describes) when it can be trusted: a finished read of a
        file that did not change while it was read, nor within RACY_SECONDS before ``started`` (time.time())."""
        if key is None or kernels.status not in KEPT:
            return False
        now = _signature(key["path"])
        if now != key["library"] or max(now[0], now[1]) >= int((started - RACY_SECONDS) * 1e9):
            return False
        from doctor.model.snapshot import as_plain

        return write_keyed_entry(self.folder, key, {"kernels": as_plain(kernels), "stored": time.time()})


# BinaryKernels' fields and the JSON types each may hold (checked here rather than by the snapshot reader, whose
# type resolution imports typing: ~5 ms of a check that this cache saves ~25 ms of).
_FIELDS = {"status": (str,), "why": (str, type(None)), "path": (str,), "sm": list, "ptx": list, "partial": list,
           "containers": (int,), "needed": list, "seconds": (int, float, type(None))}


def _kernels(data):
    """A BinaryKernels from an entry's plain dict, or None unless every field is there with its type."""
    if not isinstance(data, dict) or set(data) != set(_FIELDS):
        return None
    for name, types in _FIELDS.items():
        value = data[name]
        if types is list:
            if type(value) is not list or any(type(item) is not str for item in value):
                return None
        elif type(value) not in types:
            return None
    if data["status"] not in KEPT:
        return None
    from doctor.model.snapshot import BinaryKernels

    return BinaryKernels(**data)
