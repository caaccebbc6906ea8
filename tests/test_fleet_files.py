"""How `fleet summarize` finds and reads report files: the os.scandir walk lists what os.walk listed, in
the same order, and knows regular files from the listing; anything else is still looked at before it is
opened, and read_bytes stops at the end fstat announced without a last empty read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from doctor.inputs.nodes import UnreadableReport, find_report_files, read_node_report
from doctor.model import files as files_module
from doctor.model.files import read_bytes


def walk_reference(folder: str) -> list[str]:
    """The listing before os.scandir: os.walk, folders and names sorted."""
    found = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        found.extend(os.path.join(root, n) for n in sorted(names) if n.endswith(".json"))
    return found


def test_the_walk_lists_what_os_walk_listed_in_its_order(tmp_path):
    for rel in [
        "b.json",
        "a.json",
        "A.json",
        "notes.txt",
        "z/1.json",
        "z/y/2.json",
        "m/3.json",
        "m.json/4.json",
        "m/deep/er/5.json",
    ]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    (tmp_path / "linked").symlink_to(tmp_path / "z")  # a linked folder: listed by neither, not entered
    (tmp_path / "alias.json").symlink_to(tmp_path / "a.json")  # a link to a file: listed, but not as regular
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere")
    os.mkfifo(tmp_path / "pipe.json")
    found, missing = find_report_files([str(tmp_path)])
    assert [path for path, _ in found] == walk_reference(str(tmp_path))
    assert missing == []
    regular = {os.path.relpath(path, tmp_path) for path, is_regular in found if is_regular}
    assert regular == {"A.json", "a.json", "b.json", "z/1.json", "z/y/2.json", "m/3.json", "m.json/4.json",
                       "m/deep/er/5.json"}


def test_files_not_seen_as_regular_are_still_refused_before_opening(tmp_path):
    os.mkfifo(tmp_path / "pipe.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    found, _ = find_report_files([str(tmp_path)])
    for path, regular in found:
        assert not regular
        with pytest.raises(UnreadableReport, match="not a regular file"):
            read_node_report(path, regular)


def test_read_bytes_stops_at_the_announced_end_without_an_empty_read(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_bytes(b"x" * 5000)
    reads = []
    real_read = os.read

    def counting_read(fd, n):
        data = real_read(fd, n)
        reads.append(len(data))
        return data

    monkeypatch.setattr(files_module.os, "read", counting_read)
    assert read_bytes(path, 1 << 20) == b"x" * 5000
    assert reads == [5000]
    reads.clear()
    assert read_bytes(path, 1 << 20, regular=True) == b"x" * 5000
    assert reads == [5000]


def test_short_reads_before_the_end_keep_reading(tmp_path, monkeypatch):
    # A FUSE file system may hand out less than asked before the end: only fstat's size ends the loop early.
    path = tmp_path / "r.json"
    path.write_bytes(bytes(range(256)) * 40)
    real_read = os.read
    monkeypatch.setattr(files_module.os, "read", lambda fd, n: real_read(fd, min(n, 1000)))
    assert read_bytes(path, 1 << 20) == bytes(range(256)) * 40


def test_proc_files_that_announce_nothing_are_read_to_the_end():
    if not os.path.exists("/proc/self/status"):
        pytest.skip("no /proc")
    assert b"Pid:" in read_bytes("/proc/self/status", 1 << 20)


def test_a_folder_nested_deeper_than_the_recursion_limit_is_listed(tmp_path):
    import sys

    depth = sys.getrecursionlimit() + 50
    deep = str(tmp_path)
    for _ in range(depth):  # os.makedirs itself recurses
        deep = os.path.join(deep, "d")
        os.mkdir(deep)
    (Path(deep) / "r.json").write_text("{}")
    try:
        found, _ = find_report_files([str(tmp_path)])
        assert [os.path.basename(path) for path, _ in found] == ["r.json"]
    finally:  # removed here, bottom up: shutil.rmtree (pytest's clean-up of old runs) recurses too
        os.remove(os.path.join(deep, "r.json"))
        for _ in range(depth):
            os.rmdir(deep)
            deep = os.path.dirname(deep)
