"""Parse the text of `python -m torch.utils.collect_env` into a Snapshot (`check --from collect_env.txt`).

Bug reports all over GitHub carry this text, so torchdoctor can diagnose a machine it never ran on.
The labels come from ``env_info_fmt`` in torch/utils/collect_env.py (read from torch 2.13.0); older
releases used the same labels with fewer lines ("Is CUDA available: Yes", "Python version: 3.6").
What the text cannot tell (compute capability, the driver's maximum CUDA, the arch list) stays
unknown with a reason and is listed in ``snapshot.unknowns``; the pipeline fills some from the table.
Pure: no I/O. Raises ReportError only for text that is not collect_env output at all.
"""

from __future__ import annotations

import re

from doctor.compat.builds import cuda_from_requires
from doctor.errors import ReportError
from doctor.inputs.collect_env_rocm import amd_from_collect_env
from doctor.model.environment import CollectEnvText, Environment, PastedError
from doctor.model.snapshot import (
    NVIDIA_OK,
    NVIDIA_UNKNOWN,
    Dist,
    Fact,
    Gpu,
    Host,
    Interpreter,
    Nvidia,
    RuntimeDevice,
    Snapshot,
    TorchInstall,
    TorchRuntime,
)
from doctor.model.versions import cuda_from_tag, minor_key

SOURCE = "collect_env"
WHY_NO_CC = "collect_env does not report compute capability"
WHY_NO_MAX_CUDA = "collect_env does not report the driver's maximum CUDA version"

# label as printed -> our key; every label of torch 2.13's env_info_fmt plus the XPU extras.
LABELS = {
    "PyTorch version": "torch_version",
    "Is debug build": "is_debug_build",
    "CUDA used to build PyTorch": "cuda_compiled_version",
    "ROCM used to build PyTorch": "hip_compiled_version",
    "OS": "os",
    "GCC version": "gcc_version",
    "Clang version": "clang_version",
    "CMake version": "cmake_version",
    "Libc version": "libc_version",
    "Python version": "python_version",
    "Python platform": "python_platform",
    "Is CUDA available": "is_cuda_available",
    "CUDA runtime version": "cuda_runtime_version",
    "CUDA_MODULE_LOADING set to": "cuda_module_loading",
    "GPU models and configuration": "nvidia_gpu_models",
    "Nvidia driver version": "nvidia_driver_version",
    "cuDNN version": "cudnn_version",
    "Is XPU available": "is_xpu_available",
    "XPU used to build PyTorch": "xpu_compiled_version",
    "HIP runtime version": "hip_runtime_version",
    "MIOpen runtime version": "miopen_runtime_version",
    "Is XNNPACK available": "is_xnnpack_available",
    "Caching allocator config": "caching_allocator_config",
}
# Labels that only collect_env prints; "OS:" or "GCC version:" alone prove nothing.
_DISTINCTIVE = {
    "torch_version",
    "is_debug_build",
    "cuda_compiled_version",
    "hip_compiled_version",
    "is_cuda_available",
    "cuda_runtime_version",
    "nvidia_gpu_models",
    "nvidia_driver_version",
    "cudnn_version",
    "python_version",
}
_LABEL_RE = re.compile(
    r"^(" + "|".join(re.escape(k) for k in sorted(LABELS, key=len, reverse=True)) + r")\s*:[ \t]*(.*)$"
)
_QUOTE_RE = re.compile(r"^\s*(?:>\s?)+")  # a paste quoted in Markdown
_LIB_RE = re.compile(r"^\[(pip\d?|conda)\]\s+(\S.*)$")
_GPU_RE = re.compile(r"^GPU (\d+):\s*(.+?)\s*(?:\(UUID: [^)]*\))?\s*$")
# What collect_env prints instead of a value.
_NOT_A_VALUE = {"", "n/a", "could not collect", "none", "no cuda", "no relevant packages"}


# The labels collect_env prints first: where its own lines begin in a long paste.
_FIRST_LABELS = ("Collecting environment information", "PyTorch version:", "Is debug build:",
                 "CUDA used to build PyTorch:")


def looks_like_collect_env(text: str) -> bool:
    """Whether ``text`` holds collect_env's output: its labels within 200,000 characters of where its first
    label is, so that a long log pasted before it (a pip log, a traceback) does not hide it."""
    found = [at for at in (text.find(label) for label in _FIRST_LABELS) if at >= 0]
    start = max(0, text.rfind("\n", 0, min(found)) + 1) if found else 0
    fields = _read_fields(text[start:start + 200_000])[0]
    distinctive = _DISTINCTIVE & set(fields)
    return ("torch_version" in distinctive and len(distinctive) >= 2) or len(distinctive) >= 3


def parse_collect_env(text: str) -> Snapshot:
    fields, gpu_lines, cudnn_paths, libraries, around = _read_fields(text)
    distinctive = _DISTINCTIVE & set(fields)
    if not (("torch_version" in distinctive and len(distinctive) >= 2) or len(distinctive) >= 3):
        raise ReportError("not `python -m torch.utils.collect_env` output: none of its labels were found")

    unknowns: list[str] = []
    torch_imported = _value(fields.get("torch_version")) is not None
    pip, conda = libraries["pip"], libraries["conda"]

    host = _host(fields, unknowns)
    interpreter = _interpreter(fields, unknowns)
    if host.os == "darwin":
        # The "Python platform" line is the interpreter's own (x86_64 under Rosetta 2), the CPU section the
        # Mac's ("Apple M1"): together they tell a translated Python.
        # "OS: macOS 15.3 (x86_64)" is the real version; the platform line may say 10.16 (an old SDK's view)
        said = re.match(r"^macOS\s+([\d.]+)", _value(fields.get("os")) or "")
        host.macos = said.group(1) if said else host.os_release or None
        host.cpu = _cpu_name(text)
        interpreter.machine = host.machine or None
    install = _install(fields, pip, conda, torch_imported, unknowns)
    pasted, import_error = _pasted_errors(around)
    runtime = _runtime(fields, install, torch_imported, gpu_lines, import_error)
    nvidia = _nvidia(fields, gpu_lines, install)
    amd = amd_from_collect_env(
        _value(fields.get("hip_compiled_version")), _value(fields.get("hip_runtime_version")),
        _value(fields.get("miopen_runtime_version")), _value(fields.get("nvidia_gpu_models")),
        _bool(fields.get("is_cuda_available")), unknowns,
    )

    unknowns += [
        f"nvidia.gpus[].compute_capability: {WHY_NO_CC}",
        "nvidia.gpus[].memory_total_mib: collect_env does not report GPU memory",
        f"nvidia.cuda_driver_version: {WHY_NO_MAX_CUDA}",
        "runtime.arch_list: collect_env does not report the CUDA architectures torch was built for",
        "runtime.device_count: collect_env does not report how many devices torch sees",
        "runtime.cudnn_version: collect_env reports the system cuDNN, not the one torch loads",
        "host.container: collect_env does not say whether it ran in a container",
    ]
    if not torch_imported and runtime.status != "import-error":
        unknowns.append(
            "runtime: torch could not be imported when collect_env ran; its output does not say why"
        )

    # The text names no container, /dev/shm, CPU quota, library path or interpreter folder: those sections
    # stay None (unknown), so the hazard rules say nothing rather than judge defaults.
    environment = Environment(
        collect_env=CollectEnvText(
            fields=dict(fields), gpu_lines=gpu_lines, cudnn_candidates=cudnn_paths, pip=pip, conda=conda,
            pasted_errors=pasted or None, pasted_import_error=import_error,
        )
    )
    return Snapshot(
        origin=SOURCE,
        host=host,
        nvidia=nvidia,
        amd=amd,
        interpreter=interpreter,
        install=install,
        runtime=runtime,
        environment=environment,
        unknowns=unknowns,
    )


# --- reading the text --------------------------------------------------------------------------


def _read_fields(
    text: str,
) -> tuple[dict[str, str], list[str], list[str], dict[str, list[str]], list[str]]:
    """label values (first occurrence wins), GPU lines, cuDNN candidate paths, [pip]/[conda] lines, and the
    lines that are not collect_env's (what was pasted around it: a traceback)."""
    fields: dict[str, str] = {}
    gpu_lines: list[str] = []
    cudnn_paths: list[str] = []
    libraries: dict[str, list[str]] = {"pip": [], "conda": []}
    around: list[str] = []
    current = None  # the multi-line field being continued
    in_cpu = False  # collect_env's CPU section (lscpu, wmic): free text of its own, up to the library list
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for raw in lines:
        line = _QUOTE_RE.sub("", raw).strip().strip("`").strip()
        if _CPU_RE.match(line):
            in_cpu, current = True, None
            continue
        if line in _FURNITURE:
            in_cpu = in_cpu and line != "Versions of relevant libraries:"
            current = None
            continue
        match = _LABEL_RE.match(line)
        if match:
            key = LABELS[match.group(1)]
            value = match.group(2).strip()
            current = key if key in ("nvidia_gpu_models", "cudnn_version") else None
            if key in fields:
                current = None  # a second paste: keep the first
                continue
            fields[key] = value
            if key == "nvidia_gpu_models" and _GPU_RE.match(value):
                gpu_lines.append(value)
            continue
        lib = _LIB_RE.match(line)
        if lib:
            libraries["conda" if lib.group(1) == "conda" else "pip"].append(lib.group(2).strip())
            current = None
            continue
        if current == "nvidia_gpu_models":
            if _GPU_RE.match(line):
                gpu_lines.append(line)
                continue
            if not line and not gpu_lines:  # the blank line before a multi-line list
                continue
        elif current == "cudnn_version":
            if line.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:\\", line):
                cudnn_paths.append(line)
                continue
        current = None
        if line and not in_cpu:
            around.append(_QUOTE_RE.sub("", raw).rstrip())
    return fields, gpu_lines, cudnn_paths, libraries, around


# Lines collect_env prints besides its labelled ones.
_FURNITURE = {"Collecting environment information...", "Versions of relevant libraries:",
              "Probably one of the following:"}
# `import torch` failing: a frame in torch/__init__.py, the import line itself, or torch's own DLL folder
# named in the error ("Error loading ...\\torch\\lib\\fbgemm.dll").
_TORCH_IMPORT_RE = re.compile(r"[\\/]torch[\\/](?:__init__\.py|lib[\\/])|^\s*(?:import torch\b|from torch\b)",
                              re.IGNORECASE)


# The line a traceback ends with ("OSError: [WinError 126] ...", "ImportError: libcudnn.so.8: ..."), or the
# DLL loader's own words when the exception's name was not pasted.
_EXCEPTION_RE = re.compile(r"^\s*[A-Za-z_][\w.]{0,80}(?:Error|Exception)\b[^\n]{0,20}?:|\bError loading \S",
                           re.IGNORECASE)


def _pasted_errors(around: list[str]) -> tuple[list[PastedError], str | None]:
    """The known errors in the lines pasted around the collect_env text, as explain's signatures
    (compat_tables/signatures.json) recognise them, best first; and the error line of `import torch` failing
    when those lines show it (the best recognised error, else the traceback's last exception line).
    ([], None) for a bare collect_env text: nothing is matched then."""
    if not around:
        return [], None
    from doctor.compat.signatures import bundled_signatures
    from doctor.inputs.errortext import explain_text

    found = []
    try:
        signatures = bundled_signatures()
    except (OSError, ValueError):  # the tool's own data file is unreadable: the lines are read without it
        signatures = None
    if signatures is not None:
        for item in explain_text("\n".join(around), signatures).findings:
            line = around[item.line - 1].strip() if 0 < item.line <= len(around) else item.text
            found.append(PastedError(signature=item.signature, finding=item.finding, line=line,
                                     groups=dict(item.groups)))
    if not any(_TORCH_IMPORT_RE.search(line) for line in around):
        return found, None
    if found:
        return found, found[0].line
    raised = [line.strip() for line in around if _EXCEPTION_RE.search(line)]
    return found, raised[-1] if raised else None


_CPU_RE = re.compile(r"^CPU:\s*$")


def _cpu_name(text: str) -> str | None:
    """The first line of collect_env's "CPU:" section (``sysctl -n machdep.cpu.brand_string`` on macOS)."""
    lines = [_QUOTE_RE.sub("", raw).strip().strip("`").strip() for raw in text[:200_000].splitlines()]
    for i, line in enumerate(lines):
        if _CPU_RE.match(line):
            following = next((n for n in lines[i + 1:i + 3] if n), "")
            return following if following and ":" not in following else None
    return None


def _value(raw: str | None) -> str | None:
    """The value, or None for collect_env's placeholders ("N/A", "Could not collect", "No CUDA")."""
    if raw is None or raw.strip().lower() in _NOT_A_VALUE:
        return None
    return raw.strip()


def _bool(raw: str | None) -> bool | None:
    value = (raw or "").strip().lower()
    if value in ("true", "yes"):
        return True
    if value in ("false", "no"):
        return False
    return None



# --- the snapshot parts ------------------------------------------------------------------------

_MACHINES = {"amd64": "x86_64", "x86_64": "x86_64", "x64": "x86_64", "aarch64": "aarch64", "arm64": "arm64"}


def _host(fields: dict[str, str], unknowns: list[str]) -> Host:
    host = Host()
    platform = _value(fields.get("python_platform")) or ""
    os_line = _value(fields.get("os")) or ""
    lowered = platform.lower()
    if lowered.startswith("linux"):
        host.os = "linux"
        m = re.match(
            r"^Linux-(.+?)-(x86_64|aarch64|arm64|ppc64le|s390x|armv7l|i686|riscv64)(?:-with-(.*))?$", platform
        )
        if m:
            host.os_release, host.machine = m.group(1), _MACHINES.get(m.group(2), m.group(2))
            libc = re.match(r"^(glibc|musl)-?([\d.]+)?", m.group(3) or "")
            if libc:
                host.libc = f"{libc.group(1)} {libc.group(2)}".strip() if libc.group(2) else libc.group(1)
    elif lowered.startswith("windows"):
        host.os = "windows"
        m = re.match(r"^Windows-[^-]*-([\d.]+)", platform)
        host.os_release = m.group(1) if m else ""
    elif lowered.startswith(("macos", "darwin")):
        host.os = "darwin"
        m = re.match(r"^(?:macOS|Darwin)-([\d.]+)-(\w+)", platform)
        if m:
            host.os_release, host.machine = m.group(1), _MACHINES.get(m.group(2).lower(), m.group(2))
    if not host.os:  # old layouts have only "OS: Ubuntu 16.04.4 LTS"
        lowered_os = os_line.lower()
        if "windows" in lowered_os:
            host.os = "windows"
        elif "mac" in lowered_os or "darwin" in lowered_os:
            host.os = "darwin"
        elif os_line:
            host.os = "linux"
    if not host.machine:
        m = re.search(r"\(([\w-]+)\)\s*$", os_line)
        if m and m.group(1).lower() in _MACHINES:
            host.machine = _MACHINES[m.group(1).lower()]
        elif host.os == "windows" and "64-bit" in os_line:
            host.machine = "arm64" if "arm" in os_line.lower() else "x86_64"
        elif host.os == "windows" and "32-bit" in os_line:
            host.machine = "x86"
    if not host.machine and host.os == "windows":
        # "OS: Microsoft Windows 11 Home" names no architecture; the Python version line names the one the
        # interpreter was built for ("[MSC v.1940 64 bit (AMD64)]"), which is what torch's wheels follow.
        m = re.search(r"\[MSC v\.\d+ (?:64|32) bit "
            r"\((AMD64|ARM64|Intel)\)\]", _value(fields.get("python_version")) or "")
        if m:
            host.machine = {"AMD64": "x86_64", "ARM64": "arm64", "Intel": "x86"}[m.group(1)]
    if not host.libc:
        m = re.match(r"^(glibc|musl)-([\d.]+)$", _value(fields.get("libc_version")) or "")
        if m:
            host.libc = f"{m.group(1)} {m.group(2)}"
    host.wsl = "microsoft" in host.os_release.lower()
    if not host.os:
        unknowns.append("host.os: no OS or Python platform line")
    if not host.machine:
        unknowns.append("host.machine: this collect_env output does not name the CPU architecture")
    return host


def _interpreter(fields: dict[str, str], unknowns: list[str]) -> Interpreter:
    raw = _value(fields.get("python_version")) or ""
    m = re.match(r"^(\d+\.\d+(?:\.\d+)?)", raw)
    bits = re.search(r"\((\d+)-bit runtime\)", raw)
    interpreter = Interpreter(
        reason="collect_env",
        version=m.group(1) if m else "",
        implementation=("pypy" if "pypy" in raw.lower() else "cpython") if raw else "",
        bits=int(bits.group(1)) if bits else None,
        free_threaded="free-threading" in raw,
    )
    unknowns.append("interpreter.path: collect_env does not say which interpreter it ran in")
    if m and m.group(1).count(".") == 1:
        unknowns.append("interpreter.version: this old collect_env prints only major.minor")
    return interpreter


def _package_versions(pip: list[str], conda: list[str], names: tuple[str, ...]) -> dict[str, str | None]:
    """{"pip": version, "conda": version, "conda_build": ..., "conda_channel": ...} for the first name
    found."""
    found: dict[str, str | None] = {"pip": None, "conda": None, "conda_build": None, "conda_channel": None}
    for line in pip:
        m = re.match(r"^([A-Za-z0-9_.-]+)\s*(?:==|===)\s*(\S+)", line)
        if m and m.group(1).lower().replace("_", "-") in names and found["pip"] is None:
            found["pip"] = m.group(2)
    for line in conda:
        parts = line.split()
        if len(parts) >= 2 and parts[0].lower() in names and found["conda"] is None:
            found["conda"] = parts[1]
            found["conda_build"] = parts[2] if len(parts) > 2 else None
            found["conda_channel"] = parts[3] if len(parts) > 3 else None
    return found



def _dist(name: str, found: dict[str, str | None]) -> Dist | None:
    version = found["pip"] or found["conda"]
    if version is None:
        return None
    # conda list shows pip-installed packages with channel "pypi"; no channel column means "defaults".
    installer = "conda" if found["conda"] and found["conda_channel"] != "pypi" else None
    return Dist(name=name, version=version, installer=installer, cuda=cuda_from_tag(version))


def _install(
    fields: dict[str, str], pip: list[str], conda: list[str], torch_imported: bool, unknowns: list[str]
) -> TorchInstall:
    found = _package_versions(pip, conda, ("torch", "pytorch"))
    torch = _dist("torch", found)
    torch_version = _value(fields.get("torch_version"))
    if torch is None and torch_version:
        torch = Dist(name="torch", version=torch_version)
    if torch is not None:
        if torch_version:
            torch.build_version = torch_version
        cuda_raw = _value(fields.get("cuda_compiled_version"))
        hip_raw = _value(fields.get("hip_compiled_version"))
        xpu_raw = _value(fields.get("xpu_compiled_version"))
        if torch_imported:  # what torch.version said overrides what the wheel's tag suggests
            torch.cuda = minor_key(cuda_raw)
            torch.hip = hip_raw
            torch.xpu = xpu_raw
        else:
            torch.cuda = torch.cuda or _cuda_from_conda_build(found["conda_build"])
            m = re.search(r"\+rocm([\d.]+)", torch.version)
            torch.hip = m.group(1) if m else None
        unknowns.append("install.torch.location: collect_env does not say where torch is installed")
    vision = _dist("torchvision", _package_versions(pip, conda, ("torchvision",)))
    audio = _dist("torchaudio", _package_versions(pip, conda, ("torchaudio",)))
    if torch is not None:
        status, detail = "ok", "from collect_env"
    elif pip or conda:
        status, detail = "absent", "collect_env lists no torch package"
    else:
        status, detail = "unknown", "collect_env could not list packages"
    return TorchInstall(
        status=status,
        detail=detail,
        torch=torch,
        torchvision=vision,
        torchaudio=audio,
        cuda_from_requires=cuda_from_requires(pip),
    )


def _cuda_from_conda_build(build: str | None) -> str | None:
    m = re.search(r"cuda_?(\d+)\.?(\d)", build or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _runtime(
    fields: dict[str, str], install: TorchInstall, torch_imported: bool, gpu_lines: list[str],
    import_error: str | None,
) -> TorchRuntime:
    if not torch_imported and import_error:
        # the traceback users paste with the text: collect_env's N/A is this error
        return TorchRuntime(
            status="import-error",
            detail=f"collect_env printed \"PyTorch version: N/A\" and the error pasted with it shows "
                   f"`import torch` failing: {import_error}",
        )
    if not torch_imported and install.torch is not None:
        # collect_env prints N/A when `import torch` raised; its package list still shows the install.
        return TorchRuntime(
            status="import-error",
            detail=f"collect_env printed \"PyTorch version: N/A\" although its package list has torch "
                   f"{install.torch.version}: `import torch` failed when it ran (the paste does not hold the "
                   "error)",
        )
    if not torch_imported:
        return TorchRuntime(
            status="skipped", detail="collect_env: torch could not be imported (PyTorch version: N/A)"
        )
    torch = install.torch
    available = _bool(fields.get("is_cuda_available"))
    xpu = _bool((fields.get("is_xpu_available") or "").split("\n")[0])
    runtime = TorchRuntime(
        status="ok",
        detail="from collect_env",
        torch_version=_value(fields.get("torch_version")),
        cuda_version=torch.cuda if torch else None,
        hip_version=torch.hip if torch else None,
        cuda_available=available,
    )
    if runtime.hip_version:
        runtime.backend = "rocm"
        name = _value(fields.get("nvidia_gpu_models"))
        if available and name and not gpu_lines:  # on ROCm collect_env prints torch's device 0 name
            runtime.devices = [RuntimeDevice(index=0, name=name)]
    elif runtime.cuda_version:
        runtime.backend = "cuda"
    elif xpu:
        runtime.backend = "xpu"
    else:
        runtime.backend = "cpu"
    return runtime


def _nvidia(fields: dict[str, str], gpu_lines: list[str], install: TorchInstall) -> Nvidia:
    raw_driver = fields.get("nvidia_driver_version")
    driver = _value(raw_driver)
    if driver and re.match(r"^\d{1,6}\.\d{1,6}(\.\d{1,6})*$", driver):
        driver_fact = Fact(driver, source=SOURCE)
    elif raw_driver is None:
        driver_fact = Fact.unknown("collect_env output has no 'Nvidia driver version' line", source=SOURCE)
    else:
        driver_fact = Fact.unknown(
            f"collect_env: Nvidia driver version: {raw_driver.strip() or 'empty'}", source=SOURCE
        )
    gpus = []
    for line in gpu_lines:
        m = _GPU_RE.match(line)
        if m:
            gpus.append(
                Gpu(
                    index=int(m.group(1)), name=m.group(2), compute_capability=Fact.unknown(WHY_NO_CC, SOURCE)
                )
            )
    raw_models = fields.get("nvidia_gpu_models", "")
    if gpus:
        status, detail = NVIDIA_OK, "collect_env listed GPUs (nvidia-smi -L)"
    elif raw_models.strip().lower() == "no cuda":
        status, detail = NVIDIA_UNKNOWN, "collect_env: No CUDA (nvidia-smi gave nothing: no driver or no GPU)"
    else:
        status, detail = (
            NVIDIA_UNKNOWN,
            f"collect_env: GPU models and configuration: {raw_models.strip() or 'absent'}",
        )
    return Nvidia(
        status=status,
        detail=detail,
        driver_version=driver_fact,
        cuda_driver_version=Fact.unknown(WHY_NO_MAX_CUDA, source=SOURCE),
        gpus=gpus,
        attempts=["collect_env: as reported in the pasted text"],
    )
