"""The combiner: the AMD GPU facts from every source, in this order of precedence.

1. The KFD topology (/sys/class/kfd/kfd/topology/nodes/*/properties): the kernel's own list of the GPUs the
   ROCm runtime will see, with each one's ``gfx_target_version``; it gives the GPUs and their processors.
2. The PCI bus (/sys/bus/pci/devices: vendor 0x1002, class 0x03xxxx), with the driver bound to each device:
   the GPUs when there is no KFD topology, and what tells "no AMD GPU" from "a GPU without a KFD driver".
3. The device files: /dev/kfd and the GPUs' /dev/dri/renderD<minor>, which a container gets only with
   ``--device /dev/kfd --device /dev/dri``, and a user only in their group (render or video): os.access says.
4. The ROCm tools, run only when 1 or 2 found an AMD GPU (tools.py): the marketing names, and the processor
   where the kernel gave none.
5. The environment: HSA_OVERRIDE_GFX_VERSION (the processor the runtime claims instead), HIP_VISIBLE_DEVICES,
   ROCR_VISIBLE_DEVICES.

Nothing here raises: every failure becomes a status, a ``Fact.unknown(why)`` or an attempts line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from doctor.model.amd import (
    AMD_NO_DEVICE,
    AMD_NO_DRIVER,
    AMD_NO_GPU,
    AMD_NO_PERMISSION,
    AMD_OK,
    AMD_UNKNOWN,
    Amd,
    AmdGpu,
    AmdPciDevice,
    DeviceNode,
    KfdNode,
)
from doctor.model.facts import Fact
from doctor.probes.amd.parsers import ToolGpu, parse_override
from doctor.probes.amd.sysfs import (
    AMD_PCI_VENDOR,
    AMDGPU_VERSION,
    DRI,
    KFD_DEVICE,
    KFD_NODES,
    PCI_DEVICES,
    device_node,
    read_amdgpu_version,
    read_kfd_nodes,
    read_pci_amd_devices,
    render_nodes,
)
from doctor.probes.amd.tools import TOOLS, ask_tool, find_tool
from doctor.probes.windows_adapters import read_display_adapters
from doctor.runner import run

OVERRIDE = "HSA_OVERRIDE_GFX_VERSION"
VARIABLES = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def probe_amd(runner: Any = run, root: str = "/", env: Mapping[str, str] | None = None, timeout: float = 5.0,
              *, access=os.access, groups=None, system: str | None = None, winreg=None) -> Amd:
    """Gather the AMD facts in the documented order (module docstring). Never raises.

    ``access`` (os.access) and ``groups`` (this process's group ids) are seams for tests, which run as
    root; ``system`` (sys.platform) and ``winreg`` let them read a fake Windows registry."""
    env = os.environ if env is None else env
    variables = {name: env[name] for name in sorted(env) if name.startswith(OVERRIDE) or name in VARIABLES}
    override = _override(env)
    if (system or sys.platform) == "win32":
        return _windows(override, variables, winreg)
    if (system or sys.platform) not in ("linux", "linux2"):
        return Amd(status=AMD_UNKNOWN, detail="AMD GPUs are probed on Linux and Windows only",
                   override=override, variables=variables, driver_version=Fact.unknown("not Linux"))
    pci = read_pci_amd_devices(root)
    nodes = read_kfd_nodes(root)
    gpu_nodes = [node for node in nodes or () if node.gfx_target_version]
    version = read_amdgpu_version(root)
    if version:
        driver = Fact(version, AMDGPU_VERSION)
    elif os.path.isdir(os.path.join(root, "sys/module/amdgpu")):
        why = f"no {AMDGPU_VERSION}: the kernel's own amdgpu has no version file"
        driver = Fact.unknown(why, AMDGPU_VERSION)
    elif os.path.isdir(os.path.join(root, "sys/module")):
        driver = Fact.unknown("amdgpu is not loaded (no /sys/module/amdgpu)", AMDGPU_VERSION)
    else:
        driver = Fact.unknown("/sys/module cannot be read", AMDGPU_VERSION)
    seen = bool(gpu_nodes or pci)
    devices = [device_node(root, KFD_DEVICE, access, groups)] if seen or nodes is not None else []
    renders = [f"{DRI}/renderD{node.drm_render_minor}" for node in gpu_nodes if node.drm_render_minor]
    if seen and not renders and not gpu_nodes:
        renders = render_nodes(root)
    devices += [device_node(root, path, access, groups) for path in renders]

    attempts: list[str] = []
    gpus = _gpus(gpu_nodes, pci or [])
    if gpus:
        gpus = _ask_tools(gpus, runner, root, env, timeout, attempts)
    else:
        attempts.append("ROCm tools: not run (no AMD GPU on the PCI bus or in the KFD topology)")
    status, detail = _decide(pci, nodes, gpu_nodes, devices)
    return Amd(status=status, detail=detail, gpus=gpus, pci_devices=pci or [], kfd_nodes=nodes or [],
               device_nodes=devices, driver_version=driver, override=override, variables=variables,
               attempts=attempts)


def _windows(override: Fact, variables: dict, winreg) -> Amd:
    """Windows has no KFD topology, /sys or /dev: the AMD display adapters the registry lists, each named by
    its driver; the processor comes from the accelerator table's row for the PCI id."""
    adapters = read_display_adapters(winreg)
    if adapters is None:
        return Amd(status=AMD_UNKNOWN, detail="the Windows registry's display adapters could not be read",
                   override=override, variables=variables, driver_version=Fact.unknown("Windows"))
    amd = [a for a in adapters if a.vendor == AMD_PCI_VENDOR]
    pci = [AmdPciDevice(address=a.key, device_id=a.device, pci_class="0x030000") for a in amd]
    gpus = [AmdGpu(index=i, pci_address=a.key,
                   name=Fact(a.name, a.key) if a.name else Fact.unknown("unnamed", a.key),
                   gfx=Fact.unknown("Windows has no KFD topology", a.key)) for i, a in enumerate(amd)]
    detail = (f"{len(amd)} AMD display adapter(s) in the Windows registry" if amd
              else "no AMD display adapter in the Windows registry")
    return Amd(status=AMD_UNKNOWN if amd else AMD_NO_GPU, detail=detail, gpus=gpus, pci_devices=pci,
               override=override, variables=variables, driver_version=Fact.unknown("Windows"),
               attempts=["ROCm tools: not run (Windows)"])


def _override(env: Mapping[str, str]) -> Fact:
    value = env.get(OVERRIDE)
    if value is None:
        return Fact.unknown(f"{OVERRIDE} is not set", "environment")
    gfx, why = parse_override(value)
    source = f"{OVERRIDE}={value}"
    return Fact(gfx, source) if gfx else Fact.unknown(why or "unreadable", source)


def _gpus(gpu_nodes: list[KfdNode], pci) -> list[AmdGpu]:
    """One GPU per KFD GPU node (the runtime's order), else per AMD display device on the PCI bus."""
    if gpu_nodes:
        out = []
        for i, node in enumerate(gpu_nodes):
            where = f"{KFD_NODES}/{node.node}/properties"
            gfx = Fact(node.gfx, where) if node.gfx else Fact.unknown(
                f"gfx_target_version {node.gfx_target_version} names no processor", where)
            render = f"{DRI}/renderD{node.drm_render_minor}" if node.drm_render_minor else None
            out.append(AmdGpu(index=i, pci_address=node.pci_address, gfx=gfx, kfd_node=node.node,
                              render_node=render, name=Fact.unknown("no ROCm tool named it")))
        return out
    why = f"no KFD topology ({KFD_NODES}): the kernel gives no processor without it"
    return [AmdGpu(index=i, pci_address=device.address, gfx=Fact.unknown(why, PCI_DEVICES),
                   name=Fact.unknown(f"PCI device {device.device_id}: no ROCm tool named it", PCI_DEVICES))
            for i, device in enumerate(pci)]


def _ask_tools(gpus: list[AmdGpu], runner, root: str, env, timeout: float,
               attempts: list[str]) -> list[AmdGpu]:
    for name, args, parser in TOOLS:
        if all(gpu.name.known and gpu.gfx.known for gpu in gpus):
            break
        exe = find_tool(name, root, env)
        if exe is None:
            attempts.append(f"{name}: not found")
            continue
        answer, line = ask_tool(name, exe, args, parser, runner, timeout)
        attempts.append(line)
        gpus = [_merge(gpu, _match(gpu, answer.gpus), name) for gpu in gpus]
    return gpus


def _match(gpu: AmdGpu, found: tuple[ToolGpu, ...]) -> ToolGpu | None:
    """The tool's GPU that is ``gpu``: by KFD node, else by PCI address, else by position."""
    for said in found:
        if gpu.kfd_node is not None and said.node == gpu.kfd_node:
            return said
    for said in found:
        if gpu.pci_address and said.pci_address == gpu.pci_address:
            return said
    if all(said.node is None and said.pci_address is None for said in found) and gpu.index < len(found):
        return found[gpu.index]
    return None


def _merge(gpu: AmdGpu, said: ToolGpu | None, tool: str) -> AmdGpu:
    if said is None:
        return gpu
    name = gpu.name if gpu.name.known or not said.name else Fact(said.name, tool)
    gfx = gpu.gfx if gpu.gfx.known or not said.gfx else Fact(said.gfx, tool)
    return AmdGpu(index=gpu.index, pci_address=gpu.pci_address, name=name, gfx=gfx, kfd_node=gpu.kfd_node,
                  render_node=gpu.render_node)


def _decide(pci, nodes, gpu_nodes: list[KfdNode], devices: list[DeviceNode]) -> tuple[str, str]:
    if gpu_nodes:
        kfd = devices[0]
        if not kfd.exists:
            return AMD_NO_DEVICE, (f"{len(gpu_nodes)} GPU(s) in the KFD topology but no {KFD_DEVICE}: "
                                   "a container started without --device /dev/kfd --device /dev/dri?")
        refused = [d for d in devices if d.exists and not (d.readable and d.writable)]
        if refused:
            names = ", ".join(f"{d.path} (group {d.group})" for d in refused)
            return AMD_NO_PERMISSION, f"not readable and writable by this user: {names}"
        missing = [d.path for d in devices[1:] if not d.exists]
        if missing:
            return AMD_NO_DEVICE, f"render node(s) missing: {', '.join(missing)} (no --device /dev/dri?)"
        return AMD_OK, f"{len(gpu_nodes)} GPU(s) in the KFD topology"
    if pci:
        drivers = sorted({d.driver or "none" for d in pci})
        return AMD_NO_DRIVER, (f"{len(pci)} AMD display device(s) on the PCI bus "
                               f"(driver: {', '.join(drivers)}) but no GPU in the KFD topology")
    if pci is None and nodes is None:
        return AMD_UNKNOWN, f"{PCI_DEVICES} cannot be listed and there is no KFD topology"
    return AMD_NO_GPU, "no AMD display device on the PCI bus and no GPU in the KFD topology"
