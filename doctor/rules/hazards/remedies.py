"""How each container runtime gives a container its GPUs, in that runtime's own terms: what the container rule
says when a container was started without them, or without CUDA's driver library.

GPUs are handed to a container when it starts (the NVIDIA Container Toolkit's hook or CDI spec, Kubernetes'
device plugin, Apptainer's ``--nv`` binding, pyxis/enroot under a Slurm allocation); nothing inside a running
container can add them, so every remedy starts a new one.
"""

from __future__ import annotations

from doctor.model.findings import Fix
from doctor.model.i18n import Msg

TOOLKIT_INSTALL = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"
TOOLKIT_CDI = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html"
DEVICE_PLUGIN = "https://github.com/NVIDIA/k8s-device-plugin"
APPTAINER_GPU = "https://apptainer.org/docs/user/main/gpu.html"
PYXIS = "https://github.com/NVIDIA/pyxis"
COMPOSE_GPU = "https://docs.docker.com/compose/how-tos/gpu-support/"
CAPABILITIES = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"


def gpu_remedy(kind: str | None) -> Fix:
    """Start the container again with the GPUs passed in, as ``kind`` (the container kind) does it."""
    if kind == "kubernetes":
        return Fix(
            Msg("Request a GPU in the pod spec (resources.limits: nvidia.com/gpu: 1) and make sure the "
                "NVIDIA "
            "device plugin (or the GPU operator) runs on the node."),
            ["kubectl set resources deployment/<name> --limits=nvidia.com/gpu=1",
             "kubectl get nodes -o "
             "custom-columns=NAME:.metadata.name,GPUS:.status.allocatable.nvidia\\.com/gpu"],
            [DEVICE_PLUGIN],
        )
    if kind == "podman":
        return Fix(
            Msg("Recreate the container with the GPUs passed through CDI (generate the CDI spec on the host "
                "once)."),
            ["sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml  # on the host",
             "podman run --device nvidia.com/gpu=all <image> ..."],
            [TOOLKIT_CDI],
        )
    if kind == "apptainer":
        return Fix(
            Msg("Run the image with --nv, which binds the host's NVIDIA driver libraries and nvidia-smi into "
                "the "
            "container (--nvccli does it through the NVIDIA Container Toolkit)."),
            ["apptainer exec --nv <image.sif> ..."],
            [APPTAINER_GPU],
        )
    if kind == "enroot":
        return Fix(
            Msg("Ask Slurm for the GPUs in the job step that starts the container: pyxis hands the allocated "
                "GPUs "
            "to enroot, and a step without them gets none."),
            ["srun --gres=gpu:1 --container-image=<image> ..."],
            [PYXIS],
        )
    return Fix(
        Msg("Recreate the container with the GPUs passed in (docker run --gpus all; in Docker Compose, a "
        "deploy.resources.reservations.devices entry with driver: nvidia, count: all, capabilities: [gpu]); "
        "the "
        "host needs the NVIDIA Container Toolkit configured as a Docker runtime."),
        ["sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker  # on the host",
         "docker run --gpus all <image> ..."],
        [TOOLKIT_INSTALL, COMPOSE_GPU],
    )


def capabilities_remedy(kind: str | None) -> Fix:
    """Start the container again with the 'compute' driver capability, which mounts libcuda."""
    value = "NVIDIA_DRIVER_CAPABILITIES=compute,utility"
    if kind == "kubernetes":
        command = f"kubectl set env deployment/<name> {value}"
    else:
        command = f"docker run --gpus all -e {value} <image> ..."
    return Fix(
        Msg("Recreate the container with NVIDIA_DRIVER_CAPABILITIES=compute,utility (or all): the NVIDIA "
            "container "
        "runtime mounts libcuda only for 'compute'."),
        [command],
        [CAPABILITIES],
    )
