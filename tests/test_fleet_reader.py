"""`fleet summarize` parses a report once per kind: a report equal to an earlier one but for its hostname and time
(doctor/inputs/nodes.py, ``_known``) takes that one's facts. Whatever the files hold, that must give exactly what
parsing every file gives, and the same summary."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fleet import bench, report

from doctor.app import fleet
from doctor.inputs import nodes


def read_each(paths):
    """Every file parsed on its own (no sharing between files): what the light reader must equal."""
    files, unreadable = nodes.find_report_files(paths)
    out = []
    for path in files:
        try:
            out.append(nodes.read_node_report(path))
        except nodes.UnreadableReport as exc:
            unreadable.append((path, str(exc)))
    return out, unreadable


def same_as_parsing_each(folder):
    shared = nodes.read_node_reports([str(folder)])
    assert shared == read_each([str(folder)])
    assert fleet.summary_to_dict(fleet.summarize(*shared)) == fleet.summary_to_dict(fleet.summarize(*read_each([str(folder)])))
    return shared


def write(folder, name, text):
    path = os.path.join(folder, name)
    with open(path, "wb") as fh:
        fh.write(text if isinstance(text, bytes) else text.encode("utf-8"))


def test_the_benchmark_fleet(tmp_path, monkeypatch):
    bench.write_fleet(str(tmp_path), 600)
    parsed = []
    loads = nodes._loads
    monkeypatch.setattr(nodes, "_loads", lambda raw: parsed.append(raw) or loads(raw))
    found, _ = nodes.read_node_reports([str(tmp_path)])
    assert len(parsed) < 10  # the healthy nodes' reports were parsed once, not 600 times
    monkeypatch.undo()
    assert same_as_parsing_each(tmp_path) == (found, _)
    assert {n.node for n in found} >= {f"node{i:05d}" for i in range(600)}


# Hostname texts the cut must hand over exactly, or leave to json.loads: redacted, empty, escapes, non-ASCII, text
# that is not UTF-8, control characters (not JSON), quotes.
ODD_HOSTS = ["<host>", "", "ü-node", "n\\u00fcde", 'a\\"b', "tab\there", "\u4e2d\u6587", "x" * 300]


@pytest.mark.parametrize("layout", ["compact", "indented", "hostname-elsewhere", "hostname-twice", "no-hostname"])
def test_reports_that_differ_in_their_hostname_and_time(tmp_path, layout):
    for i, host in enumerate(["node-a", "node-b", "node-c", *ODD_HOSTS]):
        data = report(hostname=None if layout == "no-hostname" else f"HOST{i}")
        data["snapshot"]["collected_at"] = f"2026-01-01T00:00:{i:02d}Z"
        if layout in ("hostname-elsewhere", "hostname-twice"):
            data["findings"] = [{"id": "x", "severity": "error", "evidence": {"hostname": f"HOST{i}"}}]
        if layout == "hostname-twice":  # a duplicate key: the last one counts
            data["snapshot"]["environment"] = {"hostname": "first", **data["snapshot"]["environment"]}
        text = json.dumps(data, indent=2 if layout == "indented" else None)
        text = text.replace(f'"HOST{i}"', json.dumps(host) if "\\" not in host else f'"{host}"')
        if layout == "hostname-twice":
            text = text.replace('"environment": {"hostname": "first",', f'"environment": {{"hostname": "{i}",', 1)
        write(tmp_path, f"r{i:02d}.json", text)
    write(tmp_path, "latin1.json", json.dumps(report(hostname="HOSTX")).replace("HOSTX", "\udcff", 1)
          .encode("utf-8", "surrogateescape"))
    write(tmp_path, "latin1b.json", json.dumps(report(hostname="HOSTX")).replace("HOSTX", "\xe9").encode("latin-1"))
    found, unreadable = same_as_parsing_each(tmp_path)
    assert found and len(found) + len(unreadable) == len(ODD_HOSTS) + 5


def test_other_differences_are_parsed(tmp_path):
    for i in range(4):
        write(tmp_path, f"a{i}.json", json.dumps(report(hostname=f"n{i}", driver=f"57{i}.1")))
        write(tmp_path, f"b{i}.json", json.dumps(report(hostname=f"m{i}", finding="f" if i % 2 else None,
                                                         command="pip x" if i % 2 else None)))
    found, _ = same_as_parsing_each(tmp_path)
    assert {n.driver for n in found} == {"570.1", "571.1", "572.1", "573.1", "570.124.06"}


def test_a_report_made_invalid_only_in_its_hostname_is_still_refused(tmp_path):
    good = json.dumps(report(hostname="ok1"))
    write(tmp_path, "a.json", good)
    write(tmp_path, "b.json", good.replace("ok1", "ok2"))
    write(tmp_path, "c.json", good.replace('"ok1"', '"bad\x01"'))  # a raw control character: not JSON
    write(tmp_path, "d.json", good.replace('"ok1"', '"bad\\"'))
    _, unreadable = same_as_parsing_each(tmp_path)
    assert {os.path.basename(p) for p, _ in unreadable} == {"c.json", "d.json"}


host_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=40, deadline=None)
@given(hosts=st.lists(host_text, min_size=2, max_size=5), times=st.lists(host_text, min_size=2, max_size=5),
       where=st.sampled_from(["environment", "findings", "plan"]))
def test_any_hostnames_give_what_parsing_gives(tmp_path_factory, hosts, times, where):
    folder = tmp_path_factory.mktemp("fleet")
    for i, (host, when) in enumerate(zip(hosts, times, strict=False)):
        data = report(hostname=host)
        data["snapshot"]["collected_at"] = when
        if where == "findings":
            data["findings"] = [{"id": host or "x", "severity": "error", "hostname": host}]
        elif where == "plan":
            data["plan"]["steps"] = [{"command": when, "hostname": host}]
        write(folder, f"n{i}.json", json.dumps(data, ensure_ascii=i % 2 == 0))
    same_as_parsing_each(folder)
