"""End to end: installs that cannot work, through the real CLI (issue 29, the install side).

Each test builds the broken install from real parts (a real venv of a real interpreter, metadata-only
distributions, tests/fakeenv.py; or a collect_env paste) and runs ``python -m doctor`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import add_dist_info, find_python, make_fake_env, site_packages

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "nvidia"))
from fake_smi import write_fake_nvidia_smi  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
H100 = {"name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "mem_mib": 81559}
RTX4090 = {"name": "NVIDIA GeForce RTX 4090", "cc": "8.9", "mem_mib": 24564}


def run_cli(args, tmp_path, env_extra=None, bin_dir=None, cwd=None, executable=None, drop=()):
    sysroot = tmp_path / "sysroot"
    sysroot.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", *drop)}
    env["PATH"] = (f"{bin_dir}{os.pathsep}" if bin_dir else "") + env.get("PATH", "")
    env["PYTHONPATH"] = str(REPO)
    env.update(TORCHDOCTOR_NVML="0", TORCHDOCTOR_SYSROOT=str(sysroot), NO_COLOR="1", COLUMNS="120")
    env.update(env_extra or {})
    argv = [executable] if executable else [sys.executable, "-m", "doctor"]
    return subprocess.run(argv + list(args), capture_output=True, text=True, env=env, cwd=cwd or tmp_path,
                          timeout=120)


def python_or_skip(version: str) -> str:
    python = find_python(version)
    if python is None:
        pytest.skip(f"needs a real Python {version} interpreter (pyenv {version})")
    return python


def check_json(python, tmp_path, bin_dir=None, extra=(), env_extra=None):
    args = ["check", "--no-smoke", "--json", "--python", str(python), *extra]
    res = run_cli(args, tmp_path, env_extra, bin_dir)
    assert "Traceback" not in res.stderr, res.stderr
    return res, json.loads(res.stdout)


def finding(report, fid):
    found = [f for f in report["findings"] if f["id"] == fid]
    assert found, [f["id"] for f in report["findings"]]
    return found[0]


def remove_dists(site: Path, *prefixes: str) -> list[str]:
    gone = []
    for path in sorted(site.glob("*.dist-info")):
        if path.name.lower().startswith(prefixes):
            shutil.rmtree(path)
            gone.append(path.name)
    return gone


# --- row 1: the CUDA wheels torch declares are missing ----------------------------------------------


@pytest.mark.slow
def test_missing_cuda_wheels_are_an_error_with_the_install_command(tmp_path):
    python = make_fake_env(tmp_path / "venv", python=python_or_skip("3.12"), torch="2.14.1", cuda="13.0")
    gone = remove_dists(site_packages(tmp_path / "venv"), "cuda_toolkit", "nvidia_")
    assert gone  # what pip install --no-deps (or a mirror without them) leaves out
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [H100], driver="610.43.02", cuda="13.3", banner="kmd")
    res, report = check_json(python, tmp_path, bin_dir)
    assert res.returncode == 1, report["findings"]
    unmet = finding(report, "torch-requirements-unmet")
    assert unmet["severity"] == "error"
    names = {u["name"] for u in unmet["evidence"]["unmet"]}
    assert names == {"cuda-toolkit", "nvidia-cudnn-cu13"}
    command = unmet["fix"]["commands"][0]
    assert command.startswith(f"{python} -m pip install ")
    extras = "cublas,cudart,cufft,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx"
    assert f"'cuda-toolkit[{extras}]==13.0.3'" in command
    assert '"nvidia-cudnn-cu13==9.24.0.43"' in command
    text = run_cli(["check", "--no-smoke", "--python", str(python)], tmp_path, bin_dir=bin_dir).stdout
    assert "nothing to change" not in text


@pytest.mark.slow
def test_declared_requirements_installed_pass(tmp_path):
    python = make_fake_env(tmp_path / "venv", python=python_or_skip("3.12"), torch="2.14.1", cuda="13.0")
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [H100], driver="610.43.02", cuda="13.3", banner="kmd")
    res, report = check_json(python, tmp_path, bin_dir)
    assert res.returncode == 0, report["findings"]
    checks = {c["rule"]: c["status"] for c in report["checks"]}
    assert checks["declared-requirements"] == "passed"


@pytest.mark.slow
def test_two_cuda_majors_of_one_library_are_flagged(tmp_path):
    python = make_fake_env(tmp_path / "venv", python=python_or_skip("3.12"), torch="2.5.1+cu121", cuda="12.1",
                           requires=["filelock", 'nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux"'])
    add_dist_info(site_packages(tmp_path / "venv"), "nvidia-cudnn-cu11", "8.7.0.84")
    res, report = check_json(python, tmp_path)
    two = finding(report, "cuda-wheels-two-majors")
    assert two["evidence"]["doubled"] == {"nvidia-cudnn": ["nvidia-cudnn-cu11", "nvidia-cudnn-cu12"]}
    assert "nvidia-cudnn-cu11" in two["fix"]["commands"][0] and "uninstall" in two["fix"]["commands"][0]


# --- row 2: torch's cuDNN pin beside TensorFlow's -----------------------------------------------------


TORCH_241_REQUIRES = [
    "filelock", "typing-extensions>=4.8.0", "sympy", "networkx", "jinja2", "fsspec",
    'nvidia-cuda-runtime-cu12==12.1.105; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-cublas-cu12==12.1.3.1; platform_system == "Linux" and platform_machine == "x86_64"',
    'triton==3.0.0; platform_system == "Linux" and platform_machine == "x86_64" and python_version < "3.13"',
]


@pytest.mark.slow
def test_tensorflow_cudnn_beside_torch_is_an_error_not_torchs_cudnn(tmp_path):
    venv = tmp_path / "venv"
    python = make_fake_env(venv, python=python_or_skip("3.12"), torch="2.4.1+cu121", cuda="12.1",
                           requires=TORCH_241_REQUIRES)
    site = site_packages(venv)
    remove_dists(site, "nvidia_cudnn_cu12")
    add_dist_info(site, "nvidia-cudnn-cu12", "8.9.4.25")
    add_dist_info(site, "tensorflow", "2.15.0", ["nvidia-cudnn-cu12==8.9.4.25"])
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [RTX4090], driver="570.124.04", cuda="12.8")
    res, report = check_json(python, tmp_path, bin_dir)
    assert res.returncode == 1
    cudnn = finding(report, "torch-cudnn-requirement-unmet")
    assert cudnn["severity"] == "error"
    assert "nvidia-cudnn-cu12==9.1.0.70" in cudnn["title"] and "8.9.4.25" in cudnn["title"]
    assert "separate virtual environments" in cudnn["fix"]["summary"]
    assert '"nvidia-cudnn-cu12==9.1.0.70"' in cudnn["fix"]["commands"][0]
    assert "torch-requirements-unmet" not in {f["id"] for f in report["findings"]}


# --- row 3: NumPy 2 under a torch built against NumPy 1 -------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("torch,numpy,bad", [("2.2.2+cu121", "2.1.0", True), ("2.3.0+cu121", "2.1.0", False),
                                             ("2.2.2+cu121", "1.26.4", False)])
def test_numpy2_under_torch_before_2_3(tmp_path, torch, numpy, bad):
    venv = tmp_path / "venv"
    python = make_fake_env(venv, python=python_or_skip("3.11"), torch=torch, cuda="12.1")
    add_dist_info(site_packages(venv), "numpy", numpy)
    res, report = check_json(python, tmp_path)
    ids = {f["id"] for f in report["findings"]}
    assert ("numpy-too-new-for-torch" in ids) is bad
    if bad:
        found = finding(report, "numpy-too-new-for-torch")
        assert found["severity"] == "error" and res.returncode == 1
        assert "Numpy is not available" in found["detail"]
        assert found["fix"]["commands"] == [f"{python} -m pip install 'numpy<2'"]
        assert "pytorch/pytorch#132179" in found["evidence"]["table.source"]


# --- row 4: a stale torch on PYTHONPATH ----------------------------------------------------------------


@pytest.mark.slow
def test_stale_torch_on_pythonpath_is_taken_off_pythonpath_never_uninstalled(tmp_path):
    python = make_fake_env(tmp_path / "venv", python=python_or_skip("3.12"), torch="2.5.1+cu121", cuda="12.1")
    stale = tmp_path / "stale"
    make_fake_env(tmp_path / "old", python=python_or_skip("3.12"), torch="2.1.0+cu118", cuda="11.8",
                  deps=False)
    shutil.copytree(site_packages(tmp_path / "old"), stale)
    pythonpath = f"{stale}{os.pathsep}{REPO}"
    res = run_cli(["check", "--no-smoke", "--json", "--python", str(python)], tmp_path,
                  {"PYTHONPATH": pythonpath})
    report = json.loads(res.stdout)
    shadow = finding(report, "pythonpath-torch-shadows")
    assert shadow["severity"] == "error"  # torch 2.1 has no wheel for Python 3.12
    assert shadow["fix"]["commands"] == [f"export PYTHONPATH={REPO}"]
    ids = {f["id"] for f in report["findings"]}
    assert "duplicate-torch-installs" not in ids
    assert "torch-requirements-unmet" not in ids  # the stale copy's needs are no remedy for the venv
    everything = json.dumps(report["findings"]) + json.dumps(report["plan"])
    assert "uninstall" not in everything
    assert report["plan"]["steps"] == [] and report["plan"]["status"] == "none"
    text = run_cli(["fix", "--dry-run", "--no-smoke", "--python", str(python)], tmp_path,
                   {"PYTHONPATH": pythonpath}).stdout
    assert "uninstall" not in text and "torch==2.1.0" not in text, text


# --- row 7: torchdoctor installed in the environment that holds torch, run by path -----------------------


@pytest.mark.slow
def test_torchdoctor_run_by_path_inspects_its_own_environment(tmp_path):
    # The venv holds torch and torchdoctor (its code and dependencies reached through a .pth file, as an
    # install would put them there); the console script is what pip writes. python3 on PATH is another one.
    venv = tmp_path / "venv"
    python = make_fake_env(venv, python=sys.executable, torch="2.5.1+cpu", cuda=None)
    site = site_packages(venv)
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "torchdoctor.pth").write_text("\n".join([str(REPO), *deps]) + "\n")
    script = venv / "bin" / "torchdoctor"
    script.write_text(f"#!{python}\nimport sys\nfrom doctor.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    other = make_fake_env(tmp_path / "global", python=sys.executable, torch=None)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(other)
    res = run_cli(["check", "--no-smoke", "--json"], tmp_path, bin_dir=bin_dir, executable=str(script),
                  drop=("PYTHONPATH",))
    report = json.loads(res.stdout)
    interpreter = report["snapshot"]["interpreter"]
    assert interpreter["path"] == str(python), interpreter
    assert interpreter["reason"] == "torchdoctor's own environment, which holds torch"
    assert report["snapshot"]["install"]["torch"]["version"] == "2.5.1+cpu"
    assert "torch-not-installed" not in {f["id"] for f in report["findings"]}
    text = run_cli(["check", "--no-smoke"], tmp_path, bin_dir=bin_dir, executable=str(script),
                   drop=("PYTHONPATH",)).stdout
    assert "chosen: torchdoctor's own environment, which holds torch" in text, text


# --- row 8: Python 3.6 and 3.7 targets (torch 1.x had wheels for both) -------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.6", "3.7"])
def test_python_36_and_37_targets_are_judged_like_any_other(tmp_path, version):
    python = make_fake_env(tmp_path / "venv", python=python_or_skip(version), torch="1.10.2+cu113",
                           cuda="11.3",
                           torchvision="0.11.3+cu113", requires=["typing-extensions"])
    bin_dir = tmp_path / "bin"
    write_fake_nvidia_smi(bin_dir, [RTX4090], driver="570.124.04", cuda="12.8")
    res, report = check_json(python, tmp_path, bin_dir)
    assert res.returncode != 2, res.stderr
    snap = report["snapshot"]
    assert snap["interpreter"]["error"] is None and snap["interpreter"]["version"].startswith(version + ".")
    assert snap["install"]["torch"]["version"] == "1.10.2+cu113"
    assert {c["rule"]: c["status"] for c in report["checks"]}["declared-requirements"] == "passed"
    assert "interpreter-unusable" not in {f["id"] for f in report["findings"]}


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.6", "3.7"])
def test_smoke_child_runs_on_python_36_and_37(tmp_path, version):
    import test_runtime_probe as standin

    python = standin.make_standin_venv(tmp_path / "venv", python_or_skip(version))
    runtime = standin.run_scenario(python, tmp_path, standin.CUDA_OK)
    assert runtime.status == "ok", (runtime.detail, runtime.stderr_tail)
    assert [s.status for s in runtime.steps] == ["ok"] * len(runtime.steps) and len(runtime.steps) >= 9


# --- row 5: a Windows paste whose torch does not import ------------------------------------------------

PASTES = REPO / "tests" / "fixtures" / "collect_env"


@pytest.mark.slow
def test_windows_paste_with_torch_that_does_not_import(tmp_path):
    paste = PASTES / "composed-2.4.0-cu121-windows-not-importable.txt"
    res = run_cli(["check", "--from", str(paste), "--json"], tmp_path)
    assert res.returncode == 1, res.stdout[-2000:]
    report = json.loads(res.stdout)
    found = finding(report, "torch-import-error")
    assert found["severity"] == "error"
    assert report["snapshot"]["runtime"]["status"] == "import-error"
    # torch 2.4.0's own DLL regression first, then the Visual C++ runtime
    detail = found["detail"]
    assert detail.index("fbgemm.dll") < detail.index("vcruntime140_1.dll")
    assert "pytorch/pytorch#131662" in detail and "c10.dll" in detail and "msvcp140.dll" in detail
    assert "https://aka.ms/vs/17/release/vc_redist.x64.exe" in found["fix"]["links"]
    assert found["fix"]["commands"] == ['py -c "import torch; print(torch.__version__)"']
    text = run_cli(["check", "--from", str(paste)], tmp_path).stdout
    assert "no problems found" not in text and "python3" not in text


# --- row 6: a 32-bit Windows Python; the Store's Python; the 260-character limit ------------------------


@pytest.mark.slow
def test_32_bit_windows_python_paste(tmp_path):
    res = run_cli(["check", "--from", str(PASTES / "composed-windows-32bit-python.txt"), "--json"], tmp_path)
    assert res.returncode == 1
    report = json.loads(res.stdout)
    found = finding(report, "python-32-bit")
    assert found["severity"] == "error" and "no torch wheels exist" in found["title"]
    assert found["fix"]["commands"] == ["py -3.12-64 -m venv .venv"]
    assert "python-unsupported" not in {f["id"] for f in report["findings"]}  # not "install Python 3.15"
    assert report["plan"]["status"] == "manual" and report["plan"]["steps"] == []
    assert "windows-x86" in report["plan"]["reason"]
    assert "python3" not in res.stdout


class FakeWinreg:
    """The part of ``winreg`` the probe uses, over a dict {(key path, value name): value}."""

    HKEY_LOCAL_MACHINE = "HKLM"

    def __init__(self, values, error=None):
        self.values, self.error, self.opened = values, error, []

    def OpenKey(self, root, path):  # noqa: N802 - winreg's names
        import contextlib

        if self.error is not None:
            raise self.error
        self.opened.append((root, path))
        return contextlib.nullcontext(path)

    def QueryValueEx(self, key, name):  # noqa: N802
        if (key, name) not in self.values:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        return self.values[(key, name)], 4  # REG_DWORD


@pytest.mark.parametrize("values,error,enabled,why", [
    ({(r"SYSTEM\CurrentControlSet\Control\FileSystem", "LongPathsEnabled"): 1}, None, True, None),
    ({(r"SYSTEM\CurrentControlSet\Control\FileSystem", "LongPathsEnabled"): 0}, None, False, None),
    ({}, None, False, None),  # the value absent: Windows' default, disabled
    ({}, PermissionError(13, "Access is denied"), None, "could not be read"),
    ({(r"SYSTEM\CurrentControlSet\Control\FileSystem", "LongPathsEnabled"): "yes"}, None, None,
     "not a number"),
])
def test_long_paths_probe_reads_the_registry(values, error, enabled, why):
    from doctor.probes.environment.windows import probe_windows

    fake = FakeWinreg(values, error)
    facts = probe_windows(fake)
    assert facts.long_paths_enabled is enabled
    assert (why in facts.why) if why else facts.why is None
    if error is None:
        assert fake.opened == [("HKLM", r"SYSTEM\CurrentControlSet\Control\FileSystem")]


def test_long_paths_probe_off_windows_says_why():
    from doctor.probes.environment.windows import probe_windows

    if sys.platform.startswith("win"):
        pytest.skip("winreg exists here")
    assert probe_windows().why == "winreg is not available (not Windows)"


STORE = (r"C:\Users\u\AppData\Local\Microsoft\WindowsApps\PythonSoftwareFoundation.Python.3.12_qbz5n2kfra8p0"
         r"\python.exe")


@pytest.mark.slow
def test_store_python_and_disabled_long_paths_from_a_windows_report(tmp_path):
    # A report of a Windows machine (there is none to probe): this machine's report with the Windows facts in
    # it.
    python = make_fake_env(tmp_path / "venv", python=python_or_skip("3.12"), torch="2.5.1+cpu", cuda=None)
    res, report = check_json(python, tmp_path)
    snap = report["snapshot"]
    snap["host"].update(os="windows", machine="x86_64", libc="")
    snap["interpreter"].update(path=STORE, version="3.12.7")
    snap["environment"]["windows"] = {"long_paths_enabled": False}
    path = tmp_path / "windows-report.json"
    path.write_text(json.dumps(report))
    res = run_cli(["check", "--from", str(path), "--json"], tmp_path)
    again = json.loads(res.stdout)
    store = finding(again, "windows-store-python")
    assert store["fix"]["commands"] == ["py -3.12-64 -m venv .venv"]
    longpaths = finding(again, "windows-long-paths-disabled")
    assert "LongPathsEnabled" in longpaths["fix"]["commands"][0]
    assert "python3" not in json.dumps(again["findings"])


@pytest.mark.slow
@pytest.mark.parametrize("torch,bad", [("2.3.1+cpu", True), ("2.4.1+cpu", False)])
def test_numpy2_from_a_windows_paste(tmp_path, torch, bad):
    # Windows wheels stayed on NumPy 1's ABI until 2.4.1 (pytorch/pytorch#131668); the paste's pip list has
    # NumPy
    text = (PASTES / "composed-2.8-windows-cpu.txt").read_text().replace("2.8.0+cpu", torch)
    paste = tmp_path / "paste.txt"
    paste.write_text(text)
    res = run_cli(["check", "--from", str(paste), "--json"], tmp_path)
    report = json.loads(res.stdout)
    ids = {f["id"] for f in report["findings"]}
    assert ("numpy-too-new-for-torch" in ids) is bad
    if bad:
        found = finding(report, "numpy-too-new-for-torch")
        assert "on Windows" in found["detail"]
        assert "pytorch/pytorch#131668" in found["evidence"]["table.source"]
        assert found["fix"]["commands"] == ['py -m pip install "numpy<2"']  # < is a redirection there
