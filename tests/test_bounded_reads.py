"""Bounded, typed reads (doctor/model/files.py) and the inputs that use them: a FIFO, a device or a socket is
refused before a byte is read, sizes are counted on the bytes read, numbers are bounded, and the Markdown
report scan is linear. The same faults through the real CLI: tests/hostile/cases.py."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest

from doctor.errors import ReportError
from doctor.inputs.reports import MAX_INPUT_BYTES, _fenced_report, read_input_file, read_report
from doctor.model import files
from doctor.model.files import FileRefused, bounded_float, bounded_int, read_bytes, read_text, write_text
from doctor.probes.environment.files import read_text as probe_read_text


def test_a_regular_file_is_read_up_to_its_limit(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_bytes(path, 100) == b"x" * 100
    with pytest.raises(FileRefused, match="more than"):
        read_bytes(path, 99)
    assert read_bytes(path, 10, truncate=True) == b"x" * 10


def test_a_fifo_nobody_writes_is_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(FileRefused, match="a FIFO, not a regular file"):
        read_bytes(fifo, 1 << 20)
    assert read_text(fifo, 1 << 20) is None
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_and_links_to_them_are_refused(tmp_path, device):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    link = tmp_path / "version"
    link.symlink_to(device)
    for path in (device, link):
        with pytest.raises(FileRefused, match="character device"):
            read_bytes(path, 1 << 20)
    assert probe_read_text(str(tmp_path), "/version") is None


def test_sockets_and_folders_are_refused(tmp_path):
    with pytest.raises(FileRefused, match="a folder"):
        read_bytes(tmp_path, 10)
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "sock"))
        with pytest.raises(FileRefused, match="a socket"):
            read_bytes(tmp_path / "sock", 10)
    finally:
        server.close()


def test_proc_files_whose_stat_says_zero_are_read_by_their_bytes():
    if not os.path.exists("/proc/self/status"):
        pytest.skip("no /proc")
    assert os.stat("/proc/self/status").st_size == 0
    assert "Pid:" in read_text("/proc/self/status", 1 << 20)


@pytest.mark.parametrize(
    "text,expected",
    [("12", 12), (" -3 ", -3), ("9" * 18, int("9" * 18)), ("9" * 19, None), ("9" * 5000, None), ("1.5", None),
     ("abc", None), ("", None)],
)
def test_bounded_int(text, expected):
    assert bounded_int(text) == expected


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e308", "0", "-1", "abc", ""])
def test_bounded_float_refuses_what_no_limit_can_be(text):
    assert bounded_float(text) is None


def test_bounded_float_accepts_a_plain_limit():
    assert bounded_float("2.5") == 2.5 and bounded_float(600, 0, 600) == 600


def test_writing_to_a_fifo_nobody_reads_fails_at_once(tmp_path):
    fifo = tmp_path / "summary"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(OSError):
        write_text(fifo, "x", append=True)
    assert time.monotonic() - start < 2
    write_text(tmp_path / "out.md", "one\n")
    write_text(tmp_path / "out.md", "two\n", append=True)
    assert (tmp_path / "out.md").read_text() == "one\ntwo\n"


def test_a_report_larger_than_the_limit_is_refused_by_its_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr("doctor.inputs.reports.MAX_INPUT_BYTES", 1000)
    big = tmp_path / "big.json"
    big.write_text("{" + " " * 2000 + "}")
    with pytest.raises(ReportError, match="too large for a report"):
        read_input_file(str(big))
    assert MAX_INPUT_BYTES == 20 << 20 and files.MAX_DIGITS == 18


def test_a_fifo_given_to_from_is_one_line(tmp_path):
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    with pytest.raises(ReportError, match=r"r\.json: a FIFO, not a regular file"):
        read_input_file(str(fifo))


def test_the_markdown_fence_scan_is_linear():
    """2 MB of ```json fences that never close: 29 s on 0.1.0 (a quadratic regular expression)."""
    chunk = "```json\n{\n"
    text = "report_schema_version\n" + chunk * ((2 << 20) // len(chunk))
    start = time.perf_counter()
    assert _fenced_report(text) is None
    assert time.perf_counter() - start < 1.0


def test_the_markdown_fence_scan_finds_our_block_after_others():
    body = json.dumps({"report_schema_version": 1})
    text = f"intro\n```json\n{{\"other\": 1}}\n```\n<details>\n\n````json\n{body}\n````\n</details>\n"
    assert _fenced_report(text) == body


def test_a_fact_that_is_not_a_plain_value_is_refused(tmp_path):
    """A list where the driver version belongs used to crash two rules and drop the GPU's error."""
    report = {
        "report_schema_version": 1,
        "snapshot": {"nvidia": {"driver_version": {"value": ["570.124.04"]}}},
    }
    with pytest.raises(ReportError, match=r"snapshot\.nvidia\.driver_version\.value: expected a string"):
        read_report(json.dumps(report), "r.json")
