"""Containers: one that should have a GPU but was started without one, or without CUDA's driver library."""

from __future__ import annotations

from doctor.compat.assessment import Assessment
from doctor.model import snapshot as S
from doctor.model.environment import Container
from doctor.model.findings import ERROR, INFO, WARNING, Finding, Fix
from doctor.model.i18n import Msg
from doctor.rules import skipped
from doctor.rules.hazards.common import container_kind, missing

# The core rule explains these broken states (container-lost-gpu-access, ...): no duplicates here.
_LEAD_RULE_STATUSES = (S.NVIDIA_CONTAINER_LOST, S.NVIDIA_MISMATCH, S.NVIDIA_NO_PERMISSION)


def _gpu_remedy(kind: str | None) -> Fix:
    if kind == "kubernetes":
        return Fix(
            Msg("Request a GPU in the pod spec (resources.limits: nvidia.com/gpu: 1) and make sure the NVIDIA "
            "device plugin (or the GPU operator) runs on the node."),
            [
                "kubectl get nodes -o custom-columns=NAME:.metadata.name,GPUS:.status.allocatable.nvidia\\.com/gpu"
            ],
            ["https://github.com/NVIDIA/k8s-device-plugin"],
        )
    if kind == "podman":
        return Fix(
            Msg("Recreate the container with the GPUs passed through CDI (generate the CDI spec on the host once)."),
            [
                "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml  # on the host",
                "podman run --device nvidia.com/gpu=all <image> ...",
            ],
            ["https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html"],
        )
    return Fix(
        Msg("Recreate the container with the GPUs passed in (docker run --gpus all); the host needs the NVIDIA "
        "Container Toolkit configured as a Docker runtime."),
        [
            "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker  # on the host",
            "docker run --gpus all <image> ...",
        ],
        ["https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"],
    )


def check_containers(facts: Assessment) -> list[Finding]:
    snap = facts.snap
    section = snap.environment.container
    if not snap.host.container:
        gap = missing(snap, section, "whether this runs in a container")
        if gap is not None:
            return gap
    found = section or Container()
    kind = container_kind(snap)
    status = snap.nvidia.status
    if not kind:
        return skipped(Msg("not in a container"))
    if status in _LEAD_RULE_STATUSES:
        return skipped(Msg("the NVIDIA driver check explains this driver state ({status})", status=status))
    expects = list(snap.gpu_wanted)
    build = facts.build
    if build is not None and build.kind == "cuda":
        expects.append(Msg("torch {label} is a CUDA build", label=build.label))
    nvd = found.nvidia_visible_devices
    hidden_by_nvd = nvd is not None and nvd.strip().lower() in ("", "void", "none")
    if nvd is not None and not hidden_by_nvd:
        expects.append(Msg("NVIDIA_VISIBLE_DEVICES={nvd}", nvd=nvd))
    if found.cuda_image:
        expects.append(Msg("a CUDA image (") + ", ".join(found.cuda_image_evidence) + ")")
    gpu_nodes = found.gpu_device_nodes
    driver_works = status == S.NVIDIA_OK and bool(snap.nvidia.gpus)
    evidence = {
        "container": kind,
        "container.evidence": list(found.evidence),
        "device_nodes": list(found.device_nodes),
        "nvidia.status": status,
        "expects_gpu": expects,
    }
    findings = []
    if not driver_works and (gpu_nodes == 0 or status in (S.NVIDIA_NO_GPU, S.NVIDIA_NO_DRIVER)):
        if not expects:
            return []
        # Severity follows what the user expects. An error when something says a GPU is wanted: the run's own
        # requirements (--require cuda|gpu, [tool.torchdoctor], --device N: snapshot.gpu_wanted) or the NVIDIA
        # container runtime's variables (NVIDIA_VISIBLE_DEVICES naming GPUs, NVIDIA_REQUIRE_CUDA). CUDA_VERSION
        # alone (set by CUDA base images) is a hint; a CUDA torch is not evidence at all (plain `pip install torch`
        # is a CUDA build on Linux, in CPU-only CI and devcontainers too), nor is a toolkit folder.
        wanted = bool(snap.gpu_wanted) or (nvd is not None and not hidden_by_nvd) or any(
            e.startswith("NVIDIA_REQUIRE_CUDA=") for e in found.cuda_image_evidence
        )
        hinted = any(e.startswith("CUDA_VERSION=") for e in found.cuda_image_evidence)
        severity = ERROR if wanted else WARNING if hinted else INFO
        nodes = "no /dev/nvidia* device nodes" if gpu_nodes == 0 else "no working NVIDIA driver"
        if hidden_by_nvd and expects:
            fix = _gpu_remedy(kind)
            fix.summary = (
                Msg("Recreate the container with NVIDIA_VISIBLE_DEVICES=all (or the GPUs you want). ")
                + fix.summary
            )
            if kind not in ("kubernetes", "podman"):
                fix.commands[-1] = "docker run --gpus all -e NVIDIA_VISIBLE_DEVICES=all <image> ..."
            findings.append(
                Finding(
                    "nvidia-visible-devices-hides-all",
                    severity,
                    Msg("NVIDIA_VISIBLE_DEVICES={nvd!r} gives this container no GPU", nvd=nvd),
                    Msg("Inside this {kind} container there are {nodes}. The NVIDIA container runtime reads "
                    "NVIDIA_VISIBLE_DEVICES when the container starts: 'void' or empty injects nothing, 'none' injects "
                    "the driver libraries but no GPU. torch will report torch.cuda.is_available() == False.", kind=kind, nodes=nodes),
                    evidence | {"NVIDIA_VISIBLE_DEVICES": nvd},
                    fix,
                )
            )
        elif expects:
            findings.append(
                Finding(
                    "container-no-gpu-access",
                    severity,
                    Msg("this {kind} container has no GPU access ({nodes})", kind=kind, nodes=nodes),
                    Msg("The environment expects a GPU ({expects}), but the container was started without "
                    "the NVIDIA runtime passing the GPUs in, so torch sees no device (\"Found no NVIDIA driver on your "
                    "system\" or torch.cuda.is_available() == False). GPUs are given to a container when it is "
                    "created; nothing inside it can add them.", expects='; '.join(expects)),
                    evidence,
                    _gpu_remedy(kind),
                )
            )
        return findings
    caps = found.nvidia_driver_capabilities
    if (gpu_nodes or driver_works) and caps is not None and build is not None and build.kind == "cuda":
        wanted = {c.strip().lower() for c in caps.split(",")}
        if not wanted & {"compute", "all"}:
            findings.append(
                Finding(
                    "container-missing-compute-capability",
                    WARNING,
                    Msg("NVIDIA_DRIVER_CAPABILITIES={caps!r} does not include 'compute'", caps=caps),
                    Msg("The NVIDIA container runtime mounts libcuda only for the 'compute' capability; with 'utility' "
                    "alone nvidia-smi works but CUDA (and so torch) finds no driver."),
                    evidence | {"NVIDIA_DRIVER_CAPABILITIES": caps},
                    Fix(
                        Msg("Recreate the container with NVIDIA_DRIVER_CAPABILITIES=compute,utility."),
                        ["docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility <image> ..."],
                    ),
                )
            )
    return findings

