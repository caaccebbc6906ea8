"""Containers: one that should have a GPU but was started without one, or without CUDA's driver library.

When the host's GPUs show through (an NVIDIA device on the container's PCI bus, which is the host's, or the
host's nvidia kernel module in /sys/module) and torch is a CUDA build, a container without them is an error
whatever else is said: the GPUs are there and this container was not given them. A container where nothing
shows a GPU keeps the severity of what the user said they expect (a note when nothing does).
"""

from __future__ import annotations

from doctor.compat.assessment import Assessment
from doctor.model import snapshot as S
from doctor.model.environment import Container
from doctor.model.findings import ERROR, INFO, WARNING, Finding
from doctor.model.i18n import Msg
from doctor.rules import skipped
from doctor.rules.hazards.common import container_kind, libcuda_copies, missing
from doctor.rules.hazards.remedies import capabilities_remedy, gpu_remedy

# The core rule explains these broken states (container-lost-gpu-access, ...): no duplicates here.
_LEAD_RULE_STATUSES = (S.NVIDIA_CONTAINER_LOST, S.NVIDIA_MISMATCH, S.NVIDIA_NO_PERMISSION)


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
    libcuda = libcuda_copies(snap)
    host_gpus = bool(snap.nvidia.pci_devices) or bool(found.nvidia_module)
    evidence = {
        "container": kind,
        "container.evidence": list(found.evidence),
        "device_nodes": list(found.device_nodes),
        "nvidia.status": status,
        "expects_gpu": expects,
        "pci_devices": list(snap.nvidia.pci_devices),
        "nvidia_module": found.nvidia_module,
        "libcuda": libcuda,
    }
    findings = []
    # Device nodes without the driver libraries (Apptainer shares the host's /dev; --nv binds the libraries).
    no_libraries = status == S.NVIDIA_UNKNOWN and host_gpus and libcuda == []
    if not driver_works and (
        gpu_nodes == 0 or status in (S.NVIDIA_NO_GPU, S.NVIDIA_NO_DRIVER) or no_libraries
    ):
        if not expects:
            return []
        # Severity follows what the user expects. An error when something says a GPU is wanted: the run's own
        # requirements (--require cuda|gpu, [tool.torchdoctor], --device N: snapshot.gpu_wanted) or the NVIDIA
        # container runtime's variables (NVIDIA_VISIBLE_DEVICES naming GPUs, NVIDIA_REQUIRE_CUDA).
        # CUDA_VERSION alone (set by CUDA base images) is a hint; a CUDA torch is not evidence at all (plain
        # `pip install torch` is a CUDA build on Linux, in CPU-only CI and devcontainers too), nor is a
        # toolkit folder.
        wanted = bool(snap.gpu_wanted) or (nvd is not None and not hidden_by_nvd) or any(
            e.startswith("NVIDIA_REQUIRE_CUDA=") for e in found.cuda_image_evidence
        )
        hinted = any(e.startswith("CUDA_VERSION=") for e in found.cuda_image_evidence)
        # The GPUs are there and a CUDA torch cannot use them: an error whoever expects what.
        dead = host_gpus and build is not None and build.kind == "cuda"
        severity = ERROR if wanted or dead else WARNING if hinted else INFO
        nodes = ("no /dev/nvidia* device nodes" if gpu_nodes == 0
                 else "no NVIDIA driver libraries "
                     "(libcuda.so.1)" if no_libraries else "no working NVIDIA driver")
        if hidden_by_nvd and expects:
            fix = gpu_remedy(kind)
            fix.summary = (
                Msg("Recreate the container with NVIDIA_VISIBLE_DEVICES=all (or the GPUs you want). ")
                + fix.summary
            )
            if kind not in ("kubernetes", "podman", "apptainer", "enroot"):
                fix.commands[-1] = "docker run --gpus all -e NVIDIA_VISIBLE_DEVICES=all <image> ..."
            findings.append(
                Finding(
                    "nvidia-visible-devices-hides-all",
                    severity,
                    Msg("NVIDIA_VISIBLE_DEVICES={nvd!r} gives this container no GPU", nvd=nvd),
                    Msg("Inside this {kind} container there are {nodes}. The NVIDIA container runtime reads "
                    "NVIDIA_VISIBLE_DEVICES when the container starts: 'void' or empty injects nothing, "
                    "'none' injects "
                    "the driver libraries but no GPU. torch will report torch.cuda.is_available() == "
                    "False.", kind=kind, nodes=nodes),
                    evidence | {"NVIDIA_VISIBLE_DEVICES": nvd},
                    fix,
                )
            )
        elif dead:
            shown = ", ".join(snap.nvidia.pci_devices) or "/sys/module/nvidia"
            findings.append(
                Finding(
                    "container-no-gpu-access",
                    severity,
                    Msg("the host's NVIDIA GPUs are there, but this {kind} container was not given them "
                        "({nodes})",
                        kind=kind, nodes=nodes),
                    Msg("The host's GPUs show through ({shown}) and its nvidia kernel module is loaded, but "
                        "this "
                    "container was started without the GPUs passed in, so torch {label} (a CUDA build) sees "
                    "no "
                    "device (\"Found no NVIDIA driver on your system\", torch.cuda.is_available() == False). "
                    "GPUs "
                    "are given to a container when it starts; nothing inside it can add them.",
                        shown=shown, label=build.label),
                    evidence,
                    gpu_remedy(kind),
                )
            )
        elif expects:
            findings.append(
                Finding(
                    "container-no-gpu-access",
                    severity,
                    Msg("this {kind} container has no GPU access ({nodes})", kind=kind, nodes=nodes),
                    Msg("The environment expects a GPU ({expects}), but the container was started without "
                    "the NVIDIA runtime passing the GPUs in, so torch sees no device (\"Found no NVIDIA "
                    "driver on your "
                    "system\" or torch.cuda.is_available() == False). GPUs are given to a container when it "
                    "is "
                    "created; nothing inside it can add them.", expects='; '.join(expects)),
                    evidence,
                    gpu_remedy(kind),
                )
            )
        return findings
    caps = found.nvidia_driver_capabilities
    if (gpu_nodes or driver_works) and build is not None and build.kind == "cuda":
        wanted = {c.strip().lower() for c in caps.split(",")} if caps is not None else set()
        # What the runtime did, whatever the variable says: nvidia-smi works (the 'utility' libraries are
        # there) and no libcuda.so.1 is anywhere the loader looks. The variable can be unset (older runtimes
        # and nerdctl before containerd/nerdctl#1024 then gave 'utility' alone) or name 'compute' in the
        # image while the run asked for less (`--gpus capabilities=utility`, a compose `capabilities` list).
        # Only where the folders searched hold the runtime's 'utility' library (libnvidia-ml.so.1, what
        # nvidia-smi loads): then a missing libcuda.so.1 is what was mounted, not a folder the probe missed.
        not_mounted = driver_works and libcuda == [] and bool(libcuda_copies(snap, "libnvidia-ml.so.1"))
        if not_mounted or (caps is not None and not wanted & {"compute", "all"}):
            findings.append(
                Finding(
                    "nvidia-driver-capabilities-no-compute",
                    # CUDA cannot start without libcuda, and a CUDA torch is what needs it.
                    ERROR,
                    _capabilities_title(caps, wanted),
                    Msg("The NVIDIA container runtime mounts libcuda only for the 'compute' capability; with "
                        "'utility' "
                    "alone nvidia-smi works but CUDA (and so torch) finds no driver.")
                    + (Msg(" Here nvidia-smi works and no libcuda.so.1 is on the library path.")
                       if not_mounted else ""),
                    evidence | {"NVIDIA_DRIVER_CAPABILITIES": caps},
                    capabilities_remedy(kind),
                )
            )
    return findings


def _capabilities_title(caps: str | None, wanted: set[str]) -> Msg:
    if caps is None:
        return Msg("NVIDIA_DRIVER_CAPABILITIES is not set and libcuda.so.1 was not mounted: CUDA cannot "
                   "start")
    if wanted & {"compute", "all"}:
        return Msg("NVIDIA_DRIVER_CAPABILITIES={caps!r} names 'compute', but the container was given no "
                   "libcuda.so.1: CUDA cannot start", caps=caps)
    return Msg("NVIDIA_DRIVER_CAPABILITIES={caps!r} does not include 'compute': CUDA cannot start", caps=caps)
