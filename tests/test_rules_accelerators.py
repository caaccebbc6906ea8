"""The AMD, Intel and Apple rules and the wheel choice for them, over make_snapshot() with the AMD facts set
by hand, and the real bundled tables (doctor/rules/rocm.py, xpu.py, apple.py;
doctor/compat/accelerators.py)."""

from __future__ import annotations

import pytest
from factory import make_snapshot, torch_dist

from doctor.app.diagnose import diagnose
from doctor.compat.accelerators import (
    BY_OVERRIDE,
    MISSING,
    NATIVE,
    OVERRIDE_POSSIBLE,
    WRONG_OVERRIDE,
    BuildTargets,
    accelerators,
    amd_processors,
    judge_rocm,
    runnable_as,
)
from doctor.model.amd import (
    AMD_NO_DRIVER,
    AMD_NO_PERMISSION,
    AMD_OK,
    Amd,
    AmdGpu,
    AmdPciDevice,
    DeviceNode,
    HipKernels,
)
from doctor.model.facts import Fact
from doctor.table.load import load_table


@pytest.fixture(scope="module")
def table():
    return load_table()


def amd_snapshot(
    torch, *, gfx="gfx1031", device="0x73df", status=AMD_OK, override=None, nodes=None, kernels=None
):
    snap = make_snapshot(gpus=[], driver=None, max_cuda=None, nvidia_status="no-gpu", pci=[], torch=torch,
                         torchvision=None, torchaudio=None)
    gpu = AmdGpu(index=0, pci_address="0000:03:00.0",
                 gfx=Fact(gfx, "kfd") if gfx else Fact.unknown("no KFD topology"))
    snap.amd = Amd(
        status=status,
        gpus=[gpu],
        pci_devices=[AmdPciDevice("0000:03:00.0", device, "0x030000")],
        device_nodes=nodes or [],
        variables={"HSA_OVERRIDE_GFX_VERSION": override} if override else {},
        override=Fact(runnable(override), "env") if override else Fact.unknown("not set"),
    )
    if kernels is not None and snap.install.torch is not None:
        snap.install.torch.hip_kernels = kernels
    return snap


def runnable(override):
    from doctor.table.accelerators import override_processor

    return override_processor(override)


def ids(diag):
    return sorted({f.id for f in diag.findings})


def test_judge_rocm(table):
    acc = accelerators(table)
    held = BuildTargets(("gfx1030", "gfx1100"), False, "table", "verified")
    assert judge_rocm("gfx1100", held, None, acc).kind == NATIVE
    assert judge_rocm("gfx1031", held, None, acc).kind == OVERRIDE_POSSIBLE
    assert judge_rocm("gfx1031", held, "gfx1030", acc).kind == BY_OVERRIDE
    assert judge_rocm("gfx1031", held, "gfx1031", acc).kind == WRONG_OVERRIDE
    assert judge_rocm("gfx1031", held, "gfx1100", acc).kind == WRONG_OVERRIDE  # RDNA2 claiming RDNA3
    assert judge_rocm("gfx1150", held, None, acc).kind == MISSING  # 11.0.0 reported failing
    assert runnable_as(acc, "gfx1031") == "gfx1030" and runnable_as(acc, "gfx1100") == "gfx1100"
    assert runnable_as(acc, "gfx1010") == "gfx1010"  # 10.3.0 reported crashing


def test_the_pci_id_gives_the_processor_when_kfd_cannot(table):
    snap = amd_snapshot(torch_dist("2.7.1+cu126", "12.6"), gfx=None, device="0x744c", status=AMD_NO_DRIVER)
    [proc] = amd_processors(snap, accelerators(table))
    assert (proc.gfx, proc.confidence) == ("gfx1100", "inferred") and "0x744c" in proc.source
    diag = diagnose(snap, table)
    assert "torch-wrong-vendor-build" in ids(diag)
    assert diag.plan.target["variant"] == "rocm6.3" and diag.plan.target["torch"] == "2.7.1"


def test_the_binary_wins_over_the_table(table):
    read = HipKernels(status="ok", path="/x/libtorch_hip.so", targets=["gfx1031"], processors=["gfx1031"])
    snap = amd_snapshot(torch_dist("2.5.1+rocm6.2", None, hip="6.2"), kernels=read)
    assert ids(diagnose(snap, table)) == []  # a build made for gfx1031 (from source, say)
    snap = amd_snapshot(torch_dist("2.5.1+rocm6.2", None, hip="6.2"))
    assert ids(diagnose(snap, table)) == ["rocm-gfx-override-available"]


def test_a_rocm_build_without_the_processor_gets_a_newer_one(table):
    snap = amd_snapshot(torch_dist("2.4.1+rocm6.1", None, hip="6.1"), gfx="gfx1201", device="0x7550")
    diag = diagnose(snap, table)
    assert "rocm-gfx-unsupported" in ids(diag)
    # the nearest release above 2.4.1 whose ROCm wheel holds gfx1201 (astral-sh/uv#14086: 2.7.1+rocm6.3)
    assert diag.plan.target["label"] == "2.7.1+rocm6.3"


def test_device_permission(table):
    nodes = [DeviceNode("/dev/kfd", True, False, False, "render", False)]
    snap = amd_snapshot(torch_dist("2.7.1+rocm6.3", None, hip="6.3"), gfx="gfx1100", device="0x744c",
                        status=AMD_NO_PERMISSION, nodes=nodes)
    finding = next(f for f in diagnose(snap, table).findings if f.id == "amd-device-access")
    assert "sudo usermod -aG render $USER" in finding.fix.commands
    snap.host.container = "docker"  # the image's group ids are not the host's
    finding = next(f for f in diagnose(snap, table).findings if f.id == "amd-device-access")
    assert finding.fix.commands == [
        'docker run --device /dev/kfd --device /dev/dri --group-add "$(getent group render | cut -d: -f3)" '
        "<image> ..."]


def test_an_nvidia_gpu_beside_an_amd_apu_is_left_to_the_cuda_rules(table):
    snap = make_snapshot(torch=torch_dist("2.7.1+cu128", "12.8"))
    snap.amd = Amd(status=AMD_OK, gpus=[AmdGpu(index=0, gfx=Fact("gfx1036", "kfd"))])
    assert not {"torch-wrong-vendor-build", "rocm-gfx-unsupported"} & set(ids(diagnose(snap, table)))


def test_rosetta_and_mps_from_host_facts(table):
    snap = make_snapshot(
        os="darwin",
        machine="x86_64",
        gpus=[],
        driver=None,
        max_cuda=None,
        nvidia_status="no-gpu",
        pci=[],
        torch=torch_dist("2.2.2", None),
        torchvision=None,
        torchaudio=None,
    )
    snap.host.cpu, snap.host.translated = "Apple M1", True
    assert "python-under-rosetta" in ids(diagnose(snap, table))
    mac = make_snapshot(
        os="darwin",
        machine="arm64",
        gpus=[],
        driver=None,
        max_cuda=None,
        nvidia_status="no-gpu",
        pci=[],
        torch=torch_dist("2.5.1", None),
        torchvision=None,
        torchaudio=None,
    )
    mac.host.macos = "12.7.6"  # pytorch/pytorch#139425
    assert ids(diagnose(mac, table)) == ["macos-too-old-for-torch"]


def test_an_apu_no_rocm_wheel_holds_keeps_the_cpu_wheel(table):
    snap = amd_snapshot(None, gfx="gfx1035", device="0x1681")  # Radeon 680M: no ROCm wheel holds gfx1035
    diag = diagnose(snap, table)
    assert ids(diag) == ["torch-not-installed"]
    assert diag.plan.target["variant"] == "cpu"
    cpu = amd_snapshot(torch_dist("2.7.1+cpu", None), gfx="gfx1035", device="0x1681")
    assert ids(diagnose(cpu, table)) == []


def test_a_container_group_without_a_name_is_added_by_number(table):
    # the host's render gid, which the image's /etc/group does not name (a toolbox, a CI container)
    nodes = [DeviceNode("/dev/kfd", True, False, False, "991", False),
             DeviceNode("/dev/dri/renderD128", True, False, False, "991", False)]
    snap = amd_snapshot(torch_dist("2.7.1+rocm6.3", None, hip="6.3"), gfx="gfx1100", device="0x744c",
                        status=AMD_NO_PERMISSION, nodes=nodes)
    snap.host.container = "podman"
    finding = next(f for f in diagnose(snap, table).findings if f.id == "amd-device-access")
    assert finding.fix.commands == [
        "docker run --device /dev/kfd --device /dev/dri --group-add 991 <image> ...  "
        "# 991: the host's group id of /dev/kfd, /dev/dri/renderD128, unnamed in this container"]


def test_a_build_with_no_row_and_too_old_a_rocm_for_the_processor(table):
    # torch 2.7.1+rocm6.4 (AMD's wheel; no download.pytorch.org row) on an MI350X: gfx950 needs ROCm 7.0
    snap = amd_snapshot(torch_dist("2.7.1+rocm6.4", None, hip="6.4.43482"), gfx="gfx950", device="0x75a0")
    diag = diagnose(snap, table)
    finding = next(f for f in diag.findings if f.id == "rocm-gfx-unsupported")
    assert finding.severity == "error" and finding.evidence["rocm.floor"] == "7.0"
    assert finding.evidence["build.rocm"] == "6.4"
    assert diag.plan.target["variant"].startswith("rocm7")
    # a processor the table names no floor for stays unknown with such a build
    snap = amd_snapshot(torch_dist("2.7.1+rocm6.4", None, hip="6.4.43482"), gfx="gfx1100", device="0x744c")
    assert "rocm-gfx-unsupported" not in ids(diagnose(snap, table))


def test_a_cuda_build_on_an_amd_gpu_of_unknown_processor(table):
    # no KFD topology and a device id the table has no row for: a CUDA build still runs on none of it
    snap = amd_snapshot(torch_dist("2.4.1+cu121", "12.1"), gfx=None, device="0xffff", status=AMD_NO_DRIVER)
    diag = diagnose(snap, table)
    [found] = [f for f in diag.findings if f.id == "torch-wrong-vendor-build"]
    assert found.severity == "error"
    # which build runs is not known: nothing is installed on a guess (an APU's Radeon is in no ROCm wheel);
    # the fix finds the processor and names the newest ROCm wheel's processors and index
    assert not found.fix.actions and found.fix.commands == ["rocminfo | grep -m1 -o 'gfx[0-9a-f]*'"]
    assert "download.pytorch.org/whl/rocm" in found.fix.summary and "gfx1100" in found.fix.summary
    assert not str(diag.plan.target and diag.plan.target.get("variant") or "").startswith("rocm")
    # a CPU build may be all there is for such a GPU: not judged
    cpu = amd_snapshot(torch_dist("2.4.1+cpu", None), gfx=None, device="0xffff", status=AMD_NO_DRIVER)
    assert "torch-wrong-vendor-build" not in ids(diagnose(cpu, table))


def windows_amd(torch, device="0x744c"):
    snap = make_snapshot(os="windows", gpus=[], driver=None, max_cuda=None, nvidia_status="no-gpu", pci=[],
                         torch=torch, torchvision=None, torchaudio=None)
    key = r"HKLM\SYSTEM\CurrentControlSet\Control\Class\{4d36e968-e325-11ce-bfc1-08002be10318}\0000"
    snap.amd = Amd(status="unknown", gpus=[AmdGpu(index=0, pci_address=key, name=Fact("AMD Radeon", key),
                                                    gfx=Fact.unknown("Windows has no KFD topology", key))],
                   pci_devices=[AmdPciDevice(key, device, "0x030000")])
    return snap


def test_windows_amd_gpu_with_a_cpu_torch_names_amds_windows_builds(table):
    diag = diagnose(windows_amd(torch_dist("2.7.1+cpu", None)), table)  # RX 7900 XTX: gfx1100
    finding = next(f for f in diag.findings if f.id == "torch-wrong-vendor-build")
    assert finding.severity == "error" and finding.evidence["rocm.windows.family"] == "gfx110X-all"
    assert not finding.fix.commands  # no ROCm wheel on download.pytorch.org for Windows
    assert not any("rocm" in c for c in diag.plan.commands)
    # Strix Halo (gfx1151) likewise; an RX 6700 XT (gfx1031) has no Windows build: its CPU torch stays
    cpu = torch_dist("2.7.1+cpu", None)
    assert "torch-wrong-vendor-build" in ids(diagnose(windows_amd(cpu, "0x1586"), table))
    assert "torch-wrong-vendor-build" not in ids(diagnose(windows_amd(cpu, "0x73df"), table))


def test_windows_intel_arc_gets_the_xpu_wheel(table):
    snap = make_snapshot(os="windows", gpus=[], driver=None, max_cuda=None, nvidia_status="no-gpu", pci=[],
                         torch=torch_dist("2.11.0+cpu", None), torchvision=None, torchaudio=None)
    snap.host.intel_gpus = ["0x56a0"]
    diag = diagnose(snap, table)
    assert "xpu-wheel-needed" in ids(diag)
    assert any("whl/xpu" in c for c in diag.plan.commands)


def _intel_laptop(torch, device):
    snap = make_snapshot(gpus=[], driver=None, max_cuda=None, nvidia_status="no-gpu", pci=[], torch=torch,
                         torchvision=None, torchaudio=None)
    snap.host.intel_gpus = [device]
    return snap


def test_core_ultra_arc_graphics_runs_xpu_but_is_no_reason_for_it(table):
    from doctor.compat.accelerators import intel_xpu_gpus
    from doctor.compat.builds import torch_build
    from doctor.compat.wheels import machine_from_snapshot

    acc = accelerators(table)
    laptop = _intel_laptop(torch_dist("2.7.1+cpu", None), "0x7d55")  # Meteor Lake-H, Intel Arc Graphics
    assert [g.family for g in intel_xpu_gpus(laptop, acc, integrated=True)] == ["MTL-H Arc"]
    assert intel_xpu_gpus(laptop, acc, integrated=False) == []
    # the wheel choice keeps the CPU wheel
    assert not machine_from_snapshot(laptop, torch_build(laptop), acc).intel_xpu
    diag = diagnose(laptop, table)
    assert "xpu-wheel-needed" not in ids(diag)
    assert not any("whl/xpu" in c for c in diag.plan.commands)
    # plain Intel Graphics of the same chip, and Alder Lake: not on PyTorch's XPU page
    for device in ("0x7dd5", "0x4680"):
        assert intel_xpu_gpus(_intel_laptop(None, device), acc, integrated=True) == []


def test_xpu_from_facts_counts_a_listed_integrated_gpu(table):
    from doctor.compat.builds import torch_build
    from doctor.rules.requirements import _xpu_from_facts

    acc = accelerators(table)
    xpu = _intel_laptop(torch_dist("2.7.1+xpu", None), "0x64a0")  # Lunar Lake, Arc 140V
    assert _xpu_from_facts(xpu, "torch 2.7.1+xpu", torch_build(xpu), acc) == (True, "")
    gt1 = _intel_laptop(torch_dist("2.7.1+xpu", None), "0x4680")  # Alder Lake-S GT1
    ok, why = _xpu_from_facts(gt1, "torch 2.7.1+xpu", torch_build(gt1), acc)
    assert not ok
    assert why == "no XPU device usable: no Intel GPU that PyTorch's XPU builds list was found on the PCI bus"
