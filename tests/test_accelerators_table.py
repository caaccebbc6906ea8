"""compat_tables/accelerators.json: it loads, its spot facts hold against their sources, and a bad field is
one TableError line naming the file and the field."""

from __future__ import annotations

import json

import pytest

from doctor.errors import TableError
from doctor.table.accelerators import (
    default_accelerators_path,
    load_accelerators,
    override_processor,
    processor_override,
)
from doctor.table.load import load_table


@pytest.fixture(scope="module")
def table():
    return load_accelerators()


def test_every_row_is_sourced(table):
    rows = [*table.rocm, *table.overrides, *table.amd_pci, *table.intel, *table.macos, *table.floors]
    assert rows
    for row in rows:
        assert row.source.strip() and row.confidence in ("verified", "inferred", "unverified")


def test_rocm_rows_name_variants_the_release_publishes(table):
    compat = load_table()
    for row in table.rocm:
        release = compat.release(row.torch_minor + ".0")
        assert release is not None, row
        assert row.variant in release.variants_for("linux-x86_64"), row


def test_rocm_spot_facts(table):
    # astral-sh/uv#14086: get_arch_list() of real wheels
    assert table.rocm_targets("2.5.1+rocm6.2").gfx == (
        "gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100")
    assert "gfx1201" in table.rocm_targets("2.7.1+rocm6.3").gfx
    assert "gfx1201" in table.rocm_targets("2.7.1", "rocm6.2.4").gfx
    assert "gfx1101" not in table.rocm_targets("2.4.1+rocm6.0").gfx
    # pytorch/builder release/2.3: gfx942 only in the ROCm 6.0 build
    assert "gfx942" not in table.rocm_targets("2.3.1+rocm5.7").gfx
    assert "gfx942" in table.rocm_targets("2.3.1+rocm6.0").gfx
    assert table.rocm_targets("2.5.1+cu124") is None
    assert table.rocm_targets("2.5.1") is None


def test_no_wheel_covers_rdna2_siblings(table):
    for gfx in ("gfx1031", "gfx1032", "gfx1034", "gfx1035", "gfx1010"):
        assert table.rocm_builds_for(gfx) == []
    newest = table.rocm_builds_for("gfx1100")[0]
    assert newest.covers("gfx1100")


def test_rocm_floors_agree_with_the_wheels(table):
    # no wheel made with an older ROCm than a processor's floor holds it
    floor = table.rocm_floor("gfx950")
    assert floor.rocm == "7.0" and floor.excludes("6.4") and floor.excludes("6.4.43482")
    assert not floor.excludes("7.0") and floor.excludes("rocm") is None
    assert table.rocm_floor("gfx1100") is None
    for row in table.rocm:
        for gfx in row.gfx:
            below = table.rocm_floor(gfx)
            assert below is None or not below.excludes(row.variant.removeprefix("rocm")), (row, gfx)


def test_overrides(table):
    row = table.hsa_override("gfx1031")
    assert (row.override, row.sibling, row.reported) == ("10.3.0", "gfx1030", "works")
    assert table.hsa_override("gfx1101").sibling == "gfx1100"
    assert table.hsa_override("gfx1150").reported == "fails"
    assert table.hsa_override("gfx9999") is None


def test_override_spelling():
    assert override_processor("10.3.0") == "gfx1030"
    assert override_processor("9.0.10") == "gfx90a"
    assert override_processor(" 11.0.0 ") == "gfx1100"
    assert override_processor("10.3") is None
    assert override_processor("10.16.0") is None
    assert processor_override("gfx90a") == "9.0.10"
    assert processor_override("gfx1201") == "12.0.1"
    assert processor_override("navi") is None


def test_pci_ids(table):
    assert table.amd_gpu("0x744c").gfx == "gfx1100"  # RX 7900 XTX
    assert table.amd_gpu("744C").gfx == "gfx1100"
    assert table.amd_gpu(0x73DF).gfx == "gfx1031"  # RX 6700 XT
    assert table.amd_gpu("0x7550").gfx == "gfx1201"  # RX 9070 XT
    assert table.amd_gpu("0x740f").gfx == "gfx90a"  # MI210
    assert table.amd_gpu("0x74a1").gfx == "gfx942"  # MI300X
    assert table.amd_gpu("0x75a0").gfx == "gfx950"  # MI350X
    assert table.amd_gpu("0x1586").segment == "apu"
    assert table.amd_gpu(None) is None
    arc = table.intel_gpu("0x56a0")  # Arc A770
    assert (arc.family, arc.discrete, arc.xpu) == ("DG2", True, "validated")
    assert table.intel_gpu("0xe20b").family == "BMG"
    assert table.intel_gpu("0x0bd5").family == "PVC"
    mtl = table.intel_gpu("0x7d55")  # Meteor Lake-H, Intel Arc Graphics: on PyTorch's XPU page, integrated
    assert (mtl.family, mtl.discrete, mtl.xpu) == ("MTL-H Arc", False, "validated")
    assert table.intel_gpu("0x7dd5").xpu == "not-listed"  # the same chip named plain Intel Graphics
    assert table.intel_gpu("0x64a0").xpu == "validated"  # Lunar Lake, Arc 140V
    assert table.intel_gpu("0x7d51").xpu == "validated"  # Arrow Lake-H, Arc 140T
    assert table.intel_gpu("0x4680") is None  # Alder Lake-S GT1: no row


def test_integrated_intel_rows(table):
    """Every integrated row is a Core Ultra family the kernel's pciids.h names, with the Arc Graphics ids
    (validated: PyTorch's XPU page lists them) apart from the plain Intel Graphics ones (not-listed)."""
    integrated = [f for f in table.intel if not f.discrete]
    assert {f.family for f in integrated} == {"MTL-H Arc", "MTL", "ARL-H Arc", "ARL", "LNL Arc", "LNL",
                                              "PTL Arc", "PTL"}
    for family in integrated:
        assert "pciids.h" in family.source and "pci.ids" in family.source
        assert (family.xpu == "validated") == family.family.endswith(" Arc"), family.family
        assert ("get_start_xpu" in family.source) or family.xpu == "not-listed"


def test_macos_floors(table):
    floor = table.macos_floor("2.12.0", "darwin-arm64")
    assert floor.min_macos == "14.0" and floor.installs_on("13.6") is False and floor.installs_on("14.1")
    assert table.macos_floor("2.11.0", "darwin-arm64").installs_on("13.6")
    assert table.macos_floor("2.5.1", "darwin-arm64").mps_on("12.7.6") is False
    assert table.macos_floor("2.4.1", "darwin-arm64").mps_on("12.7.6")
    assert table.macos_floor("2.2.2", "darwin-x86_64").min_macos == "10.9"
    assert table.macos_floor("2.3.0", "darwin-x86_64") is None


def _broken(tmp_path, edit):
    data = json.loads(default_accelerators_path().read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / "acc.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["rocm_targets"][0].update(gfx=["navi21"]), "rocm_targets[0].gfx[0]"),
        (lambda d: d["rocm_targets"].append(d["rocm_targets"][0]), "duplicate ROCm build"),
        (lambda d: d["hsa_overrides"][0].update(override="10.16.0"), "names no processor"),
        (lambda d: d["hsa_overrides"][0].update(reported="maybe"), "hsa_overrides[0].reported"),
        (lambda d: d["rocm_floors"][0].update(rocm="7"), "rocm_floors[0].rocm"),
        (lambda d: d["rocm_floors"].append(d["rocm_floors"][0]), "duplicate processor"),
        (lambda d: d["amd_pci"][0].update(device_id="0x744C"), "amd_pci[0].device_id"),
        (lambda d: d["intel_pci"][1]["device_ids"].append("0x56a0"), "duplicate Intel device id"),
        (lambda d: d["macos"][0].update(platform="darwin"), "macos[0].platform"),
        (lambda d: d["macos"][0].update(confidence="sure"), "macos[0].confidence"),
        (lambda d: d.update(schema_version=2), "schema_version"),
    ],
)
def test_bad_rows_are_one_line(tmp_path, edit, message):
    with pytest.raises(TableError) as info:
        load_accelerators(_broken(tmp_path, edit))
    text = str(info.value)
    assert text.startswith("accelerator table ") and message in text and "\n" not in text


def test_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(TableError, match="cannot read"):
        load_accelerators(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(TableError, match="invalid JSON"):
        load_accelerators(bad)
