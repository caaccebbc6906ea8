"""Golden files of what a user sees: the human text of `check` and its `--json` report on four canonical
machines (the broken one: the README's RTX 5090 with a cu126 build; the healthy one: a CPU torch on a machine
without a GPU; the unknown one: the same torch where the NVIDIA driver and the PCI bus cannot be read; and a
venv without torch), and the same machines in `-q`, Markdown, JUnit and the fleet view, which must tell one
story: the same verdict, ids and words, errors first. A careless change to the screen or the report shows up
here as a diff to review.

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
    elif scenario == "cpu-healthy":  # nothing answers for the NVIDIA driver and the PCI bus cannot be read
        python = make_fake_env(tmp_path / "venv", python=py, torch="2.13.0+cpu", cuda=None)
    elif scenario == "cpu-no-gpu":  # the same CPU torch on a machine whose PCI bus shows no NVIDIA device
        python = make_fake_env(tmp_path / "venv", python=py, torch="2.13.0+cpu", cuda=None)
        (sysroot / "sys" / "bus" / "pci" / "devices").mkdir(parents=True)
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
    assert actual == expected, (
        f"{name} changed; if intended, rerun with TORCHDOCTOR_UPDATE_GOLDEN=1 and review"
    )


SCENARIOS = [("rtx5090-cu126", 1), ("cpu-healthy", 0), ("no-torch", 1), ("cpu-no-gpu", 0)]


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
    res = subprocess.run(
        [sys.executable, "-m", "doctor", "check", "--no-smoke", "--json", "--python", str(python)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert res.returncode == code, res.stderr
    report = json.loads(res.stdout)
    # Host facts of the test machine itself (kernel release, container marker) are not the scenario's.
    report["snapshot"]["host"] = {"os": report["snapshot"]["host"]["os"]}
    # This checkout is on the target's sys.path (PYTHONPATH above): the egg-info an editable install of
    # torchdoctor leaves in it is the test machine's, not the scenario's.
    facts = report["snapshot"]["environment"].get("python") or {}
    if facts.get("installed"):
        facts["installed"] = [row for row in facts["installed"] if row[2] != str(REPO)]
    text = json.dumps(report, indent=2, sort_keys=True) + "\n"
    _compare(f"{scenario}.json", _normalise(text, tmp_path))


# The README's other scenarios: re-diagnosing a pasted collect_env, a CI preflight that is not met, the
# output of an interpreter that does not start, -q, and the ASCII stand-ins of a cp1252 stdout.
COLLECT_ENV = Path(__file__).parent / "fixtures" / "collect_env" / "composed-2.5.1-cu121-rtx4090-pip.txt"
BROKEN_PYTHON = ("#!/bin/sh\necho 'Fatal Python error: init_fs_encoding: failed to get the Python codec of "
    "the "
                 "filesystem encoding' >&2\necho \"ModuleNotFoundError: No module named 'encodings'\" "
                 ">&2\nexit 1\n")
README_SCENARIOS = [
    # (golden file, machine, arguments after `check`, expected exit code, extra environment)
    ("collect-env-rtx4090.txt", "no-torch", ["--from", str(COLLECT_ENV)], 0, {}),
    ("ci-require-cuda.txt", "cpu-healthy", ["--no-smoke", "--require", "cuda", "--min-gpus", "1", "--python",
                                            "{python}"], 4, {}),
    ("broken-venv.txt", "broken-venv", ["--no-smoke"], 1, {}),
    ("rtx5090-cu126-cp1252.txt", "rtx5090-cu126", ["--no-smoke", "--python", "{python}"], 1,
     {"PYTHONIOENCODING": "cp1252"}),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,scenario,args,code,extra", README_SCENARIOS, ids=[s[0] for s in README_SCENARIOS]
)
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


# --- one story in every format ------------------------------------------------------------------------------

# The formats of `check` held as golden files next to the text and JSON ones (the Markdown without its folded
# JSON, which the JSON golden holds): file suffix, arguments.
FORMATS = [("-q.txt", ["-q"]), (".md", ["--format", "markdown"]), (".junit.xml", ["--format", "junit"])]
SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}


def _check(tmp_path: Path, env: dict, python: Path, *args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "doctor", "check", "--no-smoke", "--python", str(python), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def _without_json(markdown: str) -> str:
    return re.sub(r"<details><summary>Full report "
        r"\(JSON\)</summary>.*?</details>\n", "", markdown, flags=re.S)


def _positions(text: str, words: list[str]) -> list[int]:
    return [text.index(w) for w in words]


@pytest.mark.slow
@pytest.mark.parametrize("scenario,code", SCENARIOS)
def test_every_format_is_golden_and_tells_the_same_story(tmp_path, scenario, code):
    python, env = _machine(tmp_path, scenario)
    out = {}
    for suffix, args in [("", []), ("-v.txt", ["-v"]), *FORMATS, (".json", ["--json"])]:
        res = _check(tmp_path, env, python, *args)
        assert res.returncode == code, (suffix, res.stderr)
        out[suffix] = _normalise(res.stdout, tmp_path)
    for suffix, _ in FORMATS:
        _compare(scenario + suffix, _without_json(out[suffix]) if suffix == ".md" else out[suffix])

    report = json.loads(out[".json"])
    text, verbose, quiet, markdown, junit = (
        out[""],
        out["-v.txt"],
        out["-q.txt"],
        out[".md"],
        out[".junit.xml"],
    )
    findings = report["findings"]
    ids = [f["id"] for f in findings]
    # the same findings everywhere, errors first, then warnings, then notes
    ranked = [f["id"] for f in sorted(findings, key=lambda f: SEVERITY_RANK[f["severity"]])]
    for view in (text, verbose, markdown):
        assert all(f"{i}" in view for i in ids)
        assert _positions(view, ranked) == sorted(_positions(view, ranked)), "errors first"
    assert all(i in junit for i in ids)
    # the verdict in the same words
    from doctor.render.verdict import headline

    assert headline(report) in text and headline(report) in markdown.splitlines()[0]
    # the unknown checks come after the errors and warnings, and only -v lists the checks that passed
    serious = [f["id"] for f in findings if f["severity"] in ("error", "warning")]
    unknown = [c["summary"] for c in report["checks"] if c["status"] == "unknown"]
    if serious and unknown:
        assert max(_positions(text, serious)) < min(text.index("? " + u) for u in unknown)
    passed = [c["summary"] for c in report["checks"] if c["status"] == "passed"]
    assert all("✓ " + p in verbose for p in passed) and not any("✓ " + p in text for p in passed)
    # -q: nothing on a healthy machine; the errors and the fix on a broken one
    if code == 0 and not serious:
        assert quiet == ""
    else:
        assert all(i in quiet for i in serious) and "Fix" in quiet
    # the machine in the same words: no GPU is no GPU, a missing torch is not installed, never "unknown"
    snap = report["snapshot"]
    if snap["nvidia"]["status"] == "no-gpu":
        for view in (text, markdown, junit):
            assert "no GPU" in view
    if snap["install"]["status"] == "absent":
        for view in (text, markdown, junit):
            assert "not installed" in view
    # no Fix block where the text says there is nothing to change; no "?" placeholders, no table bookkeeping
    if "Fix: nothing to change." in text:
        assert "**Fix**" not in markdown
    for view in (text, quiet, markdown):
        assert " ? " not in view.replace("  ? ", "") and "unverified table rows" not in view


@pytest.mark.slow
def test_the_fleet_view_is_golden_and_uses_the_same_words(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    for scenario, _ in SCENARIOS:
        (tmp_path / scenario).mkdir()
        python, env = _machine(tmp_path / scenario, scenario)
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "doctor",
                "report",
                "--no-smoke",
                "--python",
                str(python),
                "-o",
                str(reports / f"{scenario}.json"),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        assert res.returncode == 0, res.stderr
    views = {}
    for suffix, args in (("txt", []), ("md", ["--format", "markdown"])):
        res = subprocess.run([sys.executable, "-m", "doctor", "fleet", "summarize", str(reports), *args],
                             capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        assert res.returncode == 1, res.stderr
        views[suffix] = _normalise(res.stdout, tmp_path)
        _compare(f"fleet.{suffix}", views[suffix])
    data = json.loads(
        subprocess.run(
            [sys.executable, "-m", "doctor", "fleet", "summarize", str(reports), "--json"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        ).stdout
    )
    assert data["counts"]["driver"] == {"(unknown)": 2, "570.124.04": 1, "no GPU": 1}
    assert "not installed" in data["counts"]["torch_build"]
    for view in views.values():
        assert "no GPU" in view and "not installed" in view
