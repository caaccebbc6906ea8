"""Start-up regression guard, without timing anything: what each path imports, read from sys.modules in a
fresh interpreter. tests/test_imports.py already keeps torch, pynvml, psutil and rich out of `--help` and
torch and rich out of `check --no-smoke --json`; this adds the rest of what keeps their start-up short:
each package listed here is one a plain command does not need to import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import make_fake_env

from doctor.probes.target_python import INSPECTOR

REPO = Path(__file__).resolve().parents[1]
HEAVY_ANYWHERE = {"torch", "numpy", "rich"}  # never in torchdoctor's own process on these paths


def modules_after(argv: list[str], env_extra: dict[str, str] | None = None, cwd=None) -> set[str]:
    """sys.modules after ``torchdoctor argv`` in a fresh interpreter (stdout swallowed)."""
    script = (
        "import contextlib, io, sys\nfrom doctor.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    main({argv!r})\n"
        "mods = sorted(sys.modules)\nimport json\nprint(json.dumps(mods), file=sys.__stderr__)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), **(env_extra or {}))
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120, cwd=cwd
    )
    return set(json.loads(res.stderr.strip().splitlines()[-1]))


def doctor_modules(mods: set[str]) -> set[str]:
    return {m for m in mods if m == "doctor" or m.startswith("doctor.")}


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["check", "--help"]])
def test_help_and_version_load_only_the_cli(argv):
    mods = modules_after(argv)
    # No probe, rule, table or command module: help is typer alone (the commands import lazily).
    # doctor.app.process: the signal guard every command runs in (signal and threading, loaded by typer
    # anyway).
    assert doctor_modules(mods) <= {"doctor", "doctor.cli", "doctor.cli.commands", "doctor.errors",
                                    "doctor.exitcodes", "doctor.app", "doctor.app.process"}
    assert not (HEAVY_ANYWHERE | {"psutil", "pynvml", "concurrent.futures", "json"}) & mods
    if argv[0].startswith("--"):
        # typer (0.2x) coerces option values through pydantic (a heavy import, and adapters built per
        # option); the top-level help and --version have no such option, so they skip it.
        assert "pydantic" not in mods


def test_check_no_smoke_loads_only_what_it_uses(tmp_path):
    python = make_fake_env(tmp_path / "env", python=sys.executable, torch="2.6.0+cu126", cuda="12.6")
    mods = modules_after(
        ["check", "--no-smoke", "--json", "--python", str(python)],
        {"TORCHDOCTOR_NVML": "0", "TORCHDOCTOR_SYSROOT": str(tmp_path)},
    )
    assert not HEAVY_ANYWHERE & mods
    assert "pynvml" not in mods  # TORCHDOCTOR_NVML=0: the NVML bindings (and ctypes) are not even imported
    # No smoke test: its probe module is not loaded; JSON output: no text/markdown renderer; and
    # nothing from the other commands (fix, --from, fleet, distributed).
    unused = {
        "doctor.probes.runtime",
        "doctor.render.text",
        "doctor.render.markdown",
        "doctor.fix.run",
        "doctor.inputs.reports",
        "doctor.inputs.collect_env",
        "doctor.app.fleet",
        "doctor.inputs.nodes",
        "doctor.render.fleet",
        "doctor.distributed",
        "doctor.render.distributed",
    }
    assert not unused & mods
    # What it does use is there (so this test notices when the path changes rather than passing vacuously).
    assert {"doctor.probes.interpreter", "doctor.app.diagnose", "doctor.render.json"} <= mods


def _inspector_modules(python: str) -> tuple[dict, set[str]]:
    """Run the inspector as torchdoctor does (a file, as __main__) and list what it imported."""
    wrapper = (
        "import runpy, sys, json, io, contextlib\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        f"        runpy.run_path({str(INSPECTOR)!r}, run_name='__main__')\n"
        "    except SystemExit:\n"
        "        pass\n"
        "mods = sorted(sys.modules)\n"
        "print(out.getvalue().strip())\n"
        "print(json.dumps(mods))\n"
    )
    res = subprocess.run([python, "-c", wrapper], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    report, mods = res.stdout.strip().splitlines()[-2:]
    return json.loads(report), set(json.loads(mods))


def test_inspector_reads_dist_info_without_importlib_metadata(tmp_path):
    """The inspector reads plain dist-info folders and torch's generated version.py itself, without
    importlib.metadata (email, zipfile, pathlib) or ast: they were most of its work."""
    python = make_fake_env(
        tmp_path / "env", python=sys.executable, torch="2.6.0+cu126", cuda="12.6", torchvision="0.21.0"
    )
    report, mods = _inspector_modules(str(python))
    assert report["packages"]["torch"]["version"] == "2.6.0+cu126"
    assert report["packages"]["torch"]["version_py"]["cuda"] == "12.6"
    assert any(r.startswith("nvidia-cuda-runtime-cu12") for r in report["packages"]["torch"]["requires"])
    assert not {"importlib.metadata", "email", "zipfile", "ast", "torch"} & mods, sorted(mods)


def test_inspector_falls_back_to_importlib_metadata_for_egg_info(tmp_path):
    """An egg-info torch (`setup.py develop`) is left to importlib.metadata, which knows its format."""
    python = make_fake_env(tmp_path / "env", python=sys.executable, torch=None)
    site = next((tmp_path / "env").glob("lib/python3*/site-packages"))
    egg = site / "torch.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.7.0a0+git1234\n")
    (egg / "requires.txt").write_text("filelock\n\n[opt-einsum]\nopt-einsum>=3.3\n")
    report, mods = _inspector_modules(str(python))
    assert "importlib.metadata" in mods
    (torch,) = [d for d in report["dists"] if d["name"] == "torch"]
    assert torch["version"] == "2.7.0a0+git1234"


# What `check --no-smoke --json` may import besides the standard library: an explicit list, so that a new
# dependency on the hot path (rich above all) is a decision, not an accident. typer reads every
# command line.
CHECK_JSON_THIRD_PARTY = {"doctor", "typer", "shellingham", "annotated_doc", "packaging"}
# The interpreter's own start-up adds these (an editable install's finder, setuptools' distutils shim).
SITE_HOOKS = ("__editable__", "_distutils_hack", "sitecustomize", "usercustomize", "__main__")
# JSON output never needs the terminal library, and typer's pydantic (0.29+) is kept out by the version cap.
CHECK_JSON_NEVER = {"rich", "pydantic"}


def test_check_no_smoke_json_imports_only_the_allowed_packages(tmp_path):
    """The start-up guard: the top-level packages `check --no-smoke --json` imports are the
    standard library and an explicit list, and never rich."""
    python = make_fake_env(tmp_path / "env", python=sys.executable, torch="2.6.0+cu126", cuda="12.6")
    sysroot = tmp_path / "sysroot"
    (sysroot / "proc").mkdir(parents=True)
    (sysroot / "proc" / "meminfo").write_text("MemTotal: 24684092 kB\nMemAvailable: 24188892 kB\n"
                                               "SwapTotal: 0 kB\nSwapFree: 0 kB\n")
    extra = {"TORCHDOCTOR_NVML": "0", "TORCHDOCTOR_SYSROOT": str(sysroot)}
    mods = modules_after(["check", "--no-smoke", "--json", "--python", str(python)], extra, cwd=tmp_path)
    tops = {m.split(".")[0] for m in mods}
    foreign = {t for t in tops if t not in sys.stdlib_module_names and not t.startswith(SITE_HOOKS)}
    assert foreign <= CHECK_JSON_THIRD_PARTY, sorted(foreign - CHECK_JSON_THIRD_PARTY)
    assert not CHECK_JSON_NEVER & mods, sorted(CHECK_JSON_NEVER & mods)


def test_a_pyproject_that_is_not_ours_costs_no_toml_parser(tmp_path):
    """`check` in a project folder (CI runs it there) reads ./pyproject.toml, but parses it only when it may
    hold [tool.torchdoctor]: another tool's file is not ours to parse or judge."""
    python = make_fake_env(tmp_path / "env", python=sys.executable, torch="2.6.0+cu126", cuda="12.6")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'app'\ndependencies = ['torch', "
        "'torchdoctor>=0.2']"
                                            "\n\n[tool.ruff]\nline-length = 100\n")
    extra = {"TORCHDOCTOR_NVML": "0"}
    argv = ["check", "--no-smoke", "--json", "--python", str(python)]
    mods = modules_after(argv, extra, cwd=project)
    never = {"tomllib", "tomli"}
    assert not never & mods, sorted(never & mods)
    (project / "pyproject.toml").write_text("[tool.torchdoctor]\nignore = ['shm-too-small']\n")
    assert {"tomllib", "tomli"} & modules_after(argv, extra, cwd=project)  # ours: read, parsed and checked
