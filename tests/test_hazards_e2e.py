"""Hazards end to end, with the real mechanisms: a real CUDA_VISIBLE_DEVICES in the child's environment,
a real folder of CUDA-named .so files on LD_LIBRARY_PATH, a real conda-meta folder in a throw-away
prefix, a real 64 MiB tmpfs on /dev/shm in a private mount namespace and a real cgroup CPU quota.

Each test runs the real CLI (``python -m doctor check --no-smoke --json --python <fake env>``) in a
subprocess, and also ``probe_environment`` + the rule directly on the same mechanism, so a failure
points at the probe or at the CLI wiring. The target is a fake venv (tests/fakeenv.py) with a
metadata-only CUDA torch: torch is never imported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import add_dist_info, make_fake_env, site_packages

from doctor.compat.assessment import assess
from doctor.model.snapshot import Host, Snapshot
from doctor.probes.environment import probe_environment
from doctor.rules.hazards import devices, installs, libraries

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]


def cli_check(python: Path, env_changes: dict[str, str | None], wrapper: list[str] | None = None) -> dict:
    """Run the real CLI in a child with the given environment changes; return its JSON report."""
    env = dict(os.environ)
    for key in (
        "CUDA_VISIBLE_DEVICES",
        "LD_LIBRARY_PATH",
        "NVIDIA_VISIBLE_DEVICES",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
    ):
        env.pop(key, None)
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    argv = [sys.executable, "-m", "doctor", "check", "--no-smoke", "--json", "--python", str(python)]
    proc = subprocess.run(
        (wrapper or []) + argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=120
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return json.loads(proc.stdout)


def finding(report: dict, fid: str) -> dict:
    found = [f for f in report["findings"] if f["id"] == fid]
    assert found, [f["id"] for f in report["findings"]]
    return found[0]


def snapshot_for(python: Path, env: dict[str, str]) -> Snapshot:
    """The direct path: a snapshot with the fake env's torch and the real probe's facts."""
    from doctor.probes.interpreter import inspect_interpreter_full

    interpreter, install, python_facts = inspect_interpreter_full(str(python), "test")
    snap = Snapshot(host=Host(os="linux", machine="x86_64"), interpreter=interpreter, install=install)
    snap.environment = probe_environment(env=env, host=snap.host)
    snap.environment.python = python_facts
    return snap


@pytest.fixture
def cuda_env(tmp_path) -> Path:
    return make_fake_env(tmp_path / "venv", torch="2.6.0+cu126", cuda="12.6")


# --- CUDA_VISIBLE_DEVICES -----------------------------------------------------------------------


@pytest.mark.parametrize(("value", "fid"), [("", "cuda-visible-devices-hides-all"),
                                            ("-1", "cuda-visible-devices-hides-all"),
                                            ("0,0", "cuda-visible-devices-duplicate")])  # fmt: skip
def test_cuda_visible_devices(cuda_env, value, fid):
    report = cli_check(cuda_env, {"CUDA_VISIBLE_DEVICES": value})
    found = finding(report, fid)
    assert found["evidence"]["CUDA_VISIBLE_DEVICES"] == value
    assert report["snapshot"]["environment"]["visible_devices"]["CUDA_VISIBLE_DEVICES"] == value
    snap = snapshot_for(cuda_env, {"CUDA_VISIBLE_DEVICES": value})
    assert fid in [f.id for f in devices.check_visible_devices(assess(snap, None))]


def test_cuda_visible_devices_unset_is_quiet(cuda_env):
    report = cli_check(cuda_env, {})
    assert not [f for f in report["findings"] if f["id"].startswith("cuda-visible-devices")]


# --- LD_LIBRARY_PATH ----------------------------------------------------------------------------


def test_system_nvjitlink_on_ld_library_path(tmp_path, cuda_env):
    add_dist_info(site_packages(tmp_path / "venv"), "nvidia-nvjitlink-cu12", "12.6.85")
    system = tmp_path / "cuda-12.4" / "lib64"
    system.mkdir(parents=True)
    (system / "libnvJitLink.so.12.4.127").write_bytes(b"\x7fELF fake")
    (system / "libnvJitLink.so.12").symlink_to("libnvJitLink.so.12.4.127")
    other = tmp_path / "other-lib"
    other.mkdir()
    value = f"{system}:{other}"

    report = cli_check(cuda_env, {"LD_LIBRARY_PATH": value})
    found = finding(report, "library-path-shadows-cuda-libs")
    assert found["fix"]["commands"] == [f"export LD_LIBRARY_PATH={other}"]
    assert {o["file"] for o in found["evidence"]["offending"]} == {
        "libnvJitLink.so.12",
        "libnvJitLink.so.12.4.127",
    }
    assert "__nvJitLinkComplete_12_6" in found["detail"]

    snap = snapshot_for(cuda_env, {"LD_LIBRARY_PATH": value})
    found = libraries.check_library_shadowing(assess(snap, None))
    direct = [f for f in found if f.id == "library-path-shadows-cuda-libs"]
    assert len(direct) == 1
    assert direct[0].evidence["offending"][0]["wheel_source"] == "nvidia-nvjitlink-cu12 12.6.85"


def test_matching_libraries_on_ld_library_path_are_fine(tmp_path, cuda_env):
    add_dist_info(site_packages(tmp_path / "venv"), "nvidia-nvjitlink-cu12", "12.6.85")
    same = tmp_path / "cuda-12.6" / "lib64"
    same.mkdir(parents=True)
    (same / "libnvJitLink.so.12.6.77").write_bytes(b"")
    report = cli_check(cuda_env, {"LD_LIBRARY_PATH": str(same)})
    assert "library-path-shadows-cuda-libs" not in [f["id"] for f in report["findings"]]


# --- conda-meta in a throw-away prefix ----------------------------------------------------------


def test_pip_torch_over_conda_pytorch(tmp_path, cuda_env):
    prefix = tmp_path / "venv"
    meta = prefix / "conda-meta"
    meta.mkdir()
    for name, version, build in (("pytorch", "2.5.1", "py3.11_cuda12.1_cudnn9.1.0_0"),
                                 ("pytorch-cuda", "12.1", "ha16c6d3_6")):  # fmt: skip
        record = {"build": build, "channel": "https://conda.anaconda.org/pytorch/linux-64", "name": name,
                  "version": version}  # fmt: skip
        (meta / f"{name}-{version}-{build}.json").write_text(json.dumps(record, sort_keys=True))
    (meta / "history").write_text("")

    report = cli_check(cuda_env, {})
    mixed = finding(report, "mixed-conda-pip-torch")
    python = report["snapshot"]["interpreter"]["path"]
    assert mixed["fix"]["commands"] == [
        f"conda remove -p {prefix} pytorch pytorch-cuda",
        f"{python} -m pip uninstall -y torch torchvision torchaudio",
        # the plan's exact builds (here the installed torch 2.6.0+cu126, the only one of the three)
        f'{python} -m pip install "torch==2.6.0+cu126" --index-url https://download.pytorch.org/whl/cu126',
    ]
    mismatch = finding(report, "conda-cuda-mismatch")
    assert mismatch["fix"]["commands"] == [f"conda remove -p {prefix} pytorch-cuda"]

    snap = snapshot_for(cuda_env, {})
    assert {f.id for f in installs.check_mixed_installs(assess(snap, None))} == {
        "mixed-conda-pip-torch",
        "conda-cuda-mismatch",
    }


def test_second_torch_on_pythonpath(tmp_path, cuda_env):
    extra = tmp_path / "extra"
    add_dist_info(
        extra, "torch", "2.4.0", files={"torch/__init__.py": "raise RuntimeError('not imported')\n"}
    )
    report = cli_check(cuda_env, {"PYTHONPATH": str(extra)})
    # the copy on PYTHONPATH is the one imported: the remedy is the variable, never an uninstall (issue 29)
    found = finding(report, "pythonpath-torch-shadows")
    assert len(found["evidence"]["dists"]) == 2
    assert found["fix"]["commands"] == ["unset PYTHONPATH"]


# --- a real small /dev/shm (private mount namespace) ----------------------------------------------


def _can_unshare() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root to mount a tmpfs in a private mount namespace"
    if not shutil.which("unshare"):
        return "unshare(1) is not installed"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"unshare -m is not permitted here: {probe.stderr.decode(errors='replace').strip()}"
    return None


@pytest.mark.skipif(_can_unshare() is not None, reason=str(_can_unshare()))
def test_small_shm_in_private_mount_namespace(cuda_env):
    wrapper = ["unshare", "-m", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$@"', "sh"]  # fmt: skip
    report = cli_check(cuda_env, {}, wrapper=wrapper)
    found = finding(report, "shm-too-small")
    assert found["evidence"]["shm.total_bytes"] == 64 * 1024**2
    container = report["snapshot"]["environment"]["container"]["kind"]
    assert found["severity"] == ("warning" if container else "info")
    if container:
        assert any("--shm-size=8g" in c for c in found["fix"]["commands"])
    # The host's own /dev/shm, outside the namespace, is untouched.
    assert os.statvfs("/dev/shm").f_blocks * os.statvfs("/dev/shm").f_frsize != 64 * 1024**2


# --- a real cgroup CPU quota --------------------------------------------------------------------


def _cpu_cgroup() -> Path | None:
    for base in (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpu,cpuacct")):
        if (base / "cpu.cfs_quota_us").exists() and os.access(base, os.W_OK):
            return base
    return None


@pytest.mark.skipif(
    _cpu_cgroup() is None, reason="needs a writable cgroup v1 cpu controller (root, no cgroupns)"
)
def test_real_cfs_quota(cuda_env):
    base = _cpu_cgroup()
    group = base / f"torchdoctor-e2e-{os.getpid()}"
    group.mkdir()
    try:
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text("40000")  # 0.4 CPU: below half of any machine
        wrapper = ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh"]
        report = cli_check(cuda_env, {}, wrapper=wrapper)
    finally:
        group.rmdir()
    found = finding(report, "cpu-quota-low")
    assert found["evidence"]["quota_cpus"] == 0.4
    assert found["evidence"]["budget"] == 1 and found["evidence"]["recommended_num_workers"] == 0
    assert found["fix"]["commands"] == ["export OMP_NUM_THREADS=1"]
