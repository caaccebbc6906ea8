"""doctor/probes/which.py finds what shutil.which finds (it replaces it to keep shutil out of every run)."""

from __future__ import annotations

import os
import shutil

import pytest

from doctor.probes.which import which


def _exe(path) -> str:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.skipif(os.name != "posix", reason="on Windows which() is shutil.which itself")
def test_it_finds_what_shutil_finds(tmp_path, monkeypatch):
    a, b, c = (tmp_path / n for n in "abc")
    for folder in (a, b, c):
        folder.mkdir()
    _exe(a / "tool")
    _exe(b / "tool")
    (b / "plain").write_text("not executable")
    _exe(c / "plain")
    (a / "dir-tool").mkdir()
    monkeypatch.chdir(tmp_path)
    _exe(tmp_path / "here")
    paths = [
        os.pathsep.join(map(str, (a, b, c))),
        os.pathsep.join(map(str, (c, b, a))),
        os.pathsep.join(["", str(b)]),  # an empty entry is the current folder
        "",
        os.pathsep.join(map(str, (a, a, b))),
    ]
    names = ["tool", "plain", "dir-tool", "here", "missing", str(a / "tool"), "a/tool", str(b / "plain")]
    for path in paths:
        for name in names:
            for mode in (os.F_OK | os.X_OK, os.F_OK):
                assert which(name, mode, path) == shutil.which(name, mode, path), (name, path, mode)
    monkeypatch.setenv("PATH", paths[0])
    assert which("tool") == shutil.which("tool") == str(a / "tool")
    monkeypatch.delenv("PATH")
    assert which("sh") == shutil.which("sh")
