"""End to end: the real CLI in a subprocess, against a fake machine built from real parts.

The fake machine: a real venv of a real interpreter whose site-packages holds a metadata-only torch
(tests/fakeenv.py), and a fake ``nvidia-smi`` on PATH (tests/fixtures/nvidia/fake_smi.py).
``TORCHDOCTOR_NVML=0`` keeps a real GPU of the test machine out of it, ``TORCHDOCTOR_SYSROOT``
points /sys and /proc reads at an empty folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import IMPORT_MUST_NOT_HAPPEN, find_python, make_fake_env

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "nvidia"))
from fake_smi import write_fake_nvidia_smi  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RTX5090 = {"name": "NVIDIA GeForce RTX 5090", "cc": "12.0", "mem_mib": 32607}


def run_cli(args, env_extra=None, bin_dir=None, cwd=None, timeout=120):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env["PATH"] = (f"{bin_dir}{os.pathsep}" if bin_dir else "") + env.get("PATH", "")
    env["PYTHONPATH"] = str(REPO)
    env["TORCHDOCTOR_NVML"] = "0"
    env.setdefault("NO_COLOR", "1")
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)


@pytest.fixture
def sysroot(tmp_path):
    root = tmp_path / "sysroot"
    root.mkdir()
    return {"TORCHDOCTOR_SYSROOT": str(root)}


@pytest.fixture
def py312():
    python = find_python("3.12")
    if python is None:
        pytest.skip("needs a real Python 3.12 interpreter (pyenv 3.12)")
    return python


@pytest.fixture
def rtx5090_machine(tmp_path, py312, sysroot):
    """RTX 5090, driver 570.124.04 / CUDA 12.8, torch 2.6.0+cu126 (+ torchvision 0.21.0) on Python 3.12."""
    python = make_fake_env(tmp_path / "venv", python=py312, torch="2.6.0+cu126", cuda="12.6",
                           torchvision="0.21.0+cu126", torchaudio="2.6.0+cu126")
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [RTX5090], driver="570.124.04", cuda="12.8")
    return python, bin_dir, sysroot


@pytest.mark.slow
def test_rtx5090_on_cu126_check_reports_arch_and_exits_1(rtx5090_machine):
    python, bin_dir, sysroot = rtx5090_machine
    res = run_cli(["check", "--no-smoke", "--json", "--python", str(python)], sysroot, bin_dir)
    assert res.returncode == 1, res.stderr
    report = json.loads(res.stdout)  # --json prints only JSON on stdout
    ids = {f["id"] for f in report["findings"]}
    assert "gpu-arch-unsupported" in ids
    arch = next(f for f in report["findings"] if f["id"] == "gpu-arch-unsupported")
    assert arch["evidence"]["compute_capability"] == "12.0"
    assert "sm_120" not in arch["evidence"]["arch_list"]
    snap = report["snapshot"]
    assert snap["nvidia"]["driver_version"]["value"] == "570.124.04"
    assert snap["nvidia"]["cuda_driver_version"]["value"] == "12.8"
    assert snap["interpreter"]["reason"] == "--python"
    assert snap["install"]["torch"]["version"] == "2.6.0+cu126"
    assert snap["runtime"]["status"] == "skipped"
    assert report["report_schema_version"] == 1 and report["table"]["version"]
    assert report["summary"]["exit_code"] == 1


@pytest.mark.slow
def test_rtx5090_fix_dry_run_prints_a_cu128_command_with_sm120_kernels(rtx5090_machine):
    python, bin_dir, sysroot = rtx5090_machine
    res = run_cli(["fix", "--dry-run", "--no-smoke", "--python", str(python)], sysroot, bin_dir)
    expected = (f'{python} -m pip install "torch==2.7.1+cu128" "torchvision==0.22.1+cu128" '
                f'"torchaudio==2.7.1+cu128" --index-url https://download.pytorch.org/whl/cu128')
    assert expected in res.stdout, res.stdout
    assert "nothing was changed" in res.stdout
    assert res.returncode == 1
    assert "Traceback" not in res.stdout + res.stderr


@pytest.mark.slow
def test_no_smoke_never_imports_torch(rtx5090_machine):
    # The stand-in torch raises on import: with --no-smoke the result must not change.
    python, bin_dir, sysroot = rtx5090_machine
    res = run_cli(["check", "--no-smoke", "--json", "--python", str(python)], sysroot, bin_dir)
    assert IMPORT_MUST_NOT_HAPPEN not in res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["snapshot"]["runtime"]["status"] == "skipped"
    assert "torch-import-error" not in {f["id"] for f in report["findings"]}


@pytest.mark.slow
def test_kmd_banner_and_old_driver_without_compute_cap(tmp_path, py312, sysroot):
    # R610+ banner labels; an nvidia-smi that rejects compute_cap: the capability comes from the table.
    python = make_fake_env(tmp_path / "venv", python=py312, torch="2.14.1", cuda="13.0")
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [{"name": "NVIDIA H100 80GB HBM3", "cc": "9.0"}], driver="610.43.02",
                          cuda="13.3", banner="kmd", mode="no-compute-cap")
    res = run_cli(["check", "--no-smoke", "--json", "--python", str(python)], sysroot, bin_dir)
    report = json.loads(res.stdout)
    gpu = report["snapshot"]["nvidia"]["gpus"][0]
    assert gpu["compute_capability"]["value"] == "9.0"
    assert gpu["compute_capability"]["source"].startswith("table")
    assert report["snapshot"]["nvidia"]["driver_version"]["value"] == "610.43.02"
    assert res.returncode == 0, report["findings"]


@pytest.mark.slow
@pytest.mark.parametrize("mode,finding", [
    ("mismatch", "driver-library-mismatch"),
    ("unknown-error", "container-lost-gpu-access"),
])
def test_driver_failure_texts_become_findings(tmp_path, py312, sysroot, mode, finding):
    python = make_fake_env(tmp_path / "venv", python=py312, torch="2.7.1+cu128", cuda="12.8")
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [RTX5090], mode=mode)
    res = run_cli(["check", "--no-smoke", "--json", "--python", str(python)], sysroot, bin_dir)
    assert res.returncode == 1
    assert finding in {f["id"] for f in json.loads(res.stdout)["findings"]}


@pytest.mark.slow
def test_nvidia_smi_that_hangs_does_not_hang_the_check(tmp_path, py312, sysroot):
    python = make_fake_env(tmp_path / "venv", python=py312, torch=None, cuda=None)
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [RTX5090], mode="hang")
    res = run_cli(["check", "--no-smoke", "--json", "--python", str(python)],
                  sysroot | {"TORCHDOCTOR_NVIDIA_TIMEOUT": "2"}, bin_dir, timeout=60)
    report = json.loads(res.stdout)
    assert report["snapshot"]["nvidia"]["status"] == "unknown"
    assert "within 2s" in report["snapshot"]["nvidia"]["detail"]
    assert "torch-not-installed" in {f["id"] for f in report["findings"]}


def test_broken_table_gives_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "table.json"
    bad.write_text('{"schema_version": 1, "table_version": "x"', encoding="utf-8")
    res = run_cli(["check", "--no-smoke", "--table", str(bad)])
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0], res.stderr
    assert "Traceback" not in res.stderr


def test_a_broken_table_ends_a_run_whose_smoke_test_hangs_at_once(tmp_path):
    """The table is parsed while the target interpreter's children run (doctor/app/run.py): a broken one is
    still exit 2 with its one line, at once, and the hung smoke test is ended, not waited for (--smoke-timeout
    60)."""
    import time

    import psutil

    python = make_fake_env(tmp_path / "venv", torch="2.6.0+cu126", cuda="12.6", import_behaviour="hang")
    bad = tmp_path / "table.json"
    bad.write_text('{"schema_version": 1, "table_version": "x"', encoding="utf-8")
    marker = f"broken-table-{os.getpid()}"
    started = time.monotonic()
    res = run_cli(["check", "--table", str(bad), "--python", str(python), "--smoke-timeout", "60"],
                  env_extra={"TORCHDOCTOR_TEST_MARK": marker})
    took = time.monotonic() - started
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0], res.stderr
    assert took < 20, took
    time.sleep(1.0)
    left = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid != os.getpid() and proc.environ().get("TORCHDOCTOR_TEST_MARK") == marker:
                left.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    assert left == []  # the smoke test's child (its import sleeps forever) was ended


def test_usage_error_exit_2():
    res = run_cli(["check", "--no-such-option"])
    assert res.returncode == 2
    assert "Traceback" not in res.stderr


def test_version_and_help():
    res = run_cli(["--version"])
    assert res.returncode == 0 and res.stdout.startswith("torchdoctor ")
    res = run_cli(["--help"])
    assert res.returncode == 0
    assert "Exit codes" in res.stdout and "check" in res.stdout


@pytest.mark.slow
def test_real_cpu_torch_check_runs_the_import_probe_and_reports_the_cpu_build(tmp_path_factory, sysroot):
    from realtorch import real_cpu_torch_python

    python = real_cpu_torch_python(tmp_path_factory)
    res = run_cli(["check", "--json", "--python", str(python)], sysroot)
    report = json.loads(res.stdout)
    rt = report["snapshot"]["runtime"]
    assert rt["status"] == "ok", rt
    assert rt["torch_version"] == "2.13.0+cpu" and rt["cuda_available"] is False
    assert report["snapshot"]["install"]["torch"]["cuda"] is None
    assert res.returncode == 0, report["findings"]
    assert "Traceback" not in res.stderr
    # and the human output says so too
    res = run_cli(["check", "--python", str(python)], sysroot)
    assert "2.13.0+cpu" in res.stdout and res.returncode == 0


def test_python_that_does_not_exist_is_a_usage_error():
    res = run_cli(["check", "--no-smoke", "--python", "/nonexistent/bin/python"])
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == ["torchdoctor: error: --python /nonexistent/bin/python: not "
        "found"]


@pytest.mark.slow
def test_torch_that_segfaults_on_import_is_a_finding_not_a_crash(tmp_path, sysroot):
    python = make_fake_env(tmp_path / "venv", torch="2.7.1+cu128", cuda="12.8", import_behaviour="segfault")
    res = run_cli(["check", "--json", "--python", str(python)], sysroot)
    report = json.loads(res.stdout)
    crashed = next(f for f in report["findings"] if f["id"] == "torch-crashed")
    assert crashed["evidence"]["signal"] == 11
    assert any("faulthandler" in c for c in crashed["fix"]["commands"])
    assert res.returncode == 1 and "Traceback" not in res.stderr


@pytest.mark.slow
def test_ctrl_c_ends_the_check_at_once_with_130(tmp_path):
    import signal
    import time

    slow = tmp_path / "python"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0", TORCHDOCTOR_SYSROOT=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "doctor", "check", "--python", str(slow)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    start = time.monotonic()
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - start < 5  # the children (30 s sleepers) were ended, not waited for
    assert proc.returncode == 130
    assert err.strip().splitlines()[-1] == "torchdoctor: interrupted" and "Traceback" not in err
