"""End to end: the plan of issue 13 through the real CLI, asserting the exact commands it prints.

Each machine is built from real parts as in test_e2e_check.py: a real venv of a real interpreter holding
metadata-only packages (tests/fakeenv.py), a fake ``nvidia-smi`` on PATH, ``TORCHDOCTOR_SYSROOT`` for /sys and
/proc. A "system" Python is a real interpreter under a prefix of our own (fakeenv.make_system_python): PEP
668's ``EXTERNALLY-MANAGED`` file, or a free-threaded build configuration, without touching the machine's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import find_python, make_fake_env, make_system_python

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "nvidia"))
from fake_smi import write_fake_nvidia_smi  # noqa: E402

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
RTX5090 = {"name": "NVIDIA GeForce RTX 5090", "cc": "12.0", "mem_mib": 32607}
RTX4090 = {"name": "NVIDIA GeForce RTX 4090", "cc": "8.9", "mem_mib": 24564}
RTX3090 = {"name": "NVIDIA GeForce RTX 3090", "cc": "8.6", "mem_mib": 24576}
GTX1080TI = {"name": "NVIDIA GeForce GTX 1080 Ti", "cc": "6.1", "mem_mib": 11264}
H100 = {"name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "mem_mib": 81559}
PYTORCH = "https://download.pytorch.org/whl"
MIRROR = "https://mirror.example.org/pytorch/whl"
UBUNTU_580 = ("sudo ubuntu-drivers install nvidia:580  # Ubuntu (sudo ubuntu-drivers list shows the branches "
    "it "
              "packages; any from R580 on works); other distributions: https://www.nvidia.com/Download/index.aspx")


def python(version: str) -> str:
    found = find_python(version)
    if found is None:
        pytest.skip(f"needs a real Python {version} interpreter (pyenv {version})")
    return found


class Machine:
    """A fake machine: bin/ (nvidia-smi), sysroot/, the target interpreter; ``cli`` runs the real CLI on
    it."""

    def __init__(
        self,
        root: Path,
        python_path: Path | str,
        gpus: list[dict] | None,
        driver: str = "570.124.04",
        cuda: str = "12.8",
    ):
        self.root, self.python = root, str(python_path)
        self.bin = root / "bin"
        self.sysroot = root / "sysroot"
        self.sysroot.mkdir(parents=True, exist_ok=True)
        if gpus:
            write_fake_nvidia_smi(self.bin, gpus, driver=driver, cuda=cuda)
        else:
            self.bin.mkdir(exist_ok=True)

    def cli(self, *args: str, env: dict | None = None, cwd: Path | None = None, python: bool = True):
        environ = {k: v for k, v in os.environ.items()
                   if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "TORCHDOCTOR_INDEX_URL_BASE", "SLURM_JOB_ID")}
        # Only the fake's folder and the system's: a real nvidia-smi on this machine must not leak in.
        environ["PATH"] = os.pathsep.join([str(self.bin), "/usr/bin", "/bin"])
        environ.update(PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0", TORCHDOCTOR_SYSROOT=str(self.sysroot),
                       NO_COLOR="1", COLUMNS="250")
        environ.update(env or {})
        argv = [sys.executable, "-m", "doctor", *args] + (["--python", self.python] if python else [])
        res = subprocess.run(argv, capture_output=True, text=True, env=environ, timeout=120,
                             cwd=str(cwd or self.sysroot))
        assert "Traceback" not in res.stderr, res.stderr
        return res

    def json(self, *args: str, **kw) -> tuple[int, dict]:
        res = self.cli(*args, "--json", **kw)
        return res.returncode, json.loads(res.stdout)


def ids(report, severity: str | None = None) -> set[str]:
    return {f["id"] for f in report["findings"] if severity is None or f["severity"] == severity}


def finding(report, fid: str) -> dict:
    return next(f for f in report["findings"] if f["id"] == fid)


def install_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if " -m pip "
        "install " in line and not line.lstrip().startswith(
        "note:")]


# --- two ways out: the driver first, torch kept
# --------------------------------------------------------------


@pytest.fixture
def rtx5090_pypi_2121(tmp_path):
    """RTX 5090, driver 570 (CUDA <= 12.8), the PyPI torch 2.12.1 (a CUDA 13.0 build, no local tag)."""
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch="2.12.1", cuda="13.0")
    return Machine(tmp_path, venv, [RTX5090])


def test_driver_first_keeps_torch_and_names_the_downgrade_beside_it(rtx5090_pypi_2121):
    m = rtx5090_pypi_2121
    code, report = m.json("check", "--no-smoke")
    assert code == 1 and "driver-too-old" in ids(report, "error")
    plan = report["plan"]
    assert plan["status"] == "driver-first"
    assert [s["kind"] for s in plan["steps"]] == ["driver"]
    assert plan["steps"][0]["command"] == UBUNTU_580
    assert plan["steps"][0]["description"].startswith("Install the NVIDIA driver 580.65.06 or newer (R580 or "
        "a "
                                                      "later branch), then reboot: CUDA 13.0 (torch "
                                                      "2.12.1+cu130)")
    assert plan["driver"]["minimum"] == "580.65.06" and plan["driver"]["branch"] == 580
    assert plan["target"]["label"] == "2.12.1+cu130"
    assert plan["alternative"]["label"] == "2.11.0+cu128"  # never null where there is a choice
    # JSON carries both ways, the driver one first
    driver, wheel = plan["alternatives"]
    assert (driver["kind"], driver["primary"], driver["available"]) == ("driver", True, True)
    assert (wheel["kind"], wheel["primary"]) == ("wheel", False)
    assert wheel["cost"] == "a downgrade from torch 2.12.1 to 2.11.0"
    assert wheel["target"]["label"] == "2.11.0+cu128"
    assert [s["command"] for s in wheel["steps"]] == [
        f'{m.python} -m pip install "torch==2.11.0+cu128" --index-url {PYTORCH}/cu128']
    fix = finding(report, "driver-too-old")["fix"]
    assert "keep torch 2.12.1+cu130" in fix["summary"] and "2.11.0+cu128 (a downgrade" in fix["summary"]

    text = m.cli("check", "--no-smoke").stdout
    assert "torch 2.12.1+cu130 stays: it runs once the driver is updated." in text
    assert ("Or keep driver 570.124.04 and install torch 2.11.0+cu128 instead (a downgrade from torch "
        "2.12.1 to "
            f'2.11.0): {m.python} -m pip install "torch==2.11.0+cu128" --index-url {PYTORCH}/cu128') in text


def test_a_cpu_build_on_a_gpu_is_never_kept_for_the_driver_to_run(tmp_path):
    """RTX 5090, driver 570, torch 2.13.0+cpu: the version is kept, the CPU build is not. The driver way
    installs the CUDA build of 2.13.0 after the driver update (once "a driver that supports CUDA  (the table
    does not know its minimum)" and "torch 2.13.0+cpu stays")."""
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch="2.13.0+cpu", cuda=None)
    m = Machine(tmp_path, venv, [RTX5090])
    code, report = m.json("check", "--no-smoke")
    assert code == 1 and "torch-cpu-build" in ids(report, "error")
    plan = report["plan"]
    assert plan["status"] == "driver-first" and plan["target"]["label"] == "2.13.0+cu130"
    assert [s["kind"] for s in plan["steps"]] == ["driver", "install"]
    assert plan["steps"][0]["command"] == UBUNTU_580
    assert (
        plan["steps"][1]["command"]
        == f'{m.python} -m pip install "torch==2.13.0+cu130" --index-url {PYTORCH}/cu130'
    )
    assert plan["alternative"]["label"] == "2.11.0+cu128"
    text = m.cli("check", "--no-smoke").stdout
    assert "stays" not in text and "CUDA  (" not in text and "does not know its minimum" not in text


@pytest.mark.parametrize("how", ["--no-driver-change", "container", "slurm"])
def test_where_the_driver_cannot_change_the_downgrade_comes_first(rtx5090_pypi_2121, how):
    m = rtx5090_pypi_2121
    args, env = [], {}
    if how == "--no-driver-change":
        args = [how]
    elif how == "container":
        (m.sysroot / ".dockerenv").write_text("")
    else:
        env = {"SLURM_JOB_ID": "4242"}
    code, report = m.json("check", "--no-smoke", *args, env=env)
    plan = report["plan"]
    assert plan["status"] == "install" and plan["driver_change"]["possible"] is False
    assert [s["command"] for s in plan["steps"]] == [
        f'{m.python} -m pip install "torch==2.11.0+cu128" --index-url {PYTORCH}/cu128']
    assert "a downgrade from torch 2.12.1 to 2.11.0" in plan["reason"]
    wheel, driver = plan["alternatives"]
    assert wheel["primary"] and not driver["primary"] and driver["available"] is False
    assert driver["driver"]["minimum"] == "580.65.06" and driver["driver"]["commands"] == []
    why = {"--no-driver-change": "--no-driver-change", "container": "docker container",
           "slurm": "Slurm job on a managed cluster"}[how]
    assert why in plan["driver_change"]["why"]
    # fix --dry-run prints the same single command
    res = m.cli("fix", "--dry-run", "--no-smoke", *args, env=env)
    assert install_lines(res.stdout) == [f'{m.python} -m pip install "torch==2.11.0+cu128" --index-url '
        f'{PYTORCH}/cu128']


def test_gtx_1080_ti_on_r470_keeps_its_torch_with_a_driver_pascal_still_gets(tmp_path):
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch="2.14.1+cu126", cuda="12.6")
    m = Machine(tmp_path, venv, [GTX1080TI], driver="470.256.02", cuda="11.4")
    code, report = m.json("check", "--no-smoke")
    plan = report["plan"]
    assert plan["status"] == "driver-first" and plan["target"]["label"] == "2.14.1+cu126"
    step = plan["steps"][0]
    assert "560.28.03 or newer (R560 to R580: R580 is the last branch for Maxwell, Pascal, Volta GPUs)" in \
        step["description"]
    assert step["command"].startswith("sudo ubuntu-drivers install nvidia:580  # Ubuntu")
    assert plan["driver"]["last_branch"] == 580
    wheel = plan["alternatives"][1]
    assert wheel["cost"] == "a downgrade from torch 2.14.1 to 2.7.1"
    assert [s["command"] for s in wheel["steps"]] == [
        f'{m.python} -m pip install "torch==2.7.1+cu118" --index-url {PYTORCH}/cu118']


def test_a_data_center_gpu_gets_the_server_driver(tmp_path):
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch="2.12.1", cuda="13.0")
    m = Machine(tmp_path, venv, [H100], driver="520.61.05", cuda="11.8")
    _, report = m.json("check", "--no-smoke")
    plan = report["plan"]
    assert plan["status"] == "driver-first" and plan["driver"]["data_center"] is True
    assert plan["steps"][0]["command"].startswith("sudo ubuntu-drivers install --gpgpu nvidia:580-server  # "
        "Ubuntu")
    assert plan["steps"][0]["description"].startswith("Install NVIDIA's data-center driver 580.65.06 or "
        "newer")


# --- the user's version wins
# ---------------------------------------------------------------------------------


def test_fix_dry_run_with_torch_pins_that_version_for_this_gpu_and_driver(tmp_path):
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch=None)
    m = Machine(tmp_path, venv, [RTX3090], driver="535.104.05", cuda="12.2")
    res = m.cli("fix", "--dry-run", "--no-smoke", "--torch", "==2.3.1")
    assert install_lines(res.stdout) == [
        f'{m.python} -m pip install "torch==2.3.1+cu121" "torchvision==0.18.1+cu121" '
        '"torchaudio==2.3.1+cu121" '
        f"--index-url {PYTORCH}/cu121"]
    assert "Install torch 2.3.1+cu121 (torch==2.3.1, as asked by --torch)." in res.stdout
    assert res.returncode == 4  # --torch is also the requirement the fix answers: torch is not installed yet


def test_check_torch_names_the_pythons_that_have_the_wheel_and_the_last_release_for_this_one(tmp_path):
    venv = make_fake_env(tmp_path / "venv", python=python("3.9"), torch=None)
    m = Machine(tmp_path, venv, [RTX3090], driver="535.104.05", cuda="12.2")
    code, report = m.json("check", "--no-smoke", "--torch", "==2.9.1")
    f = finding(report, "torch-version-unavailable")
    assert f["severity"] == "error" and f["title"].startswith("no torch 2.9.1 wheel for Python 3.9")
    assert "torch 2.9 has wheels for Python 3.10 to 3.14" in f["detail"]
    assert "torch 2.8.0 is the last release with wheels for Python 3.9" in f["detail"]
    plan = report["plan"]
    assert plan["status"] == "manual" and plan["steps"] == []  # nothing installed in its place
    nearest = next(a for a in plan["alternatives"] if a["kind"] == "wheel")
    assert (
        nearest["target"]["torch"] == "2.8.0" and nearest["cost"] == "a downgrade from torch 2.9.1 to 2.8.0"
    )
    assert code == 4  # and an error finding: the requirement is not met either


def test_the_project_pin_is_the_reason_for_the_choice(tmp_path):
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch=None)
    m = Machine(tmp_path, venv, [RTX3090], driver="535.104.05", cuda="12.2")
    (tmp_path / "requirements.txt").write_text("numpy<2\ntorch==2.3.1+cu121 ; python_version < '3.13'\n")
    res = m.cli("fix", "--dry-run", "--no-smoke")
    assert "Install torch 2.3.1+cu121 (torch==2.3.1, as pinned by requirements.txt:2)." in res.stdout
    assert install_lines(res.stdout) == [
        f'{m.python} -m pip install "torch==2.3.1+cu121" "torchvision==0.18.1+cu121" '
        '"torchaudio==2.3.1+cu121" '
        f"--index-url {PYTORCH}/cu121"]
    # a lock file's resolved version wins over the range the pyproject states
    (tmp_path / "requirements.txt").unlink()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["torch>=2.5"]\n')
    (tmp_path / "uv.lock").write_text('[[package]]\nname = "torch"\nversion = "2.5.1+cu124"\n'
                                      'source = { registry = "https://download.pytorch.org/whl/cu124" }\n')
    _, report = m.json("check", "--no-smoke")
    assert report["plan"]["wanted"] == {"spec": "==2.5.1", "source": "uv.lock"}
    assert report["plan"]["target"]["label"] == "2.5.1+cu121"
    assert report["snapshot"]["project"]["files"] == ["uv.lock", "pyproject.toml"]


# --- wheels that exist
# ---------------------------------------------------------------------------------------


def test_free_threaded_313t_gets_the_last_release_with_cp313t_wheels(tmp_path):
    exe = make_system_python(tmp_path / "usr", python("3.13"), free_threaded=True)
    venv = make_fake_env(tmp_path / "venv", python=str(exe), torch=None)
    m = Machine(tmp_path, venv, [RTX4090])
    code, report = m.json("check", "--no-smoke")
    assert report["snapshot"]["interpreter"]["free_threaded"] is True
    # 2.12.1 dropped cp313t, 2.13 and later publish 3.14t only: 2.12.0 is the newest with a 3.13t wheel
    assert [s["command"] for s in report["plan"]["steps"]] == [
        f'{m.python} -m pip install "torch==2.12.0+cu126" "torchvision==0.27.0+cu126" --index-url '
        f'{PYTORCH}/cu126']
    assert any("Python 3.13t is a free-threaded build" in n for n in report["plan"]["notes"])


def test_python_3141_gets_no_torchvision_whose_requires_python_excludes_it(tmp_path):
    # No 3.14.1 interpreter here: a report of one, read back through the real CLI with --from.
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch=None)
    m = Machine(tmp_path, venv, [RTX3090], driver="535.104.05", cuda="12.2")
    _, report = m.json("check", "--no-smoke")
    report["snapshot"]["interpreter"]["version"] = "3.14.1"
    path = tmp_path / "py3141.json"
    path.write_text(json.dumps(report))
    code, again = m.json("check", "--from", str(path), python=False)
    [command] = [s["command"] for s in again["plan"]["steps"]]
    assert command == f'{m.python} -m pip install "torch==2.15.0+cu126" --index-url {PYTORCH}/cu126'
    assert any("torchvision 0.29.2 declares Requires-Python >=3.10,!=3.14.1, which excludes Python "
        "3.14.1" in n
               for n in again["plan"]["notes"])


# --- one builder, one voice
# ----------------------------------------------------------------------------------


def test_the_import_error_reinstalls_what_the_plan_installs(tmp_path):
    # torch 2.6.0+cu126 on an RTX 5090 whose import fails: the finding and the plan name the same build
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch="2.6.0+cu126", cuda="12.6")
    m = Machine(tmp_path, venv, [RTX5090])
    _, report = m.json("check")
    assert [s["command"] for s in report["plan"]["steps"]] == [
        f'{m.python} -m pip install "torch==2.7.1+cu128" --index-url {PYTORCH}/cu128']
    assert finding(report, "torch-import-error")["fix"]["commands"] == [
        f'{m.python} -m pip install --force-reinstall "torch==2.7.1+cu128" --index-url {PYTORCH}/cu128']


def _commands(value) -> list[str]:
    """Every command anywhere in a report: findings' fix commands, plan steps, alternatives, driver advice."""
    out = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("command", "commands") and item:
                out += [item] if isinstance(item, str) else [c for c in item if isinstance(c, str)]
            elif key != "snapshot":
                out += _commands(item)
    elif isinstance(value, list):
        for item in value:
            out += _commands(item)
    return out


def test_with_a_mirror_no_printed_command_points_at_the_pytorch_index(tmp_path):
    scenarios = [
        (
            "rtx5090-2.12.1",
            make_fake_env(tmp_path / "a", python=python("3.12"), torch="2.12.1", cuda="13.0"),
            [RTX5090],
            "570.124.04",
            "12.8",
        ),
        (
            "rtx5090-2.6.0",
            make_fake_env(
                tmp_path / "b",
                python=python("3.12"),
                torch="2.6.0+cu126",
                cuda="12.6",
                torchvision="0.21.0+cu126",
            ),
            [RTX5090],
            "570.124.04",
            "12.8",
        ),
        (
            "no-torch",
            make_fake_env(tmp_path / "c", python=python("3.12"), torch=None),
            [RTX3090],
            "535.104.05",
            "12.2",
        ),
    ]
    env = {"TORCHDOCTOR_INDEX_URL_BASE": MIRROR}
    seen = 0
    for name, venv, gpus, driver, cuda in scenarios:
        m = Machine(tmp_path / f"m-{name}", venv, gpus, driver, cuda)
        for args in (["check", "-v"], ["fix", "--dry-run", "-v"], ["report"], ["check", "--json"],
                     ["check", "--json", "--no-driver-change"], ["check", "--json", "--torch", "==2.5.1"]):
            res = m.cli(*args, "--no-smoke", env=env)
            text = res.stdout + res.stderr
            lines = install_lines(text) + [line for line in text.splitlines() if "note: Or " in line]
            if args[0] == "report" or "--json" in args:
                lines += _commands(json.loads(res.stdout))
            assert lines, (name, args)
            seen += len(lines)
            assert not [line for line in lines if "download.pytorch.org" in line], (name, args)
            assert any(f"--index-url {MIRROR}/cu" in line for line in lines), (name, args)
    assert seen > 20


# --- environments that refuse pip
# ----------------------------------------------------------------------------


def test_an_externally_managed_python_gets_a_venv_and_the_pins_everywhere(tmp_path):
    marker = ("[externally-managed]\nError=To install Python packages system-wide, try apt install\n"
              " python3-xyz, where xyz is the package you are trying to install.\n")
    exe = make_system_python(tmp_path / "usr", python("3.12"), externally_managed=marker)
    m = Machine(tmp_path, exe, [RTX4090])
    code, report = m.json("check", "--no-smoke")
    assert report["snapshot"]["interpreter"]["externally_managed"] is True
    pins = '"torch==2.15.0+cu126" "torchvision==0.29.2+cu126"'
    assert [(s["kind"], s["command"]) for s in report["plan"]["steps"]] == [
        ("venv", f"{exe} -m venv .venv"),
        ("install", f".venv/bin/python -m pip install {pins} --index-url {PYTORCH}/cu126")]
    assert finding(report, "externally-managed-python")["fix"]["commands"] == [
        f"{exe} -m venv .venv && .venv/bin/python -m pip install {pins} --index-url {PYTORCH}/cu126"]
    every = _commands(report)
    assert not [c for c in every if "--break-system-packages" in c]
    assert not [c for c in every if "pip install torch" in c]  # never unpinned
    assert not [c for c in every if c.startswith(f"{exe} -m pip install")]  # never into the system Python


# --- only real paths
# -----------------------------------------------------------------------------------------


def test_cuda_home_is_never_pointed_at_a_toolkit_that_is_not_there(tmp_path):
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch="2.6.0+cu126", cuda="12.6")
    m = Machine(tmp_path, venv, [RTX4090])
    toolkit = m.sysroot / "usr/local/cuda-13.0"
    toolkit.mkdir(parents=True)
    (toolkit / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "13.0.1"}}')
    (m.sysroot / "usr/local/cuda").symlink_to("cuda-13.0")
    _, report = m.json("check", "--no-smoke")
    fix = finding(report, "cuda-home-version-mismatch")["fix"]
    assert fix["commands"] == []
    assert (
        "No CUDA 12.6 toolkit is installed here (toolkits found: /usr/local/cuda-13.0 (CUDA 13.0))"
        in fix["summary"]
    )
    assert "cuda-toolkit-12-6" in fix["summary"]
    (m.sysroot / "usr/local/cuda-12.6").mkdir()  # once it is there, the fix points at it
    _, report = m.json("check", "--no-smoke")
    assert finding(report, "cuda-home-version-mismatch")["fix"]["commands"] == ["export "
        "CUDA_HOME=/usr/local/cuda-12.6"]


# --- asked-for devices
# ---------------------------------------------------------------------------------------


def test_device_n_on_a_machine_without_it_is_a_usage_error(tmp_path):
    venv = make_fake_env(tmp_path / "venv", python=python("3.12"), torch="2.13.0+cpu", cuda=None)
    m = Machine(tmp_path, venv, None)
    intel = m.sysroot / "sys/bus/pci/devices/0000:00:02.0"  # a PCI bus without an NVIDIA device
    intel.mkdir(parents=True)
    (intel / "vendor").write_text("0x8086\n")
    (intel / "class").write_text("0x030000\n")
    res = m.cli("check", "--no-smoke", "--device", "0")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip() == ("torchdoctor: error: --device 0: this machine has no device 0 (no NVIDIA "
        "GPU was "
                                  "found: no NVIDIA display device on the PCI bus); leave --device out")
    assert m.cli("check", "--no-smoke").returncode == 0  # without --device the same machine is healthy
    gpu = Machine(tmp_path / "gpu", make_fake_env(tmp_path / "gv", python=python("3.12")), [RTX4090, RTX4090])
    res = gpu.cli("check", "--no-smoke", "--device", "2")
    assert (
        res.returncode == 2
        and "no device 2 (the NVIDIA driver lists 2 GPU(s)); give an index below 2" in res.stderr
    )
    assert gpu.cli("check", "--no-smoke", "--device", "1").returncode in (0, 1)
