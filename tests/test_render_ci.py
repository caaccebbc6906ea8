"""The paste-into-an-issue Markdown, GitHub Actions annotations and JUnit XML renderers."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from test_report_schema import full_report

from doctor import exitcodes
from doctor.model.findings import CheckResult, Finding, Fix
from doctor.model.report import build_report
from doctor.model.snapshot import Snapshot
from doctor.render.github import escape_data, escape_property, render_github
from doctor.render.junit import render_junit
from doctor.render.markdown import render_markdown
from doctor.render.redact import redact_report

# --- Markdown ----------------------------------------------------------------------------------


def test_markdown_summary_findings_fix_and_folded_json():
    report = full_report()
    md = render_markdown(report)
    assert md.startswith("### torchdoctor: 1 error, 1 warning\n")
    assert "| torch | 2.5.1+cu121 (CUDA 12.1); torchvision 0.20.1+cu121; torchaudio 2.5.1+cu121 |" in md
    assert "| NVIDIA driver | 550.54.14 (max CUDA 12.4) |" in md
    assert "| GPUs | 0: NVIDIA GeForce RTX 4090 (CC 8.9, 24564 MiB) |" in md
    assert "| Python | 3.11.7 cpython |" in md and "| Environment | venv |" in md
    assert "| Platform | linux-x86_64, glibc 2.39, docker |" in md
    assert "| ❌ | `gpu-arch-unsupported` | RTX 4090 (sm_89) is not in this build |" in md
    assert "| ⚠️ | `shm-too-small` | /dev/shm is 64 MB inside a container |" in md
    fix_block = re.search(r"\*\*Fix\*\*\n\n```bash\n(.*?)\n```", md, re.S).group(1)
    assert fix_block == report["plan"]["steps"][0]["command"]
    folded = re.search(
        r"<details><summary>Full report \(JSON\)</summary>\n\n```json\n(.*?)\n```\n\n</details>", md, re.S
    ).group(1)
    assert json.loads(folded) == json.loads(json.dumps(report))


def test_markdown_healthy_and_empty_plan_uses_findings_fix():
    report = full_report(findings=[], plan={})
    report["summary"].update(errors=0, warnings=0)
    md = render_markdown(report)
    assert "no problems found" in md and "No problems found." in md and "**Fix**" not in md
    report = full_report(plan={})
    assert "docker run --shm-size=8g ..." in render_markdown(report)


def test_markdown_escapes_pipes_html_and_backtick_fences():
    report = full_report()
    report["findings"][0]["title"] = "a | b <redacted> `x`"
    report["snapshot"]["runtime"]["stderr_tail"] = "```\nbreak out\n```"
    md = render_markdown(report)
    assert "a \\| b &lt;redacted&gt; `x`" in md
    assert "\n````json\n" in md  # the fence is longer than any backtick run inside


def test_markdown_of_a_collect_env_snapshot_and_redacted_report():
    from pathlib import Path

    from doctor.inputs.collect_env import parse_collect_env

    text = (Path(__file__).parent / "fixtures/collect_env/composed-2.5.1-conda-4xA100.txt").read_text()
    report = build_report(parse_collect_env(text), {}, [], [], {}, exitcodes.OK)
    md = render_markdown(redact_report(report, env={}, hostname="", username="", home=""))
    assert "3: NVIDIA A100-SXM4-80GB (CC unknown)" in md
    assert "| NVIDIA driver | 535.104.05 (max CUDA unknown) |" in md  # collect_env does not report it


def test_markdown_of_an_empty_snapshot_does_not_crash():
    report = build_report(Snapshot(), {}, [], [], {}, exitcodes.OK)
    md = render_markdown(report)
    assert "| torch | unknown |" in md  # not "not installed (unknown)": unknown is not absent


# --- GitHub Actions ----------------------------------------------------------------------------


def test_escaping_per_workflow_commands_spec():
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_annotations():
    out = render_github(full_report())
    lines = out.splitlines()
    assert lines[0] == (
        "::warning title=shm-too-small::/dev/shm is 64 MB inside a container — Start the container with "
        "--shm-size=8g%0Adocker run --shm-size=8g ..."
    )
    assert lines[1].startswith("::error title=gpu-arch-unsupported::RTX 4090 (sm_89) is not in this build — ")
    assert len(lines) == 2 and out.endswith("\n")


def test_info_is_notice_and_properties_escaped():
    report = full_report(findings=[{"id": "a:b,c", "severity": "info", "title": "100%", "fix": None}])
    assert render_github(report) == "::notice title=a%3Ab%2Cc::100%25\n"


def test_healthy_report_says_so():
    assert render_github(full_report(findings=[])) == "::notice title=torchdoctor::no problems found\n"


def github_output(monkeypatch, summary_path) -> str:
    """The github format as the app writes it: annotations on stdout, the Markdown appended to the summary."""
    from doctor.app.options import CheckOptions
    from doctor.app.output import render

    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_path))
    return render(full_report(), CheckOptions(format="github", redact=False))


def test_step_summary_is_appended(tmp_path, monkeypatch):
    summary = tmp_path / "step_summary.md"
    summary.write_text("previous step\n")
    github_output(monkeypatch, summary)
    github_output(monkeypatch, summary)
    text = summary.read_text()
    assert text.startswith("previous step\n") and text.count("### torchdoctor:") == 2


def test_unwritable_step_summary_is_a_warning_not_a_crash(tmp_path, monkeypatch):
    out = github_output(monkeypatch, tmp_path / "missing-dir" / "summary.md")
    assert out.splitlines()[-1].startswith("::warning title=torchdoctor::could not write the step summary")


# --- JUnit -------------------------------------------------------------------------------------


def parse(xml: str) -> ET.Element:
    assert xml.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    return ET.fromstring(xml.encode("utf-8"))


def test_junit_one_testcase_per_check_with_failures():
    root = parse(render_junit(full_report()))
    suite = root.find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == ["core", "hazards", "runtime"]
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and root.get("failures") == "1"
    failure = cases["core"].find("failure")
    assert failure.get("type") == "gpu-arch-unsupported"
    assert failure.get("message") == "RTX 4090 (sm_89) is not in this build"
    assert "--index-url https://download.pytorch.org/whl/cu124" in failure.text
    assert cases["hazards"].find("failure") is None
    assert "shm-too-small" in cases["hazards"].find("system-out").text
    assert cases["runtime"].find("failure") is None and cases["runtime"].find("system-out") is None
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["torch"].startswith("2.5.1+cu121")


def test_junit_strict_turns_warnings_into_failures():
    report = full_report()
    report["summary"]["strict"] = True  # the run was strict: --strict or the config's strict
    suite = parse(render_junit(report)).find("testsuite")
    assert suite.get("failures") == "2"
    hazards = [c for c in suite.findall("testcase") if c.get("name") == "hazards"][0]
    assert hazards.find("failure").get("type") == "shm-too-small"


def test_junit_skipped_crashed_and_findings_without_a_check():
    checks = [
        CheckResult("runtime", "torch imports", "skipped", "--no-import"),
        CheckResult("hazards", "no hazards", "crashed", "KeyError: 'x'"),
    ]
    findings = [
        Finding(
            "requirement-cuda",
            "error",
            "--require cuda: no CUDA device usable",
            rule="requirements",
            fix=Fix(summary="x"),
        )
    ]
    report = build_report(Snapshot(), {}, findings, checks, {}, exitcodes.REQUIREMENT)
    suite = parse(render_junit(json.loads(json.dumps(report)))).find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["runtime"].find("skipped").get("message") == "--no-import"
    assert cases["hazards"].find("error").get("message") == "KeyError: 'x'"
    assert cases["requirements"].find("failure").get("type") == "requirement-cuda"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "3",
        "1",
        "1",
        "1",
    )


def test_junit_survives_control_characters_and_markup():
    report = full_report()
    report["findings"][1]["title"] = 'bad \x1b[31mred\x1b[0m <tag> & "quotes" \x00'
    report["findings"][1]["detail"] = "]]> cdata end"
    root = parse(render_junit(report))
    failure = root.find("testsuite/testcase/failure")
    assert failure.get("message") == 'bad [31mred[0m <tag> & "quotes" '
    assert "]]> cdata end" in failure.text


def test_renderers_take_malformed_shapes():
    # found by tests/test_fuzz_inputs.py::test_mutated_real_report (checks replaced by a boolean)
    for change in (
        {"checks": True},
        {"findings": "x"},
        {"snapshot": None, "plan": [1]},
        {"findings": [{"id": 1, "severity": None, "fix": {"commands": 5}}]},
    ):
        report = full_report(**change)
        assert render_markdown(report) and render_github(report)
        parse(render_junit(report))
    report = full_report()
    report["snapshot"]["interpreter"]["env_kind"] = True  # found by the fuzzer too
    report["snapshot"]["runtime"]["status"] = 3
    assert "| Environment | True |" in render_markdown(report)
    parse(render_junit(report))
