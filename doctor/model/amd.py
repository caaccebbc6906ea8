"""AMD GPUs and ROCm, as plain values: what the machine shows (``doctor/probes/amd/``) and which GPU targets
torch's HIP library holds (``doctor/probes/hip_kernels.py``). Probes fill them; rules only read them.

A GPU target is named as LLVM names it: a processor ("gfx90a", "gfx1100") and, in a library's code objects,
a target ID with its features ("gfx90a:xnack-", "gfx942:sramecc+:xnack-"). The kernel gives the processor
as a number, ``gfx_target_version`` = major*10000 + minor*100 + stepping (90010 for gfx90a, 100301 for
gfx1031): the name spells major in decimal and minor and stepping as one hex digit each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from doctor.model.facts import Fact

_GFX_RE = re.compile(r"^gfx[0-9]{1,2}[0-9a-f]{2}$")
_TARGET_ID_RE = re.compile(r"\b(gfx[0-9a-f]{3,5})((?::[A-Za-z0-9_]+[+-])*)")

# Overall state of the AMD stack, as far as the probes could tell (``Amd.status``).
AMD_OK = "ok"  # GPUs in the KFD topology, and /dev/kfd and their render nodes open for reading and writing
AMD_NO_GPU = "no-gpu"  # no AMD display device on the PCI bus and no GPU in the KFD topology
AMD_NO_DRIVER = "no-driver"  # an AMD display device on the PCI bus, but no GPU in the KFD topology
AMD_NO_DEVICE = "no-device-access"  # GPUs in the KFD topology, but no /dev/kfd (a container without --device)
AMD_NO_PERMISSION = "no-permission"  # /dev/kfd or a GPU's render node is there but not readable and writable
AMD_UNKNOWN = "unknown"  # could not tell (no PCI bus to list, no KFD topology)


@dataclass(frozen=True)
class AmdPciDevice:
    """One AMD display device (vendor 0x1002, class 0x03xxxx) in /sys/bus/pci/devices."""

    address: str = ""  # "0000:03:00.0"
    device_id: str = ""  # "0x73df"
    pci_class: str = ""  # "0x030000"
    driver: str | None = None  # the kernel driver bound to it ("amdgpu"); None: none bound


@dataclass(frozen=True)
class KfdNode:
    """One node of /sys/class/kfd/kfd/topology/nodes: a GPU, or a CPU (gfx_target_version 0)."""

    node: int = 0
    name: str | None = None  # the node's ``name`` file, as the kernel wrote it
    gfx_target_version: int | None = None  # from ``properties``; 0 for a CPU node
    gfx: str | None = None  # its processor name ("gfx1031"); None for a CPU node or a number that spells none
    vendor_id: int | None = None  # 4098 (0x1002) for AMD
    device_id: int | None = None
    pci_address: str | None = None  # from ``domain`` and ``location_id``: "0000:03:00.0"
    drm_render_minor: int | None = None  # its render node is /dev/dri/renderD<minor>


@dataclass(frozen=True)
class DeviceNode:
    """A device file the ROCm runtime opens (/dev/kfd, /dev/dri/renderD*), and whether this process may."""

    path: str = ""  # "/dev/kfd", "/dev/dri/renderD128"
    exists: bool = False
    readable: bool | None = None  # os.access; None when it does not exist
    writable: bool | None = None
    group: str | None = None  # the group that owns it ("render", "video"), or its number when it has no name
    in_group: bool | None = None  # whether this process belongs to that group


@dataclass(frozen=True)
class AmdGpu:
    """One AMD GPU, combined from the KFD topology, the PCI bus and the ROCm tools (``Amd.attempts``)."""

    index: int = 0  # in the order of the KFD GPU nodes (the runtime's order), else of the PCI addresses
    pci_address: str | None = None
    name: Fact = field(default_factory=Fact)  # "AMD Radeon RX 6700 XT"
    # the processor ("gfx1031"): the hardware's from the kernel or a tool; from collect_env, the runtime's
    # (after HSA_OVERRIDE_GFX_VERSION), as its source says
    gfx: Fact = field(default_factory=Fact)
    target_id: str | None = None  # with its features, where a source gave them: "gfx942:sramecc+:xnack-"
    kfd_node: int | None = None
    render_node: str | None = None  # "/dev/dri/renderD128"


@dataclass(frozen=True)
class Amd:
    """The AMD GPU facts of one machine (``doctor/probes/amd/probe.py`` says in which order they are read)."""

    status: str = AMD_UNKNOWN
    detail: str = ""  # the reason behind the status, one line
    gpus: list[AmdGpu] = field(default_factory=list)
    pci_devices: list[AmdPciDevice] = field(default_factory=list)
    kfd_nodes: list[KfdNode] = field(default_factory=list)  # every node, CPU ones too
    device_nodes: list[DeviceNode] = field(default_factory=list)  # /dev/kfd first, then the render nodes
    driver_version: Fact = field(default_factory=Fact)  # /sys/module/amdgpu/version (DKMS builds only)
    # HSA_OVERRIDE_GFX_VERSION as the processor the runtime will claim instead of the hardware's ("gfx1030")
    override: Fact = field(default_factory=Fact)
    # the variables that steer the ROCm runtime, each only when set: HSA_OVERRIDE_GFX_VERSION (and its
    # per-node HSA_OVERRIDE_GFX_VERSION_<n>), HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES
    variables: dict[str, str] = field(default_factory=dict)
    attempts: list[str] = field(default_factory=list)  # "rocminfo: ok", "amd-smi: not found", ... in order
    # what torch reported when imported, known only from collect_env text (None: not observed)
    hip_runtime_version: Fact | None = None  # "HIP runtime version: 6.3.42131"
    miopen_version: Fact | None = None  # "MIOpen runtime version: 3.3.0"


@dataclass(frozen=True)
class HipKernels:
    """The GPU targets compiled into torch's ``libtorch_hip.so``, read from its clang offload bundles
    (section ``.hip_fatbin``), never by importing it."""

    status: str = "unknown"  # "ok", "no-gpu-code" (no .hip_fatbin), "unknown" (see why)
    why: str | None = None  # unless "ok": why not; with "ok": what was not read (compressed bundles)
    path: str = ""
    targets: list[str] = field(default_factory=list)  # in half the bundles or more: "gfx90a:xnack-"
    processors: list[str] = field(default_factory=list)  # their processors: "gfx90a", "gfx1100"
    partial: list[str] = field(default_factory=list)  # target IDs in fewer bundles (a handful of kernels)
    bundles: int = 0  # offload bundles read
    compressed: int = 0  # of them, compressed (CCOB)
    unread: int = 0  # compressed bundles whose targets could not be read (no decompressor for their method)
    compression: list[str] = field(default_factory=list)  # the methods met: "zlib", "zstd"
    seconds: float | None = None


# --- naming ---------------------------------------------------------------------------------------


def gfx_name(major: int, minor: int, stepping: int) -> str | None:
    """The processor name of a target version; None when minor or stepping do not fit one hex digit."""
    if not (0 < major < 100 and 0 <= minor < 16 and 0 <= stepping < 16):
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


def gfx_from_target_version(value: int | None) -> str | None:
    """90010 -> "gfx90a", 100301 -> "gfx1031"; None for 0 (a CPU node) and numbers that spell no name."""
    if not value:
        return None
    return gfx_name(value // 10000 % 100, value // 100 % 100, value % 100)


def is_gfx(name: str) -> bool:
    """Whether ``name`` is a processor name ("gfx90a", "gfx1100"), not a marketing name or a number."""
    return bool(_GFX_RE.match(name))


def target_id_of(text: str) -> tuple[str | None, str | None]:
    """(processor, full target ID) named in a text: "AMD Instinct MI300X (gfx942:sramecc+:xnack-)" ->
    ("gfx942", "gfx942:sramecc+:xnack-")."""
    m = _TARGET_ID_RE.search(text)
    if not m or not is_gfx(m.group(1)):
        return None, None
    return m.group(1), m.group(1) + m.group(2)
