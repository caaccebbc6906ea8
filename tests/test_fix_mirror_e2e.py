"""`fix --dry-run --index-url-base` through the real CLI: no command anywhere in the output points
at download.pytorch.org, neither the plan's nor the findings' (which, with GPUs that need different
wheels, are the only commands there are).

The machine, as in test_e2e_check.py: a fake target environment (tests/fakeenv.py), a fake
``nvidia-smi`` on PATH (tests/fixtures/nvidia/fake_smi.py), ``TORCHDOCTOR_NVML=0`` and an empty
``TORCHDOCTOR_SYSROOT``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import make_fake_env

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "nvidia"))
from fake_smi import write_fake_nvidia_smi  # noqa: E402

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
DEFAULT = "download.pytorch.org"
MIRROR = "file:///x"
RTX5090 = {"name": "NVIDIA GeForce RTX 5090", "cc": "12.0", "mem_mib": 32607}
P100 = {"name": "Tesla P100-PCIE-16GB", "cc": "6.0", "mem_mib": 16384}


def fix_dry_run(tmp_path, gpus, *args):
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        write_fake_nvidia_smi(bin_dir, gpus, driver="570.124.04", cuda="12.8")
        (tmp_path / "sysroot").mkdir()
        make_fake_env(tmp_path / "venv", torch="2.6.0+cu126", cuda="12.6", torchvision="0.21.0+cu126")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.pop("TORCHDOCTOR_INDEX_URL_BASE", None)
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0",
               TORCHDOCTOR_SYSROOT=str(tmp_path / "sysroot"), NO_COLOR="1")
    python = tmp_path / "venv" / "bin" / "python"
    argv = [sys.executable, "-m", "doctor", "fix", "--dry-run", "--no-smoke", "--python", str(python), *args]
    res = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert res.returncode == 1, res.stdout + res.stderr  # error findings: the dry run's exit code is check's
    return res


@pytest.mark.parametrize("gpus, where", [
    ([RTX5090], "plan"),  # gpu-arch-unsupported: the plan's install command (and the finding's)
    ([P100, RTX5090], "findings"),  # gpus-need-different-wheels: no plan step, commands only in the finding
])
def test_fix_dry_run_with_a_mirror_prints_no_default_index(tmp_path, gpus, where):
    # Without the option the same machine does print the default index: the scenario covers it.
    assert DEFAULT in fix_dry_run(tmp_path, gpus, "-v").stdout

    for args in (["-v"], ["--json"]):
        res = fix_dry_run(tmp_path, gpus, "--index-url-base", MIRROR, *args)
        assert DEFAULT not in res.stdout + res.stderr
        assert f"--index-url {MIRROR}/cu" in res.stdout

    report = json.loads(res.stdout)
    commands = [c for f in report["findings"] for c in (f.get("fix") or {}).get("commands") or []]
    assert any(f"--index-url {MIRROR}/cu" in c for c in commands)
    steps = report["plan"]["steps"]
    assert bool(steps) == (where == "plan")
    assert all(f"{MIRROR}/cu" in s["command"] for s in steps if s["kind"] == "install")
