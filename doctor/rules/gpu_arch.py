"""GPU architecture: whether the installed CUDA build has kernels for every GPU (from the best arch list there
is: doctor/compat/coverage.py), whether its cuDNN supports them, and, when no single wheel serves them all,
one environment per group of GPUs. ``check_gpu_arch`` is a pure function of the machine's assessment.
"""

from __future__ import annotations

from doctor.compat.arch import format_cc, sm_name
from doctor.compat.assessment import Assessment
from doctor.compat.coverage import NEEDS_PTX, NO_KERNELS, UNKNOWN, cudnn_floor, gpu_fit
from doctor.compat.wheels import choose
from doctor.model import snapshot as S
from doctor.model.findings import ERROR, INFO, SHELL, VENV, WARNING, Action, Finding, Fix
from doctor.model.i18n import Msg, join
from doctor.model.versions import parse_cc
from doctor.rules import Rule, gpu_list, no_gpu, skipped, unknown, without_torch


def check_gpu_arch(facts: Assessment) -> list[Finding]:
    """Kernels for every GPU, judged on the best arch list there is (doctor/compat/coverage.py): torch at run
    time, the binary, the table (PyTorch's wheels only), else the CUDA version's bound. Each finding names its
    source; what none of them can decide stays unknown."""
    snap, table, build = facts.snap, facts.table, facts.build
    if build is None:
        return without_torch(snap)
    if build.kind == "unknown":
        return unknown(Msg("whether torch {label} is a CUDA build is not known", label=build.label))
    if build.kind != "cuda":
        return skipped(Msg("not a CUDA build of torch ({kind})", kind=build.kind))
    if not snap.nvidia.gpus:
        return no_gpu(snap)
    gpus = [(g, parse_cc(g.compute_capability.value)) for g in snap.nvidia.gpus]
    gpus = [(g, cc) for g, cc in gpus if cc]
    if not gpus:
        return unknown(Msg("no GPU's compute capability is known"))
    origin, source = facts.origin, facts.coverage
    ev = {"torch": build.label, "origin": origin.kind, "origin.evidence": origin.evidence,
          "arch_list.source": source.label, "arch_list.kind": source.kind, "arch_list": list(source.sm),
          "ptx": list(source.ptx) if source.ptx is not None else None, "partial": list(source.partial),
          "not_used": list(source.skipped)}
    compiled = ""
    if source.has_list:
        compiled = (Msg("this build was compiled for {sm}", sm=' '.join(source.sm) or Msg('no cubin'))
                    + (Msg(" (+PTX {ptx})", ptx=' '.join(source.ptx)) if source.ptx else "") + Msg(", "
                        "according to {label}", label=source.label))
    findings, undecided = [], []
    for g, cc in gpus:
        fit = gpu_fit(source, cc, build, origin, table, snap.host.platform)
        gev = ev | {"gpu": g.name, "gpu.index": g.index, "compute_capability": format_cc(cc),
                    "compute_capability.source": g.compute_capability.source, "bound": fit.bound}
        if fit.verdict == NO_KERNELS:
            bound = Msg(" {bound}: no CUDA {cuda} build can have these "
                "kernels.", bound=fit.bound, cuda=build.cuda) if (
                fit.bound and source.has_list) else ""
            what = join("; ", [part for part in (compiled, fit.why) if part])
            findings.append(
                Finding(
                    "gpu-arch-unsupported",
                    ERROR,
                    Msg(
                        "torch {label} has no kernels for GPU {index} {name} ({sm_name})",
                        label=build.label,
                        index=g.index,
                        name=g.name,
                        sm_name=sm_name(cc),
                    ),
                    Msg(
                        '{name} has compute capability {format_cc}; {what}.{bound} torch warns "'
                        "{name} with CUDA capability {sm_name} is not compatible with the current PyTorch "
                        'installation" and kernels fail with "no kernel image is available for execution on '
                        'the device".',
                        name=g.name,
                        format_cc=format_cc(cc),
                        what=what,
                        bound=bound,
                        sm_name=sm_name(cc),
                    ),
                    gev,
                    Fix(Msg("Install a build whose architecture list covers this GPU (see the fix plan).")),
                    list(source.unverified),
                )
            )
        elif fit.verdict == NEEDS_PTX:
            findings.append(Finding(
                "gpu-arch-needs-ptx", WARNING,
                Msg("GPU {index} {name} ({sm_name}) can run torch {label} only through embedded "
                    "PTX", index=g.index, name=g.name, sm_name=sm_name(cc), label=build.label),
                Msg("{why}. Without PTX in the build, kernels fail with \"no kernel image is available for "
                "execution on the device\". ", why=fit.why) + _FIND_OUT,
                gev, Fix(Msg("Check with the smoke test (torchdoctor check without --no-smoke), or install a "
                    "build "
                         "made with a CUDA that can target this GPU (see the fix "
                         "plan).")), list(source.unverified)))
        elif fit.verdict == UNKNOWN:
            undecided.append((g, cc, fit))
    if undecided:
        names = join(", ", [Msg("GPU {index} {name} ({sm})", index=g.index, name=g.name, sm=sm_name(cc))
                            for g, cc, _ in undecided])
        findings.append(
            Finding(
                "arch-list-unknown",
                INFO,
                Msg("which GPUs torch {label} has kernels for is not known", label=build.label),
                Msg(
                    "{names}: {why}. Not used: {skipped}. ",
                    names=names,
                    why=undecided[0][2].why,
                    skipped=join("; ", source.skipped) or Msg("nothing"),
                )
                + _FIND_OUT,
                ev | {"gpus": names, "platform": snap.host.platform},
                None,
                list(source.unverified),
            )
        )
    flagged = {f.evidence.get("gpu.index") for f in findings if f.id != "arch-list-unknown"}
    findings.extend(
        _cudnn_findings(snap, table, build, origin, [(g, cc) for g, cc in gpus if g.index not in flagged])
    )
    if any(f.id == "gpu-arch-unsupported" for f in findings):
        groups = _gpu_groups(facts.machine, table, gpus)
        if groups and len(groups) > 1:
            findings.append(_groups_finding(snap, groups))
    return findings


_FIND_OUT = Msg("To find out: run torchdoctor check without --no-smoke (torch reports its own arch list), or "
    "list "
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
            out.append(
                Finding(
                    "cudnn-unsupported-gpu",
                    ERROR,
                    Msg(
                        "the cuDNN of torch {label} does not support GPU {index} {name} (compute capability "
                        "{format_cc})",
                        label=build.label,
                        index=g.index,
                        name=g.name,
                        format_cc=format_cc(cc),
                    ),
                    Msg(
                        "{where} supports compute capability {low} and up. cuDNN operations (convolutions, "
                        "RNNs, "
                        'attention) fail on this GPU with CUDNN_STATUS_ARCH_MISMATCH or "no kernel '
                        'image".',
                        where=where,
                        low=low,
                    ),
                    {
                        "gpu": g.name,
                        "gpu.index": g.index,
                        "compute_capability": format_cc(cc),
                        "cudnn.min_cc": low,
                        "cudnn.source": where,
                        "torch": build.label,
                    },
                    Fix(Msg("Install a build whose cuDNN supports this GPU (see the fix plan).")),
                    list(unverified),
                )
            )
    return out


def _gpu_groups(machine, table, gpus) -> list[tuple[list, object]]:
    """When no single wheel serves every GPU: the best wheel for each group of GPUs."""
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
            lines.append(Action(SHELL, text=f"set CUDA_VISIBLE_DEVICES={ids} && "
                f"{env_name}\\Scripts\\python.exe "
                                "your_script.py"))
        else:
            lines.append(Action(SHELL, text=f"CUDA_VISIBLE_DEVICES={ids} {env_name}/bin/python "
                "your_script.py"))
        ev[ids] = w.label
    return Finding(
        "gpus-need-different-wheels", ERROR,
        Msg("no single torch wheel has kernels for every GPU in this machine"),
        Msg("GPUs: {gpu_list}. Every published build lacks kernels for one of them (old architectures "
        "were dropped from the builds that added new ones). Use one environment per group of GPUs, "
        "each selecting its GPUs with CUDA_VISIBLE_DEVICES.", gpu_list=gpu_list(snap)),
        {"groups": ev},
        Fix(Msg("One environment per GPU group:"), actions=lines),
    )


GPU_ARCH = Rule("gpu-arch", Msg("the torch build has kernels for every GPU"), check_gpu_arch,
                ("gpu-arch-unsupported", "gpu-arch-needs-ptx", "cudnn-unsupported-gpu",
                 "gpus-need-different-wheels", "arch-list-unknown"))
