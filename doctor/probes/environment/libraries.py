"""CUDA libraries on the library path (LD_LIBRARY_PATH; PATH on Windows) that can shadow the wheel's own,
and the toolkit CUDA_HOME points extensions at. No subprocess: ``ldconfig -p`` alone costs more than
every environment probe together."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping

from doctor.model.environment import CudaHome, CudaLib, CudaToolkitDir, Libraries, LibraryDir
from doctor.probes.environment.files import exists, read_text, scandir_names, under

# CUDA libraries that torch's pip wheels ship and that a system CUDA on the library path can shadow.
# Family -> file-name stems. libcusparseLt is a separate product with its own versions: not matched.
_LINUX_LIB = re.compile(
    r"^lib(?P<stem>cudnn|cublasLt|cublas|nvJitLink|cudart|nccl|cusparse)(?:_[a-z_]+)?\.so(?:\.(?P<ver>\d+(?:\.\d+)*))?$"
)
_WINDOWS_LIB = re.compile(
    r"^(?P<stem>cudnn|cublasLt|cublas|cudart|cusparse)(?:_[a-z_]+)?64_(?P<ver>\d+)\.dll$"
    r"|^(?P<jstem>nvJitLink)_(?P<jver>\d+)_\d+\.dll$",
    re.IGNORECASE,
)
_STEM_FAMILY = {
    "cudnn": "cudnn",
    "cublas": "cublas",
    "cublaslt": "cublas",
    "nvjitlink": "nvjitlink",
    "cudart": "cudart",
    "nccl": "nccl",
    "cusparse": "cusparse",
}
# Driver libraries (libcuda, libnvidia-ml): on WSL2 these must come from /usr/lib/wsl/lib.
DRIVER_LIB = re.compile(r"^lib(?:cuda|nvidia-ml)\.so(?:\.\d+)*$")


# --- the library path ---------------------------------------------------------------------------


def parse_cuda_lib_name(name: str, windows: bool = False) -> tuple[str, str | None] | None:
    """(family, version or None) for a CUDA library file name, or None when it is not one.

    "libcudnn.so.8.9.2" -> ("cudnn", "8.9.2"); "libcublasLt.so.12" -> ("cublas", "12");
    "nvJitLink_120_0.dll" -> ("nvjitlink", "12.0"); "cudart64_110.dll" -> ("cudart", "11.0").
    """
    if not windows:
        match = _LINUX_LIB.match(name)
        if not match:
            return None
        return _STEM_FAMILY[match["stem"].lower()], match["ver"]
    match = _WINDOWS_LIB.match(name)
    if not match:
        return None
    stem, digits = (match["stem"], match["ver"]) if match["stem"] else (match["jstem"], match["jver"])
    version = f"{digits[:-1]}.{digits[-1]}" if len(digits) == 3 else digits  # 110 -> 11.0, 120 -> 12.0
    return _STEM_FAMILY[stem.lower()], version


def scan_library_dir(path: str, windows: bool = False) -> LibraryDir:
    """The CUDA libraries and driver libraries in one directory (one scandir, no recursion)."""
    entry = LibraryDir(path=path, exists=False)
    names = scandir_names(path) if path else None
    if names is None:
        return entry
    entry.exists = True
    for name in names:
        parsed = parse_cuda_lib_name(name, windows)
        if parsed:
            lib = CudaLib(file=name, family=parsed[0], version=parsed[1])
            full = os.path.join(path, name)
            if os.path.islink(full):  # libcublas.so.12 -> libcublas.so.12.4.5.8 tells the minor
                lib.real = os.path.basename(os.path.realpath(full))
                real_parsed = parse_cuda_lib_name(lib.real, windows)
                lib.real_version = real_parsed[1] if real_parsed else None
            entry.libs.append(lib)
        elif not windows and DRIVER_LIB.match(name):
            entry.driver_libs.append(name)
    return entry


def probe_libraries(env: Mapping[str, str], host_os: str) -> Libraries:
    windows = host_os == "windows"
    variable = "PATH" if windows else "LD_LIBRARY_PATH"
    libraries = Libraries(variable=variable, value=env.get(variable))
    if libraries.value is None:
        return libraries
    seen: set[str] = set()
    for directory in libraries.value.split(os.pathsep if not windows else ";"):
        if not directory or directory in seen:
            continue
        seen.add(directory)
        scanned = scan_library_dir(directory, windows)
        # On Windows PATH is long and mostly irrelevant: keep only folders holding CUDA DLLs.
        if windows and not scanned.libs:
            continue
        libraries.dirs.append(scanned)
    return libraries


# --- CUDA_HOME ----------------------------------------------------------------------------------


def parse_cuda_version_json(text: str) -> str | None:
    """version.json of a CUDA toolkit: {"cuda": {"name": "CUDA SDK", "version": "12.4.1"}, ...}."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    version = (data.get("cuda") or {}).get("version") if isinstance(data, dict) else None
    return str(version) if version else None


def parse_cuda_version_txt(text: str) -> str | None:
    """version.txt of older toolkits: "CUDA Version 10.2.89"."""
    match = re.search(r"CUDA Version\s+(\d+(?:\.\d+)*)", text)
    return match.group(1) if match else None


def probe_cuda_home(root: str, env: Mapping[str, str]) -> CudaHome:
    """The toolkit extensions would build against: CUDA_HOME, then CUDA_PATH, then /usr/local/cuda
    (the order torch.utils.cpp_extension uses, minus its `which nvcc` step: no subprocess here)."""
    variable, path = None, None
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(name):
            variable, path = name, env[name]
            break
    if path is None:
        if not exists(root, "/usr/local/cuda"):
            return CudaHome(why="CUDA_HOME and CUDA_PATH are not set and /usr/local/cuda does not exist")
        path = "/usr/local/cuda"
    home = CudaHome(variable=variable, path=path)
    for name, parser in (("version.json", parse_cuda_version_json), ("version.txt", parse_cuda_version_txt)):
        text = read_text(root, os.path.join(path, name))
        if text is not None:
            home.version = parser(text)
            home.version_source = os.path.join(path, name)
            if home.version:
                break
    if not home.version:  # pip-assembled toolkits have neither file: /usr/local/cuda -> cuda-13.0
        match = re.fullmatch(r"cuda-(\d+\.\d+)", os.path.basename(os.path.realpath(under(root, path))))
        if match:
            home.version, home.version_source = match.group(1), f"directory name of {path}"
        else:
            home.why = f"no readable version.json or version.txt in {path}"
    home.installed = installed_toolkits(root)
    return home


def installed_toolkits(root: str, base: str = "/usr/local") -> list[CudaToolkitDir]:
    """The CUDA toolkits installed side by side (``/usr/local/cuda-12.6``: NVIDIA's packages and runfiles),
    with the version their version.json / version.txt states, else the one in the folder name. At most 32
    folders."""
    names = scandir_names(under(root, base)) or []
    found = []
    for name in names:
        match = re.fullmatch(r"cuda-(\d+\.\d+)", name)
        if not match or len(found) >= 32:
            continue
        folder = f"{base}/{name}"
        if not os.path.isdir(under(root, folder)):
            continue
        version = None
        for file, parser in (
            ("version.json", parse_cuda_version_json),
            ("version.txt", parse_cuda_version_txt),
        ):
            text = read_text(root, f"{folder}/{file}", 65536)
            if text is not None and (version := parser(text)):
                break
        found.append(CudaToolkitDir(folder, version or match.group(1)))
    return found
