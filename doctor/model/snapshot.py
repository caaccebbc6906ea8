"""The snapshot: every fact the probes gathered about one machine, as plain data.

Probes fill it; rules, the fix plan and the renderers only read it. It round-trips through
JSON (``to_dict`` / ``from_dict``) so that a report written on one machine can be diagnosed
on another. A fact that could not be read keeps *why* (``Fact.why``), never just ``None``.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable
from copy import deepcopy
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from typing import Any

from doctor.model.amd import Amd, HipKernels
from doctor.model.environment import ALONE_WHEN_UNREAD, WHEN_STATED, WRITTEN, Environment, stated
from doctor.model.facts import Fact

Reader = Callable[[Any, str], Any]

SNAPSHOT_SCHEMA_VERSION = 1


# --- host -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Host:
    os: str = ""  # "linux", "windows", "darwin"
    machine: str = ""  # normalised: "x86_64", "aarch64", "arm64"
    os_release: str = ""  # kernel release / Windows build
    libc: str = ""  # "glibc 2.36", "musl", "" when not Linux
    wsl: bool = False
    container: str | None = None  # "docker", "podman", "kubernetes", "containerd", None
    # A job of a cluster's scheduler ("slurm", "pbs", "lsf", "sge"), from its job variables: the driver
    # there belongs to the cluster's administrators, not to the user (doctor/compat/drivers.py).
    scheduler: str | None = None
    # Interpreters on PATH by version ("3.12" -> "/usr/bin/python3.12") and uv, which can fetch any
    # Python: what a fix that needs another Python may name (never one that is not here).
    pythons: dict[str, str] = field(default_factory=dict)
    uv: str | None = None
    # Written only when known: the CPU's name on macOS ("Apple M2 Pro": an x86_64 Python there runs under
    # Rosetta 2), whether this process is translated by Rosetta, the macOS version ("13.6.1": the wheels'
    # floor), and the Intel display devices on the PCI bus ("0x56a0": discrete ones are a reason for xpu).
    cpu: str | None = stated()
    translated: bool | None = stated()
    macos: str | None = stated()
    intel_gpus: list[str] | None = stated()

    @property
    def platform(self) -> str:
        """The compat-table platform key: "linux-x86_64", "windows-x86_64", "darwin-arm64"..."""
        return f"{self.os}-{self.machine}"


# --- NVIDIA driver and GPUs -------------------------------------------------------------------

# Overall state of the NVIDIA stack, as far as the probes could tell.
NVIDIA_OK = "ok"  # driver answered, GPUs listed
NVIDIA_NO_GPU = "no-gpu"  # no NVIDIA device on the PCI bus and no driver
NVIDIA_NO_DRIVER = "no-driver"  # an NVIDIA device is on the PCI bus but no driver answers
NVIDIA_MISMATCH = "driver-library-mismatch"  # user-space library != kernel module (reboot)
NVIDIA_CONTAINER_LOST = "container-lost-gpu"  # NVML "Unknown Error": container lost its device access
NVIDIA_NO_PERMISSION = "no-permission"
NVIDIA_UNKNOWN = "unknown"  # could not tell (e.g. nvidia-smi hung, garbage output)


@dataclass(slots=True)
class Gpu:
    index: int = 0
    name: str = ""
    compute_capability: Fact = field(default_factory=Fact)  # value "8.6" (str major.minor)
    memory_total_mib: int | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    mig_mode: bool | None = None
    compute_mode: str | None = None  # "Default", "Exclusive_Process", "Prohibited"


@dataclass(slots=True)
class Nvidia:
    status: str = NVIDIA_UNKNOWN
    detail: str = ""  # the message behind the status, verbatim where there was one
    driver_version: Fact = field(default_factory=Fact)  # "570.124.04"
    cuda_driver_version: Fact = field(default_factory=Fact)  # driver's maximum CUDA, "12.8"
    gpus: list[Gpu] = field(default_factory=list)
    pci_devices: list[str] = field(default_factory=list)  # PCI addresses with vendor 0x10de (display class)
    attempts: list[str] = field(default_factory=list)  # "nvml: ok", "nvidia-smi: not found", ... in order


# --- the target interpreter and its installed torch ---------------------------------------------


@dataclass(slots=True)
class Interpreter:
    path: str = ""
    reason: str = ""  # why this interpreter was inspected ("--python", "VIRTUAL_ENV", ...)
    version: str = ""  # "3.12.1"
    implementation: str = ""  # "cpython"
    bits: int | None = None
    free_threaded: bool = False
    prefix: str = ""
    env_kind: str = ""  # "venv", "uv-venv", "conda", "conda-base", "system"
    externally_managed: bool = False  # PEP 668 marker and not a venv
    machine: str | None = stated()  # the interpreter's platform.machine() ("x86_64" under Rosetta 2)
    error: str | None = None  # inspector could not run: why (one line)
    # written only when stated (reports from before 0.2 lack them; that is not a missing fact):
    error_lines: list[str] | None = stated()  # what it printed that says why (stderr, frames dropped)
    found_as: str | None = stated()  # how it was found when that is not the interpreter itself (a pyenv shim)


@dataclass(slots=True)
class BinaryKernels:
    """The GPU code compiled into one installed library, read from the file (``doctor/probes/kernels.py``),
    never by importing it: torch's ``libtorch_cuda.so`` / ``torch_cuda.dll``, torchvision's ``_C``,
    torchaudio's ``libtorchaudio``."""

    # "ok", "no-gpu-code" (a CPU-only library), "unknown" (unreadable: see why), "absent"
    status: str = "unknown"
    # set unless status is "ok": "not an ELF or PE file", "no torch/lib/libtorch_cuda.so"
    why: str | None = None
    path: str = ""  # the library read
    # cubins held by at least half of the containers: the build's list
    sm: list[str] = field(default_factory=list)
    ptx: list[str] = field(default_factory=list)  # PTX by the same rule ("compute_50")
    # targets in a few containers only (a handful of kernels)
    partial: list[str] = field(default_factory=list)
    containers: int = 0  # fatbin containers read
    # CUDA runtime libraries the ELF file needs: "libcudart.so.12"
    needed: list[str] = field(default_factory=list)
    seconds: float | None = None  # how long reading took


@dataclass(slots=True)
class Dist:
    """One installed distribution (torch, torchvision, torchaudio), read without importing it."""

    name: str = ""
    version: str = ""  # from the dist-info METADATA, e.g. "2.6.0+cu126" or "2.14.1" (PyPI: no tag)
    build_version: str | None = None  # <pkg>/version.py __version__, e.g. "2.14.1+cu130"
    cuda: str | None = None  # version.py cuda ("12.6"), None on CPU builds
    hip: str | None = None
    xpu: str | None = None
    git_version: str | None = None
    requires: list[str] = field(default_factory=list)  # Requires-Dist lines
    installer: str | None = None  # INSTALLER file: "pip", "uv", "conda"
    location: str = ""  # site-packages folder holding the package
    has_libtorch_cuda: bool | None = None  # torch only
    has_libtorch_hip: bool | None = None  # torch only
    kernels: BinaryKernels | None = None  # its GPU code, read from its library (None: not read)
    hip_kernels: HipKernels | None = stated()  # torch's ROCm builds: the targets in libtorch_hip.so


@dataclass(slots=True)
class TorchInstall:
    status: str = "unknown"  # "ok", "absent", "error", "unknown"
    detail: str = ""
    torch: Dist | None = None
    torchvision: Dist | None = None
    torchaudio: Dist | None = None
    cuda_from_requires: str | None = None  # "12.6" read from nvidia-*/cuda-toolkit pins


# --- who built this machine's torch, besides pip: NVIDIA's containers and Jetson ---------------------


@dataclass(slots=True)
class Provenance:
    """What the machine says about where its torch may come from, read from the environment and files
    (``doctor/probes/provenance.py``); ``doctor/compat/distributions.py`` judges a build with it."""

    nvidia_pytorch_version: str | None = None  # $NVIDIA_PYTORCH_VERSION of NGC PyTorch containers: "25.01"
    # the first line of /etc/nv_tegra_release: "# R36 (release), REVISION: 4.3, ..."
    tegra_release: str | None = None
    l4t: str | None = None  # Jetson Linux (L4T) release parsed from it: "36.4.3"
    device_model: str | None = None  # /proc/device-tree/model: "NVIDIA Jetson AGX Orin Developer Kit"
    why: str | None = None  # set when the probe itself failed


# --- what importing torch showed (the import probe / smoke test) ---------------------------------


@dataclass(slots=True)
class RuntimeDevice:
    index: int = 0
    name: str = ""
    capability: str | None = None  # "8.6"
    total_memory_mib: int | None = None
    free_memory_mib: int | None = None


@dataclass(slots=True)
class SmokeStep:
    name: str = ""  # "import", "init", "alloc", "matmul", "conv", "autocast-fp16", ...
    status: str = "skipped"  # "ok", "failed", "skipped"
    seconds: float | None = None
    message: str = ""
    device: int | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class TorchRuntime:
    status: str = "skipped"  # "ok", "skipped", "import-error", "crashed", "timeout", "garbage", "error"
    detail: str = ""
    seconds: float | None = None
    signal: int | None = None
    torch_version: str | None = None
    cuda_version: str | None = None  # torch.version.cuda
    hip_version: str | None = None
    backend: str | None = None  # "cuda", "rocm", "mps", "xpu", "cpu"
    cuda_available: bool | None = None
    device_count: int | None = None
    devices: list[RuntimeDevice] = field(default_factory=list)
    arch_list: list[str] = field(default_factory=list)
    cudnn_version: int | None = None
    nccl_version: str | None = None
    warnings: list[str] = field(default_factory=list)
    steps: list[SmokeStep] = field(default_factory=list)  # the smoke test, when it ran
    stderr_tail: str = ""


@dataclass(slots=True)
class TorchPin:
    """A torch version the user or the project asks for: a PEP 440 specifier and where it was stated."""

    spec: str = ""  # "==2.3.1", ">=2.5,<2.8" ("" for a requirement without a version, e.g. a URL)
    source: str = ""  # "--torch", "requirements.txt:3", "pyproject.toml [project.dependencies]", "uv.lock"
    marker: str | None = None  # the requirement's environment marker, evaluated against the target


@dataclass(slots=True)
class Project:
    """The target project's own word on torch (doctor/probes/project.py): its pins, read from
    requirements*.txt, pyproject.toml and uv.lock / poetry.lock without executing anything."""

    folder: str | None = None  # the project folder read; None when none was found
    files: list[str] = field(default_factory=list)  # the files read (names inside ``folder``)
    pins: list[TorchPin] = field(default_factory=list)  # every statement about torch, in file order
    problems: list[str] = field(default_factory=list)  # what could not be read, and why
    why: str | None = None  # no project was read: why


@dataclass(slots=True)
class Requested:
    """What the user asked of this run (set by the run, not probed): the torch it must end with and whether
    the driver may be changed. Kept in the report, so a reader sees what the plan followed."""

    torch: TorchPin | None = None  # --torch, or [tool.torchdoctor] torch
    no_driver_change: bool = False  # --no-driver-change: the plan keeps today's driver


@dataclass(slots=True)
class Snapshot:
    schema_version: int = SNAPSHOT_SCHEMA_VERSION
    tool_version: str = ""
    collected_at: str = ""  # ISO 8601 UTC
    origin: str = "probe"  # "probe", "report", "collect_env"
    host: Host = field(default_factory=Host)
    nvidia: Nvidia = field(default_factory=Nvidia)
    amd: Amd | None = stated()  # AMD GPUs and ROCm (doctor/model/amd.py); absent in older reports
    interpreter: Interpreter = field(default_factory=Interpreter)
    install: TorchInstall = field(default_factory=TorchInstall)
    runtime: TorchRuntime = field(default_factory=TorchRuntime)
    # hazard facts (doctor/model/environment.py)
    environment: Environment = field(default_factory=Environment)
    provenance: Provenance = field(default_factory=Provenance)  # NGC container, Jetson (L4T)
    # What says a GPU is wanted here: "--require cuda", "[tool.torchdoctor] require", "--device 0". Set by the
    # run from what the user stated; the container rule reads it (with the NVIDIA container variables) for its
    # severity.
    gpu_wanted: list[str] = field(default_factory=list)
    project: Project | None = None  # the target project's pins (None: not probed)
    requested: Requested = field(default_factory=Requested)
    unknowns: list[str] = field(default_factory=list)  # what this snapshot cannot know (re-diagnosis)

    def to_dict(self) -> dict[str, Any]:
        return as_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        return _build(cls, data)


# --- generic dict -> dataclass (for reports read back from JSON) -------------------------------


_ATOMS = (str, int, float, bool, type(None))


def as_plain(obj: Any) -> Any:
    """``dataclasses.asdict`` for snapshot data, without its per-value deepcopy of strings and
    numbers (four times faster; what re-diagnosing many reports spends its time on)."""
    cls = type(obj)
    if cls in _EXACT_ATOMS:
        return obj
    convert = _CONVERTERS.get(cls)
    if convert is None:
        convert = _CONVERTERS[cls] = _converter(cls)
    return convert(obj)


_EXACT_ATOMS = frozenset(_ATOMS)


def _converter(cls: type):
    """``as_plain`` for the objects of exactly this class, worked out once per class."""
    if cls is list:
        return lambda obj: [as_plain(v) for v in obj]
    if cls is dict:
        return lambda obj: {as_plain(k): as_plain(v) for k, v in obj.items()}
    if cls is not type and is_dataclass(cls):
        sparse = _sparse_fields(cls)
        if sparse is not None:
            return lambda obj: _sparse_plain(obj, *sparse)
        names = _field_names(cls)
        return lambda obj: {name: as_plain(getattr(obj, name)) for name in names}
    return _as_plain


_CONVERTERS: dict[type, Any] = {}


def _as_plain(obj: Any) -> Any:
    """``as_plain`` for anything else (subclasses, tuples, ...), by asking what it is."""
    if isinstance(obj, _ATOMS):
        return obj
    if is_dataclass(obj) and not isinstance(obj, type):
        sparse = _sparse_fields(type(obj))
        if sparse is not None:
            return _sparse_plain(obj, *sparse)
        return {name: as_plain(getattr(obj, name)) for name in _field_names(type(obj))}
    if isinstance(obj, list):
        return [as_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {as_plain(k): as_plain(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(as_plain(v) for v in obj)
    return deepcopy(obj)  # anything else: exactly what asdict does


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


@functools.cache
def _sparse_fields(cls: type) -> tuple[tuple[tuple[str, bool, Any], ...], str | None] | None:
    """For an environment section (doctor/model/environment.py): (name, written only when stated, default)
    per field, and its reason field; None for every other dataclass (all fields always written)."""
    marks = {f.name: f.metadata.get(WRITTEN) for f in fields(cls)}
    if not any(marks.values()):
        return None
    spec = tuple(
        (f.name, marks[f.name] in (WHEN_STATED, ALONE_WHEN_UNREAD), _default(f)) for f in fields(cls)
    )
    reason = next((name for name, mark in marks.items() if mark == ALONE_WHEN_UNREAD), None)
    return spec, reason


def _default(f: Field) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else f.default


def _sparse_plain(obj: Any, spec: tuple[tuple[str, bool, Any], ...], reason: str | None) -> dict[str, Any]:
    if reason is not None and getattr(obj, reason) is not None and all(
        getattr(obj, name) == default for name, _, default in spec if name != reason
    ):
        return {reason: getattr(obj, reason)}  # a section that could not be read is only its reason
    out = {}
    for name, when_stated, _ in spec:
        value = getattr(obj, name)
        if value is not None or not when_stated:
            out[name] = as_plain(value)
    return out


class SnapshotFormatError(ValueError):
    """A dict does not have the shape of a snapshot; the message names the field."""


@functools.cache
def field_types(cls: type) -> tuple[tuple[str, Any], ...]:
    """(name, resolved type) of each field of a dataclass, computed once per class: resolving the
    string annotations (typing.get_type_hints) was most of the time of reading a report back. ``Any`` is
    handed in for a record module that names it in annotations without importing it."""
    hints = typing.get_type_hints(cls, localns={"Any": typing.Any})
    return tuple((f.name, hints[f.name]) for f in fields(cls))


def _build(tp: Any, data: Any, where: str = "snapshot") -> Any:
    return _reader(tp)(data, where)


@functools.cache
def _reader(tp: Any) -> Reader:
    """How to read JSON data as ``tp``, worked out once per type: asking typing and dataclasses about
    every value again cost more than the rest of reading a report back (the environment's many sections)."""
    if is_dataclass(tp):
        return _dataclass_reader(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _union_reader([_reader(arg) for arg in args if arg is not type(None)], type(None) in args)
    if origin is list:
        return _list_reader(args[0])
    if origin is dict:
        return _dict_reader
    if tp is float:
        return _float_reader
    if tp in (int, str, bool):
        return functools.partial(_atom_reader, tp)
    return _any_reader  # Any, and anything else: the value as it is


def _dataclass_reader(cls: type) -> Reader:
    fields = [(name, _as_is(field_type), _reader(field_type)) for name, field_type in field_types(cls)]

    def read(data: Any, where: str) -> Any:
        if not isinstance(data, dict):
            raise SnapshotFormatError(f"{where}: expected an object, got {type(data).__name__}")
        values = {}
        for name, as_is, read_field in fields:
            if name in data:
                value = data[name]
                # a value its reader would return unchanged is taken as it is, without naming where it is
                values[name] = value if type(value) in as_is else read_field(value, f"{where}.{name}")
        return cls(**values)

    return read


_ANY_TYPE = frozenset((str, int, float, bool, type(None), list, dict))


@functools.cache
def _as_is(tp: Any) -> frozenset:
    """The exact types of JSON values that the reader of ``tp`` returns unchanged: text, integers, booleans
    and null where the type takes them (a float reader makes an integer a float: never as is), anything for
    Any."""
    if tp is typing.Any:
        return _ANY_TYPE
    if tp in (str, int, bool):
        return frozenset((tp,))
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if all(arg in (str, int, bool, type(None)) for arg in args):
            return frozenset(args)
    return frozenset()


def _union_reader(options: list[Reader], nullable: bool) -> Reader:
    def read(data: Any, where: str) -> Any:
        if data is None and nullable:
            return None
        errors = []
        for option in options:
            try:
                return option(data, where)
            except SnapshotFormatError as exc:
                errors.append(str(exc))
        raise SnapshotFormatError(errors[0] if errors else f"{where}: unexpected null")

    return read


def _list_reader(item_type: Any) -> Reader:
    read_item = _reader(item_type)

    def read(data: Any, where: str) -> Any:
        if not isinstance(data, list):
            raise SnapshotFormatError(f"{where}: expected a list, got {type(data).__name__}")
        if item_type is str and all(type(item) is str for item in data):
            return list(data)  # the common case (paths, lines), without a name per item
        return [read_item(item, f"{where}[{i}]") for i, item in enumerate(data)]

    return read


def _dict_reader(data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise SnapshotFormatError(f"{where}: expected an object, got {type(data).__name__}")
    return dict(data)


def _float_reader(data: Any, where: str) -> Any:
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        raise SnapshotFormatError(f"{where}: expected a number, got {type(data).__name__}")
    return float(data)


def _atom_reader(tp: type, data: Any, where: str) -> Any:
    if not isinstance(data, tp) or (tp is int and isinstance(data, bool)):
        raise SnapshotFormatError(f"{where}: expected {tp.__name__}, got {type(data).__name__}")
    return data


def _any_reader(data: Any, where: str) -> Any:
    return data
