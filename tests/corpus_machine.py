"""Fake machines from declarative specs (tests/fixtures/corpus_platforms/*.machine.json), and the pieces the
end-to-end tests share to lay out a fake root.

A spec holds only the facts a report states (the format is in tests/fixtures/corpus_platforms/README.md).
``build(spec, folder)`` turns it into a ``FakeMachine``: a TORCHDOCTOR_SYSROOT folder (PCI bus, KFD topology,
device files, any file), a bin folder with the fake tools (nvidia-smi), a real venv holding a metadata-only
torch (tests/fakeenv.py) and the variables for the CLI. ``FakeMachine.check()`` runs the real CLI on it.

Group access: the tests run as root, for whom every device file is open. A spec with ``user`` runs the CLI as
root without the capabilities that bypass file modes (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) and with only
the user's groups (``setpriv``), on device files owned by a stand-in uid (``OWNER_STAND_IN``) and by the
named group: the kernel itself then says whether the file opens, as it would for that user. Without root or
setpriv such a machine cannot be built (``Unbuildable``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from corpus_machine_extras import EXTRA_TARGET_KEYS, check_windows, move_dists, user_site
from fakeenv import add_dist_info, find_python, make_fake_env, site_packages

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "nvidia"))
from fake_smi import write_fake_nvidia_smi  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OWNER_STAND_IN = 65534  # owner of a device file with a group: not the checking process (uid 0)
SPEC_KEYS = {"origin", "assumed", "system", "pci", "kfd_nodes", "dev", "groups", "user", "files", "symlinks",
             "libcuda", "env", "nvidia_smi", "target", "args", "unscored", "windows"}
TARGET_KEYS = {"python", "torch", "cuda", "hip", "torchvision", "tv_cuda", "torchaudio", "requires",
               "installer", "import_behaviour", "build_version", "libtorch_cuda", "deps", "packages",
               *EXTRA_TARGET_KEYS}

# Variables of the test machine that would leak into the fake one.
HOST_VARIABLES = (
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "KUBERNETES_SERVICE_HOST",
    "WSL_DISTRO_NAME",
    "SLURM_JOB_ID",
    "APPTAINER_CONTAINER",
    "SINGULARITY_CONTAINER",
    "container",
    "CUDA_HOME",
    "CUDA_PATH",
    "TORCHDOCTOR_INDEX_URL_BASE",
    "HSA_OVERRIDE_GFX_VERSION",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
)

WSL1_VERSION = ("Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com) (gcc version 5.4.0 (GCC) ) "
                "#1237-Microsoft Sat Sep 11 14:32:00 PST 2021\n")
WSL2_VERSION = ("Linux version 5.15.167.4-microsoft-standard-WSL2 (root@f9c826d3017f) (gcc (GCC) 11.2.0, "
                "GNU ld (GNU Binutils) 2.37) #1 SMP Tue Nov 5 00:21:55 UTC 2024\n")


class Unbuildable(Exception):
    """The spec asks for what this test machine cannot fake (``str()`` says why)."""


# --- pieces of a fake root ----------------------------------------------------------------------------------


def write(root: Path, path: str, text: str = "") -> Path:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def link(root: Path, path: str, to: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(to)


def pci_gpu(root: Path, address: str = "0000:01:00.0") -> None:
    write(root, f"/sys/bus/pci/devices/{address}/vendor", "0x10de\n")
    write(root, f"/sys/bus/pci/devices/{address}/class", "0x030200\n")


def libcuda(root: Path, folder: str, version: str) -> None:
    """``libcuda.so.<version>`` and its ``libcuda.so.1`` link in ``folder``, as the driver and cuda-compat lay
    them."""
    write(root, f"{folder}/libcuda.so.{version}", "\x7fELF fake")
    link(root, f"{folder}/libcuda.so.1", f"libcuda.so.{version}")


def pci_device(root: Path, address: str, vendor: str, pci_class: str, device: str | None = None,
               driver: str | None = None) -> None:
    """One device under /sys/bus/pci/devices; ``driver``: the name its ``driver`` link points to."""
    folder = f"/sys/bus/pci/devices/{address}"
    write(root, f"{folder}/vendor", vendor + "\n")
    write(root, f"{folder}/class", pci_class + "\n")
    if device:
        write(root, f"{folder}/device", device + "\n")
    if driver:
        write(root, f"/sys/bus/pci/drivers/{driver}/.keep")
        link(root, f"{folder}/driver", f"../../../bus/pci/drivers/{driver}")


def kfd_topology(root: Path, gpus: list[dict]) -> None:
    """The KFD topology: node 0 the CPU, then one node per GPU, each dict its ``properties`` (key value)."""
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0/properties").write_text("cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n")
    for i, props in enumerate(gpus, start=1):
        (nodes / str(i)).mkdir()
        (nodes / str(i) / "properties").write_text("".join(f"{k} {v}\n" for k, v in props.items()))


# --- the machine --------------------------------------------------------------------------------------------


@dataclass
class FakeMachine:
    root: Path
    sysroot: Path
    bin_dir: Path
    python: Path
    env: dict[str, str]
    args: list[str] = field(default_factory=list)
    groups: list[int] | None = None  # the checking process's groups when the spec names a user
    windows: dict | None = None  # a Windows machine: its report is composed (corpus_machine_extras.py)

    def argv(self, *extra: str) -> list[str]:
        argv = [sys.executable, "-m", "doctor", "check", "--no-smoke", *self.args, *extra,
                "--python", str(self.python)]
        if self.groups is None:
            return argv
        return [shutil.which("setpriv") or "setpriv", "--groups", ",".join(map(str, self.groups)) or "65534",
                "--bounding-set", "-dac_override,-dac_read_search", "--", *argv]

    def run(self, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(*extra), capture_output=True, text=True, env=self.env,
                              cwd=str(self.root / "work"), timeout=120)

    def check(self, *extra: str) -> tuple[int, dict]:
        """``check --json`` on this machine: (exit code, report)."""
        if self.windows is not None:
            return check_windows(self, self.windows)
        done = self.run(*extra, "--json")
        if not done.stdout.strip() or "Traceback" in done.stderr:
            raise AssertionError(f"no report (rc {done.returncode}): {done.stderr[-1500:]}")
        return done.returncode, json.loads(done.stdout)


def load_spec(path: Path) -> dict:
    spec = json.loads(Path(path).read_text(encoding="utf-8"))
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
    unknown = set(spec.get("target") or {}) - TARGET_KEYS
    if unknown:
        raise ValueError(f"{path}: unknown target keys {sorted(unknown)}")
    return spec


def build(spec: dict, folder: Path) -> FakeMachine:
    """The fake machine ``spec`` describes, under ``folder`` (empty or absent). Raises Unbuildable."""
    system = spec.get("system", "linux")
    if system != "linux" and not (system == "windows" and "windows" in spec):
        raise Unbuildable(f"a {system} machine: the CLI runs on this Linux host")
    folder = Path(folder)
    sysroot, bin_dir = folder / "sysroot", folder / "bin"
    for path in (sysroot / "dev", bin_dir, folder / "work"):
        path.mkdir(parents=True, exist_ok=True)
    gids = dict(spec.get("groups") or {})
    user = spec.get("user")
    if user is not None and (os.geteuid() != 0 or not shutil.which("setpriv")):
        raise Unbuildable("the user's groups are faked by running as root without CAP_DAC_OVERRIDE (setpriv)")
    if gids:
        write(sysroot, "/etc/group", "".join(f"{name}:x:{gid}:\n" for name, gid in gids.items()))
    for device in spec.get("pci") or []:
        pci_device(sysroot, device["address"], device["vendor"], device.get("class", "0x030000"),
                   device.get("device"), device.get("driver"))
    if spec.get("kfd_nodes"):
        kfd_topology(sysroot, spec["kfd_nodes"])
    for path, node in (spec.get("dev") or {}).items():
        target = write(sysroot, path)
        if node.get("mode"):
            os.chmod(target, int(node["mode"], 8))
        if node.get("group") and os.geteuid() == 0:
            os.chown(target, OWNER_STAND_IN if user is not None else 0, _gid(gids, node["group"]))
    for path, text in (spec.get("files") or {}).items():
        write(sysroot, path, text)
    for path, to in (spec.get("symlinks") or {}).items():
        link(sysroot, path, to)
    for copy in spec.get("libcuda") or []:
        libcuda(sysroot, copy["folder"], copy["version"])
    smi = spec.get("nvidia_smi")
    if smi is not None:
        write_fake_nvidia_smi(bin_dir, smi.get("gpus", []), **{k: v for k, v in smi.items() if k != "gpus"})
    python = _target(spec.get("target") or {}, folder / "venv")
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARIABLES}
    env.update(PATH=os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"]), PYTHONPATH=str(REPO),
               TORCHDOCTOR_NVML="0", TORCHDOCTOR_SYSROOT=str(sysroot), NO_COLOR="1", COLUMNS="250",
               LANG="C.UTF-8")
    env.update(spec.get("env") or {})
    target = spec.get("target") or {}
    if target.get("user_site"):
        env.update(user_site(python, folder / "venv", folder / "home", target["user_site"]))
    groups = None if user is None else sorted(_gid(gids, name) for name in user.get("groups", []))
    return FakeMachine(root=folder, sysroot=sysroot, bin_dir=bin_dir, python=python, env=env,
                       args=list(spec.get("args") or []), groups=groups, windows=spec.get("windows"))


def _gid(gids: dict[str, int], group: str | int) -> int:
    """A group named in ``groups``, or a bare number (a gid this machine has no name for)."""
    return group if isinstance(group, int) else gids[group]


def _target(target: dict, venv: Path) -> Path:
    """The fake target interpreter: a venv of the named Python version with the named packages."""
    kwargs = {k: v for k, v in target.items() if k not in ("python", "packages", *EXTRA_TARGET_KEYS)}
    kwargs.setdefault("torch", None)
    kwargs.setdefault("cuda", None)
    version = target.get("python")
    python = find_python(version) if version else sys.executable
    if python is None:
        raise Unbuildable(f"no Python {version} on this machine")
    exe = make_fake_env(venv, python=python, **kwargs)
    for name, version in (target.get("packages") or {}).items():
        add_dist_info(site_packages(venv), name, version)
    if target.get("moved"):
        move_dists(venv, target["moved"])
    return exe
