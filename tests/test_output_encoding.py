"""Output survives any encoding: a stdout that cannot encode ✓ ✗ · ≤ → … (PYTHONIOENCODING=cp1252, as
redirected output often is on Windows; ascii) gets ASCII stand-ins, never a UnicodeEncodeError (which used to
be exit 3), and JSON stays the same data."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import make_fake_env

from doctor.app.streams import ASCII, FittingWriter, fit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "nvidia"))
from fake_smi import write_fake_nvidia_smi  # noqa: E402

RTX5090 = {"name": "NVIDIA GeForce RTX 5090", "cc": "12.0", "mem_mib": 32607}


def run_cli(args, encoding, env_extra=None, stdin=None):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0", NO_COLOR="1", PYTHONIOENCODING=encoding,
               **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, env=env, timeout=120,
                          input=stdin)


@pytest.fixture
def rtx5090(tmp_path):
    """The README's machine: an RTX 5090 with torch 2.6.0+cu126 (an error, a note, a plan: every glyph)."""
    sysroot = tmp_path / "sysroot"
    (sysroot / "proc").mkdir(parents=True)
    (sysroot / "proc" / "meminfo").write_text("MemTotal: 24684092 kB\nMemAvailable: 24188892 kB\nSwapTotal: "
        "0 kB\n")
    python = make_fake_env(tmp_path / "venv", torch="2.6.0+cu126", cuda="12.6", torchvision="0.21.0+cu126")
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [RTX5090], driver="570.124.04", cuda="12.8")
    env = {"TORCHDOCTOR_SYSROOT": str(sysroot), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return ["check", "--no-smoke", "--python", str(python)], env


@pytest.mark.parametrize("encoding", ["cp1252", "ascii"])
@pytest.mark.parametrize("fmt", ["text", "markdown", "github", "junit"])
def test_human_and_ci_formats_survive(rtx5090, encoding, fmt):
    args, env = rtx5090
    res = run_cli([*args, "--format", fmt, "-v"], encoding, env)
    assert res.returncode == 1, res.stderr.decode(encoding)
    assert b"Traceback" not in res.stderr and b"UnicodeEncodeError" not in res.stderr
    text = res.stdout.decode(encoding)  # every byte is valid in the stream's own encoding
    assert "gpu-arch-unsupported" in text
    if fmt == "text":
        assert "x gpu-arch-unsupported" in text  # ✗ became x
        assert "supports CUDA <= 12.8" in text  # ≤ became <=
        assert "--index-url https://download.pytorch.org/whl/cu128" in text  # the command is intact
    if fmt == "markdown":
        assert "| [x] | `gpu-arch-unsupported` |" in text  # ❌ became [x]


@pytest.mark.parametrize("encoding", ["cp1252", "ascii"])
def test_json_is_the_same_data(rtx5090, encoding):
    args, env = rtx5090
    utf8 = json.loads(run_cli([*args, "--json"], "utf-8", env).stdout.decode("utf-8"))
    res = run_cli([*args, "--json"], encoding, env)
    other = json.loads(res.stdout.decode(encoding))
    for report in (utf8, other):
        report["snapshot"].pop("collected_at")
        report["snapshot"]["runtime"].pop("seconds", None)
    assert other == utf8  # escaped (\u2264), not replaced: nothing lost


def test_help_explain_and_errors_survive():
    for args in (["--help"], ["check", "--help"], ["rules"]):
        res = run_cli(args, "ascii")
        assert res.returncode == 0 and b"Traceback" not in res.stderr
    res = run_cli(["explain", "--no-probe", "-"], "cp1252",
                  stdin=b"RuntimeError: CUDA error: no kernel image is available for execution on the "
                      b"device\n")
    assert res.returncode == 1 and b"gpu-arch-unsupported" in res.stdout and b"Traceback" not in res.stderr


def test_fit_keeps_what_the_encoding_holds_and_escapes_the_rest():
    assert fit("✓ ok · ≤ 12.8 → … é 😀", "ascii") == "+ ok - <= 12.8 -> ... \\u00e9 \\ud83d\\ude00"
    assert fit("✓ · é", "cp1252") == "+ · é"  # cp1252 has · and é
    # never a quote, backslash or control character: JSON and shells stay intact
    for stand_in in ASCII.values():
        assert stand_in.isascii() and not set(stand_in) & set("\"\\\n\r\t")


def test_fitting_writer_passes_the_rest_through():
    raw = io.TextIOWrapper(io.BytesIO(), encoding="cp1252")
    writer = FittingWriter(raw)
    writer.write("✗ driver ≤ 570\n")
    raw.flush()
    assert raw.buffer.getvalue() == b"x driver <= 570\n"
    assert writer.encoding == "cp1252" and not writer.isatty()  # rich and click see the real stream
