"""The compatibility table's compact form in the user's cache (doctor/app/tables.py): the same table as a
fresh parse, and a changed table file, a corrupt entry or one others could write mean a fresh parse."""

from __future__ import annotations

import os
import pickle
import shutil

import pytest

from doctor.app import tables
from doctor.table.load import default_table_path, load_table


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TORCHDOCTOR_NO_CACHE", raising=False)
    return tmp_path / "xdg" / "torchdoctor" / tables.FOLDER


def _entries(folder):
    return sorted(folder.glob("*.pickle")) if folder.is_dir() else []


def _same(a, b) -> bool:
    return pickle.dumps(a, protocol=4) == pickle.dumps(b, protocol=4)


def test_cached_table_is_the_parsed_table(cache_home):
    first = tables.load_table_fast(None)
    (entry,) = _entries(cache_home)
    second = tables.load_table_fast(None)
    assert second is not first  # read back from the entry, not the same object
    assert _same(second, load_table(None))
    assert second.table_version == first.table_version and str(second.path) == str(first.path)
    assert _entries(cache_home) == [entry]


def test_edited_table_file_is_parsed_again(cache_home, tmp_path):
    path = tmp_path / "table.json"
    shutil.copy(default_table_path(), path)
    old = tables.load_table_fast(path)
    text = path.read_text().replace(f'"{old.table_version}"', '"2099.01.01"', 1)
    path.write_text(text)
    new = tables.load_table_fast(path)
    assert new.table_version == "2099.01.01" != old.table_version


@pytest.mark.parametrize("garbage", [b"", b"nonsense", tables.MAGIC + b"{}\n" + b"\x80\x04junk"])
def test_corrupt_entry_is_parsed_again(cache_home, garbage):
    tables.load_table_fast(None)
    (entry,) = _entries(cache_home)
    entry.write_bytes(garbage)
    assert _same(tables.load_table_fast(None), load_table(None))


def test_entry_with_a_foreign_key_or_loose_mode_is_not_unpickled(cache_home, monkeypatch):
    tables.load_table_fast(None)
    (entry,) = _entries(cache_home)
    os.chmod(entry, 0o666)
    loaded = []
    monkeypatch.setattr(pickle, "loads", lambda data: loaded.append(data))
    tables.load_table_fast(None)
    assert not loaded  # group/world-writable: never unpickled


def test_no_cache_reads_and_writes_nothing(cache_home, monkeypatch):
    tables.load_table_fast(None, cache=False)
    monkeypatch.setenv("TORCHDOCTOR_NO_CACHE", "1")
    tables.load_table_fast(None)
    assert _entries(cache_home) == []
