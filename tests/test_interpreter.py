"""choose_interpreter's precedence, the pure parsers, and every way running the inspector can fail."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakeenv import find_python, make_fake_env
from wheelhouse import StandIn, build_wheel

from doctor.model.versions import cuda_from_tag
from doctor.probes.interpreter import (
    inspect_interpreter,
    inspect_interpreter_full,
    parse_cuda_from_requires,
    parse_inspector_output,
)
from doctor.probes.target_python import choose_interpreter
from doctor.runner import RunResult

FIXTURES = Path(__file__).parent / "fixtures" / "inspector"


def _env_folder(root: Path, name: str, layout: str = "bin/python") -> str:
    exe = root / name / layout
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text("")
    return str(root / name)


def _real_venv(folder: Path, target: str | None = None) -> Path:
    """A venv's shape: pyvenv.cfg, and bin/python a symlink to an interpreter (this one unless ``target``)."""
    (folder / "bin").mkdir(parents=True)
    (folder / "pyvenv.cfg").write_text(f"home = {os.path.dirname(sys.executable)}\n")
    (folder / "bin" / "python").symlink_to(target or os.path.realpath(sys.executable))
    return folder / "bin" / "python"


def _which(found: dict[str, str]):
    def which(name, path=None):
        return found.get(name)

    return which


# --- choose_interpreter ------------------------------------------------------------------------------

# (what exists: venv / conda / .venv / PATH entries, expected python (relative to root), expected reason)
PRECEDENCE = [
    ({"venv", "conda", "dotvenv", "python3"}, "venv/bin/python", "VIRTUAL_ENV={root}/venv"),
    ({"conda", "dotvenv", "python3"}, "conda/bin/python", "CONDA_PREFIX={root}/conda"),
    ({"dotvenv", "python3"}, "work/.venv/bin/python",
     f"./.venv in the working folder (a venv whose python is {os.path.realpath(sys.executable)})"),
    ({"python3", "python"}, "/usr/bin/python3", "python3 on PATH"),
    ({"python"}, "/usr/bin/python", "python on PATH"),
]


@pytest.mark.parametrize(("present", "expected", "reason"), PRECEDENCE)
def test_choose_interpreter_precedence(tmp_path, present, expected, reason):
    env = {}
    if "venv" in present:
        env["VIRTUAL_ENV"] = _env_folder(tmp_path, "venv")
    if "conda" in present:
        env["CONDA_PREFIX"] = _env_folder(tmp_path, "conda")
    (tmp_path / "work").mkdir()
    if "dotvenv" in present:
        _real_venv(tmp_path / "work" / ".venv")
    on_path = {n: f"/usr/bin/{n}" for n in ("python3", "python") if n in present}
    path, why = choose_interpreter(None, env, str(tmp_path / "work"), which=_which(on_path))
    assert path == (expected if expected.startswith("/") else str(tmp_path / expected))
    assert why == reason.format(root=tmp_path)


@pytest.mark.parametrize(("present", "expected"), [
    ({"own", "dotvenv", "python3"}, "/opt/td/bin/python"),  # torchdoctor's own env with torch: before ./.venv
    ({"own", "venv", "python3"}, "venv/bin/python"),  # an activated environment still comes first
    ({"dotvenv", "python3"}, "work/.venv/bin/python"),  # its own env without torch counts for nothing
])
def test_torchdoctors_own_environment_when_it_holds_torch(tmp_path, present, expected):
    env = {"VIRTUAL_ENV": _env_folder(tmp_path, "venv")} if "venv" in present else {}
    (tmp_path / "work").mkdir()
    if "dotvenv" in present:
        _real_venv(tmp_path / "work" / ".venv")  # only a real venv in the working folder is run
    own = (lambda: "/opt/td/bin/python") if "own" in present else (lambda: None)
    path, why = choose_interpreter(
        None, env, str(tmp_path / "work"), which=_which({"python3": "/usr/bin/python3"}), own=own
    )
    assert path == (expected if expected.startswith("/") else str(tmp_path / expected))
    if expected.startswith("/opt"):
        assert why == "torchdoctor's own environment, which holds torch"


def test_own_environment_python_looks_for_torch_on_disk(tmp_path, monkeypatch):
    import sysconfig

    from doctor.probes.target_python import own_environment_python

    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"purelib": str(site), "platlib": str(site)})
    assert own_environment_python() is None
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("raise SystemExit('never imported')\n")
    assert own_environment_python() == sys.executable


def test_explicit_python_file_folder_and_command(tmp_path):
    exe = tmp_path / "env" / "bin" / "python"
    exe.parent.mkdir(parents=True)
    exe.write_text("")
    env = {"VIRTUAL_ENV": "/ignored"}
    assert choose_interpreter(str(exe), env, "/", which=_which({})) == (str(exe), "--python")
    assert choose_interpreter(str(tmp_path / "env"), env, "/", which=_which({})) == (str(exe), "--python")
    # relative to cwd
    assert choose_interpreter("env/bin/python", env, str(tmp_path), which=_which({}))[0] == str(exe)
    # a bare command name is looked up on PATH
    found = choose_interpreter("python3.11", env, "/", which=_which({"python3.11": "/opt/py311"}))
    assert found == ("/opt/py311", "--python")


def test_explicit_python_windows_and_conda_layouts(tmp_path):
    venv = _env_folder(tmp_path, "winvenv", "Scripts/python.exe")
    conda = _env_folder(tmp_path, "winconda", "python.exe")
    assert choose_interpreter(venv, {}, "/", which=_which({}))[0] == os.path.join(
        venv, "Scripts", "python.exe"
    )
    assert choose_interpreter(conda, {}, "/", which=_which({}))[0] == os.path.join(conda, "python.exe")


def test_explicit_python_missing_says_why(tmp_path):
    (tmp_path / "empty").mkdir()
    path, why = choose_interpreter(str(tmp_path / "empty"), {}, "/", which=_which({}))
    assert path is None and "no bin/python" in why
    path, why = choose_interpreter(
        str(tmp_path / "nope"), {}, "/", which=_which({"python3": "/usr/bin/python3"})
    )
    assert path is None and why == f"--python {tmp_path / 'nope'}: not found"


def test_stale_virtual_env_falls_through_and_says_so(tmp_path):
    env = {"VIRTUAL_ENV": str(tmp_path / "deleted-venv")}
    path, why = choose_interpreter(None, env, str(tmp_path), which=_which({"python3": "/usr/bin/python3"}))
    assert path == "/usr/bin/python3"
    assert why == f"python3 on PATH (VIRTUAL_ENV={tmp_path / 'deleted-venv'} has no python)"


def test_nothing_found(tmp_path):
    path, why = choose_interpreter(None, {}, str(tmp_path), which=_which({}))
    assert path is None
    assert why.startswith("no Python found")


def test_which_gets_the_given_path(tmp_path):
    seen = []

    def which(name, path=None):
        seen.append((name, path))
        return None

    choose_interpreter(None, {"PATH": "/only/here"}, str(tmp_path), which=which)
    assert seen == [("python3", "/only/here"), ("python", "/only/here")]


# --- pure parsers ------------------------------------------------------------------------------------


def _lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines()


@pytest.mark.parametrize(
    ("fixture", "cuda"),
    [
        ("torch-2.14.1-pypi-cu130.requires.txt", "13.0"),  # new style: cuda-toolkit[...]==13.0.3
        ("torch-2.6.0-pypi-cu124.requires.txt", "12.4"),  # old style: nvidia-cuda-runtime-cu12==12.4.127
        ("torch-2.13.0+cpu.requires.txt", None),  # CPU wheel: no CUDA pins
    ],
)
def test_parse_cuda_from_recorded_requires(fixture, cuda):
    assert parse_cuda_from_requires(_lines(fixture)) == cuda


@pytest.mark.parametrize(
    ("line", "cuda"),
    [
        ("nvidia-cuda-runtime-cu11==11.7.99", "11.7"),
        ("nvidia_cuda_runtime_cu12 (==12.1.105)", "12.1"),
        ("nvidia-cuda-runtime==13.0.96.*", "13.0"),
        ("Cuda-Toolkit[cudart] === 13.2.0", "13.2"),
        ("nvidia-cudnn-cu12==9.1.0.70", None),  # cuDNN's version is not CUDA's
        ("nvidia-cuda-runtime-cu12>=12.0", None),  # a range says no exact build
        ("cuda-bindings<14,>=13.0.3", None),
    ],
)
def test_parse_cuda_from_requires_lines(line, cuda):
    assert parse_cuda_from_requires([line]) == cuda


@pytest.mark.parametrize(
    ("version", "cuda"),
    [
        ("0.21.0+cu124", "12.4"),
        ("2.5.1+cu118", "11.8"),
        ("0.29.1+cu130", "13.0"),
        ("2.6.0+cpu", None),
        ("2.6.0", None),
    ],
)
def test_cuda_from_tag(version, cuda):
    assert cuda_from_tag(version) == cuda


# --- mapping recorded inspector output ----------------------------------------------------------------


def _result(stdout="", stderr="", returncode=0, **kw) -> RunResult:
    return RunResult(["/x/python", "inspector.py"], returncode, stdout, stderr, **kw)


def test_recorded_real_cpu_torch_output_maps():
    recorded = (FIXTURES / "real-cpu-torch-2.13.0.inspector.json").read_text()
    interpreter, install, env = parse_inspector_output("/v/bin/python", "--python", _result(recorded))
    assert interpreter.error is None
    assert (interpreter.version, interpreter.env_kind, interpreter.bits) == ("3.11.7", "venv", 64)
    assert install.status == "ok"
    assert install.torch.version == install.torch.build_version == "2.13.0+cpu"
    assert install.torch.cuda is None and install.torch.has_libtorch_cuda is False
    assert install.torch.git_version == "cf30153c4c131c8164ee7798e5022d810682e2cb"
    assert install.cuda_from_requires is None
    assert env.torch_origin.endswith("site-packages/torch/__init__.py")
    assert [d.name for d in env.dists] == ["torch"]


def test_junk_before_the_json_is_tolerated():
    payload = json.dumps({"inspector": 1, "interpreter": {"version": "3.12.1"}, "packages": {}, "dists": []})
    interpreter, install, _ = parse_inspector_output(
        "/x/python", "r", _result("hello from sitecustomize\n" + payload)
    )
    assert interpreter.version == "3.12.1" and interpreter.error is None
    assert install.status == "absent" and install.detail == "torch is not installed in this interpreter"


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (_result(returncode=None, not_found=True), "the interpreter /x/python was not found"),
        (_result(returncode=None, timed_out=True, seconds=20.0), "did not answer within 20s"),
        (_result(returncode=None, error="Permission denied"), "could not start: Permission denied"),
        (_result(returncode=-11, stderr=""), "the inspector was killed by SIGSEGV in /x/python"),
        (
            _result(returncode=1, stderr="Traceback...\nImportError: bad magic number"),
            "the inspector exited with 1 in /x/python: ImportError: bad magic number",
        ),
        (
            _result("<html>garbage</html>"),
            "the inspector printed no JSON in /x/python (got: '<html>garbage</html>')",
        ),
        (_result(""), "the inspector printed no JSON in /x/python (got: 'nothing')"),
    ],
)
def test_failures_become_data(result, expected):
    interpreter, install, env = parse_inspector_output("/x/python", "--python", result)
    assert expected in interpreter.error
    assert "\n" not in interpreter.error
    assert install.status == "error" and install.detail == interpreter.error
    assert env.error == interpreter.error and env.dists == [] and env.executable == "/x/python"


def test_stale_dist_info_and_leftover_folder_are_absent_with_reason():
    stale = {
        "inspector": 1,
        "packages": {"torch": None},
        "dists": [{"name": "torch", "version": "2.6.0", "path": "/sp/torch-2.6.0.dist-info"}],
    }
    _, install, _ = parse_inspector_output("/x/python", "r", _result(json.dumps(stale)))
    assert install.status == "absent" and "stale dist-info" in install.detail and install.torch is None
    leftover = {"inspector": 1, "packages": {"torch": {"folder": "/sp/torch", "origin": None}}, "dists": []}
    _, install, _ = parse_inspector_output("/x/python", "r", _result(json.dumps(leftover)))
    assert install.status == "absent" and "without __init__.py" in install.detail


# --- real processes -----------------------------------------------------------------------------------


def _script(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_hanging_interpreter_times_out_within_the_limit(tmp_path):
    fake = _script(tmp_path / "python", "sleep 30")
    start = time.monotonic()
    interpreter, install = inspect_interpreter(fake, "--python", timeout=1.0)
    elapsed = time.monotonic() - start
    assert elapsed < 5, f"took {elapsed:.1f}s"
    assert "did not answer within 1s" in interpreter.error and install.status == "error"


def test_garbage_printing_interpreter(tmp_path):
    fake = _script(tmp_path / "python", "echo 'Welcome to FakePython'; echo '{not json'")
    interpreter, install = inspect_interpreter(fake, "--python")
    assert interpreter.error == "the inspector printed no JSON in " + fake + " (got: '{not json')"
    assert install.status == "error"


def test_missing_interpreter(tmp_path):
    interpreter, install = inspect_interpreter(str(tmp_path / "no-python"), "--python")
    assert interpreter.error == f"the interpreter {tmp_path / 'no-python'} was not found"
    assert install.status == "error"


def test_crashing_interpreter(tmp_path):
    fake = _script(tmp_path / "python", "echo 'Fatal Python error: init_fs_encoding' >&2; exit 1")
    interpreter, _ = inspect_interpreter(fake, "--python")
    assert interpreter.error == f"the inspector exited with 1 in {fake}: Fatal Python error: init_fs_encoding"


@pytest.mark.slow
@pytest.mark.parametrize("version", ["2.7"])
def test_too_old_python_gives_a_clean_error(version):
    python = find_python(version)
    if python is None:
        pytest.skip(f"no Python {version} interpreter (pyenv or python{version} on PATH)")
    interpreter, install, env = inspect_interpreter_full(python, "--python")
    assert interpreter.version.startswith(version + ".")
    assert (
        interpreter.error
        == f"Python {interpreter.version} is too old: torch needs 3.6+ (current releases need 3.10+)"
    )
    assert install.status == "error" and install.detail == interpreter.error
    assert env.error == interpreter.error


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.6", "3.7"])
def test_python_36_and_37_are_inspected_like_any_other(tmp_path, version):
    # torch 1.x published wheels for both: the inspector runs there (no importlib.metadata on either)
    python = find_python(version)
    if python is None:
        pytest.skip(f"no Python {version} interpreter (pyenv or python{version} on PATH)")
    exe = make_fake_env(tmp_path / "venv", python=python, torch="1.10.2+cu113", cuda="11.3",
                        torchvision="0.11.3+cu113")
    interpreter, install, env = inspect_interpreter_full(str(exe), "--python")
    assert interpreter.error is None and interpreter.version.startswith(version + ".")
    assert install.status == "ok" and install.torch.version == "1.10.2+cu113" and install.torch.cuda == "11.3"
    assert install.torchvision.version == "0.11.3+cu113"
    assert ["torch", "1.10.2+cu113"] in [row[:2] for row in env.installed]
    assert env.markers["python_version"] == version and env.markers["sys_platform"] == sys.platform


def test_running_interpreter_itself_is_inspected():
    interpreter, install, env = inspect_interpreter_full(sys.executable, "test")
    assert interpreter.error is None
    assert interpreter.version == sys.version.split()[0]
    assert interpreter.prefix == sys.prefix
    assert install.status in ("ok", "absent")
    # the inspector's own folder (doctor/probes) must not be on the sys.path it reports
    probes = str(Path(__file__).parent.parent / "doctor" / "probes")
    assert all(os.path.realpath(p) != os.path.realpath(probes) for p in env.sys_path)


# --- shims and broken interpreters, through the real CLI -------------------------------------------------


def _cli(args, env_extra, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[1]), TORCHDOCTOR_NVML="0", NO_COLOR="1",
               COLUMNS="200", **env_extra)
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


def _shim(tmp_path: Path, real: Path) -> Path:
    """A pyenv-style shim: a script in ~/.pyenv/shims that starts the real interpreter."""
    shims = tmp_path / ".pyenv" / "shims"
    shims.mkdir(parents=True)
    return Path(_script(shims / "python3", f'exec "{real}" "$@"'))


def test_a_shim_is_reported_by_the_interpreter_it_starts(tmp_path):
    from fakeenv import make_fake_env

    real = make_fake_env(tmp_path / "venv", torch="2.13.0+cpu", cuda=None)
    shim = _shim(tmp_path, real)
    (tmp_path / "sysroot").mkdir()
    env = {"TORCHDOCTOR_SYSROOT": str(tmp_path / "sysroot"), "PATH": f"{shim.parent}:/usr/bin:/bin"}
    for args in (["--python", str(shim)], []):  # named, and found on PATH
        res = _cli(["check", "--no-smoke", "--json", *args], env, tmp_path)
        interp = json.loads(res.stdout)["snapshot"]["interpreter"]
        assert interp["path"] == str(real)  # the target's sys.executable, not the shim
        assert interp["found_as"] == f"{shim} (a pyenv shim)"
        assert interp["reason"] == ("--python" if args else "python3 on PATH")
    text = _cli(["check", "--no-smoke"], env, tmp_path).stdout
    assert f"Python    {real} · " in text and f"found as {shim} (a pyenv shim)" in text
    # the plan's commands name the real interpreter: a shim picks its Python by folder
    plan = _cli(["fix", "--dry-run", "--no-smoke", "--json"], env, tmp_path).stdout
    assert str(shim) not in json.dumps(json.loads(plan)["plan"])


def test_a_venv_python_is_kept_as_given(tmp_path):
    from fakeenv import make_fake_env

    real = make_fake_env(tmp_path / "venv", torch="2.13.0+cpu", cuda=None)
    interpreter, _, _ = inspect_interpreter_full(str(real), "--python")
    assert interpreter.path == str(real) and interpreter.found_as is None


BROKEN = (
    "echo 'Could not find platform independent libraries <prefix>' >&2\n"
    "echo 'Fatal Python error: init_fs_encoding: failed to get the Python codec of the filesystem encoding' "
    ">&2\n"
    "echo 'Python runtime state: core initialized' >&2\n"
    "echo 'Traceback (most recent call last):' >&2\n"
    "echo '  File \"<frozen importlib._bootstrap>\", line 1027, in _find_and_load' >&2\n"
    "echo \"ModuleNotFoundError: No module named 'encodings'\" >&2\n"
    "exit 1"
)


def test_a_broken_interpreter_named_with_python_is_exit_2_with_what_it_said(tmp_path):
    broken = _script(tmp_path / "python", BROKEN)
    (tmp_path / "sysroot").mkdir()
    res = _cli(
        ["check", "--no-smoke", "--python", broken],
        {"TORCHDOCTOR_SYSROOT": str(tmp_path / "sysroot")},
        tmp_path,
    )
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines[0] == (f"torchdoctor: error: --python {broken}: the inspector exited with 1 in {broken}: "
                        "ModuleNotFoundError: No module named 'encodings'")
    assert (
        "  Fatal Python error: init_fs_encoding: failed to get the Python codec of the filesystem encoding"
        in lines
    )
    assert not any("File " in line for line in lines)  # frames say where, not why
    missing = _cli(["check", "--no-smoke", "--python", str(tmp_path / "nope")], {}, tmp_path)
    assert missing.returncode == 2  # the same code as an interpreter that is not there


def test_a_broken_interpreter_found_by_looking_is_a_finding_with_what_it_said(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    _script(venv / "bin" / "python", BROKEN)
    (tmp_path / "sysroot").mkdir()
    env = {"TORCHDOCTOR_SYSROOT": str(tmp_path / "sysroot"), "VIRTUAL_ENV": str(venv)}
    res = _cli(["check", "--no-smoke", "--json"], env, tmp_path)
    assert res.returncode == 1
    report = json.loads(res.stdout)
    assert "interpreter-unusable" in {f["id"] for f in report["findings"]}
    assert (
        "Fatal Python error: init_fs_encoding: failed to get the Python codec of the filesystem encoding"
        in report["snapshot"]["interpreter"]["error_lines"]
    )
    text = _cli(["check", "--no-smoke"], env, tmp_path).stdout
    assert "\n            Fatal Python error: init_fs_encoding" in text  # under the Python row, aligned


def test_explain_with_a_broken_traceback_interpreter_is_not_a_usage_error(tmp_path):
    # explain takes the interpreter from the traceback: it was not named, so a broken one is a finding
    env_dir = tmp_path / "env"
    (env_dir / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    (env_dir / "bin").mkdir()
    _script(env_dir / "bin" / "python", BROKEN)
    (tmp_path / "sysroot").mkdir()
    log = (f'  File "{env_dir}/lib/python3.12/site-packages/torch/cuda/__init__.py", line 1, in <module>\n'
           "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[1]), TORCHDOCTOR_NVML="0",
               TORCHDOCTOR_SYSROOT=str(tmp_path / "sysroot"))
    res = subprocess.run([sys.executable, "-m", "doctor", "explain", "--json", "-"], input=log, text=True,
                         capture_output=True, env=env, cwd=tmp_path, timeout=120)
    assert res.returncode == 1, res.stderr
    report = json.loads(res.stdout)
    assert report["interpreter_from_traceback"] is True
    assert "interpreter-unusable" in {f["id"] for f in report["check"]["findings"]}


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *args,
                           "--disable-pip-version-check", "--no-input", "-q"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_each_inspection_names_what_is_installed_now(tmp_path):
    """Real pip, a local wheel, no network: after an install and an uninstall in the target, the next
    inspection says what is there now (the inspector lists the CUDA libraries, nvidia-*)."""
    python = make_fake_env(tmp_path / "env", python=sys.executable, torch="2.6.0+cu126", cuda="12.6")
    wheels = tmp_path / "wheels"
    build_wheel(wheels, StandIn("nvidia-tinylib-cu12", "12.6.1", (),
                                files={"nvidia/tinylib/__init__.py": ""}))

    def names() -> set[str]:
        _, install, facts = inspect_interpreter_full(str(python), "--python")
        assert install.torch.version == "2.6.0+cu126"
        return {d.name for d in facts.dists}

    assert "nvidia-tinylib-cu12" not in names()
    _pip(python, "install", "--no-index", "--find-links", str(wheels), "nvidia-tinylib-cu12")
    assert "nvidia-tinylib-cu12" in names()
    _pip(python, "uninstall", "-y", "nvidia-tinylib-cu12")
    assert "nvidia-tinylib-cu12" not in names()


# --- ./.venv of the working folder: only a real venv runs (issue 27) ------------------------------------


def _choose_in(work: Path):
    return choose_interpreter(None, {}, str(work), which=_which({"python3": "/usr/bin/python3"}))


@pytest.mark.skipif(os.name != "posix", reason="symlinked venvs")
def test_dot_venv_regular_file_or_script_is_refused(tmp_path):
    script = tmp_path / ".venv" / "bin" / "python"
    script.parent.mkdir(parents=True)
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    script.write_text("#!/bin/sh\ntouch pwned\n")
    script.chmod(0o755)
    path, why = _choose_in(tmp_path)
    assert path == "/usr/bin/python3"
    assert why.startswith("python3 on PATH (./.venv refused: ") and "regular file" in why


@pytest.mark.skipif(os.name != "posix", reason="symlinked venvs")
def test_dot_venv_link_into_the_working_folder_is_refused(tmp_path):
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "launcher").write_text("#!/bin/sh\n")
    _real_venv(tmp_path / ".venv", target=str(tmp_path / "tools" / "launcher"))
    path, why = _choose_in(tmp_path)
    assert path == "/usr/bin/python3" and "inside the working folder" in why


@pytest.mark.skipif(os.name != "posix", reason="symlinked venvs")
def test_dot_venv_without_pyvenv_cfg_is_refused(tmp_path):
    python = _real_venv(tmp_path / ".venv")
    (tmp_path / ".venv" / "pyvenv.cfg").unlink()
    assert python.is_symlink()
    path, why = _choose_in(tmp_path)
    assert path == "/usr/bin/python3" and "no pyvenv.cfg" in why


def test_dot_venv_on_windows_needs_a_home_outside(tmp_path):
    from doctor.probes.target_python import working_folder_venv

    exe = tmp_path / ".venv" / "Scripts" / "python.exe"
    exe.parent.mkdir(parents=True)
    exe.write_text("")
    cfg = tmp_path / ".venv" / "pyvenv.cfg"
    cfg.write_text(f"home = {tmp_path / 'py'}\n")
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "python.exe").write_text("")
    assert working_folder_venv(str(exe), str(tmp_path), platform="win32")[0] is None
    outside = tmp_path.parent / f"{tmp_path.name}-py"
    outside.mkdir()
    (outside / "python.exe").write_text("")
    cfg.write_text(f"home = {outside}\n")
    assert working_folder_venv(str(exe), str(tmp_path), platform="win32")[0] == str(outside / "python.exe")


def test_a_half_written_torch_folder_is_not_an_install():
    """The inspector lists a torch folder no dist-info describes as a leftover: torch is not installed (an
    error, so the plan installs it), never a healthy torch read from version.py alone."""
    data = {"inspector": 1, "packages": {"torch": {"folder": "/sp/torch", "origin": "/sp/torch/__init__.py",
                                                   "version": None, "version_py": {"__version__": "2.7.1"}}},
            "dists": [], "leftovers": ["/sp/torch"]}
    _, install, facts = parse_inspector_output("/x/python", "r", _result(json.dumps(data)))
    assert install.status == "absent" and "half-written torch at /sp/torch" in install.detail
    assert facts.leftovers == ["/sp/torch"]


def test_a_later_json_line_cannot_pass_for_the_inspector():
    """Something printing at exit (an atexit hook in a sitecustomize) after the inspector: the object with
    this run's nonce is the inspector's; one with another nonce, or none, printed later does not win."""
    real = {"inspector": 1, "nonce": "n1", "interpreter": {"version": "3.11.7"}, "packages": {}, "dists": []}
    forged = {"inspector": 1, "interpreter": {"version": "9.9"}, "packages": {}, "dists": []}
    other = dict(forged, nonce="n0")
    out = "\n".join(["hello from sitecustomize", json.dumps(real), json.dumps(forged), json.dumps(other)])
    interpreter, _, _ = parse_inspector_output("/x/python", "r", _result(out), nonce="n1")
    assert interpreter.version == "3.11.7"
