"""Golden files of what a user sees: the human text of `check` and its `--json` report on three
canonical machines (the README's RTX 5090 with a cu126 build, a healthy CPU machine, a venv without
torch). A careless change to the screen or the report shows up here as a diff to review.

Run with ``TORCHDOCTOR_UPDATE_GOLDEN=1`` to rewrite the files after an intended change, then read
the diff. Variable parts are normalised: the temporary folder becomes ``<TMP>``, timings and dates
become placeholders; everything else is compared byte for byte.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import find_python, make_fake_env

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "nvidia"))
from fake_smi import write_fake_nvidia_smi  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "golden"
UPDATE = bool(os.environ.get("TORCHDOCTOR_UPDATE_GOLDEN"))
# A fixed /proc/meminfo, so the RAM numbers do not depend on the test machine (24 GiB RAM, no swap).
MEMINFO = "MemTotal:       24684092 kB\nMemFree:        24000000 kB\nMemAvailable:   24188892 kB\n" \
          "SwapTotal:             0 kB\nSwapFree:              0 kB\n"
RTX5090 = {"name": "NVIDIA GeForce RTX 5090", "cc": "12.0", "mem_mib": 32607}


def _machine(tmp_path: Path, scenario: str) -> tuple[Path, dict]:
    py = find_python("3.12")
    if py is None:
        pytest.skip("needs a real Python 3.12 interpreter (pyenv 3.12)")
    sysroot = tmp_path / "sysroot"
    (sysroot / "proc").mkdir(parents=True)
    (sysroot / "proc" / "meminfo").write_text(MEMINFO)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if scenario == "rtx5090-cu126":
        python = make_fake_env(tmp_path / "venv", python=py, torch="2.6.0+cu126", cuda="12.6",
                               torchvision="0.21.0+cu126", torchaudio="2.6.0+cu126")
        write_fake_nvidia_smi(bin_dir, [RTX5090], driver="570.124.04", cuda="12.8")
    elif scenario == "cpu-healthy":
        python = make_fake_env(tmp_path / "venv", python=py, torch="2.13.0+cpu", cuda=None)
    elif scenario == "no-torch":
        python = make_fake_env(tmp_path / "venv", python=py, torch=None)
    else:
        raise ValueError(scenario)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0",
               TORCHDOCTOR_SYSROOT=str(sysroot), NO_COLOR="1", COLUMNS="100", LANG="C.UTF-8")
    return python, env


def _normalise(text: str, tmp_path: Path) -> str:
    # paths of this checkout and of the test machine's own Python and home (the target's sys.path shows them)
    py = find_python("3.12")
    text = text.replace(str(tmp_path), "<TMP>").replace(str(REPO), "<REPO>")
    if py:
        text = text.replace(str(Path(py).resolve().parents[1]), "<PY312>")
    text = text.replace(str(Path.home()), "<HOME>")
    text = re.sub(r'"(collected_at|verified_on)": "[^"]*"', r'"\1": "<DATE>"', text)
    text = re.sub(r'"seconds": [0-9.e-]+', '"seconds": "<S>"', text)
    text = re.sub(r'"path": "[^"]*pytorch\.json"', '"path": "<TABLE>"', text)
    return text


def _compare(name: str, actual: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(actual, encoding="utf-8")
        return
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{name} changed; if intended, rerun with TORCHDOCTOR_UPDATE_GOLDEN=1 and review"


SCENARIOS = [("rtx5090-cu126", 1), ("cpu-healthy", 0), ("no-torch", 1)]


@pytest.mark.slow
@pytest.mark.parametrize("scenario,code", SCENARIOS)
def test_check_text_is_golden(tmp_path, scenario, code):
    python, env = _machine(tmp_path, scenario)
    for verbose in (False, True):
        args = [sys.executable, "-m", "doctor", "check", "--no-smoke", "--python", str(python)]
        res = subprocess.run(args + (["-v"] if verbose else []), capture_output=True, text=True, env=env,
                             cwd=tmp_path, timeout=120)
        assert res.returncode == code, res.stderr
        _compare(f"{scenario}{'-v' if verbose else ''}.txt", _normalise(res.stdout, tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("scenario,code", SCENARIOS)
def test_check_json_is_golden(tmp_path, scenario, code):
    python, env = _machine(tmp_path, scenario)
    res = subprocess.run([sys.executable, "-m", "doctor", "check", "--no-smoke", "--json", "--python", str(python)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert res.returncode == code, res.stderr
    report = json.loads(res.stdout)
    # Host facts of the test machine itself (kernel release, container marker) are not the scenario's.
    report["snapshot"]["host"] = {"os": report["snapshot"]["host"]["os"]}
    text = json.dumps(report, indent=2, sort_keys=True) + "\n"
    _compare(f"{scenario}.json", _normalise(text, tmp_path))


# The README's other scenarios: re-diagnosing a pasted collect_env, a CI preflight that is not met, the
# output of an interpreter that does not start, -q, and the ASCII stand-ins of a cp1252 stdout.
COLLECT_ENV = Path(__file__).parent / "fixtures" / "collect_env" / "composed-2.5.1-cu121-rtx4090-pip.txt"
BROKEN_PYTHON = ("#!/bin/sh\necho 'Fatal Python error: init_fs_encoding: failed to get the Python codec of the "
                 "filesystem encoding' >&2\necho \"ModuleNotFoundError: No module named 'encodings'\" >&2\nexit 1\n")
README_SCENARIOS = [
    # (golden file, machine, arguments after `check`, expected exit code, extra environment)
    ("collect-env-rtx4090.txt", "no-torch", ["--from", str(COLLECT_ENV)], 0, {}),
    ("ci-require-cuda.txt", "cpu-healthy", ["--no-smoke", "--require", "cuda", "--min-gpus", "1", "--python",
                                            "{python}"], 4, {}),
    ("broken-venv.txt", "broken-venv", ["--no-smoke"], 1, {}),
    ("rtx5090-cu126-q.txt", "rtx5090-cu126", ["--no-smoke", "-q", "--python", "{python}"], 1, {}),
    ("rtx5090-cu126-cp1252.txt", "rtx5090-cu126", ["--no-smoke", "--python", "{python}"], 1,
     {"PYTHONIOENCODING": "cp1252"}),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,scenario,args,code,extra", README_SCENARIOS, ids=[s[0] for s in README_SCENARIOS])
def test_readme_scenarios_are_golden(tmp_path, name, scenario, args, code, extra):
    if scenario == "broken-venv":
        python, env = _machine(tmp_path, "no-torch")
        broken = tmp_path / "broken" / "bin" / "python"
        broken.parent.mkdir(parents=True)
        broken.write_text(BROKEN_PYTHON)
        broken.chmod(0o755)
        env["VIRTUAL_ENV"] = str(broken.parent.parent)
    else:
        python, env = _machine(tmp_path, scenario)
    env.update(extra)
    argv = [sys.executable, "-m", "doctor", "check", *(a.replace("{python}", str(python)) for a in args)]
    res = subprocess.run(argv, capture_output=True, env=env, cwd=tmp_path, timeout=120)
    encoding = extra.get("PYTHONIOENCODING", "utf-8")
    assert res.returncode == code, res.stderr.decode(encoding)
    _compare(name, _normalise(res.stdout.decode(encoding), tmp_path))
