"""The kernel reader's answers, kept per library file (doctor/probes/kernel_cache.py): used only while the file
and the reader are unchanged; a corrupt entry, a replaced or rewritten library, --no-cache and
TORCHDOCTOR_NO_CACHE all mean a fresh read. Libraries are small synthetic ELF files (tests/elfmaker.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path

import pytest
from elfmaker import cubin, fatbin_section, with_needed
from fakeenv import make_fake_env

from doctor.model.snapshot import BinaryKernels
from doctor.probes import binaries, kernel_cache
from doctor.probes.kernel_cache import KernelCache

REPO = Path(__file__).resolve().parents[1]


def write_library(path: Path, *sms: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(with_needed([(".nv_fatbin", fatbin_section([[cubin(sm) for sm in sms]] * 3))],
                                 ["libcudart.so.13"]))
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_cache, "RACY_SECONDS", 0.0)  # the libraries here were written a moment ago
    return KernelCache(tmp_path / "cache")


@pytest.fixture
def reads(monkeypatch):
    """Paths the real reader was asked to read, in order."""
    seen: list[Path] = []
    real = binaries.read_binary

    def counting(path, what):
        seen.append(path)
        return real(path, what)

    monkeypatch.setattr(binaries, "read_binary", counting)
    return seen


def entries(cache: KernelCache) -> list[str]:
    return sorted(os.listdir(cache.folder)) if os.path.isdir(cache.folder) else []


def test_a_library_read_once_is_not_read_again(tmp_path, cache, reads):
    lib = write_library(tmp_path / "lib" / "libtorch_cuda.so", 80, 90)
    first = binaries.read_binary_cached(lib, "torch", cache)
    assert first.status == "ok" and first.sm == ["sm_80", "sm_90"] and reads == [lib]
    again = binaries.read_binary_cached(lib, "torch", cache)
    assert reads == [lib]  # from the cache
    assert again == first  # every field, the recorded read's seconds included
    assert len(entries(cache)) == 1
    entry = Path(cache.folder) / entries(cache)[0]
    assert entry.stat().st_mode & 0o777 == 0o600


def test_the_path_is_the_one_found_this_time(tmp_path, cache, reads):
    lib = write_library(tmp_path / "real" / "libtorch_cuda.so", 80)
    link = tmp_path / "link"
    link.symlink_to(lib.parent)
    binaries.read_binary_cached(lib, "torch", cache)
    through_link = binaries.read_binary_cached(link / "libtorch_cuda.so", "torch", cache)
    assert reads == [lib]  # the same real file
    assert through_link.path == str(link / "libtorch_cuda.so")


@pytest.mark.parametrize("change", ["replaced", "rewritten in place", "touched", "grown"])
def test_a_changed_library_is_read_again(tmp_path, cache, reads, change):
    lib = write_library(tmp_path / "libtorch_cuda.so", 80)
    assert binaries.read_binary_cached(lib, "torch", cache).sm == ["sm_80"]
    time.sleep(0.01)  # a new mtime and ctime, even on a coarse clock
    if change == "replaced":  # what pip does: a new file moved over the old one
        os.replace(write_library(tmp_path / "new.so", 86), lib)
    elif change == "rewritten in place":  # and its mtime set back, as tar and cp -p do: only the ctime tells
        before = lib.stat()
        data = lib.read_bytes()
        with open(lib, "r+b") as handle:
            handle.write(data)
        os.utime(lib, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert lib.stat().st_mtime_ns == before.st_mtime_ns and lib.stat().st_size == before.st_size
    elif change == "touched":
        os.utime(lib, None)
    else:
        with open(lib, "ab") as handle:
            handle.write(b"\0" * 16)
    again = binaries.read_binary_cached(lib, "torch", cache)
    assert reads == [lib, lib]
    assert again.sm == (["sm_86"] if change == "replaced" else ["sm_80"])


def test_a_new_reader_reads_again(tmp_path, cache, reads, monkeypatch):
    lib = write_library(tmp_path / "libtorch_cuda.so", 80)
    binaries.read_binary_cached(lib, "torch", cache)
    monkeypatch.setattr(kernel_cache, "__version__", "99.0")  # another torchdoctor (the reader's code: its stat)
    binaries.read_binary_cached(lib, "torch", cache)
    assert reads == [lib, lib]


@pytest.mark.parametrize("damage", [
    b"", b"\0" * 64, b"{not json", b"[]", b'{"key": null}',
    "kernels-missing", "status-unknown", "wrong-type", "extra-field", "sm-not-text",
])
def test_a_corrupt_entry_is_a_miss_and_is_rewritten(tmp_path, cache, reads, damage):
    lib = write_library(tmp_path / "libtorch_cuda.so", 80)
    first = binaries.read_binary_cached(lib, "torch", cache)
    entry = Path(cache.folder) / entries(cache)[0]
    if isinstance(damage, bytes):
        entry.write_bytes(damage)
    else:
        data = json.loads(entry.read_bytes())
        kernels = data["kernels"]
        if damage == "kernels-missing":
            del data["kernels"]
        elif damage == "status-unknown":
            kernels["status"] = "unknown"
        elif damage == "wrong-type":
            kernels["containers"] = "3"
        elif damage == "extra-field":
            kernels["cached"] = True
        else:
            kernels["sm"] = [80]
        entry.write_text(json.dumps(data))
    again = binaries.read_binary_cached(lib, "torch", cache)
    assert reads == [lib, lib] and again.sm == first.sm
    assert binaries.read_binary_cached(lib, "torch", cache).sm == first.sm and reads == [lib, lib]  # rewritten


def test_only_finished_reads_of_settled_files_are_kept(tmp_path, cache, monkeypatch):
    bad = tmp_path / "libtorch_cuda.so"
    bad.write_bytes(b"#!/bin/sh\necho not a library\n")
    assert binaries.read_binary_cached(bad, "torch", cache).status in ("unknown", "no-gpu-code")
    kept = entries(cache)
    assert kept == [] if binaries.read_binary(bad, "torch").status == "unknown" else len(kept) == 1
    assert binaries.read_binary_cached(None, "torch", cache).status == "absent" and entries(cache) == kept
    monkeypatch.setattr(kernel_cache, "RACY_SECONDS", 2.0)  # a library written just now may be half written
    fresh = write_library(tmp_path / "fresh.so", 80)
    assert binaries.read_binary_cached(fresh, "torch", cache).sm == ["sm_80"]
    assert entries(cache) == kept


def test_a_library_that_changes_while_it_is_read_is_not_kept(tmp_path, cache, monkeypatch):
    lib = write_library(tmp_path / "libtorch_cuda.so", 80)
    real = binaries.read_binary

    def read_then_change(path, what):
        found = real(path, what)
        time.sleep(0.01)
        with open(path, "ab") as handle:
            handle.write(b"\0" * 8)
        return found

    monkeypatch.setattr(binaries, "read_binary", read_then_change)
    binaries.read_binary_cached(lib, "torch", cache)
    assert entries(cache) == []


def test_an_unwritable_cache_is_no_error(tmp_path, monkeypatch, reads):
    monkeypatch.setattr(kernel_cache, "RACY_SECONDS", 0.0)
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would be")
    lib = write_library(tmp_path / "libtorch_cuda.so", 80)
    cache = KernelCache(blocker)
    assert binaries.read_binary_cached(lib, "torch", cache).sm == ["sm_80"]
    assert binaries.read_binary_cached(lib, "torch", cache).sm == ["sm_80"] and len(reads) == 2


def test_the_entry_reader_knows_every_field():
    assert set(kernel_cache._FIELDS) == {f.name for f in fields(BinaryKernels)}


# --- through the command line ------------------------------------------------------------------------------

_TIMING = re.compile(r'("(?:collected_at|seconds|available_bytes)": )("[^"]*"|[-0-9.eE+]+|null)')


def _check(python: Path, cwd: Path, env: dict, *extra: str) -> str:
    res = subprocess.run([sys.executable, "-m", "doctor", "check", "--no-smoke", "--json", "--python", str(python),
                          *extra], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)
    assert res.returncode in (0, 1), res.stderr
    assert "Traceback" not in res.stderr
    return res.stdout


def test_check_output_is_the_same_with_and_without_the_cache(tmp_path):
    python = make_fake_env(tmp_path / "venv", torch="2.14.1", cuda="13.0")
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    write_library(site / "torch" / "lib" / "libtorch_cuda.so", 75, 80, 86, 90, 100, 120)
    time.sleep(kernel_cache.RACY_SECONDS + 0.1)  # settled: a library written just now is not kept
    sysroot = tmp_path / "sysroot"
    (sysroot / "proc").mkdir(parents=True)
    (sysroot / "proc" / "meminfo").write_text("MemTotal: 24684092 kB\nMemAvailable: 24188892 kB\n")
    xdg = tmp_path / "xdg"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "TORCHDOCTOR_NO_CACHE")}
    env.update(PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0", TORCHDOCTOR_SYSROOT=str(sysroot), XDG_CACHE_HOME=str(xdg))
    fresh = _check(python, tmp_path, env)
    kept = xdg / "torchdoctor" / "kernels"
    assert len(os.listdir(kept)) == 1
    assert json.loads(fresh)["snapshot"]["install"]["torch"]["kernels"]["sm"] == [
        "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    cached = _check(python, tmp_path, env)
    bypassed = _check(python, tmp_path, env, "--no-cache")
    assert _TIMING.sub(r"\1<t>", cached) == _TIMING.sub(r"\1<t>", fresh) == _TIMING.sub(r"\1<t>", bypassed)
    for entry in kept.iterdir():  # a corrupt entry: the same answer, read again
        entry.write_bytes(b"\0garbage")
    assert _TIMING.sub(r"\1<t>", _check(python, tmp_path, env)) == _TIMING.sub(r"\1<t>", fresh)
    for entry in kept.iterdir():
        entry.unlink()
    _check(python, tmp_path, env, "--no-cache")
    _check(python, tmp_path, dict(env, TORCHDOCTOR_NO_CACHE="1"))
    assert os.listdir(kept) == []  # bypassed: nothing written either
