"""make_snapshot(**changes): a healthy machine as a Snapshot; each test changes one thing.

Healthy = Linux x86_64, driver 570.124.04 (CUDA 12.8), one RTX 4090 (CC 8.9), Python 3.12.1 in a
venv, torch 2.7.1+cu128 with torchvision 0.22.1+cu128 and torchaudio 2.7.1+cu128.
"""

from __future__ import annotations

from doctor.model.snapshot import Dist, Fact, Gpu, Host, Interpreter, Nvidia, Snapshot, TorchInstall


def gpu(name: str = "NVIDIA GeForce RTX "
    "4090", cc: str | None = "8.9", index: int = 0, mem: int = 24564) -> Gpu:
    return Gpu(
        index=index,
        name=name,
        memory_total_mib=mem,
        uuid=f"GPU-0000000{index}-aaaa-bbbb-cccc-000000000000",
        compute_capability=Fact(cc, "nvml") if cc else Fact.unknown("not reported"),
    )


def torch_dist(version: str = "2.7.1+cu128", cuda: str | None = "12.8", metadata_version: str | None = None,
               hip: str | None = None, requires: list[str] | None = None) -> Dist:
    return Dist(
        name="torch",
        version=metadata_version or version,
        build_version=version,
        cuda=cuda,
        hip=hip,
        requires=requires or [],
        installer="pip",
        location="/home/u/venv/lib/python3.12/site-packages",
        has_libtorch_cuda=cuda is not None,
    )


def companion(name: str, version: str, cuda: str | None, torch_pin: str | None) -> Dist:
    return Dist(name=name, version=version, build_version=version, cuda=cuda,
                requires=[f"torch=={torch_pin}"] if torch_pin else [], installer="pip",
                location="/home/u/venv/lib/python3.12/site-packages")


def make_snapshot(
    *,
    os: str = "linux",
    machine: str = "x86_64",
    gpus: list[Gpu] | None = None,
    driver: str | None = "570.124.04",
    max_cuda: str | None = "12.8",
    nvidia_status: str = "ok",
    torch: Dist | None | str = "default",
    torchvision: Dist | None | str = "default",
    torchaudio: Dist | None | str = "default",
    python: str = "3.12.1",
    pci: list[str] | None = None,
) -> Snapshot:
    if torch == "default":
        torch = torch_dist()
    if torchvision == "default":
        torchvision = companion("torchvision", "0.22.1+cu128", "12.8", "2.7.1")
    if torchaudio == "default":
        torchaudio = companion("torchaudio", "2.7.1+cu128", "12.8", "2.7.1")
    gpus = [gpu()] if gpus is None else gpus
    nv = Nvidia(
        status=nvidia_status,
        driver_version=Fact(driver, "nvml") if driver else Fact.unknown("no driver"),
        cuda_driver_version=Fact(max_cuda, "nvml") if max_cuda else Fact.unknown("no driver"),
        gpus=gpus,
        pci_devices=pci if pci is not None else ["0000:01:00.0"] * len(gpus),
    )
    return Snapshot(
        tool_version="test",
        host=Host(os=os, machine=machine, libc="glibc 2.36" if os == "linux" else ""),
        nvidia=nv,
        interpreter=Interpreter(
            path="/home/u/venv/bin/python",
            reason="VIRTUAL_ENV=/home/u/venv",
            version=python,
            implementation="cpython",
            bits=64,
            env_kind="venv",
            prefix="/home/u/venv",
        ),
        install=TorchInstall(
            status="ok" if torch else "absent", torch=torch, torchvision=torchvision, torchaudio=torchaudio
        ),
    )


def written(findings: list, snap: Snapshot, pins: tuple | None = None) -> list:
    """Findings with their actions written out as the product does (pip, the PyTorch index, this OS).
    ``pins``: the plan's (pins, variant); default: what a plan that installs nothing pins, the installed
    builds exactly."""
    from doctor.plan.plan import commands_for
    from doctor.plan.ways import installed_pins

    commands_for(snap).fill(findings, pins if pins is not None else installed_pins(snap))
    return findings
