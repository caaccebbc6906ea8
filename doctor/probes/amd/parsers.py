"""Pure parsers of what the AMD sources say: the KFD topology's ``properties`` files, the GPU target number,
HSA_OVERRIDE_GFX_VERSION, and what ``rocminfo``, ``amd-smi static`` and ``rocm-smi --showproductname`` print.
No I/O: each is tested on the recordings in tests/fixtures/amd/.

The target number: the kernel writes ``gfx_target_version`` = major*10000 + minor*100 + stepping
(drivers/gpu/drm/amd/amdkfd/kfd_device.c: IP 9.4.2 "Aldebaran" -> 90010, IP 10.3.2 "Navy Flounder" -> 100301),
and the runtime splits it the same way (ROCR-Runtime libhsakmt: HSA_GET_GFX_VERSION_MAJOR(v) = v/10000 % 100,
_MINOR = v/100 % 100, _STEP = v % 100). LLVM names the processor gfx<major><minor><stepping> with minor and
stepping as one hex digit each: 90010 -> gfx90a, 100301 -> gfx1031, 110000 -> gfx1100.
HSA_OVERRIDE_GFX_VERSION is "major.minor.stepping" in decimal ("10.3.0"), read by libhsakmt with
``sscanf("%u.%u.%u")``; it refuses major > 63, minor > 255 or stepping > 255.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.model.amd import gfx_name, is_gfx
from doctor.model.files import MAX_DIGITS

_OVERRIDE_RE = re.compile(r"^(\d{1,5})\.(\d{1,5})\.(\d{1,5})$")
_KEY_RE = re.compile(r"^  (\S[^:]*?):\s*(.*?)\s*$")  # rocminfo: an agent's own fields are indented by two
_SMI_GPU_RE = re.compile(r"^GPU\[(\d{1,4})\]\s*:\s*([^:]+?):\s*(.*?)\s*$")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class ToolGpu:
    """One GPU as a ROCm tool described it."""

    index: int | None = None  # the tool's own index (amd-smi "GPU: 0", rocm-smi "GPU[0]")
    name: str | None = None  # the marketing name
    gfx: str | None = None  # the processor, when the tool printed one that is a real name
    node: int | None = None  # the KFD node (rocminfo "Node:")
    pci_address: str | None = None


@dataclass(frozen=True)
class ToolAnswer:
    """What one run of a tool gave: its GPUs, or the one line that says why it gave none."""

    gpus: tuple[ToolGpu, ...] = ()
    failure: str | None = None  # "ROCk module is NOT loaded, possibly no GPU devices", ...
    version: str | None = None  # rocminfo's "ROCk module version 6.7.0 is loaded": "6.7.0"


def parse_override(value: str) -> tuple[str | None, str | None]:
    """(processor, why not) of an HSA_OVERRIDE_GFX_VERSION value: "10.3.0" -> ("gfx1030", None)."""
    m = _OVERRIDE_RE.match(value.strip())
    if not m:
        return None, f"{value!r} is not major.minor.stepping (libhsakmt refuses it)"
    major, minor, stepping = (int(part) for part in m.groups())
    if major > 63 or minor > 255 or stepping > 255:
        return None, f"{value!r} is out of range (libhsakmt refuses it)"
    name = gfx_name(major, minor, stepping)
    if name is None:
        return None, f"{value!r} names no processor LLVM knows (minor and stepping are one hex digit each)"
    return name, None


def parse_kfd_properties(text: str) -> dict[str, int]:
    """A KFD topology ``properties`` file ("name value" lines) as integers; lines that are not are skipped."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isascii() and parts[1].isdigit() and len(parts[1]) <= MAX_DIGITS + 2:
            out.setdefault(parts[0], int(parts[1]))
    return out


def pci_address(domain: int | None, location_id: int | None) -> str | None:
    """A KFD node's PCI address: ``location_id`` is bus << 8 | device << 3 | function (rocminfo's BDFID)."""
    if location_id is None or not 0 <= location_id <= 0xFFFF:
        return None
    domain = domain or 0
    if not 0 <= domain <= 0xFFFFFFFF:
        return None
    return f"{domain:04x}:{location_id >> 8:02x}:{location_id >> 3 & 0x1F:02x}.{location_id & 7}"


def parse_rocminfo(text: str) -> ToolAnswer:
    """The GPU agents of ``rocminfo``'s output, or why it listed none (its first lines say so)."""
    text = _ANSI_RE.sub("", text)
    version = None
    m = re.search(r"ROCk module version (\S+) is loaded", text)
    if m:
        version = m.group(1)
    gpus = []
    for block in re.split(r"(?m)^Agent \d+[ \t]*$", text)[1:]:  # "*******" / "Agent 2" / "*******"
        fields: dict[str, str] = {}
        for line in block.splitlines():
            km = _KEY_RE.match(line)
            if km:
                fields.setdefault(km.group(1), km.group(2))
        kind = fields.get("Device Type")
        name = fields.get("Name", "")
        if kind != "GPU" and not (kind is None and name.startswith("gfx")):
            continue
        gfx = name if is_gfx(name) else None
        gpus.append(ToolGpu(name=fields.get("Marketing Name") or None, gfx=gfx, node=_int(fields.get("Node")),
                            pci_address=pci_address(0, _int(fields.get("BDFID")))))
    if gpus:
        return ToolAnswer(gpus=tuple(gpus), version=version)
    return ToolAnswer(failure=_first_failure(text) or "rocminfo listed no GPU agent", version=version)


def _first_failure(text: str) -> str | None:
    for pattern in (r"Unable to open /dev/kfd[^\n]*", r"ROCk module is NOT loaded[^\n]*",
                    r"hsa api call failure[^\n]*", r"Call returned[^\n]*"):
        m = re.search(pattern, text)
        if m:
            line = m.group(0).strip()
            member = re.search(r"(?m)^\S+ is (?:not )?member of [^\n]*", text)
            return f"{line} ({member.group(0).strip()})" if member and "kfd" in line else line
    return None


def parse_amd_smi_static(text: str) -> ToolAnswer:
    """``amd-smi static --asic --bus``: per "GPU: N" block, MARKET_NAME, TARGET_GRAPHICS_VERSION and BDF."""
    gpus, current = [], None
    for line in text.splitlines():
        m = re.match(r"^GPU:\s*(\d{1,4})\s*$", line)
        if m:
            current = {"index": int(m.group(1))}
            gpus.append(current)
            continue
        km = re.match(r"^\s+([A-Z_]+):\s*(.*?)\s*$", line)
        if current is not None and km:
            current.setdefault(km.group(1), km.group(2))
    out = []
    for gpu in gpus:
        gfx = gpu.get("TARGET_GRAPHICS_VERSION", "")
        name = gpu.get("MARKET_NAME", "")
        out.append(ToolGpu(index=gpu["index"], name=name if name and name != "N/A" else None,
                           gfx=gfx if is_gfx(gfx) else None,
                           pci_address=(gpu.get("BDF") or "").lower() or None))
    if out:
        return ToolAnswer(gpus=tuple(out))
    return ToolAnswer(failure=_one_line(text) or "amd-smi listed no GPU")


def parse_rocm_smi_productname(text: str) -> ToolAnswer:
    """``rocm-smi --showproductname``: per GPU[N], the name ("Card series", or "Device Name" in newer ones).

    Its "GFX Version" is not taken: rocm-smi spells the target number's parts in decimal ("gfx9010" for
    gfx90a, ROCm/rocm_smi_lib#159)."""
    fields: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        m = _SMI_GPU_RE.match(line.strip())
        if m:
            fields.setdefault(int(m.group(1)), {}).setdefault(m.group(2).strip().lower(), m.group(3))
    out = []
    for index in sorted(fields):
        values = fields[index]
        name = values.get("device name") or values.get("card series") or values.get("card model")
        out.append(ToolGpu(index=index, name=name or None))
    if out:
        return ToolAnswer(gpus=tuple(out))
    return ToolAnswer(failure=_one_line(text) or "rocm-smi listed no GPU")


def _one_line(text: str) -> str:
    """The first line that says something ("ERROR:root:Driver not initialized ..."), without banners."""
    for line in _ANSI_RE.sub("", text).splitlines():
        line = line.strip()
        if line and not line.startswith("=") and not line.startswith("$"):
            return line[:200]
    return ""


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    m = re.match(r"^\s*(\d{1,18})", value)
    return int(m.group(1)) if m else None
