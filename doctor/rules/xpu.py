"""Intel GPUs: a discrete Arc or Data Center GPU with a torch that cannot use it (a CPU or CUDA build) wants
the xpu build, from https://download.pytorch.org/whl/xpu. Integrated graphics are no reason to suggest it, not
even a Core Ultra's Arc Graphics that PyTorch's XPU page lists: a laptop on the CPU wheel is not broken. The
device ids come from the PCI bus (host.intel_gpus) and the accelerator table (doctor/compat/accelerators.py).
"""

from __future__ import annotations

from doctor.compat.accelerators import accelerators, intel_xpu_gpus
from doctor.compat.assessment import Assessment
from doctor.model.findings import ERROR, INSTALL, WARNING, Action, Finding, Fix
from doctor.model.i18n import Msg
from doctor.rules import Rule, skipped, without_torch

XPU_DOCS = "https://docs.pytorch.org/docs/stable/notes/get_start_xpu.html"


def newest_xpu(table, snap) -> str | None:
    """The newest torch patch with an xpu wheel for this platform and Python."""
    python = snap.interpreter.version or None
    for release in reversed(getattr(table, "releases", ())):
        if "xpu" in release.recommendable_variants(snap.host.platform) and (
                not python or release.supports_python(python)):
            return release.latest.torch
    return None


def check_intel_build(facts: Assessment) -> list[Finding]:
    snap, table = facts.snap, facts.table
    build = facts.build
    gpus = intel_xpu_gpus(snap, accelerators(table), integrated=False)
    if not gpus:
        return skipped(Msg("no discrete Intel GPU"))
    if snap.nvidia.gpus or snap.nvidia.pci_devices or (snap.amd is not None and snap.amd.gpus):
        return skipped(Msg("another vendor's GPU is here: its rules judge the build"))
    if build is None:
        return without_torch(snap)
    if build.kind == "xpu" or (snap.install.torch is not None and snap.install.torch.xpu):
        return []
    if build.kind not in ("cpu", "cuda"):
        return skipped(Msg("torch {label} is a {kind} build", label=build.label, kind=build.kind))
    names = ", ".join(f"{g.product} ({g.device_id})" for g in gpus)
    validated = all(g.validated for g in gpus)
    ev = {"torch": build.label, "intel_gpus": [g.device_id for g in gpus], "family": [g.family for g in gpus],
          "source": gpus[0].source, "xpu.validated": validated}
    torch = newest_xpu(table, snap)
    what = Msg("a CUDA build") if build.kind == "cuda" else Msg("a CPU-only build")
    detail = Msg("torch {label} is {what}: it cannot use {names}. PyTorch's xpu wheels run on Intel GPUs "
                 "(torch.xpu.is_available()); they need Intel's GPU driver, not a CUDA toolkit.",
                 label=build.label, what=what, names=names)
    if not validated:
        detail += Msg(" PyTorch's XPU page does not list this GPU among the validated ones: unverified.")
    actions = [Action(INSTALL, (f"torch=={torch}+xpu",), "xpu", plan=True)] if torch else []
    return [Finding("xpu-wheel-needed", ERROR if validated else WARNING,
                    Msg("torch {label} cannot use this machine's Intel GPU; the xpu build "
                        "can", label=build.label),
                    detail, ev, Fix(Msg("Install the xpu build of torch (see the fix "
                        "plan)."), actions=actions,
                                    links=[XPU_DOCS]))]


RULES = [
    Rule("intel-build-kind", Msg("the torch build is the xpu build where the GPU is a discrete Intel one"),
         check_intel_build, ("xpu-wheel-needed",)),
]
