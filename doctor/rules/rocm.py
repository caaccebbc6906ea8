"""AMD GPUs and ROCm: whether the runtime can open the GPUs at all (device files), whether the installed torch
is a ROCm build where an AMD GPU is the only GPU, and whether that build holds each GPU's processor, natively
or through HSA_OVERRIDE_GFX_VERSION. The facts are the AMD probe's (doctor/model/amd.py) and the processors a
build holds come from its libtorch_hip.so when it was read, else from the accelerator table; each finding
says which (doctor/compat/accelerators.py).
"""

from __future__ import annotations

from dataclasses import replace

from doctor.compat.accelerators import (
    BY_OVERRIDE,
    MISSING,
    NATIVE,
    OVERRIDE_POSSIBLE,
    UNKNOWN,
    WRONG_OVERRIDE,
    accelerators,
    amd_processors,
    gfx_major,
    judge_rocm,
    override_value,
    rocm_build_targets,
    runnable_as,
)
from doctor.compat.assessment import Assessment
from doctor.model.amd import AMD_NO_DEVICE, AMD_NO_PERMISSION
from doctor.model.findings import ERROR, INSTALL, SHELL, WARNING, Action, Finding, Fix
from doctor.model.i18n import Msg
from doctor.rules import Rule, skipped, unknown, without_torch

OVERRIDE = "HSA_OVERRIDE_GFX_VERSION"
DEVICES = "--device /dev/kfd --device /dev/dri"
DOCKER_FLAGS = f"{DEVICES} --group-add video --group-add render"
ROCM_DOCS = "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/install/prerequisites.html"
THE_ROCK = "https://github.com/ROCm/TheRock/blob/main/RELEASES.md"


def _nvidia_gpus(snap) -> bool:
    return bool(snap.nvidia.gpus) or bool(snap.nvidia.pci_devices)


def _only_amd(snap, table):
    """The AMD processors, when an AMD GPU is the machine's GPU (an NVIDIA GPU beside an AMD APU is judged by
    the CUDA rules); else the reason to skip."""
    amd = snap.amd
    if amd is None:
        return None, skipped(Msg("no AMD facts (not probed on this machine)"))
    if not amd.gpus:
        return None, skipped(Msg("no AMD GPU"))
    if _nvidia_gpus(snap):
        return None, skipped(Msg("an NVIDIA GPU is here: the CUDA rules judge the build"))
    acc = accelerators(table)
    return _named(amd_processors(snap, acc), acc), None


def _gpu_text(procs) -> str:
    parts = []
    for p in procs:
        name = p.name or Msg("AMD GPU")
        parts.append(f"GPU {p.index} {name} ({p.gfx})" if p.gfx else f"GPU {p.index} {name}")
    return ", ".join(parts)


def _named(procs, acc):
    """Where no ROCm tool named a GPU, the pci.ids name of its device id from the accelerator table."""
    out = []
    for p in procs:
        row = acc.amd_gpu(p.pci_id) if not p.name and p.pci_id else None
        out.append(replace(p, name=f"AMD {row.name}") if row else p)
    return out


def _permission_fix(container: str | None, groups: list[str], paths: list[str]) -> Fix:
    """In a container the groups come from the host: by number, since the image's group names may differ (a
    render group that is 109 on the host and 992 in the image); elsewhere the user joins them. A group the
    container has no name for is the host's number already, and is added as it is."""
    if container:
        adds = " ".join(f"--group-add {g}" if g.isdigit() else
                        f'--group-add "$(getent group {g} | cut -d: -f3)"' for g in groups)
        text = f"docker run {DEVICES} {adds} <image> ..."
        numbers = [g for g in groups if g.isdigit()]
        if numbers:
            text += (f"  # {', '.join(numbers)}: the host's group id of {', '.join(paths)}, unnamed in this "
                     "container")
        return Fix(Msg("Start the container with the host's group ids of the device files (run getent on the "
                       "host)."),
                   actions=[Action(SHELL, text=text)],
                   links=[ROCM_DOCS])
    return Fix(Msg("Add the user to the group that owns them, then log out and in again."),
               actions=[Action(SHELL, text="ls -l /dev/kfd /dev/dri/renderD*"),
                        Action(SHELL, text=f"sudo usermod -aG {','.join(groups)} $USER")],
               links=[ROCM_DOCS])


def _sentence(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


# --- device files ------------------------------------------------------------------------------------------


def check_amd_devices(facts: Assessment) -> list[Finding]:
    snap = facts.snap
    amd = snap.amd
    if amd is None or not amd.gpus:
        return skipped(Msg("no AMD GPU"))
    if _nvidia_gpus(snap):
        return skipped(Msg("an NVIDIA GPU is here"))
    ev = {
        "amd.status": amd.status,
        "amd.detail": amd.detail,
        "device_nodes": [
            {
                "path": d.path,
                "exists": d.exists,
                "readable": d.readable,
                "writable": d.writable,
                "group": d.group,
                "in_group": d.in_group,
            }
            for d in amd.device_nodes
        ],
    }
    if amd.status == AMD_NO_DEVICE:
        container = snap.host.container
        where = Msg("this {kind} container", kind=container) if container else Msg("this machine")
        return [Finding(
            "amd-device-access", ERROR,
            Msg("the ROCm runtime cannot open the AMD GPU: /dev/kfd or /dev/dri is missing in "
                "{where}", where=where),
            Msg("{detail} The kernel lists the GPU, but ROCm opens it through /dev/kfd and the GPU's render "
                "node under /dev/dri; without them torch.cuda.is_available() is False (\"No HIP GPUs are "
                "available\").",
                detail=_sentence(amd.detail)),
            ev, Fix(Msg("Start the container with the AMD device files and their groups."),
                    actions=[Action(SHELL, text=f"docker run {DOCKER_FLAGS} <image> ...  # podman: the same "
                        "flags")],
                    links=[ROCM_DOCS]),
        )]
    if amd.status == AMD_NO_PERMISSION:
        refused = [d for d in amd.device_nodes if d.exists and not (d.readable and d.writable)]
        groups = sorted({d.group for d in refused if d.group} or {"render", "video"})
        return [Finding(
            "amd-device-access", ERROR,
            Msg("this user may not open the AMD GPU's device files ({paths})",
                paths=", ".join(d.path for d in refused)),
            Msg("{detail} ROCm needs read and write access to /dev/kfd and the render node; members of their "
                "group have it.", detail=_sentence(amd.detail)),
            ev, _permission_fix(snap.host.container, groups, [d.path for d in refused]),
        )]
    return []


# --- a build that is not ROCm on an AMD GPU -----------------------------------------------------------------


def _newest_rocm_for(table, snap, gfxs):
    """(torch patch, variant, table row) of the newest release whose ROCm wheel holds every processor, for
    this platform and Python; None when none does."""
    acc = accelerators(table)
    platform = snap.host.platform
    python = snap.interpreter.version or None
    for release in reversed(getattr(table, "releases", ())):
        if python and not release.supports_python(python):
            continue
        variants = [v for v in release.recommendable_variants(platform) if v.startswith("rocm")]
        rows = [acc.rocm_targets(release.minor + ".0", v) for v in variants]
        rows = [r for r in rows if r is not None and all(r.covers(g) for g in gfxs)]
        if rows:
            row = sorted(rows, key=lambda r: [int(x) for x in r.variant[4:].split(".")], reverse=True)[0]
            return release.latest.torch, row.variant, row
    return None


def _amd_and_build(facts: Assessment):
    """(the AMD GPUs, the installed build, None), or (…, …, the rule's answer) when there is nothing to judge:
    the GPUs are not only AMD's, or torch is not installed. The start of every AMD build rule."""
    procs, skip = _only_amd(facts.snap, facts.table)
    if skip is not None:
        return procs, facts.build, skip
    if facts.build is None:
        return procs, None, without_torch(facts.snap)
    return procs, facts.build, None


def check_amd_build_kind(facts: Assessment) -> list[Finding]:
    snap, table = facts.snap, facts.table
    procs, build, answer = _amd_and_build(facts)
    if answer is not None:
        return answer
    if build.kind == "rocm":
        return []
    if build.kind not in ("cpu", "cuda"):
        return skipped(Msg("torch {label} is a {kind} build", label=build.label, kind=build.kind))
    gfxs = tuple(dict.fromkeys(p.gfx for p in procs if p.gfx))
    if not gfxs:
        why = procs[0].source if procs else "-"
        if build.kind == "cuda":
            return _cuda_on_unknown_amd(table, snap, build, procs, why)
        return unknown(Msg("the AMD GPU's processor is not known: {why}", why=why))
    acc = accelerators(table)
    wanted = tuple(dict.fromkeys(runnable_as(acc, g) for g in gfxs))
    newest = _newest_rocm_for(table, snap, wanted)
    ev = {"torch": build.label, "gpus": _gpu_text(procs), "gfx.source": [p.source for p in procs],
          "gfx.confidence": [p.confidence for p in procs]}
    what = Msg("a CUDA build") if build.kind == "cuda" else Msg("a CPU-only build")
    title = Msg("torch {label} is {what}, but this machine's GPU is AMD's", label=build.label, what=what)
    if snap.host.os == "windows":
        return _windows_rocm(acc, build, procs, gfxs, title, what, ev)
    if newest is None and build.kind == "cpu":
        return []  # no ROCm wheel for this GPU (an APU's Radeon 680M, say): a CPU torch is what there is
    if newest is None:
        detail = Msg("torch {label} cannot use {gpus}, and no ROCm wheel on download.pytorch.org (as far as "
                     "the accelerator table knows) holds {gfx}. AMD's TheRock builds publish wheels per GPU "
                     "family; building torch with PYTORCH_ROCM_ARCH={gfx} is the other way.",
                     label=build.label, gpus=_gpu_text(procs), gfx=",".join(gfxs))
        return [Finding("torch-wrong-vendor-build", ERROR, title, detail, ev,
                        Fix(Msg("Use a ROCm build made for this GPU (AMD TheRock, or built from source)."),
                            links=[THE_ROCK]))]
    torch, variant, row = newest
    override = [g for g in gfxs if g not in wanted]
    detail = Msg("torch {label} cannot use {gpus}: {what} has no HIP code. The ROCm builds of torch run on "
                 "AMD GPUs; the newest that holds {held} is torch {torch}+{variant} (accelerator table, "
                 "{confidence}).", label=build.label, gpus=_gpu_text(procs), what=what, torch=torch,
                 variant=variant, held=", ".join(wanted), confidence=row.confidence)
    if override:
        row_override = acc.hsa_override(override[0])
        detail += Msg(" {gfx} runs it only with {var}={value} (reported working: {report}).",
                      gfx=", ".join(override), var=OVERRIDE, value=row_override.override,
                      report=row_override.source)
    ev |= {"rocm.wheel": f"{torch}+{variant}", "rocm.targets.source": row.source,
           "rocm.targets.confidence": row.confidence}
    return [Finding("torch-wrong-vendor-build", ERROR, title, detail, ev,
                    Fix(Msg("Install the ROCm build of torch (see the fix plan)."),
                        actions=[Action(INSTALL, (f"torch=={torch}+{variant}",), variant, plan=True)]))]


def _windows_rocm(acc, build, procs, gfxs, title, what, ev) -> list[Finding]:
    """Windows: download.pytorch.org has no ROCm wheel for it; AMD's own builds (TheRock) hold some GPU
    families. A CPU build where none holds the GPU is what there is."""
    families = [acc.rocm_windows_for(g) for g in gfxs]
    if not all(families):
        if build.kind == "cpu":
            return []
        return [Finding("torch-wrong-vendor-build", ERROR, title,
                        Msg("torch {label} cannot use {gpus}: {what} has no HIP code, and no ROCm build for "
                            "Windows is known to hold {gfx}.", label=build.label, gpus=_gpu_text(procs),
                            what=what, gfx=",".join(gfxs)),
                        ev, Fix(Msg("Use the CPU build, or a ROCm build made for this GPU (WSL 2 or Linux)."),
                                links=[THE_ROCK]))]
    names = ", ".join(dict.fromkeys(f.family for f in families))
    ev |= {"rocm.windows.family": names, "rocm.windows.source": families[0].source,
           "rocm.windows.confidence": families[0].confidence}
    return [Finding("torch-wrong-vendor-build", ERROR, title,
                    Msg("torch {label} cannot use {gpus}: {what} has no HIP code. download.pytorch.org has "
                        "no ROCm wheel for Windows; AMD's own ROCm builds of torch for Windows (TheRock, "
                        "family {family}) hold {gfx} ({confidence}).", label=build.label,
                        gpus=_gpu_text(procs), what=what, family=names, gfx=",".join(gfxs),
                        confidence=families[0].confidence),
                    ev, Fix(Msg("Install AMD's ROCm build of torch for the {family} family (TheRock's "
                                "release page names its package index).", family=names), links=[THE_ROCK]))]


def _cuda_on_unknown_amd(table, snap, build, procs, why: str) -> list[Finding]:
    """A CUDA build where an AMD GPU is the only GPU runs on none of it, whatever the GPU's processor: that
    is certain. Which build does run is not, while the processor is unknown: a ROCm wheel holds only its
    list of processors (an APU's integrated Radeon is in none), so nothing is planned; the fix says how to
    find the processor and which processors the newest ROCm wheel holds."""
    newest = _newest_rocm_for(table, snap, ())
    ev = {"torch": build.label, "gpus": _gpu_text(procs), "gfx.source": [p.source for p in procs]}
    title = Msg("torch {label} is {what}, but this machine's GPU is AMD's", label=build.label,
                what=Msg("a CUDA build"))
    detail = Msg("torch {label} cannot use {gpus}: a CUDA build has no HIP code. The GPU's processor is not "
                 "known ({why}), so which build runs on it is not known either.",
                 label=build.label, gpus=_gpu_text(procs), why=why)
    find = ["rocminfo | grep -m1 -o 'gfx[0-9a-f]*'"]
    if newest is None:
        return [Finding("torch-wrong-vendor-build", ERROR, title, detail, ev,
                        Fix(Msg("Find the GPU's processor, then use a ROCm build of torch made for it "
                                "(or the CPU build, where none is)."), find, links=[THE_ROCK]))]
    torch, variant, row = newest
    ev |= {"rocm.wheel": f"{torch}+{variant}", "rocm.targets": list(row.gfx),
           "rocm.targets.source": row.source}
    return [Finding("torch-wrong-vendor-build", ERROR, title, detail, ev,
                    Fix(Msg("Find the GPU's processor. torch {torch}+{variant} (index {index}) holds "
                            "{targets}: install it if the processor is among them; otherwise the CPU build "
                            "is the one that runs (an integrated Radeon, say).", torch=torch, variant=variant,
                            index=f"https://download.pytorch.org/whl/{variant}",
                            targets=", ".join(row.gfx)), find, links=[THE_ROCK]))]


# --- a ROCm build against the GPU's processor --------------------------------------------------------------


def check_rocm_targets(facts: Assessment) -> list[Finding]:
    snap, table = facts.snap, facts.table
    procs, build, answer = _amd_and_build(facts)
    if answer is not None:
        return answer
    if build.kind != "rocm":
        return skipped(Msg("not a ROCm build of torch ({kind})", kind=build.kind))
    acc = accelerators(table)
    targets = rocm_build_targets(snap, acc, build.version, build.variant or build.local)
    if targets is None:
        too_old = _below_rocm_floor(table, snap, build, procs, acc)
        if too_old:
            return too_old
        return unknown(Msg("which GPU processors torch {label} holds is not known: its libtorch_hip.so was "
                           "not read and the accelerator table has no row for it", label=build.label))
    findings: list[Finding] = []
    where = Msg("read from its libtorch_hip.so") if targets.from_binary else \
        Msg("from the accelerator table, {confidence}", confidence=targets.confidence)
    held = ", ".join(targets.gfx)
    base_ev = {"torch": build.label, "targets": list(targets.gfx), "targets.source": targets.source,
               "targets.from_binary": targets.from_binary, "targets.confidence": targets.confidence,
               OVERRIDE: snap.amd.variables.get(OVERRIDE)}
    unknown_gpus = []
    for proc in procs:
        verdict = judge_rocm(proc.gfx, targets, proc.claimed, acc)
        raw = snap.amd.variables.get(OVERRIDE) or override_value(proc.claimed or "")
        ev = base_ev | {"gpu": proc.index, "gfx": proc.gfx, "gfx.source": proc.source}
        gpu = _gpu_text([proc])
        if verdict.kind in (NATIVE, BY_OVERRIDE):
            continue
        if verdict.kind == UNKNOWN:
            unknown_gpus.append(gpu)
            continue
        if verdict.kind == WRONG_OVERRIDE and _other_generation(proc):
            continue  # the override rule says so, with or without a torch build
        if verdict.kind == WRONG_OVERRIDE:
            fix_line, fix_text = _override_fix(proc.gfx, targets, acc)
            findings.append(Finding(
                "hsa-override-gfx-wrong", ERROR,
                Msg("{var}={raw} makes {gpu} claim {claimed}, which torch {label} does not hold",
                    var=OVERRIDE, raw=raw, gpu=gpu, claimed=verdict.claimed, label=build.label),
                Msg("The ROCm runtime loads the code for {claimed} instead of the GPU's own; torch {label} "
                    "holds {held} ({where}). HIP fails with \"HSA_STATUS_ERROR_INVALID_ISA\" or \"invalid "
                    "device function\".", claimed=verdict.claimed, label=build.label, held=held, where=where),
                ev, Fix(fix_text, actions=[Action(SHELL, text=fix_line)] if fix_line else [])))
        elif verdict.kind == OVERRIDE_POSSIBLE:
            row = verdict.override
            findings.append(Finding(
                "rocm-gfx-override-available", WARNING,
                Msg("torch {label} holds no code for {gpu}; it runs with {var}={value}",
                    label=build.label, gpu=gpu, var=OVERRIDE, value=row.override),
                Msg("torch {label} was built for {held} ({where}), not {gfx}. Without the override HIP fails "
                    "with \"invalid device function\". {var}={value} makes the GPU load the {sibling} code; "
                    "that was reported working ({report}, {confidence}).", label=build.label, held=held,
                    where=where, gfx=proc.gfx, var=OVERRIDE, value=row.override, sibling=row.sibling,
                    report=row.source, confidence=row.confidence),
                ev | {"override": row.override, "override.report": row.source},
                Fix(Msg("Set {var} before starting Python (a shell profile or the service's environment "
                        "keeps it).", var=OVERRIDE),
                    actions=[Action(SHELL, text=f"export {OVERRIDE}={row.override}")])))
        elif verdict.kind == MISSING:
            newest = _newest_rocm_for(table, snap, (proc.gfx,))
            row = verdict.override
            tail = ""
            if row is not None and row.override and row.reported != "works":
                tail = Msg(" {var}={value} ({sibling}) is no way out: reported {reported} ({report}).",
                           var=OVERRIDE, value=row.override, sibling=row.sibling, reported=row.reported,
                           report=row.source)
            if newest:
                fix = _install_holding(newest, proc.gfx)
            else:
                fix = Fix(Msg("No ROCm wheel on download.pytorch.org holds {gfx}: use AMD's TheRock builds "
                              "for this GPU family, or build torch with PYTORCH_ROCM_ARCH={gfx}.",
                              gfx=proc.gfx), links=[THE_ROCK])
            findings.append(Finding(
                "rocm-gfx-unsupported", ERROR,
                Msg("torch {label} holds no code for {gpu}", label=build.label, gpu=gpu),
                Msg("torch {label} was built for {held} ({where}), not {gfx}: HIP fails with \"invalid "
                    "device function\" or torch.cuda.is_available() is False.", label=build.label, held=held,
                    where=where, gfx=proc.gfx) + tail,
                ev, fix))
    if unknown_gpus and not findings:
        return unknown(Msg("the processor of {gpus} is not known", gpus=", ".join(unknown_gpus)))
    return findings


def _install_holding(newest, gfx: str) -> Fix:
    """The plan's ROCm wheel (``_newest_rocm_for``'s answer) that holds ``gfx``."""
    torch, variant, _ = newest
    return Fix(Msg("Install torch {torch}+{variant}, which holds {gfx} (see the fix plan).",
                   torch=torch, variant=variant, gfx=gfx),
               actions=[Action(INSTALL, (f"torch=={torch}+{variant}",), variant, plan=True)])


def _build_rocm(build) -> str | None:
    """The ROCm release a build was made with: torch.version.hip's major.minor, else its variant's."""
    for text in (build.hip, (build.variant or build.local or "").removeprefix("rocm")):
        parts = (text or "").split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            return f"{parts[0]}.{parts[1]}"
    return None


def _below_rocm_floor(table, snap, build, procs, acc) -> list[Finding]:
    """Where the table has no row for the build: the GPUs whose processor no build of this ROCm release can
    hold (its compiler predates the processor), whatever else the build holds."""
    rocm = _build_rocm(build)
    findings = []
    for proc in procs:
        floor = acc.rocm_floor(proc.gfx) if proc.gfx and not proc.claimed else None
        if floor is None or rocm is None or not floor.excludes(rocm):
            continue
        newest = _newest_rocm_for(table, snap, (proc.gfx,))
        if newest:
            fix = _install_holding(newest, proc.gfx)
        else:
            fix = Fix(Msg("Use a ROCm {rocm} or newer build of torch made for {gfx} (AMD TheRock, or built "
                          "from source).", rocm=floor.rocm, gfx=proc.gfx), links=[THE_ROCK])
        gpu = _gpu_text([proc])
        findings.append(Finding(
            "rocm-gfx-unsupported", ERROR,
            Msg("torch {label} holds no code for {gpu}", label=build.label, gpu=gpu),
            Msg("torch {label} was built with ROCm {rocm}; {gfx} needs ROCm {floor} or newer ({source}, "
                "{confidence}): HIP fails with \"invalid device function\" or torch.cuda.is_available() is "
                "False.", label=build.label, rocm=rocm, gfx=proc.gfx, floor=floor.rocm, source=floor.source,
                confidence=floor.confidence),
            {"torch": build.label, "build.rocm": rocm, "gpu": proc.index, "gfx": proc.gfx,
             "gfx.source": proc.source, "rocm.floor": floor.rocm, "rocm.floor.source": floor.source,
             "rocm.floor.confidence": floor.confidence},
            fix))
    return findings


def _other_generation(proc) -> bool:
    return bool(proc.gfx and proc.claimed and gfx_major(proc.gfx) != gfx_major(proc.claimed))


def check_override(facts: Assessment) -> list[Finding]:
    """HSA_OVERRIDE_GFX_VERSION claiming another GPU generation's processor: that code does not run on this
    GPU whatever torch holds (a memory access fault, a GPU reset, HSA_STATUS_ERROR_INVALID_ISA)."""
    snap = facts.snap
    procs, skip = _only_amd(snap, facts.table)
    if skip is not None:
        return skip
    acc = accelerators(facts.table)
    findings = []
    for proc in procs:
        if not _other_generation(proc):
            continue
        raw = snap.amd.variables.get(OVERRIDE) or override_value(proc.claimed)
        seen = (
            Msg("the runtime reports {claimed}", claimed=proc.claimed)
            if snap.origin == "collect_env"
            else Msg("{var}={raw}", var=OVERRIDE, raw=raw)
        )
        row = acc.hsa_override(proc.gfx)
        own = acc.rocm_builds_for(proc.gfx)
        if own:
            fix = Fix(Msg("Unset {var}: {gfx} runs its own code (torch's ROCm wheels hold it).", var=OVERRIDE,
                          gfx=proc.gfx), actions=[Action(SHELL, text=f"unset {OVERRIDE}")])
        elif row is not None and row.reported == "works" and row.override:
            fix = Fix(Msg("Set {var}={value}, the sibling reported working ({report}).", var=OVERRIDE,
                          value=row.override, report=row.source),
                      actions=[Action(SHELL, text=f"export {OVERRIDE}={row.override}")])
        else:
            fix = Fix(Msg("Unset {var}.", var=OVERRIDE), actions=[Action(SHELL, text=f"unset {OVERRIDE}")])
        findings.append(Finding(
            "hsa-override-gfx-wrong", ERROR,
            Msg("GPU {index} {name} is {gfx}, but {seen}: another GPU generation's code", index=proc.index,
                name=proc.name or Msg("AMD GPU"), gfx=proc.gfx, seen=seen),
            Msg("{var} makes the ROCm runtime load {claimed} code on a {gfx} GPU ({source}). Code of another "
                "generation does not run there: a memory access fault, a GPU reset or "
                "\"HSA_STATUS_ERROR_INVALID_ISA\". Such a setting is often left over from another card.",
                var=OVERRIDE, claimed=proc.claimed, gfx=proc.gfx, source=proc.source),
            {"gpu": proc.index, "gfx": proc.gfx, "gfx.source": proc.source, "claimed": proc.claimed,
             OVERRIDE: snap.amd.variables.get(OVERRIDE)}, fix))
    return findings


def _override_fix(gfx: str | None, targets, acc):
    """What to do about a wrong HSA_OVERRIDE_GFX_VERSION: unset it when the build holds the GPU's own
    processor, else set the sibling people reported working, else unset it (and the plan says which build)."""
    if gfx and gfx in targets.gfx:
        return f"unset {OVERRIDE}", Msg("Unset {var}: torch holds this GPU's own code.", var=OVERRIDE)
    row = acc.hsa_override(gfx) if gfx else None
    if row is not None and row.reported == "works" and row.sibling in targets.gfx:
        return (f"export {OVERRIDE}={row.override}",
                Msg("Set {var}={value}, the sibling reported working ({report}).", var=OVERRIDE,
                    value=row.override, report=row.source))
    return f"unset {OVERRIDE}", Msg("Unset {var}; the build this GPU needs is in the fix plan.", var=OVERRIDE)


RULES = [
    Rule("amd-devices", Msg("the ROCm runtime can open the AMD GPUs (/dev/kfd, /dev/dri)"), check_amd_devices,
         ("amd-device-access",)),
    Rule("amd-build-kind", Msg("the torch build is a ROCm build where the GPU is AMD's"),
         check_amd_build_kind, ("torch-wrong-vendor-build",)),
    Rule("hsa-override",
         Msg("HSA_OVERRIDE_GFX_VERSION, if set, names a processor of the GPU's own generation"),
         check_override, ("hsa-override-gfx-wrong",)),
    Rule("rocm-targets", Msg("the ROCm build holds every AMD GPU's processor"), check_rocm_targets,
         ("rocm-gfx-unsupported", "rocm-gfx-override-available", "hsa-override-gfx-wrong")),
]
