"""Fuzzing the --from readers: whatever the input, the only exception is ReportError."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_report_schema import full_report

from doctor.errors import ReportError
from doctor.inputs.collect_env import parse_collect_env
from doctor.inputs.reports import detect_input_kind, read_report
from doctor.render.github import render_github
from doctor.render.junit import render_junit
from doctor.render.markdown import render_markdown

FIXTURES = Path(__file__).parent / "fixtures" / "collect_env"
REPORT_TEXT = json.dumps(full_report())
COLLECT_ENV_TEXTS = [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.glob("*.txt"))]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=30,
)


def read_ok_or_report_error(text: str) -> None:
    try:
        snapshot, meta = read_report(text, "fuzz")
    except ReportError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("fuzz")
        return
    assert meta["kind"] in ("report", "collect_env")
    snapshot.to_dict()


@SETTINGS
@given(st.text(max_size=2000))
@example("")
@example("{")
@example("\ufeff{")
@example("[")
@example("1e999999")  # float overflow: json gives inf
@example("[" * 100_000)  # recursion depth
@example('{"report_schema_version": true}')
@example('{"report_schema_version": 1, "snapshot": {"nvidia": {"gpus": [{"compute_capability": 3}]}}}')
@example('{"report_schema_version": 1, "snapshot": {"host": {"wsl": "yes"}}}')
@example("PyTorch version: N/A\nIs CUDA available: N/A\n")
@example(
    "Is CUDA available: True\nGPU models and configuration:\nGPU 99999999999999999999: X\nNvidia driver "
    "version: 1\n"
)
def test_random_text(text):
    kind = detect_input_kind(text)
    assert kind in ("report", "collect_env", "unknown")
    read_ok_or_report_error(text)


@SETTINGS
@given(json_values)
def test_random_json(value):
    read_ok_or_report_error(json.dumps(value))


@SETTINGS
@given(st.data())
def test_mutated_real_report(data):
    report = json.loads(REPORT_TEXT)
    # replace one value somewhere in the report with a random JSON value
    paths = []

    def collect(node, path):
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                collect(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                collect(v, (*path, i))

    collect(report, ())
    path = data.draw(st.sampled_from(paths[1:]))
    target = report
    for part in path[:-1]:
        target = target[part]
    if data.draw(st.booleans()) and isinstance(target, dict):
        del target[path[-1]]
    else:
        target[path[-1]] = data.draw(json_values)
    read_ok_or_report_error(json.dumps(report))
    # the renderers take whatever shape a report has without crashing
    render_markdown(report)
    render_github(report)
    render_junit(report)


@SETTINGS
@given(st.data())
def test_truncated_and_spliced_inputs(data):
    text = data.draw(st.sampled_from([REPORT_TEXT, *COLLECT_ENV_TEXTS]))
    cut = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.text(max_size=50))
    read_ok_or_report_error(text[:cut] + junk)


@SETTINGS
@given(st.sampled_from(COLLECT_ENV_TEXTS), st.data())
def test_collect_env_line_mutations(text, data):
    lines = text.splitlines()
    i = data.draw(st.integers(0, len(lines) - 1))
    lines[i] = data.draw(st.text(max_size=80)) if data.draw(st.booleans()) else lines[i].split(":")[0] + ": "
    try:
        snapshot = parse_collect_env("\n".join(lines))
    except ReportError:
        return
    snapshot.to_dict()
