"""The cache of what the target interpreter told us (doctor/probes/inspection_cache.py): a second run reuses
the answer, and anything that would change it (a package installed or removed with real pip, the interpreter
replaced, a .pth file, another torchdoctor) or a corrupt entry means a fresh inspection, never a stale answer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakeenv import make_fake_env, site_packages
from wheelhouse import StandIn, build_wheel

from doctor.probes import inspection_cache
from doctor.probes.cache import cache_dir, cache_disabled, read_entry, write_entry
from doctor.probes.inspection_cache import InspectionCache
from doctor.probes.interpreter import INSPECTOR, inspect_interpreter_full
from doctor.runner import run

REPO = Path(__file__).resolve().parents[1]


def _age(root: Path, seconds: float = 600) -> None:
    """Make every file of an environment look older than the racy window (a fresh venv is never recorded)."""
    then = time.time() - seconds
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.utime(os.path.join(folder, name), (then, then), follow_symlinks=False)
    os.utime(root, (then, then))


class Counting:
    """The real runner, counting the inspector's runs."""

    def __init__(self):
        self.calls = 0

    def __call__(self, argv, **kw):
        self.calls += 1
        return run(argv, **kw)


@pytest.fixture
def env(tmp_path):
    python = make_fake_env(tmp_path / "env", python=sys.executable, torch="2.6.0+cu126", cuda="12.6")
    _age(tmp_path / "env")
    return python


def _inspect(python, cache, runner):
    interp, install, facts = inspect_interpreter_full(str(python), "--python", runner=runner, cache=cache)
    return interp, install, facts


def _names(facts) -> set[str]:
    return {d.name for d in facts.dists}


def _cache(tmp_path) -> InspectionCache:
    return InspectionCache(tmp_path / "cache", INSPECTOR, env=dict(os.environ), cwd=str(tmp_path))


def test_second_run_reuses_the_answer(tmp_path, env):
    cache, runner = _cache(tmp_path), Counting()
    first = _inspect(env, cache, runner)
    second = _inspect(env, cache, runner)
    assert runner.calls == 1
    assert second == first
    assert first[1].torch.version == "2.6.0+cu126"


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *args, "--disable-pip-version-check",
                           "--no-input", "-q"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_pip_install_and_uninstall_in_the_target_invalidate(tmp_path, env):
    """Real pip, local wheels, no network: the answer after each change names what is there now (the inspector
    lists the CUDA libraries, nvidia-*), and a package it does not list still means a fresh inspection."""
    wheels = tmp_path / "wheels"
    build_wheel(wheels, StandIn("nvidia-tinylib-cu12", "12.6.1", (), files={"nvidia/tinylib/__init__.py": ""}))
    build_wheel(wheels, StandIn("tinypkg", "1.0", (), files={"tinypkg/__init__.py": "X = 1\n"}))
    cache, runner = _cache(tmp_path), Counting()
    assert "nvidia-tinylib-cu12" not in _names(_inspect(env, cache, runner)[2])
    _pip(env, "install", "--no-index", "--find-links", str(wheels), "nvidia-tinylib-cu12")
    assert "nvidia-tinylib-cu12" in _names(_inspect(env, cache, runner)[2])
    assert runner.calls == 2
    _age(tmp_path / "env")  # out of the racy window: this answer is recorded
    _inspect(env, cache, runner)
    _inspect(env, cache, runner)
    assert runner.calls == 3
    _pip(env, "uninstall", "-y", "nvidia-tinylib-cu12")
    assert "nvidia-tinylib-cu12" not in _names(_inspect(env, cache, runner)[2])
    assert runner.calls == 4
    _age(tmp_path / "env")
    _inspect(env, cache, runner)
    _inspect(env, cache, runner)
    assert runner.calls == 5
    _pip(env, "install", "--no-index", "--find-links", str(wheels), "tinypkg")
    _inspect(env, cache, runner)
    assert runner.calls == 6


def test_replaced_interpreter_invalidates(tmp_path, env):
    cache, runner = _cache(tmp_path), Counting()
    _inspect(env, cache, runner)
    target = os.path.realpath(env)
    os.unlink(env)
    os.symlink(target, env)  # the same target, but a new file: a replaced interpreter
    _inspect(env, cache, runner)
    assert runner.calls == 2


def test_new_pth_file_and_another_version_invalidate(tmp_path, env, monkeypatch):
    cache, runner = _cache(tmp_path), Counting()
    _inspect(env, cache, runner)
    extra = tmp_path / "env" / "extra"
    extra.mkdir()
    (site_packages(tmp_path / "env") / "extra.pth").write_text(str(extra) + "\n")
    _inspect(env, cache, runner)
    assert runner.calls == 2
    _age(tmp_path / "env")
    _inspect(env, cache, runner)
    assert runner.calls == 3  # recorded now
    _inspect(env, cache, runner)
    assert runner.calls == 3
    monkeypatch.setattr(inspection_cache, "__version__", "9.9.9")
    _inspect(env, cache, runner)
    assert runner.calls == 4


@pytest.mark.parametrize("garbage", [b"", b"{not json", b"[]", b'{"key": 1}', b"\xff\xfe" * 100])
def test_corrupt_entry_is_a_fresh_inspection(tmp_path, env, garbage):
    cache, runner = _cache(tmp_path), Counting()
    first = _inspect(env, cache, runner)
    (entry,) = (tmp_path / "cache" / inspection_cache.FOLDER).glob("*.json")
    entry.write_bytes(garbage)
    assert _inspect(env, cache, runner) == first
    assert runner.calls == 2
    assert json.loads(entry.read_bytes())["stdout"]  # the fresh answer replaced the corrupt one


def test_tampered_answer_under_a_valid_key_is_not_trusted_when_files_changed(tmp_path, env):
    """An entry whose watch list no longer matches is a miss, even if its JSON is well formed."""
    cache, runner = _cache(tmp_path), Counting()
    _inspect(env, cache, runner)
    (entry,) = (tmp_path / "cache" / inspection_cache.FOLDER).glob("*.json")
    data = json.loads(entry.read_bytes())
    data["watch"][0][2] = [0, 0, 0, 0, 0, 0]
    entry.write_text(json.dumps(data))
    _inspect(env, cache, runner)
    assert runner.calls == 2


def test_cache_folder_and_switch():
    assert cache_dir({"XDG_CACHE_HOME": "/x/c", "HOME": "/h"}, "linux") == "/x/c/torchdoctor"
    assert cache_dir({"XDG_CACHE_HOME": "relative", "HOME": "/h"}, "linux") == "/h/.cache/torchdoctor"
    assert cache_dir({"HOME": "/h"}, "darwin") == "/h/Library/Caches/torchdoctor"
    assert cache_dir({"LOCALAPPDATA": "/l", "HOME": "/h"}, "win32") == os.path.join("/l", "torchdoctor", "Cache")
    assert cache_disabled({"TORCHDOCTOR_NO_CACHE": "1"}) and not cache_disabled({"TORCHDOCTOR_NO_CACHE": "0"})
    assert not cache_disabled({})


def test_unwritable_cache_is_skipped(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert write_entry(blocker / "sub" / "entry.json", b"{}") is False
    assert read_entry(blocker / "nothing.json") is None


# --- through the CLI ----------------------------------------------------------------------------------------

MEMINFO = "MemTotal:       24684092 kB\nMemFree:        24000000 kB\nMemAvailable:   24188892 kB\n"


def _check_json(python: Path, tmp_path: Path, *extra: str) -> dict:
    sysroot = tmp_path / "sysroot"
    (sysroot / "proc").mkdir(parents=True, exist_ok=True)
    (sysroot / "proc" / "meminfo").write_text(MEMINFO)
    env = dict(os.environ, PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0", TORCHDOCTOR_SYSROOT=str(sysroot),
               XDG_CACHE_HOME=str(tmp_path / "xdg"))
    env.pop("TORCHDOCTOR_NO_CACHE", None)
    done = subprocess.run([sys.executable, "-m", "doctor", "check", "--no-smoke", "--json", "--python", str(python),
                           *extra], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout


# Fields that differ between any two runs, cache or not: when (timing) and the free disk space right now.
_VOLATILE = re.compile(r'("(?:collected_at|seconds|available_bytes)": )("[^"]*"|[-0-9.eE+]+|null)')


def _without_timing(text: str) -> str:
    """The report's text, byte for byte, with the values of the volatile fields replaced."""
    return _VOLATILE.sub(r"\1<volatile>", text)


def test_json_is_the_same_with_and_without_the_cache(tmp_path, env):
    fresh = _check_json(env, tmp_path)  # fills the cache
    (entry,) = (tmp_path / "xdg" / "torchdoctor" / inspection_cache.FOLDER).glob("*.json")
    stamp = entry.stat().st_mtime_ns
    cached = _check_json(env, tmp_path)
    assert entry.stat().st_mtime_ns == stamp  # a hit: nothing was inspected or written again
    bypassed = _check_json(env, tmp_path, "--no-cache")
    assert _without_timing(cached) == _without_timing(fresh) == _without_timing(bypassed)
    assert "collected_at\": <volatile>" in _without_timing(cached)  # the pattern did match
