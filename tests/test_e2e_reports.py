"""End to end for reports and CI preflight: round trips, --from, redaction, formats, requirements."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from fakeenv import find_python, make_fake_env
from test_e2e_check import RTX5090, run_cli, write_fake_nvidia_smi

from doctor.inputs.reports import validate_report

COLLECT_ENV = Path(__file__).parent / "fixtures" / "collect_env"


@pytest.fixture
def fake_machine(tmp_path):
    py = find_python("3.12")
    if py is None:
        pytest.skip("needs a real Python 3.12 interpreter (pyenv 3.12)")
    python = make_fake_env(tmp_path / "venv", python=py, torch="2.6.0+cu126", cuda="12.6",
                           torchvision="0.21.0+cu126")
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [RTX5090])
    sysroot = tmp_path / "sysroot"
    sysroot.mkdir()
    return python, bin_dir, {"TORCHDOCTOR_SYSROOT": str(sysroot)}


def _ids(report):
    return sorted(f["id"] for f in report["findings"])


@pytest.mark.slow
def test_round_trip_check_json_then_from_on_a_machine_with_nothing_of_it(fake_machine, tmp_path):
    python, bin_dir, env = fake_machine
    res = run_cli(["check", "--no-smoke", "--json", "--python", str(python)], env, bin_dir)
    original = json.loads(res.stdout)
    assert validate_report(original) == []
    saved = tmp_path / "report.json"
    saved.write_text(res.stdout, encoding="utf-8")
    # Re-diagnose elsewhere: no fake nvidia-smi on PATH, the venv gone.
    import shutil

    shutil.rmtree(python.parent.parent)
    again = run_cli(["check", "--from", str(saved), "--json"], env)
    report = json.loads(again.stdout)
    assert validate_report(report) == []
    assert _ids(report) == _ids(original) and "gpu-arch-unsupported" in _ids(report)
    assert report["plan"]["steps"] == original["plan"]["steps"]
    assert report["snapshot"]["origin"] == "report"
    assert again.returncode == res.returncode == 1


@pytest.mark.parametrize("name,expected,fix", [
    ("composed-2.6.0-cu126-rtx5090d-issue150733.txt", "gpu-arch-unsupported", "+cu128"),
    ("composed-2.5.1-cu121-rtx4090-pip.txt", None, None),
])
def test_from_collect_env_output_diagnoses_it(name, expected, fix):
    res = run_cli(["check", "--from", str(COLLECT_ENV / name), "--json"])
    report = json.loads(res.stdout)
    assert report["snapshot"]["origin"] == "collect_env"
    if expected:
        assert expected in _ids(report)
        assert any(fix in (s.get("command") or "") for s in report["plan"]["steps"])
        assert res.returncode == 1
    else:
        assert [f for f in report["findings"] if f["severity"] == "error"] == []
        assert res.returncode == 0


@pytest.mark.slow
def test_from_real_collect_env_of_the_cpu_torch():
    res = run_cli(["check", "--from", str(COLLECT_ENV / "torch-2.13.0-cpu-linux-real.txt"), "--json"])
    report = json.loads(res.stdout)
    assert report["snapshot"]["install"]["torch"]["version"].startswith("2.13.0")
    assert res.returncode == 0, _ids(report)


@pytest.mark.parametrize("content,needle", [
    ('{"report_schema_version": 1, "snapshot": {', "truncated"),
    ('{"report_schema_version": 99, "snapshot": {}}', "99"),
    ("hello, this is not a report\n", None),
    (b"\x00\x01\x02\xff\xfe" * 100, None),
])
def test_malformed_input_is_one_line_and_exit_2(tmp_path, content, needle):
    path = tmp_path / "input.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    res = run_cli(["check", "--from", str(path)])
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    if needle:
        assert needle in lines[0].lower()


def test_huge_input_is_refused_before_reading(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as fh:
        fh.seek(25 * 1024 * 1024)
        fh.write(b"}")
    res = run_cli(["check", "--from", str(path)])
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_report_file_is_redacted(fake_machine, tmp_path):
    python, bin_dir, env = fake_machine
    secret = "hf_abcdefghijklmnopqrstuvwxyzABCDEF123456"
    out = tmp_path / "report.json"
    res = run_cli(["report", "-o", str(out), "--no-smoke", "--python", str(python)],
                  env | {"HF_TOKEN": secret, "CUDA_VISIBLE_DEVICES": "0", "HOME": str(tmp_path)}, bin_dir)
    assert res.returncode == 0, res.stderr
    text = out.read_text(encoding="utf-8")
    import socket

    assert secret not in text
    assert "GPU-00000000-0000-0000-0000-000000000000" not in text  # the fake GPU's UUID
    host = socket.gethostname()
    if len(host) >= 3 and host != "localhost":
        assert host not in text
    assert str(tmp_path) not in text and "~/venv/bin/python" in text  # the home folder became ~
    report = json.loads(text)
    assert validate_report(report) == []
    assert "gpu-arch-unsupported" in _ids(report)


def test_require_cuda_fails_with_exit_4_and_cpu_passes(tmp_path):
    python = make_fake_env(tmp_path / "venv", torch="2.13.0+cpu", cuda=None)
    sysroot = tmp_path / "sysroot"
    sysroot.mkdir()
    env = {"TORCHDOCTOR_SYSROOT": str(sysroot)}
    res = run_cli(["check", "--no-smoke", "--require", "cuda", "--python", str(python)], env)
    assert res.returncode == 4
    assert "requirement-cuda" in res.stdout and "--require cuda" in res.stdout
    res = run_cli(["check", "--no-smoke", "--require", "cpu", "--python", str(python)], env)
    assert res.returncode == 0, res.stdout


def test_requirements_from_pyproject(tmp_path):
    python = make_fake_env(tmp_path / "venv", torch="2.13.0+cpu", cuda=None)
    (tmp_path / "pyproject.toml").write_text('[tool.torchdoctor]\nrequire = ["gpu"]\ntorch = ">=2.14"\n')
    sysroot = tmp_path / "sysroot"
    sysroot.mkdir()
    res = run_cli(["check", "--no-smoke", "--json", "--python", str(python)],
                  {"TORCHDOCTOR_SYSROOT": str(sysroot)}, cwd=tmp_path)
    assert res.returncode == 4
    ids = _ids(json.loads(res.stdout))
    assert "requirement-gpu" in ids and "requirement-torch" in ids


@pytest.mark.slow
def test_ci_formats(fake_machine, tmp_path):
    python, bin_dir, env = fake_machine
    summary = tmp_path / "summary.md"
    res = run_cli(["check", "--no-smoke", "--format", "github", "--python", str(python)],
                  env | {"GITHUB_STEP_SUMMARY": str(summary)}, bin_dir)
    assert "::error title=gpu-arch-unsupported::" in res.stdout
    assert "gpu-arch-unsupported" in summary.read_text(encoding="utf-8")
    junit = tmp_path / "junit.xml"
    run_cli(
        ["check", "--no-smoke", "--format", "junit", "-o", str(junit), "--python", str(python)], env, bin_dir
    )
    root = ET.parse(junit).getroot()
    assert any(tc.find("failure") is not None for tc in root.iter("testcase"))
    res = run_cli(["check", "--no-smoke", "--format", "markdown", "--python", str(python)], env, bin_dir)
    assert "gpu-arch-unsupported" in res.stdout and "```" in res.stdout


def test_readme_ci_examples_exist_and_parse(tmp_path):
    import yaml

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # the backport pyproject.toml declares for 3.10
        import tomli as tomllib

    # the CI recipes live in docs/ci.md; none may install torchdoctor from an index it is not published on
    readme = (Path(__file__).resolve().parents[1] / "docs" / "ci.md").read_text(encoding="utf-8")
    assert not re.search(r"(pipx? install|uv tool install|uv pip install)\s+torchdoctor\b", readme)
    blocks = {}
    for lang in ("yaml", "dockerfile", "toml"):
        parts = readme.split(f"```{lang}\n")[1:]
        blocks[lang] = [p.split("```", 1)[0] for p in parts]
    yamls = [yaml.safe_load(b) for b in blocks["yaml"]]
    assert any("torchdoctor check" in json.dumps(y) for y in yamls)  # GitHub Actions step
    assert any("script" in json.dumps(y) for y in yamls)  # GitLab CI job
    assert any("RUN torchdoctor check --require cuda" in b for b in blocks["dockerfile"])
    from doctor.app.config import load_pyproject_requirements

    configs = [b for b in blocks["toml"] if "tool" in tomllib.loads(b)]
    assert configs
    for i, block in enumerate(configs):
        path = tmp_path / f"pyproject{i}.toml"
        path.write_text(block, encoding="utf-8")
        assert load_pyproject_requirements(str(path)).require  # the documented example is a valid config


def test_ignore_drops_a_finding_and_its_exit_code(tmp_path):
    python = make_fake_env(tmp_path / "venv", torch=None, cuda=None)
    sysroot = tmp_path / "sysroot"
    sysroot.mkdir()
    env = {"TORCHDOCTOR_SYSROOT": str(sysroot)}
    res = run_cli(["check", "--no-smoke", "--json", "--python", str(python)], env, cwd=tmp_path)
    assert res.returncode == 1 and "torch-not-installed" in _ids(json.loads(res.stdout))
    res = run_cli(
        ["check", "--no-smoke", "--json", "--ignore", "torch-not-installed", "--python", str(python)],
        env,
        cwd=tmp_path,
    )
    assert "torch-not-installed" not in _ids(json.loads(res.stdout))
    assert res.returncode == 0


@pytest.mark.parametrize("args", [
    ["--device", "foo"],
    ["--smoke-timeout", "0"],
    ["--json", "--format", "markdown"],
    ["--config", "/nonexistent/pyproject.toml"],
    ["--python", str(Path(__file__).resolve())],  # a file, but not an interpreter
])
def test_impossible_option_values_are_usage_errors(args):
    res = run_cli(["check", "--no-smoke", *args])
    assert res.returncode == 2, res.stdout + res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def test_report_on_stdout_is_redacted_too(tmp_path):
    python = make_fake_env(tmp_path / "venv", torch="2.13.0+cpu", cuda=None)
    sysroot = tmp_path / "sysroot"
    sysroot.mkdir()
    res = run_cli(["report", "--no-smoke", "--python", str(python)],
                  {"TORCHDOCTOR_SYSROOT": str(sysroot), "HOME": str(tmp_path)})
    assert res.returncode == 0
    assert str(tmp_path) not in res.stdout and "~/venv/bin/python" in res.stdout
    assert validate_report(json.loads(res.stdout)) == []


def test_many_reports_refuse_single_report_formats(tmp_path):
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text((COLLECT_ENV / "composed-2.5.1-cu121-rtx4090-pip.txt").read_text())
    res = run_cli(["check", "--from", str(tmp_path), "--format", "junit"])
    assert res.returncode == 2 and "one report" in res.stderr
    res = run_cli(["check", "--from", str(tmp_path)])
    assert res.returncode == 0 and len(res.stdout.strip().splitlines()) == 2


def test_someone_elses_unparsable_pyproject_is_not_ours(tmp_path):
    python = make_fake_env(tmp_path / "venv", torch="2.13.0+cpu", cuda=None)
    (tmp_path / "pyproject.toml").write_text("this is [not toml\n")
    sysroot = tmp_path / "sysroot"
    sysroot.mkdir()
    res = run_cli(["check", "--no-smoke", "--python", str(python)], {"TORCHDOCTOR_SYSROOT": str(sysroot)},
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
