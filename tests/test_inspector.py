"""The stdlib-only inspector, run for real by every available interpreter against fake environments.

Fake environments (tests/fakeenv.py) hold metadata-only torch whose ``__init__.py`` raises: a
successful inspection therefore also proves torch was never imported.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import IMPORT_MUST_NOT_HAPPEN, add_dist_info, find_python, make_fake_env, site_packages
from realtorch import real_cpu_torch_python

from doctor.model.snapshot import as_plain
from doctor.probes.interpreter import inspect_interpreter_full
from doctor.probes.target_python import INSPECTOR
from doctor.target import inspector

FIXTURES = Path(__file__).parent / "fixtures" / "inspector"
# The interpreters this project's machines have (pyenv); 3.14 is covered by the inspector's code
# but not run here, since no 3.14 interpreter is installed.
TARGET_VERSIONS = ["3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]


def _python_or_skip(version: str) -> str:
    python = find_python(version)
    if python is None:
        pytest.skip(f"no Python {version} interpreter (pyenv or python{version} on PATH)")
    return python


def _requires(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines()


# --- every supported target interpreter ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("version", TARGET_VERSIONS)
def test_inspector_on_each_real_interpreter(tmp_path, version):
    base = _python_or_skip(version)
    python = make_fake_env(
        tmp_path / "env",
        python=base,
        torch="2.6.0+cu126",
        cuda="12.6",
        torchvision="0.21.0",
        torchaudio="2.6.0",
    )
    interpreter, install, env = inspect_interpreter_full(str(python), "--python")

    assert interpreter.error is None, interpreter.error
    assert interpreter.version.startswith(version + ".")
    assert (interpreter.implementation, interpreter.bits, interpreter.env_kind) == ("cpython", 64, "venv")
    assert interpreter.prefix == str(tmp_path / "env")
    assert interpreter.externally_managed is False

    assert install.status == "ok"
    torch = install.torch
    assert (torch.version, torch.build_version, torch.cuda, torch.hip) == (
        "2.6.0+cu126",
        "2.6.0+cu126",
        "12.6",
        None,
    )
    assert torch.installer == "pip" and torch.has_libtorch_cuda is True and torch.has_libtorch_hip is False
    assert torch.location == str(site_packages(tmp_path / "env"))
    assert any(r.startswith("nvidia-cuda-runtime-cu12==12.6.") for r in torch.requires)
    assert install.cuda_from_requires == "12.6"
    assert (install.torchvision.version, install.torchvision.build_version) == ("0.21.0", "0.21.0+cu126")
    assert install.torchvision.cuda == "12.6"  # from the local tag: real torchvision computes it at import
    assert "torch (==2.6.0)" in install.torchvision.requires
    assert install.torchaudio.build_version == "2.6.0+cu126"

    assert env.executable == str(python)
    # the CUDA wheels torch declares (fakeenv installs what is declared, as pip does), then the trio
    assert [d.name for d in env.dists] == [
        "nvidia-cuda-runtime-cu12",
        "nvidia-cudnn-cu12",
        "torch",
        "torchaudio",
        "torchvision",
    ]
    installed = {row[0]: row[1] for row in env.installed}
    assert installed["torch"] == "2.6.0+cu126" and installed["numpy"] and installed["filelock"]
    assert env.markers["python_version"] == version and env.markers["implementation_name"] == "cpython"
    assert env.torch_origin == str(site_packages(tmp_path / "env") / "torch" / "__init__.py")
    assert str(site_packages(tmp_path / "env")) in env.sys_path
    assert env.pyvenv_cfg["include-system-site-packages"] == "false"
    assert env.user_site.enabled is False  # disabled inside a venv
    assert env.conda is None and env.problems == [] and env.error is None


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.8", "3.13"])
def test_system_interpreter_without_torch(version):
    interpreter, install, env = inspect_interpreter_full(_python_or_skip(version), "python3 on PATH")
    assert interpreter.env_kind == "system" and interpreter.error is None
    assert install.status == "absent" and install.torch is None
    assert install.detail == "torch is not installed in this interpreter"
    assert env.pyvenv_cfg is None and env.torch_origin is None
    assert env.user_site.path.endswith("site-packages")


# --- install shapes -------------------------------------------------------------------------------


@pytest.mark.slow
def test_pypi_wheel_has_no_local_tag_but_version_py_does(tmp_path):
    python = make_fake_env(
        tmp_path / "env",
        torch="2.14.1",
        cuda="13.0",
        requires=_requires("torch-2.14.1-pypi-cu130.requires.txt"),
    )
    _, install, _ = inspect_interpreter_full(str(python), "--python")
    assert install.torch.version == "2.14.1"
    assert install.torch.build_version == "2.14.1+cu130"
    assert install.torch.cuda == "13.0"
    assert install.cuda_from_requires == "13.0"


@pytest.mark.slow
def test_old_style_nvidia_runtime_pin(tmp_path):
    python = make_fake_env(
        tmp_path / "env",
        torch="2.6.0",
        cuda="12.4",
        requires=_requires("torch-2.6.0-pypi-cu124.requires.txt"),
    )
    _, install, _ = inspect_interpreter_full(str(python), "--python")
    assert (install.torch.version, install.torch.build_version) == ("2.6.0", "2.6.0+cu124")
    assert install.cuda_from_requires == "12.4"


@pytest.mark.slow
def test_cpu_build_has_no_cuda(tmp_path):
    python = make_fake_env(tmp_path / "env", torch="2.5.1+cpu", cuda=None, installer="uv")
    _, install, env = inspect_interpreter_full(str(python), "--python")
    assert install.torch.cuda is None and install.cuda_from_requires is None
    assert install.torch.has_libtorch_cuda is False
    assert install.torch.installer == "uv" and env.dists[0].installer == "uv"


@pytest.mark.slow
def test_no_torch_is_absent(tmp_path):
    python = make_fake_env(tmp_path / "env", torch=None)
    _, install, env = inspect_interpreter_full(str(python), "--python")
    assert install.status == "absent" and install.torch is None
    assert env.dists == [] and env.torch_origin is None


@pytest.mark.slow
def test_two_torch_dist_infos_via_pth_are_both_listed(tmp_path):
    python = make_fake_env(tmp_path / "env", torch="2.6.0+cu126", cuda="12.6")
    other = tmp_path / "other-site"
    add_dist_info(
        other,
        "torch",
        "2.5.1+cpu",
        files={"torch/__init__.py": "", "torch/version.py": "__version__ = '2.5.1+cpu'\n"},
    )
    (site_packages(tmp_path / "env") / "zz-extra.pth").write_text(str(other) + "\n")

    _, install, env = inspect_interpreter_full(str(python), "--python")
    torches = [d for d in env.dists if d.name == "torch"]
    assert [(d.version, d.location) for d in torches] == [
        ("2.6.0+cu126", str(site_packages(tmp_path / "env"))),
        ("2.5.1+cpu", str(other)),
    ]
    # site-packages precedes .pth additions: that copy is the one `import torch` loads
    assert install.torch.version == "2.6.0+cu126"
    assert env.torch_origin.startswith(str(site_packages(tmp_path / "env")))


@pytest.mark.slow
def test_pythonpath_copy_wins_and_is_described(tmp_path, monkeypatch):
    python = make_fake_env(tmp_path / "env", torch="2.6.0+cu126", cuda="12.6")
    shadow = tmp_path / "shadow"
    add_dist_info(
        shadow,
        "torch",
        "2.4.0+cu118",
        files={"torch/__init__.py": "", "torch/version.py": "__version__ = '2.4.0+cu118'\ncuda = '11.8'\n"},
    )
    monkeypatch.setenv("PYTHONPATH", str(shadow))  # the inspector sees what the user's import sees
    _, install, env = inspect_interpreter_full(str(python), "--python")
    assert install.torch.version == "2.4.0+cu118" and install.torch.cuda == "11.8"
    assert install.torch.location == str(shadow)
    assert env.torch_origin == str(shadow / "torch" / "__init__.py")
    assert [d.version for d in env.dists if d.name == "torch"] == ["2.4.0+cu118", "2.6.0+cu126"]
    assert env.pythonpath == str(shadow)


@pytest.mark.slow
def test_stale_dist_info_without_package(tmp_path):
    python = make_fake_env(tmp_path / "env", torch="2.6.0+cu126", cuda="12.6", deps=False)
    shutil.rmtree(site_packages(tmp_path / "env") / "torch")
    _, install, env = inspect_interpreter_full(str(python), "--python")
    assert install.status == "absent"
    assert "stale dist-info" in install.detail and "torch-2.6.0+cu126.dist-info" in install.detail
    assert env.dists[0].name == "torch"


@pytest.mark.slow
def test_nvidia_and_nvml_dists_are_listed(tmp_path):
    python = make_fake_env(tmp_path / "env", torch="2.6.0+cu126", cuda="12.6", deps=False)
    site = site_packages(tmp_path / "env")
    add_dist_info(site, "nvidia-cudnn-cu12", "9.5.1.17")
    add_dist_info(site, "nvidia-ml-py", "12.560.30")
    add_dist_info(site, "numpy", "2.1.0")  # not interesting: left out
    _, _, env = inspect_interpreter_full(str(python), "--python")
    assert [(d.name, d.version) for d in env.dists] == [
        ("nvidia-cudnn-cu12", "9.5.1.17"),
        ("nvidia-ml-py", "12.560.30"),
        ("torch", "2.6.0+cu126"),
    ]


@pytest.mark.slow
def test_uv_venv_and_conda_records(tmp_path):
    python = make_fake_env(tmp_path / "env", torch="2.5.1", cuda="12.1", installer="conda")
    cfg = tmp_path / "env" / "pyvenv.cfg"
    cfg.write_text(cfg.read_text() + "uv = 0.5.11\n")
    meta = tmp_path / "env" / "conda-meta"
    meta.mkdir()
    records = {
        "pytorch-2.5.1-py3.11_cuda12.1_cudnn9.1.0_0.json": "https://conda.anaconda.org/pytorch/linux-64",
        "pytorch-cuda-12.1-ha16c6d3_6.json": "pytorch",
        "numpy-2.1.0-py311h1234_0.json": "conda-forge",
    }
    for name, channel in records.items():
        (meta / name).write_text(
            json.dumps({"build": "x", "channel": channel, "files": ["a"] * 10}, sort_keys=True)
        )

    interpreter, install, env = inspect_interpreter_full(str(python), "--python")
    assert interpreter.env_kind == "uv-venv"
    assert env.pyvenv_cfg["uv"] == "0.5.11"
    assert install.torch.installer == "conda"
    assert as_plain(env.conda) == {
        "prefix": str(tmp_path / "env"),
        "is_base": False,
        "records": [
            {
                "name": "pytorch",
                "version": "2.5.1",
                "build": "py3.11_cuda12.1_cudnn9.1.0_0",
                "channel": "https://conda.anaconda.org/pytorch/linux-64",
            },
            {"name": "pytorch-cuda", "version": "12.1", "build": "ha16c6d3_6", "channel": "pytorch"},
        ],
    }


@pytest.mark.slow
def test_nothing_next_to_the_script_can_shadow(tmp_path):
    """The script drops its own folder from sys.path before importing anything else."""
    folder = tmp_path / "probes"
    folder.mkdir()
    shutil.copy(INSPECTOR, folder / "inspector.py")
    shutil.copy(Path(INSPECTOR).parent / "installed.py", folder / "installed.py")
    (folder / "json.py").write_text("raise SystemExit('shadowed json')\n")
    (folder / "torch").mkdir()
    (folder / "torch" / "__init__.py").write_text("")
    python = make_fake_env(tmp_path / "env", torch=None)
    done = subprocess.run(
        [str(python), str(folder / "inspector.py")], capture_output=True, text=True, timeout=60
    )
    data = json.loads(done.stdout)
    assert data["packages"]["torch"] is None
    assert str(folder) not in data["interpreter"]["sys_path"]


@pytest.mark.slow
def test_inspector_without_its_sibling_still_describes_torch(tmp_path):
    """installed.py missing (a copied inspector): the rest of the answer stands, and the gap is a problem."""
    folder = tmp_path / "alone"
    folder.mkdir()
    shutil.copy(INSPECTOR, folder / "inspector.py")
    python = make_fake_env(tmp_path / "env", torch="2.6.0+cu126", cuda="12.6")
    done = subprocess.run(
        [str(python), str(folder / "inspector.py")], capture_output=True, text=True, timeout=60
    )
    data = json.loads(done.stdout)
    assert data["packages"]["torch"]["version"] == "2.6.0+cu126"
    assert "installed" not in data and any("listing installed versions failed" in p for p in data["problems"])


@pytest.mark.slow
def test_fake_env_torch_really_refuses_import(tmp_path):
    python = make_fake_env(tmp_path / "env")
    done = subprocess.run([str(python), "-c", "import torch"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and IMPORT_MUST_NOT_HAPPEN in done.stderr


# --- the real CPU torch wheel ---------------------------------------------------------------------


@pytest.mark.slow
def test_real_cpu_torch(tmp_path_factory):
    python = real_cpu_torch_python(tmp_path_factory)
    interpreter, install, env = inspect_interpreter_full(str(python), "--python")
    assert interpreter.error is None and interpreter.version.startswith("3.11.")
    assert install.status == "ok"
    assert install.torch.version == install.torch.build_version == "2.13.0+cpu"
    assert install.torch.cuda is None and install.cuda_from_requires is None
    assert install.torch.has_libtorch_cuda is False and install.torch.has_libtorch_hip is False
    assert install.torch.git_version == "cf30153c4c131c8164ee7798e5022d810682e2cb"
    assert env.torch_origin.endswith("torch/__init__.py")


# --- pure parts, in-process -----------------------------------------------------------------------


def test_parse_real_version_py():
    values = inspector.parse_version_py((FIXTURES / "torch-2.13.0+cpu.version.py").read_text())
    assert values == {
        "__version__": "2.13.0+cpu",
        "debug": False,
        "cuda": None,
        "git_version": "cf30153c4c131c8164ee7798e5022d810682e2cb",
        "hip": None,
        "rocm": None,
        "xpu": None,
    }


def test_parse_version_py_ignores_code_and_bad_files():
    torchvision_style = "__version__ = '0.21.0+cu124'\nfrom x import f\nif f() > 0:\n    cuda = f()\n"
    assert inspector.parse_version_py(torchvision_style) == {"__version__": "0.21.0+cu124"}
    assert inspector.parse_version_py("def broken(:\n") == {}
    assert inspector.parse_version_py("cuda = some_call()\n") == {}


@pytest.mark.parametrize(
    ("layout", "kind"),
    [
        ({"pyvenv": "home = /usr/bin\n"}, "venv"),
        ({"pyvenv": "home = /usr/bin\nuv = 0.5.11\n"}, "uv-venv"),
        ({"dirs": ["conda-meta", "condabin"]}, "conda-base"),
        ({"dirs": ["conda-meta"], "under": "envs/ml"}, "conda"),
        ({"dirs": ["conda-meta"]}, "conda"),
        ({}, "system"),
    ],
)
def test_env_kind(tmp_path, layout, kind):
    prefix = tmp_path / layout.get("under", "prefix")
    prefix.mkdir(parents=True)
    for name in layout.get("dirs", []):
        (prefix / name).mkdir()
    cfg = inspector._parse_pyvenv_cfg(layout["pyvenv"]) if "pyvenv" in layout else None
    assert inspector._env_kind(str(prefix), str(prefix), cfg) == kind


def test_externally_managed_only_outside_a_venv(tmp_path, monkeypatch):
    import sysconfig

    stdlib = tmp_path / "lib" / "python3.11"
    stdlib.mkdir(parents=True)
    (stdlib / "EXTERNALLY-MANAGED").write_text(
        "[externally-managed]\nError=To install Python packages system-wide, try apt install\n"
    )
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *a, **k: str(stdlib))
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path))
    described = inspector.describe_interpreter()
    assert described["env_kind"] == "system" and described["externally_managed"] is True
    assert "Error=To install Python packages system-wide" in described["externally_managed_text"]

    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    described = inspector.describe_interpreter()
    assert described["env_kind"] == "venv" and described["externally_managed"] is False


def test_leftovers_of_an_interrupted_pip(tmp_path, monkeypatch):
    """pip's stash, a dist-info without RECORD, and one without INSTALLER beside another of the same name are
    leftovers; a whole install (RECORD, and INSTALLER where there are two) is not."""
    site = tmp_path / "site"
    for name, files in [("~orch", ()), ("~orch-2.6.0.dist-info", ("RECORD",)),
                        ("numpy-2.0.0.dist-info", ()),  # no RECORD
                        ("torch-2.6.0.dist-info", ("RECORD", "INSTALLER")),
                        ("torch-2.7.0.dist-info", ("RECORD",)),  # the twin half extracted: no INSTALLER
                        ("filelock-3.0.dist-info", ("RECORD",))]:  # alone: INSTALLER is not needed
        (site / name).mkdir(parents=True)
        for file in files:
            (site / name / file).write_text("")
    monkeypatch.setattr(inspector, "site_folders", lambda: [str(site)])
    assert [Path(p).name for p in inspector.find_leftovers()] == [
        "numpy-2.0.0.dist-info", "torch-2.7.0.dist-info", "~orch", "~orch-2.6.0.dist-info"]


def test_leftovers_only_by_pip_naming_in_site_packages(tmp_path, monkeypatch):
    """A user's "~$Report.docx" or "~notes/" is not pip's: only folders named the way pip stashes them, and
    only in the interpreter's own site-packages (a folder on PYTHONPATH is the user's)."""
    site, work = tmp_path / "site", tmp_path / "work"
    for folder in (site, work):
        (folder / "~notes").mkdir(parents=True)
        (folder / "~$Report.docx").write_text("")
        (folder / "stray-1.0.dist-info").mkdir()
    (site / "~-rch").mkdir()
    (site / "~$odd").mkdir()
    monkeypatch.setattr(inspector, "site_folders", lambda: [str(site)])
    monkeypatch.setattr(sys, "path", [str(work), str(site)])
    assert [Path(p).name for p in inspector.find_leftovers()] == ["stray-1.0.dist-info", "~-rch", "~notes"]
    assert inspector.PIP_STASH.match("~orch-2.6.0+cu126.dist-info") and not inspector.PIP_STASH.match(
        "~$Report"
    )


def test_a_half_written_torch_is_a_leftover(tmp_path, monkeypatch):
    """A torch whose RECORD lists files that are not there, or a package folder no dist-info describes."""
    site = tmp_path / "site"
    dist = site / "torch-2.7.1.dist-info"
    dist.mkdir(parents=True)
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("")
    (dist / "RECORD").write_text("torch/__init__.py,,\ntorch/nn.py,,\ntorch/lib/libtorch.so,,\n"
                                 "torch-2.7.1.dist-info/RECORD,,\n")
    record = {"name": "torch", "path": str(dist), "location": str(site)}
    monkeypatch.setattr(inspector, "site_folders", lambda: [str(site)])
    assert inspector.find_leftovers([record]) == [str(dist)]
    (site / "torch" / "nn.py").write_text("")
    assert inspector.find_leftovers([record]) == []  # whole (a missing library is the smoke test's to find)
    assert inspector.find_leftovers([]) == [str(site / "torch")]  # no dist-info describes it
    with open(dist / "RECORD", "a") as handle:
        handle.write("torch/lib/pad/0001.bin,sha")  # cut off while written (uv killed)
    assert inspector.find_leftovers([record]) == [str(dist)]
