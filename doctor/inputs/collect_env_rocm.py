"""The AMD facts in `python -m torch.utils.collect_env` text (doctor/inputs/collect_env.py reads the labels
and hands the values over, "N/A" and "Could not collect" already made None).

On a ROCm build collect_env prints "ROCM used to build PyTorch", "HIP runtime version", "MIOpen runtime
version", and for "GPU models and configuration" torch's name of device 0 followed by its ``gcnArchName``
("AMD Radeon RX 5700 XT (gfx1010:xnack-)"). That name is the runtime's view: after any
HSA_OVERRIDE_GFX_VERSION, which the text does not show. Pure: no I/O.
"""

from __future__ import annotations

from doctor.model.amd import AMD_OK, AMD_UNKNOWN, Amd, AmdGpu, target_id_of
from doctor.model.facts import Fact

SOURCE = "collect_env"


def amd_from_collect_env(rocm_build: str | None, hip_runtime: str | None, miopen: str | None,
                         gpu_models: str | None, available: bool | None, unknowns: list[str]) -> Amd | None:
    """The AMD section, or None when the text shows no ROCm at all (a CUDA or CPU paste)."""
    processor, target = target_id_of(gpu_models or "")
    if not (rocm_build or hip_runtime or miopen or processor):
        return None
    gpus = []
    if processor:
        name = (gpu_models or "").split("(")[0].strip()
        gpus.append(AmdGpu(
            index=0,
            name=Fact(name, SOURCE) if name else Fact.unknown("collect_env printed no name", SOURCE),
            gfx=Fact(processor, f"{SOURCE} (torch's gcnArchName, after any HSA_OVERRIDE_GFX_VERSION)"),
            target_id=target,
        ))
    unknowns += [
        "amd.gpus: collect_env names device 0 only",
        "amd.device_nodes: collect_env does not say whether /dev/kfd and /dev/dri were open to it",
        "amd.override: collect_env does not show HSA_OVERRIDE_GFX_VERSION",
    ]
    if available and gpus:
        status, detail = AMD_OK, "collect_env: torch saw a ROCm GPU"
    else:
        status, detail = AMD_UNKNOWN, "collect_env: ROCm build" + ("" if gpus else ", no GPU named")
    return Amd(
        status=status,
        detail=detail,
        gpus=gpus,
        driver_version=Fact.unknown("collect_env does not report the amdgpu driver", SOURCE),
        override=Fact.unknown("collect_env does not show the environment", SOURCE),
        attempts=["collect_env: as reported in the pasted text"],
        hip_runtime_version=Fact(hip_runtime, SOURCE) if hip_runtime else Fact.unknown(
            "collect_env printed no HIP runtime version", SOURCE),
        miopen_version=Fact(miopen, SOURCE) if miopen else Fact.unknown(
            "collect_env printed no MIOpen runtime version", SOURCE),
    )
