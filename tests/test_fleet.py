"""`torchdoctor fleet summarize`: reports from many nodes -> counts, odd nodes out, fix per group.

Reports are built with the real doctor.model.report.build_report (the shape `check --json` writes); the
10,000-node fleet comes from benchmarks/fleet_bench.py so the test and the benchmark see the same data.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor import exitcodes
from doctor.app import fleet
from doctor.cli import main as torchdoctor
from doctor.inputs import nodes
from doctor.model.findings import ERROR, Finding, Fix
from doctor.render.fleet import render_markdown

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "fleet_bench.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("fleet_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = load_bench()
TEMPLATE = bench.template_report()


def report(
    hostname="node1", driver="570.124.06", torch="2.13.0+cu128", gpus=None, finding=None, command=None
):
    data = copy.deepcopy(TEMPLATE)
    snap = data["snapshot"]
    if hostname is None:
        del snap["environment"]["hostname"]
    else:
        snap["environment"]["hostname"] = hostname
    snap["nvidia"]["driver_version"]["value"] = driver
    snap["install"]["torch"]["build_version"] = torch
    if gpus is not None:
        snap["nvidia"]["gpus"] = [{"index": i, "name": name} for i, name in enumerate(gpus)]
    if finding:
        data["findings"].append(
            dataclasses.asdict(Finding(finding, ERROR, "t", fix=Fix("s", [command or ""])))
        )
    if command:
        data["plan"]["steps"] = [{"kind": "pip", "description": "d", "command": command}]
    return data


def write(folder: Path, name: str, data) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_a_real_report_gives_the_compared_facts():
    node = nodes.parse_node_report(report(finding="torch-cuda-mismatch", command="pip install x"), "r/a.json")
    assert node.node == "node1" and node.driver == "570.124.06" and node.torch_build == "2.13.0+cu128"
    assert node.gpu_models == "8x NVIDIA H100 80GB HBM3"
    assert node.finding_ids == ("torch-cuda-mismatch",) and node.errors == 1
    assert node.plan_commands == ("pip install x",)


def test_node_name_falls_back_to_the_file_stem_and_version_to_metadata():
    data = report(hostname=None, gpus=[])
    data["snapshot"]["install"]["torch"]["build_version"] = None
    data["snapshot"]["install"]["torch"]["version"] = "2.14.1"
    node = nodes.parse_node_report(data, "reports/gpu-017.json")
    assert (node.node, node.torch_build, node.gpu_models) == ("gpu-017", "2.14.1", nodes.NONE)


@pytest.mark.parametrize(
    "content, reason",
    [
        ('{"report_schema_version": 1, "snapsh', "not JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"hello": 1}', "not a torchdoctor report"),
        ('{"report_schema_version": 2, "snapshot": {}}', "report_schema_version 2"),
        (b"\xff\xfe\x00garbage", "not JSON"),
    ],
)
def test_unreadable_files_get_a_one_line_reason(tmp_path, content, reason):
    path = tmp_path / "bad.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    summary = fleet.summarize_paths([str(path), str(tmp_path / "missing.json")])
    assert summary.nodes == [] and summary.exit_code == exitcodes.USAGE
    (bad, bad_reason), (missing, missing_reason) = sorted(summary.unreadable, key=lambda u: "missing" in u[0])
    assert reason in bad_reason and "\n" not in bad_reason
    assert missing_reason == "no such file or folder"


def test_wrong_types_inside_a_report_do_not_crash():
    data = report()
    data["snapshot"]["nvidia"] = {"driver_version": "570", "gpus": "eight"}
    data["snapshot"]["install"] = None
    data["findings"] = [{"id": "x", "severity": "error"}, "junk", None]
    data["plan"] = {"steps": [{"command": 3}, "junk"]}
    node = nodes.parse_node_report(data, "n.json")
    assert (node.driver, node.torch_build, node.gpu_models) == (nodes.UNKNOWN, nodes.UNKNOWN, nodes.NONE)
    assert node.finding_ids == ("x",) and node.plan_commands == ()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(snapshot=json_values, findings=json_values, plan=json_values)
def test_any_json_shape_is_a_node_or_a_reason(snapshot, findings, plan):
    data = {"report_schema_version": 1, "snapshot": snapshot, "findings": findings, "plan": plan}
    try:
        node = nodes.parse_node_report(data, "x.json")
    except nodes.UnreadableReport as exc:
        assert str(exc)
    else:
        assert isinstance(node.node, str) and isinstance(node.plan_commands, tuple)


def test_summary_counts_odd_nodes_and_fix_groups(tmp_path):
    fix = "python -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
    for i in range(5):
        write(tmp_path, f"rack1/n{i}.json", report(hostname=f"n{i}"))
    write(tmp_path, "rack2/old-driver.json", report(hostname="old", driver="550.54.15"))
    write(tmp_path, "rack2/a100.json", report(hostname="a100", gpus=["NVIDIA A100-SXM4-80GB"] * 4))
    # fmt: skip
    write(
        tmp_path,
        "rack2/bad1.json",
        report(hostname="bad1", torch="2.12.0+cu126", finding="torch-cuda-mismatch", command=fix),
    )
    write(tmp_path, "rack2/bad2.json", report(hostname="bad2", finding="torch-cuda-mismatch", command=fix))
    write(tmp_path, "rack2/notes.txt", "not a report, not *.json: ignored")
    summary = fleet.summarize_paths([str(tmp_path)])
    assert len(summary.nodes) == 9 and summary.unreadable == []
    assert summary.counts["driver"] == {"570.124.06": 8, "550.54.15": 1}
    assert summary.counts["torch_build"] == {"2.13.0+cu128": 8, "2.12.0+cu126": 1}
    assert summary.counts["gpu_model"] == {"NVIDIA H100 80GB HBM3": 64, "NVIDIA A100-SXM4-80GB": 4}
    assert summary.counts["findings"] == {"torch-cuda-mismatch": 2}
    odd = {o["node"]: o["differs"] for o in summary.odd}
    assert odd == {
        "old": {"driver": "550.54.15"},
        "a100": {"gpu_models": "4x NVIDIA A100-SXM4-80GB"},
        "bad1": {"torch_build": "2.12.0+cu126", "findings": "torch-cuda-mismatch"},
        "bad2": {"findings": "torch-cuda-mismatch"},
    }
    # grouped by what the reports list; the fix shown is what torchdoctor writes from bad1's facts
    assert [(g["count"], g["reported"]) for g in summary.fix_groups] == [(7, []), (2, [fix])]
    assert summary.fix_groups[1]["nodes"] == ["bad1", "bad2"]
    assert summary.fix_groups[1]["reported_by"] == "bad1"
    assert fix not in summary.fix_groups[1]["commands"]
    assert summary.exit_code == exitcodes.FINDINGS


def test_without_a_real_majority_nobody_is_odd_and_unknown_is_no_vote(tmp_path):
    # 4 + 3 + 3 finding sets: no set is held by more than half, so none of them is "the odd one"
    for i in range(4):
        write(tmp_path, f"s{i}.json", report(hostname=f"s{i}", finding="shm-too-small"))
    for i in range(3):
        write(tmp_path, f"h{i}.json", report(hostname=f"h{i}"))
        write(tmp_path, f"c{i}.json", report(hostname=f"c{i}", finding="cpu-quota-low"))
    summary = fleet.summarize_paths([str(tmp_path)])
    assert not any("findings" in o["differs"] for o in summary.odd)
    # 3 unknown drivers and 2 known ones: the known ones are not odd
    other = tmp_path / "drivers"
    for i in range(3):
        write(other, f"u{i}.json", report(hostname=f"u{i}", driver=None))
    for i in range(2):
        write(other, f"k{i}.json", report(hostname=f"k{i}", driver="550.54.15"))
    summary = fleet.summarize_paths([str(other)])
    assert summary.odd == []


def test_redacted_reports_are_named_by_their_file(tmp_path):
    write(tmp_path, "gpu-node-07.json", report(hostname="<host>"))
    assert fleet.summarize_paths([str(tmp_path)]).nodes[0].node == "gpu-node-07"


def test_a_uniform_fleet_exits_0_and_renders_everywhere(tmp_path, capsys):
    for i in range(3):
        write(tmp_path, f"n{i}.json", report(hostname=f"n{i}"))
    assert torchdoctor(["fleet", "summarize", str(tmp_path)]) == exitcodes.OK
    human = capsys.readouterr().out
    assert "3 node(s)" in human and "no fix needed" in human and "every node matches the majority" in human
    assert (
        torchdoctor(["fleet", "summarize", str(tmp_path), "--json", "-o", str(tmp_path / "out.txt")])
        == exitcodes.OK
    )
    data = json.loads((tmp_path / "out.txt").read_text())
    assert data["nodes"] == 3 and data["odd_nodes"] == [] and data["majority"]["driver"] == "570.124.06"
    assert torchdoctor(["fleet", "summarize", str(tmp_path / "n0.json"), "--markdown"]) == exitcodes.OK
    markdown = capsys.readouterr().out
    assert markdown.startswith("## torchdoctor fleet: 1 node(s)") and "| 570.124.06 | 1 |" in markdown


def test_markdown_lists_odd_nodes_fix_blocks_and_unreadable(tmp_path):
    write(tmp_path, "a.json", report(hostname="a"))
    write(tmp_path, "b.json", report(hostname="b"))
    write(
        tmp_path,
        "c.json",
        report(hostname="c", driver="535.1", finding="driver-too-old", command="sudo apt install x"),
    )
    write(tmp_path, "broken.json", "{")
    markdown = render_markdown(fleet.summary_to_dict(fleet.summarize_paths([str(tmp_path)])))
    assert (
        "| c | NVIDIA driver 535.1 (majority 570.124.06); finding set driver-too-old (majority (none)) |"
        in markdown
    )
    # a report's own commands are its text, never the fix
    assert "sudo apt install x" not in markdown and "the report of c listed other commands" in markdown
    assert "broken.json`: not JSON" in markdown


def test_nothing_readable_is_a_usage_error(tmp_path, capsys):
    assert torchdoctor(["fleet", "summarize", str(tmp_path / "nowhere")]) == exitcodes.USAGE
    assert "no readable report" in capsys.readouterr().err



def test_human_view_to_a_file_and_one_format_at_a_time(tmp_path, capsys):
    write(tmp_path, "n0.json", report(hostname="n0"))
    out = tmp_path / "out.txt"
    assert torchdoctor(["fleet", "summarize", str(tmp_path / "n0.json"), "-o", str(out)]) == exitcodes.OK
    assert "torchdoctor fleet: 1 node(s), 0 unreadable" in out.read_text() and capsys.readouterr().out == ""
    assert torchdoctor(["fleet", "summarize", str(tmp_path), "--json", "--markdown"]) == exitcodes.USAGE
    assert "--json and --markdown" in capsys.readouterr().err

@pytest.mark.slow
def test_ten_thousand_reports_find_exactly_the_planted_outliers(tmp_path):
    planted = bench.write_fleet(str(tmp_path), 10_000)
    summary = fleet.summarize_paths([str(tmp_path)])
    assert len(summary.nodes) == 10_000
    assert {o["node"] for o in summary.odd} == planted
    assert [Path(p).name for p, _ in summary.unreadable] == ["truncated.json"]
    by_node = {o["node"]: o["differs"] for o in summary.odd}
    assert by_node["node00137"] == {"driver": "550.54.15"}
    assert by_node["node09001"] == {"gpu_models": "1x NVIDIA A100-SXM4-80GB, 7x NVIDIA H100 80GB HBM3"}
    assert [g["count"] for g in summary.fix_groups] == [9_999, 1]
    assert summary.fix_groups[1]["reported"] == [bench.FIX_COMMAND]
    assert bench.FIX_COMMAND not in summary.fix_groups[1]["commands"]


def test_a_broken_file_and_a_pipe_among_reports_are_unreadable_and_the_rest_are_read(tmp_path):
    import os

    bench.write_fleet(str(tmp_path), 300)
    (tmp_path / "broken.json").write_text("{not json")
    os.mkfifo(tmp_path / "pipe.json")  # refused before it is opened: never waited on
    summary = fleet.summarize_paths([str(tmp_path)])
    assert len(summary.nodes) == 300
    names = sorted(Path(p).name for p, _ in summary.unreadable)
    assert names == ["broken.json", "pipe.json", "truncated.json"]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    "script", sorted(p.name for p in EXAMPLES.glob("*/*.s*") if p.suffix in (".sh", ".sbatch"))
)
def test_example_scripts_parse(script):
    import subprocess

    (path,) = EXAMPLES.glob(f"*/{script}")
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_example_manifests_are_valid_yaml():
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed in this environment")
    kinds = {
        p.name: [d["kind"] for d in yaml.safe_load_all(p.read_text())]
        for p in EXAMPLES.glob("kubernetes/*.yaml")
    }
    assert kinds == {
        "torchdoctor-daemonset.yaml": ["Namespace", "DaemonSet"],
        "torchdoctor-job.yaml": ["Job"],
    }
