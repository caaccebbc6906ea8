"""The CUDA driver libraries the dynamic loader would pick: every libcuda.so.1 and libnvidia-ml.so.1 in the
folders it searches, in its order, and the cuda-compat folders on disk.

The order is the one ld.so uses: LD_LIBRARY_PATH, then ld.so.cache, then the default folders. The cache is
not read: the folders of /etc/ld.so.conf are listed in the order ldconfig reads them (an ``include`` glob is
sorted), which is the order that decides which copy of a name the cache keeps. Every folder, LD_LIBRARY_PATH's
too, is read under ``root`` (the fake machine in tests). No subprocess: ``ldconfig -p`` is not needed to
know which folder comes first.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping

from doctor.model.environment import CompatDir, DriverLibCopy, Loader
from doctor.probes.environment.files import exists, read_text, scandir_names, under

SONAMES = ("libcuda.so.1", "libnvidia-ml.so.1")
# The folders ld.so searches after the cache (glibc's trusted folders; the multiarch ones on Debian/Ubuntu).
DEFAULT_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
# Where cuda-compat lands: the versioned toolkit folder (NVIDIA's cuda-compat-X-Y packages), and NGC images'
# /usr/local/cuda/compat/lib.real, which their entrypoint links into compat/lib when the driver needs it.
COMPAT_GLOBS = ("/usr/local/cuda/compat", "/usr/local/cuda/compat/lib.real", "/usr/local/cuda/compat/lib",
                "/usr/local/cuda-*/compat")
_DRIVER_VERSION = re.compile(r"^lib(?:cuda|nvidia-ml)\.so\.(\d{3}\.\d+(?:\.\d+)?)$")
_MAX_DIRS = 64
_MAX_INCLUDE_DEPTH = 4


def driver_version_of(file_name: str) -> str | None:
    """"libcuda.so.580.65.06" -> "580.65.06"; None for a name without a driver version (WSL's
    libcuda.so.1.1)."""
    match = _DRIVER_VERSION.match(file_name)
    return match.group(1) if match else None


def is_compat_path(path: str) -> bool:
    """A cuda-compat folder: NVIDIA's packages and NGC images name it ``compat`` (conda: ``cuda-compat``)."""
    return any(part in ("compat", "cuda-compat", "lib.real") for part in path.split("/"))


def parse_ld_so_conf_lines(text: str) -> list[tuple[str, str]]:
    """("dir", path) and ("include", pattern) entries of one ld.so.conf file, in order (comments dropped)."""
    entries = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include") and line[7:8].isspace():
            entries.extend(("include", pattern) for pattern in line[7:].split())
        elif line.startswith("/"):
            entries.extend(("dir", d) for d in re.split(r"[\s:,]+", line) if d)
    return entries


def ld_so_conf_dirs(root: str, conf: str = "/etc/ld.so.conf", depth: int = 0) -> list[tuple[str, str]]:
    """(folder, the file naming it) in the order ldconfig reads them."""
    text = read_text(root, conf)
    if text is None:
        if conf == "/etc/ld.so.conf":  # some images have only the .d folder
            text = "include /etc/ld.so.conf.d/*.conf"
        else:
            return []
    found = []
    for kind, value in parse_ld_so_conf_lines(text):
        if kind == "dir":
            found.append((value, conf))
        elif depth < _MAX_INCLUDE_DEPTH:
            pattern = value if value.startswith("/") else os.path.join(os.path.dirname(conf), value)
            for match in sorted(glob.glob(under(root, pattern))):
                found.extend(ld_so_conf_dirs(root, _inside(root, match), depth + 1))
    return found


def _inside(root: str, real: str) -> str:
    """A path found by globbing under ``root``, as the machine itself names it."""
    return "/" + os.path.relpath(real, under(root, "/"))


def search_order(root: str, env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(folder, found_by) in the loader's order, each folder once (by its real path)."""
    candidates = [(d, "LD_LIBRARY_PATH") for d in (env.get("LD_LIBRARY_PATH") or "").split(":") if d]
    candidates += ld_so_conf_dirs(root)
    candidates += [(d, "default") for d in DEFAULT_DIRS]
    seen: set[str] = set()
    ordered = []
    for directory, found_by in candidates:
        real = os.path.realpath(under(root, directory))
        if real in seen:
            continue
        seen.add(real)
        ordered.append((directory, found_by))
        if len(ordered) >= _MAX_DIRS:
            break
    return ordered


def _copy(root: str, directory: str, soname: str, found_by: str) -> DriverLibCopy | None:
    path = os.path.join(directory, soname)
    if not exists(root, path):
        return None
    real = os.path.realpath(under(root, path))
    return DriverLibCopy(
        soname=soname,
        path=path,
        found_by=found_by,
        version=driver_version_of(os.path.basename(real)),
        compat=is_compat_path(directory) or is_compat_path(real),
    )


def compat_dirs(root: str) -> list[CompatDir]:
    """The cuda-compat folders on disk, with the driver version of their libcuda (at most 32)."""
    found: list[CompatDir] = []
    seen: set[str] = set()
    for pattern in COMPAT_GLOBS:
        for match in sorted(glob.glob(under(root, pattern))):
            if os.path.realpath(match) in seen:  # /usr/local/cuda is a link to one of the cuda-X.Y folders
                continue
            seen.add(os.path.realpath(match))
            versions = [v for v in map(driver_version_of, scandir_names(match) or []) if v]
            if versions and len(found) < 32:
                newest = max(versions, key=lambda v: [int(x) for x in v.split(".")])
                found.append(CompatDir(_inside(root, match), newest))
    return found


def probe_loader(root: str, env: Mapping[str, str]) -> Loader:
    copies = []
    for directory, found_by in search_order(root, env):
        for soname in SONAMES:
            copy = _copy(root, directory, soname, found_by)
            if copy is not None:
                copies.append(copy)
    return Loader(copies=copies, compat=compat_dirs(root))
