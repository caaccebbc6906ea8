"""The environment probe: hazards around torch that are not version numbers.

Containers, /dev/shm, the CPU budget (affinity and cgroup quota), RAM, the *_VISIBLE_DEVICES
variables, CUDA libraries on LD_LIBRARY_PATH (PATH on Windows), CUDA_HOME and WSL2.

Everything is read from files under ``root`` (a fake root in tests) and from the ``env`` mapping;
no subprocess is started (``ldconfig -p`` alone costs more than the whole probe). Each section is
a JSON-able dict; a section that could not be read carries ``"why"``. Sections never raise: a
failure inside one becomes ``{"why": "probe failed: ..."}`` and the others still run.
The rules that read these facts live in ``doctor/rules/hazards.py``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from doctor.model.snapshot import Host

GIB = 1024**3

# Environment variables the visible-devices section records (only the ones that are set).
VISIBLE_DEVICE_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
)

# CUDA libraries that torch's pip wheels ship and that a system CUDA on the library path can shadow.
# Family -> file-name stems. libcusparseLt is a separate product with its own versions: not matched.
_LINUX_LIB = re.compile(
    r"^lib(?P<stem>cudnn|cublasLt|cublas|nvJitLink|cudart|nccl|cusparse)(?:_[a-z_]+)?\.so(?:\.(?P<ver>\d+(?:\.\d+)*))?$"
)
_WINDOWS_LIB = re.compile(
    r"^(?P<stem>cudnn|cublasLt|cublas|cudart|cusparse)(?:_[a-z_]+)?64_(?P<ver>\d+)\.dll$"
    r"|^(?P<jstem>nvJitLink)_(?P<jver>\d+)_\d+\.dll$",
    re.IGNORECASE,
)
_STEM_FAMILY = {
    "cudnn": "cudnn",
    "cublas": "cublas",
    "cublaslt": "cublas",
    "nvjitlink": "nvjitlink",
    "cudart": "cudart",
    "nccl": "nccl",
    "cusparse": "cusparse",
}
# Driver libraries: on WSL2 these must come from /usr/lib/wsl/lib.
_DRIVER_LIB = re.compile(r"^lib(?:cuda|nvidia-ml)\.so(?:\.\d+)*$")
# A Linux driver's own files carry the full driver version (libnvidia-ml.so.550.54.14).
_LINUX_DRIVER_FILE = re.compile(r"^lib(?:cuda|nvidia-ml)\.so\.(\d{3}(?:\.\d+)+)$")

WSL_LIB_DIR = "/usr/lib/wsl/lib"


# --- small readers ------------------------------------------------------------------------------


def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/")) if root not in ("", "/") else path


def read_text(root: str, path: str, limit: int = 1 << 20) -> str | None:
    """The file's text (at most ``limit`` bytes), or None when it cannot be read."""
    try:
        with open(_under(root, path), encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except OSError:
        return None


def _exists(root: str, path: str) -> bool:
    return os.path.lexists(_under(root, path))


def _scandir_names(path: str) -> list[str] | None:
    try:
        with os.scandir(path) as entries:
            return sorted(entry.name for entry in entries)
    except OSError:
        return None


# --- containers ---------------------------------------------------------------------------------


def parse_container_kind(
    cgroup_text: str, mountinfo_text: str, markers: Mapping[str, bool], env: Mapping[str, str]
) -> tuple[str | None, list[str]]:
    """The container kind and the evidence for it, from already-read texts (pure).

    Kubernetes wins over the runtime underneath it because its remedies (pod spec) differ from
    ``docker run`` flags. cgroup v2 shows only "0::/" in /proc/*/cgroup, so mountinfo (the
    bind-mounted /etc/hostname lives under /var/lib/docker/containers/...) is the fallback.
    """
    evidence: list[str] = []
    kinds: list[str] = []
    cg, mi = cgroup_text.lower(), mountinfo_text.lower()
    if env.get("KUBERNETES_SERVICE_HOST"):
        evidence.append("KUBERNETES_SERVICE_HOST is set")
        kinds.append("kubernetes")
    if markers.get("/var/run/secrets/kubernetes.io/serviceaccount"):
        evidence.append("/var/run/secrets/kubernetes.io/serviceaccount exists")
        kinds.append("kubernetes")
    if "kubepods" in cg or "/kubelet/pods/" in mi:
        evidence.append("cgroup or mountinfo mentions kubepods/kubelet")
        kinds.append("kubernetes")
    if markers.get("/.dockerenv"):
        evidence.append("/.dockerenv exists")
        kinds.append("docker")
    if markers.get("/run/.containerenv"):
        evidence.append("/run/.containerenv exists")
        kinds.append("podman")
    if "libpod" in cg or "/containers/storage/" in mi:
        evidence.append("cgroup or mountinfo mentions libpod/containers storage")
        kinds.append("podman")
    if "docker" in cg or "/docker/containers/" in mi:
        evidence.append("cgroup or mountinfo mentions docker")
        kinds.append("docker")
    if "containerd" in cg or "io.containerd" in mi:
        evidence.append("cgroup or mountinfo mentions containerd")
        kinds.append("containerd")
    if "lxc" in cg.split("::")[-1] or env.get("container") == "lxc":
        evidence.append("cgroup or $container mentions lxc")
        kinds.append("lxc")
    if env.get("container") and env.get("container") != "lxc":
        evidence.append(f"$container={env['container']}")
        kinds.append(env["container"])
    for preferred in ("kubernetes", "podman", "docker", "containerd", "lxc"):
        if preferred in kinds:
            return preferred, evidence
    return (kinds[0] if kinds else None), evidence


def probe_container(root: str, env: Mapping[str, str], host: Host | None = None) -> dict[str, Any]:
    marker_paths = ("/.dockerenv", "/run/.containerenv", "/var/run/secrets/kubernetes.io/serviceaccount")
    markers = {path: _exists(root, path) for path in marker_paths}
    cgroups = (read_text(root, "/proc/1/cgroup") or "") + (read_text(root, "/proc/self/cgroup") or "")
    mountinfo = read_text(root, "/proc/self/mountinfo") or ""
    kind, evidence = parse_container_kind(cgroups, mountinfo, markers, env)
    if host is not None and host.container and not kind:
        kind, evidence = host.container, ["host probe"]
    dev_names = _scandir_names(_under(root, "/dev")) or []
    nodes = [f"/dev/{name}" for name in dev_names if name.startswith("nvidia")]
    image_evidence = []
    for var in ("NVIDIA_REQUIRE_CUDA", "CUDA_VERSION"):
        if env.get(var):
            image_evidence.append(f"{var}={env[var]}")
    if _exists(root, "/usr/local/cuda"):
        image_evidence.append("/usr/local/cuda exists")
    return {
        "kind": kind,
        "evidence": evidence,
        "device_nodes": nodes,
        "gpu_device_nodes": sum(1 for n in nodes if re.fullmatch(r"/dev/nvidia\d+", n)),
        "nvidia_visible_devices": env.get("NVIDIA_VISIBLE_DEVICES"),
        "nvidia_driver_capabilities": env.get("NVIDIA_DRIVER_CAPABILITIES"),
        "cuda_image": bool(image_evidence),
        "cuda_image_evidence": image_evidence,
    }


# --- /dev/shm -----------------------------------------------------------------------------------


def probe_shm(root: str, host_os: str) -> dict[str, Any]:
    if host_os == "windows":
        return {"why": "no /dev/shm on Windows"}
    path = _under(root, "/dev/shm")
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError) as exc:
        return {
            "path": "/dev/shm",
            "why": f"statvfs(/dev/shm) failed: {getattr(exc, 'strerror', None) or exc}",
        }
    return {
        "path": "/dev/shm",
        "total_bytes": st.f_blocks * st.f_frsize,
        "free_bytes": st.f_bavail * st.f_frsize,
    }


# --- CPU budget ---------------------------------------------------------------------------------


def parse_cpu_max(text: str) -> float | None:
    """cgroup v2 ``cpu.max`` ("200000 100000" -> 2.0; "max 100000" -> None meaning unlimited)."""
    parts = text.split()
    if not parts or parts[0] == "max":
        return None
    try:
        quota = int(parts[0])
        period = int(parts[1]) if len(parts) > 1 else 100000
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def parse_cfs(quota_text: str, period_text: str) -> float | None:
    """cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (-1 means unlimited -> None)."""
    try:
        quota, period = int(quota_text.strip()), int(period_text.strip())
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def parse_mountinfo_cgroups(text: str) -> list[tuple[str, str, str, str]]:
    """cgroup mounts from /proc/self/mountinfo: (fstype, mount root, mount point, super options)."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, rest = left.split(), right.split()
        if len(fields) < 5 or len(rest) < 3 or rest[0] not in ("cgroup", "cgroup2"):
            continue
        mounts.append((rest[0], fields[3], fields[4], rest[2]))
    return mounts


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """/proc/self/cgroup -> {controller: path}; the v2 line ("0::/x") is stored under ""."""
    result = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            result[controller] = parts[2]
    return result


def _walk_up(mount_point: str, mount_root: str, cgroup_path: str) -> list[str]:
    """Directories from the process's cgroup up to the mount point (the JVM's way of finding limits)."""
    rel = cgroup_path
    if mount_root not in ("/", "") and rel.startswith(mount_root):
        rel = rel[len(mount_root) :]
    rel = rel.strip("/")
    dirs = []
    parts = rel.split("/") if rel else []
    for depth in range(len(parts), -1, -1):
        dirs.append(os.path.join(mount_point, *parts[:depth]) if depth else mount_point)
    return dirs


def read_cpu_quota(root: str) -> dict[str, Any]:
    """The smallest CPU quota on the path from this process's cgroup to the root, in CPUs."""
    mounts = parse_mountinfo_cgroups(read_text(root, "/proc/self/mountinfo") or "")
    cgroups = parse_proc_cgroup(read_text(root, "/proc/self/cgroup") or "")
    if not mounts:  # no mountinfo (fake roots, odd kernels): the usual mount points
        mounts = [("cgroup2", "/", "/sys/fs/cgroup", ""), ("cgroup", "/", "/sys/fs/cgroup/cpu", "cpu")]
        mounts.append(("cgroup", "/", "/sys/fs/cgroup/cpu,cpuacct", "cpu"))
    found: dict[str, Any] = {"cgroup": None, "quota_cpus": None}
    for fstype, mount_root, mount_point, options in mounts:
        if fstype == "cgroup2":
            dirs = _walk_up(mount_point, mount_root, cgroups.get("", "/"))
            texts = [(d, read_text(root, os.path.join(d, "cpu.max"))) for d in dirs]
            texts = [(d, t) for d, t in texts if t is not None]
            if not texts:
                continue
            found["cgroup"] = "v2"
            for directory, text in texts:
                quota = parse_cpu_max(text)
                if quota is not None and (found["quota_cpus"] is None or quota < found["quota_cpus"]):
                    found.update(
                        quota_cpus=quota,
                        quota_source=os.path.join(directory, "cpu.max"),
                        quota_raw=text.strip(),
                    )
        elif "cpu" in options.split(","):
            dirs = _walk_up(mount_point, mount_root, cgroups.get("cpu", "/"))
            for directory in dirs:
                quota_text = read_text(root, os.path.join(directory, "cpu.cfs_quota_us"))
                period_text = read_text(root, os.path.join(directory, "cpu.cfs_period_us"))
                if quota_text is None or period_text is None:
                    continue
                found["cgroup"] = found["cgroup"] or "v1"
                quota = parse_cfs(quota_text, period_text)
                if quota is not None and (found["quota_cpus"] is None or quota < found["quota_cpus"]):
                    found.update(
                        quota_cpus=quota,
                        quota_source=os.path.join(directory, "cpu.cfs_quota_us"),
                        quota_raw=f"{quota_text.strip()} / {period_text.strip()}",
                    )
        if found["quota_cpus"] is not None:
            break
    if found["cgroup"] is None:
        found["why"] = "no cgroup CPU controller files found"
    return found


def cpu_budget(cpu_count: int | None, affinity: int | None, quota_cpus: float | None) -> int | None:
    """CPUs this process can really keep busy: min(affinity, ceil(quota)), at least 1."""
    import math

    candidates = [n for n in (affinity or cpu_count, math.ceil(quota_cpus) if quota_cpus else None) if n]
    return max(1, min(candidates)) if candidates else None


def probe_cpu(root: str, cpu_count: int | None = None, affinity: int | None = None) -> dict[str, Any]:
    if cpu_count is None:
        cpu_count = os.cpu_count()
    if affinity is None and hasattr(os, "sched_getaffinity"):
        try:
            affinity = len(os.sched_getaffinity(0))
        except OSError:
            affinity = None
    facts: dict[str, Any] = {"cpu_count": cpu_count, "affinity": affinity}
    facts.update(read_cpu_quota(root) if sys.platform.startswith("linux") or root not in ("", "/") else {})
    facts["budget"] = cpu_budget(cpu_count, affinity, facts.get("quota_cpus"))
    return facts


# --- memory -------------------------------------------------------------------------------------


def parse_meminfo(text: str) -> dict[str, int] | None:
    """/proc/meminfo -> total, available and swap bytes; None when the fields are not all there."""
    values = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if name in ("MemTotal", "MemAvailable", "SwapTotal") and parts and parts[0].isdigit():
            values[name] = int(parts[0]) * 1024  # the file says kB and means KiB
    if len(values) < 3:
        return None
    return {"total_bytes": values["MemTotal"], "available_bytes": values["MemAvailable"],
            "swap_total_bytes": values["SwapTotal"]}


def probe_memory(
    virtual_memory: Callable[[], Any] | None = None,
    swap_memory: Callable[[], Any] | None = None,
    root: str | None = None,
) -> dict:
    """RAM and swap. On Linux from ``<root>/proc/meminfo`` (psutil's own source, without psutil's ~10 ms
    import on every check); elsewhere, or when that file is unreadable, from psutil."""
    if root is not None and virtual_memory is None and swap_memory is None:
        text = read_text(root, "/proc/meminfo")
        parsed = parse_meminfo(text) if text else None
        if parsed is not None:
            return {"source": "/proc/meminfo", **parsed}
    if virtual_memory is None or swap_memory is None:
        try:
            import psutil  # lazily: keeps `torchdoctor --help` and the rules free of it
        except ImportError as exc:
            return {"why": f"psutil is not importable: {exc}"}
        virtual_memory = virtual_memory or psutil.virtual_memory
        swap_memory = swap_memory or psutil.swap_memory
    facts: dict[str, Any] = {"source": "psutil"}
    try:
        vm = virtual_memory()
        facts.update(total_bytes=int(vm.total), available_bytes=int(vm.available))
    except Exception as exc:  # noqa: BLE001 - psutil raises assorted OSError/RuntimeError per platform
        return {"why": f"psutil.virtual_memory() failed: {exc}"}
    try:
        facts["swap_total_bytes"] = int(swap_memory().total)
    except Exception as exc:  # noqa: BLE001
        facts["swap_why"] = f"psutil.swap_memory() failed: {exc}"
    return facts


# --- *_VISIBLE_DEVICES --------------------------------------------------------------------------


def probe_visible_devices(env: Mapping[str, str]) -> dict[str, Any]:
    """The raw values of the variables that are set; unset ones are absent (rules parse them)."""
    return {name: env[name] for name in VISIBLE_DEVICE_VARS if name in env}


# --- CUDA libraries on the library path ---------------------------------------------------------


def parse_cuda_lib_name(name: str, windows: bool = False) -> tuple[str, str | None] | None:
    """(family, version or None) for a CUDA library file name, or None when it is not one.

    "libcudnn.so.8.9.2" -> ("cudnn", "8.9.2"); "libcublasLt.so.12" -> ("cublas", "12");
    "nvJitLink_120_0.dll" -> ("nvjitlink", "12.0"); "cudart64_110.dll" -> ("cudart", "11.0").
    """
    if not windows:
        match = _LINUX_LIB.match(name)
        if not match:
            return None
        return _STEM_FAMILY[match["stem"].lower()], match["ver"]
    match = _WINDOWS_LIB.match(name)
    if not match:
        return None
    stem, digits = (match["stem"], match["ver"]) if match["stem"] else (match["jstem"], match["jver"])
    version = f"{digits[:-1]}.{digits[-1]}" if len(digits) == 3 else digits  # 110 -> 11.0, 120 -> 12.0
    return _STEM_FAMILY[stem.lower()], version


def scan_library_dir(path: str, windows: bool = False) -> dict[str, Any]:
    """The CUDA libraries and driver libraries in one directory (one scandir, no recursion)."""
    entry: dict[str, Any] = {"path": path, "exists": False, "libs": [], "driver_libs": []}
    names = _scandir_names(path) if path else None
    if names is None:
        return entry
    entry["exists"] = True
    for name in names:
        parsed = parse_cuda_lib_name(name, windows)
        if parsed:
            family, version = parsed
            lib: dict[str, Any] = {"file": name, "family": family, "version": version}
            full = os.path.join(path, name)
            if os.path.islink(full):  # libcublas.so.12 -> libcublas.so.12.4.5.8 tells the minor
                real = os.path.basename(os.path.realpath(full))
                real_parsed = parse_cuda_lib_name(real, windows)
                lib["real"] = real
                lib["real_version"] = real_parsed[1] if real_parsed else None
            entry["libs"].append(lib)
        elif not windows and _DRIVER_LIB.match(name):
            entry["driver_libs"].append(name)
    return entry


def probe_libraries(env: Mapping[str, str], host_os: str) -> dict[str, Any]:
    windows = host_os == "windows"
    variable = "PATH" if windows else "LD_LIBRARY_PATH"
    value = env.get(variable)
    facts: dict[str, Any] = {"variable": variable, "value": value, "dirs": []}
    if value is None:
        return facts
    seen: set[str] = set()
    for directory in value.split(os.pathsep if not windows else ";"):
        if not directory or directory in seen:
            continue
        seen.add(directory)
        scanned = scan_library_dir(directory, windows)
        # On Windows PATH is long and mostly irrelevant: keep only folders holding CUDA DLLs.
        if windows and not scanned["libs"]:
            continue
        facts["dirs"].append(scanned)
    return facts


# --- CUDA_HOME ----------------------------------------------------------------------------------


def parse_cuda_version_json(text: str) -> str | None:
    """version.json of a CUDA toolkit: {"cuda": {"name": "CUDA SDK", "version": "12.4.1"}, ...}."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    version = (data.get("cuda") or {}).get("version") if isinstance(data, dict) else None
    return str(version) if version else None


def parse_cuda_version_txt(text: str) -> str | None:
    """version.txt of older toolkits: "CUDA Version 10.2.89"."""
    match = re.search(r"CUDA Version\s+(\d+(?:\.\d+)*)", text)
    return match.group(1) if match else None


def probe_cuda_home(root: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The toolkit extensions would build against: CUDA_HOME, then CUDA_PATH, then /usr/local/cuda
    (the order torch.utils.cpp_extension uses, minus its `which nvcc` step: no subprocess here)."""
    variable, path = None, None
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(name):
            variable, path = name, env[name]
            break
    if path is None:
        if not _exists(root, "/usr/local/cuda"):
            return {"why": "CUDA_HOME and CUDA_PATH are not set and /usr/local/cuda does not exist"}
        path = "/usr/local/cuda"
    facts: dict[str, Any] = {"variable": variable, "path": path, "version": None}
    for name, parser in (("version.json", parse_cuda_version_json), ("version.txt", parse_cuda_version_txt)):
        text = read_text(root, os.path.join(path, name))
        if text is not None:
            facts["version"] = parser(text)
            facts["version_source"] = os.path.join(path, name)
            if facts["version"]:
                break
    if not facts["version"]:  # pip-assembled toolkits have neither file: /usr/local/cuda -> cuda-13.0
        match = re.fullmatch(r"cuda-(\d+\.\d+)", os.path.basename(os.path.realpath(_under(root, path))))
        if match:
            facts.update(version=match.group(1), version_source=f"directory name of {path}")
        else:
            facts["why"] = f"no readable version.json or version.txt in {path}"
    return facts


# --- WSL2 ---------------------------------------------------------------------------------------


def parse_ld_so_conf(text: str) -> list[str]:
    """Directories listed in one ld.so.conf.d file (comments and include lines dropped)."""
    dirs = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("include") and line.startswith("/"):
            dirs.append(line)
    return dirs


def probe_wsl(root: str, env: Mapping[str, str], host: Host | None = None) -> dict[str, Any]:
    evidence = []
    for path in ("/dev/dxg", WSL_LIB_DIR):
        if _exists(root, path):
            evidence.append(f"{path} exists")
    version = (read_text(root, "/proc/version", 4096) or "").lower()
    if "microsoft" in version or "wsl" in version:
        evidence.append("/proc/version mentions Microsoft/WSL")
    if env.get("WSL_DISTRO_NAME"):
        evidence.append("WSL_DISTRO_NAME is set")
    if host is not None and host.wsl and not evidence:
        evidence.append("host probe")
    facts: dict[str, Any] = {"is_wsl": bool(evidence), "evidence": evidence}
    if not evidence:
        return facts
    facts["wsl_lib_dir_exists"] = _exists(root, WSL_LIB_DIR)
    # ld.so.conf.d in the order ldconfig reads it (the include glob is sorted).
    conf_dir = _under(root, "/etc/ld.so.conf.d")
    confs = []
    for name in _scandir_names(conf_dir) or []:
        if not name.endswith(".conf"):
            continue
        text = read_text(root, os.path.join("/etc/ld.so.conf.d", name)) or ""
        dirs = parse_ld_so_conf(text)
        confs.append(
            {
                "file": f"/etc/ld.so.conf.d/{name}",
                "dirs": dirs,
                "driver_libs": {
                    d: [n for n in _scandir_names(_under(root, d)) or [] if _DRIVER_LIB.match(n)]
                    for d in dirs
                    if d.rstrip("/") != WSL_LIB_DIR
                },
            }
        )
    facts["ld_so_conf"] = confs
    # A Linux driver installed inside WSL: its libraries, its kernel module state, its dkms tree.
    linux_driver = []
    for libdir in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        for name in _scandir_names(_under(root, libdir)) or []:
            if _LINUX_DRIVER_FILE.match(name):
                full = os.path.join(libdir, name)
                target = os.path.realpath(_under(root, full))
                if WSL_LIB_DIR not in target and "/wsl/" not in target:
                    linux_driver.append(full)
    for path in ("/proc/driver/nvidia", "/var/lib/dkms/nvidia", "/sys/module/nvidia"):
        if _exists(root, path):
            linux_driver.append(path)
    facts["linux_driver"] = linux_driver
    return facts


# --- the combiner -------------------------------------------------------------------------------


def _host_os(host: Host | None) -> str:
    if host is not None and host.os:
        return host.os
    if sys.platform.startswith("win"):
        return "windows"
    return "darwin" if sys.platform == "darwin" else "linux"


def probe_environment(
    root: str = "/", env: Mapping[str, str] | None = None, host: Host | None = None
) -> dict:
    """Every hazard fact, one JSON-able dict per section (see the module docstring).

    The keys: "container", "shm", "cpu", "memory", "visible_devices", "libraries", "cuda_home", "wsl".
    """
    env = os.environ if env is None else env
    host_os = _host_os(host)
    sections: dict[str, Callable[[], dict]] = {
        "container": lambda: probe_container(root, env, host),
        "shm": lambda: probe_shm(root, host_os),
        "cpu": lambda: probe_cpu(root),
        "memory": lambda: probe_memory(root=root if host_os == "linux" else None),
        "visible_devices": lambda: probe_visible_devices(env),
        "libraries": lambda: probe_libraries(env, host_os),
        "cuda_home": lambda: probe_cuda_home(root, env),
        "wsl": lambda: (
            probe_wsl(root, env, host) if host_os == "linux" else {"is_wsl": False, "evidence": []}
        ),
    }
    facts: dict[str, Any] = {}
    for key, probe in sections.items():
        try:
            facts[key] = probe()
        except Exception as exc:  # noqa: BLE001 - a probe never raises; the failure becomes data
            facts[key] = {"why": f"probe failed: {type(exc).__name__}: {exc}"}
    return facts
