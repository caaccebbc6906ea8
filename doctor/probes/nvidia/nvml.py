"""Raw source: NVML through ``pynvml`` (nvidia-ml-py). Every failure is kept with NVML's own words
(classify_nvml_error) for the combiner to judge.

The real library is asked in a child of torchdoctor's own interpreter (``query_nvml_isolated``), never
in torchdoctor's process: a ``libnvidia-ml.so.1`` that segfaults or aborts while loading or in
``nvmlInit`` kills only the child (a fact: "NVML crashed: SIGSEGV"), one that hangs costs the time limit
(the runner ends the child's group), and one that prints on load writes into the child's stderr, not
onto our ``--json`` stdout. The child runs while the inspector and the smoke test run (doctor/probes/
collect.py), so its start-up hides behind theirs. A module object handed in (tests'
fakes) is still asked in-process, in a daemon thread bounded by the same timeout.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

from doctor.model.files import read_bytes
from doctor.model.snapshot import Fact, Gpu
from doctor.model.versions import cuda_from_int
from doctor.probes.nvidia import nvml_query
from doctor.probes.nvidia.parsers import classify_nvml_error, classify_nvml_failure, normalise_bus_id
from doctor.runner import run, signal_name

_COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}


@dataclass(slots=True)
class NvmlOutcome:
    ok: bool = False
    code: int | None = None  # NVML error code of the failure, when there was one
    message: str = ""  # the failure, verbatim ("Driver Not Loaded", "timed out after 5s", ...)
    timed_out: bool = False
    driver: Fact = field(default_factory=Fact)
    cuda: Fact = field(default_factory=Fact)
    gpus: list[Gpu] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # per-GPU oddities worth an attempts line


def load_pynvml() -> tuple[Any, str]:
    """(the pynvml module or None, why not). The legacy pynvml 13.x redirector warns on import."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pynvml  # kept out of module import (start-up cost, no driver needed)
    except Exception as exc:  # a broken binding is a fact, not a crash
        return None, f"not importable ({type(exc).__name__}: {exc})"
    return pynvml, ""


def query_nvml(nvml: Any, timeout: float = 5.0) -> NvmlOutcome:
    """Ask NVML in a daemon thread, so that a hung driver costs ``timeout`` seconds, not the run."""
    box: list[NvmlOutcome] = []

    def target() -> None:
        try:
            box.append(_query_nvml_unbounded(nvml))
        except BaseException as exc:  # never let the thread die silently
            code, message = classify_nvml_error(exc)
            box.append(NvmlOutcome(code=code, message=message))

    thread = threading.Thread(target=target, name="torchdoctor-nvml", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive() or not box:
        return NvmlOutcome(message=f"timed out after {timeout:g}s (a hung driver?)", timed_out=True)
    return box[0]


QUERY_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvml_query.py")


def pynvml_missing() -> str | None:
    """Why ``import pynvml`` cannot work here (without importing it: the import itself runs in a child),
    or None when it can be tried."""
    import importlib.util

    try:
        if importlib.util.find_spec("pynvml") is not None:
            return None
    except (ImportError, ValueError) as exc:  # a None in sys.modules, a broken finder
        return f"not importable ({type(exc).__name__}: {exc})"
    return "not importable (ModuleNotFoundError: No module named 'pynvml')"


# Where the dynamic loader finds libnvidia-ml.so.1 without LD_LIBRARY_PATH: its cache, and the default and
# multiarch folders (a container whose cache is stale), and WSL's driver folder.
_LOADER_CACHE = "/etc/ld.so.cache"
_LIBRARY = "libnvidia-ml.so.1"
_DEFAULT_DIRS = (
    "/lib",
    "/usr/lib",
    "/lib64",
    "/usr/lib64",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/wsl/lib",
)


def nvml_library_absent(env: Any = None, platform: str | None = None) -> bool:
    """Linux: True when libnvidia-ml.so.1 is in none of the places the loader looks (LD_LIBRARY_PATH, its
    cache, the default folders): pynvml would only answer "NVML Shared Library Not Found", so the child is
    not worth starting (most CI machines: no GPU, no driver). False wherever it may be there."""
    if not (platform or sys.platform).startswith("linux"):
        return False
    env = os.environ if env is None else env
    dirs = [d for d in (env.get("LD_LIBRARY_PATH") or "").split(":") if d] + list(_DEFAULT_DIRS)
    if any(os.path.exists(os.path.join(d, _LIBRARY)) for d in dirs):
        return False
    try:
        return _LIBRARY.encode() not in read_bytes(_LOADER_CACHE, 64 << 20, truncate=True)
    except (OSError, ValueError):
        return True  # no cache: the loader searches only the folders above


def query_nvml_isolated(timeout: float = 5.0, runner: Any = run, env: Any = None) -> NvmlOutcome:
    """Ask the real NVML in a child process (module docstring): whatever the library does, this returns."""
    missing = pynvml_missing()
    if missing:
        return NvmlOutcome(message=missing)
    if nvml_library_absent(env):  # what pynvml would say, without a process to say it
        return NvmlOutcome(code=12, message=f"NVML Shared Library Not Found ({_LIBRARY} is not where the "
            "loader looks)")
    res = runner(
        [sys.executable, QUERY_SCRIPT], timeout=timeout, env=dict(os.environ if env is None else env)
    )
    if res.timed_out:
        return NvmlOutcome(message=f"timed out after {timeout:g}s (a hung driver?)", timed_out=True)
    data = _last_json(res.stdout)
    if data is not None:
        if data.get("unimportable"):
            return NvmlOutcome(message=f"not importable ({data['unimportable']})")
        return outcome_from_answers(data)
    if res.signal:
        how = signal_name(res.signal)
        return NvmlOutcome(message=f"the NVML library crashed the probe ({how}) while loading or "
            "initialising")
    tail = [line for line in (res.stderr or "").splitlines() if line.strip()][-1:]
    return NvmlOutcome(message="the NVML probe failed "
        f"({res.describe()})" + (f": {tail[0][:200]}" if tail else ""))


def _last_json(text: str) -> dict | None:
    for line in reversed((text or "").splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict):
                return data
    return None


def _query_nvml_unbounded(nvml: Any) -> NvmlOutcome:
    return outcome_from_answers(nvml_query.query(nvml))


# --- the answers as facts ----------------------------------------------------------------------------


def outcome_from_answers(data: dict) -> NvmlOutcome:
    """nvml_query.query's data -> NvmlOutcome; anything odd in it (it crossed a process boundary) is
    unknown."""
    if not data.get("ok"):
        code, message = _classified(data.get("error"))
        return NvmlOutcome(code=code, message=message)
    out = NvmlOutcome(ok=True)
    driver, why = _answer(data.get("driver"), "nvmlSystemGetDriverVersion")
    out.driver = Fact(driver, "nvml") if isinstance(driver, str) and driver else Fact.unknown(why, "nvml")
    out.cuda = _nvml_cuda(data.get("cuda") or {})
    if data.get("count_error") is not None:
        code, message = _classified(data.get("count_error"))
        return NvmlOutcome(code=code, message=message, driver=out.driver, cuda=out.cuda)
    for raw in data.get("gpus") or []:
        if isinstance(raw, dict) and isinstance(raw.get("index"), int):
            out.gpus.append(_nvml_gpu(raw, out.notes))
    return out


def _classified(error: Any) -> tuple[int | None, str]:
    error = error if isinstance(error, dict) else {}
    return classify_nvml_failure(
        str(error.get("type") or "Error"), error.get("value"), str(error.get("message") or ""),
        bool(error.get("unicode")),
    )


def _answer(answer: Any, name: str) -> tuple[Any, str]:
    """(value, "") or (None, "NVML <name>: <why>") for one answer."""
    answer = answer if isinstance(answer, dict) else {}
    if "error" in answer:
        return None, f"NVML {name}: {_classified(answer['error'])[1]}"
    return answer.get("value"), ""


def _nvml_cuda(answers: dict) -> Fact:
    whys = []
    # _v2 reads libcuda (the real answer); v1 falls back to a built-in number when libcuda is absent.
    for name in nvml_query.CUDA_CALLS:
        value, why = _answer(answers.get(name), name)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**7:
            return Fact(cuda_from_int(value), "nvml")
        whys.append(why or f"NVML {name}: unexpected value {value!r}")
    return Fact.unknown("; ".join(whys), "nvml")


def _nvml_gpu(raw: dict, notes: list[str]) -> Gpu:
    index = raw["index"]
    gpu = Gpu(index=index)
    if raw.get("handle_error") is not None:
        why = f"NVML nvmlDeviceGetHandleByIndex: {_classified(raw['handle_error'])[1]}"
        gpu.compute_capability = Fact.unknown(why, "nvml")
        notes.append(f"nvml: GPU {index}: {why}")
        return gpu
    name, why = _answer(raw.get("nvmlDeviceGetName"), "nvmlDeviceGetName")
    if name is None:
        notes.append(f"nvml: GPU {index} name: {why}")  # UnicodeDecodeError under WSL (pynvml#53)
    gpu.name = str(name).strip() if name is not None else ""
    cc, why = _answer(raw.get("nvmlDeviceGetCudaComputeCapability"), "nvmlDeviceGetCudaComputeCapability")
    if isinstance(cc, list) and len(cc) == 2 and all(isinstance(v, int) and 0 <= v < 1000 for v in cc):
        gpu.compute_capability = Fact(f"{cc[0]}.{cc[1]}", "nvml")
    else:
        gpu.compute_capability = Fact.unknown(why or f"NVML: unexpected compute capability {cc!r}", "nvml")
    memory, _ = _answer(raw.get("nvmlDeviceGetMemoryInfo"), "")  # NotSupported on unified-memory GB10
    total = memory.get("total") if isinstance(memory, dict) else None
    gpu.memory_total_mib = (
        total // (1024 * 1024) if isinstance(total, int) and not isinstance(total, bool) else None
    )
    uuid, _ = _answer(raw.get("nvmlDeviceGetUUID"), "")
    gpu.uuid = str(uuid) if uuid else None
    pci, _ = _answer(raw.get("nvmlDeviceGetPciInfo"), "")
    bus = pci.get("busId") if isinstance(pci, dict) else None
    gpu.pci_bus_id = normalise_bus_id(str(bus)) if bus else None
    mig, _ = _answer(raw.get("nvmlDeviceGetMigMode"), "")  # NotSupported on GPUs without MIG
    gpu.mig_mode = bool(mig[0] == 1) if isinstance(mig, list) and mig else None
    mode, _ = _answer(raw.get("nvmlDeviceGetComputeMode"), "")
    gpu.compute_mode = _COMPUTE_MODES.get(mode) if isinstance(mode, int) else None
    return gpu
