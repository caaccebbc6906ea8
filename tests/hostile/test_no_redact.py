"""Shared output written with ``--no-redact`` says that it is not redacted (issue 27): one line in every text
format, ``"redacted": false`` in JSON. Without --no-redact nothing changes (the goldens hold that)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from hostile import REPO, base_env, run_cli

pytestmark = pytest.mark.hostile

LINE = "Not redacted (--no-redact)"


@pytest.mark.parametrize("args,first", [
    (["--format", "markdown"], "> **" + LINE),
    (["--format", "github"], "::warning title=torchdoctor::" + LINE),
    (["--format", "junit"], '<?xml version="1.0" encoding="UTF-8"?>'),
])
def test_every_shared_text_format_says_so(world, tmp_path, args, first):
    env = base_env(world)
    res = run_cli(["check", "--from", str(world.report), *args, "--no-redact"], env, cwd=tmp_path)
    assert res.returncode in (0, 1), res.summary()
    assert res.out.startswith(first) and "Not redacted (" in res.out, res.summary()
    if "junit" in args:
        ET.fromstring(res.out.encode())  # still one XML document
    plain = run_cli(["check", "--from", str(world.report), *args], env, cwd=tmp_path)
    assert LINE not in plain.out


def test_a_text_file_says_so(world, tmp_path):
    out = tmp_path / "out.txt"
    res = run_cli(["check", "--from", str(world.report), "-o", str(out), "--no-redact"], base_env(world),
                  cwd=tmp_path)
    assert res.returncode in (0, 1), res.summary()
    assert out.read_text().startswith(LINE)


def test_json_says_so_in_a_field_the_schema_knows(world, tmp_path):
    env = base_env(world)
    res = run_cli(["report", "--no-smoke", "--python", str(world.py), "--no-redact"], env, cwd=tmp_path)
    assert res.returncode == 0, res.summary()
    data = json.loads(res.stdout)
    assert data["redacted"] is False
    schema = json.loads(Path(REPO, "schema", "report.schema.json").read_text())
    jsonschema.validate(data, schema)
    res = run_cli(["report", "--no-smoke", "--python", str(world.py)], env, cwd=tmp_path)
    assert "redacted" not in json.loads(res.stdout)


def test_explain_says_so(world, tmp_path):
    res = run_cli(["explain", "--no-probe", "--format", "markdown", "--no-redact",
                   "CUDA error: no kernel image is available for execution on the device"],
                  base_env(world), cwd=tmp_path)
    assert res.returncode in (0, 1), res.summary()
    assert res.out.startswith("> **" + LINE), res.summary()
