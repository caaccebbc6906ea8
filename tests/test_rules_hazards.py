"""Hazard rules over constructed snapshots: each test starts from a healthy machine and changes one thing."""

from __future__ import annotations

from pathlib import Path

import pytest
from factory import gpu, make_snapshot, torch_dist, written

from doctor.compat.assessment import assess
from doctor.model import snapshot as S
from doctor.model.environment import (
    Conda,
    CondaRecord,
    Container,
    Cpu,
    CudaHome,
    CudaLib,
    CudaToolkitDir,
    DistRecord,
    LdSoConf,
    Libraries,
    LibraryDir,
    Memory,
    PythonFacts,
    Shm,
    UserSite,
    VisibleDevices,
    Wsl,
)
from doctor.model.findings import ERROR, INFO, WARNING
from doctor.rules import all_rules
from doctor.rules import hazards as H
from doctor.rules.hazards import containers, devices, installs, libraries, resources, wsl

GIB = 1024**3
PY = "/home/u/venv/bin/python"
SITE = "/home/u/venv/lib/python3.12/site-packages"


def snap_with(**sections):
    snap = sections.pop("snap", None) or make_snapshot()
    for key, section in sections.items():
        setattr(snap.environment, key, section)
    return snap


def ids(findings):
    return [f.id for f in findings]


def one(findings, fid):
    found = [f for f in findings if f.id == fid]
    assert len(found) == 1, ids(findings)
    return found[0]


def test_registered_with_every_id():
    rules = {r.id: r for r in all_rules()}
    for rule in H.RULES:
        assert rules[rule.id] is rule
    assert {r.id for r in H.RULES} == {
        "containers", "shm", "cpu-quota", "memory", "visible-devices",
        "library-shadowing", "mixed-installs", "interpreter-hygiene", "wsl",
    }  # fmt: skip


def test_rules_module_is_pure():
    import subprocess
    import sys

    code = ("import sys, doctor.rules.hazards; print([m for m in ('psutil', 'subprocess', 'pynvml', 'torch') "
        "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_empty_environment_says_nothing():
    snap = make_snapshot()
    for rule in H.RULES:
        assert rule.func(assess(snap, None)) == [], rule.id


def test_healthy_environment_says_nothing():
    snap = snap_with(
        container=Container(kind=None, device_nodes=["/dev/nvidia0"], gpu_device_nodes=1),
        shm=Shm(total_bytes=32 * GIB, free_bytes=32 * GIB),
        cpu=Cpu(cpu_count=16, affinity=16, cgroup="v2", quota_cpus=None, budget=16),
        memory=Memory(total_bytes=64 * GIB, available_bytes=50 * GIB, swap_total_bytes=8 * GIB),
        visible_devices=VisibleDevices(),
        libraries=Libraries(variable="LD_LIBRARY_PATH", value=None, dirs=[]),
        cuda_home=CudaHome(variable=None, path="/usr/local/cuda", version="12.8.1"),
        wsl=Wsl(is_wsl=False, evidence=[]),
        python=PythonFacts(dists=[DistRecord(name="torch", version="2.7.1+cu128", location=SITE, installer="pip")],
                           user_site=UserSite(enabled=False, path=None), conda=None),
    )  # fmt: skip
    for rule in H.RULES:
        assert rule.func(assess(snap, None)) == [], rule.id


# --- containers ---------------------------------------------------------------------------------


def container(kind="docker", nodes=(), **extra):
    gpu_nodes = sum(1 for n in nodes if n[len("/dev/nvidia") :].isdigit())
    facts = {
        "kind": kind,
        "device_nodes": list(nodes),
        "gpu_device_nodes": gpu_nodes,
        "cuda_image": False,
        # fmt: skip
        "cuda_image_evidence": [],
        "nvidia_visible_devices": None,
        "nvidia_driver_capabilities": None,
    } | extra
    return Container(**facts)


def test_docker_without_gpus_and_a_cuda_torch_alone_is_only_a_note():
    # plain `pip install torch` is a CUDA build on Linux: in a CPU-only CI container nothing expects a GPU
    snap = snap_with(snap=make_snapshot(nvidia_status=S.NVIDIA_NO_GPU, gpus=[]), container=container())
    finding = one(containers.check_containers(assess(snap, None)), "container-no-gpu-access")
    assert finding.severity == INFO
    assert "docker run --gpus all <image> ..." in finding.fix.commands
    assert any("nvidia-ctk runtime configure --runtime=docker" in c for c in finding.fix.commands)
    assert finding.evidence["expects_gpu"] == ["torch 2.7.1+cu128 is a CUDA build"]


def test_kubernetes_remedy_is_the_device_plugin():
    snap = snap_with(
        snap=make_snapshot(nvidia_status=S.NVIDIA_NO_DRIVER, gpus=[]), container=container("kubernetes")
    )
    finding = one(containers.check_containers(assess(snap, None)), "container-no-gpu-access")
    assert "nvidia.com/gpu" in finding.fix.summary and "device plugin" in finding.fix.summary
    assert finding.fix.links == ["https://github.com/NVIDIA/k8s-device-plugin"]


def test_podman_remedy_is_cdi():
    snap = snap_with(
        snap=make_snapshot(nvidia_status=S.NVIDIA_NO_GPU, gpus=[]), container=container("podman")
    )
    finding = one(containers.check_containers(assess(snap, None)), "container-no-gpu-access")
    assert "podman run --device nvidia.com/gpu=all <image> ..." in finding.fix.commands


@pytest.mark.parametrize("cuda_torch", [True, False])
@pytest.mark.parametrize(
    ("facts", "severity"),
    [
        ({"nvidia_visible_devices": "all"}, ERROR),  # the NVIDIA runtime was told to give GPUs
        ({"cuda_image": True, "cuda_image_evidence": ["NVIDIA_REQUIRE_CUDA=cuda>=12.4"]}, ERROR),
        ({"cuda_image": True, "cuda_image_evidence": ["CUDA_VERSION=12.4.1"]}, WARNING),
        ({"cuda_image": True, "cuda_image_evidence": ["/usr/local/cuda exists"]}, INFO),
    ],
)
def test_severity_follows_what_says_a_gpu_is_wanted(facts, severity, cuda_torch):
    torch = torch_dist() if cuda_torch else torch_dist("2.7.1+cpu", cuda=None)
    snap = make_snapshot(nvidia_status=S.NVIDIA_NO_GPU, gpus=[], torch=torch)
    snap = snap_with(snap=snap, container=container(**facts))
    facts = assess(snap, None)
    assert one(containers.check_containers(facts), "container-no-gpu-access").severity == severity


@pytest.mark.parametrize("wanted", [["--require cuda"], ["[tool.torchdoctor] require = gpu"], ["--device 0"]])
def test_a_stated_requirement_makes_it_an_error(wanted):
    snap = snap_with(snap=make_snapshot(nvidia_status=S.NVIDIA_NO_GPU, gpus=[]), container=container())
    snap.gpu_wanted = wanted
    finding = one(containers.check_containers(assess(snap, None)), "container-no-gpu-access")
    assert finding.severity == ERROR
    assert finding.evidence["expects_gpu"][0] == wanted[0]


def test_cpu_container_that_expects_nothing_is_fine():
    snap = make_snapshot(nvidia_status=S.NVIDIA_NO_GPU, gpus=[], torch=torch_dist("2.7.1+cpu", cuda=None))
    assert containers.check_containers(assess(snap_with(snap=snap, container=container()), None)) == []


def test_not_in_a_container_is_not_this_rules_business():
    snap = snap_with(
        snap=make_snapshot(nvidia_status=S.NVIDIA_NO_GPU, gpus=[]), container=container(kind=None)
    )
    assert containers.check_containers(assess(snap, None)) == []


def test_host_container_is_enough_for_old_reports():
    snap = make_snapshot(nvidia_status=S.NVIDIA_NO_DRIVER, gpus=[])
    snap.host.container = "docker"
    assert ids(containers.check_containers(assess(snap, None))) == ["container-no-gpu-access"]


@pytest.mark.parametrize("status", [S.NVIDIA_CONTAINER_LOST, S.NVIDIA_MISMATCH, S.NVIDIA_NO_PERMISSION])
def test_core_rule_states_are_not_duplicated(status):
    snap = snap_with(snap=make_snapshot(nvidia_status=status, gpus=[]), container=container())
    assert containers.check_containers(assess(snap, None)) == []


def test_working_gpu_in_container_is_fine():
    snap = snap_with(
        container=container(nodes=["/dev/nvidia0", "/dev/nvidiactl"], nvidia_visible_devices="all")
    )
    assert containers.check_containers(assess(snap, None)) == []


@pytest.mark.parametrize("value", ["void", "none", ""])
def test_nvidia_visible_devices_hides_all(value):
    snap = snap_with(snap=make_snapshot(nvidia_status=S.NVIDIA_NO_GPU, gpus=[]),
                     container=container(nvidia_visible_devices=value))  # fmt: skip
    findings = containers.check_containers(assess(snap, None))
    finding = one(findings, "nvidia-visible-devices-hides-all")
    assert "container-no-gpu-access" not in ids(findings)
    assert "docker run --gpus all -e NVIDIA_VISIBLE_DEVICES=all <image> ..." in finding.fix.commands


def test_driver_capabilities_without_compute():
    snap = snap_with(container=container(nodes=["/dev/nvidia0"], nvidia_driver_capabilities="utility"))
    finding = one(containers.check_containers(assess(snap, None)), "nvidia-driver-capabilities-no-compute")
    assert finding.fix.commands == [
        "docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility <image> ..."
    ]


# --- shm ----------------------------------------------------------------------------------------


def test_docker_default_shm_is_a_warning_with_both_remedies():
    snap = snap_with(shm=Shm(total_bytes=64 * 1024**2, free_bytes=64 * 1024**2), container=container(),
                     cpu=Cpu(cpu_count=8, affinity=8, budget=8))  # fmt: skip
    finding = one(resources.check_shm(assess(snap, None)), "shm-too-small")
    assert finding.severity == WARNING
    assert finding.fix.commands == [
        "docker run --shm-size=8g <image> ...",
        "docker run --ipc=host <image> ...",
    ]
    assert resources.SHM_ERRORS[0] in finding.detail and "exited unexpectedly" in finding.detail
    assert finding.evidence["workers"] == 7 and finding.evidence["estimated_need_bytes"] > 64 * 1024**2


def test_kubernetes_shm_remedy_is_a_memory_emptydir():
    snap = snap_with(shm=Shm(total_bytes=64 * 1024**2), container=container("kubernetes"))
    finding = one(resources.check_shm(assess(snap, None)), "shm-too-small")
    assert "medium: Memory" in finding.fix.summary and "mountPath: /dev/shm" in finding.fix.summary


def test_small_shm_outside_a_container_is_info():
    facts = assess(snap_with(shm=Shm(total_bytes=512 * 1024**2)), None)
    finding = one(resources.check_shm(facts), "shm-too-small")
    assert finding.severity == INFO and finding.fix.commands == ["sudo mount -o remount,size=8G /dev/shm"]


def test_enough_shm_or_unknown():
    roomy = snap_with(shm=Shm(total_bytes=2 * GIB), container=container())
    assert resources.check_shm(assess(roomy, None)) == []
    assert resources.check_shm(assess(snap_with(shm=Shm(why="statvfs failed")), None)) == []


# --- CPU quota ----------------------------------------------------------------------------------


def test_quota_far_below_visible_cores():
    cpu = Cpu(cpu_count=64, affinity=64, cgroup="v2", quota_cpus=4.0, budget=4,
              quota_source="/sys/fs/cgroup/cpu.max", quota_raw="400000 100000")  # fmt: skip
    finding = one(resources.check_cpu_quota(assess(snap_with(cpu=cpu), None)), "cpu-quota-low")
    assert finding.severity == WARNING
    assert finding.evidence["recommended_num_workers"] == 3
    assert finding.fix.commands == ["export OMP_NUM_THREADS=4"]
    assert "num_workers=3" in finding.fix.summary


def test_affinity_restricted_is_info_with_a_recommendation():
    cpu = Cpu(cpu_count=32, affinity=8, cgroup="v2", quota_cpus=None, budget=8)
    finding = one(resources.check_cpu_quota(assess(snap_with(cpu=cpu), None)), "cpu-budget")
    assert finding.severity == INFO and "num_workers=7" in finding.title


def test_quota_above_half_is_info_only():
    cpu = Cpu(cpu_count=8, affinity=8, cgroup="v1", quota_cpus=6.0, budget=6)
    assert ids(resources.check_cpu_quota(assess(snap_with(cpu=cpu), None))) == ["cpu-budget"]


def test_budget_computed_when_missing():
    cpu = Cpu(cpu_count=16, affinity=16, quota_cpus=1.5)
    facts = assess(snap_with(cpu=cpu), None)
    assert one(resources.check_cpu_quota(facts), "cpu-quota-low").evidence["budget"] == 2


# --- memory -------------------------------------------------------------------------------------


def test_ram_smaller_than_gpus():
    snap = make_snapshot(gpus=[gpu("NVIDIA H100 80GB HBM3", "9.0", i, 81559) for i in range(8)])
    snap = snap_with(snap=snap, memory=Memory(total_bytes=256 * GIB, available_bytes=200 * GIB,
                                               swap_total_bytes=0))  # fmt: skip
    finding = one(resources.check_memory(assess(snap, None)), "ram-smaller-than-gpu-memory")
    assert finding.severity == INFO and finding.evidence["gpu.memory_total_mib"] == 8 * 81559
    assert "no-swap-small-ram" not in ids(resources.check_memory(assess(snap, None)))  # 256 GiB is not small


def test_no_swap_small_ram():
    snap = snap_with(snap=make_snapshot(gpus=[]), memory=Memory(total_bytes=8 * GIB, available_bytes=6 * GIB,
                                                                 swap_total_bytes=0))  # fmt: skip
    finding = one(resources.check_memory(assess(snap, None)), "no-swap-small-ram")
    assert finding.severity == INFO and "mkswap /swapfile" in finding.fix.commands[0]


def test_low_available_memory():
    snap = snap_with(memory=Memory(total_bytes=64 * GIB, available_bytes=GIB // 2, swap_total_bytes=GIB))
    assert ids(resources.check_memory(assess(snap, None))) == ["low-available-memory"]


# --- CUDA_VISIBLE_DEVICES -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "entries", "duplicate", "ignored"),
    [
        ("", [], None, [""]),
        ("-1", [], None, ["-1"]),
        ("0,1", [0, 1], None, []),
        ("1gpu2,2ampere", [1, 2], None, []),  # strtoul-like, the example in torch's source
        ("0,2,-1,1", [0, 2], None, ["-1", "1"]),
        ("0, 1", [0, 1], None, []),
        ("0,0", [], "0", []),
        ("1,0,1", [], "1", []),
        ("GPU-abc,GPU-def", ["GPU-abc", "GPU-def"], None, []),
        ("GPU-abc,0", ["GPU-abc"], None, ["0"]),
        ("GPU-abc,GPU-abc", [], "GPU-abc", []),
        ("+", [], None, ["+"]),
    ],
)
def test_parse_visible_devices_like_torch(value, entries, duplicate, ignored):
    parsed = devices.parse_visible_devices(value)
    assert (parsed["entries"], parsed["duplicate"], parsed["ignored"]) == (entries, duplicate, ignored)


def _torch_parse(value):
    """torch 2.13's own _parse_visible_devices, read from the wheel on this machine (no import of torch)."""
    import ast
    import glob
    import os
    import zipfile

    wheels = glob.glob("/opt/wheels/torch-*.whl")
    if not wheels:
        pytest.skip("no torch wheel in /opt/wheels to read torch's parser from")
    source = zipfile.ZipFile(wheels[0]).read("torch/cuda/__init__.py").decode()
    tree = ast.parse(source)
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_parse_visible_devices")
    namespace = {
        "os": os,
        "cast": lambda t, v: v,
        "torch": type("T", (), {"version": type("V", (), {"hip": None})}),
    }
    exec(compile(ast.Module([func], []), "torch_parse", "exec"), namespace)  # noqa: S102 - torch's own code
    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = value
    try:
        return namespace["_parse_visible_devices"]()
    finally:
        if old is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old


@pytest.mark.parametrize("value", ["", "-1", "0,1", "1gpu2,2ampere", "0,2,-1,1", "0,0", "1,0,1", "GPU-a,GPU-b",
                                   "GPU-a,GPU-a", "GPU-a,0", "MIG-x", "3", " 2 , 1", "abc"])  # fmt: skip
def test_parser_agrees_with_torchs_own(value):
    assert devices.parse_visible_devices(value)["entries"] == _torch_parse(value)


def two_gpus(names=("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB")):
    return make_snapshot(gpus=[gpu(names[0], "8.0", 0, 81920), gpu(names[1], "8.0", 1, 81920)])


@pytest.mark.parametrize("value", ["", "-1", "none"])
def test_hides_all(value):
    snap = snap_with(snap=two_gpus(), visible_devices=VisibleDevices(CUDA_VISIBLE_DEVICES=value))
    finding = one(devices.check_visible_devices(assess(snap, None)), "cuda-visible-devices-hides-all")
    assert finding.severity == WARNING and finding.fix.commands[0] == "unset CUDA_VISIBLE_DEVICES"


def test_hides_all_on_a_cpu_machine_is_info():
    snap = make_snapshot(gpus=[], nvidia_status=S.NVIDIA_NO_GPU, torch=torch_dist("2.7.1+cpu", cuda=None))
    snap = snap_with(snap=snap, visible_devices=VisibleDevices(CUDA_VISIBLE_DEVICES=""))
    facts = assess(snap, None)
    assert one(devices.check_visible_devices(facts), "cuda-visible-devices-hides-all").severity == INFO


def test_duplicates_hide_everything():
    snap = snap_with(snap=two_gpus(), visible_devices=VisibleDevices(CUDA_VISIBLE_DEVICES="0,1,0"))
    finding = one(devices.check_visible_devices(assess(snap, None)), "cuda-visible-devices-duplicate")
    assert finding.fix.commands == ["export CUDA_VISIBLE_DEVICES=0,1"]


def test_index_past_the_last_gpu():
    snap = snap_with(snap=two_gpus(), visible_devices=VisibleDevices(CUDA_VISIBLE_DEVICES="1,5,0"))
    findings = devices.check_visible_devices(assess(snap, None))
    finding = one(findings, "cuda-visible-devices-no-match")
    assert finding.evidence["ignored"] == ["5", "0"]
    assert finding.fix.commands[0] == "export CUDA_VISIBLE_DEVICES=1"
    assert "cuda:0 = GPU 1" in one(findings, "cuda-visible-devices-subset").title


def test_only_index_past_the_last_gpu_hides_all():
    snap = snap_with(snap=two_gpus(), visible_devices=VisibleDevices(CUDA_VISIBLE_DEVICES="2"))
    finding = one(devices.check_visible_devices(assess(snap, None)), "cuda-visible-devices-hides-all")
    assert "matches no GPU" in finding.detail


def test_uuid_prefixes_like_torch():
    snap = two_gpus()
    snap.nvidia.gpus[0].uuid = "GPU-1111aaaa-0000"
    snap.nvidia.gpus[1].uuid = "GPU-2222bbbb-0000"
    snap = snap_with(snap=snap, visible_devices=VisibleDevices(CUDA_VISIBLE_DEVICES="GPU-2222"))
    finding = one(devices.check_visible_devices(assess(snap, None)), "cuda-visible-devices-subset")
    assert finding.evidence["mapping"] == "cuda:0 = GPU 1 NVIDIA A100-SXM4-80GB (GPU-2222bbbb-0000)"
    assert finding.fix is None  # UUIDs do not depend on CUDA_DEVICE_ORDER


def test_ambiguous_uuid_prefix_matches_nothing():
    snap = snap_with(snap=two_gpus(), visible_devices=VisibleDevices(CUDA_VISIBLE_DEVICES="GPU-0000000"))
    assert ids(devices.check_visible_devices(assess(snap, None))) == ["cuda-visible-devices-hides-all"]


def test_mixed_gpus_subset_mentions_device_order():
    snap = snap_with(snap=two_gpus(("NVIDIA GeForce RTX 4090", "NVIDIA GeForce GTX 1080 Ti")),
                     visible_devices=VisibleDevices(CUDA_VISIBLE_DEVICES="1"))  # fmt: skip
    finding = one(devices.check_visible_devices(assess(snap, None)), "cuda-visible-devices-subset")
    assert "fastest first" in finding.detail
    assert finding.fix.commands == ["export CUDA_DEVICE_ORDER=PCI_BUS_ID"]


def test_mixed_gpus_without_the_variable():
    snap = snap_with(
        snap=two_gpus(("NVIDIA GeForce RTX 4090", "NVIDIA GeForce GTX 1080 "
            "Ti")), visible_devices=VisibleDevices()
    )
    assert ids(devices.check_visible_devices(assess(snap, None))) == ["cuda-device-order-differs"]
    snap.environment.visible_devices = VisibleDevices(CUDA_DEVICE_ORDER="PCI_BUS_ID")
    assert devices.check_visible_devices(assess(snap, None)) == []


def test_all_gpus_in_order_is_fine():
    snap = snap_with(snap=two_gpus(), visible_devices=VisibleDevices(CUDA_VISIBLE_DEVICES="0,1"))
    assert devices.check_visible_devices(assess(snap, None)) == []


# --- library shadowing --------------------------------------------------------------------------


def libs_section(value, dirs):
    return Libraries(variable="LD_LIBRARY_PATH", value=value, dirs=dirs)


def lib(file, family, version, real_version=None):
    item = CudaLib(file=file, family=family, version=version)
    if real_version:
        item.real, item.real_version = file, real_version
    return item


def py_facts(*dists, **extra):
    facts = {"executable": PY, "sys_path": [SITE], "user_site": UserSite(enabled=False, path=None),
             "dists": [DistRecord(name=n, version=v, location=SITE, installer="pip") for n, v in dists],
             "torch_origin": f"{SITE}/torch/__init__.py", "conda": None}  # fmt: skip
    return PythonFacts(**facts | extra)


def test_nvjitlink_shadowed_by_system_cuda():
    value = "/usr/local/cuda-12.4/lib64:/opt/other/lib"
    snap = snap_with(
        libraries=libs_section(value, [
            LibraryDir(path="/usr/local/cuda-12.4/lib64", exists=True, driver_libs=[],
                       libs=[lib("libnvJitLink.so.12", "nvjitlink", "12", "12.4.127")]),
            LibraryDir(path="/opt/other/lib", exists=True, libs=[], driver_libs=[]),
        ]),
        python=py_facts(("torch", "2.7.1+cu128"), ("nvidia-nvjitlink-cu12", "12.8.93")),
    )  # fmt: skip
    finding = one(libraries.check_library_shadowing(assess(snap, None)), "library-path-shadows-cuda-libs")
    assert finding.severity == WARNING
    assert finding.fix.commands == ["export LD_LIBRARY_PATH=/opt/other/lib"]
    assert "undefined symbol: __nvJitLinkComplete_12_8" in finding.detail
    assert finding.evidence["offending"][0]["wheel_source"] == "nvidia-nvjitlink-cu12 12.8.93"


def test_the_library_path_fix_keeps_only_folders_that_exist():
    value = "/usr/local/cuda-12.4/lib64:/opt/gone/lib:/opt/other/lib"
    snap = snap_with(
        libraries=libs_section(value, [
            LibraryDir(path="/usr/local/cuda-12.4/lib64", exists=True, driver_libs=[],
                       libs=[lib("libnvJitLink.so.12", "nvjitlink", "12", "12.4.127")]),
            LibraryDir(path="/opt/gone/lib", exists=False, libs=[], driver_libs=[]),
            LibraryDir(path="/opt/other/lib", exists=True, libs=[], driver_libs=[]),
        ]),
        python=py_facts(("torch", "2.7.1+cu128"), ("nvidia-nvjitlink-cu12", "12.8.93")),
    )  # fmt: skip
    finding = one(libraries.check_library_shadowing(assess(snap, None)), "library-path-shadows-cuda-libs")
    assert finding.fix.commands == ["export LD_LIBRARY_PATH=/opt/other/lib"]


def test_cudnn_minor_mismatch_quotes_torchs_message_and_unsets():
    snap = snap_with(
        libraries=libs_section("/opt/cudnn/lib", [
            LibraryDir(path="/opt/cudnn/lib", exists=True, driver_libs=[],
                       libs=[lib("libcudnn.so.9.0.0", "cudnn", "9.0.0")])]),
        python=py_facts(("torch", "2.7.1+cu128"), ("nvidia-cudnn-cu12", "9.1.0.70")),
    )  # fmt: skip
    finding = one(libraries.check_library_shadowing(assess(snap, None)), "library-path-shadows-cuda-libs")
    assert "cuDNN version incompatibility: PyTorch was compiled  against (9, 1, …)" in finding.detail
    assert finding.fix.commands == ["unset LD_LIBRARY_PATH"]


def test_other_major_is_a_different_soname_and_harmless():
    snap = snap_with(
        libraries=libs_section("/opt/cudnn8", [
            LibraryDir(path="/opt/cudnn8", exists=True, driver_libs=[],
                       libs=[lib("libcudnn.so.8.9.2", "cudnn", "8.9.2")])]),
        python=py_facts(("torch", "2.7.1+cu128"), ("nvidia-cudnn-cu12", "9.1.0.70")),
    )  # fmt: skip
    assert libraries.check_library_shadowing(assess(snap, None)) == []


def test_falls_back_to_torch_cuda_when_dists_are_unknown():
    snap = snap_with(libraries=libs_section("/usr/local/cuda/lib64", [
        LibraryDir(path="/usr/local/cuda/lib64", exists=True, driver_libs=[],
                   libs=[lib("libcublas.so.12.1.3.1", "cublas", "12.1.3.1")])]))  # fmt: skip
    finding = one(libraries.check_library_shadowing(assess(snap, None)), "library-path-shadows-cuda-libs")
    assert finding.evidence["offending"][0]["wheel_source"] == "torch's CUDA 12.8"


def test_cpu_torch_is_not_affected():
    snap = make_snapshot(torch=torch_dist("2.7.1+cpu", cuda=None))
    snap = snap_with(
        snap=snap,
        libraries=libs_section(
            "/x",
            [
                # fmt: skip
                LibraryDir(
                    path="/x",
                    exists=True,
                    driver_libs=[],
                    libs=[lib("libcublas.so.12.1.3.1", "cublas", "12.1")],
                )
            ],
        ),
    )
    assert libraries.check_library_shadowing(assess(snap, None)) == []


def test_failed_import_with_undefined_symbol_makes_it_an_error():
    snap = snap_with(
        libraries=libs_section("/usr/local/cuda-12.1/lib64", [
            LibraryDir(path="/usr/local/cuda-12.1/lib64", exists=True, driver_libs=[],
                       libs=[lib("libnvJitLink.so.12.1.105", "nvjitlink", "12.1.105")])]),
        python=py_facts(("torch", "2.7.1+cu128"), ("nvidia-nvjitlink-cu12", "12.8.93")),
    )  # fmt: skip
    snap.runtime.status = "import-error"
    snap.runtime.detail = (".../libcusparse.so.12: undefined symbol: __nvJitLinkComplete_12_4, "
                           "version libnvJitLink.so.12")  # fmt: skip
    facts = assess(snap, None)
    assert one(libraries.check_library_shadowing(facts), "library-path-shadows-cuda-libs").severity == ERROR


def test_windows_path_uses_powershell():
    snap = make_snapshot(os="windows")
    snap = snap_with(snap=snap, libraries=Libraries(variable="PATH", value=r"C:\CUDA\v12.1\bin;C:\Windows", dirs=[
        LibraryDir(path=r"C:\CUDA\v12.1\bin", exists=True, driver_libs=[],
                   libs=[lib("nvJitLink_120_0.dll", "nvjitlink", "12.0")])]))  # fmt: skip
    finding = one(libraries.check_library_shadowing(assess(snap, None)), "library-path-shadows-cuda-libs")
    assert finding.fix.commands == ['$env:PATH = "C:\\Windows"']


def test_cuda_home_other_version_is_info():
    snap = snap_with(
        cuda_home=CudaHome(variable="CUDA_HOME", path="/usr/local/cuda-11.8", version="11.8.89")
    )
    finding = one(libraries.check_library_shadowing(assess(snap, None)), "cuda-home-version-mismatch")
    assert finding.severity == INFO
    assert (
        "The detected CUDA version (11.8) mismatches the version that was used to compile PyTorch (12.8)"
        in (finding.detail)
    )
    # only 11.8 is installed: the fix says what to install and names no folder that does not exist
    assert finding.fix.commands == [] and "cuda-toolkit-12-8" in finding.fix.summary


def test_cuda_home_fix_points_at_a_toolkit_that_exists():
    installed = [
        CudaToolkitDir("/usr/local/cuda-11.8", "11.8.89"),
        CudaToolkitDir("/usr/local/cuda-12.8", "12.8.1"),
    ]
    snap = snap_with(cuda_home=CudaHome(variable="CUDA_HOME", path="/usr/local/cuda-11.8", version="11.8.89",
                                        installed=installed))
    finding = one(libraries.check_library_shadowing(assess(snap, None)), "cuda-home-version-mismatch")
    assert finding.fix.commands == ["export CUDA_HOME=/usr/local/cuda-12.8"]


def test_cuda_home_fix_never_invents_a_folder():
    # torch 2.7.1+cu128, and only cuda-13.0 on the machine (the case of issue 13 with cuda-12.6)
    snap = snap_with(cuda_home=CudaHome(path="/usr/local/cuda", version="13.0.1",
                                        installed=[CudaToolkitDir("/usr/local/cuda-13.0", "13.0.1")]))
    finding = one(libraries.check_library_shadowing(assess(snap, None)), "cuda-home-version-mismatch")
    assert finding.fix.commands == []
    assert (
        "/usr/local/cuda-13.0 (CUDA 13.0)" in finding.fix.summary
        and "cuda-toolkit-12-8" in finding.fix.summary
    )


def test_cuda_home_same_minor_is_fine():
    assert (
        libraries.check_library_shadowing(
            assess(snap_with(cuda_home=CudaHome(version="12.8.1", path="/usr/local/cuda")), None))
        == []
    )


# --- mixed and duplicate installs ---------------------------------------------------------------


def conda_facts(prefix, *records, is_base=False):
    return Conda(prefix=prefix, is_base=is_base, records=[
        CondaRecord(name=n, version=v, build=b, channel="pytorch") for n, v, b in records])  # fmt: skip


def test_conda_and_pip_torch_mixed():
    prefix = "/opt/conda/envs/ml"
    snap = make_snapshot()
    snap.interpreter.path = f"{prefix}/bin/python"
    snap = snap_with(
        snap=snap,
        python=py_facts(
            ("torch", "2.7.1+cu128"),
            conda=conda_facts(
                # fmt: skip
                prefix,
                ("pytorch", "2.5.1", "py3.11_cuda12.1_cudnn9.1.0_0"),
                ("pytorch-cuda", "12.1", "ha16c6d3_6"),
            ),
        ),
    )
    findings = written(installs.check_mixed_installs(assess(snap, None)), snap)
    mixed = one(findings, "mixed-conda-pip-torch")
    assert mixed.fix.commands == [
        "conda remove -p /opt/conda/envs/ml pytorch pytorch-cuda",
        f"{prefix}/bin/python -m pip uninstall -y torch torchvision torchaudio",
        f'{prefix}/bin/python -m pip install "torch==2.7.1+cu128" "torchvision==0.22.1+cu128" '
        '"torchaudio==2.7.1+cu128" --index-url https://download.pytorch.org/whl/cu128',
    ]
    cuda = one(findings, "conda-cuda-mismatch")
    assert cuda.fix.commands == ["conda remove -p /opt/conda/envs/ml pytorch-cuda"]


def test_conda_only_torch_is_fine():
    dists = py_facts(conda=conda_facts("/opt/conda", ("pytorch", "2.5.1", "py3.11_cuda12.1_cudnn9.1.0_0")))
    dists.dists = [DistRecord(name="torch", version="2.5.1", location=SITE, installer="conda")]
    assert installs.check_mixed_installs(assess(snap_with(python=dists), None)) == []


def test_cudatoolkit_matching_the_wheel_is_fine():
    facts = py_facts(
        ("torch", "2.7.1+cu128"), conda=conda_facts("/opt/conda/envs/x", ("cudatoolkit", "12.8.0", "h0"))
    )
    assert installs.check_mixed_installs(assess(snap_with(python=facts), None)) == []


def test_user_site_shadows_the_venv():
    user = "/home/u/.local/lib/python3.12/site-packages"
    facts = py_facts(user_site=UserSite(enabled=True, path=user))
    facts.dists = [
        DistRecord(name="torch", version="2.3.0", location=user, installer="pip"),
        DistRecord(name="torch", version="2.7.1+cu128", location=SITE, installer="pip"),
    ]
    snap = snap_with(python=facts)
    findings = written(installs.check_mixed_installs(assess(snap, None)), snap)
    assert ids(findings) == ["user-site-torch-shadows"]
    assert findings[0].fix.commands[0] == f"{PY} -m pip uninstall -y torch torchvision torchaudio"


def test_two_torch_copies_on_sys_path():
    facts = py_facts()
    facts.dists = [
        DistRecord(name="torch", version="2.7.1+cu128", location=SITE, installer="pip"),
        DistRecord(name="torch", version="2.4.0", location="/opt/extra/site-packages", installer="pip"),
    ]
    snap = snap_with(python=facts)
    facts = assess(snap, None)
    finding = one(written(installs.check_mixed_installs(facts), snap), "duplicate-torch-installs")
    assert finding.fix.commands[:2] == [f"{PY} -m pip uninstall -y torch torchvision torchaudio"] * 2
    assert finding.fix.commands[2].endswith("--index-url https://download.pytorch.org/whl/cu128")


def test_missing_python_section_is_fine():
    snap = make_snapshot()
    assert snap.environment.python is None
    assert installs.check_mixed_installs(assess(snap, None)) == []
    snap.environment.python = PythonFacts()  # read, with nothing in it
    assert installs.check_mixed_installs(assess(snap, None)) == []


# --- interpreter hygiene ------------------------------------------------------------------------


def test_externally_managed_system_python():
    snap = make_snapshot()
    snap.interpreter.path, snap.interpreter.env_kind, snap.interpreter.externally_managed = (
        "/usr/bin/python3", "system", True)  # fmt: skip
    text = "[externally-managed]\nError=To install Python packages system-wide, try apt install python3-xyz"
    snap.environment.python = py_facts(externally_managed_text=text)
    facts = assess(snap, None)
    finding = one(written(installs.check_interpreter_hygiene(facts), snap), "externally-managed-python")
    assert finding.fix.commands == [
        '/usr/bin/python3 -m venv .venv && .venv/bin/python -m pip install "torch==2.7.1+cu128" '
        '"torchvision==0.22.1+cu128" "torchaudio==2.7.1+cu128" --index-url https://download.pytorch.org/whl/cu128'
    ]


def test_conda_base():
    snap = make_snapshot()
    snap.interpreter.env_kind, snap.interpreter.prefix = "conda-base", "/opt/miniconda3"
    facts = assess(snap, None)
    finding = one(written(installs.check_interpreter_hygiene(facts), snap), "conda-base-environment")
    assert finding.fix.commands[:2] == ["conda create -n torch python=3.12", "conda activate torch"]


def test_32_bit_python():
    snap = make_snapshot(os="windows")
    snap.interpreter.bits = 32
    finding = one(installs.check_interpreter_hygiene(assess(snap, None)), "python-32-bit")
    assert finding.severity == ERROR and finding.fix.commands == ["py -3.12-64 -m venv .venv"]


def test_venv_is_fine_even_with_a_marker_on_its_base():
    snap = make_snapshot()
    snap.interpreter.externally_managed = True  # inspector says venv: PEP 668 does not apply
    assert installs.check_interpreter_hygiene(assess(snap, None)) == []


# --- WSL ----------------------------------------------------------------------------------------


def wsl_snap(ld_value=None, dirs=(), confs=(), linux_driver=()):
    snap = make_snapshot()
    snap.host.wsl = True
    return snap_with(snap=snap, libraries=libs_section(ld_value, list(dirs)),
                     wsl=Wsl(is_wsl=True, evidence=["/dev/dxg exists"], ld_so_conf=list(confs),
                             linux_driver=list(linux_driver)))  # fmt: skip


def test_wsl_ld_library_path_puts_a_libcuda_first():
    snap = wsl_snap("/usr/local/nvidia/lib64:/usr/lib/wsl/lib:/opt/x", [
        LibraryDir(path="/usr/local/nvidia/lib64", exists=True, libs=[], driver_libs=["libcuda.so.1"]),
        LibraryDir(path="/usr/lib/wsl/lib", exists=True, libs=[], driver_libs=["libcuda.so.1"]),
        LibraryDir(path="/opt/x", exists=True, libs=[], driver_libs=["libnvidia-ml.so.1"]),
    ])  # fmt: skip
    finding = one(wsl.check_wsl(assess(snap, None)), "wsl-library-path-order")
    assert finding.fix.commands == ["export LD_LIBRARY_PATH=/usr/lib/wsl/lib:/opt/x"]


def test_wsl_ld_so_conf_order():
    conf = LdSoConf(file="/etc/ld.so.conf.d/000-nvidia.conf", dirs=["/usr/lib/nvidia"],
                    driver_libs={"/usr/lib/nvidia": ["libcuda.so.1"]})  # fmt: skip
    wsl_conf = LdSoConf(file="/etc/ld.so.conf.d/ld.wsl.conf", dirs=["/usr/lib/wsl/lib"], driver_libs={})
    finding = one(wsl.check_wsl(assess(wsl_snap(confs=[conf, wsl_conf]), None)), "wsl-library-path-order")
    assert finding.fix.commands == [
        "sudo mv /etc/ld.so.conf.d/000-nvidia.conf /etc/ld.so.conf.d/000-nvidia.conf.disabled && sudo "
        "ldconfig"
    ]
    assert wsl.check_wsl(assess(wsl_snap(confs=[wsl_conf, conf]), None)) == []  # later: harmless


def test_wsl_linux_driver_inside():
    lib_path = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.14"
    finding = one(wsl.check_wsl(assess(wsl_snap(linux_driver=[lib_path, "/var/lib/dkms/nvidia"]), None)),
                  "wsl-linux-driver-installed")  # fmt: skip
    assert finding.fix.commands[0] == f"sudo apt-get purge $(dpkg -S {lib_path} | cut -d: -f1)"
    # then ldconfig, and WSL restarted from Windows so that nothing keeps the old libraries loaded
    assert finding.fix.commands[-2:] == ["sudo ldconfig", "wsl --shutdown  # in Windows, then open the "
        "distribution again"]


def test_not_wsl():
    assert wsl.check_wsl(assess(snap_with(wsl=Wsl(is_wsl=False, evidence=[])), None)) == []


def test_every_emitted_id_is_declared():
    import re

    declared = {i for rule in H.RULES for i in rule.ids}
    package = Path(H.__file__).parent
    source = "".join(path.read_text(encoding="utf-8") for path in sorted(package.glob("*.py")))
    built = set(re.findall(r'Finding\(\s*"([a-z0-9-]+)"', source))
    assert len(built) == len(declared) and built == declared, built ^ declared


def test_torchs_own_cudnn_pin_is_what_it_uses_not_another_packages():
    # TensorFlow's nvidia-cudnn-cu12 8.9 beside torch 2.4.1's pin on 9.1: the wheel torch loads is its own
    # pin's
    snap = make_snapshot(torch=torch_dist("2.4.1+cu121", "12.1", requires=[
        'nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux" and platform_machine == "x86_64"']))
    snap.environment.python = PythonFacts(dists=[DistRecord(name="nvidia-cudnn-cu12", version="8.9.4.25")])
    assert libraries.expected_lib_versions(snap, assess(snap, None).build)["cudnn"] == ("9.1.0.70", "torch's "
        "requirement nvidia-cudnn-cu12==9.1.0.70")
    snap.install.torch.requires = []  # no pin: the installed wheel is all there is to go by
    assert libraries.expected_lib_versions(snap, assess(snap, None).build)["cudnn"] == (
        "8.9.4.25",
        "nvidia-cudnn-cu12 8.9.4.25",
    )
