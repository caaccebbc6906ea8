"""`fix` installs from the sources it names, into the environment it checked, or not at all (issue 27).

An exact pin says which build, never from where. Before, `fix` ran pip and uv with whatever their settings
added (``PIP_FIND_LINKS``, an ``extra-index-url`` in some pip.conf, ``UV_EXTRA_INDEX_URL``, uv.toml...) and
said "the exact pins keep the torch builds from coming from them", which is false: pip takes the build
with the best wheel tag from any source (a build tag wins), uv prefers an extra index over ``--index-url``.
And ``PIP_TARGET``, ``PIP_PREFIX``, ``PIP_ROOT``, ``PIP_USER`` (or ``target=``/``user=`` in a pip.conf, or
uv's ``[pip] target``) made the install land elsewhere, while fix checked, backed up and verified the
target environment.

Real pip and uv (fixworld.py's venv and local index) through the real CLI:

- a find-links folder whose ``torch-2.7.1+cu128-1-py3-none-any.whl`` (build tag 1) outbids the index, from
  the environment and from the venv's own pip.conf (pip): named in the summary with where it came from,
  refused before anything changed (exit 6);
- install redirections from the environment and a pip.conf: refused up front in one line that names the
  setting and where it came from (exit 2), before the installer ran at all;
- uv, which records nowhere where a wheel came from, runs with only the plan's sources: ``UV_FIND_LINKS``,
  a ``UV_CONSTRAINT`` file with a ``--find-links`` line (uv follows it even with ``--no-config``), a uv.toml's
  ``find-links`` or ``[pip] target`` are named as not used, and torch comes from the plan's index into the
  venv; a uv cache whose torch file was changed since (uv links cached files without hashing them again) is
  caught by comparing the installed files with the plan's wheel, and rolled back (exit 5).

With the installer faked at the runner boundary (tests/test_fix_unit.py's): a wheel that pip's report of
the install itself says came from elsewhere, a torch gone after the install, a new error finding after
it: each is a failed fix, rolled back, with the restore command printed (exit 5).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import test_fix_unit as unit
from factory import gpu, make_snapshot
from fakeenv import site_packages
from fixworld import NEW, OLD, cli_env, fresh_venv, get_fix_world, installed, pip_check, pip_env, wheels
from hostile import base_env, run_cli
from wheelhouse import build_wheel

from doctor import exitcodes
from doctor.fix.run import FixOptions
from doctor.fix.run import run_fix as fix
from doctor.table.load import load_table

pytestmark = [pytest.mark.hostile, pytest.mark.slow]


@pytest.fixture(scope="module")
def world():
    found = get_fix_world()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture(scope="module")
def evil(world, tmp_path_factory) -> Path:
    """A flat folder with a torch 2.7.1+cu128 that outbids the index's: the same version, build tag 1."""
    folder = tmp_path_factory.mktemp("evil")
    torch = next(w for w in wheels() if w.name == "torch" and w.version == NEW["torch"])
    path = build_wheel(folder, torch)
    path.rename(folder / path.name.replace("-py3-none-any", "-1-py3-none-any"))
    return folder


def run_fix(world, root: Path, extra_env: dict, *more: str, keep_uv_config: bool = False):
    root.mkdir(parents=True, exist_ok=True)
    venv = root / "venv"
    if not venv.exists():
        fresh_venv(world, venv)
    env = cli_env(world, base_env(None))
    # PIP_CONFIG_FILE=/dev/null (base_env's) makes pip skip every configuration file; an empty one skips only
    # the user's (this machine's own), so the global and the venv's own pip.conf count, as for a user.
    (root / "empty.conf").write_text("")
    env["PIP_CONFIG_FILE"] = str(root / "empty.conf")
    if keep_uv_config:
        env.pop("UV_NO_CONFIG", None)
    env.update(extra_env)
    args = ["fix", "--yes", "--no-smoke", "--python", str(venv / "bin" / "python"),
            "--index-url-base", world.small.as_uri(), *more]
    return venv, run_cli(args, env, cwd=root, limit=240, needles=(str(venv),))


def assert_untouched(venv: Path, res) -> None:
    state = installed(venv)
    assert all(state.get(n) == v for n, v in OLD.items()), f"the venv changed: {state}\n{res.summary()}"
    assert pip_check(venv)[0] == 0


# --- sources the plan does not name ---------------------------------------------------------------------


def test_a_find_links_folder_from_the_environment_is_named_and_refused(world, evil, tmp_path):
    venv, res = run_fix(world, tmp_path, {"PIP_FIND_LINKS": str(evil)})
    assert res.returncode == exitcodes.REFUSED, res.summary()
    assert "find-links=" in res.out and "environment variable PIP_FIND_LINKS" in res.out, res.summary()
    assert "refusing: pip would take torch from " + evil.as_uri() in res.err, res.summary()
    assert "exact pins keep" not in res.text
    assert_untouched(venv, res)


def test_a_find_links_folder_in_the_venvs_pip_conf_is_named_and_refused(world, evil, tmp_path):
    venv = fresh_venv(world, tmp_path / "venv")
    (venv / "pip.conf").write_text(f"[global]\nfind-links = {evil}\n")
    _, res = run_fix(world, tmp_path, {})
    assert res.returncode == exitcodes.REFUSED, res.summary()
    assert f"{venv / 'pip.conf'} [global] (site)" in res.out, res.summary()
    assert "refusing: pip would take torch from " + evil.as_uri() in res.err
    assert_untouched(venv, res)


def need_uv(world) -> str:
    found = shutil.which("uv", path=cli_env(world, base_env(None))["PATH"])
    if found is None:
        pytest.skip("no uv")
    return found


@pytest.fixture(scope="module")
def evil_files(world, tmp_path_factory) -> Path:
    """A flat folder with a torch 2.7.1+cu128 whose files are not the index's (one more: torch/evil.py)
    and that outbids it (build tag 1)."""
    folder = tmp_path_factory.mktemp("evil-files")
    torch = next(w for w in wheels() if w.name == "torch" and w.version == NEW["torch"])
    path = build_wheel(folder, replace(torch, files={**torch.files, "torch/evil.py": "EVIL = True\n"}))
    path.rename(folder / path.name.replace("-py3-none-any", "-1-py3-none-any"))
    return folder


def assert_the_plans_torch(venv: Path, res) -> None:
    assert res.returncode == 0, res.summary()
    state = installed(venv)
    assert all(state.get(n) == v for n, v in NEW.items()), f"not the plan's builds: {state}\n{res.summary()}"
    assert not (site_packages(venv) / "torch" / "evil.py").exists(), "torch came from the evil folder"
    assert "After the install, fix compares the installed torch files with the plan's wheels." in res.out
    assert pip_check(venv)[0] == 0


@pytest.mark.parametrize("where", ["UV_FIND_LINKS", "UV_CONSTRAINT", "uv.toml"])
def test_uv_runs_without_the_sources_its_settings_add(world, evil_files, tmp_path, where):
    """uv runs with --no-config and without its source variables: named in the summary as not used, and
    torch comes from the plan's index. (A constraints file may name a --find-links of its own: uv takes
    torch from it, even with --no-config, so UV_CONSTRAINT goes too.)"""
    need_uv(world)
    tmp_path.mkdir(exist_ok=True)
    extra, keep = {}, False
    if where == "UV_FIND_LINKS":
        extra["UV_FIND_LINKS"] = str(evil_files)
        named = "environment variable UV_FIND_LINKS): not used"
    elif where == "UV_CONSTRAINT":
        (tmp_path / "constraints.txt").write_text(f"--find-links {evil_files}\ntorch==2.7.1+cu128\n")
        extra["UV_CONSTRAINT"] = str(tmp_path / "constraints.txt")
        named = "uv runs without UV_CONSTRAINT"
    else:
        (tmp_path / "uv.toml").write_text(f'find-links = ["{evil_files}"]\n')
        keep = True
        named = f"(from {tmp_path / 'uv.toml'} (the working folder's project)): not used"
    venv, res = run_fix(world, tmp_path, extra, "--installer", "uv", keep_uv_config=keep)
    assert named in " ".join(res.out.split()), res.summary()
    assert_the_plans_torch(venv, res)


def test_a_uv_cache_that_serves_other_files_is_rolled_back(world, tmp_path):
    """uv links a wheel's files from its cache without hashing them again: a cache changed since (shared
    with another job) installs other bytes under the plan's RECORD. Real uv, a file:// index: fix compares
    the installed files with the plan's wheel, rolls back and prints the restore command (exit 5)."""
    uv = need_uv(world)
    cache = tmp_path / "uv-cache"
    scratch = fresh_venv(world, tmp_path / "scratch")
    subprocess.run([uv, "pip", "install", "--no-config", "--python", str(scratch / "bin" / "python"),
                    "torch==" + NEW["torch"], "--index-url", world.small.as_uri() + "/cu128",
                    "--cache-dir", str(cache)], check=True, capture_output=True, timeout=120, env=pip_env())
    [cached] = [p for p in cache.glob("archive-v*/*/torch/version.py")]
    cached.unlink()  # a new file, not the one the scratch venv shares by a hard link
    cached.write_text(f"__version__ = {NEW['torch']!r}\nEVIL = True\n")
    venv, res = run_fix(world, tmp_path, {"UV_CACHE_DIR": str(cache)}, "--installer", "uv")
    assert res.returncode == exitcodes.FIX_FAILED, res.summary()
    said = ("torchdoctor: torch is not what the plan's sources serve: its installed files are not the plan's "
            "torch 2.7.1+cu128 wheel (torch/version.py holds other bytes); rolling back.")
    assert said in " ".join(res.err.split()), res.summary()
    assert "restore command (if anything still differs): " in res.err
    assert_untouched(venv, res)


# --- settings that install somewhere else ---------------------------------------------------------------


@pytest.mark.parametrize("where", ["env", "pip.conf"])
def test_pip_settings_that_install_elsewhere_are_refused_up_front(world, tmp_path, where):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    venv = fresh_venv(world, tmp_path / "venv")
    if where == "pip.conf":
        (venv / "pip.conf").write_text(f"[install]\ntarget = {elsewhere}\n")
        _, res = run_fix(world, tmp_path, {})
        origin = f"{venv / 'pip.conf'} [install] (site)"
    else:
        _, res = run_fix(world, tmp_path, {"PIP_TARGET": str(elsewhere)})
        origin = "environment variable PIP_TARGET"
    assert res.returncode == exitcodes.USAGE, res.summary()
    [line] = [line for line in res.err.splitlines() if line.strip()]
    assert "refusing: target=" in line and origin in line and "somewhere other than" in line, res.summary()
    assert list(elsewhere.iterdir()) == []
    assert "Wrote the restore file" not in res.out
    assert_untouched(venv, res)


def test_pip_user_from_the_environment_is_refused(world, tmp_path):
    venv, res = run_fix(world, tmp_path, {"PIP_USER": "yes"})
    assert res.returncode == exitcodes.USAGE and "environment variable PIP_USER" in res.err, res.summary()
    assert_untouched(venv, res)


def test_uv_toml_that_installs_elsewhere_is_not_used(world, tmp_path):
    """uv runs with --no-config: a uv.toml's [pip] target is named as not used, and the install lands in
    the environment fix checked."""
    need_uv(world)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tmp_path.joinpath("uv.toml").write_text(f'[pip]\ntarget = "{elsewhere}"\n')
    venv, res = run_fix(world, tmp_path, {}, "--installer", "uv", keep_uv_config=True)
    named = f"target={elsewhere} (from {tmp_path / 'uv.toml'} [pip] (the working folder's project)): not used"
    assert named in " ".join(res.out.split()), res.summary()
    assert list(elsewhere.iterdir()) == []
    assert_the_plans_torch(venv, res)


# --- after the install (the installer faked) -------------------------------------------------------------


def test_a_wheel_the_install_took_from_elsewhere_is_rolled_back(tmp_path, capsys):
    class Elsewhere(unit.FakeInstaller):
        def stream(self, argv, timeout, on_line, env=None):
            result = super().stream(argv, timeout, on_line, env)
            if "--report" in argv:  # pip's report of the real install: torch came from another host
                path = Path(argv[argv.index("--report") + 1])
                text = path.read_text().replace(unit.WHEELS + "/torch.whl", "https://evil.example/t.whl")
                path.write_text(text)
            return result

    fake = Elsewhere()
    machine = unit.fake_machine(fake, [unit.cpu_snapshot(), unit.make_snapshot()], load_table(), tmp_path)
    code = fix(unit.opts(), FixOptions(yes=True), machine)
    captured = capsys.readouterr()
    assert code == exitcodes.FIX_FAILED, captured.out + captured.err
    assert "torch came from https://evil.example/t.whl, a source the plan does not name" in captured.err
    assert fake.restored and fake.state == fake.before  # rolled back
    assert "restore command" in captured.err and " -m pip install -r " in captured.err


@pytest.mark.parametrize("after", ["no-torch", "new-error"])
def test_torch_gone_or_a_new_error_after_the_install_is_a_failed_fix(tmp_path, capsys, after):
    if after == "no-torch":
        later = make_snapshot(torch=None, torchvision=None, torchaudio=None)
    else:  # a driver too old for the new build: an error finding that was not there before
        later = make_snapshot(gpus=[gpu("NVIDIA GeForce RTX 4090", "8.9")], driver="470.57.02",
                              max_cuda="11.4")
    fake = unit.FakeInstaller()
    machine = unit.fake_machine(fake, [unit.cpu_snapshot(), later], load_table(), tmp_path)
    code = fix(unit.opts(), FixOptions(yes=True), machine)
    captured = capsys.readouterr()
    assert code == exitcodes.FIX_FAILED, captured.out + captured.err
    assert "the fix made things worse" in captured.err and "rolling back" in captured.err
    assert ("torch is gone" in captured.err) == (after == "no-torch")
    assert fake.restored and fake.state == fake.before
    assert "Fixed:" not in captured.out
