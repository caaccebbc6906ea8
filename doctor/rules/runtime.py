"""What importing torch and computing on the device showed (``snapshot.runtime``), as findings.

Pure: reads the smoke-test steps, the warnings torch issued and the stderr tail, and matches
torch's real messages to stable finding ids. torch's words are data, kept with ``explain``'s in
compat_tables/signatures.json (doctor/compat/signatures.py): this rule names the rows it reads. Runtime
evidence is what actually happened on this machine, so it wins over the static diagnosis: every finding
here carries ``evidence["source"] = "smoke-test"`` and the engine prefers it when a static rule emits the
same id. One finding per id; later matches add their messages to its evidence.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from doctor.compat.assessment import Assessment
from doctor.model import shells
from doctor.model import snapshot as S
from doctor.model.findings import ERROR, REINSTALL, WARNING, Action, Finding, Fix
from doctor.model.i18n import Msg, join
from doctor.model.versions import cuda_from_int, variant_of
from doctor.rules import Rule, origin_name, skipped, unknown
from doctor.rules.windows_dlls import WINDOWS_DLL, windows_dll_hint

DRIVER_URL = "https://www.nvidia.com/Download/index.aspx"
GET_STARTED = "https://pytorch.org/get-started/locally/"
SOURCE = "smoke-test"
MAX_EVIDENCE_TEXT = 600

QUERY_APPS = "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"
QUERY_MODE = "nvidia-smi --query-gpu=index,name,compute_mode --format=csv"
SHOW_LD_PATH = 'echo "$LD_LIBRARY_PATH"'
UNSET_LD_PATH = "unset LD_LIBRARY_PATH"

_KERNEL_STEPS = ("alloc", "matmul", "conv", "autocast-fp16", "autocast-bf16")


def _words(row_id: str) -> re.Pattern:
    """The compiled pattern of a row of compat_tables/signatures.json: torch's words, kept with explain's."""
    from doctor.compat.signatures import bundled_signatures  # read only when there is something to match

    return bundled_signatures().regex(row_id)


@dataclass(slots=True)
class _Seen:
    """One piece of runtime text: a failed step's message, a warning, or the stderr tail."""

    text: str
    kind: str  # "step", "warning", "stderr"
    step: S.SmokeStep | None = None


def check_runtime(facts: Assessment) -> list[Finding]:
    snapshot = facts.snap
    rt = snapshot.runtime
    if rt.status == "skipped" and _not_imported_nor_listed(snapshot):
        # "N/A" is `import torch` failing or torch not being there: the text cannot tell which
        return unknown(Msg("collect_env printed \"PyTorch version: N/A\": torch did not import, or is not "
                           "installed, and the text holds neither a package list nor the error. Run "
                           "{command} and paste what it prints with the collect_env text",
                           command=f'{_python(snapshot)} -c "import torch"'))
    if rt.status == "skipped":
        apart = _cuda_wheels_apart(facts)
        return [apart] if apart else skipped(rt.detail or Msg("the smoke test did not run"))
    found: dict[str, Finding] = {}

    def add(finding: Finding | None, seen: _Seen | None = None) -> None:
        if finding is None:
            return
        finding.evidence.setdefault("source", SOURCE)
        first = found.setdefault(finding.id, finding)
        if first is not finding:  # the same cause seen again: keep the first, add what this one knows
            for key, value in finding.evidence.items():
                if value is not None:
                    first.evidence.setdefault(key, value)
            if finding.severity == ERROR:
                first.severity = ERROR
        if seen is not None:
            messages = found[finding.id].evidence.setdefault("messages", [])
            text = _clip(seen.text)
            if text not in messages:
                messages.append(text)

    failed = [s for s in rt.steps if s.status == "failed"]
    import_step = next((s for s in failed if s.name == "import"), None)
    # Dying inside `import torch` (signal, hang) is the crash / timeout finding's to explain.
    if rt.status == "import-error" or (import_step is not None and not import_step.data.get("unfinished")):
        add(_import_error(snapshot, import_step))
    seen = [_Seen(s.message, "step", s) for s in failed if s.name != "import"]
    seen += [_Seen(w, "warning") for w in rt.warnings]
    if rt.status in ("crashed", "error", "timeout") and rt.stderr_tail:
        seen.append(_Seen(rt.stderr_tail, "stderr"))

    unexplained = []
    for item in seen:
        matched = False
        if item.step is not None and item.step.data.get("wrong_result"):
            add(_wrong_result(snapshot, item.step), item)
            continue
        for row_id, build in _MATCHERS:
            match = _words(row_id).search(item.text)
            if match:
                matched = True
                add(build(snapshot, item, match), item)
                break
        # A step the child died in is explained by the crash / timeout / early-exit finding below.
        if not matched and item.kind == "step" and not item.step.data.get("unfinished"):
            unexplained.append(item.step)

    if rt.status == "crashed":
        add(_crashed(snapshot))
    elif rt.status == "timeout":
        add(_timeout(snapshot))
    elif rt.status == "garbage":
        add(_garbage(snapshot))
    elif rt.status == "error" and not found:
        add(_stopped(snapshot))
    if unexplained:
        add(_unexplained(snapshot, unexplained))
    if not found and rt.status == "ok" and not rt.steps:
        # torch imported (collect_env says so) but nothing ran on a device: computing is not known to work
        return unknown(Msg("this {origin_name} says torch imported, but holds no smoke test "
                       "(nothing was computed on a device)", origin_name=origin_name(snapshot)))
    return list(found.values())


# --- building each finding ------------------------------------------------------------------------


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_EVIDENCE_TEXT else text[:MAX_EVIDENCE_TEXT] + "…"


def _where(step: S.SmokeStep | None) -> str:
    if step is None:
        return ""
    return (Msg("step {name!r} on device "
        "{device}", name=step.name, device=step.device) if step.device is not None
            else Msg("step {name!r}", name=step.name))


def _base_evidence(snapshot: S.Snapshot, seen: _Seen | None = None) -> dict:
    rt = snapshot.runtime
    ev = {"source": SOURCE, "runtime.status": rt.status, "torch": rt.torch_version, "backend": rt.backend}
    if seen is not None:
        ev["seen_in"] = seen.kind
        if seen.step is not None:
            ev["step"] = seen.step.name
            ev["device"] = seen.step.device
    return ev


def _python(snapshot: S.Snapshot) -> str:
    # Windows: the py launcher when the paste does not name the interpreter (there is no python3 there)
    path = snapshot.interpreter.path or ("py" if snapshot.host.os == "windows" else "python")
    return shells.quote(path, shells.shell_for(snapshot.host.os), first=True)


def _kernels_ran(snapshot: S.Snapshot) -> bool:
    """True when the smoke test ran device kernels successfully and none failed."""
    steps = [s for s in snapshot.runtime.steps if s.name in _KERNEL_STEPS and s.device is not None]
    return any(s.status == "ok" for s in steps) and not any(s.status == "failed" for s in steps)


def _arch(snapshot: S.Snapshot, seen: _Seen, match: re.Match) -> Finding:
    rt = snapshot.runtime
    ev = _base_evidence(snapshot, seen)
    ev["arch_list"] = list(rt.arch_list)
    gpu = None
    old = _words("smoke-gpu-sm-not-compatible").search(seen.text)
    new = _words("smoke-gpu-cc-not-supported").search(seen.text)
    if old:
        gpu, ev["gpu"], ev["sm"] = f"{old['gpu']} ({old['sm']})", old["gpu"], old["sm"]
    elif new:
        gpu, ev["gpu"], ev["compute_capability"] = (
            f"{new['gpu']} (CC {new['cc']})",
            new["gpu"],
            new["cc"],
        )
        ev["gpu.index"] = int(new["index"])
    elif seen.step is not None and seen.step.device is not None:
        device = next((d for d in rt.devices if d.index == seen.step.device), None)
        if device is not None:
            gpu = f"{device.name} (CC {device.capability})" if device.capability else device.name
            ev["gpu"], ev["compute_capability"], ev["gpu.index"] = (
                device.name,
                device.capability,
                device.index,
            )
    rocm = bool(rt.hip_version) or rt.backend == "rocm"
    subject = gpu or Msg("this GPU")
    detail = (
        Msg("torch {torch_version} has no kernels for {subject}: torch said \"{group}\". "
        "This was seen running torch on the device, so it holds even where the compatibility table says "
        "the build supports this GPU (a custom build, or a wheel from another index, can lack the "
        "kernels).", torch_version=rt.torch_version or '?', subject=subject, group=match.group(0))
    )
    severity = ERROR
    if seen.kind == "warning" and _kernels_ran(snapshot):
        severity = WARNING
        detail += (
            Msg(" Yet the smoke test's kernels ran and gave correct results on the device (PTX compiled at "
                "run "
            "time, perhaps), so this is torch's warning rather than a failure; a build for this GPU is "
            "faster.")
        )
    if rocm:
        fix = Fix(
            Msg("Install a ROCm build of torch whose gfx list covers this GPU (see the fix plan). For a "
                "consumer "
            "RDNA card close to a supported one, HSA_OVERRIDE_GFX_VERSION (e.g. 10.3.0 or 11.0.0) makes it "
            "pose as that one."),
            links=[GET_STARTED],
        )
    else:
        fix = Fix(
            Msg("Install a torch build whose architecture list covers this GPU (see the fix plan)."),
            links=[GET_STARTED],
        )
    return Finding(
        "gpu-arch-unsupported",
        severity,
        Msg("torch has no kernels for {subject} (seen on the device)", subject=subject),
        detail,
        ev,
        fix,
    )



def _driver_old(snapshot: S.Snapshot, seen: _Seen, match: re.Match) -> Finding:
    rt = snapshot.runtime
    found = int(match["found_version"])
    driver_cuda = cuda_from_int(found)
    ev = _base_evidence(snapshot, seen)
    ev.update(
        {
            "found_version": found,
            "driver.max_cuda": driver_cuda,
            "torch.cuda": rt.cuda_version,
            "driver": snapshot.nvidia.driver_version.value,
        }
    )
    detail = Msg(
        "torch {torch_version} was built with CUDA {cuda_version}; torch reports the driver "
        "supports CUDA {driver_cuda} (found version {found}), too old for it, and CUDA cannot start.",
        torch_version=rt.torch_version or "?",
        cuda_version=rt.cuda_version or "?",
        driver_cuda=driver_cuda,
        found=found,
    )
    return Finding(
        "driver-too-old",
        ERROR,
        Msg("the NVIDIA driver (CUDA {cuda}) is too old for torch "
            "{torch}", cuda=driver_cuda, torch=rt.torch_version)
        if rt.torch_version else Msg("the NVIDIA driver (CUDA {cuda}) is too old for "
            "torch", cuda=driver_cuda),
        detail,
        ev,
        Fix(
            Msg("Install a torch build made for CUDA {driver_cuda} or older (see the fix plan), or update "
                "the driver.", driver_cuda=driver_cuda),
            links=[DRIVER_URL],
        ),
    )


def _no_driver(snapshot: S.Snapshot, seen: _Seen, match: re.Match) -> Finding | None:
    if snapshot.nvidia.status == S.NVIDIA_NO_GPU:
        return None  # a CUDA build on a machine without an NVIDIA GPU: nothing for a driver to drive
    ev = _base_evidence(snapshot, seen)
    ev["nvidia.status"] = snapshot.nvidia.status
    return Finding(
        "nvidia-driver-missing",
        ERROR,
        Msg("torch found no NVIDIA driver"),
        Msg("torch {torch_version} is a CUDA build, but CUDA initialisation said \"Found no "
        "NVIDIA driver on your system\": the kernel module is not loaded, or this process (a container?) "
        "cannot see the device files.", torch_version=snapshot.runtime.torch_version or '?'),
        ev,
        Fix(
            Msg("Install the NVIDIA driver (or, in a container, start it with GPU access: --gpus all)."),
            ["nvidia-smi", "ls -l /dev/nvidia*"],
            [DRIVER_URL],
        ),
    )


def _driver_mismatch(snapshot: S.Snapshot, seen: _Seen, match: re.Match) -> Finding | None:
    """CUDA error 803: the libcuda.so.1 torch loaded is not the loaded kernel module's version."""
    if snapshot.nvidia.status == S.NVIDIA_MISMATCH:
        return None  # the driver rule says so already, from NVML's own words
    ev = _base_evidence(snapshot, seen)
    loader = snapshot.environment.loader
    first = next((c for c in loader.copies if c.soname == "libcuda.so.1"), None) if loader else None
    driver = snapshot.nvidia.driver_version.value
    if first is not None:
        ev["libcuda"] = {"path": first.path, "version": first.version, "found_by": first.found_by,
                         "compat": first.compat}
    if first is not None and first.compat:
        # A cuda-compat libcuda first on the loader's path, of another branch than the driver.
        why = Msg("the first libcuda.so.1 the loader finds is the cuda-compat package's ({path}, {version}), "
                  "which this driver ({driver}) cannot use", path=first.path, version=first.version or "?",
                  driver=driver or "?")
        fix = Fix(Msg("Take the cuda-compat folder off the loader's path ({found_by}), or install a "
                      "cuda-compat package made for this driver.", found_by=first.found_by),
                  [f"ls -l {shells.quote(first.path)}"])
    else:
        why = (Msg("the first libcuda.so.1 the loader finds ({path}) is {version}, the driver is {driver}",
                   path=first.path, version=first.version, driver=driver)
               if first is not None and first.version and driver and first.version != driver
               else Msg("typically after a driver upgrade without a reboot, or in a container whose image "
                        "brings its own libcuda"))
        fix = Fix(Msg("Reboot after a driver update (or reload the nvidia kernel modules); in a "
                      "container, do not install a driver in the image: the NVIDIA Container Toolkit "
                      "mounts the host's."),
                  ["cat /proc/driver/nvidia/version"])
    return Finding(
        "driver-library-mismatch",
        ERROR,
        Msg("CUDA error 803: the CUDA driver library torch loaded does not match the loaded kernel driver"),
        Msg("CUDA said \"{clip}\" at {where}: {why}.", clip=_clip(match.group(0)),
            where=_where(seen.step) or Msg("start"), why=why),
        ev,
        fix,
    )


def _cpu_build(snapshot: S.Snapshot, seen: _Seen, match: re.Match) -> Finding:
    return Finding(
        "torch-cpu-build",
        ERROR,
        Msg("torch {torch_version} is a CPU-only "
            "build", torch_version=snapshot.runtime.torch_version or Msg('(unknown version)')),
        Msg("Asked for a CUDA device, torch said \"Torch not compiled with CUDA enabled\": this build has no "
            "CUDA "
        "support at all, whatever the driver and GPU."),
        _base_evidence(snapshot, seen),
        Fix(Msg("Install a CUDA build of torch (see the fix plan)."), links=[GET_STARTED]),
    )


def _busy(snapshot: S.Snapshot, seen: _Seen, match: re.Match) -> Finding:
    ev = _base_evidence(snapshot, seen)
    modes = {g.index: g.compute_mode for g in snapshot.nvidia.gpus if g.compute_mode}
    strict = [i for i, mode in modes.items() if mode and mode.lower() != "default"]
    if modes:
        ev["compute_mode"] = modes
    commands = [QUERY_MODE, QUERY_APPS]
    commands += [f"sudo nvidia-smi -i {i} -c DEFAULT" for i in strict] or ["sudo nvidia-smi -c DEFAULT"]
    why = (
        Msg("GPU {gpus} is in {mode} compute mode", gpus=', '.join(map(str, strict)), mode=modes[strict[0]])
        if strict
        else Msg("the GPU is in an exclusive or prohibited compute mode, or another process holds it")
    )
    return Finding(
        "gpu-busy-or-exclusive",
        ERROR,
        Msg("the GPU is busy or unavailable to this process"),
        Msg("CUDA said \"CUDA-capable device(s) is/are busy or unavailable\" at {where}: "
            "{why}.", where=_where(seen.step) or Msg('start'), why=why),
        ev,
        Fix(
            Msg("Find the process holding the GPU and stop it, or set the compute mode back to "
                "Default."), commands
        ),
    )


def _cudnn(snapshot: S.Snapshot, seen: _Seen, match: re.Match) -> Finding:
    ev = _base_evidence(snapshot, seen)
    ev["cudnn_version"] = snapshot.runtime.cudnn_version
    text = seen.text
    if _words("smoke-cudnn-old-gpu").search(text):
        return Finding(
            "cudnn-error",
            ERROR,
            Msg("this torch's cuDNN does not support a GPU older than Turing (SM 7.5)"),
            Msg("torch said: \"{clip}\". cuDNN 9.11 and later dropped GPUs below compute capability "
                "7.5.", clip=_clip(match.group(0))),
            ev,
            Fix(
                Msg("Install a torch build with an older cuDNN: the cu126 builds (see the fix plan)."),
                links=[GET_STARTED],
            ),
        )
    commands = [SHOW_LD_PATH, UNSET_LD_PATH]
    detail = Msg("cuDNN failed at {where}: "
        "\"{clip}\".", where=_where(seen.step) or Msg('start'), clip=_clip(match.group(0)))
    if _words("smoke-cudnn-other-library").search(text):
        detail += (
            Msg(" torch loaded a cuDNN other than the one it was built against, usually from "
                "LD_LIBRARY_PATH.")
        )
    elif _words("smoke-cudnn-no-handle").search(text):
        detail += (
            Msg(" cuDNN could not create its handle: most often the GPU's memory is full, or a second, "
            "mismatched cuDNN was loaded (LD_LIBRARY_PATH).")
        )
        commands = [QUERY_APPS, SHOW_LD_PATH, UNSET_LD_PATH]
    return Finding(
        "cudnn-error",
        ERROR,
        Msg("cuDNN failed"),
        detail,
        ev,
        Fix(
            Msg("Let torch use the cuDNN it ships with: remove other cuDNN folders from LD_LIBRARY_PATH "
                "(then "
            "retry); if it persists, reinstall torch."),
            commands,
        ),
    )


def _oom(snapshot: S.Snapshot, seen: _Seen, match: re.Match) -> Finding:
    ev = _base_evidence(snapshot, seen)
    held_by = _words("smoke-memory-held").findall(seen.text)
    processes = [{"pid": int(pid), "memory": mem} for pid, mem in held_by]
    if processes:
        ev["processes"] = processes
    held = join("; ", [Msg("process {pid} holds "
        "{memory}", pid=p['pid'], memory=p['memory']) for p in processes])
    device = next((d for d in snapshot.runtime.devices if seen.step and d.index == seen.step.device), None)
    if device is not None and device.free_memory_mib is not None:
        ev["free_memory_mib"], ev["total_memory_mib"] = device.free_memory_mib, device.total_memory_mib
    return Finding(
        "gpu-out-of-memory-at-start",
        ERROR,
        Msg("the GPU is out of memory before any real work"),
        Msg("A small allocation (the smoke test uses megabytes) failed at {where}: "
        "\"{clip}\". Another process is holding the GPU's "
        "memory", where=_where(seen.step) or Msg('start'), clip=_clip(match.group(0)))
        + (Msg(": {held}.", held=held) if held else "."),
        ev,
        Fix(
            Msg("Stop the process holding the GPU memory (the command lists them), or choose another GPU "
                "with "
            "CUDA_VISIBLE_DEVICES."),
            [QUERY_APPS],
        ),
    )


# The rows each cause is matched by, in the order they are tried: the first that matches a text explains it.
# Four are explain's own rows (the same words), the others the smoke_test list's.
_MATCHERS: list[tuple[str, Callable[[S.Snapshot, _Seen, re.Match], Finding | None]]] = [
    ("driver-too-old-found-version", _driver_old),
    ("no-nvidia-driver", _no_driver),
    ("cuda-error-803-driver-mismatch", _driver_mismatch),
    ("torch-not-compiled-cuda", _cpu_build),
    ("smoke-busy", _busy),
    ("smoke-cudnn", _cudnn),
    ("smoke-out-of-memory", _oom),
    ("smoke-no-kernels", _arch),
]


def _wrong_result(snapshot: S.Snapshot, step: S.SmokeStep) -> Finding:
    ev = _base_evidence(snapshot, _Seen(step.message, "step", step))
    ev.update({k: step.data[k] for k in ("max_rel_err", "tolerance", "n", "dtype") if k in step.data})
    where = Msg("GPU {device}", device=step.device) if step.device is not None else Msg("the device")
    return Finding(
        "gpu-wrong-result",
        ERROR,
        Msg("{where} computed a wrong result ({name})", where=where, name=step.name),
        Msg("{message}. Working hardware and drivers do not do this: the device or its driver is broken "
        "(faulty memory, overheating, overclocking, a driver bug). Do not trust results from this "
        "device.", message=step.message),
        ev,
        Fix(
            Msg("Check the GPU's health (ECC errors, Xid events in the kernel log), reset any overclock, "
                "reinstall "
            "the driver; if it persists, the GPU is faulty."),
            ["nvidia-smi -q -d ECC,TEMPERATURE,CLOCK", "sudo dmesg | grep -i xid"],
        ),
    )


def _running_step(snapshot: S.Snapshot) -> S.SmokeStep | None:
    """The step the child was in when it died (the probe records it last, as failed)."""
    steps = snapshot.runtime.steps
    last = steps[-1] if steps else None
    return last if last is not None and last.status == "failed" else None


def _crashed(snapshot: S.Snapshot) -> Finding:
    rt = snapshot.runtime
    step = _running_step(snapshot)
    libraries = list(step.data.get("libraries") or []) if step else []
    ev = _base_evidence(snapshot, _Seen("", "stderr", step) if step else None)
    ev.update({"signal": rt.signal, "libraries": libraries, "stderr_tail": rt.stderr_tail[-1500:]})
    how = Msg("{detail}.", detail=rt.detail or Msg("torch crashed"))
    # faulthandler prints the Python stack at the crash: what to attach to a bug report. Quoted for the
    # snapshot's own shell (a Windows report gets PowerShell's quoting).
    code = "import torch; print(torch.__version__)"
    if step is not None and step.name not in ("import", ""):
        code = 'import torch; torch.zeros(1).cuda(); print("ok")'
    argv = [snapshot.interpreter.path or "python3", "-X", "faulthandler", "-c", code]
    commands = [shells.render(argv, shells.shell_for(snapshot.host.os))]
    summary = (
        Msg("Rerun the failing call by hand to see the full error; report it with the JSON report if it "
            "persists.")
    )
    if libraries:
        summary = (
            Msg("The crash involves {libraries}: make sure torch loads the copy it ships with "
            "(remove other CUDA folders from LD_LIBRARY_PATH), or reinstall "
            "torch.", libraries=', '.join(libraries))
        )
        commands = [SHOW_LD_PATH, UNSET_LD_PATH]
    title = Msg("torch crashed during {where}", where=_where(step)) if step else Msg("torch crashed")
    if libraries:
        title += Msg(" in {libraries}", libraries=libraries[0])
    return Finding("torch-crashed", ERROR, title, how, ev, Fix(summary, commands))


def _timeout(snapshot: S.Snapshot) -> Finding:
    rt = snapshot.runtime
    step = _running_step(snapshot)
    limit = step.data.get("limit_s") if step else None
    ev = _base_evidence(snapshot, _Seen("", "stderr", step) if step else None)
    ev.update({"limit_s": limit, "steps_done": [s.name for s in rt.steps if s.status == "ok"]})
    return Finding(
        "smoke-timeout",
        ERROR,
        Msg("the smoke test hung") + (Msg(" in {where}", where=_where(step)) if step else ""),
        Msg("{detail}. A hang at import or initialisation usually means a stuck driver or device (check "
        "nvidia-smi for a GPU at 100% with no process), or a very slow file system.", detail=rt.detail),
        ev,
        Fix(
            Msg("See whether the GPU is stuck, then retry with a longer limit."),
            ["nvidia-smi", "torchdoctor check --smoke-timeout 180"],
        ),
    )


def _garbage(snapshot: S.Snapshot) -> Finding:
    rt = snapshot.runtime
    python = _python(snapshot)
    ev = _base_evidence(snapshot)
    ev["stderr_tail"] = rt.stderr_tail[-1500:]
    return Finding(
        "smoke-garbage",
        ERROR,
        Msg("the target interpreter did not run the smoke test"),
        Msg("{detail}. Something else answered: a start-up hook (sitecustomize, a .pth file), a wrapper "
        "script in place of python, or an interpreter too old for torchdoctor's child (Python "
        "3.8+).", detail=rt.detail),
        ev,
        Fix(
            Msg("Run the interpreter by hand and see what it prints."),
            [
                f'{python} -c "import sys; print(sys.version)"',
                f'{python} -c "import torch; print(torch.__version__)"',
            ],
        ),
    )


def _stopped(snapshot: S.Snapshot) -> Finding:
    rt = snapshot.runtime
    ev = _base_evidence(snapshot)
    ev["stderr_tail"] = rt.stderr_tail[-1500:]
    started = bool(rt.steps)
    return Finding(
        "smoke-failed",
        ERROR if started else WARNING,
        Msg("the smoke test stopped early") if started else Msg("the smoke test could not run"),
        Msg("{detail}.", detail=rt.detail),
        ev,
        Fix(
            Msg("Run torch by hand in that interpreter to see the error."),
            [f'{_python(snapshot)} -c "import torch; print(torch.__version__)"'],
        ),
    )


def _unexplained(snapshot: S.Snapshot, steps: list[S.SmokeStep]) -> Finding:
    ev = _base_evidence(snapshot, _Seen(steps[0].message, "step", steps[0]))
    ev["failed_steps"] = [{"step": s.name, "device": s.device, "message": _clip(s.message)} for s in steps]
    first = steps[0]
    return Finding(
        "smoke-failed",
        ERROR,
        Msg("the smoke test failed at {where}", where=_where(first)),
        Msg("torch said: {clip}", clip=_clip(first.message))
        + (Msg(" ({value} more step(s) failed)", value=len(steps) - 1) if len(steps) > 1 else ""),
        ev,
        Fix(
            Msg("torchdoctor does not recognise this failure; the message is torch's own. Search for it, or "
                "report "
            "it with the JSON report (torchdoctor check --json).")
        ),
    )


def _import_error(snapshot: S.Snapshot, step: S.SmokeStep | None) -> Finding | None:
    rt = snapshot.runtime
    message = step.message if step else rt.detail
    if _words("smoke-import-no-torch").search(message) and snapshot.install.status == "absent":
        return None  # not installed at all: the install rule says so
    ev = _base_evidence(snapshot, _Seen(message, "step", step) if step else None)
    ev["message"] = _clip(message)
    python = _python(snapshot)
    retry = f'{python} -c "import torch; print(torch.__version__)"'
    if _words("smoke-import-library-shadowed").search(message):
        hint = (
            Msg(" A CUDA library from outside torch's install was loaded first (\"undefined symbol\" is the "
            "sign, e.g. __nvJitLinkComplete_12_4 from an older libnvJitLink): LD_LIBRARY_PATH points at "
            "another CUDA.")
        )
        fix = Fix(
            Msg("Stop LD_LIBRARY_PATH from overriding torch's own CUDA libraries, then retry the import."),
            [SHOW_LD_PATH, UNSET_LD_PATH, retry],
        )
    elif snapshot.host.os == "windows" and (WINDOWS_DLL.search(message) or "PyTorch version: N/A" in message):
        hint, fix = windows_dll_hint(snapshot, retry, _pasted_dll(snapshot))
    elif _words("smoke-import-library-missing").search(message):
        hint = Msg(" A shared library torch needs is missing: its CUDA dependency wheels are absent or "
            "broken.")
        fix = Fix(Msg("Reinstall torch with its dependencies."), actions=[_reinstall(snapshot)])
    else:
        hint = ""
        fix = Fix(Msg("Reinstall torch; if that does not help, search for the "
            "message."), actions=[_reinstall(snapshot)])
    # the message is collect_env's N/A, not torch's
    pasted = snapshot.origin == "collect_env" and step is None
    return Finding("torch-import-error", ERROR, Msg("import torch fails"),
                   Msg("{clip}.{hint}" if pasted else "`import torch` raised "
                       "{clip}.{hint}", clip=_clip(message).rstrip("."),
                       hint=hint), ev, fix)


def _not_imported_nor_listed(snapshot: S.Snapshot) -> bool:
    """A collect_env text that says "PyTorch version: N/A" and could not list packages."""
    text = snapshot.environment.collect_env
    return (snapshot.origin == "collect_env" and text is not None and not text.pip and not text.conda
            and (text.fields.get("torch_version") or "").strip().lower() == "n/a")


def _pasted_dll(snapshot: S.Snapshot) -> str | None:
    """The DLL a traceback pasted with a collect_env text names ("Error loading ...\\fbgemm.dll")."""
    text = snapshot.environment.collect_env
    for error in (text.pasted_errors or []) if text is not None else []:
        if error.groups.get("dll"):
            return error.groups["dll"]
    return None


def _cuda_wheels_apart(facts: Assessment) -> Finding | None:
    """torch's libraries find its CUDA wheels' (nvidia/<library>/lib) by a RUNPATH relative to torch's own
    folder ($ORIGIN/../../nvidia/...). Where pip puts torch (a platform wheel: platlib, lib64 on RHEL-family
    distributions) and the nvidia-* wheels (pure: purelib, lib) in two site-packages, that lookup fails.
    torch then preloads them from sys.path (_load_global_deps / _preload_cuda_deps in torch/__init__.py since
    1.13.1: "As PyTorch is not purelib, but nvidia-*-cu12 is"), which pytorch/pytorch#165812 shows failing on
    2.9.0 (and #109221 on Amazon Linux). Without the smoke test, that is a warning, not a verdict."""
    snap, build = facts.snap, facts.build
    py, torch = snap.environment.python, snap.install.torch
    if snap.host.os != "linux" or build is None or build.kind != "cuda" or py is None or torch is None:
        return None
    here = (torch.location or "").rstrip("/")
    declared = {re.split(r"[\s;<>=!~\[(]", line, maxsplit=1)[0].lower().replace("_", "-")
                for line in torch.requires}
    folders: dict[str, set[str]] = {}
    for row in py.installed or []:
        name = row[0].lower().replace("_", "-") if row else ""
        if len(row) > 2 and name.startswith("nvidia-") and name in declared:
            folders.setdefault(name, set()).add(row[2].rstrip("/"))
    apart = sorted(name for name, where in folders.items() if here and here not in where)
    if not here or not apart:
        return None
    there = sorted({d for name in apart for d in folders[name]})
    return Finding(
        "torch-cuda-wheels-apart", WARNING,
        Msg("torch's CUDA wheels are in another site-packages ({there}): import torch may fail",
            there=", ".join(there)),
        Msg("torch is in {here}, the CUDA wheels it loads ({apart}) are in {there}: pip puts a platform "
            "wheel (torch) in platlib and pure ones (the nvidia-* wheels) in purelib, lib64 and lib on "
            "RHEL-family distributions. torch's libraries look for them next to torch "
            "(nvidia/<library>/lib); when that fails, torch 1.13.1 and later look on sys.path, which holds "
            "both folders, yet "
            "pytorch/pytorch#165812 shows `import torch` failing this way on 2.9.0 (\"libcudnn.so.9: cannot "
            "open shared object file\"). The smoke test (check without --no-smoke) tells.",
            here=here, apart=", ".join(apart), there=", ".join(there)),
        {"torch.location": here, "apart": {name: sorted(folders[name]) for name in apart}},
        # A link works only where torch's folder has no nvidia/ of its own (some wheels beside torch, some
        # apart): `ln -s` would make nvidia/nvidia there.
        Fix(Msg("Make the CUDA wheels' folder visible where torch looks for it (or install torch and its "
                "CUDA wheels into one folder):"),
            [f"ln -s {shells.quote(there[0] + '/nvidia')} {shells.quote(here + '/nvidia')}"])
        if len(there) == 1 and len(apart) == len(folders) else
        Fix(Msg("Install torch and its CUDA wheels into one site-packages folder (a new venv).")),
    )


def _reinstall(snapshot: S.Snapshot) -> Action:
    """torch again, forced: the plan's exact builds (its target, else the installed ones), so the command
    names the same torch and index as the plan beside it (doctor/plan/commands.py fills them in)."""
    dist = snapshot.install.torch
    version = (dist.version if dist else None) or snapshot.runtime.torch_version
    if not version:
        return Action(REINSTALL, ("torch",), plan=True)
    return Action(REINSTALL, (f"torch=={version}",), variant_of(version), plan=True)


RULES = [
    Rule(
        id="runtime",
        summary=Msg("torch imports and the device computes correctly"),
        func=check_runtime,
        ids=(
            "torch-import-error",
            "torch-cuda-wheels-apart",
            "gpu-arch-unsupported",
            "driver-too-old",
            "nvidia-driver-missing",
            "driver-library-mismatch",
            "torch-cpu-build",
            "gpu-busy-or-exclusive",
            "cudnn-error",
            "gpu-out-of-memory-at-start",
            "gpu-wrong-result",
            "torch-crashed",
            "smoke-timeout",
            "smoke-garbage",
            "smoke-failed",
        ),
    )
]
