"""Containers: which kind this process runs in, and whether the NVIDIA runtime gave it GPUs.

``detect_container`` is the one place that decides the container kind: the host probe
(``doctor/probes/host.py``) takes its answer too. Precedence, most useful answer first:
kubernetes > apptainer > enroot > podman > docker > containerd > lxc > whatever ``$container`` names.
Kubernetes wins over the runtime underneath it because its remedies (the pod spec) differ from ``docker run``
flags; Apptainer/Singularity (``--nv``) and enroot (Slurm's pyxis: ``--container-image``) are HPC runtimes
whose own variables name them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from doctor.model.environment import Container
from doctor.probes.environment.files import exists, read_text, scandir_names, under

_MARKERS = (
    "/.dockerenv",
    "/run/.containerenv",
    "/var/run/secrets/kubernetes.io/serviceaccount",
    "/.singularity.d",
)
_PRECEDENCE = ("kubernetes", "apptainer", "enroot", "podman", "docker", "containerd", "lxc")


def parse_container_kind(
    cgroup_text: str, mountinfo_text: str, markers: Mapping[str, bool], env: Mapping[str, str]
) -> tuple[str | None, list[str]]:
    """The container kind and the evidence for it, from already-read texts (pure).

    cgroup v2 shows only "0::/" in /proc/*/cgroup, so mountinfo (the bind-mounted /etc/hostname lives
    under /var/lib/docker/containers/...) is the fallback.
    """
    evidence: list[str] = []
    kinds: list[str] = []
    cg, mi = cgroup_text.lower(), mountinfo_text.lower()
    if env.get("KUBERNETES_SERVICE_HOST"):
        evidence.append("KUBERNETES_SERVICE_HOST is set")
        kinds.append("kubernetes")
    if markers.get("/var/run/secrets/kubernetes.io/serviceaccount"):
        evidence.append("/var/run/secrets/kubernetes.io/serviceaccount exists")
        kinds.append("kubernetes")
    if "kubepods" in cg or "/kubelet/pods/" in mi:
        evidence.append("cgroup or mountinfo mentions kubepods/kubelet")
        kinds.append("kubernetes")
    for var in ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"):
        if env.get(var):
            evidence.append(f"{var} is set")
            kinds.append("apptainer")
    if markers.get("/.singularity.d"):
        evidence.append("/.singularity.d exists")
        kinds.append("apptainer")
    enroot = sorted(k for k in env if k.startswith(("ENROOT_", "PYXIS_")))
    if enroot:
        evidence.append(f"{enroot[0]} is set")
        kinds.append("enroot")
    if markers.get("/.dockerenv"):
        evidence.append("/.dockerenv exists")
        kinds.append("docker")
    if markers.get("/run/.containerenv"):
        evidence.append("/run/.containerenv exists")
        kinds.append("podman")
    if "libpod" in cg or "/containers/storage/" in mi:
        evidence.append("cgroup or mountinfo mentions libpod/containers storage")
        kinds.append("podman")
    if "docker" in cg or "/docker/containers/" in mi:
        evidence.append("cgroup or mountinfo mentions docker")
        kinds.append("docker")
    if "containerd" in cg or "io.containerd" in mi:
        evidence.append("cgroup or mountinfo mentions containerd")
        kinds.append("containerd")
    if "lxc" in cg.split("::")[-1] or env.get("container") == "lxc":
        evidence.append("cgroup or $container mentions lxc")
        kinds.append("lxc")
    if env.get("container") and env.get("container") != "lxc":
        evidence.append(f"$container={env['container']}")
        kinds.append(env["container"])
    for preferred in _PRECEDENCE:
        if preferred in kinds:
            return preferred, evidence
    return (kinds[0] if kinds else None), evidence


def detect_container(root: str, env: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """The container kind (None on bare metal or a VM) and its evidence, read from files under ``root``."""
    markers = {path: exists(root, path) for path in _MARKERS}
    cgroups = (read_text(root, "/proc/1/cgroup") or "") + (read_text(root, "/proc/self/cgroup") or "")
    mountinfo = read_text(root, "/proc/self/mountinfo") or ""
    return parse_container_kind(cgroups, mountinfo, markers, env)


def probe_container(root: str, env: Mapping[str, str]) -> Container:
    kind, evidence = detect_container(root, env)
    nodes = [f"/dev/{name}" for name in scandir_names(under(root, "/dev")) or [] if name.startswith("nvidia")]
    image_evidence = [f"{var}={env[var]}" for var in ("NVIDIA_REQUIRE_CUDA", "CUDA_VERSION") if env.get(var)]
    if exists(root, "/usr/local/cuda"):
        image_evidence.append("/usr/local/cuda exists")
    return Container(
        kind=kind,
        evidence=evidence,
        device_nodes=nodes,
        gpu_device_nodes=sum(1 for n in nodes if re.fullmatch(r"/dev/nvidia\d+", n)),
        nvidia_visible_devices=env.get("NVIDIA_VISIBLE_DEVICES"),
        nvidia_driver_capabilities=env.get("NVIDIA_DRIVER_CAPABILITIES"),
        cuda_image=bool(image_evidence),
        cuda_image_evidence=image_evidence,
        nvidia_module=exists(root, "/sys/module/nvidia") if kind else None,
    )
