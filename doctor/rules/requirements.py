"""CI preflight as a rule: does this machine meet what the project requires?

Each unmet requirement is an error finding ``requirement-*``; the run then exits with
exitcodes.REQUIREMENT. "Usable" uses what the import probe saw when it ran (``snapshot.runtime``)
and falls back to static facts (a CUDA build plus NVIDIA GPUs behind a working driver) when it did not.
"""

from __future__ import annotations

import re

from doctor.compat.accelerators import (
    BY_OVERRIDE,
    NATIVE,
    UNKNOWN,
    accelerators,
    amd_processors,
    intel_xpu_gpus,
    is_rosetta,
    judge_rocm,
    rocm_build_targets,
)
from doctor.compat.assessment import Assessment
from doctor.compat.builds import Build
from doctor.model.amd import AMD_OK
from doctor.model.findings import ERROR, Finding
from doctor.model.i18n import Msg, join
from doctor.model.requirements import CUDA_RE, IDS, RULE, Requirements, parse_memory_mib, specifier
from doctor.model.snapshot import NVIDIA_OK, Snapshot
from doctor.model.versions import parse_cc
from doctor.rules import Rule
from doctor.table.accelerators import AcceleratorTable


def requirements_rule(req: Requirements) -> Rule:
    """The rule that checks ``req``: added to a run's rules when requirements are stated."""
    return Rule(RULE, Msg("the machine meets the stated requirements"),
                lambda facts: check_requirements(facts, req), tuple(IDS.values()))


def check_requirements(facts: Assessment, req: Requirements) -> list[Finding]:
    """The requirements against the facts: the snapshot, the installed build and, for the backends judged
    without the smoke test, the accelerator facts of the table in use."""
    snapshot, build, acc = facts.snap, facts.build, accelerators(facts.table)
    findings: list[Finding] = []
    for backend in dict.fromkeys(req.require):
        ok, reason, evidence = _backend_usable(snapshot, backend, build, acc)
        if not ok:
            findings.append(_finding(IDS[backend], Msg("--require {backend}: "
                "{reason}", backend=backend, reason=reason), evidence))
    devices = _devices(snapshot)
    if req.min_gpus is not None:
        count, source = _gpu_count(snapshot)
        if count < req.min_gpus:
            names = ", ".join(d["name"] for d in devices) or "none"
            findings.append(
                _finding(
                    IDS["min_gpus"],
                    Msg("--min-gpus {min_gpus}: found {count} GPU ({names})" if count == 1 else
                        "--min-gpus {min_gpus}: found {count} GPUs "
                        "({names})", min_gpus=req.min_gpus, count=count, names=names),
                    {"required": req.min_gpus, "found": count, "source": source},
                )
            )
    wanted = max(1, req.min_gpus or 1)
    if req.min_compute_capability:
        need = _cc_tuple(req.min_compute_capability)
        good = [d for d in devices if d["cc"] and _cc_tuple(d["cc"]) >= need]
        if len(good) < wanted:
            findings.append(
                _finding(
                    IDS["min_compute_capability"],
                    Msg(
                        "--min-compute-capability {min_compute_capability}: {short_of}",
                        min_compute_capability=req.min_compute_capability,
                        short_of=_short_of(wanted, good, devices, _cc_text),
                    ),
                    {"required": req.min_compute_capability, "gpus": devices},
                )
            )
    if req.min_gpu_memory:
        need_mib = parse_memory_mib(req.min_gpu_memory)
        good = [d for d in devices if d["memory_mib"] is not None and d["memory_mib"] >= need_mib]
        if len(good) < wanted:
            findings.append(
                _finding(
                    IDS["min_gpu_memory"],
                    Msg(
                        "--min-gpu-memory {min_gpu_memory}: {short_of}",
                        min_gpu_memory=req.min_gpu_memory,
                        short_of=_short_of(wanted, good, devices, lambda d: _mib_text(d["memory_mib"])),
                    ),
                    {"required": req.min_gpu_memory, "required_mib": round(need_mib), "gpus": devices},
                )
            )
    if req.torch:
        finding = _check_torch_version(snapshot, req.torch)
        if finding:
            findings.append(finding)
    if req.cuda:
        finding = _check_cuda_version(snapshot, req.cuda.strip())
        if finding:
            findings.append(finding)
    return [f for f in findings if f.id not in req.ignore]


def _finding(fid: str, title: str, evidence: dict) -> Finding:
    return Finding(
        id=fid,
        severity=ERROR,
        title=title,
        evidence=evidence,
        rule=RULE,
        detail=Msg("A CI requirement set on the command line or in [tool.torchdoctor] is not met."),
    )


def _short_of(wanted: int, good: list, devices: list[dict], describe) -> str:
    if not devices:
        return Msg("no GPU was found")
    listing = join(", ", [Msg("{index}: {name} ({what})", index=d['index'], name=d['name'], what=describe(d))
                          for d in devices])
    return Msg("{good} of {total} GPUs qualify, {wanted} needed: "
        "{listing}", good=len(good), total=len(devices),
               wanted=wanted, listing=listing)


def _cc_text(device: dict) -> str:
    return Msg("CC {cc}", cc=device['cc']) if device["cc"] else Msg("CC unknown")


def _memory_text(device: dict) -> str:
    return _mib_text(device["memory_mib"])


def _mib_text(mib: float | None) -> str:
    return Msg("memory unknown") if mib is None else Msg("{mib:.0f} MiB", mib=mib)


def _cc_tuple(text: str) -> tuple[int, int]:
    return parse_cc(text) or (-1, -1)


def _torch_label(snapshot: Snapshot) -> str:
    dist = snapshot.install.torch
    version = (dist.build_version or dist.version) if dist else snapshot.runtime.torch_version
    return Msg("torch {version}", version=version) if version else "torch"


def _runtime_ran(snapshot: Snapshot) -> bool:
    return snapshot.runtime.status == "ok"


def _torch_present(snapshot: Snapshot) -> bool:
    return snapshot.install.torch is not None or _runtime_ran(snapshot)


def _nvidia_usable(snapshot: Snapshot) -> tuple[bool, str]:
    nv = snapshot.nvidia
    if nv.status == NVIDIA_OK and nv.gpus:
        return True, ""
    if nv.status == NVIDIA_OK:
        return False, Msg("the NVIDIA driver lists no GPU")
    if nv.status == "no-gpu":
        return False, Msg("no NVIDIA GPU was found")
    detail = Msg(" ({detail})", detail=nv.detail) if nv.detail else ""
    return False, Msg("the NVIDIA driver is not usable: {status}{detail}", status=nv.status, detail=detail)


def _backend_usable(snapshot: Snapshot, backend: str, build: Build | None,
                    acc: AcceleratorTable) -> tuple[bool, str, dict]:
    rt, dist = snapshot.runtime, snapshot.install.torch
    evidence = {
        "runtime.status": rt.status,
        "runtime.backend": rt.backend,
        "runtime.cuda_available": rt.cuda_available,
        "install.status": snapshot.install.status,
        "torch.cuda": dist.cuda if dist else None,
        "torch.hip": dist.hip if dist else None,
        "nvidia.status": snapshot.nvidia.status,
        "gpus": len(snapshot.nvidia.gpus),
    }
    label = _torch_label(snapshot)
    if backend == "cpu":
        if rt.status in ("import-error", "crashed", "timeout", "garbage"):
            return False, Msg("{label} does not import ({status}: "
                "{detail})", label=label, status=rt.status, detail=rt.detail or Msg('no detail')), evidence
        if not _torch_present(snapshot):
            return False, Msg("torch is not installed"), evidence
        return True, "", evidence
    if not _torch_present(snapshot):
        return (
            False,
            Msg("no {upper} device usable: torch is not "
                "installed", upper=backend.upper() if backend != 'gpu' else 'GPU'),
            evidence,
        )
    if backend == "gpu":
        results = [_backend_usable(snapshot, b, build, acc) for b in ("cuda", "rocm", "xpu", "mps")]
        if any(ok for ok, _, _ in results):
            return True, "", evidence
        reason = results[0][1].split(": ", 1)[-1]
        return False, Msg("no GPU usable: {reason}", reason=reason), evidence
    if backend == "cuda":
        return (*_cuda_usable(snapshot, label), evidence)
    if backend == "rocm":
        if _runtime_ran(snapshot):
            if rt.hip_version and rt.cuda_available:
                return True, "", evidence
            if not rt.hip_version:
                return False, Msg("no ROCm device usable: {label} is not a ROCm build", label=label), evidence
            return False, Msg("no ROCm device usable: torch.cuda.is_available() is False on "
                "{label}", label=label), evidence
        if dist and not dist.hip:
            return False, Msg("no ROCm device usable: {label} is not a ROCm build", label=label), evidence
        return (*_rocm_from_facts(snapshot, label, build, acc), evidence)
    if backend == "xpu":
        if _runtime_ran(snapshot) and rt.backend:
            ok = rt.backend == "xpu"
            return ok, "" if ok else Msg("no XPU device usable: torch reports backend {backend}",
                                         backend=rt.backend), evidence
        return (*_xpu_from_facts(snapshot, label, build, acc), evidence)
    if backend == "mps":
        if _runtime_ran(snapshot) and rt.backend:
            ok = rt.backend == "mps"
            return ok, "" if ok else Msg("no MPS device usable: torch reports backend "
                "{backend}", backend=rt.backend), evidence
        return (*_mps_from_facts(snapshot, label, build, acc), evidence)
    raise ValueError(backend)


# Without the import probe, each backend is judged from the facts the rules use
# (doctor/compat/accelerators.py).


def _rocm_from_facts(snapshot: Snapshot, label: str, build: Build | None,
                     acc: AcceleratorTable) -> tuple[bool, str]:
    amd = snapshot.amd
    if amd is None:
        return False, Msg("no ROCm device confirmed: the torch import probe did not run and no AMD GPU facts "
                          "were gathered")
    if not amd.gpus:
        return False, Msg("no ROCm device usable: no AMD GPU was found")
    if amd.status != AMD_OK:
        return False, Msg("no ROCm device usable: {detail}", detail=amd.detail or amd.status)
    targets = rocm_build_targets(snapshot, acc, build.version if build else None,
                                 (build.variant or build.local) if build else None)
    for proc in amd_processors(snapshot, acc):
        verdict = judge_rocm(proc.gfx, targets, proc.claimed, acc)
        if verdict.kind == UNKNOWN:
            return False, Msg("no ROCm device confirmed: whether {label} holds GPU {index}'s processor is "
                "not "
                              "known", label=label, index=proc.index)
        if verdict.kind not in (NATIVE, BY_OVERRIDE):
            return False, Msg("no ROCm device usable: {label} holds no code for GPU {index} ({gfx})",
                              label=label, index=proc.index, gfx=verdict.claimed or proc.gfx)
    return True, ""


def _xpu_from_facts(snapshot: Snapshot, label: str, build: Build | None,
                    acc: AcceleratorTable) -> tuple[bool, str]:
    dist = snapshot.install.torch
    # a Core Ultra's Arc Graphics that PyTorch's XPU page lists runs the xpu builds too
    gpus = intel_xpu_gpus(snapshot, acc, integrated=True)
    if not (build and build.kind == "xpu") and not (dist and dist.xpu):
        if not gpus:  # an xpu wheel alone would not help: say both
            return False, Msg("no XPU device usable: {label} is not an xpu build, and no Intel GPU that "
                              "PyTorch's XPU builds list was found on the PCI bus", label=label)
        return False, Msg("no XPU device usable: {label} is not an xpu build", label=label)
    if not gpus:
        return False, Msg("no XPU device usable: no Intel GPU that PyTorch's XPU builds list was found on "
                          "the PCI bus")
    return True, ""


def _mps_from_facts(snapshot: Snapshot, label: str, build: Build | None,
                    acc: AcceleratorTable) -> tuple[bool, str]:
    host = snapshot.host
    machine = snapshot.interpreter.machine or host.machine
    if host.os != "darwin" or not (machine == "arm64" or is_rosetta(snapshot)):
        return False, Msg("no MPS device usable: MPS needs Apple silicon macOS, this is {platform}",
                          platform=host.platform)
    if is_rosetta(snapshot):
        return False, Msg("no MPS device usable: this Python is x86_64, running under Rosetta 2")
    floor = acc.macos_floor(build.version, host.platform) if build else None
    if floor is not None and host.macos and floor.mps_on(host.macos) is False:
        return False, Msg("no MPS device usable: {label} needs macOS {need} for MPS, this is macOS {macos}",
                          label=label, need=floor.mps_min_macos, macos=host.macos)
    return True, ""  # every macOS arm64 torch wheel has MPS


def _cuda_usable(snapshot: Snapshot, label: str) -> tuple[bool, str]:
    rt, dist = snapshot.runtime, snapshot.install.torch
    if _runtime_ran(snapshot):
        if rt.cuda_available and not rt.hip_version:
            return True, ""
        if rt.hip_version:
            return False, Msg("no CUDA device usable: {label} is a ROCm build", label=label)
        if not rt.cuda_version:
            nv_ok, why = _nvidia_usable(snapshot)
            tail = "" if nv_ok else Msg(" and {why}", why=why)
            return False, Msg("no CUDA device usable: {label} is a CPU build{tail}", label=label, tail=tail)
        nv_ok, why = _nvidia_usable(snapshot)
        tail = Msg(": {why}", why=why) if not nv_ok else ""
        return False, Msg("no CUDA device usable: torch.cuda.is_available() is False on "
            "{label}{tail}", label=label, tail=tail)
    if rt.status in ("import-error", "crashed", "timeout", "garbage"):
        return False, Msg("no CUDA device usable: {label} does not import "
            "({status})", label=label, status=rt.status)
    if dist is None:
        return False, Msg("no CUDA device usable: torch is not installed")
    if dist.hip:
        return False, Msg("no CUDA device usable: {label} is a ROCm build", label=label)
    nv_ok, why = _nvidia_usable(snapshot)
    if not dist.cuda:
        tail = "" if nv_ok else Msg(" and {why}", why=why)
        return False, Msg("no CUDA device usable: {label} is a CPU build{tail}", label=label, tail=tail)
    if not nv_ok:
        return False, Msg("no CUDA device usable: {why}", why=why)
    return True, ""


def _devices(snapshot: Snapshot) -> list[dict]:
    """The GPUs torch saw when the import probe ran, else the driver's list."""
    rt = snapshot.runtime
    if _runtime_ran(snapshot) and rt.devices:
        return [
            {"index": d.index, "name": d.name, "cc": d.capability, "memory_mib": d.total_memory_mib}
            for d in rt.devices
        ]
    return [
        {"index": g.index, "name": g.name, "cc": g.compute_capability.value, "memory_mib": g.memory_total_mib}
        for g in snapshot.nvidia.gpus
    ]


def _gpu_count(snapshot: Snapshot) -> tuple[int, str]:
    rt = snapshot.runtime
    if _runtime_ran(snapshot) and rt.device_count is not None:
        return rt.device_count, "torch.cuda.device_count()"
    if _runtime_ran(snapshot) and rt.devices:
        return len(rt.devices), "torch devices"
    return len(snapshot.nvidia.gpus), "NVIDIA driver"


def _check_torch_version(snapshot: Snapshot, spec_text: str) -> Finding | None:
    from packaging.version import InvalidVersion, Version

    spec = specifier(spec_text, "--torch")
    dist = snapshot.install.torch
    raw = (dist.build_version or dist.version) if dist else snapshot.runtime.torch_version
    evidence = {"required": spec_text, "installed": raw}
    if not raw:
        return _finding(IDS["torch"], f"--torch {spec_text}: torch is not installed", evidence)
    try:
        version = Version(raw)
    except InvalidVersion:
        return _finding(IDS["torch"], f"--torch {spec_text}: cannot read the torch version {raw!r}", evidence)
    if spec.contains(version, prereleases=True):
        return None
    return _finding(IDS["torch"], f"--torch {spec_text}: torch {raw} is installed", evidence)


def _check_cuda_version(snapshot: Snapshot, wanted: str) -> Finding | None:
    dist = snapshot.install.torch
    have = snapshot.runtime.cuda_version if _runtime_ran(snapshot) else None
    have = have or (dist.cuda if dist else None)
    evidence = {"required": wanted, "torch.cuda": have}
    label = _torch_label(snapshot)
    if not have:
        what = Msg("torch is not installed") if not _torch_present(snapshot) else Msg("{label} is not a CUDA "
            "build", label=label)
        return _finding(IDS["cuda_version"], f"--cuda {wanted}: {what}", evidence)
    m = CUDA_RE.match(wanted)
    have_mm = re.match(r"^(\d+)(?:\.(\d+))?", have)
    if not m or not have_mm:
        return _finding(IDS["cuda_version"], f"--cuda {wanted}: cannot compare with CUDA {have}", evidence)
    same_major = m.group(1) == have_mm.group(1)
    if m.group(2) in (None, "x"):
        ok = same_major
    else:
        ok = same_major and m.group(2) == (have_mm.group(2) or "0")
    if ok:
        return None
    return _finding(IDS["cuda_version"], f"--cuda {wanted}: {label} is built for CUDA {have}", evidence)
