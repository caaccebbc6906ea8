"""The NVIDIA driver: whether it works (its state, as the probes found it) and whether it can run the CUDA
version the installed torch was built with. Each ``check_*`` is a pure function of the machine's assessment
(doctor/compat/assessment.py).

A driver too old for torch gets a fix that names the plan's two ways out: a newer driver with torch kept, or
the nearest release that runs on today's driver (``doctor.plan.plan`` writes the commands).
"""

from __future__ import annotations

from doctor.compat.assessment import Assessment
from doctor.compat.distributions import is_jetson, jetpack_text
from doctor.compat.drivers import driver_advice
from doctor.compat.forward import unused_compat
from doctor.compat.wheels import MINOR_COMPAT, TOO_OLD, change_cost, driver_verdict
from doctor.model import snapshot as S
from doctor.model.findings import ERROR, INFO, WARNING, Finding, Fix
from doctor.model.i18n import Msg
from doctor.model.versions import version_tuple
from doctor.rules import Rule, no_gpu, skipped, unknown, without_torch
from doctor.rules.hazards.common import export, libcuda_copies, same_dir, split_path

DRIVER_URL = "https://www.nvidia.com/Download/index.aspx"


# --- the NVIDIA driver itself ---------------------------------------------------------------------


def check_nvidia_state(facts: Assessment) -> list[Finding]:
    snap = facts.snap
    nv = snap.nvidia
    ev = {"nvidia.status": nv.status, "nvidia.detail": nv.detail, "attempts": list(nv.attempts)}
    if nv.status == S.NVIDIA_NO_DRIVER and snap.host.container:
        # inside a container the remedy is GPU access, not a driver: hazards' container-no-gpu-access
        return skipped(Msg("no NVIDIA driver inside this container: the container check explains it"))
    if nv.status == S.NVIDIA_NO_DRIVER:
        devices = ", ".join(nv.pci_devices) or Msg("an NVIDIA device")
        return [Finding(
            "nvidia-driver-missing", ERROR,
            Msg("an NVIDIA GPU is on the PCI bus but no NVIDIA driver is loaded"),
            Msg("PCI shows {devices}, but neither NVML nor nvidia-smi could reach a driver. CUDA builds of "
            "torch will report torch.cuda.is_available() == False (\"Found no NVIDIA driver on your "
            "system\").", devices=devices),
            ev | {"pci_devices": list(nv.pci_devices)},
            Fix(Msg("Install the NVIDIA driver for this GPU (your distribution's packaged driver is best), "
                "reboot, then run torchdoctor check again."),
                ["sudo ubuntu-drivers install  # Ubuntu; other distributions: see the link", "sudo reboot"]
                if snap.host.os == "linux" else [], [DRIVER_URL]),
        )]
    if nv.status == S.NVIDIA_MISMATCH:
        return [Finding(
            "driver-library-mismatch", ERROR,
            Msg("the NVIDIA driver's user-space library does not match the loaded kernel module"),
            Msg("NVML reports \"Driver/library version mismatch\": the driver was upgraded but the old "
                "kernel "
            "module is still loaded. CUDA cannot initialise until they match."),
            ev, Fix(Msg("Reboot the machine (or unload and reload the nvidia kernel "
                "modules)."), ["sudo reboot"]),
        )]
    if nv.status == S.NVIDIA_CONTAINER_LOST:
        return [Finding(
            "container-lost-gpu-access", ERROR,
            Msg("NVML answers \"Unknown Error\": this container has lost access to its GPUs"),
            Msg("This happens when the host reloads its systemd cgroup configuration (systemctl "
                "daemon-reload) "
            "under a running GPU container. The GPUs come back only in a new container."),
            ev, Fix(Msg("Recreate the container (docker rm -f <name> && docker run --gpus all ...); on the "
                "host, "
                    "NVIDIA's container toolkit documents how to avoid it with the systemd cgroup driver."),
                    [], ["https://github.com/NVIDIA/nvidia-container-toolkit/issues/48"]),
        )]
    if nv.status == S.NVIDIA_NO_PERMISSION:
        return [Finding(
            "nvidia-no-permission", ERROR,
            Msg("this user may not talk to the NVIDIA driver (Insufficient Permissions)"),
            Msg("The /dev/nvidia* device files are not accessible to this user."),
            ev, Fix(Msg("Add the user to the group that owns /dev/nvidia* (often 'video'), then log in "
                "again."),
                    ["ls -l /dev/nvidia*", "sudo usermod -aG video $USER"]),
        )]
    if nv.status == S.NVIDIA_UNKNOWN and snap.host.container and _not_given(snap):
        return skipped(Msg("this container was not given the GPUs: the container check explains it"))
    if nv.status == S.NVIDIA_UNKNOWN and (nv.pci_devices or nv.gpus):
        return [Finding(
            "nvidia-state-unknown", WARNING,
            Msg("could not tell whether the NVIDIA driver works"),
            nv.detail or Msg("Every driver probe failed or gave unreadable output."),
            ev, Fix(Msg("Run nvidia-smi by hand and look at its output."), ["nvidia-smi"]),
        )]
    if nv.status == S.NVIDIA_NO_GPU:
        return skipped(Msg("no NVIDIA GPU on the PCI bus"))
    if nv.status == S.NVIDIA_UNKNOWN:
        return unknown(nv.detail or Msg("no NVIDIA driver answered"))
    return []


def _not_given(snap: S.Snapshot) -> bool:
    """A container without GPU device nodes, or without any libcuda.so.1: started without its GPUs."""
    section = snap.environment.container
    return (section is not None and section.gpu_device_nodes == 0) or libcuda_copies(snap) == []


# --- the driver against the build's CUDA ----------------------------------------------------------


def check_driver(facts: Assessment) -> list[Finding]:
    snap, table, build = facts.snap, facts.table, facts.build
    if build is None:
        return without_torch(snap)
    if build.kind == "unknown":
        return unknown(Msg("whether torch {label} is a CUDA build is not known", label=build.label))
    if build.kind != "cuda":
        return skipped(Msg("not a CUDA build of torch ({kind}): it needs no CUDA driver", kind=build.kind))
    if not build.cuda or "." not in build.cuda:
        # (a CUDA major alone, read from a library, is not enough to judge the driver by)
        return unknown(Msg("the CUDA version of torch {label} is not known", label=build.label))
    if snap.nvidia.status != S.NVIDIA_OK:
        return no_gpu(snap)  # the driver-state rule already explains this
    forward = facts.forward
    # cuda-compat's libcuda first on a GPU that may not use it: CUDA stops with error 804, whatever the build.
    findings = (
        [_compat_unsupported(snap, forward)] if forward is not None and forward.supported is False else []
    )
    machine = facts.machine  # where cuda-compat works, its driver and CUDA (doctor/compat/assessment.py)
    verdict = driver_verdict(table, build.cuda, machine)
    have = snap.nvidia.driver_version.value
    have_cuda = snap.nvidia.cuda_driver_version.value
    ev = {"torch": build.label, "torch.cuda": build.cuda, "driver": have, "driver.max_cuda": have_cuda,
          "driver.max_cuda.source": snap.nvidia.cuda_driver_version.source,
          "min_driver": verdict.needed, "major_floor": verdict.floor}
    if forward is not None and forward.effective:
        ev |= _compat_evidence(forward)
        if verdict.level != TOO_OLD:
            findings.append(_forward_note(snap, build, forward, ev))
        have, have_cuda = machine.driver_version, machine.driver_max_cuda
    major = build.cuda.split(".")[0]
    if verdict.level == TOO_OLD:
        why = (Msg("torch {label} was built with CUDA {cuda}; driver {have} supports CUDA up to "
               "{have_cuda}", label=build.label, cuda=build.cuda, have=have, have_cuda=have_cuda or '?'))
        if have_cuda and version_tuple(have_cuda)[0] != int(major):
            why += Msg(" — a different CUDA major, which minor-version compatibility does not cover.")
        else:
            why += Msg(", below the CUDA {major}.x minor-version-compatibility floor (driver "
                "{floor}).", major=major, floor=verdict.floor)
        why += (Msg(" torch reports \"The NVIDIA driver on your system is too old\" and "
                "torch.cuda.is_available() is False."))
        if is_jetson(snap):
            return findings + [_jetson_driver_finding(snap, table, build, why, ev, verdict)]
        fix = _two_ways(facts, have, have_cuda, verdict)
        compat = unused_compat(snap, table, build.cuda)
        if compat is not None:  # a data-center GPU with cuda-compat installed but not on the loader's path
            ev["compat_available"] = compat.path
            # (the commands stay the plan's: this way keeps torch and the driver both)
            fix.summary += Msg(" Or, keeping both, load the CUDA forward-compatibility package already "
                "installed "
                               "here ({path}, driver {compat}) first: {command}", path=compat.path,
                               compat=compat.version, command=f"export LD_LIBRARY_PATH={compat.path}"
                               "${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
        return findings + [Finding("driver-too-old", ERROR, Msg("the NVIDIA driver is too old for torch "
            "{label}",
                                   label=build.label), why, ev, fix, list(verdict.unverified))]
    if verdict.level == MINOR_COMPAT:
        return findings + [
            Finding(
                "driver-older-than-build",
                WARNING,
                Msg(
                    "torch {label} (CUDA {cuda}) is newer than the driver's CUDA {have_cuda}",
                    label=build.label,
                    cuda=build.cuda,
                    have_cuda=have_cuda or "?",
                ),
                Msg(
                    "Same CUDA major, so CUDA's minor-version compatibility lets it run on driver {have} "
                    "(the "
                    "CUDA {major}.x floor is {floor}). Limits: PTX compiled by the newer toolkit cannot be "
                    'JIT-compiled by this driver ("the provided PTX was compiled with an unsupported '
                    'toolchain"), '
                    "and features that need a newer driver are unavailable. A build whose CUDA is not above "
                    "{have_cuda} avoids this; updating the driver to {needed} does too.",
                    have=have,
                    major=major,
                    floor=verdict.floor,
                    have_cuda=have_cuda,
                    needed=verdict.needed or Msg("a newer one"),
                ),
                ev,
                Fix(
                    Msg("Optional: update the driver, or use the variant the fix plan suggests."),
                    links=[DRIVER_URL],
                ),
                list(verdict.unverified),
            )
        ]
    return findings


COMPAT_DOC = "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"


def _compat_evidence(forward) -> dict:
    return {
        "compat_libcuda": forward.copy.path,
        "found_by": forward.copy.found_by,
        "compat_driver": forward.copy.version,
        "compat_max_cuda": forward.max_cuda,
        "gpus_class": forward.gpus,
        "forward_compat.source": forward.source,
    }


def _forward_note(snap: S.Snapshot, build, forward, ev: dict) -> Finding:
    """torch runs on the CUDA of the cuda-compat libcuda, on GPUs that may use it: said, not a problem."""
    return Finding(
        "cuda-forward-compat",
        INFO,
        Msg(
            "torch {label} runs on CUDA {max_cuda} through CUDA's forward-compatibility package (driver "
            "{compat}) on driver "
            "{have}",
            label=build.label,
            max_cuda=forward.max_cuda,
            compat=forward.copy.version,
            have=snap.nvidia.driver_version.value,
        ),
        Msg(
            "The first libcuda.so.1 the dynamic loader finds is {path} ({found_by}): the cuda-compat "
            "package, "
            "built from driver {compat}. NVIDIA supports forward compatibility on these GPUs ({gpus}), so "
            "CUDA "
            "builds up to {max_cuda} run although nvidia-smi shows the installed driver's CUDA {have_cuda}.",
            path=forward.copy.path,
            found_by=forward.copy.found_by,
            compat=forward.copy.version,
            gpus=forward.gpus,
            max_cuda=forward.max_cuda,
            have_cuda=snap.nvidia.cuda_driver_version.value or "?",
        ),
        ev,
        None,
    )


def _compat_unsupported(snap: S.Snapshot, forward) -> Finding:
    """cuda-compat's libcuda is loaded first on GPUs NVIDIA does not support it on: CUDA error 804."""
    copy = forward.copy
    folder = copy.path.rsplit("/", 1)[0]
    libs = snap.environment.libraries
    if copy.found_by == "LD_LIBRARY_PATH":
        value = libs.value if libs is not None else None
        commands = [export("LD_LIBRARY_PATH", [d for d in split_path(value) if not same_dir(d, folder)])]
    elif copy.found_by.startswith("/etc/ld.so.conf.d/"):
        commands = [f"sudo mv {copy.found_by} {copy.found_by}.disabled && sudo ldconfig"]
    else:
        commands = ["sudo apt-get purge 'cuda-compat-*' && sudo ldconfig"]
    names = ", ".join(g.name for g in snap.nvidia.gpus)
    return Finding(
        "cuda-compat-unsupported-gpu", ERROR,
        Msg("CUDA's forward-compatibility package is loaded on a GPU that does not support it: CUDA fails "
            "with "
            "error 804"),
        Msg("The first libcuda.so.1 the dynamic loader finds is {path} ({found_by}): the cuda-compat package "
            "(driver {compat}). NVIDIA supports forward compatibility only on data-center GPUs, select NGC "
            "Server "
            "Ready RTX cards and Jetson; on {names} CUDA stops at start with error 804 \"forward "
            "compatibility "
            "was attempted on non supported HW\" and torch.cuda.is_available() is False. Without it, torch "
            "uses "
            "the installed driver {have}.", path=copy.path, found_by=copy.found_by, compat=copy.version,
            names=names, have=snap.nvidia.driver_version.value),
        _compat_evidence(forward) | {"gpus": [g.name for g in snap.nvidia.gpus]},
        Fix(Msg("Take the cuda-compat folder off the loader's path, so that the driver's own libcuda is "
            "used."),
            commands, [COMPAT_DOC]),
    )


def _two_ways(facts: Assessment, have, have_cuda, verdict) -> Fix:
    """The driver finding's fix names the plan's two ways: a newer driver with torch kept, or the nearest
    release that runs on today's driver (first where the driver cannot be changed here)."""
    snap, table, build, choice = facts.snap, facts.table, facts.build, facts.choice
    keep, today = choice.needs_driver, choice.today
    change = facts.driver_change
    if keep is None:
        return Fix(
            Msg(
                "Install a torch build made for CUDA {have_cuda} (see the fix plan), "
                "or update the driver to {needed} or later.",
                have_cuda=have_cuda or Msg("your driver"),
                needed=verdict.needed or Msg("a newer release"),
            ),
            links=[DRIVER_URL],
        )
    advice = driver_advice(table, snap, keep.wheel.cuda or "", keep.driver, change)
    other = (Msg("torch {label} ({change_cost}) runs on driver "
        "{have}", label=today.wheel.label, change_cost=change_cost(build.version, today), have=have) if today
             else Msg("no torch release runs on driver {have}", have=have))
    if change.possible:
        return Fix(
            Msg(
                "Install {summary} and keep torch {label}; or keep the driver: {other}. See the fix plan.",
                summary=advice.summary,
                label=keep.wheel.label,
                other=other,
            ),
            links=list(advice.links),
        )
    return Fix(
        Msg(
            "The driver cannot be changed here ({why}): {other}. Keeping torch {label} needs "
            "{summary}, installed by {who}. See the fix plan.",
            why=change.why,
            other=other,
            label=keep.wheel.label,
            summary=advice.summary,
            who=change.who or Msg("whoever manages this machine"),
        ),
        links=list(advice.links),
    )


JETSON_PYTORCH = "https://docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/index.html"


def _jetson_driver_finding(snap: S.Snapshot, table, build, why: str, ev: dict, verdict) -> Finding:
    jetpack, cuda = jetpack_text(snap, table)
    return Finding(
        "driver-too-old", ERROR, Msg("this Jetson's CUDA driver (from {jetpack}) is too old for torch "
            "{label}", jetpack=jetpack, label=build.label),
        why + Msg(" On Jetson the CUDA driver is part of Jetson Linux: it comes with the JetPack, never from "
            "NVIDIA's "
        "driver downloads. The torch that fits is one built for {jetpack}.", jetpack=jetpack),
        ev | {"jetson": snap.provenance.tegra_release, "jetpack.cuda": cuda},
        Fix(Msg("Install NVIDIA's PyTorch for {jetpack} (see the fix plan), or flash a JetPack whose CUDA is "
            "{cuda} or newer if this module supports "
            "one.", jetpack=jetpack, cuda=build.cuda), links=[JETSON_PYTORCH]),
        list(verdict.unverified))


NVIDIA_STATE = Rule("nvidia-driver", Msg("NVIDIA driver state"), check_nvidia_state,
                    ("nvidia-driver-missing", "driver-library-mismatch", "container-lost-gpu-access",
                     "nvidia-no-permission", "nvidia-state-unknown"))
DRIVER_CUDA = Rule(
    "driver-cuda",
    Msg("the driver can run the torch build's CUDA version"),
    check_driver,
    ("driver-too-old", "driver-older-than-build", "cuda-forward-compat", "cuda-compat-unsupported-gpu"),
)
