"""The core rules: driver state, the installed torch build against the driver and the GPUs,
companion packages, Python. Each ``check_*`` is a pure function of (snapshot, table).

Findings whose remedy is a different wheel leave ``fix.commands`` empty: the fix plan
(``doctor.plan.plan``) chooses the one target for all of them and fills the exact command in.
"""

from __future__ import annotations

from dataclasses import replace

from doctor.compat.arch import format_cc, sm_name
from doctor.compat.builds import companion_build, torch_build
from doctor.compat.coverage import NEEDS_PTX, NO_KERNELS, UNKNOWN, arch_source, cudnn_floor, gpu_fit
from doctor.compat.distributions import is_jetson, jetpack_text, torch_origin
from doctor.compat.drivers import driver_advice, driver_change
from doctor.compat.interpreters import install_hint, python_in_range, venv_line
from doctor.compat.pins import wanted_spec
from doctor.compat.wheels import (
    MINOR_COMPAT,
    TOO_OLD,
    change_cost,
    choose,
    driver_verdict,
    machine_from_snapshot,
    python_label,
    python_ok,
)
from doctor.model import snapshot as S
from doctor.model.findings import ERROR, INFO, SHELL, VENV, WARNING, Action, Finding, Fix
from doctor.model.i18n import Msg, join
from doctor.model.versions import parse_cc, version_tuple
from doctor.rules import UNINSPECTED, Rule, not_observed, skipped, unknown, without_torch

DRIVER_URL = "https://www.nvidia.com/Download/index.aspx"
GET_STARTED = "https://pytorch.org/get-started/locally/"


def _gpus_usable(snap: S.Snapshot) -> bool:
    return snap.nvidia.status == S.NVIDIA_OK and bool(snap.nvidia.gpus)


def _gpu_list(snap: S.Snapshot) -> str:
    parts = []
    for g in snap.nvidia.gpus:
        cc = g.compute_capability.value
        parts.append(Msg("GPU {index} {name} (CC {cc})", index=g.index, name=g.name, cc=cc) if cc else
                     Msg("GPU {index} {name}", index=g.index, name=g.name))
    return join(", ", parts) or Msg("none listed")


def _no_gpu(snap: S.Snapshot):
    """A GPU rule's answer without a working NVIDIA GPU: skipped, or unknown when nobody could tell."""
    nv = snap.nvidia
    if nv.status == S.NVIDIA_UNKNOWN:
        return unknown(Msg("whether this machine has a working NVIDIA GPU is not known"))
    if nv.status in (S.NVIDIA_NO_GPU, S.NVIDIA_OK):
        return skipped(Msg("no NVIDIA GPU"))
    return skipped(Msg("the NVIDIA driver is not usable ({status}): the driver check explains it", status=nv.status))


# --- the NVIDIA driver itself ---------------------------------------------------------------------


def check_nvidia_state(snap: S.Snapshot, table) -> list[Finding]:
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
            "torch will report torch.cuda.is_available() == False (\"Found no NVIDIA driver on your system\").", devices=devices),
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
            Msg("NVML reports \"Driver/library version mismatch\": the driver was upgraded but the old kernel "
            "module is still loaded. CUDA cannot initialise until they match."),
            ev, Fix(Msg("Reboot the machine (or unload and reload the nvidia kernel modules)."), ["sudo reboot"]),
        )]
    if nv.status == S.NVIDIA_CONTAINER_LOST:
        return [Finding(
            "container-lost-gpu-access", ERROR,
            Msg("NVML answers \"Unknown Error\": this container has lost access to its GPUs"),
            Msg("This happens when the host reloads its systemd cgroup configuration (systemctl daemon-reload) "
            "under a running GPU container. The GPUs come back only in a new container."),
            ev, Fix(Msg("Recreate the container (docker rm -f <name> && docker run --gpus all ...); on the host, "
                    "NVIDIA's container toolkit documents how to avoid it with the systemd cgroup driver."),
                    [], ["https://github.com/NVIDIA/nvidia-container-toolkit/issues/48"]),
        )]
    if nv.status == S.NVIDIA_NO_PERMISSION:
        return [Finding(
            "nvidia-no-permission", ERROR,
            Msg("this user may not talk to the NVIDIA driver (Insufficient Permissions)"),
            Msg("The /dev/nvidia* device files are not accessible to this user."),
            ev, Fix(Msg("Add the user to the group that owns /dev/nvidia* (often 'video'), then log in again."),
                    ["ls -l /dev/nvidia*", "sudo usermod -aG video $USER"]),
        )]
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


# --- is torch there at all ----------------------------------------------------------------------


def check_torch_installed(snap: S.Snapshot, table) -> list[Finding]:
    interp, inst = snap.interpreter, snap.install
    if interp.error:
        return [Finding(
            "interpreter-unusable", ERROR,
            Msg("the target interpreter could not be inspected: {error}", error=interp.error),
            Msg("Interpreter: {path} ({reason}).", path=interp.path or Msg('(none found)'), reason=interp.reason),
            {"interpreter.path": interp.path, "interpreter.reason": interp.reason, "error": interp.error},
            Fix(Msg("Point torchdoctor at the Python you run your code with."),
                ["torchdoctor check --python /path/to/venv/bin/python"]),
        )]
    if inst.status == "absent":
        return [Finding(
            "torch-not-installed", ERROR,
            Msg("torch is not installed in {path}", path=interp.path or Msg("the Python collect_env ran in")
                if snap.origin == "collect_env" else interp.path),
            Msg("Interpreter chosen because: {reason}. The fix plan below installs the build that fits "
            "this machine.", reason=interp.reason),
            {"interpreter.path": interp.path, "interpreter.version": interp.version},
            Fix(Msg("Install the torch build chosen for this machine (see the fix plan).")),
        )]
    if inst.status == "error":
        return [Finding(
            "torch-inspect-failed", WARNING,
            Msg("could not read the installed torch's metadata"),
            inst.detail, {"install.detail": inst.detail}, None,
        )]
    return []


# --- the build kind against the hardware ----------------------------------------------------------


def check_build_kind(snap: S.Snapshot, table) -> list[Finding]:
    build = torch_build(snap)
    if build is None:
        return without_torch(snap)
    if not _gpus_usable(snap):
        return _no_gpu(snap)
    ev = {"torch": build.label, "build.evidence": build.evidence, "gpus": _gpu_list(snap),
          "driver": snap.nvidia.driver_version.value}
    if build.kind == "cpu":
        windows = snap.host.os == "windows"
        detail = (Msg("torch {label} has no CUDA support, but this machine has a working NVIDIA GPU "
                  "({gpu_list}). torch.cuda.is_available() returns False and everything runs on the CPU.", label=build.label, gpu_list=_gpu_list(snap)))
        if windows:
            detail += (Msg(" On Windows, torch from PyPI is always a CPU build: CUDA builds come only from "
                       "https://download.pytorch.org/whl/cuXXX."))
        elif build.local is None and snap.host.machine == "aarch64":
            detail += Msg(" On Linux aarch64 the PyPI wheel of older releases is CPU-only.")
        return [Finding("torch-cpu-build", ERROR, Msg("a CPU-only torch on a machine with an NVIDIA GPU"), detail, ev,
                        Fix(Msg("Install a CUDA build of torch (see the fix plan).")))]
    if build.kind in ("rocm", "xpu"):
        return [Finding("torch-wrong-vendor-build", ERROR,
                        Msg("a {upper} build of torch on a machine with an NVIDIA GPU", upper=build.kind.upper()),
                        Msg("torch {label} targets {upper} devices; it cannot use {gpu_list}.", label=build.label, upper=build.kind.upper(), gpu_list=_gpu_list(snap)),
                        ev, Fix(Msg("Install a CUDA build of torch (see the fix plan).")))]
    return []


def check_driver(snap: S.Snapshot, table) -> list[Finding]:
    build = torch_build(snap)
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
        return _no_gpu(snap)  # the driver-state rule already explains this
    machine = machine_from_snapshot(snap)
    verdict = driver_verdict(table, build.cuda, machine)
    have = snap.nvidia.driver_version.value
    have_cuda = snap.nvidia.cuda_driver_version.value
    ev = {"torch": build.label, "torch.cuda": build.cuda, "driver": have, "driver.max_cuda": have_cuda,
          "driver.max_cuda.source": snap.nvidia.cuda_driver_version.source,
          "min_driver": verdict.needed, "major_floor": verdict.floor}
    major = build.cuda.split(".")[0]
    if verdict.level == TOO_OLD:
        why = (Msg("torch {label} was built with CUDA {cuda}; driver {have} supports CUDA up to "
               "{have_cuda}", label=build.label, cuda=build.cuda, have=have, have_cuda=have_cuda or '?'))
        if have_cuda and version_tuple(have_cuda)[0] != int(major):
            why += Msg(" — a different CUDA major, which minor-version compatibility does not cover.")
        else:
            why += Msg(", below the CUDA {major}.x minor-version-compatibility floor (driver {floor}).", major=major, floor=verdict.floor)
        why += (Msg(" torch reports \"The NVIDIA driver on your system is too old\" and "
                "torch.cuda.is_available() is False."))
        if is_jetson(snap):
            return [_jetson_driver_finding(snap, table, build, why, ev, verdict)]
        return [Finding("driver-too-old", ERROR, Msg("the NVIDIA driver is too old for torch {label}", label=build.label), why, ev,
                        _two_ways(snap, table, machine, build, have, have_cuda, verdict), list(verdict.unverified))]
    if verdict.level == MINOR_COMPAT:
        return [Finding(
            "driver-older-than-build", WARNING,
            Msg("torch {label} (CUDA {cuda}) is newer than the driver's CUDA {have_cuda}", label=build.label, cuda=build.cuda, have_cuda=have_cuda or '?'),
            Msg("Same CUDA major, so CUDA's minor-version compatibility lets it run on driver {have} (the "
            "CUDA {major}.x floor is {floor}). Limits: PTX compiled by the newer toolkit cannot be "
            "JIT-compiled by this driver (\"the provided PTX was compiled with an unsupported toolchain\"), "
            "and features that need a newer driver are unavailable. A build whose CUDA is not above "
            "{have_cuda} avoids this; updating the driver to {needed} does too.", have=have, major=major, floor=verdict.floor, have_cuda=have_cuda, needed=verdict.needed or Msg('a newer one')),
            ev, Fix(Msg("Optional: update the driver, or use the variant the fix plan suggests."), links=[DRIVER_URL]),
            list(verdict.unverified),
        )]
    return []


def _two_ways(snap: S.Snapshot, table, machine, build, have, have_cuda, verdict) -> Fix:
    """The driver finding's fix names the plan's two ways: a newer driver with torch kept, or the nearest release
    that runs on today's driver (first where the driver cannot be changed here)."""
    choice = choose(table, machine, build.version, wanted=wanted_spec(snap))
    keep, today = choice.needs_driver, choice.today
    change = driver_change(snap)
    if keep is None:
        return Fix(Msg("Install a torch build made for CUDA {have_cuda} (see the fix plan), "
                   "or update the driver to {needed} or later.", have_cuda=have_cuda or Msg('your driver'), needed=verdict.needed or Msg('a newer release')), links=[DRIVER_URL])
    advice = driver_advice(table, snap, keep.wheel.cuda or "", keep.driver, change)
    other = (Msg("torch {label} ({change_cost}) runs on driver {have}", label=today.wheel.label, change_cost=change_cost(build.version, today), have=have) if today
             else Msg("no torch release runs on driver {have}", have=have))
    if change.possible:
        return Fix(Msg("Install {summary} and keep torch {label}; or keep the driver: {other}. "
                   "See the fix plan.", summary=advice.summary, label=keep.wheel.label, other=other), links=list(advice.links))
    return Fix(Msg("The driver cannot be changed here ({why}): {other}. Keeping torch {label} needs "
               "{summary}, installed by {who}. See the fix plan.", why=change.why, other=other, label=keep.wheel.label, summary=advice.summary, who=change.who or Msg('whoever manages this machine')),
               links=list(advice.links))


JETSON_PYTORCH = "https://docs.nvidia.com/deeplearning/frameworks/install-pytorch-jetson-platform/index.html"


def _jetson_driver_finding(snap: S.Snapshot, table, build, why: str, ev: dict, verdict) -> Finding:
    jetpack, cuda = jetpack_text(snap, table)
    return Finding(
        "driver-too-old", ERROR, Msg("this Jetson's CUDA driver (from {jetpack}) is too old for torch {label}", jetpack=jetpack, label=build.label),
        why + Msg(" On Jetson the CUDA driver is part of Jetson Linux: it comes with the JetPack, never from NVIDIA's "
        "driver downloads. The torch that fits is one built for {jetpack}.", jetpack=jetpack),
        ev | {"jetson": snap.provenance.tegra_release, "jetpack.cuda": cuda},
        Fix(Msg("Install NVIDIA's PyTorch for {jetpack} (see the fix plan), or flash a JetPack whose CUDA is "
            "{cuda} or newer if this module supports one.", jetpack=jetpack, cuda=build.cuda), links=[JETSON_PYTORCH]),
        list(verdict.unverified))


def check_gpu_arch(snap: S.Snapshot, table) -> list[Finding]:
    """Kernels for every GPU, judged on the best arch list there is (doctor/compat/coverage.py): torch at run
    time, the binary, the table (PyTorch's wheels only), else the CUDA version's bound. Each finding names its
    source; what none of them can decide stays unknown."""
    build = torch_build(snap)
    if build is None:
        return without_torch(snap)
    if build.kind == "unknown":
        return unknown(Msg("whether torch {label} is a CUDA build is not known", label=build.label))
    if build.kind != "cuda":
        return skipped(Msg("not a CUDA build of torch ({kind})", kind=build.kind))
    if not snap.nvidia.gpus:
        return _no_gpu(snap)
    gpus = [(g, parse_cc(g.compute_capability.value)) for g in snap.nvidia.gpus]
    gpus = [(g, cc) for g, cc in gpus if cc]
    if not gpus:
        return unknown(Msg("no GPU's compute capability is known"))
    origin = torch_origin(snap)
    source = arch_source(snap, table, build, origin)
    ev = {"torch": build.label, "origin": origin.kind, "origin.evidence": origin.evidence,
          "arch_list.source": source.label, "arch_list.kind": source.kind, "arch_list": list(source.sm),
          "ptx": list(source.ptx) if source.ptx is not None else None, "partial": list(source.partial),
          "not_used": list(source.skipped)}
    compiled = ""
    if source.has_list:
        compiled = (Msg("this build was compiled for {sm}", sm=' '.join(source.sm) or Msg('no cubin'))
                    + (Msg(" (+PTX {ptx})", ptx=' '.join(source.ptx)) if source.ptx else "") + Msg(", according to {label}", label=source.label))
    findings, undecided = [], []
    for g, cc in gpus:
        fit = gpu_fit(source, cc, build, origin, table, snap.host.platform)
        gev = ev | {"gpu": g.name, "gpu.index": g.index, "compute_capability": format_cc(cc),
                    "compute_capability.source": g.compute_capability.source, "bound": fit.bound}
        if fit.verdict == NO_KERNELS:
            bound = Msg(" {bound}: no CUDA {cuda} build can have these kernels.", bound=fit.bound, cuda=build.cuda) if (
                fit.bound and source.has_list) else ""
            what = join("; ", [part for part in (compiled, fit.why) if part])
            findings.append(Finding(
                "gpu-arch-unsupported", ERROR,
                Msg("torch {label} has no kernels for GPU {index} {name} ({sm_name})", label=build.label, index=g.index, name=g.name, sm_name=sm_name(cc)),
                Msg("{name} has compute capability {format_cc}; {what}.{bound} torch warns \""
                "{name} with CUDA capability {sm_name} is not compatible with the current PyTorch "
                "installation\" and kernels fail with \"no kernel image is available for execution on the device\".", name=g.name, format_cc=format_cc(cc), what=what, bound=bound, sm_name=sm_name(cc)),
                gev, Fix(Msg("Install a build whose architecture list covers this GPU (see the fix plan).")),
                list(source.unverified)))
        elif fit.verdict == NEEDS_PTX:
            findings.append(Finding(
                "gpu-arch-needs-ptx", WARNING,
                Msg("GPU {index} {name} ({sm_name}) can run torch {label} only through embedded PTX", index=g.index, name=g.name, sm_name=sm_name(cc), label=build.label),
                Msg("{why}. Without PTX in the build, kernels fail with \"no kernel image is available for "
                "execution on the device\". ", why=fit.why) + _FIND_OUT,
                gev, Fix(Msg("Check with the smoke test (torchdoctor check without --no-smoke), or install a build "
                         "made with a CUDA that can target this GPU (see the fix plan).")), list(source.unverified)))
        elif fit.verdict == UNKNOWN:
            undecided.append((g, cc, fit))
    if undecided:
        names = join(", ", [Msg("GPU {index} {name} ({sm})", index=g.index, name=g.name, sm=sm_name(cc))
                            for g, cc, _ in undecided])
        findings.append(Finding(
            "arch-list-unknown", INFO,
            Msg("which GPUs torch {label} has kernels for is not known", label=build.label),
            Msg("{names}: {why}. Not used: {skipped}. ", names=names, why=undecided[0][2].why, skipped=join('; ', source.skipped) or Msg('nothing')) + _FIND_OUT,
            ev | {"gpus": names, "platform": snap.host.platform}, None, list(source.unverified)))
    flagged = {f.evidence.get("gpu.index") for f in findings if f.id != "arch-list-unknown"}
    findings.extend(_cudnn_findings(snap, table, build, origin, [(g, cc) for g, cc in gpus if g.index not in flagged]))
    if any(f.id == "gpu-arch-unsupported" for f in findings):
        groups = _gpu_groups(snap, table, gpus)
        if groups and len(groups) > 1:
            findings.append(_groups_finding(snap, groups))
    return findings


_FIND_OUT = Msg("To find out: run torchdoctor check without --no-smoke (torch reports its own arch list), or list "
                "the kernels with NVIDIA's cuobjdump --list-elf --list-ptx <torch>/lib/libtorch_cuda.so.")


def _cudnn_findings(snap: S.Snapshot, table, build, origin, gpus) -> list[Finding]:
    """A GPU below the lowest compute capability the build's cuDNN supports (cuDNN 9, in torch 2.4 and later,
    needs 5.0): convolutions and RNNs fail there even where the arch list has cubins for it."""
    floor = cudnn_floor(snap, table, build, origin)
    if floor is None:
        return []
    low, where, unverified = floor
    out = []
    for g, cc in gpus:
        if cc < parse_cc(low):
            out.append(Finding(
                "cudnn-unsupported-gpu", ERROR,
                Msg("the cuDNN of torch {label} does not support GPU {index} {name} (compute capability "
                "{format_cc})", label=build.label, index=g.index, name=g.name, format_cc=format_cc(cc)),
                Msg("{where} supports compute capability {low} and up. cuDNN operations (convolutions, RNNs, "
                "attention) fail on this GPU with CUDNN_STATUS_ARCH_MISMATCH or \"no kernel image\".", where=where, low=low),
                {"gpu": g.name, "gpu.index": g.index, "compute_capability": format_cc(cc), "cudnn.min_cc": low,
                 "cudnn.source": where, "torch": build.label},
                Fix(Msg("Install a build whose cuDNN supports this GPU (see the fix plan).")), list(unverified)))
    return out


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
        Msg("no single torch wheel has kernels for every GPU in this machine"),
        Msg("GPUs: {gpu_list}. Every published build lacks kernels for one of them (old architectures "
        "were dropped from the builds that added new ones). Use one environment per group of GPUs, "
        "each selecting its GPUs with CUDA_VISIBLE_DEVICES.", gpu_list=_gpu_list(snap)),
        {"groups": ev},
        Fix(Msg("One environment per GPU group:"), actions=lines),
    )


# --- companions ---------------------------------------------------------------------------------


def check_companions(snap: S.Snapshot, table) -> list[Finding]:
    inst = snap.install
    build = torch_build(snap)
    if build is None:
        return without_torch(snap)
    if inst.torchvision is None and inst.torchaudio is None:
        return skipped(Msg("neither torchvision nor torchaudio is installed"))
    findings = []
    release = table.release(build.version)
    patch = release.patch(build.version) if release else None
    for name in ("torchvision", "torchaudio"):
        dist = getattr(inst, name)
        if dist is None:
            continue
        comp = companion_build(snap, name)
        problems = []
        expected = getattr(patch, name) if patch else None
        spec = _torch_requirement(dist.requires)
        if spec is not None:
            # The companion's own declaration is what its build needs (and what pip enforces).
            full = f"{build.version}+{build.local}" if build.local else build.version  # ==2.7.1+cu128 pins
            if not (spec.contains(build.version, prereleases=True) or spec.contains(full, prereleases=True)):
                problems.append(Msg("{name} {version} requires torch{spec}, installed is {version2}", name=name, version=comp.version, spec=spec, version2=build.version))
        elif expected and comp.version.split(".")[:2] != expected.split(".")[:2]:
            problems.append(Msg("torch {version} pairs with {name} {expected}, not {version2}", version=build.version, name=name, expected=expected, version2=comp.version))
        check = table.companion_cuda_check(name, comp.version)
        cuda_problem = _cuda_mismatch(name, comp, build, check)
        if cuda_problem:
            problems.append(cuda_problem)
        if problems:
            findings.append(Finding(
                f"{name}-mismatch", ERROR,
                Msg("{name} {label} does not match torch {label2}", name=name, label=comp.label, label2=build.label),
                join("; ", problems) + Msg(". A mismatched {name} fails at import (\"operator torchvision::nms does "
                "not exist\", \"Couldn't load custom C++ ops\", \"compiled with different CUDA versions\").", name=name),
                {name: comp.label, f"{name}.evidence": comp.evidence, "torch": build.label,
                 "torch.evidence": build.evidence, "expected": expected,
                 "cuda_check": f"{check.compares} ({check.versions})" if check else None},
                Fix(Msg("Reinstall torch and {name} together (see the fix plan).", name=name)),
            ))
    return findings


def _cuda_mismatch(name: str, comp, build, check) -> str | None:
    """Whether the companion's build refuses torch's at import: a CPU companion beside a CUDA torch (no CUDA
    kernels), or a CUDA version that differs in what that release compares (the table's companion_rules: torchvision
    up to 0.15.2 and torchaudio 0.13 to 2.11.0 compare major and minor, later ones the major only). Unknown
    builds are never a mismatch."""
    if comp.kind == "unknown" or build.kind == "unknown":
        return None
    if comp.kind != build.kind:
        return Msg("{name} is a {kind} build ({evidence}), torch is {torch_kind}", name=name,
                   kind=comp.variant or comp.kind, evidence=comp.evidence, torch_kind=build.variant or build.kind)
    if comp.kind != "cuda" or not comp.cuda or not build.cuda:
        return None
    if comp.cuda_major != build.cuda_major:
        return Msg("{name} was built with CUDA {cuda} and torch with CUDA {torch_cuda}: a different major", name=name,
                   cuda=comp.cuda, torch_cuda=build.cuda)
    both_minor = "." in comp.cuda and "." in build.cuda
    if check is not None and check.compares == "major.minor" and both_minor and comp.cuda != build.cuda:
        return Msg("{name} {version} was built with CUDA {cuda} and torch with CUDA {torch_cuda}; {name} "
                   "{versions} compares major and minor at import", name=name, version=comp.version, cuda=comp.cuda,
                   torch_cuda=build.cuda, versions=check.versions)
    return None


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
        return unknown(UNINSPECTED) if snap.interpreter.error else not_observed(snap, Msg("the target Python's version"))
    if snap.interpreter.bits == 32:
        return skipped(Msg("a 32-bit Python: python-32-bit says so"))
    build = torch_build(snap)
    machine = machine_from_snapshot(snap)
    supported = [r for r in table.releases if python_ok(r, machine) and r.variants_for(machine.platform)]
    if not supported:
        ranges = ", ".join(f"{r.minor}: {r.python_min}-{r.python_max}" for r in table.releases[-3:])
        free = ""
        if machine.free_threaded:
            free = Msg(" Free-threaded builds: {builds}.", builds=join(", ", [Msg("{minor}: {builds}", minor=r.minor,
                       builds=", ".join(r.free_threaded) or Msg("none")) for r in table.releases[-3:]]))
        return [Finding(
            "python-unsupported", ERROR,
            Msg("no torch release has wheels for Python {python_label} on {platform}", python_label=python_label(machine), platform=machine.platform),
            Msg("pip will answer \"Could not find a version that satisfies the requirement torch (from versions: "
            "none)\". Recent releases support: {ranges}.{free}", ranges=ranges, free=free),
            {"python": py, "free_threaded": machine.free_threaded, "platform": machine.platform},
            _supported_python_fix(snap, table.releases[-1]),
        )]
    choice = choose(table, machine, build.version if build else None)
    if choice.target is None and choice.needs_driver is None and "has no wheel for Python" in choice.reason:
        relaxed = choose(table, replace(machine, python=None, free_threaded=False), None)
        needed = relaxed.target or relaxed.needs_driver
        release = (table.release(needed.wheel.torch) if needed else None) or table.releases[-1]
        return [Finding(
            "python-unsupported", ERROR,
            Msg("the torch this machine needs has no wheel for Python {python_label}", python_label=python_label(machine)),
            Msg("{reason}. pip would answer \"Could not find a version that "
            "satisfies the requirement\" or install an older build without kernels for this GPU.", reason=choice.reason),
            {"python": py, "free_threaded": machine.free_threaded, "platform": machine.platform,
             "reason": choice.reason},
            _supported_python_fix(snap, release),
        )]
    if build is not None:
        release = table.release(build.version)
        if release is not None and not release.supports_python(py):
            return [Finding(
                "python-unsupported-by-torch", WARNING,
                Msg("torch {version} publishes no wheels for Python {py}", version=build.version, py=py),
                Msg("torch {minor} supports Python {python_min} to {python_max}; this one is "
                "probably a source build or was forced in. Upgrades will need a release that supports this Python.", minor=release.minor, python_min=release.python_min, python_max=release.python_max),
                {"python": py, "torch": build.label},
            )]
    return []


def _supported_python_fix(snap: S.Snapshot, release) -> Fix:
    """A new environment with a Python the release has wheels for: an interpreter on this machine, else one uv
    fetches, else what to install. Never an interpreter that is not here."""
    other = python_in_range(snap, release.python_min, release.python_max)
    line = venv_line(other, ".venv", snap.host.os == "windows") if other else None
    if line is None:
        return Fix(install_hint(other) if other else Msg("Install a Python that torch supports, make a virtual "
                   "environment with it and install torch there."))
    return Fix(Msg("Create a virtual environment with Python {version} and install torch there (see the fix "
               "plan for the command).", version=other.version), [line])


def check_table_fresh(snap: S.Snapshot, table) -> list[Finding]:
    build = torch_build(snap)
    if build is None:
        return without_torch(snap)
    if not table.releases:
        return []
    newest = table.releases[-1]
    have = version_tuple(build.version)
    if have and have[:2] > version_tuple(newest.minor)[:2]:
        return [Finding(
            "table-older-than-torch", WARNING,
            Msg("torch {version} is newer than this compatibility table (newest: {minor})", version=build.version, minor=newest.minor),
            Msg("Table {table_version} (verified {verified_on}) does not know this release; conclusions "
            "about it rest on the nearest older row. Update torchdoctor or pass --table.", table_version=table.table_version, verified_on=table.verified_on),
            {"torch": build.version, "table_version": table.table_version},
        )]
    return []


RULES = [
    Rule("nvidia-driver", Msg("NVIDIA driver state"), check_nvidia_state,
         ("nvidia-driver-missing", "driver-library-mismatch", "container-lost-gpu-access",
          "nvidia-no-permission", "nvidia-state-unknown")),
    Rule("torch-installed", Msg("torch is installed in the target interpreter"), check_torch_installed,
         ("interpreter-unusable", "torch-not-installed", "torch-inspect-failed")),
    Rule("build-kind", Msg("the torch build matches the hardware (CUDA build for NVIDIA GPUs)"), check_build_kind,
         ("torch-cpu-build", "torch-wrong-vendor-build")),
    Rule("driver-cuda", Msg("the driver can run the torch build's CUDA version"), check_driver,
         ("driver-too-old", "driver-older-than-build")),
    Rule("gpu-arch", Msg("the torch build has kernels for every GPU"), check_gpu_arch,
         ("gpu-arch-unsupported", "gpu-arch-needs-ptx", "cudnn-unsupported-gpu", "gpus-need-different-wheels",
          "arch-list-unknown")),
    Rule("companions", Msg("torchvision and torchaudio match torch"), check_companions,
         ("torchvision-mismatch", "torchaudio-mismatch")),
    Rule("python", Msg("this Python has torch wheels"), check_python,
         ("python-unsupported", "python-unsupported-by-torch")),
    Rule("table-fresh", Msg("the compatibility table knows the installed torch"), check_table_fresh,
         ("table-older-than-torch",)),
]
