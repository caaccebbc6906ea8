"""The import probe and the device smoke test: torch, run in a child of the *target* interpreter.

``probe_runtime`` runs ``torch_child.py`` (stdlib only, Python 3.6+) with a time limit and turns
whatever came back into a ``TorchRuntime``. The child reports one JSON line per step as it goes,
so a crash (signal), a hang (time limit) or an early exit still leaves the steps that finished and
the one that was running. Never raises: every failure is a status plus the evidence.

Statuses: "ok" (the child ran to the end: torch imported and the facts are valid; steps may still
have failed, each with its message), "import-error", "crashed" (killed by a signal), "timeout",
"garbage" (nothing parseable came back), "error" (the interpreter could not be run, or it stopped
early without a signal).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.model.i18n import Msg
from doctor.model.snapshot import RuntimeDevice, SmokeStep, TorchRuntime
from doctor.runner import Runner, RunResult, run, signal_name

CHILD_SCRIPT = Path(__file__).resolve().parent.parent / "target" / "smoke.py"
MODES = ("import", "smoke")
DEFAULT_TIMEOUT = 60.0
STDERR_TAIL_CHARS = 4000
STEP_STATUSES = ("ok", "failed", "skipped")
RESULT_STATUSES = ("ok", "import-error")

# CUDA / ROCm libraries a crash report may name ("Could not load library libcudnn_cnn_infer.so.8").
_LIBRARY = re.compile(
    r"\blib(?:cudnn\w*|cublas\w*|nvJitLink|nvrtc\w*|cusparse\w*|cufft\w*|curand|cusolver\w*|nccl|rccl"
    r"|cudart|cuda|cupti|nvToolsExt|MIOpen|amdhip64|rocblas|hipblaslt|torch_cuda|torch_hip|c10_cuda)"
    r"\.so(?:\.[0-9]+)*",
    re.IGNORECASE,
)
# Windows reports a crash as an NTSTATUS exit code rather than a signal.
_WINDOWS_CRASHES = {
    0xC0000005: "access violation",
    0xC0000409: "stack buffer overrun",
    0xC000001D: "illegal instruction",
}


def child_budget(timeout: float) -> float:
    """The child's own budget: a little under ours, so it can skip the rest and still report."""
    return max(0.5, min(timeout - 2.0, timeout * 0.9))


def child_argv(python: str, mode: str, device: str, timeout: float) -> list[str]:
    budget = child_budget(timeout)
    return [python, str(CHILD_SCRIPT), "--mode", mode, "--device", device, "--budget", f"{budget:.1f}"]


# --- parsing what the child printed ---------------------------------------------------------------


@dataclass(slots=True)
class ChildOutput:
    steps: list[SmokeStep] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    running: tuple[str, int | None] | None = None  # the step begun and not finished
    result: dict[str, Any] | None = None
    good_lines: int = 0
    bad_lines: int = 0


def parse_child_output(stdout: str) -> ChildOutput:
    """Read the child's JSON lines; anything else counts as a bad line and is otherwise ignored."""
    out = ChildOutput()
    for line in stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        if _parse_line(line, out):
            out.good_lines += 1
        else:
            out.bad_lines += 1
    return out


def _parse_line(line: str, out: ChildOutput) -> bool:
    if not line.startswith("{"):
        return False
    try:
        obj = json.loads(line)
    except ValueError:
        return False
    if not isinstance(obj, dict) or len(obj) != 1:
        return False
    ((key, value),) = obj.items()
    if key == "running" and isinstance(value, dict) and isinstance(value.get("name"), str):
        out.running = (value["name"], _int_or_none(value.get("device")))
        return True
    if key == "step":
        step = _parse_step(value)
        if step is None:
            return False
        out.steps.append(step)
        if out.running and out.running[0] == step.name:
            out.running = None
        return True
    if key == "facts" and isinstance(value, dict):
        out.facts.update(value)
        return True
    if key == "warnings" and isinstance(value, list) and all(isinstance(w, str) for w in value):
        out.warnings.extend(w for w in value if w not in out.warnings)
        return True
    if key == "result" and isinstance(value, dict) and value.get("status") in RESULT_STATUSES:
        out.result = value
        return True
    return False


def _parse_step(value: Any) -> SmokeStep | None:
    if not isinstance(value, dict):
        return None
    name, status = value.get("name"), value.get("status")
    if not isinstance(name, str) or status not in STEP_STATUSES:
        return None
    seconds = value.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float, type(None))):
        return None
    data = value.get("data") if isinstance(value.get("data"), dict) else {}
    return SmokeStep(
        name=name,
        status=status,
        seconds=float(seconds) if seconds is not None else None,
        message=str(value.get("message") or ""),
        device=_int_or_none(value.get("device")),
        data=data,
    )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return str(value) if value is not None and not isinstance(value, (dict, list)) else None


def apply_facts(runtime: TorchRuntime, facts: Mapping[str, Any]) -> None:
    """Copy the child's facts onto the runtime, keeping only values of the right type."""
    runtime.torch_version = _str_or_none(facts.get("torch_version"))
    runtime.cuda_version = _str_or_none(facts.get("cuda_version"))
    runtime.hip_version = _str_or_none(facts.get("hip_version"))
    runtime.backend = _str_or_none(facts.get("backend"))
    available = facts.get("cuda_available")
    runtime.cuda_available = available if isinstance(available, bool) else None
    runtime.device_count = _int_or_none(facts.get("device_count"))
    runtime.cudnn_version = _int_or_none(facts.get("cudnn_version"))
    runtime.nccl_version = _str_or_none(facts.get("nccl_version"))
    arch = facts.get("arch_list")
    runtime.arch_list = [str(a) for a in arch] if isinstance(arch, list) else []
    devices = facts.get("devices")
    runtime.devices = (
        [_parse_device(d) for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []
    )


def _parse_device(raw: Mapping[str, Any]) -> RuntimeDevice:
    return RuntimeDevice(
        index=_int_or_none(raw.get("index")) or 0,
        name=str(raw.get("name") or ""),
        capability=_str_or_none(raw.get("capability")),
        total_memory_mib=_int_or_none(raw.get("total_memory_mib")),
        free_memory_mib=_int_or_none(raw.get("free_memory_mib")),
    )


def name_cuda_libraries(text: str) -> list[str]:
    """The CUDA/ROCm shared libraries a crash message mentions, in order, each once."""
    seen: list[str] = []
    for match in _LIBRARY.finditer(text):
        if match.group(0) not in seen:
            seen.append(match.group(0))
    return seen


# --- the probe ------------------------------------------------------------------------------------


def probe_runtime(
    python: str,
    mode: str = "import",
    device: str = "all",
    timeout: float = DEFAULT_TIMEOUT,
    runner: Runner = run,
    env: Mapping[str, str] | None = None,
    progress: Callable[[str], object] | None = None,
) -> TorchRuntime:
    """Import torch in ``python`` (mode "import") or also compute on its devices (mode "smoke").
    ``progress``: called with what the child is doing as it goes ("importing torch in ...", "smoke test:
    matmul on GPU 0"); the child's lines are then read as they come."""
    if mode not in MODES:
        return TorchRuntime(
            status="error", detail=f"unknown mode {mode!r}; expected one of {', '.join(MODES)}"
        )
    if device != "all" and not str(device).isdigit():
        return TorchRuntime(status="error", detail=f"device must be 'all' or a number, not {device!r}")
    argv = child_argv(python, mode, str(device), timeout)
    if progress is not None and runner is run:
        from doctor.runner import run_lines

        follow = ProgressReader(python, progress)
        result = run_lines(argv, timeout=timeout, on_line=follow.line, env=env)
    else:
        result = runner(argv, timeout=timeout, env=env)
    return interpret(result, parse_child_output(result.stdout), timeout)


def short_path(path: str, width: int = 48) -> str:
    """A path for a one-line status: the home folder as ~, and the end of a long one after "…"."""
    import os

    home = os.path.expanduser("~")
    if home not in ("~", "/") and (path == home or path.startswith(home + os.sep)):
        path = "~" + path[len(home):]
    if len(path) <= width:
        return path
    return "…" + path[-(width - 1):]


class ProgressReader:
    """Turns the child's JSON lines, as they come, into what it is doing now, in words."""

    STEPS = {"init": Msg("initialising the devices"), "versions": Msg("reading the runtime library versions")}

    def __init__(self, python: str, report: Callable[[str], object]) -> None:
        self.python = python
        self.report = report
        self.backend: str | None = None

    def line(self, text: str) -> None:
        out = ChildOutput()
        if not _parse_line(text.strip(), out):
            return
        backend = out.facts.get("backend")
        if isinstance(backend, str):
            self.backend = backend
        if out.running is None:
            return
        name, device = out.running
        if name == "import":
            self.report(Msg("importing torch in {path}", path=short_path(self.python)))
        elif name in self.STEPS:
            self.report(Msg("smoke test: {step}", step=self.STEPS[name]))
        else:
            self.report(Msg("smoke test: {step} on {device}", step=name, device=self.device_name(device)))

    def device_name(self, index: int | None) -> str:
        if self.backend == "cpu":
            return Msg("the CPU")
        if self.backend in ("cuda", "rocm"):
            return Msg("GPU {index}", index=index if index is not None else "?")
        if self.backend == "mps":
            return Msg("the Apple GPU (MPS)")
        return f"{(self.backend or 'device').upper()} {index if index is not None else ''}".strip()


def interpret(result: RunResult, out: ChildOutput, timeout: float) -> TorchRuntime:
    """Combine the run's outcome with what the child reported (pure)."""
    runtime = TorchRuntime(seconds=round(result.seconds, 3), stderr_tail=result.stderr[-STDERR_TAIL_CHARS:])
    apply_facts(runtime, out.facts)
    runtime.warnings = list(out.warnings)
    runtime.steps = list(out.steps)
    running = _describe_running(out.running)

    if result.not_found or result.error:
        runtime.status, runtime.detail = "error", result.describe()
    elif result.timed_out:
        runtime.status = "timeout"
        runtime.detail = f"the child did not finish within {timeout:g} s" + (
            f"; it was running {running}" if running else ""
        )
        _add_unfinished(
            runtime,
            out,
            f"did not finish within the {timeout:g} s limit",
            {"timed_out": True, "limit_s": timeout},
        )
    elif result.signal or result.returncode in _WINDOWS_CRASHES:
        runtime.status, runtime.signal = "crashed", result.signal
        how = signal_name(result.signal) if result.signal else _WINDOWS_CRASHES[result.returncode]
        libraries = name_cuda_libraries(result.stderr)
        runtime.detail = f"torch crashed ({how})" + (f" during {running}" if running else "")
        if libraries:
            runtime.detail += f"; stderr names {', '.join(libraries)}"
        data = {"signal": result.signal, "libraries": libraries}
        _add_unfinished(runtime, out, f"crashed: {how}", data)
    elif out.result is not None:
        runtime.status = out.result["status"]
        runtime.detail = _summary(runtime)
    elif out.good_lines == 0:
        runtime.status = "garbage"
        runtime.detail = f"no parseable output from the child ({result.describe()})"
        snippet = result.stdout.strip()[:200]
        if snippet:
            runtime.detail += f"; stdout began {snippet!r}"
    else:
        runtime.status = "error"
        runtime.detail = f"the child stopped early ({result.describe()})" + (
            f" during {running}" if running else ""
        )
        _add_unfinished(runtime, out, f"stopped: {result.describe()}", {"returncode": result.returncode})
    return runtime


def _describe_running(running: tuple[str, int | None] | None) -> str:
    if running is None:
        return ""
    name, device = running
    return f"step {name!r}" + (f" on device {device}" if device is not None else "")


def _add_unfinished(runtime: TorchRuntime, out: ChildOutput, message: str, data: dict[str, Any]) -> None:
    """Record the step that was running when the child died as a failed step."""
    if out.running is None:
        return
    name, device = out.running
    data = dict(data, unfinished=True)
    runtime.steps.append(SmokeStep(name=name, status="failed", message=message, device=device, data=data))


def _summary(runtime: TorchRuntime) -> str:
    failed = [s for s in runtime.steps if s.status == "failed"]
    passed = sum(1 for s in runtime.steps if s.status == "ok")
    # Said as unknown, with why, never as a "?" placeholder ("torch ? on ?").
    imported = not any(s.name == "import" for s in failed)
    why = "the smoke test did not report it" if imported else "torch did not import"
    version = runtime.torch_version or f"(version unknown: {why})"
    where = f" on {runtime.backend}" if runtime.backend else ""
    head = f"torch {version}{where}: {passed} step(s) ok"
    if not failed:
        return head
    first = failed[0]
    on = f" (device {first.device})" if first.device is not None else ""
    return (f"{head}, {len(failed)} failed; first: {first.name}{on}: "
        f"{first.message.splitlines()[0] if first.message else ''}")
