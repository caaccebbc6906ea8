"""The HIP offload-bundle reader (doctor/probes/hip_kernels.py) on real bytes: a bundle cut from Debian's
librocsparse0 5.3.0 (tests/fixtures/amd/README.md), placed in a synthetic ELF library, and the same bundle
made compressed by clang-offload-bundler 19. What the independent tools listed for those bytes is the expected
answer. The whole 1.3 GB library is checked only where it is installed (``apt-get install librocsparse0``)."""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import pytest
from elfmaker import elf64

from doctor.probes.hip_kernels import (
    parse_bundle_ids,
    parse_hip_fatbin,
    read_hip_kernels,
    target_of,
)

FIXTURES = Path(__file__).parent / "fixtures" / "amd"
ROCSPARSE = Path("/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1")


def bundle1() -> bytes:
    return gzip.decompress((FIXTURES / "librocsparse0-bundle1.bin.gz").read_bytes())


def listed(name: str) -> set[str]:
    """The device targets a recorded tool listing names (the host entry left out)."""
    lines = (FIXTURES / name).read_text().split()
    return {target_of(line) for line in lines if target_of(line)}


def padded(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4096)


def test_one_real_bundle_lists_what_clang_offload_bundler_lists():
    scan = parse_hip_fatbin(bundle1())
    assert scan.why is None and scan.bundles == 1 and scan.with_code == 1
    expected = listed("librocsparse0-bundle1.clang-offload-bundler-15.txt")
    assert {target for target, _ in scan.counts} == expected
    assert [target for target, _ in scan.counts] == [
        "gfx803", "gfx900:xnack-", "gfx906:xnack-", "gfx908:xnack-", "gfx90a:xnack+", "gfx90a:xnack-",
        "gfx1030"]


def test_entry_ids_and_the_empty_host_entry():
    entries = parse_bundle_ids(bundle1())
    assert len(entries) == 8
    assert ("host-x86_64-unknown-linux" in {entry_id for _, _, entry_id in entries})
    assert [size for _, size, entry_id in entries if entry_id.startswith("host")] == [0]
    assert target_of("hip-amdgcn-amd-amdhsa-gfx906") == "gfx906"  # the older, 3-part triple
    assert target_of("hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-") == "gfx942:sramecc+:xnack-"
    assert target_of("host-x86_64-unknown-linux--") is None


def test_a_library_with_the_real_bundle_twice(tmp_path):
    lib = tmp_path / "libtorch_hip.so"
    lib.write_bytes(elf64([(".text", b"\x90" * 64), (".hip_fatbin", padded(bundle1()) + bundle1())]))
    found = read_hip_kernels(lib)
    assert found.status == "ok", found.why
    assert found.bundles == 2 and found.compressed == 0 and found.partial == []
    assert found.processors == ["gfx803", "gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030"]
    assert "gfx90a:xnack+" in found.targets and found.seconds is not None


def test_a_real_zstd_bundle_is_counted_but_its_targets_are_unknown_without_a_decompressor():
    ccob = (FIXTURES / "librocsparse0-bundle1.ccob-zstd.bin").read_bytes()
    assert ccob[:8] == b"CCOB\x02\x00\x01\x00"  # format 2, zstd, as clang-offload-bundler 19 wrote it
    scan = parse_hip_fatbin(ccob)
    assert scan.bundles == 1 and scan.compressed == 1 and scan.methods == ("zstd",)
    try:
        from compression import zstd  # noqa: F401 - Python 3.14+
    except ImportError:
        assert scan.unread == 1 and scan.counts == ()
    else:
        assert {t for t, _ in scan.counts} == listed(
            "librocsparse0-bundle1.ccob-zstd.clang-offload-bundler-19.txt")


def test_plain_then_zstd_bundle_in_a_library_says_what_was_not_read(tmp_path):
    ccob = (FIXTURES / "librocsparse0-bundle1.ccob-zstd.bin").read_bytes()
    lib = tmp_path / "libtorch_hip.so"
    lib.write_bytes(elf64([(".hip_fatbin", padded(bundle1()) + padded(ccob))]))
    found = read_hip_kernels(lib)
    assert found.status == "ok" and found.bundles == 2 and found.compressed == 1
    if found.unread:
        assert found.why.startswith("1 of 2 bundles are compressed with zstd")


def test_a_zstd_only_library_is_unknown_not_empty(tmp_path):
    lib = tmp_path / "libtorch_hip.so"
    lib.write_bytes(elf64([(".hip_fatbin", (FIXTURES / "librocsparse0-bundle1.ccob-zstd.bin").read_bytes())]))
    found = read_hip_kernels(lib)
    if found.unread:
        assert found.status == "unknown" and found.targets == []
        assert "compressed with zstd" in found.why


def ccob(inner: bytes, version: int = 2, method: int = 0) -> bytes:
    payload = zlib.compress(inner)
    if version == 2:
        return b"CCOB" + struct.pack("<HHIIQ", 2, method, 24 + len(payload), len(inner), 0) + payload
    if version == 3:
        return b"CCOB" + struct.pack("<HHQQQ", 3, method, 32 + len(payload), len(inner), 0) + payload
    return b"CCOB" + struct.pack("<HHIQ", 1, method, len(inner), 0) + payload


@pytest.mark.parametrize("version", [2, 3])
def test_zlib_bundles_are_read_through_their_decompressed_header(version):
    data = padded(ccob(bundle1(), version)) + bundle1()
    scan = parse_hip_fatbin(data)
    assert scan.why is None and scan.bundles == 2 and scan.with_code == 2 and scan.methods == ("zlib",)
    assert dict(scan.counts)["gfx1030"] == 2


def test_format_1_has_no_size_so_the_walk_stops_and_says_so():
    scan = parse_hip_fatbin(ccob(bundle1(), 1) + b"\0" * 100 + bundle1())
    assert scan.bundles == 1 and scan.with_code == 1 and "has no size" in scan.why


def test_the_header_shown_in_a_public_thread_parses_as_format_3_zstd():
    # warpfront/hipfire#569: the first 32 bytes of a hipcc --genco output (ROCm 7.2), then zstd's magic
    head = bytes.fromhex("4343 4f42 0300 0100 4b0d 0000 0000 0000 d02e 0000 0000 0000 0865 abc3 2600 f3bf"
                         .replace(" ", "")) + bytes.fromhex("28b52ffd") + b"\0" * (0x0D4B - 36)
    scan = parse_hip_fatbin(head)
    assert scan.bundles == 1 and scan.compressed == 1 and scan.methods == ("zstd",)


@pytest.mark.parametrize("data, why", [
    (b"garbage" * 10, "no offload bundle at offset 0"),
    (b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", 10**6), "claims 1000000 entries"),
    (b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<QQQQ", 1, 64, 10**9, 4) + b"gfx9", "runs past the end"),
    (b"CCOB" + struct.pack("<HH", 9, 0) + b"\0" * 24, "format 9"),
    (b"CCOB" + struct.pack("<HHIIQ", 2, 7, 24, 0, 0), "compression method 7"),
    (b"CCOB" + struct.pack("<HHIIQ", 2, 0, 40, 100, 0) + b"notzlib!" * 2, "does not decompress"),
    (b"__CLANG_OFFLOAD_BUNDLE__", "cut short"),
])
def test_corrupt_sections_give_one_line_never_an_exception(data, why):
    scan = parse_hip_fatbin(data)
    assert scan.why and why in scan.why


def test_files_that_are_not_libraries(tmp_path):
    (tmp_path / "text.so").write_text("not an ELF")
    assert read_hip_kernels(tmp_path / "text.so").why == "not an ELF file"
    assert read_hip_kernels(tmp_path / "absent.so").why.startswith("cannot open")
    assert read_hip_kernels(tmp_path).why == "a folder, not a regular file"
    (tmp_path / "cpu.so").write_bytes(elf64([(".text", b"\x90")]))
    assert read_hip_kernels(tmp_path / "cpu.so").status == "no-gpu-code"
    (tmp_path / "cut.so").write_bytes(elf64([(".hip_fatbin", bundle1())])[:100_000])
    assert read_hip_kernels(tmp_path / "cut.so").why == (
        "ELF section header table runs past the end of the file (truncated?)")
    # the section header reader of doctor/probes/elf.py, shared with the CUDA reader: its reasons
    (tmp_path / "elf32.so").write_bytes(elf64([(".hip_fatbin", bundle1())], elf_class=1))
    assert read_hip_kernels(tmp_path / "elf32.so").why == "32-bit ELF is not supported"
    (tmp_path / "bss.so").write_bytes(elf64([(".hip_fatbin", bundle1())], nobits=(".hip_fatbin",)))
    assert read_hip_kernels(tmp_path / "bss.so").why == "the .hip_fatbin section has no data in the file"


@pytest.mark.skipif(not ROCSPARSE.is_file(), reason="Debian's librocsparse0 (1.3 GB) is not installed")
def test_the_real_library_lists_what_roc_obj_ls_lists():
    lines = gzip.decompress((FIXTURES / "librocsparse0.roc-obj-ls.txt.gz").read_bytes()).decode().splitlines()
    expected: dict[str, int] = {}
    for line in lines:
        target = target_of(line.split()[1])
        if target:
            expected[target] = expected.get(target, 0) + 1
    found = read_hip_kernels(ROCSPARSE)
    assert found.status == "ok" and found.bundles == 111
    assert set(found.targets) == set(expected) and set(expected.values()) == {111}


def test_collect_reads_a_rocm_torch_and_the_report_keeps_it(tmp_path):
    from doctor.model.snapshot import Dist, Snapshot, TorchInstall
    from doctor.probes.collect import _read_hip_kernels

    lib = tmp_path / "torch" / "lib" / "libtorch_hip.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(elf64([(".hip_fatbin", bundle1())]))
    torch = Dist(name="torch", version="2.5.1+rocm6.2", hip="6.2.41133", location=str(tmp_path),
                 has_libtorch_hip=True)
    snap = Snapshot(install=TorchInstall(status="ok", torch=torch))
    _read_hip_kernels(snap.install, 5.0)
    assert torch.hip_kernels.status == "ok" and torch.hip_kernels.path == str(lib)
    again = Snapshot.from_dict(snap.to_dict())
    assert again.install.torch.hip_kernels == torch.hip_kernels
    cuda = Snapshot(install=TorchInstall(torch=Dist(name="torch", has_libtorch_hip=False)))
    _read_hip_kernels(cuda.install, 5.0)
    assert cuda.install.torch.hip_kernels is None and "hip_kernels" not in cuda.to_dict()["install"]["torch"]
