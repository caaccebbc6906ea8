"""The GPU code of the installed torch, torchvision and torchaudio, read from their libraries (never
imported).

Where: the folders the inspector reported (``Dist.location``, the site-packages holding the package); for a
conda environment whose torch keeps its C++ libraries in ``<prefix>/lib`` (conda-forge's ``libtorch``), there
too. What: the cubins and PTX of the ``.nv_fatbin`` section (``doctor/probes/kernels.py``) and the CUDA
runtime libraries the ELF file needs (``DT_NEEDED``: ``libcudart.so.12`` says "CUDA 12" for a torchvision
without a ``+cuXXX`` tag). Bounded: each library is read in a daemon thread that is abandoned after
``timeout`` seconds (a hung network file system must not hang the check), and the reading itself only touches
headers. Never raises.
"""

from __future__ import annotations

import os
import re
import threading
import time

from doctor.model.snapshot import BinaryKernels, Dist
from doctor.probes import elf
from doctor.probes.kernels import read_kernels

ABSENT = "absent"
_TORCHAUDIO_LIBS = (
    "lib/libtorchaudio.so",
    "_torchaudio.so",
    "lib/libtorchaudio.pyd",
    "lib/libtorchaudio.dll",
)
_CONDA_LIB_NAMES = ("libtorch_cuda.so", "libtorch_cuda_cu.so")
# The CUDA libraries worth recording from DT_NEEDED (auditwheel may insert a hash:
# "libcudart-1a2b3c4d.so.12").
_CUDA_NEEDED = re.compile(r"^lib(cudart|cublas|cublasLt|cudnn|nvrtc|nvJitLink)\b[^/]*\.so(\.\d+)*$")
_SHT_DYNAMIC = 6
_DT_NULL, _DT_NEEDED = 0, 1
_MAX_DYNAMIC = 1 << 20  # a .dynamic section is a few hundred entries of 16 bytes
_MAX_NAME = 256


# --- which file -------------------------------------------------------------------------------------

# torch 1.x built with BUILD_SPLIT_CUDA ships libtorch_cuda_cu (the .cu kernels) and
# libtorch_cuda_cpp instead of libtorch_cuda (not checked on a real wheel here).
_TORCH_LIBS = ("libtorch_cuda.so", "torch_cuda.dll", "libtorch_cuda_cu.so", "torch_cuda_cu.dll")
_TORCHVISION_LIBS = ("_C.so", "_C.pyd")


# Paths are text here (os.path), as the probes hand them over.


def find_torch_cuda_library(site_packages) -> str | None:
    """``torch/lib/libtorch_cuda.so`` (or ``torch_cuda.dll``) under ``site_packages``, or None
    (a CPU-only torch has none)."""
    lib = os.path.join(os.fspath(site_packages), "torch", "lib")
    return next(
        (os.path.join(lib, name) for name in _TORCH_LIBS if os.path.isfile(os.path.join(lib, name))), None
    )


def find_torchvision_library(site_packages) -> str | None:
    """``torchvision/_C.so`` (or ``_C.pyd``, or an ABI-tagged ``_C.*.so``), or None."""
    folder = os.path.join(os.fspath(site_packages), "torchvision")
    found = next(
        (
            os.path.join(folder, name)
            for name in _TORCHVISION_LIBS
            if os.path.isfile(os.path.join(folder, name))
        ),
        None,
    )
    if found is None and os.path.isdir(folder):
        tagged = sorted(name for name in os.listdir(folder)
                        if name.startswith("_C.") and os.path.splitext(name)[1] in (".so", ".pyd"))
        found = os.path.join(folder, tagged[0]) if tagged else None
    return found


def torch_library(dist: Dist | None, prefix: str | None = None) -> str | None:
    """``torch/lib/libtorch_cuda.so`` (or ``torch_cuda.dll``) of this torch, else
    ``<prefix>/lib/libtorch_cuda.so`` when the environment is a conda one (conda-forge's ``libtorch`` package
    keeps it there)."""
    if dist is None or not dist.location:
        return None
    found = _quiet(lambda: find_torch_cuda_library(dist.location))
    if found is None and prefix and os.path.isdir(os.path.join(prefix, "conda-meta")):
        found = next(
            (
                p
                for p in (os.path.join(prefix, "lib", name) for name in _CONDA_LIB_NAMES)
                if os.path.isfile(p)
            ),
            None,
        )
    return found


def torchvision_library(dist: Dist | None) -> str | None:
    if dist is None or not dist.location:
        return None
    return _quiet(lambda: find_torchvision_library(dist.location))


def torchaudio_library(dist: Dist | None) -> str | None:
    if dist is None or not dist.location:
        return None
    folder = os.path.join(dist.location, "torchaudio")
    return next(
        (os.path.join(folder, rel) for rel in _TORCHAUDIO_LIBS if os.path.isfile(os.path.join(folder, rel))),
        None,
    )


def _quiet(fn):
    try:
        return fn()
    except (OSError, ValueError):
        return None


# --- reading, bounded ---------------------------------------------------------------------------------


def read_binary(path: str | None, what: str) -> BinaryKernels:
    """The GPU code and CUDA runtime needs of one library, or the reason they are unknown; never raises."""
    if path is None:
        return BinaryKernels(status=ABSENT, why=f"no {what} library found")
    try:
        found = read_kernels(path)
        needed = read_cuda_needed(path)
    except Exception as exc:  # noqa: BLE001 - a reader bug becomes a fact, never a crash
        return BinaryKernels(status="unknown", why=f"internal error reading it: {type(exc).__name__}: {exc}",
                             path=str(path))
    return BinaryKernels(
        status=found.status,
        why=found.why,
        path=str(path),
        sm=list(found.sm),
        ptx=list(found.ptx),
        partial=list(found.partial),
        containers=found.containers,
        needed=needed,
        seconds=found.seconds,
    )


def read_cuda_needed(path) -> list[str]:
    """The CUDA libraries an ELF64 little-endian file names in DT_NEEDED ("libcudart.so.12"); [] when there
    are none or the file cannot be read as such. Reads the section headers, the dynamic section and one
    bounded name per entry; never raises."""
    import struct

    try:
        with open(path, "rb") as handle:
            return [name for name in _needed(handle) if _CUDA_NEEDED.match(name)]
    except (OSError, ValueError, struct.error):
        return []


def _needed(handle) -> list[str]:
    """The DT_NEEDED names of the ELF file open in ``handle``: the dynamic section (the first of its type) and
    the name table its sh_link points at (.dynstr). [] when the section headers are unreadable, there is no
    dynamic section, or the file ends inside the table or one of its names (a partial answer is no answer)."""
    import struct

    def read(offset: int, size: int) -> bytes:
        handle.seek(offset)
        return handle.read(size)

    file_size = handle.seek(0, os.SEEK_END)
    try:
        found = elf.sections(read, file_size, named=False)
    except elf.ElfError:
        return []
    dynamic = next((section for section in found if section.type == _SHT_DYNAMIC), None)
    if dynamic is None or dynamic.link >= len(found) or dynamic.size > _MAX_DYNAMIC:
        return []
    strings = found[dynamic.link]
    raw = read(dynamic.offset, dynamic.size)
    names = []
    for at in range(0, len(raw) - 15, 16):
        tag, value = struct.unpack_from("<qQ", raw, at)
        if tag == _DT_NULL:  # ends the table
            break
        if tag == _DT_NEEDED and value < strings.size:
            name = read(strings.offset + value, _MAX_NAME)
            if b"\0" not in name and len(name) < _MAX_NAME:  # the file ends inside it
                return []
            names.append(name.split(b"\0", 1)[0].decode("utf-8", "replace"))
    else:
        if len(raw) < dynamic.size:  # the file ends inside the table, before its DT_NULL
            return []
    return names


class EarlyRead:
    """torch's library read while the inspector still runs: a venv's or conda environment's site-packages sits
    at a fixed place below its python (``<env>/lib/python3.X/site-packages``), so the likely library can be
    read before the inspector says where torch is. On a cold page cache that read waits for the disk (torch
    2.14.1's library is 503 MB); started early, it waits beside the inspector instead of after it. Its result
    is used only when the inspector's library is the same file (device, inode, size, mtime)."""

    def __init__(self, python: str | None):
        self._box: dict[str, tuple] = {}
        self._thread = None
        found = _quiet(lambda: _likely_torch_library(python)) if python else None
        if found is None:
            return
        self._thread = threading.Thread(target=self._work, args=(found,), name="torchdoctor-binary-early",
                                        daemon=True)
        self._thread.start()

    def _work(self, path: str) -> None:
        try:
            self._box["read"] = (_identity(path), read_binary(path, "torch"))
        except Exception:  # noqa: BLE001 - the ordinary read will say what is wrong
            pass

    def result_for(self, path: str | None, timeout: float) -> BinaryKernels | None:
        if self._thread is None or path is None:
            return None
        self._thread.join(timeout)
        got = self._box.get("read")
        if got is None or got[0] is None or got[0] != _identity(path):
            return None
        return got[1]


def _likely_torch_library(python: str) -> str | None:
    """``<env>/lib/python3*/site-packages/torch/lib/libtorch_cuda.so`` when exactly one exists, else Windows'
    ``<env>/Lib/site-packages/torch/lib/torch_cuda.dll``, else None."""
    # not resolved: a venv's python is a link to the base interpreter
    env = os.path.dirname(os.path.dirname(python))
    lib = os.path.join(env, "lib")
    try:
        versions = sorted(name for name in os.listdir(lib) if name.startswith("python3"))
    except OSError:
        versions = []
    found = [path for path in (os.path.join(lib, name, "site-packages", "torch", "lib", "libtorch_cuda.so")
                               for name in versions) if os.path.exists(path)]
    if len(found) == 1:
        return found[0]
    windows = os.path.join(env, "Lib", "site-packages", "torch", "lib", "torch_cuda.dll")
    return windows if os.path.exists(windows) else None


def _identity(path: str):
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def read_install_binaries(torch: Dist | None, torchvision: Dist | None, torchaudio: Dist | None,
                          prefix: str | None = None, timeout: float = 5.0,
                          early: EarlyRead | None = None) -> None:
    """Fill ``kernels`` of each installed distribution. The libraries are read side by side, each in a daemon
    thread; one still reading after ``timeout`` seconds is left behind and recorded as unknown. ``early``: a
    read of torch's likely library started before the inspector returned (used when it is the same file)."""
    began = time.monotonic()
    jobs = [(dist, find, what) for dist, find, what in (
        (torch, lambda: torch_library(torch, prefix), "torch"),
        (torchvision, lambda: torchvision_library(torchvision), "torchvision"),
        (torchaudio, lambda: torchaudio_library(torchaudio), "torchaudio"),
    ) if dist is not None]
    results: dict[int, BinaryKernels] = {}

    def one(i: int, find, what: str) -> None:
        try:
            path = _quiet(find)
            done = early.result_for(path, max(0.0, began + timeout - time.monotonic())) if (
                early is not None and what == "torch") else None
            results[i] = done or read_binary(path, what)
        except Exception as exc:  # noqa: BLE001 - a probe bug becomes a fact naming it
            results[i] = BinaryKernels(status="unknown", why=f"internal error finding the {what} library: "
                f"{exc}")

    threads = [
        threading.Thread(target=one, args=(i, find, what), name=f"torchdoctor-binary-{what}", daemon=True)
        for i, (_, find, what) in enumerate(jobs)
    ]
    for thread in threads:
        thread.start()
    deadline = began + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    for i, (dist, _, what) in enumerate(jobs):
        dist.kernels = results.get(i) or BinaryKernels(
            status="unknown", why=f"reading the {what} library took longer than {timeout:g}s")
