"""The AMD probe (doctor/probes/amd/): the parsers on recorded outputs (tests/fixtures/amd/README.md), the
probe over fake /sys and /dev roots and a runner that answers with those recordings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from doctor.model.amd import (
    AMD_NO_DEVICE,
    AMD_NO_DRIVER,
    AMD_NO_GPU,
    AMD_NO_PERMISSION,
    AMD_OK,
    AMD_UNKNOWN,
    gfx_from_target_version,
    target_id_of,
)
from doctor.probes.amd import probe_amd
from doctor.probes.amd.parsers import (
    parse_amd_smi_static,
    parse_kfd_properties,
    parse_override,
    parse_rocm_smi_productname,
    parse_rocminfo,
    pci_address,
)
from doctor.runner import RunResult

FIXTURES = Path(__file__).parent / "fixtures" / "amd"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- parsers --------------------------------------------------------------------------------------


@pytest.mark.parametrize("number, name", [
    (90010, "gfx90a"), (100301, "gfx1031"), (110000, "gfx1100"), (90402, "gfx942"), (110501, "gfx1151"),
    (80003, "gfx803"), (90012, "gfx90c"), (0, None), (None, None), (91600, None), (100316, None),
])
def test_target_version_names(number, name):
    assert gfx_from_target_version(number) == name


@pytest.mark.parametrize("value, name", [
    ("10.3.0", "gfx1030"), ("11.0.0", "gfx1100"), ("9.0.10", "gfx90a"), (" 9.4.2 ", "gfx942"),
])
def test_override_values(value, name):
    assert parse_override(value) == (name, None)


@pytest.mark.parametrize("value, why", [
    ("10.3", "not major.minor.stepping"), ("gfx1030", "not major.minor.stepping"), ("64.0.0", "out of range"),
    ("10.3.16", "names no processor"), ("", "not major.minor.stepping"),
])
def test_override_values_the_runtime_refuses(value, why):
    name, reason = parse_override(value)
    assert name is None and why in reason


def test_kfd_properties_and_pci_address():
    props = parse_kfd_properties("cpu_cores_count 0\nsimd_count 80\ngfx_target_version 100301\n"
                                 "location_id 768\ndomain 0\nbad line here\nname 12x\n")
    assert props == {"cpu_cores_count": 0, "simd_count": 80, "gfx_target_version": 100301, "location_id": 768,
                     "domain": 0}
    assert pci_address(0, 768) == "0000:03:00.0"
    assert pci_address(1, 0xC1 << 8 | 2 << 3 | 1) == "0001:c1:02.1"
    assert pci_address(0, None) is None


def test_target_id_in_a_device_name():
    mi300x = "AMD Instinct MI300X (gfx942:sramecc+:xnack-)"
    assert target_id_of(mi300x) == ("gfx942", "gfx942:sramecc+:xnack-")
    assert target_id_of("AMD Radeon RX 6700 XT (gfx1031)") == ("gfx1031", "gfx1031")
    assert target_id_of("NVIDIA GeForce RTX 4090") == (None, None)


def test_rocminfo_gpu_agents():
    rx580 = parse_rocminfo(fixture("rocminfo-gfx803-rx580-ollama2453.txt"))
    assert [(g.name, g.gfx, g.node, g.pci_address) for g in rx580.gpus] == [
        ("Radeon RX 580 Series", "gfx803", 1, "0000:01:00.0")]
    w6600 = parse_rocminfo(fixture("rocminfo-gfx1032-w6600-rocm1756.txt"))
    assert [(g.name, g.gfx, g.node) for g in w6600.gpus] == [("AMD Radeon PRO W6600", "gfx1032", 1)]


def test_rocminfo_without_a_gpu_says_why():
    cpu_only = parse_rocminfo(fixture("rocminfo-cpu-agent-opencl144.txt"))
    assert cpu_only.failure == "rocminfo listed no GPU agent"
    assert parse_rocminfo(fixture("rocminfo-5.2.3-no-driver.txt")).failure == (
        "ROCk module is NOT loaded, possibly no GPU devices")
    invalid = parse_rocminfo(fixture("rocminfo-kfd-invalid-argument-rocm4043.txt"))
    assert invalid.failure == ("Unable to open /dev/kfd read-write: Invalid argument "
                               "(root is member of nogroup group)")
    assert invalid.version == "6.7.0"
    assert parse_rocminfo(fixture("rocminfo-kfd-cannot-allocate-rocminfo41.txt")).failure.startswith(
        "Unable to open /dev/kfd read-write: Cannot allocate memory")


def test_amd_smi_static():
    answer = parse_amd_smi_static(fixture("amd-smi-static-mi350x-rocmsystems2987.txt"))
    assert [(g.index, g.name, g.gfx, g.pci_address) for g in answer.gpus] == [
        (0, "AMD Instinct MI350X", "gfx950", "0000:05:00.0")]
    assert parse_amd_smi_static("").failure == "amd-smi listed no GPU"


def test_rocm_smi_product_names():
    mi100 = parse_rocm_smi_productname(fixture("rocm-smi-productname-mi100-rocm1351.txt"))
    assert [(g.index, g.name, g.gfx) for g in mi100.gpus] == [(0, "0x738c", None)]
    fiji = parse_rocm_smi_productname(fixture("rocm-smi-productname-fiji-easybuild3978.txt"))
    assert [g.name for g in fiji.gpus] == ["Fiji [Radeon R9 FURY / NANO Series]"]
    assert parse_rocm_smi_productname(fixture("rocm-smi-5.2.3-no-driver.txt")).failure == (
        "cat: /sys/module/amdgpu/initstate: No such file or directory")


# --- the probe over fake roots ---------------------------------------------------------------------

RX6700 = "0000:03:00.0"


def make_root(tmp_path: Path, *, pci=(), kfd=None, dev=(), amdgpu_version=None) -> str:
    root = tmp_path / "root"
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    for address, vendor, klass, device, driver in pci:
        folder = root / "sys/bus/pci/devices" / address
        folder.mkdir()
        (folder / "vendor").write_text(vendor + "\n")
        (folder / "class").write_text(klass + "\n")
        (folder / "device").write_text(device + "\n")
        if driver:
            (root / "sys/bus/pci/drivers" / driver).mkdir(parents=True, exist_ok=True)
            os.symlink(f"../../../bus/pci/drivers/{driver}", folder / "driver")
    for number, (name, properties) in (kfd or {}).items():
        folder = root / "sys/class/kfd/kfd/topology/nodes" / str(number)
        folder.mkdir(parents=True)
        (folder / "name").write_text(name + "\n")
        (folder / "properties").write_text("".join(f"{k} {v}\n" for k, v in properties.items()))
    if amdgpu_version:
        (root / "sys/module/amdgpu").mkdir(parents=True)
        (root / "sys/module/amdgpu/version").write_text(amdgpu_version + "\n")
    for path in dev:
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_text("")
    return str(root)


CPU_NODE = ("", {"cpu_cores_count": 16, "simd_count": 0, "gfx_target_version": 0})
GPU_NODE = ("navy_flounder", {"cpu_cores_count": 0, "simd_count": 80, "gfx_target_version": 100301,
                              "vendor_id": 4098, "device_id": 29663, "location_id": 768, "domain": 0,
                              "drm_render_minor": 128})
PCI_RX6700 = (RX6700, "0x1002", "0x030000", "0x73df", "amdgpu")
PCI_NVIDIA = ("0000:01:00.0", "0x10de", "0x030000", "0x2684", "nvidia")


class Runner:
    """Answers each tool (by its file name) with a recorded output."""

    def __init__(self, answers: dict[str, tuple[int, str]]):
        self.answers, self.calls = answers, []

    def __call__(self, argv, timeout=None, **kw):
        name = os.path.basename(argv[0])
        self.calls.append([name, *argv[1:]])
        if name not in self.answers:
            return RunResult(argv, None, not_found=True)
        code, text = self.answers[name]
        return RunResult(argv, code, stdout=text)


def tools_on_path(tmp_path: Path, *names: str) -> dict[str, str]:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    return {"PATH": str(folder)}


ROCMINFO_6700 = ("*******\nAgent 2\n*******\n  Name:                    gfx1031\n"
                 "  Marketing Name:          AMD Radeon RX 6700 XT\n  Node:                    1\n"
                 "  Device Type:             GPU\n")


def test_a_healthy_rx_6700_xt(tmp_path):
    root = make_root(tmp_path, pci=[PCI_RX6700, PCI_NVIDIA], kfd={0: CPU_NODE, 1: GPU_NODE},
                     dev=["/dev/kfd", "/dev/dri/renderD128"], amdgpu_version="6.7.0")
    env = tools_on_path(tmp_path, "rocminfo", "amd-smi") | {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}
    runner = Runner({"rocminfo": (0, ROCMINFO_6700)})
    amd = probe_amd(runner=runner, root=root, env=env, groups=[0])
    assert amd.status == AMD_OK, amd.detail
    [gpu] = amd.gpus
    assert (gpu.pci_address, gpu.kfd_node, gpu.render_node) == (RX6700, 1, "/dev/dri/renderD128")
    assert (gpu.gfx.value, gpu.gfx.source) == ("gfx1031", "/sys/class/kfd/kfd/topology/nodes/1/properties")
    assert (gpu.name.value, gpu.name.source) == ("AMD Radeon RX 6700 XT", "rocminfo")
    assert [d.address for d in amd.pci_devices] == [RX6700] and amd.pci_devices[0].driver == "amdgpu"
    nodes = [(n.node, n.gfx, n.name) for n in amd.kfd_nodes]
    assert nodes == [(0, None, None), (1, "gfx1031", "navy_flounder")]
    assert (amd.override.value, amd.override.source) == ("gfx1030", "HSA_OVERRIDE_GFX_VERSION=10.3.0")
    assert amd.variables == {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}
    assert amd.driver_version.value == "6.7.0"
    assert [d.path for d in amd.device_nodes] == ["/dev/kfd", "/dev/dri/renderD128"]
    assert runner.calls == [["rocminfo"]]  # every GPU named: amd-smi is not started
    assert amd.attempts == ["rocminfo: ok, 1 GPU"]


def test_container_without_dev_kfd(tmp_path):
    root = make_root(tmp_path, pci=[PCI_RX6700], kfd={0: CPU_NODE, 1: GPU_NODE})
    runner = Runner({"rocminfo": (1, fixture("rocminfo-kfd-invalid-argument-rocm4043.txt"))})
    amd = probe_amd(runner=runner, root=root, env=tools_on_path(tmp_path, "rocminfo"))
    assert amd.status == AMD_NO_DEVICE and "--device /dev/kfd" in amd.detail
    assert [d.exists for d in amd.device_nodes] == [False, False]
    assert amd.gpus[0].gfx.value == "gfx1031"  # the kernel still says which GPU it is
    assert amd.gpus[0].name.why == "no ROCm tool named it"
    assert amd.attempts[0] == ("rocminfo: Unable to open /dev/kfd read-write: Invalid argument "
                               "(root is member of nogroup group) (exit 1)")
    assert amd.attempts[1:] == ["amd-smi: not found", "rocm-smi: not found"]


def test_dev_kfd_present_but_not_ours(tmp_path):
    root = make_root(tmp_path, pci=[PCI_RX6700], kfd={0: CPU_NODE, 1: GPU_NODE},
                     dev=["/dev/kfd", "/dev/dri/renderD128"])
    refused = {os.path.join(root, "dev/kfd")}
    amd = probe_amd(runner=Runner({}), root=root, env={}, groups=[12345],
                    access=lambda path, mode: path not in refused)
    assert amd.status == AMD_NO_PERMISSION
    kfd = amd.device_nodes[0]
    assert (kfd.exists, kfd.readable, kfd.writable, kfd.in_group) == (True, False, False, False)
    assert kfd.group and kfd.group in amd.detail


def test_group_names_come_from_the_fake_roots_group_file(tmp_path):
    root = make_root(tmp_path, pci=[PCI_RX6700], kfd={0: CPU_NODE, 1: GPU_NODE},
                     dev=["/dev/kfd", "/dev/dri/renderD128"])
    gid = os.stat(os.path.join(root, "dev/kfd")).st_gid
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    with open(os.path.join(root, "etc/group"), "w") as fh:
        fh.write(f"# a comment\nvideo:x:{gid + 1}:\nrender:x:{gid}:user\n")
    amd = probe_amd(runner=Runner({}), root=root, env={}, groups=[12345], access=lambda path, mode: False)
    assert [d.group for d in amd.device_nodes] == ["render", "render"]
    os.remove(os.path.join(root, "etc/group"))  # a gid the machine has no name for: its number
    amd = probe_amd(runner=Runner({}), root=root, env={}, groups=[12345], access=lambda path, mode: False)
    assert amd.device_nodes[0].group == str(gid)


def test_a_gpu_without_a_kfd_driver(tmp_path):
    root = make_root(tmp_path, pci=[(RX6700, "0x1002", "0x030000", "0x73df", None)])
    amd = probe_amd(runner=Runner({}), root=root, env={})
    assert amd.status == AMD_NO_DRIVER and "driver: none" in amd.detail
    assert amd.gpus[0].gfx.why.startswith("no KFD topology")
    assert amd.gpus[0].name.why.startswith("PCI device 0x73df")


def test_no_amd_gpu_runs_no_tool(tmp_path):
    runner = Runner({"rocminfo": (0, ROCMINFO_6700)})
    amd = probe_amd(runner=runner, root=make_root(tmp_path, pci=[PCI_NVIDIA]),
                    env=tools_on_path(tmp_path, "rocminfo"))
    assert amd.status == AMD_NO_GPU and amd.gpus == [] and runner.calls == []
    assert amd.device_nodes == []
    assert amd.driver_version.why == "/sys/module cannot be read"


def test_no_pci_bus_and_no_topology_is_unknown(tmp_path):
    amd = probe_amd(runner=Runner({}), root=str(tmp_path), env={})
    assert amd.status == AMD_UNKNOWN and "cannot be listed" in amd.detail


def test_tools_fill_what_the_kernel_does_not_say(tmp_path):
    node = ("", dict(GPU_NODE[1], gfx_target_version=91600))  # a number that spells no name
    root = make_root(tmp_path, pci=[PCI_RX6700], kfd={1: node}, dev=["/dev/kfd", "/dev/dri/renderD128"])
    smi = ("GPU: 0\n    ASIC:\n        MARKET_NAME: AMD Radeon RX 6700 XT\n"
           "        TARGET_GRAPHICS_VERSION: gfx1031\n    BUS:\n        BDF: 0000:03:00.0\n")
    runner = Runner({"rocminfo": (1, fixture("rocminfo-5.2.3-no-driver.txt")), "amd-smi": (0, smi)})
    amd = probe_amd(runner=runner, root=root, env=tools_on_path(tmp_path, "rocminfo", "amd-smi"))
    gpu = amd.gpus[0]
    assert (gpu.gfx.value, gpu.gfx.source, gpu.name.source) == ("gfx1031", "amd-smi", "amd-smi")
    assert runner.calls == [["rocminfo"], ["amd-smi", "static", "--asic", "--bus"]]


def test_a_bad_override_keeps_why_and_the_variables(tmp_path):
    env = {"HSA_OVERRIDE_GFX_VERSION": "gfx1030", "HIP_VISIBLE_DEVICES": "0", "ROCR_VISIBLE_DEVICES": "",
           "HSA_OVERRIDE_GFX_VERSION_1": "11.0.0", "CUDA_VISIBLE_DEVICES": "1"}
    amd = probe_amd(runner=Runner({}), root=make_root(tmp_path), env=env)
    assert amd.override.value is None and "not major.minor.stepping" in amd.override.why
    assert amd.variables == {"HIP_VISIBLE_DEVICES": "0", "HSA_OVERRIDE_GFX_VERSION": "gfx1030",
                             "HSA_OVERRIDE_GFX_VERSION_1": "11.0.0", "ROCR_VISIBLE_DEVICES": ""}


def test_not_linux():
    amd = probe_amd(runner=Runner({}), env={}, system="darwin")
    assert amd.status == AMD_UNKNOWN and amd.detail == "AMD GPUs are probed on Linux and Windows only"


# --- collect_env text ------------------------------------------------------------------------------


def test_collect_env_of_a_rocm_build_gives_the_amd_section():
    from doctor.inputs.collect_env import parse_collect_env

    snap = parse_collect_env(fixture("collect-env-rocm6.3-rx5700xt-pytorch145670.txt"))
    amd = snap.amd
    assert amd.status == AMD_OK
    [gpu] = amd.gpus
    assert (gpu.name.value, gpu.gfx.value) == ("AMD Radeon RX 5700 XT", "gfx1010")
    assert gpu.target_id == "gfx1010:xnack-"
    assert gpu.gfx.source.startswith("collect_env")
    assert (amd.hip_runtime_version.value, amd.miopen_version.value) == ("6.3.42131", "3.3.0")
    assert snap.install.torch.hip == "6.3.42131-fa1d09cbd"  # "ROCM used to build PyTorch", as before
    assert "amd.gpus: collect_env names device 0 only" in snap.unknowns
    assert snap.to_dict()["amd"]["gpus"][0]["target_id"] == "gfx1010:xnack-"


def test_collect_env_of_a_cuda_build_has_no_amd_section():
    from doctor.inputs.collect_env import parse_collect_env

    cuda_paste = Path(__file__).parent / "fixtures" / "collect_env" / "composed-2.5.1-cu121-rtx4090-pip.txt"
    text = cuda_paste.read_text()
    snap = parse_collect_env(text)
    assert snap.amd is None and "amd" not in snap.to_dict()


# --- reports read back (--from) ----------------------------------------------------------------------


def test_a_report_with_the_amd_section_reads_back_and_an_older_one_without_it_too():
    import json

    from doctor.inputs.reports import read_report, validate_report

    data = json.loads((Path(__file__).parent / "golden" / "cpu-healthy.json").read_text())
    name = {"value": "AMD Radeon RX 6700 XT", "source": "rocminfo", "why": None}
    data["snapshot"]["amd"]["gpus"] = [{"index": 0, "pci_address": RX6700, "target_id": None, "name": name,
                                        "gfx": {"value": "gfx1031", "source": "kfd", "why": None},
                                        "kfd_node": 1, "render_node": "/dev/dri/renderD128"}]
    # (the golden file is normalised, so other keys may be reported: none of the AMD section's)
    assert not [line for line in validate_report(data) if "amd" in line]
    snap, meta = read_report(json.dumps(data))
    assert snap.amd.gpus[0].gfx.value == "gfx1031"
    assert not [path for path in meta["missing_fields"] if ".amd" in path]
    del data["snapshot"]["amd"]
    snap, meta = read_report(json.dumps(data))
    assert snap.amd is None and not [path for path in meta["missing_fields"] if ".amd" in path]
    data["snapshot"]["amd"] = {"status": "ok", "gpus": [{"gfx": {"value": ["gfx1031"]}}]}
    with pytest.raises(Exception, match="amd.gpus\\[0\\].gfx.value"):
        read_report(json.dumps(data))


class FakeWinreg:
    """The part of ``winreg`` the display-adapter probe uses, over {subkey: {value name: value}} under the
    Display class key."""

    HKEY_LOCAL_MACHINE = "HKLM"

    def __init__(self, adapters: dict):
        from doctor.probes.windows_adapters import DISPLAY_CLASS_KEY

        self.base = DISPLAY_CLASS_KEY
        self.adapters = adapters

    def OpenKey(self, root, path):  # noqa: N802 - winreg's names
        import contextlib

        if path != self.base and path.rsplit("\\", 1)[-1] not in self.adapters:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        return contextlib.nullcontext(path)

    def EnumKey(self, key, index):  # noqa: N802
        names = sorted(self.adapters)
        if index >= len(names):
            raise OSError(259, "No more data is available")
        return names[index]

    def QueryValueEx(self, key, name):  # noqa: N802
        values = self.adapters.get(key.rsplit("\\", 1)[-1], {})
        if name not in values:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        return values[name], 1  # REG_SZ


RX7900_WIN = {"MatchingDeviceId": "PCI\\VEN_1002&DEV_744C&REV_C8", "DriverDesc": "AMD Radeon RX 7900 XTX"}
ARC_WIN = {"MatchingDeviceId": "pci\\ven_8086&dev_56a1", "DriverDesc": "Intel(R) Arc(TM) A750 Graphics"}


def test_windows_display_adapters_from_the_registry():
    from doctor.probes.windows_adapters import read_display_adapters

    basic = {"MatchingDeviceId": "ROOT\\BasicRender", "DriverDesc": "Microsoft Basic Render"}
    reg = FakeWinreg({"0000": RX7900_WIN, "0001": ARC_WIN, "Properties": {}, "0002": basic})
    found = read_display_adapters(reg)
    assert [(a.vendor, a.device, a.name) for a in found] == [
        ("0x1002", "0x744c", "AMD Radeon RX 7900 XTX"),
        ("0x8086", "0x56a1", "Intel(R) Arc(TM) A750 Graphics"),
    ]
    assert found[0].key.endswith("\\0000")
    assert read_display_adapters(FakeWinreg({})) == []


def test_windows_amd_gpus_come_from_the_display_adapters():
    amd = probe_amd(runner=Runner({}), env={}, system="win32", winreg=FakeWinreg({"0000": RX7900_WIN}))
    assert amd.status == AMD_UNKNOWN and "1 AMD display adapter" in amd.detail
    assert amd.gpus[0].name.value == "AMD Radeon RX 7900 XTX" and not amd.gpus[0].gfx.known
    assert amd.pci_devices[0].device_id == "0x744c"
    assert amd.pci_devices[0].address == amd.gpus[0].pci_address  # the table's PCI row gives the processor
    none = probe_amd(runner=Runner({}), env={}, system="win32", winreg=FakeWinreg({"0001": ARC_WIN}))
    assert none.status == AMD_NO_GPU and not none.gpus
