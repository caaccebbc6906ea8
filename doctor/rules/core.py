"""The core rules: driver state, the installed torch build against the driver and the GPUs,
companion packages, Python. Each ``check_*`` is a pure function of (snapshot, table).

Findings whose remedy is a different wheel leave ``fix.commands`` empty: the fix plan
(``doctor.plan.plan``) chooses the one target for all of them and fills the exact command in.
"""

from __future__ import annotations

from doctor.compat.arch import arch_supports, format_cc, sm_name
from doctor.compat.builds import dist_build, torch_build
from doctor.compat.wheels import (
    MINOR_COMPAT,
    TOO_OLD,
    arch_row,
    choose,
    driver_verdict,
    machine_from_snapshot,
)
from doctor.model import snapshot as S
from doctor.model.findings import ERROR, INFO, SHELL, VENV, WARNING, Action, Finding, Fix
from doctor.model.versions import parse_cc, version_tuple
from doctor.rules import Rule

DRIVER_URL = "https://www.nvidia.com/Download/index.aspx"
GET_STARTED = "https://pytorch.org/get-started/locally/"


def _gpus_usable(snap: S.Snapshot) -> bool:
    return snap.nvidia.status == S.NVIDIA_OK and bool(snap.nvidia.gpus)


def _gpu_list(snap: S.Snapshot) -> str:
    parts = []
    for g in snap.nvidia.gpus:
        cc = g.compute_capability.value
        parts.append(f"GPU {g.index} {g.name}" + (f" (CC {cc})" if cc else ""))
    return ", ".join(parts) or "none listed"


# --- the NVIDIA driver itself ---------------------------------------------------------------------


def check_nvidia_state(snap: S.Snapshot, table) -> list[Finding]:
    nv = snap.nvidia
    ev = {"nvidia.status": nv.status, "nvidia.detail": nv.detail, "attempts": list(nv.attempts)}
    if nv.status == S.NVIDIA_NO_DRIVER and snap.host.container:
        return []  # inside a container the remedy is GPU access, not a driver: hazards' container-no-gpu-access
    if nv.status == S.NVIDIA_NO_DRIVER:
        devices = ", ".join(nv.pci_devices) or "an NVIDIA device"
        return [Finding(
            "nvidia-driver-missing", ERROR,
            "an NVIDIA GPU is on the PCI bus but no NVIDIA driver is loaded",
            f"PCI shows {devices}, but neither NVML nor nvidia-smi could reach a driver. CUDA builds of "
            "torch will report torch.cuda.is_available() == False (\"Found no NVIDIA driver on your system\").",
            ev | {"pci_devices": list(nv.pci_devices)},
            Fix("Install the NVIDIA driver for this GPU (your distribution's packaged driver is best), "
                "reboot, then run torchdoctor check again.",
                ["sudo ubuntu-drivers install  # Ubuntu; other distributions: see the link", "sudo reboot"]
                if snap.host.os == "linux" else [], [DRIVER_URL]),
        )]
    if nv.status == S.NVIDIA_MISMATCH:
        return [Finding(
            "driver-library-mismatch", ERROR,
            "the NVIDIA driver's user-space library does not match the loaded kernel module",
            "NVML reports \"Driver/library version mismatch\": the driver was upgraded but the old kernel "
            "module is still loaded. CUDA cannot initialise until they match.",
            ev, Fix("Reboot the machine (or unload and reload the nvidia kernel modules).", ["sudo reboot"]),
        )]
    if nv.status == S.NVIDIA_CONTAINER_LOST:
        return [Finding(
            "container-lost-gpu-access", ERROR,
            "NVML answers \"Unknown Error\": this container has lost access to its GPUs",
            "This happens when the host reloads its systemd cgroup configuration (systemctl daemon-reload) "
            "under a running GPU container. The GPUs come back only in a new container.",
            ev, Fix("Recreate the container (docker rm -f <name> && docker run --gpus all ...); on the host, "
                    "NVIDIA's container toolkit documents how to avoid it with the systemd cgroup driver.",
                    [], ["https://github.com/NVIDIA/nvidia-container-toolkit/issues/48"]),
        )]
    if nv.status == S.NVIDIA_NO_PERMISSION:
        return [Finding(
            "nvidia-no-permission", ERROR,
            "this user may not talk to the NVIDIA driver (Insufficient Permissions)",
            "The /dev/nvidia* device files are not accessible to this user.",
            ev, Fix("Add the user to the group that owns /dev/nvidia* (often 'video'), then log in again.",
                    ["ls -l /dev/nvidia*", "sudo usermod -aG video $USER"]),
        )]
    if nv.status == S.NVIDIA_UNKNOWN and (nv.pci_devices or nv.gpus):
        return [Finding(
            "nvidia-state-unknown", WARNING,
            "could not tell whether the NVIDIA driver works",
            nv.detail or "Every driver probe failed or gave unreadable output.",
            ev, Fix("Run nvidia-smi by hand and look at its output.", ["nvidia-smi"]),
        )]
    return []


# --- is torch there at all ----------------------------------------------------------------------


def check_torch_installed(snap: S.Snapshot, table) -> list[Finding]:
    interp, inst = snap.interpreter, snap.install
    if interp.error:
        return [Finding(
            "interpreter-unusable", ERROR,
            f"the target interpreter could not be inspected: {interp.error}",
            f"Interpreter: {interp.path or '(none found)'} ({interp.reason}).",
            {"interpreter.path": interp.path, "interpreter.reason": interp.reason, "error": interp.error},
            Fix("Point torchdoctor at the Python you run your code with.",
                ["torchdoctor check --python /path/to/venv/bin/python"]),
        )]
    if inst.status == "absent":
        return [Finding(
            "torch-not-installed", ERROR,
            f"torch is not installed in {interp.path}",
            f"Interpreter chosen because: {interp.reason}. The fix plan below installs the build that fits "
            "this machine.",
            {"interpreter.path": interp.path, "interpreter.version": interp.version},
            Fix("Install the torch build chosen for this machine (see the fix plan)."),
        )]
    if inst.status == "error":
        return [Finding(
            "torch-inspect-failed", WARNING,
            "could not read the installed torch's metadata",
            inst.detail, {"install.detail": inst.detail}, None,
        )]
    return []


# --- the build kind against the hardware ----------------------------------------------------------


def check_build_kind(snap: S.Snapshot, table) -> list[Finding]:
    build = torch_build(snap)
    if build is None or not _gpus_usable(snap):
        return []
    ev = {"torch": build.label, "build.evidence": build.evidence, "gpus": _gpu_list(snap),
          "driver": snap.nvidia.driver_version.value}
    if build.kind == "cpu":
        windows = snap.host.os == "windows"
        detail = (f"torch {build.label} has no CUDA support, but this machine has a working NVIDIA GPU "
                  f"({_gpu_list(snap)}). torch.cuda.is_available() returns False and everything runs on the CPU.")
        if windows:
            detail += (" On Windows, torch from PyPI is always a CPU build: CUDA builds come only from "
                       "https://download.pytorch.org/whl/cuXXX.")
        elif build.local is None and snap.host.machine == "aarch64":
            detail += " On Linux aarch64 the PyPI wheel of older releases is CPU-only."
        return [Finding("torch-cpu-build", ERROR, "a CPU-only torch on a machine with an NVIDIA GPU", detail, ev,
                        Fix("Install a CUDA build of torch (see the fix plan)."))]
    if build.kind in ("rocm", "xpu"):
        return [Finding("torch-wrong-vendor-build", ERROR,
                        f"a {build.kind.upper()} build of torch on a machine with an NVIDIA GPU",
                        f"torch {build.label} targets {build.kind.upper()} devices; it cannot use {_gpu_list(snap)}.",
                        ev, Fix("Install a CUDA build of torch (see the fix plan)."))]
    return []


def check_driver(snap: S.Snapshot, table) -> list[Finding]:
    build = torch_build(snap)
    if build is None or build.kind != "cuda" or not build.cuda:
        return []
    if snap.nvidia.status != S.NVIDIA_OK:
        return []  # the driver-state rule already explains this
    machine = machine_from_snapshot(snap)
    verdict = driver_verdict(table, build.cuda, machine)
    have = snap.nvidia.driver_version.value
    have_cuda = snap.nvidia.cuda_driver_version.value
    ev = {"torch": build.label, "torch.cuda": build.cuda, "driver": have, "driver.max_cuda": have_cuda,
          "driver.max_cuda.source": snap.nvidia.cuda_driver_version.source,
          "min_driver": verdict.needed, "major_floor": verdict.floor}
    major = build.cuda.split(".")[0]
    if verdict.level == TOO_OLD:
        why = (f"torch {build.label} was built with CUDA {build.cuda}; driver {have} supports CUDA up to "
               f"{have_cuda or '?'}")
        if have_cuda and version_tuple(have_cuda)[0] != int(major):
            why += " — a different CUDA major, which minor-version compatibility does not cover."
        else:
            why += f", below the CUDA {major}.x minor-version-compatibility floor (driver {verdict.floor})."
        why += (" torch reports \"The NVIDIA driver on your system is too old\" and "
                "torch.cuda.is_available() is False.")
        return [Finding("driver-too-old", ERROR, f"the NVIDIA driver is too old for torch {build.label}", why, ev,
                        Fix(f"Install a torch build made for CUDA {have_cuda or 'your driver'} (see the fix plan), "
                            f"or update the driver to {verdict.needed or 'a newer release'} or later.",
                            links=[DRIVER_URL]), list(verdict.unverified))]
    if verdict.level == MINOR_COMPAT:
        return [Finding(
            "driver-older-than-build", WARNING,
            f"torch {build.label} (CUDA {build.cuda}) is newer than the driver's CUDA {have_cuda or '?'}",
            f"Same CUDA major, so CUDA's minor-version compatibility lets it run on driver {have} (the "
            f"CUDA {major}.x floor is {verdict.floor}). Limits: PTX compiled by the newer toolkit cannot be "
            "JIT-compiled by this driver (\"the provided PTX was compiled with an unsupported toolchain\"), "
            "and features that need a newer driver are unavailable. A build whose CUDA is not above "
            f"{have_cuda} avoids this; updating the driver to {verdict.needed or 'a newer one'} does too.",
            ev, Fix("Optional: update the driver, or use the variant the fix plan suggests.", links=[DRIVER_URL]),
            list(verdict.unverified),
        )]
    return []


def check_gpu_arch(snap: S.Snapshot, table) -> list[Finding]:
    build = torch_build(snap)
    if build is None or build.kind != "cuda" or not snap.nvidia.gpus:
        return []
    gpus = [(g, parse_cc(g.compute_capability.value)) for g in snap.nvidia.gpus]
    gpus = [(g, cc) for g, cc in gpus if cc]
    if not gpus:
        return []
    variant = build.variant
    row, borrowed = arch_row(table, build.version, variant, snap.host.platform) if variant else (None, None)
    arch = list(snap.runtime.arch_list) if snap.runtime.status == "ok" and snap.runtime.arch_list else None
    sm, ptx, source = (arch, [], "torch.cuda.get_arch_list() (import probe)") if arch else (
        (list(row.sm), list(row.ptx or []), f"table: torch {row.torch_minor} {row.variant} {row.platform}")
        if row else (None, None, None))
    if sm is None:
        return [Finding(
            "arch-list-unknown", INFO,
            f"the table has no architecture list for torch {build.label} on {snap.host.platform}",
            "GPU support of this build could not be checked statically; the smoke test checks it for real.",
            {"torch": build.label, "platform": snap.host.platform},
        )]
    unverified = [f"arch list {row.torch_minor}/{row.variant}"] if (row and not arch and row.confidence != "verified") else []
    if borrowed and not arch:
        unverified.append(borrowed)
    findings = []
    bad = [(g, cc) for g, cc in gpus if not arch_supports(cc, sm, ptx, build.cuda).supported]
    for g, cc in bad:
        findings.append(Finding(
            "gpu-arch-unsupported", ERROR,
            f"torch {build.label} has no kernels for GPU {g.index} {g.name} ({sm_name(cc)})",
            f"{g.name} has compute capability {format_cc(cc)}; this build was compiled for {' '.join(sm)}"
            + (f" (+PTX {' '.join(ptx)})" if ptx else "") + ". torch warns \"" + f"{g.name} with CUDA capability "
            f"{sm_name(cc)} is not compatible with the current PyTorch installation\" and kernels fail with "
            "\"no kernel image is available for execution on the device\".",
            {"gpu": g.name, "gpu.index": g.index, "compute_capability": format_cc(cc),
             "compute_capability.source": g.compute_capability.source, "arch_list": sm, "ptx": ptx,
             "arch_list.source": source, "torch": build.label},
            Fix("Install a build whose architecture list covers this GPU (see the fix plan)."), unverified,
        ))
    if bad:
        groups = _gpu_groups(snap, table, gpus)
        if groups and len(groups) > 1:
            findings.append(_groups_finding(snap, groups))
    return findings


def _gpu_groups(snap: S.Snapshot, table, gpus) -> list[tuple[list, object]]:
    """When no single wheel serves every GPU: the best wheel for each group of GPUs."""
    machine = machine_from_snapshot(snap)
    everything = choose(table, machine, None)
    if everything.target or everything.needs_driver:
        return []
    groups: dict[str, tuple[list, object]] = {}
    for g, cc in gpus:
        best = choose(table, machine, None, ccs=(cc,))
        f = best.target or best.needs_driver
        key = f.wheel.label if f else "none"
        groups.setdefault(key, ([], f))[0].append(g)
    return list(groups.values())


def _groups_finding(snap: S.Snapshot, groups) -> Finding:
    lines, ev = [], {}
    for members, f in groups:
        ids = ",".join(str(g.index) for g in members)
        names = ", ".join(f"{g.index}: {g.name}" for g in members)
        if f is None:
            lines.append(Action(SHELL, text=f"# GPUs {names}: no published wheel supports them"))
            continue
        w = f.wheel
        env_name = f".venv-{w.variant}"
        lines.append(Action(SHELL, text=f"# GPUs {names}: torch {w.label}"))
        lines.append(Action(VENV, (f"torch=={w.label}",), w.variant, text=env_name))
        if snap.host.os == "windows":
            lines.append(Action(SHELL, text=f"set CUDA_VISIBLE_DEVICES={ids} && {env_name}\\Scripts\\python.exe "
                                "your_script.py"))
        else:
            lines.append(Action(SHELL, text=f"CUDA_VISIBLE_DEVICES={ids} {env_name}/bin/python your_script.py"))
        ev[ids] = w.label
    return Finding(
        "gpus-need-different-wheels", ERROR,
        "no single torch wheel has kernels for every GPU in this machine",
        f"GPUs: {_gpu_list(snap)}. Every published build lacks kernels for one of them (old architectures "
        f"were dropped from the builds that added new ones). Use one environment per group of GPUs, "
        "each selecting its GPUs with CUDA_VISIBLE_DEVICES.",
        {"groups": ev},
        Fix("One environment per GPU group:", actions=lines),
    )


# --- companions ---------------------------------------------------------------------------------


def check_companions(snap: S.Snapshot, table) -> list[Finding]:
    inst = snap.install
    build = torch_build(snap)
    if build is None:
        return []
    findings = []
    release = table.release(build.version)
    patch = release.patch(build.version) if release else None
    for name in ("torchvision", "torchaudio"):
        dist = getattr(inst, name)
        if dist is None:
            continue
        comp = dist_build(dist)
        problems = []
        expected = getattr(patch, name) if patch else None
        spec = _torch_requirement(dist.requires)
        if spec is not None:
            # The companion's own declaration is what its build needs (and what pip enforces).
            full = f"{build.version}+{build.local}" if build.local else build.version  # ==2.7.1+cu128 pins
            if not (spec.contains(build.version, prereleases=True) or spec.contains(full, prereleases=True)):
                problems.append(f"{name} {comp.version} requires torch{spec}, installed is {build.version}")
        elif expected and comp.version.split(".")[:2] != expected.split(".")[:2]:
            problems.append(f"torch {build.version} pairs with {name} {expected}, not {comp.version}")
        if comp.kind != "unknown" and build.kind != "unknown":
            # torchvision checks only the CUDA major itself; a CPU companion has no CUDA kernels at all.
            if comp.kind != build.kind or (comp.cuda and build.cuda and comp.cuda.split(".")[0] != build.cuda.split(".")[0]):
                problems.append(f"{name} is a {comp.variant or comp.kind} build, torch is {build.variant or build.kind}")
        if problems:
            findings.append(Finding(
                f"{name}-mismatch", ERROR,
                f"{name} {comp.label} does not match torch {build.label}",
                "; ".join(problems) + f". A mismatched {name} fails at import (\"operator torchvision::nms does "
                "not exist\", \"Couldn't load custom C++ ops\") or with \"different CUDA major versions\".",
                {name: comp.label, "torch": build.label, "expected": expected},
                Fix(f"Reinstall torch and {name} together (see the fix plan)."),
            ))
    return findings


def _torch_requirement(requires: list[str]):
    """The SpecifierSet a companion's ``Requires-Dist: torch ...`` declares, or None."""
    from packaging.requirements import InvalidRequirement, Requirement

    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() == "torch" and str(req.specifier):
            return req.specifier
    return None


# --- Python ---------------------------------------------------------------------------------------


def check_python(snap: S.Snapshot, table) -> list[Finding]:
    py = snap.interpreter.version
    if not py or snap.interpreter.error:
        return []
    build = torch_build(snap)
    machine = machine_from_snapshot(snap)
    supported = [r for r in table.releases if r.supports_python(py) and r.variants_for(machine.platform)]
    if not supported:
        ranges = ", ".join(f"{r.minor}: {r.python_min}-{r.python_max}" for r in table.releases[-3:])
        return [Finding(
            "python-unsupported", ERROR,
            f"no torch release has wheels for Python {py} on {machine.platform}",
            f"pip will answer \"Could not find a version that satisfies the requirement torch (from versions: "
            f"none)\". Recent releases support: {ranges}.",
            {"python": py, "platform": machine.platform},
            Fix("Create a virtual environment with a supported Python and install torch there.",
                ["uv venv --python 3.12 .venv  # or: python3.12 -m venv .venv"]),
        )]
    choice = choose(table, machine, build.version if build else None)
    if choice.target is None and choice.needs_driver is None and "has no wheel for Python" in choice.reason:
        return [Finding(
            "python-unsupported", ERROR,
            f"the torch this machine needs has no wheel for Python {py}",
            f"{choice.reason}. pip would answer \"Could not find a version that "
            "satisfies the requirement\" or install an older build without kernels for this GPU.",
            {"python": py, "platform": machine.platform, "reason": choice.reason},
            Fix("Create a virtual environment with a supported Python and install torch there.",
                ["uv venv --python 3.12 .venv  # or: python3.12 -m venv .venv"]),
        )]
    if build is not None:
        release = table.release(build.version)
        if release is not None and not release.supports_python(py):
            return [Finding(
                "python-unsupported-by-torch", WARNING,
                f"torch {build.version} publishes no wheels for Python {py}",
                f"torch {release.minor} supports Python {release.python_min} to {release.python_max}; this one is "
                "probably a source build or was forced in. Upgrades will need a release that supports this Python.",
                {"python": py, "torch": build.label},
            )]
    return []


def check_table_fresh(snap: S.Snapshot, table) -> list[Finding]:
    build = torch_build(snap)
    if build is None or not table.releases:
        return []
    newest = table.releases[-1]
    have = version_tuple(build.version)
    if have and have[:2] > version_tuple(newest.minor)[:2]:
        return [Finding(
            "table-older-than-torch", WARNING,
            f"torch {build.version} is newer than this compatibility table (newest: {newest.minor})",
            f"Table {table.table_version} (verified {table.verified_on}) does not know this release; conclusions "
            "about it rest on the nearest older row. Update torchdoctor or pass --table.",
            {"torch": build.version, "table_version": table.table_version},
        )]
    return []


RULES = [
    Rule("nvidia-driver", "NVIDIA driver state", check_nvidia_state,
         ("nvidia-driver-missing", "driver-library-mismatch", "container-lost-gpu-access",
          "nvidia-no-permission", "nvidia-state-unknown")),
    Rule("torch-installed", "torch is installed in the target interpreter", check_torch_installed,
         ("interpreter-unusable", "torch-not-installed", "torch-inspect-failed")),
    Rule("build-kind", "the torch build matches the hardware (CUDA build for NVIDIA GPUs)", check_build_kind,
         ("torch-cpu-build", "torch-wrong-vendor-build")),
    Rule("driver-cuda", "the driver can run the torch build's CUDA version", check_driver,
         ("driver-too-old", "driver-older-than-build")),
    Rule("gpu-arch", "the torch build has kernels for every GPU", check_gpu_arch,
         ("gpu-arch-unsupported", "gpus-need-different-wheels", "arch-list-unknown")),
    Rule("companions", "torchvision and torchaudio match torch", check_companions,
         ("torchvision-mismatch", "torchaudio-mismatch")),
    Rule("python", "this Python has torch wheels", check_python,
         ("python-unsupported", "python-unsupported-by-torch")),
    Rule("table-fresh", "the compatibility table knows the installed torch", check_table_fresh,
         ("table-older-than-torch",)),
]
