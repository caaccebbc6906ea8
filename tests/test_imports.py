"""Start-up stays cheap and the layers stay apart: checked through sys.modules in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def modules_after(code: str, env_extra=None) -> set[str]:
    script = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)), file=sys.__stderr__)\n"
    env = dict(os.environ, PYTHONPATH=str(REPO), **(env_extra or {}))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    return set(json.loads(res.stderr.strip().splitlines()[-1]))


def test_rules_plan_and_diagnosis_are_pure():
    mods = modules_after("import doctor.rules, doctor.app.diagnose, doctor.plan.plan, doctor.table.load\n"
                         "doctor.rules.all_rules()")
    assert not {"subprocess", "pynvml", "psutil", "torch", "rich", "typer"} & mods


def test_help_imports_nothing_heavy():
    mods = modules_after("import contextlib, io\nfrom doctor.cli import main\n"
                         "with contextlib.redirect_stdout(io.StringIO()):\n    main(['--help'])")
    assert not {"torch", "pynvml", "psutil", "rich", "doctor.table.load", "doctor.probes.nvidia"} & mods


def test_check_no_smoke_never_imports_torch(tmp_path):
    mods = modules_after(
        "import contextlib, io\nfrom doctor.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    main(['check', '--no-smoke', '--json'])",
        {"TORCHDOCTOR_NVML": "0", "TORCHDOCTOR_SYSROOT": str(tmp_path)},
    )
    assert "torch" not in mods
    assert "rich" not in mods  # --json needs no rich
