"""The compatibility table: the bundled data holds the reference facts, the loader validates and indexes."""

from __future__ import annotations

import copy
import itertools
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.version import Version

from doctor import exitcodes
from doctor.errors import TableError
from doctor.model.versions import variant_to_cuda
from doctor.table.load import (
    CONFIDENCES,
    CompatTable,
    default_table_path,
    load_table,
)

TINY = Path(__file__).parent / "fixtures" / "tables" / "tiny.json"


@pytest.fixture(scope="module")
def table() -> CompatTable:
    return load_table()


@pytest.fixture(scope="module")
def tiny() -> CompatTable:
    return load_table(TINY)


# --- the bundled table -------------------------------------------------------------------------


def test_bundled_table_loads_with_its_versions(table):
    assert table.schema_version == 1
    assert table.table_version == "2026.12.02"
    assert table.verified_on == "2026-11-29"
    assert Path(table.path) == default_table_path().resolve()
    assert [r.minor for r in table.releases] == [f"1.{n}" for n in range(8, 14)] + [
        f"2.{n}" for n in range(16)
    ]


def test_default_table_path_is_the_shipped_file():
    path = default_table_path()
    assert path.is_file()
    assert path.name == "pytorch.json"
    assert path.parent.name == "compat_tables"


@pytest.mark.parametrize(
    "version, minor",
    [
        ("2.7", "2.7"),
        ("2.7.1", "2.7"),
        ("2.7.1+cu128", "2.7"),
        ("2.8.0a0+gitabc123", "2.8"),
        ("2.10.0", "2.10"),
    ],
)
def test_release_accepts_any_form_of_a_version(table, version, minor):
    assert table.release(version).minor == minor


@pytest.mark.parametrize("version", ["1.7.1", "2.16.0", "3.0", "garbage", ""])
def test_release_unknown_or_garbage_is_none(table, version):
    assert table.release(version) is None


def test_torch_27_has_cu128_on_linux_x86_64_but_pypi_gives_cu126(table):
    release = table.release("2.7.1")
    assert "cu128" in release.variants_for("linux-x86_64")
    assert release.pypi_default["linux-x86_64"] == "cu126"
    assert release.latest.torch == "2.7.1"
    assert release.patch("2.7.0").torchvision == "0.22.0"
    assert release.patch("2.7.1+cu128").torchaudio == "2.7.1"
    assert release.patch("2.7.9") is None


# Fact 1 of compat_tables/SOURCES.md ("The ten facts"): which build plain `pip install torch` gives.
PYPI_LINUX_X86 = {
    "2.0": "cu117", **dict.fromkeys(["2.1", "2.2", "2.3", "2.4"], "cu121"), **dict.fromkeys(["2.5", "2.6"], "cu124"),
    **dict.fromkeys(["1.8", "1.9", "1.10", "1.11", "1.12"], "cu102"), "1.13": "cu117",
    "2.7": "cu126", **dict.fromkeys(["2.8", "2.9", "2.10"], "cu128"),
    **dict.fromkeys(["2.11", "2.12", "2.13", "2.14"], "cu130"), "2.15": "cu132",
}  # fmt: skip


@pytest.mark.parametrize("minor", sorted(PYPI_LINUX_X86, key=Version))
def test_pypi_default_per_release_and_platform(table, minor):
    release = table.release(minor)
    assert release.pypi_default["linux-x86_64"] == PYPI_LINUX_X86[minor]
    # torch/version.py of every PyPI Windows wheel: +cpu
    assert release.pypi_default["windows-x86_64"] == "cpu"
    if release.variants_for("darwin-arm64"):
        assert release.pypi_default["darwin-arm64"] == "cpu"
    aarch64 = release.pypi_default.get("linux-aarch64")
    if Version(minor) <= Version("2.10"):
        assert aarch64 == "cpu" or not release.variants_for("linux-aarch64")  # 1.9.1 has no aarch64 wheel
    elif minor == "2.15":
        assert aarch64 == "cu132"
    else:
        assert aarch64 == "cu130"
    assert "pypi_default.linux-aarch64" not in release.unverified_fields
    assert "pypi_default.windows-x86_64" not in release.unverified_fields


# Fact 10: Python windows.
@pytest.mark.parametrize(
    "minor, lowest, highest",
    [("1.8", "3.6", "3.9"), ("1.10", "3.6", "3.9"), ("1.11", "3.7", "3.10"), ("1.13", "3.7", "3.10"),
     ("2.0", "3.8", "3.11"), ("2.2", "3.8", "3.12"), ("2.5", "3.9", "3.12"), ("2.6", "3.9", "3.13"),
     ("2.9", "3.10", "3.14"), ("2.14", "3.10", "3.14"), ("2.15", "3.11", "3.15")],
)  # fmt: skip
def test_python_windows(table, minor, lowest, highest):
    release = table.release(minor)
    assert (release.python_min, release.python_max) == (lowest, highest)
    low = Version(lowest)
    assert release.supports_python(f"{lowest}.0")
    assert release.supports_python(f"{highest}.1")
    assert not release.supports_python(f"{low.major}.{low.minor - 1}.18")
    assert not release.supports_python("4.0")
    assert not release.supports_python("not-a-python")


def test_free_threaded_builds(table):
    assert table.release("2.7").free_threaded == ("3.13t",)
    assert table.release("2.9").free_threaded == ("3.13t", "3.14t")  # PyPI has cp313t and cp314t wheels
    assert table.release("2.10").free_threaded == ("3.13t", "3.14t")
    assert table.release("2.5").free_threaded == ()
    assert table.release("1.13").free_threaded == ()
    assert table.release("2.15").free_threaded == ("3.14t", "3.15t")
    assert "python.free_threaded" not in table.release("2.15").unverified_fields


def test_free_threaded_per_patch(table):
    """2.12.0 still shipped cp313t; 2.12.1 and later ship only cp314t (3.15t from 2.15)."""
    release = table.release("2.12")
    assert release.free_threaded_for("2.12.0") == ("3.13t", "3.14t")
    assert release.free_threaded_for("2.12.1+cu130") == ("3.14t",)
    assert release.free_threaded_for() == ("3.14t",)  # the latest patch
    assert release.free_threaded_for("2.12.9") == ("3.14t",)  # unknown patch: the latest
    for minor in ("2.13", "2.14"):
        assert "3.13t" not in table.release(minor).free_threaded_for()


def test_requires_python_with_patch_exclusions(table):
    """torchvision 0.26+ refuses exactly Python 3.14.1; torch itself does not."""
    for minor in ("2.11", "2.14", "2.15"):
        release = table.release(minor)
        assert release.requires_python_ok("torchvision", "3.14.1") is False
        assert release.requires_python_ok("torchvision", "3.14.2") is True
        assert release.requires_python_ok("torch", "3.14.1") is True
    assert table.release("2.15").requires_python_ok("torch", "3.10.14") is False
    assert table.release("2.10").requires_python_ok("torchvision", "3.14.1") is True
    assert table.release("1.8").requires_python_ok("torch", "3.6.1") is False  # >=3.6.2
    assert table.release("1.8").requires_python_ok("torchvision", "3.8") is None  # not declared
    assert table.release("2.14").requires_python_ok("torch", "3.14t") is True


def test_patches_ascending_and_companions_follow_the_pattern(table):
    for release in table.releases:
        versions = [Version(p.torch) for p in release.patches]
        assert versions == sorted(versions), release.minor
        assert release.latest == release.patches[-1]
        minor = Version(release.minor).minor
        for patch in release.patches:
            assert Version(patch.torch).release[:2] == Version(release.minor).release[:2]
            if Version(release.minor).major == 1:  # 1.Y pairs with torchvision 0.(Y+1) and torchaudio 0.Y
                assert Version(patch.torchvision).release[:2] == (0, minor + 1), patch
                assert Version(patch.torchaudio).release[:2] == (0, minor), patch
                continue
            if release.minor != "2.15":  # no torchvision 0.30: 2.15 pairs with 0.29.2
                assert Version(patch.torchvision).release[:2] == (0, minor + 15), patch
            if minor >= 12:
                assert patch.torchaudio is None, patch  # torchaudio stopped at 2.11
            else:
                assert Version(patch.torchaudio).release[:2] == (2, minor), patch
    assert table.release("2.15").latest.torchvision == "0.29.2"
    assert "patches" in table.release("2.15").unverified_fields


def test_torch_214_has_no_torchaudio(table):
    release = table.release("2.14")
    assert [p.torch for p in release.patches] == ["2.14.0", "2.14.1"]
    assert all(p.torchaudio is None for p in release.patches)


def test_variants_by_platform(table):
    assert table.release("2.2").variants_for("darwin-x86_64") == ("cpu",)
    assert table.release("2.3").variants_for("darwin-x86_64") == ()
    assert table.release("2.14").variants_for("darwin-arm64") == ("cpu",)
    assert "cu134" in table.release("2.14").variants_for("linux-x86_64")
    assert "cu134" not in table.release("2.14").variants_for("windows-x86_64")
    assert "rocm6.3" in table.release("2.7").variants_for("linux-x86_64")
    assert "cu118" not in table.release("2.8").variants_for("linux-x86_64")
    assert "cu128" not in table.release("2.12").variants_for("linux-x86_64")
    assert table.release("2.7").variants_for("sunos-sparc") == ()
    for release in table.releases:
        for platform, variants in release.variants.items():
            assert "cpu" in variants, (release.minor, platform)
            assert not any(v.startswith("rocm") for v in variants) or platform == "linux-x86_64"


def test_every_row_has_source_and_known_confidence(table):
    rows = [
        *table.releases, *table.arch_lists, *table.cuda_drivers, *table.major_floors, *table.driver_branches,
        *table.gpu_models,
    ]  # fmt: skip
    for row in rows:
        assert row.source.strip(), row
        assert row.confidence in CONFIDENCES, row


def test_every_arch_row_variant_is_published_for_its_release(table):
    assert len(table.arch_lists) >= 60
    for row in table.arch_lists:
        release = table.release(row.torch_minor)
        assert release is not None, row
        assert row.variant in release.variants_for(row.platform), row


def test_blackwell_arch_lists(table):
    cu128 = table.arch_list("2.7.1+cu128", "cu128", "linux-x86_64")
    assert cu128.torch_minor == "2.7"
    assert "sm_120" in cu128.sm
    assert "sm_70" not in cu128.sm  # Volta missing from 2.7 cu128, re-added in 2.8
    assert "sm_70" in table.arch_list("2.8.0", "cu128", "linux-x86_64").sm
    assert "sm_70" not in table.arch_list("2.11.0", "cu128", "linux-x86_64").sm
    cu126 = table.arch_list("2.7.1", "cu126", "linux-x86_64")
    assert "sm_120" not in cu126.sm
    assert "sm_60" in cu126.sm


def test_ptx_none_means_unknown_and_empty_means_none(table):
    assert table.arch_list("2.14.1", "cu130", "linux-x86_64").ptx == ()  # cuobjdump: no PTX at all
    assert table.arch_list("2.13.0", "cu130", "linux-x86_64").ptx is None  # not observed
    assert table.arch_list("2.9.0", "cu130", "linux-x86_64").ptx == ("compute_120",)


def test_arch_list_falls_back_to_older_row_of_same_build(table):
    # 2.15 publishes cu132 for aarch64 but the reference has no 2.15 aarch64 row: 2.14's is used.
    row = table.arch_list("2.15.0", "cu132", "linux-aarch64")
    assert row.torch_minor == "2.14"
    assert "sm_110" in row.sm
    assert table.arch_list("2.7.1", "cu126", "windows-x86_64") is None  # no Windows arch rows
    assert table.arch_list("2.12.0", "cu128", "linux-x86_64") is None  # cu128 not built for 2.12


def test_driver_branches(table):
    assert table.max_cuda_for_driver("570.124.04").max_cuda == "12.8"
    assert table.max_cuda_for_driver("535.183.01").max_cuda == "12.2"
    assert table.max_cuda_for_driver("565.57.01").max_cuda == "12.7"
    assert table.max_cuda_for_driver("610.43.02").max_cuda == "13.3"
    assert table.max_cuda_for_driver("580.95.05").max_cuda == "13.0"
    windows = table.max_cuda_for_driver("572.61")  # Windows R570 driver
    assert (windows.branch, windows.max_cuda) == (570, "12.8")
    assert table.max_cuda_for_driver("617.14").branch == 615
    assert table.max_cuda_for_driver("440.33.01").max_cuda == "10.2"
    assert table.max_cuda_for_driver("418.87.01").max_cuda == "10.1"
    assert table.max_cuda_for_driver("430.50").max_cuda == "10.1"  # nearest lower branch: R418
    assert table.max_cuda_for_driver("410.104").max_cuda == "10.0"
    assert table.max_cuda_for_driver("396.82").max_cuda == "9.2"
    assert table.max_cuda_for_driver("384.130").max_cuda == "9.0"
    assert table.max_cuda_for_driver("375.26") is None
    assert table.max_cuda_for_driver("") is None
    assert table.max_cuda_for_driver("N/A") is None


def test_cuda_driver_minimums(table):
    assert table.cuda_driver("12.8").min_linux == "570.26"
    assert table.cuda_driver("12.8.1").min_linux == "570.26"
    assert table.cuda_driver("cu128").min_windows == "570.65"
    assert table.cuda_driver("13.0").min_linux == "580.65.06"
    assert table.cuda_driver("11.8").min_linux == "520.61.05"
    assert table.cuda_driver("12.7") is None
    assert table.cuda_driver("x") is None
    assert table.cuda_driver("13.4").min_linux is None  # only the branch is known
    assert table.cuda_driver("13.4").confidence == "unverified"


def test_cuda_major_floors(table):
    floors = {m: (table.major_floor(m).min_linux, table.major_floor(m).min_windows) for m in (11, 12, 13)}
    assert floors == {11: ("450.80.02", "452.39"), 12: ("525.60.13", "527.41"), 13: ("580.65.06", "580")}
    assert table.major_floor(10).min_linux == "440.33"  # no minor-version compatibility: the 10.2 driver
    assert table.major_floor(9) is None


def test_every_cuda_variant_has_driver_rows(table):
    for release in table.releases:
        for variant in itertools.chain.from_iterable(release.variants.values()):
            cuda = variant_to_cuda(variant)
            if cuda is None:
                continue
            assert table.cuda_driver(cuda) is not None, (release.minor, variant)
            assert table.major_floor(int(cuda.split(".")[0])) is not None, (release.minor, variant)


@pytest.mark.parametrize(
    "name, cc",
    [
        ("NVIDIA GeForce RTX 5090", "12.0"),
        ("GeForce GTX 1080 Ti", "6.1"),
        ("Tesla V100-SXM2-32GB", "7.0"),
        ("NVIDIA H200", "9.0"),
        ("NVIDIA GeForce RTX 2050", "8.6"),  # the trap: Ampere despite the name
        ("NVIDIA B300 SXM6 AC", "10.3"),
        ("NVIDIA GB10", "12.1"),
        ("Tesla T4", "7.5"),
        ("NVIDIA T4", "7.5"),
        ("A100-SXM4-40GB", "8.0"),  # pre-R470 drivers: no "NVIDIA " prefix
        ("nvidia  geforce rtx 4090", "8.9"),  # case and spacing
        ("NVIDIA GeForce RTX 4090 Laptop GPU", "8.9"),
        ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "8.0"),  # MIG device name
        ("NVIDIA H100 SXM5 80GB", "9.0"),  # unknown form factor of a known model
        ("NVIDIA GeForce GTX 1060 5GB", "6.1"),
    ],
)
def test_gpu_lookup(table, name, cc):
    model = table.gpu(name)
    assert model is not None, name
    assert model.compute_capability == cc


def test_gpu_lookup_prefers_exact_and_rejects_unknown(table):
    assert table.gpu("NVIDIA GeForce GTX 1060 3GB").name == "NVIDIA GeForce GTX 1060 3GB"
    assert table.gpu("NVIDIA RTX A2000 12GB").name == "NVIDIA RTX A2000 12GB"
    assert table.gpu("NVIDIA GeForce RTX 5090").confidence == "verified"
    assert table.gpu("NVIDIA Thor").confidence == "unverified"  # name spelling unknown
    assert table.gpu("NVIDIA Foo 9000") is None
    assert table.gpu("") is None


# --- logic on the tiny fixture -----------------------------------------------------------------


def test_tiny_releases_and_patches_are_sorted(tiny):
    assert [r.minor for r in tiny.releases] == ["2.6", "2.7"]
    assert [p.torch for p in tiny.release("2.7").patches] == ["2.7.0", "2.7.1"]
    assert tiny.release("2.7").latest.torch == "2.7.1"
    assert tiny.release("2.7").unverified_fields == ("patches",)
    assert tiny.release("2.6").unverified_fields == ()


def test_tiny_arch_list_exact_and_fallback(tiny):
    assert tiny.arch_list("2.7.1", "cu128", "linux-x86_64").torch_minor == "2.7"
    fallback = tiny.arch_list("2.7.0+cu126", "cu126", "linux-x86_64")
    assert fallback.torch_minor == "2.6"  # the row keeps its own minor
    assert fallback.ptx == ()
    assert tiny.arch_list("2.7.0", "CU118", "linux-x86_64").ptx is None
    assert tiny.arch_list("2.7.0", "cu124", "linux-x86_64") is None  # not published for 2.7
    assert tiny.arch_list("2.6.0", "cu128", "linux-x86_64") is None  # no older-or-equal row
    assert tiny.arch_list("2.8.0", "cu128", "linux-x86_64") is None  # unknown release
    assert tiny.arch_list("2.7.1", "cu126", "windows-x86_64") is None
    assert tiny.arch_list("nonsense", "cu126", "linux-x86_64") is None


def test_lookups_use_indexes_not_scans(tmp_path):
    """After loading, the row tuples may vanish: every lookup still answers from its index."""

    class NoScan(tuple):
        def __iter__(self):
            raise AssertionError("lookup scanned the rows")

        def __len__(self):
            raise AssertionError("lookup scanned the rows")

    table = load_table(_write(tmp_path, json.loads(TINY.read_text())))
    for name in ("releases", "arch_lists", "cuda_drivers", "major_floors", "driver_branches", "gpu_models"):
        setattr(table, name, NoScan())
    assert table.release("2.7.1").minor == "2.7"
    assert table.arch_list("2.7.1", "cu126", "linux-x86_64").torch_minor == "2.6"
    assert table.cuda_driver("12.8").min_linux == "570.26"
    assert table.major_floor(12).min_linux == "525.60.13"
    assert table.max_cuda_for_driver("575.1").max_cuda == "12.8"
    assert table.gpu("GeForce RTX 4090").compute_capability == "8.9"
    assert table.gpu("V100-SXM2-16GB").compute_capability == "7.0"


def test_release_rows_are_hashable_values(tiny):
    release = tiny.release("2.7")
    assert {release, tiny.release("2.7.1")} == {release}
    assert release == load_table(TINY).release("2.7")


def test_changed_file_is_read_again(tmp_path):
    """Nothing is remembered between loads, not even with the same size and modification time."""
    data = json.loads(TINY.read_text())
    path = _write(tmp_path, data)
    first = load_table(path)
    stamp = path.stat().st_mtime_ns
    data["table_version"] = "2000.01.02-tiny"  # as long as the old value: the same size
    path.write_text(json.dumps(data))
    os.utime(path, ns=(stamp, stamp))
    assert load_table(path).table_version == "2000.01.02-tiny" != first.table_version


@pytest.mark.parametrize(
    "variant, cuda",
    [("cu128", "12.8"), ("cu118", "11.8"), ("cu130", "13.0"), ("cu126", "12.6"), ("cu134", "13.4"),
     ("cpu", None), ("rocm6.3", None), ("xpu", None), ("cuda", None), ("", None)],
)  # fmt: skip
def test_variant_to_cuda(variant, cuda):
    assert variant_to_cuda(variant) == cuda


def test_index_url():
    from doctor.plan.commands import index_url

    assert index_url("cu128") == "https://download.pytorch.org/whl/cu128"
    assert index_url("cpu", base="https://mirror.example/whl/") == "https://mirror.example/whl/cpu"


# --- broken tables -----------------------------------------------------------------------------


def _write(tmp_path: Path, data, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _set(path: str, value):
    """A mutation that sets a dotted path ("releases.0.minor") in the tiny table; DELETE removes it."""

    def mutate(data):
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        key = int(last) if isinstance(node, list) else last
        if value is DELETE:
            del node[key]
        else:
            node[key] = value

    return mutate


def _append(path: str, index: int):
    """Append a copy of item ``index`` of a list (a duplicate row)."""

    def mutate(data):
        data[path].append(copy.deepcopy(data[path][index]))

    return mutate


DELETE = object()

BROKEN = {
    "schema missing": (_set("schema_version", DELETE), "schema_version: missing"),
    "schema 2": (_set("schema_version", 2), "schema_version: 2 is not supported"),
    "schema string": (_set("schema_version", "1"), "schema_version: expected an integer, got a string"),
    "schema bool": (_set("schema_version", True), "schema_version: expected an integer, got a boolean"),
    "no table_version": (_set("table_version", DELETE), "table_version: missing"),
    "no verified_on": (_set("verified_on", DELETE), "verified_on: missing"),
    "empty table_version": (_set("table_version", " "), "table_version: is empty"),
    "minor not a version": (_set("releases.1.minor", "2.x"), "releases[1].minor: '2.x' is not a version"),
    "minor with patch": (_set("releases.1.minor", "2.6.0"), "releases[1].minor: '2.6.0' is not a version"),
    "duplicate minor": (_append("releases", 0), "releases[2]: duplicate release minor '2.7' (first at "
        "releases[0])"),
    "releases not list": (_set("releases", {}), "releases: expected a list, got an object"),
    "release not object": (_set("releases.0", "2.7"), "releases[0]: expected an object, got a string"),
    "patch bad": (_set("releases.0.patches.0.torch", "2.7.x"), "releases[0].patches[0].torch: '2.7.x' is not "
        "a version"),
    "patch other minor": (_set("releases.0.patches.0.torch", "2.8.1"), "releases[0].patches[0].torch: "
        "'2.8.1' is not a 2.7.x"),
    "patch duplicate": (_set("releases.0.patches.1.torch", "2.7.1"), "releases[0].patches[1].torch: "
        "duplicate"),
    "patch vision bad": (_set("releases.0.patches.0.torchvision", "x"), "releases[0].patches[0].torchvision: "
        "'x' is not"),
    "no patches": (_set("releases.0.patches", []), "releases[0].patches: is empty"),
    "patch confidence": (_set("releases.0.patches.0.confidence", "sure"), "releases[0].patches[0].confidence: 'sure'"),
    "python min": (_set("releases.0.python.min", "three"), "releases[0].python.min: 'three' is not a "
        "version"),
    "python missing": (_set("releases.0.python", DELETE), "releases[0].python: missing"),
    "bad variant": (_set("releases.0.variants.linux-x86_64.1", "cuda118"), "releases[0].variants.linux-x86_64[1]: 'cuda118' is not a variant"),
    "rocm variant": (_set("releases.0.variants.linux-x86_64.1", "rocm6"), "releases[0].variants.linux-x86_64[1]: 'rocm6' is not a variant"),
    "variant twice": (_set("releases.0.variants.linux-x86_64.1", "cpu"), "releases[0].variants.linux-x86_64: "
        "lists a variant twice"),
    "unknown platform": (_set("releases.0.variants.linux-riscv", ["cpu"]), "releases[0].variants.linux-riscv: unknown platform"),
    "pypi default unlisted": (_set("releases.0.pypi_default.linux-x86_64", "cu130"), "releases[0].pypi_default.linux-x86_64: 'cu130' is not among"),
    "release confidence": (_set("releases.0.confidence", "unknown"), "releases[0].confidence: 'unknown' is "
        "not one of"),
    "release no source": (_set("releases.0.source", DELETE), "releases[0].source: missing"),
    "release empty source": (_set("releases.0.source", ""), "releases[0].source: is empty"),
    "duplicate arch row": (_append("arch_lists", 2), "arch_lists[3]: duplicate arch list row ('2.7', "
        "'cu128', 'linux-x86_64')"),
    "arch bad variant": (_set("arch_lists.0.variant", "cu12x"), "arch_lists[0].variant: 'cu12x' is not a "
        "variant"),
    "arch bad sm": (_set("arch_lists.0.sm.0", "50"), "arch_lists[0].sm[0]: '50' is not a cubin target"),
    "arch bad ptx": (_set("arch_lists.2.ptx", ["sm_120"]), "arch_lists[2].ptx[0]: 'sm_120' is not a PTX "
        "target"),
    "arch no ptx": (_set("arch_lists.2.ptx", DELETE), "arch_lists[2].ptx: missing"),
    "arch unknown release": (_set("arch_lists.0.torch_minor", "2.5"), "arch_lists[0].torch_minor: '2.5' has "
        "no row in releases"),
    "arch unpublished": (_set("arch_lists.0.variant", "cu128"), "arch_lists[0].variant: 'cu128' is not a "
        "linux-x86_64 variant of torch 2.6"),
    "arch platform": (_set("arch_lists.0.platform", "linux"), "arch_lists[0].platform: 'linux' is not one "
        "of"),
    "arch confidence": (_set("arch_lists.1.confidence", "high"), "arch_lists[1].confidence: 'high' is not "
        "one of"),
    "cuda no source": (_set("cuda.0.source", DELETE), "cuda[0].source: missing"),
    "cuda version": (_set("cuda.0.cuda", "12"), "cuda[0].cuda: '12' is not a CUDA version"),
    "cuda driver": (_set("cuda.0.min_linux", "r560"), "cuda[0].min_linux: 'r560' is not a driver version"),
    "cuda duplicate": (_set("cuda.1.cuda", "12.6"), "cuda[1]: duplicate CUDA version '12.6'"),
    "major string": (_set("cuda_majors.0.major", "12"), "cuda_majors[0].major: expected an integer, got a "
        "string"),
    "branch string": (_set("driver_branches.0.branch", "560"), "driver_branches[0].branch: expected an "
        "integer"),
    "branch duplicate": (_set("driver_branches.1.branch", 560), "driver_branches[1]: duplicate driver branch "
        "560"),
    "branch max_cuda": (_set("driver_branches.0.max_cuda", None), "driver_branches[0].max_cuda: expected a "
        "string, got null"),
    "gpu cc": (_set("gpus.0.compute_capability", "8"), "gpus[0].compute_capability: '8' is not a compute "
        "capability"),
    "gpu confidence": (_set("gpus.1.confidence", "Verified"), "gpus[1].confidence: 'Verified' is not one of"),
    "gpu duplicate": (_set("gpus.1.name", "NVIDIA GeForce RTX 4090"), "gpus[1]: duplicate GPU name"),
    "gpu alias not string": (_set("gpus.0.aliases", [1]), "gpus[0].aliases[0]: expected a string, got an "
        "integer"),
    "gpus missing": (_set("gpus", DELETE), "gpus: missing"),
    "gpu segment": (_set("gpus.0.segment", "server"), "gpus[0].segment: 'server' is not one of data-center"),
    "support range": (_set("driver_support", [{"min_compute_capability": "7.2", "max_compute_capability": "5.0",
                                               "last_branch": 580, "source": "s", "confidence": "inferred"}]),
                      "driver_support[0].min_compute_capability: '7.2' is above max_compute_capability "
                      "'5.0'"),
    "support branch": (_set("driver_support", [{"min_compute_capability": "5.0", "max_compute_capability": "7.2",
                                                "last_branch": "580", "source": "s", "confidence": "inferred"}]),
                       "driver_support[0].last_branch: expected an integer, got a string"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_table_names_file_and_field(tmp_path, case):
    mutate, expected = BROKEN[case]
    data = json.loads(TINY.read_text())
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(TableError) as caught:
        load_table(path)
    message = str(caught.value)
    assert message.startswith(f"compat table {path.resolve()}: "), message
    assert expected in message
    assert "\n" not in message
    assert caught.value.exit_code == exitcodes.USAGE


@pytest.mark.parametrize(
    "content, expected",
    [
        ("{not json", "invalid JSON at line 1 column 2"),
        ("[]", "(top level): expected an object, got a list"),
        ("", "invalid JSON at line 1 column 1"),
    ],
)
def test_unparsable_table(tmp_path, content, expected):
    path = _write(tmp_path, content)
    with pytest.raises(TableError, match=f"compat table {path.resolve()}: ") as caught:
        load_table(path)
    assert expected in str(caught.value)


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(TableError, match=r"compat table .*nope\.json: cannot read: No such file"):
        load_table(tmp_path / "nope.json")
    with pytest.raises(TableError, match="cannot read"):
        load_table(tmp_path)  # a directory
    binary = tmp_path / "latin1.json"
    binary.write_bytes(b'{"schema_version": 1, "table_version": "\xe9"}')
    with pytest.raises(TableError, match="cannot read"):
        load_table(binary)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=8)
    | st.sampled_from(["2.7", "cu128", "sm_80", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _leaf_paths(node, prefix=()):
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    yield prefix
    for key, child in items:
        yield from _leaf_paths(child, (*prefix, key))


_TINY_PATHS = [p for p in _leaf_paths(json.loads(TINY.read_text())) if p]
_counter = itertools.count()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(_TINY_PATHS), value=_json_values)
def test_any_corruption_is_a_table_error_or_loads(tmp_path, where, value):
    """Whatever value lands in whatever field, loading gives a table or one TableError line, never a crash."""
    data = json.loads(TINY.read_text())
    node = data
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    path = _write(tmp_path, data, name=f"fuzz{next(_counter)}.json")
    try:
        loaded = load_table(path)
    except TableError as exc:
        assert str(exc).startswith(f"compat table {path.resolve()}: ")
        assert "\n" not in str(exc)
    else:
        assert isinstance(loaded, CompatTable)
        loaded.release("2.7.1")
        loaded.arch_list("2.7.1", "cu126", "linux-x86_64")
        loaded.gpu("GeForce RTX 4090")


# --- sections added in table 2026.11.30 --------------------------------------------------------


@pytest.mark.parametrize(
    "cuda, lowest, highest",
    [("10.2", "sm_30", "sm_75"), ("11.0", "sm_35", "sm_80"), ("11.1", "sm_35", "sm_86"), ("11.8", "sm_35", "sm_90"),
     ("12.0", "sm_50", "sm_90"), ("12.6", "sm_50", "sm_90"), ("12.8", "sm_50", "sm_120"), ("12.9", "sm_50", "sm_121"),
     ("13.0", "sm_75", "sm_121"), ("13.4", "sm_75", "sm_121")],
)  # fmt: skip
def test_cuda_toolkit_target_range(table, cuda, lowest, highest):
    row = table.toolkit(cuda)
    assert (row.lowest_sm, row.highest_sm) == (lowest, highest)
    assert row.sm[0] == lowest and row.sm[-1] == highest


def test_cuda_toolkit_boundaries(table):
    assert [t.cuda for t in table.cuda_toolkits][:2] == ["10.2", "11.0"]
    assert table.toolkit("12.8.1") is table.toolkit("cu128") is table.toolkit("12.8")
    assert not table.toolkit("12.6").compiles("sm_120") and table.toolkit("12.8").compiles("sm_120")
    assert not table.toolkit("11.7").compiles("sm_89") and table.toolkit("11.8").compiles("sm_89")
    assert not table.toolkit("11.8").compiles("sm_100") and table.toolkit("12.8").compiles("sm_101")
    assert table.toolkit("11.8").compiles("sm_37") and not table.toolkit("12.0").compiles("sm_37")
    assert table.toolkit("12.9").compiles("sm_70") and not table.toolkit("13.0").compiles("sm_70")
    assert not table.toolkit("13.0").compiles("sm_101") and table.toolkit("13.0").compiles("sm_110")
    assert table.toolkit("12.9").compiles("sm_103") and table.toolkit("12.9").compiles("sm_121")
    assert table.toolkit("12.8").compiles("8.6") and table.toolkit("12.8").compiles("sm_90a")
    assert not table.toolkit("12.8").compiles("garbage")
    assert table.toolkit("13.0").confidence == "verified"
    assert table.toolkit("13.5").confidence == "unverified"
    assert table.toolkit("9.2") is None and table.toolkit("x") is None and table.toolkit("") is None


def test_cudnn_min_compute_capability(table):
    # cuDNN 9 (torch >= 2.4) has no Kepler, even in cu118 builds whose arch list still holds sm_37
    assert "sm_37" in table.arch_list("2.4.1", "cu118", "linux-x86_64").sm
    assert table.cudnn_min_cc("2.4.1", "cu118") == "5.0"
    assert table.cudnn_min_cc("2.4.1") == "5.0"  # every CUDA variant of 2.4 agrees
    for minor in ("2.5", "2.6", "2.7", "2.8", "2.10"):
        assert table.cudnn_min_cc(minor) == "5.0", minor
    assert table.cudnn_min_cc("2.11.0+cu130", "cu130") == "7.5"
    assert table.cudnn_min_cc("2.3.1", "cu118") == "3.5"  # cuDNN 8.7 for CUDA 11
    assert table.cudnn_min_cc("2.3.1", "cu121") == "5.0"  # cuDNN 8.9 for CUDA 12
    assert table.cudnn_min_cc("2.3.1") is None  # the variants disagree
    assert table.cudnn_min_cc("1.12.1", "cu102") == "3.0"
    assert table.cudnn_min_cc("2.7.1", "cu128") is None  # cuDNN of cu128 not recorded
    assert table.cudnn_min_cc("3.0") is None
    assert table.release("2.4").cudnn_version("CU121") == "9.1.0.70"
    assert table.cudnn_support("9.20.0.48", 12).min_compute_capability == "7.5"
    assert table.cudnn_support("7.0", 12) is None


def test_companion_cuda_checks(table):
    assert table.companion_cuda_check("torchvision", "0.15.2+cu117").compares == "major.minor"
    assert table.companion_cuda_check("torchvision", "0.16.0").compares == "major"
    assert table.companion_cuda_check("TorchVision", "0.29.2").compares == "major"
    assert table.companion_cuda_check("torchaudio", "0.13.1").compares == "major.minor"
    assert table.companion_cuda_check("torchaudio", "2.11.0+cu130").compares == "major.minor"
    assert table.companion_cuda_check("torchaudio", "2.11.1").compares == "major"
    assert table.companion_cuda_check("torchaudio", "0.12.1") is None  # no check before 0.13
    assert table.companion_cuda_check("torchvision", "garbage") is None
    assert table.companion_cuda_check("torchtext", "0.18.0") is None


def test_old_releases(table):
    release = table.release("1.8.1")
    assert release.variants_for("linux-x86_64") == ("cpu", "cu101", "cu102", "cu111", "rocm3.10", "rocm4.0.1")
    assert release.variants_for("darwin-arm64") == ()  # 1.8.1 has no arm64 wheel
    assert release.patch("1.8.0").torchvision == "0.9.0"
    assert table.release("1.10.0").patch("1.10.0").torchvision == "0.11.1"  # 0.11.0 pinned 1.10.0+cu102
    assert table.release("1.13").latest.torchaudio == "0.13.1"
    assert table.arch_list("1.12.1", "cu102", "linux-x86_64").sm == ("sm_37", "sm_50", "sm_60", "sm_70")
    assert table.arch_list("1.11.0", "cu115", "linux-x86_64").sm[-1] == "sm_86"
    assert table.arch_list("1.8.1", "cu111", "linux-x86_64").confidence == "inferred"
    assert table.release("1.9").requires_python_ok("torch", "3.6.2") is True


def test_torch_213_declares_cu129(table):
    release = table.release("2.13")
    assert "cu129" in release.variants_for("linux-x86_64")
    assert "cu129" not in release.variants_for("windows-x86_64")
    assert "variants.linux-x86_64" in release.unverified_fields
    assert table.arch_list("2.13.0", "cu129", "linux-aarch64").sm == ("sm_80", "sm_90", "sm_100", "sm_120")


@pytest.mark.parametrize(
    "name, cc",
    [("Tesla K40m", "3.5"), ("Tesla K40c", "3.5"), ("Tesla K20Xm", "3.5"), ("Tesla K20c", "3.5"),
     ("Tesla K10.G2.8GB", "3.0"), ("Tesla K80", "3.7"), ("GeForce GTX 780", "3.5"), ("GeForce GTX 780 "
         "Ti", "3.5"),
     ("GeForce GTX TITAN", "3.5"), ("GeForce GTX TITAN Black", "3.5"), ("GeForce GTX TITAN Z", "3.5"),
     ("GeForce GT 710", "3.5"), ("GeForce GT 730", "3.5"), ("GeForce 910M", "3.5"),
     ("NVIDIA GeForce RTX 3050 Ti Laptop GPU", "8.6"), ("NVIDIA GeForce RTX 4060 Laptop GPU", "8.9"),
     ("NVIDIA GeForce RTX 4070 Laptop GPU", "8.9"), ("NVIDIA GeForce RTX 5090 Laptop GPU", "12.0"),
     ("NVIDIA GeForce RTX 2060 with Max-Q Design", "7.5")],
)  # fmt: skip
def test_added_gpu_names(table, name, cc):
    assert table.gpu(name).compute_capability == cc


def test_tiny_new_sections(tiny):
    assert tiny.toolkit("12.8").highest_sm == "sm_120"
    assert [t.cuda for t in tiny.cuda_toolkits] == ["12.6", "12.8"]  # sorted
    assert tiny.cudnn_min_cc("2.7.1", "cu128") == "5.0"
    assert tiny.cudnn_min_cc("2.7.1") == "5.0"
    assert tiny.cudnn_min_cc("2.6.0") is None  # 2.6 records no cuDNN
    assert tiny.companion_cuda_check("torchvision", "0.15.2").compares == "major.minor"
    release = tiny.release("2.7")
    assert release.free_threaded_for("2.7.0") == ()
    assert release.free_threaded_for("2.7.1") == ("3.13t",)
    assert release.requires_python_ok("torchvision", "3.13.0") is False
    assert release.requires_python_ok("torchvision", "3.13.1") is True


def test_old_tables_without_new_sections_still_load(tmp_path):
    data = json.loads(TINY.read_text())
    for key in ("cuda_toolkits", "cudnn", "companion_rules"):
        del data[key]
    del data["releases"][0]["cudnn"]
    table = load_table(_write(tmp_path, data))
    assert table.toolkit("12.8") is None
    assert table.cudnn_min_cc("2.7.1") is None
    assert table.companion_cuda_check("torchvision", "0.15.2") is None


BROKEN_NEW = {
    "toolkit cuda": (_set("cuda_toolkits.0.cuda", "12"), "cuda_toolkits[0].cuda: '12' is not a CUDA version"),
    "toolkit sm": (_set("cuda_toolkits.0.sm.0", "sm_90a"), "cuda_toolkits[0].sm[0]: 'sm_90a' is not a plain "
        "cubin target"),
    "toolkit empty": (_set("cuda_toolkits.0.sm", []), "cuda_toolkits[0].sm: is empty"),
    "toolkit order": (_set("cuda_toolkits.0.sm.1", "sm_50"), "cuda_toolkits[0].sm: is not ascending"),
    "toolkit lowest": (_set("cuda_toolkits.0.lowest_sm", "sm_60"), "cuda_toolkits[0].lowest_sm: 'sm_60' is "
        "not the lowest"),
    "toolkit highest": (_set("cuda_toolkits.0.highest_sm", "sm_100"), "cuda_toolkits[0].highest_sm: 'sm_100' "
        "is not the highest"),
    "toolkit duplicate": (_set("cuda_toolkits.1.cuda", "12.8"), "cuda_toolkits[1]: duplicate CUDA toolkit "
        "'12.8'"),
    "toolkit confidence": (_set("cuda_toolkits.0.confidence", "sure"), "cuda_toolkits[0].confidence: 'sure'"),
    "cudnn cc": (_set("cudnn.0.min_compute_capability", "5"), "cudnn[0].min_compute_capability: '5' is not"),
    "cudnn major": (_set("cudnn.0.cuda_major", "12"), "cudnn[0].cuda_major: expected an integer"),
    "cudnn duplicate": (_set("cudnn.1.cuda_major", 12), "cudnn[1]: duplicate cuDNN row"),
    "release cudnn variant": (_set("releases.0.cudnn.cu124", "9.1"), "releases[0].cudnn.cu124: 'cu124' is "
        "not a variant of torch 2.7"),
    "release cudnn cpu": (_set("releases.0.cudnn.cpu", "9.1"), "releases[0].cudnn.cpu: 'cpu' is not a CUDA "
        "variant"),
    "release cudnn version": (_set("releases.0.cudnn.cu126", "nine"), "releases[0].cudnn.cu126: 'nine' is "
        "not a cuDNN version"),
    "requires python": (_set("releases.0.requires_python.torch", ">=3.x"), "releases[0].requires_python.torch: '>=3.x' is not a version specifier"),
    "requires python type": (_set("releases.0.requires_python.torch", 3), "releases[0].requires_python.torch: expected a string"),
    "free threaded": (_set("releases.0.python.free_threaded", ["3.13"]), "releases[0].python.free_threaded[0]: '3.13' is not a Python like"),
    "patch free threaded": (_set("releases.0.patches.1.free_threaded", ["t"]), "releases[0].patches[1].free_threaded[0]: 't' is not"),
    "companion compares": (_set("companion_rules.cuda_check.0.compares", "minor"), "companion_rules.cuda_check[0].compares: 'minor' is not one of"),
    "companion versions": (_set("companion_rules.cuda_check.0.versions", "0.16"), "companion_rules.cuda_check[0].versions: '0.16' is not a version specifier"),
    "companion source": (_set("companion_rules.cuda_check.1.source", ""), "companion_rules.cuda_check[1].source: is empty"),
    "companion not list": (_set("companion_rules.cuda_check", {}), "companion_rules.cuda_check: expected a "
        "list"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BROKEN_NEW))
def test_broken_new_sections_name_file_and_field(tmp_path, case):
    mutate, expected = BROKEN_NEW[case]
    data = json.loads(TINY.read_text())
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(TableError) as caught:
        load_table(path)
    message = str(caught.value)
    assert message.startswith(f"compat table {path.resolve()}: "), message
    assert expected in message
    assert "\n" not in message


def test_driver_support_and_segments(table):
    assert table.last_driver_branch((3, 7)) == 470 and table.last_driver_branch("6.1") == 580
    assert table.last_driver_branch((7, 0)) == 580 and table.last_driver_branch((7, 5)) is None
    assert table.gpu("NVIDIA H100 80GB "
        "HBM3").segment == "data-center" and table.gpu("Tesla T4").segment == "data-center"
    assert table.gpu("NVIDIA GeForce RTX "
        "4090").segment is None and table.gpu("NVIDIA RTX A6000").segment is None
    assert all(row.source and row.confidence in ("verified", "inferred") for row in table.driver_support)


_REQUIRES_ROW = {"torch": "2.7.1", "platform": "linux-x86_64", "wheel": "torch-2.7.1-cp312-cp312-x.whl",
                 "requires": ['nvidia-cudnn-cu12==9.5.1.17; platform_system == "Linux"', "filelock"],
                 "source": "the wheel's METADATA", "confidence": "verified"}


@pytest.mark.parametrize("key, value, expected", [
    ("torch", "2.7.1+cu126", "requires_dist[0].torch: '2.7.1+cu126': the PyPI build has no local tag"),
    ("torch", "two", "requires_dist[0].torch: 'two' is not a version"),
    ("platform", "linux", "requires_dist[0].platform: 'linux' is not one of"),
    ("requires", ["nvidia-cudnn-cu12=="], "requires_dist[0].requires[0]: 'nvidia-cudnn-cu12==' is not a"),
    ("requires", "filelock", "requires_dist[0].requires: expected a list"),
    ("source", "", "requires_dist[0].source: is empty"),
])
def test_requires_dist_rows_are_checked(tmp_path, key, value, expected):
    data = json.loads(TINY.read_text())
    data["requires_dist"] = [dict(_REQUIRES_ROW, **{key: value})]
    with pytest.raises(TableError) as caught:
        load_table(_write(tmp_path, data))
    assert expected in str(caught.value)


def test_requires_dist_lookup(tmp_path):
    data = json.loads(TINY.read_text())
    data["requires_dist"] = [_REQUIRES_ROW]
    table = load_table(_write(tmp_path, data))
    assert table.declared_requirements("2.7.1", "linux-x86_64").wheel == _REQUIRES_ROW["wheel"]
    assert table.declared_requirements("2.7.1+cu118", "linux-x86_64") is None  # another index's build
    assert table.declared_requirements("2.7.1", "linux-aarch64") is None
    assert load_table(TINY).declared_requirements("2.7.1", "linux-x86_64") is None  # optional section


_LONGEST_ROW = {"torch": "2.13.0", "wheel": "torch-2.13.0-cp312-cp312-win_amd64.whl", "sha256": "ab" * 32,
                "member": "torch-2.13.0.dist-info/licenses/a/LICENSE.txt", "length": 45,
                "source": "the wheel's central directory", "confidence": "verified"}


@pytest.mark.parametrize("key, value, expected", [
    ("torch", "2.13.0+cu126", "windows_longest_paths[0].torch: '2.13.0+cu126': the PyPI build has no local"),
    ("torch", "two", "windows_longest_paths[0].torch: 'two' is not a version"),
    ("wheel", "torch-2.12.0-cp312-cp312-win_amd64.whl", "windows_longest_paths[0].wheel: "
        "'torch-2.12.0-cp312-cp312-win_amd64.whl' is not a win_amd64 wheel of torch 2.13.0"),
    ("sha256", "AB" * 32, "windows_longest_paths[0].sha256: "),
    ("length", 44, "windows_longest_paths[0].length: 44 is not the length of member (45)"),
    ("length", "45", "windows_longest_paths[0].length: expected an integer, got a string"),
    ("member", "", "windows_longest_paths[0].member: is empty"),
    ("confidence", "sure", "windows_longest_paths[0].confidence: 'sure' is not one of"),
])  # fmt: skip
def test_windows_longest_paths_rows_are_checked(tmp_path, key, value, expected):
    data = json.loads(TINY.read_text())
    data["windows_longest_paths"] = [dict(_LONGEST_ROW, **{key: value})]
    with pytest.raises(TableError) as caught:
        load_table(_write(tmp_path, data))
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_windows_longest_paths_lookup(tmp_path, table):
    data = json.loads(TINY.read_text())
    data["windows_longest_paths"] = [_LONGEST_ROW, dict(_LONGEST_ROW)]
    with pytest.raises(TableError, match=r"windows_longest_paths\[1\]: duplicate windows_longest_paths torch"):
        load_table(_write(tmp_path, data))
    row = table.windows_longest_path("2.13.0+cu126")
    assert row.torch == "2.13.0" and row.length == len(row.member) == 167
    # the dist-info folder's name carries the build's version; other members do not
    assert row.length_for("2.13.0+cu126") == 173 and row.member_for("2.13.0+cu126").startswith(
        "torch-2.13.0+cu126.dist-info/licenses/")
    assert table.windows_longest_path("2.13.0.dev20260522+cu130") is None  # a nightly: not read
    older = table.windows_longest_path("2.5.1")
    assert older.length_for("2.5.1+cu124") == older.length == 117  # under torch/include: no version in it
    assert all(r.confidence == "verified" and r.wheel in r.source for r in table.windows_longest_paths)
