"""`torchdoctor fix` end to end: the real CLI runs real pip and real uv into throw-away venvs.

The machine: an RTX 4090 behind a fake ``nvidia-smi`` (driver 550.54.14, CUDA 12.4),
``TORCHDOCTOR_NVML=0`` and an empty ``TORCHDOCTOR_SYSROOT``; a real Python 3.12 venv holding
stand-in ``torch 2.5.1+cpu`` / ``torchvision 0.20.1+cpu`` / ``torchaudio 2.5.1+cpu`` and an
unrelated ``numpy 1.0.0``, installed by pip from a local ``file://`` index built by
tests/wheelhouse.py. The table is the bundled one with torch 2.5 trimmed to cpu + cu121 on
linux-x86_64, so the plan's target is exactly 2.5.1+cu121. pip and uv are isolated from this
machine's global configuration (PIP_CONFIG_FILE=/dev/null, UV_NO_CONFIG=1) so only the test
indexes are used.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import find_python, site_packages
from wheelhouse import build_flat, build_index, copy_index

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "nvidia"))
from fake_smi import write_fake_nvidia_smi  # noqa: E402

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
CPU = {"torch": "2.5.1+cpu", "torchvision": "0.20.1+cpu", "torchaudio": "2.5.1+cpu"}
CU121 = {"torch": "2.5.1+cu121", "torchvision": "0.20.1+cu121", "torchaudio": "2.5.1+cu121"}


def isolated_env(extra=None) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "UV_")) and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")
    }
    env.update(
        PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1", UV_NO_CONFIG="1"
    )
    env.update(extra or {})
    return env


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    py = find_python("3.12") or find_python("3.11")
    if py is None:
        pytest.skip("needs a real Python 3.12 or 3.11 interpreter (pyenv)")
    root = tmp_path_factory.mktemp("fixworld")
    index = build_index(root / "index")
    broken = build_index(root / "broken", broken={"torch-2.5.1+cu121-py3-none-any.whl"})
    table = json.loads((REPO / "compat_tables" / "pytorch.json").read_text())
    for release in table["releases"]:
        if release["minor"] == "2.5":
            release["variants"]["linux-x86_64"] = ["cpu", "cu121"]
            release["pypi_default"]["linux-x86_64"] = "cu121"
    table["arch_lists"] = [
        a
        for a in table["arch_lists"]
        if not (
            a.get("torch_minor") == "2.5"
            and a.get("platform") == "linux-x86_64"
            and a.get("variant") != "cu121"
        )
    ]
    (root / "table.json").write_text(json.dumps(table))
    bin_dir = root / "bin"
    write_fake_nvidia_smi(
        bin_dir, [{"name": "NVIDIA GeForce RTX 4090", "cc": "8.9"}], driver="550.54.14", cuda="12.4"
    )
    (root / "sysroot").mkdir()
    # One template venv with pip, the CPU builds and numpy installed by real pip; each test copies it.
    template = root / "template"
    subprocess.run([py, "-m", "venv", str(template)], check=True, capture_output=True)
    pip_install(template, ["numpy==1.0.0", *(f"{n}=={v}" for n, v in CPU.items())], index.as_uri() + "/cpu")
    return {"py": py, "root": root, "index": index, "broken": broken, "bin": bin_dir}


def pip_install(venv: Path, reqs: list[str], index_url: str) -> None:
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *reqs, "--index-url", index_url],
        check=True,
        capture_output=True,
        env=isolated_env(),
    )


def fresh_venv(world, tmp_path) -> Path:
    venv = tmp_path / "venv"
    shutil.copytree(world["root"] / "template", venv, symlinks=True)
    return venv


def run_fix(world, venv, *args, extra_env=None, cwd=None, python=None):
    env = isolated_env(extra_env)
    env["PATH"] = f"{world['bin']}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO)
    env["XDG_STATE_HOME"] = str(venv.parent / "state")  # restore files and locks (doctor/fix/state.py)
    env.update(TORCHDOCTOR_NVML="0", TORCHDOCTOR_SYSROOT=str(world["root"] / "sysroot"), NO_COLOR="1")
    argv = [
        sys.executable,
        "-m",
        "doctor",
        "fix",
        "--no-smoke",
        "--python",
        str(python or venv / "bin" / "python"),
        "--table",
        str(world["root"] / "table.json"),
        *args,
    ]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or venv.parent,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def installed(venv: Path) -> dict[str, str]:
    """name -> version from the dist-info folders, and each torch-family version.py's __version__."""
    site = site_packages(venv)
    out = {}
    for dist in site.glob("*.dist-info"):
        meta = dict(
            line.split(": ", 1) for line in (dist / "METADATA").read_text().splitlines() if ": " in line
        )
        out[meta["Name"]] = meta["Version"]
    for name in CPU:
        version_py = site / name / "version.py"
        if version_py.exists():
            scope: dict = {}
            exec(version_py.read_text(), scope)
            out[f"{name}/version.py"] = scope["__version__"]
    return out


def split_commands(line: str) -> list[list[str]]:
    """'a b && c d' -> [['a', 'b'], ['c', 'd']]."""
    import shlex

    out: list[list[str]] = [[]]
    for word in shlex.split(line.strip()):
        if word == "&&":
            out.append([])
        else:
            out[-1].append(word)
    return out


def restore_command(stdout: str) -> list[list[str]]:
    lines = stdout.splitlines()
    return split_commands(lines[lines.index("  restore with:") + 1])


def run_restore(commands: list[list[str]], env=None) -> None:
    for argv in commands:
        subprocess.run(argv, check=True, capture_output=True, env=env or isolated_env())


def assert_builds(venv, builds):
    have = installed(venv)
    for name, version in builds.items():
        assert have[name] == version and have[f"{name}/version.py"] == version, have


def test_pip_fix_turns_cpu_into_cu121_keeps_numpy_and_the_restore_command_brings_cpu_back(world, tmp_path):
    venv = fresh_venv(world, tmp_path)
    before = installed(venv)
    res = run_fix(world, venv, "--yes", "--index-url-base", world["index"].as_uri())
    assert res.returncode == 0, res.stdout + res.stderr
    assert (
        f'install "torch==2.5.1+cu121" "torchvision==0.20.1+cu121" "torchaudio==2.5.1+cu121" '
        f"--index-url {world['index'].as_uri()}/cu121" in res.stdout
    )
    assert "gone torch-cpu-build" in res.stdout and "step 1/1:" in res.stdout
    assert_builds(venv, CU121)
    after = installed(venv)
    untouched = {k: v for k, v in before.items() if k not in CPU and "/" not in k}
    assert {k: after[k] for k in untouched} == untouched and after["numpy"] == "1.0.0"
    assert set(after) - set(before) == {"nvidia-cuda-runtime-cu12"}
    restore_file = next((tmp_path / "state").rglob("torchdoctor-restore-*.txt"))
    assert "torch==2.5.1+cpu  # from the /whl/cpu index" in restore_file.read_text()
    clean, uninstall, install = restore_command(res.stdout)
    assert clean[1] == "-c"  # what an interrupted install left goes first (issue 27)
    # The CUDA wheel the fix pulled in was not there before: pins cannot remove it, the uninstall does.
    assert uninstall[-4:] == ["pip", "uninstall", "-y", "nvidia-cuda-runtime-cu12"]
    assert install[-2:] == ["--index-url", world["index"].as_uri() + "/cpu"]
    run_restore([clean, uninstall, install])
    assert_builds(venv, CPU)
    assert installed(venv) == before  # nvidia-cuda-runtime-cu12 is gone, nothing else moved


def test_restore_reinstalls_the_cuda_wheels_of_a_cuda_build_from_torchs_index(world, tmp_path):
    # This table's target for the 4090 is cu121 itself, so fix has nothing to do from the cu121 builds:
    # their restore is run directly. The CUDA runtime wheel (no local tag) comes from torch's cu121 index.
    from doctor.fix.restore import restore_argvs, restore_pins, restore_text
    from doctor.plan.commands import InstallSource

    venv = fresh_venv(world, tmp_path)
    pip_install(venv, [f"{n}=={v}" for n, v in CU121.items()], world["index"].as_uri() + "/cu121")
    before = installed(venv)
    freeze = {k.lower(): v for k, v in before.items() if "/" not in k}
    assert restore_pins(freeze) == [
        *(f"{n}=={v}" for n, v in CU121.items()),
        "nvidia-cuda-runtime-cu12==12.1.105",
    ]
    site = site_packages(venv)
    shutil.rmtree(site / "nvidia")  # what a fix to another CUDA build would have replaced
    python = str(venv / "bin" / "python")
    restore_file = tmp_path / "restore.txt"
    commands = restore_argvs(
        "pip", python, freeze, [], InstallSource(world["index"].as_uri()), str(restore_file)
    )
    restore_file.write_text(restore_text(python, freeze, "-", [], "now"))
    assert len(commands) == 1 and commands[0][-2:] == ["--index-url", world["index"].as_uri() + "/cu121"]
    run_restore(commands)
    assert (site / "nvidia" / "cuda_runtime" / "__init__.py").is_file()
    assert installed(venv) == before


def test_mirror_through_the_env_var_and_a_second_index(world, tmp_path):
    mirror = copy_index(world["index"], tmp_path / "mirror")
    venv = fresh_venv(world, tmp_path)
    res = run_fix(world, venv, "--yes", extra_env={"TORCHDOCTOR_INDEX_URL_BASE": mirror.as_uri()})
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"--index-url {mirror.as_uri()}/cu121" in res.stdout
    assert "Looking in indexes: " + mirror.as_uri() + "/cu121" in res.stdout
    assert_builds(venv, CU121)


def test_offline_from_a_flat_wheel_folder(world, tmp_path):
    flat = build_flat(tmp_path / "wheels")
    venv = fresh_venv(world, tmp_path)
    res = run_fix(world, venv, "--yes", "--find-links", str(flat), "--no-index", "--restore-file", "r.txt")
    assert res.returncode == 0, res.stdout + res.stderr
    assert (
        f"--find-links {flat} --no-index" in res.stdout
        and "--index-url" not in res.stdout.split("Fix plan")[1]
    )
    assert_builds(venv, CU121)
    commands = restore_command(res.stdout)
    assert commands[-1][-3:] == ["--find-links", str(flat), "--no-index"]
    run_restore(commands)
    assert_builds(venv, CPU)
    assert "nvidia-cuda-runtime-cu12" not in installed(venv)


def test_uv_made_env_is_fixed_with_uv(world, tmp_path):
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is None:
        pytest.skip("needs uv (pip install -e '.[test]')")
    venv = tmp_path / "uvenv"
    env = isolated_env({"UV_CACHE_DIR": str(tmp_path / "uvcache")})
    subprocess.run(
        [uv, "venv", "-q", "--python", world["py"], str(venv)], check=True, capture_output=True, env=env
    )
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "-q",
            "--python",
            str(venv / "bin" / "python"),
            "numpy==1.0.0",
            *(f"{n}=={v}" for n, v in CPU.items()),
            "--index-url",
            world["index"].as_uri() + "/cpu",
        ],
        check=True,
        capture_output=True,
        env=env,
    )
    res = run_fix(
        world,
        venv,
        "--yes",
        "--index-url-base",
        world["index"].as_uri(),
        extra_env={"UV_CACHE_DIR": str(tmp_path / "uvcache")},
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "installer: uv (the environment was made by uv)" in res.stdout
    assert " pip install --python " in res.stdout and "-m pip" not in res.stdout.split("will change")[1]
    assert_builds(venv, CU121)
    assert installed(venv)["numpy"] == "1.0.0"
    run_restore(restore_command(res.stdout), env=env)
    assert_builds(venv, CPU)
    assert "nvidia-cuda-runtime-cu12" not in installed(venv)


def test_install_failing_midway_is_rolled_back_and_the_restore_command_still_works(world, tmp_path):
    # The cu121 torch wheel resolves fine but ends with a file outside the install scheme: pip fails while
    # extracting it, after uninstalling the CPU build. pip rolls the uninstall back, but the new wheel's
    # files extracted so far stay (seen with pip 23.2.1): fix restores the CPU build itself, at once.
    venv = fresh_venv(world, tmp_path)
    res = run_fix(world, venv, "--yes", "--index-url-base", world["broken"].as_uri())
    assert res.returncode == 5, res.stdout + res.stderr
    assert (
        "step 1/1 failed (python exited with 1)" in res.stderr and "trying to install outside" in res.stderr
    )
    assert "torchdoctor: restored: every package is as it was before the fix." in res.stderr
    assert "pip check: no broken requirements." in res.stderr
    # The command printed in the plan works afterwards too (nothing to undo: it reinstalls the same builds).
    run_restore(restore_command(res.stdout))
    site = site_packages(venv)
    for name, version in CPU.items():
        scope: dict = {}
        exec((site / name / "version.py").read_text(), scope)
        assert scope["__version__"] == version and (site / f"{name}-{version}.dist-info").is_dir()
    assert installed(venv)["numpy"] == "1.0.0"


def test_wheel_missing_from_the_index_changes_nothing(world, tmp_path):
    index = copy_index(world["index"], tmp_path / "partial")
    shutil.rmtree(index / "cu121" / "torchaudio")
    venv = fresh_venv(world, tmp_path)
    res = run_fix(world, venv, "--yes", "--index-url-base", index.as_uri())
    assert res.returncode == 5, res.stdout + res.stderr
    assert "could not resolve the plan" in res.stderr and "nothing was changed" in res.stderr
    assert not list((tmp_path / "state").rglob("torchdoctor-restore-*"))
    assert_builds(venv, CPU)


def test_no_consent_without_yes_in_a_non_interactive_run(world, tmp_path):
    venv = fresh_venv(world, tmp_path)
    res = run_fix(world, venv, "--index-url-base", world["index"].as_uri())
    assert res.returncode == 6, res.stdout + res.stderr
    assert "stdin is not a terminal, so fix only prints the plan: pass --yes" in res.stderr
    assert "Fix plan" in res.stdout  # the plan was shown...
    assert "restore with:" not in res.stdout  # ...but nothing resolved: the dry run can download gigabytes
    assert_builds(venv, CPU)
    assert not list((tmp_path / "state").rglob("torchdoctor-restore-*"))
