"""Environment facts: the hazards around torch that are not version numbers, one typed section per family.

The probes fill them (``doctor/probes/environment/``; the ``python`` section comes from the target
interpreter's inspector, ``hostname`` from the collector); the hazard rules (``doctor/rules/hazards/``) read
them by attribute. The sections are written to JSON exactly as the report has always held them:

- a section that was not observed is None and absent from the JSON: unknown, never "healthy";
- a field made with ``stated()`` is written only when the probe stated it (None: not stated);
- every other field is written even when it is None, because there null is itself the fact
  (``container.kind``: not in a container; ``libraries.value``: the variable is unset);
- a section that could not be read is only its reason, ``{"why": ...}`` (the field made with ``reason()``).

``doctor.model.snapshot.as_plain`` applies these rules, ``Snapshot.from_dict`` reads them back, and
readers never report a key of such a sparse section as missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Field metadata key and its values: how a field of a sparse section is written (see the module doc).
WRITTEN = "written"
WHEN_STATED = "when-stated"  # only when not None
ALONE_WHEN_UNREAD = "alone-when-unread"  # the reason; alone when every other field is at its default


def stated() -> Any:
    """A fact the probe states only sometimes: written when it is not None."""
    return field(default=None, metadata={WRITTEN: WHEN_STATED})


def reason() -> Any:
    """Why (part of) the section could not be read; a section with nothing else is written as just this."""
    return field(default=None, metadata={WRITTEN: ALONE_WHEN_UNREAD})


# --- containers -------------------------------------------------------------------------------


@dataclass(slots=True)
class Container:
    """Whether this process runs in a container, and whether the NVIDIA runtime gave it GPUs."""

    # "kubernetes", "podman", "docker", "containerd", "lxc", $container; None: not one
    kind: str | None = None
    evidence: list[str] = field(default_factory=list)  # what the kind rests on: "/.dockerenv exists", ...
    device_nodes: list[str] = field(default_factory=list)  # the /dev/nvidia* entries
    gpu_device_nodes: int | None = None  # how many of them are GPUs (/dev/nvidiaN)
    nvidia_visible_devices: str | None = None  # $NVIDIA_VISIBLE_DEVICES; None: unset
    nvidia_driver_capabilities: str | None = None  # $NVIDIA_DRIVER_CAPABILITIES; None: unset
    cuda_image: bool | None = None  # the image looks like a CUDA image
    # "NVIDIA_REQUIRE_CUDA=...", "/usr/local/cuda exists"
    cuda_image_evidence: list[str] = field(default_factory=list)
    why: str | None = reason()
    # In a container only: whether the host's nvidia kernel module shows through (/sys/module/nvidia). With
    # an NVIDIA GPU on the PCI bus and no /dev/nvidia*, it says the GPUs are there and were not given.
    nvidia_module: bool | None = stated()


# --- resources: /dev/shm, CPUs, memory -----------------------------------------------------------


@dataclass(slots=True)
class Shm:
    """The size of /dev/shm (statvfs), which DataLoader workers hand their batches through."""

    path: str | None = stated()  # "/dev/shm"
    total_bytes: int | None = stated()
    free_bytes: int | None = stated()
    why: str | None = reason()


@dataclass(slots=True)
class Cpu:
    """The CPUs this process can keep busy: the CPU count, the affinity mask and the cgroup CPU quota."""

    cpu_count: int | None = None  # os.cpu_count()
    affinity: int | None = None  # len(os.sched_getaffinity(0)); None where the OS has no affinity mask
    cgroup: str | None = None  # "v1" or "v2"; None: no cgroup CPU controller files found
    quota_cpus: float | None = None  # the smallest quota from this process's cgroup up, in CPUs; None: none
    quota_source: str | None = stated()  # the file that quota came from (cpu.max, cpu.cfs_quota_us)
    quota_raw: str | None = stated()  # that file's text: "400000 100000", "40000 / 100000"
    why: str | None = reason()
    budget: int | None = None  # min(affinity, ceil(quota)), at least 1


@dataclass(slots=True)
class Memory:
    """RAM and swap."""

    source: str | None = stated()  # "/proc/meminfo" or "psutil"
    total_bytes: int | None = stated()
    available_bytes: int | None = stated()
    swap_total_bytes: int | None = stated()
    swap_why: str | None = stated()  # psutil could read the RAM but not the swap
    why: str | None = reason()


# --- *_VISIBLE_DEVICES --------------------------------------------------------------------------


@dataclass(slots=True)
class VisibleDevices:
    """The raw values of the device-selection variables, each only when it is set (the rules parse them)."""

    CUDA_VISIBLE_DEVICES: str | None = stated()
    NVIDIA_VISIBLE_DEVICES: str | None = stated()
    CUDA_DEVICE_ORDER: str | None = stated()
    HIP_VISIBLE_DEVICES: str | None = stated()
    ROCR_VISIBLE_DEVICES: str | None = stated()
    why: str | None = reason()


# --- CUDA libraries on the library path, CUDA_HOME -------------------------------------------------


@dataclass(slots=True)
class CudaLib:
    """One CUDA library file in a folder of the library path."""

    file: str | None = None  # "libnvJitLink.so.12"
    family: str | None = None  # "cudnn", "cublas", "nvjitlink", "cudart", "nccl", "cusparse"
    version: str | None = None  # from the file name ("12"); None when the name has none
    real: str | None = stated()  # the file a symlink points at: "libnvJitLink.so.12.4.127"
    real_version: str | None = stated()  # its version, which tells the minor


@dataclass(slots=True)
class LibraryDir:
    """One folder of the library path, scanned once (no recursion)."""

    path: str | None = None
    exists: bool | None = None
    libs: list[CudaLib] = field(default_factory=list)
    driver_libs: list[str] = field(default_factory=list)  # libcuda.so* / libnvidia-ml.so* in it


@dataclass(slots=True)
class Libraries:
    """The CUDA libraries on LD_LIBRARY_PATH (on Windows: PATH, only the folders holding CUDA DLLs)."""

    variable: str | None = None  # "LD_LIBRARY_PATH" or "PATH"
    value: str | None = None  # its value; None: unset
    dirs: list[LibraryDir] = field(default_factory=list)  # in search order, duplicates dropped
    why: str | None = reason()


@dataclass(slots=True)
class CudaToolkitDir:
    """A CUDA toolkit folder that exists on this machine (/usr/local/cuda-12.6), with its version."""

    path: str = ""
    version: str | None = None  # from version.json / version.txt, else the folder name ("12.6")


@dataclass(slots=True)
class CudaHome:
    """The CUDA toolkit that extensions would build against (CUDA_HOME, CUDA_PATH, /usr/local/cuda)."""

    variable: str | None = None  # "CUDA_HOME" or "CUDA_PATH"; None: the default /usr/local/cuda
    path: str | None = None
    version: str | None = None  # "12.4.1"; None when no version could be read
    version_source: str | None = stated()  # version.json, version.txt or "directory name of <path>"
    why: str | None = reason()
    # The toolkits installed side by side (/usr/local/cuda-X.Y): the only folders a fix may point CUDA_HOME
    # at.
    installed: list[CudaToolkitDir] | None = stated()


# --- WSL2 ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class LdSoConf:
    """One /etc/ld.so.conf.d file, in the order ldconfig reads them."""

    file: str | None = None
    dirs: list[str] = field(default_factory=list)
    driver_libs: dict[str, list[str]] = field(default_factory=dict)  # folder -> libcuda/libnvidia-ml files


@dataclass(slots=True)
class Wsl:
    """WSL2, and what can shadow the Windows driver's libraries in /usr/lib/wsl/lib."""

    is_wsl: bool | None = None
    evidence: list[str] = field(default_factory=list)  # "/dev/dxg exists", "WSL_DISTRO_NAME is set", ...
    wsl_lib_dir_exists: bool | None = stated()  # only under WSL
    ld_so_conf: list[LdSoConf] | None = stated()  # only under WSL
    linux_driver: list[str] | None = stated()  # files of a Linux NVIDIA driver installed inside WSL
    why: str | None = reason()
    # Only under WSL: 1 or 2 (WSL 1 has no GPU at all), from the kernel release: WSL 1 reports Microsoft's
    # "4.4.0-19041-Microsoft", WSL 2 "5.15.167.4-microsoft-standard-WSL2" (older:
    # "4.19.104-microsoft-standard").
    version: int | None = stated()
    # /proc/sys/kernel/osrelease, else /proc/version's "Linux version X"
    kernel_release: str | None = stated()
    distro: str | None = stated()  # $WSL_DISTRO_NAME: what `wsl --set-version` needs
    # Installed dpkg packages of a Linux NVIDIA driver ("nvidia-driver-550", "libnvidia-compute-550").
    driver_packages: list[str] | None = stated()
    # the nvidia-smi found first on PATH (the Windows driver's is in /usr/lib/wsl/lib)
    nvidia_smi: str | None = stated()


# --- the CUDA driver library the dynamic loader picks ----------------------------------------------------


@dataclass(slots=True)
class DriverLibCopy:
    """One libcuda.so.1 / libnvidia-ml.so.1 in a folder the dynamic loader searches."""

    soname: str = ""  # "libcuda.so.1" or "libnvidia-ml.so.1"
    path: str = ""  # "/usr/local/cuda/compat/libcuda.so.1"
    found_by: str = ""  # "LD_LIBRARY_PATH", the ld.so.conf file that names the folder, or "default"
    # the driver version in the file it resolves to ("580.65.06"); None: not in the name
    version: str | None = None
    compat: bool = False  # a CUDA forward-compatibility copy (cuda-compat: a folder named compat)


@dataclass(slots=True)
class CompatDir:
    """A cuda-compat folder on disk (/usr/local/cuda-13.0/compat; NGC images keep theirs in
    compat/lib.real)."""

    path: str = ""
    version: str | None = None  # the driver version of its libcuda ("580.65.06")


@dataclass(slots=True)
class Loader:
    """The driver libraries in the order the dynamic loader searches for them: LD_LIBRARY_PATH, the folders
    of /etc/ld.so.conf in the order ldconfig reads them (the first wins in ld.so.cache), then the default
    folders. Linux only. The first libcuda.so.1 is the CUDA driver torch gets: a cuda-compat copy there
    means forward compatibility is in use."""

    copies: list[DriverLibCopy] = field(default_factory=list)  # in search order
    compat: list[CompatDir] = field(default_factory=list)  # cuda-compat folders, on the search path or not
    why: str | None = reason()


# --- the target interpreter's environment (from its inspector) ------------------------------------


@dataclass(slots=True)
class UserSite:
    """The user site-packages of the target interpreter."""

    enabled: bool | None = None
    path: str | None = None


@dataclass(slots=True)
class DistRecord:
    """One interesting distribution on the target's sys.path (duplicates kept, in sys.path order)."""

    name: str | None = None
    version: str | None = None
    location: str | None = None  # the site-packages folder holding it
    installer: str | None = None  # its INSTALLER file: "pip", "uv", "conda"
    path: str | None = None  # its .dist-info folder


@dataclass(slots=True)
class CondaRecord:
    """One conda-meta record of torch's family."""

    name: str | None = None
    version: str | None = None
    build: str | None = None
    channel: str | None = None


@dataclass(slots=True)
class Conda:
    """The target's conda environment: its prefix, whether it is base, and the records of torch's family."""

    prefix: str | None = None
    is_base: bool | None = None
    records: list[CondaRecord] = field(default_factory=list)


@dataclass(slots=True)
class PythonFacts:
    """What the inspector saw around torch in the target interpreter (doctor/target/inspector.py)."""

    executable: str | None = None
    sys_path: list[str] = field(default_factory=list)
    user_site: UserSite = field(default_factory=UserSite)
    dists: list[DistRecord] = field(default_factory=list)
    torch_origin: str | None = None  # the torch/__init__.py that `import torch` would load
    conda: Conda | None = None  # None: not a conda environment
    pyvenv_cfg: dict[str, str] | None = None
    externally_managed_text: str | None = None  # the PEP 668 marker's text, outside a venv
    problems: list[str] = field(default_factory=list)  # what the inspector could not read
    error: str | None = None  # the inspector could not run: why
    # What an interrupted pip left in the sys.path folders: its "~" stash and *.dist-info without RECORD.
    leftovers: list[str] | None = stated()
    # Every distribution on sys.path as [name, version, folder], in sys.path order (the first of a name is the
    # one imported): what torch's declared requirements are checked against.
    installed: list[list[str]] | None = stated()
    markers: dict[str, str] | None = stated()  # PEP 508 marker variables of the target interpreter
    pythonpath: str | None = stated()  # $PYTHONPATH as the target saw it


# --- collect_env text -----------------------------------------------------------------------------


@dataclass(slots=True)
class PastedError:
    """An error message pasted around a collect_env text (users paste the traceback they got with it), as a
    row of compat_tables/signatures.json recognised it."""

    signature: str  # the row: "windows-dll-load-failed"
    finding: str  # the finding id the row points at
    line: str  # the pasted line that holds the message
    groups: dict[str, str] = field(default_factory=dict)  # the row's named groups: {"dll": "...\\fbgemm.dll"}


@dataclass(slots=True)
class CollectEnvText:
    """What `python -m torch.utils.collect_env` printed, kept verbatim (doctor/inputs/collect_env.py)."""

    fields: dict[str, str] = field(default_factory=dict)  # our key -> the value as printed
    gpu_lines: list[str] = field(default_factory=list)
    cudnn_candidates: list[str] = field(default_factory=list)  # system cuDNN files, not torch's
    pip: list[str] = field(default_factory=list)  # the [pip] lines
    conda: list[str] = field(default_factory=list)  # the [conda] lines
    # The errors the lines around the text hold (a traceback pasted before or after it), best first.
    pasted_errors: list[PastedError] | None = stated()
    # The error line of a traceback pasted with the text that shows `import torch` failing (a frame in
    # torch/__init__.py, or torch's own folder, torch/lib, in the error), recognised or not.
    pasted_import_error: str | None = stated()


# --- Windows ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class WindowsFacts:
    """Windows settings that decide whether torch installs: the 260-character path limit."""

    # HKLM\SYSTEM\CurrentControlSet\Control\FileSystem LongPathsEnabled == 1; None: not read (see why)
    long_paths_enabled: bool | None = None
    why: str | None = reason()


# --- all of them ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Environment:
    """The hazard facts of one machine, one section per family; a section that was not observed is absent."""

    container: Container | None = stated()
    shm: Shm | None = stated()
    cpu: Cpu | None = stated()
    memory: Memory | None = stated()
    visible_devices: VisibleDevices | None = stated()
    libraries: Libraries | None = stated()
    cuda_home: CudaHome | None = stated()
    wsl: Wsl | None = stated()
    loader: Loader | None = stated()  # Linux only
    windows: WindowsFacts | None = stated()  # only on Windows
    python: PythonFacts | None = stated()
    hostname: str | None = stated()
    collect_env: CollectEnvText | None = stated()  # only in snapshots read from collect_env text
    error: str | None = stated()  # the environment probe itself failed: why


# The probe families, by the key each section has in Environment (and the JSON report).
SECTIONS: dict[str, type] = {
    "container": Container,
    "shm": Shm,
    "cpu": Cpu,
    "memory": Memory,
    "visible_devices": VisibleDevices,
    "libraries": Libraries,
    "cuda_home": CudaHome,
    "wsl": Wsl,
    "loader": Loader,
    "windows": WindowsFacts,
}
