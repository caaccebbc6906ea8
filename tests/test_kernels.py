"""doctor.probes.kernels: synthetic ELF/PE files built here (tests/elfmaker.py), then real libraries.

The slow tests download real wheels once into TORCHDOCTOR_WHEEL_CACHE (default
/tmp/torchdoctor-wheel-cache, outside the repository; a lock serialises concurrent sessions),
extract the one library they need and compare the reader with cuobjdump's counts recorded in
tests/fixtures/kernels/ (each with a .source note). TORCHDOCTOR_CUOBJDUMP=1 reruns cuobjdump
(installed from PyPI into the cache) and compares live; TORCHDOCTOR_CUOBJDUMP=write rewrites the
fixtures from it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import subprocess
import sys
import threading
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from elfmaker import (
    ARCH_SPECIFIC,
    COMPRESSED,
    COMPRESSED_ZSTD,
    EXTENDED_HEADER,
    FAMILY,
    HOST_LINUX_64,
    HOST_WINDOWS_64,
    container,
    container_offsets,
    crosscheck_elf,
    cubin,
    elf64,
    elf_address,
    entry,
    fatbin_elf,
    fatbin_section,
    pe64,
    pe_address,
    ptx,
    wrappers,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.probes import elf, kernels
from doctor.probes.binaries import find_torch_cuda_library, find_torchvision_library
from doctor.probes.kernels import (
    STATUS_NO_GPU_CODE,
    STATUS_OK,
    STATUS_UNKNOWN,
    FatbinScan,
    Kernels,
    kernels_from_scan,
    parse_fatbin,
    read_kernels,
    split_coverage,
)

L = HOST_LINUX_64
FIXTURES = Path(__file__).parent / "fixtures" / "kernels"


def write(tmp_path: Path, data: bytes, name: str = "libtorch_cuda.so") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def read(tmp_path: Path, data: bytes, name: str = "libtorch_cuda.so") -> Kernels:
    return read_kernels(write(tmp_path, data, name))


# --- what the reader finds in well-formed files ---------------------------------------------------


def test_one_sm(tmp_path):
    got = read(tmp_path, fatbin_elf([[cubin(86)]]))
    assert (got.status, got.why) == (STATUS_OK, None)
    assert got.sm == ("sm_86",)
    assert (got.ptx, got.partial, got.containers) == ((), (), 1)
    assert got.counts == (("sm_86", 1),)
    assert got.path == str(tmp_path / "libtorch_cuda.so")
    assert 0 < got.seconds < 5


def test_ptx_only(tmp_path):
    got = read(tmp_path, fatbin_elf([[ptx(50)], [ptx(50)]]))
    assert got.status == STATUS_OK
    assert (got.sm, got.ptx, got.partial, got.containers) == ((), ("compute_50",), (), 2)


def test_arch_specific_and_family_variants_are_named_from_the_flags(tmp_path):
    got = read(tmp_path, fatbin_elf([[
        cubin(90), cubin(90, L | ARCH_SPECIFIC),
        cubin(100, L | EXTENDED_HEADER), cubin(100, L | ARCH_SPECIFIC | EXTENDED_HEADER),
        cubin(103, L | FAMILY | EXTENDED_HEADER), cubin(120, L | FAMILY | EXTENDED_HEADER),
        ptx(100, L | ARCH_SPECIFIC), ptx(100, L | FAMILY),
    ]]))
    assert got.sm == ("sm_90", "sm_90a", "sm_100", "sm_100a", "sm_103f", "sm_120f")
    assert got.ptx == ("compute_100a", "compute_100f")
    assert got.partial == ()


def test_coverage_splits_the_build_list_from_a_handful_of_kernels(tmp_path):
    base = [cubin(80), cubin(90)]
    got = read(tmp_path, fatbin_elf([
        base + [cubin(90, L | ARCH_SPECIFIC), cubin(100, L | EXTENDED_HEADER)],
        base + [cubin(100, L | EXTENDED_HEADER)],
        base + [ptx(90)],
        base,
    ]))
    assert got.containers == 4
    assert got.sm == ("sm_80", "sm_90", "sm_100")  # sm_100 in 2 of 4: half counts
    assert got.ptx == ()
    assert got.partial == ("sm_90a", "compute_90")
    assert dict(got.counts) == {"sm_80": 4, "sm_90": 4, "sm_90a": 1, "sm_100": 2, "compute_90": 1}


def test_containers_without_cubin_or_ptx_do_not_dilute_coverage(tmp_path):
    other = entry(8, 90)  # an entry kind we do not name (e.g. LTO IR)
    got = read(tmp_path, fatbin_elf([[cubin(86)], [other], [other], [other]]))
    assert got.containers == 4
    assert got.sm == ("sm_86",) and got.partial == ()


def test_compressed_payloads_and_long_headers_are_skipped_by_their_stored_size(tmp_path):
    blob = bytes(range(256)) * 40
    got = read(tmp_path, fatbin_elf([[
        cubin(75, L | COMPRESSED_ZSTD, payload=b"\x28\xb5\x2f\xfd" + blob),
        ptx(50, L | COMPRESSED, payload=blob[:777]),
        cubin(120, L | COMPRESSED_ZSTD | EXTENDED_HEADER, payload=blob[:1001]),
        cubin(86, header_size=200),
    ]]))
    assert got.sm == ("sm_75", "sm_86", "sm_120") and got.ptx == ("compute_50",)


def test_targets_sort_by_number_not_as_text():
    counts = (("sm_100", 4), ("sm_75", 4), ("sm_90a", 1), ("compute_50", 4), ("sm_120", 3), ("sm_89", 1))
    assert split_coverage(counts, 4) == (("sm_75", "sm_100", "sm_120"), ("compute_50",), ("sm_89", "sm_90a"))


def test_zero_padding_between_and_after_containers_is_allowed():
    one, two = container([cubin(80)]), container([cubin(80), cubin(90)])
    scan = parse_fatbin(one + b"\0" * 8 + two + b"\0" * 100)
    assert scan == FatbinScan(containers=2, with_code=2, counts=(("sm_80", 2), ("sm_90", 1)))


def test_parse_accepts_bytes_bytearray_and_memoryview():
    section = fatbin_section([[cubin(86)]])
    expected = parse_fatbin(section)
    assert expected.why is None and expected.counts == (("sm_86", 1),)
    assert parse_fatbin(bytearray(section)) == expected
    assert parse_fatbin(memoryview(section)) == expected
    assert parse_fatbin("not bytes").why.startswith("not a byte buffer")


# --- the wrapper records: a shortcut that must give the same answer -------------------------------


def _containers(n: int):
    return [[cubin(75), cubin(80)] + ([cubin(90, L | ARCH_SPECIFIC)] if i % 3 == 0 else []) for i in range(n)]


def test_wrapper_records_and_the_chained_walk_agree(tmp_path):
    with_records = read(tmp_path, fatbin_elf(_containers(7)), "a.so")
    without = read(tmp_path, fatbin_elf(_containers(7), with_wrappers=False), "b.so")
    assert with_records.status == STATUS_OK
    assert (with_records.sm, with_records.partial, with_records.counts, with_records.containers) == (
        without.sm, without.partial, without.counts, without.containers)
    assert with_records.counts == (("sm_75", 7), ("sm_80", 7), ("sm_90a", 3))


def test_wrapper_offsets_are_used_only_when_they_tile_the_section():
    section = fatbin_section(_containers(3))
    offsets = container_offsets(section)
    reader = kernels._BufferReader(memoryview(section))
    assert kernels._containers_from_hints(reader, len(section), offsets) is not None
    assert kernels._containers_from_hints(reader, len(section), offsets[1:]) is None  # first one missing
    assert kernels._containers_from_hints(reader, len(section), offsets[:-1]) is None  # leaves a gap
    assert kernels._containers_from_hints(reader, len(section), offsets + [offsets[1] + 8]) is None


def test_records_that_point_elsewhere_fall_back_to_the_chained_walk(tmp_path):
    section = fatbin_section(_containers(4))
    # Records of relocatable code point outside .nv_fatbin; one lies about a container's start.
    segment = wrappers([0x10, 0xFFFF_FFFF_0000, elf_address([(".nv_fatbin", section)], ".nv_fatbin") + 24])
    got = read(tmp_path, elf64([(".nv_fatbin", section), (".nvFatBinSegment", segment)]))
    assert got.status == STATUS_OK and got.containers == 4 and dict(got.counts)["sm_75"] == 4


def test_the_cold_cache_path_reads_the_same(tmp_path, monkeypatch):
    # Every read counts as slow: after two groups of reads, the rest of each batch is announced first.
    path = write(tmp_path, fatbin_elf(_containers(9)))
    warm = read_kernels(path)
    monkeypatch.setattr(kernels, "_DISK_WAIT", -1.0)
    cold = read_kernels(path)
    assert cold.status == STATUS_OK
    assert (cold.sm, cold.partial, cold.counts, cold.containers) == (
        warm.sm,
        warm.partial,
        warm.counts,
        warm.containers,
    )
    data = path.read_bytes()
    with open(path, "rb") as fh:
        reader = kernels._FileReader(fh.fileno(), 100, len(data) - 100)
        # More than the first two timed groups (3 + 8 reads), so that the switch happens inside this call.
        offsets = (
            [0, 7, 500] + [600 + 64 * i for i in range(12)] + [len(data) - 130, len(data) - 100, len(data)]
        )
        expected = [data[100 + o : 100 + o + 48] for o in offsets]
        assert reader.read_many(offsets, 48) == expected
        assert reader._cold
        assert reader.read_many(offsets, 48) == expected  # announced up front this time


def test_on_a_cold_cache_every_header_is_announced_before_it_is_read(tmp_path, monkeypatch):
    """Cold, each entry header's page is asked for (WILLNEED) as soon as its offset is known, while the rest
    of the round is still being parsed: no read after the switch goes to the disk unannounced, and no round
    waits for a batch of announcements of its own (only the round that noticed the cold cache announces the
    rest)."""
    if not hasattr(os, "posix_fadvise"):
        pytest.skip("no posix_fadvise here")
    path = write(tmp_path, fatbin_elf(_containers(40)))
    warm = read_kernels(path)
    announced, unannounced = set(), []
    real_advise, real_pread = os.posix_fadvise, os.pread

    def advise(fd, offset, length, advice):
        announced.add(offset)
        return real_advise(fd, offset, length, advice)

    def pread(fd, size, offset):
        if switched[0] and offset not in announced:
            unannounced.append(offset)
        return real_pread(fd, size, offset)

    switched = [False]
    batches = []
    real_prefetch = kernels._FileReader._prefetch

    def prefetch(self, offsets, size):
        switched[0] = True
        batches.append(len(offsets))
        return real_prefetch(self, offsets, size)

    monkeypatch.setattr(kernels, "_DISK_WAIT", -1.0)  # every read counts as slow
    monkeypatch.setattr(kernels._FileReader, "_prefetch", prefetch)
    monkeypatch.setattr(kernels.os, "posix_fadvise", advise)
    monkeypatch.setattr(kernels.os, "pread", pread)
    cold = read_kernels(path)
    assert (cold.sm, cold.counts, cold.containers) == (warm.sm, warm.counts, warm.containers)
    assert switched[0] and len(announced) > 40
    assert unannounced == []
    assert len(batches) == 1


def test_only_headers_are_read(tmp_path):
    # 16 MB of payload; /proc/self/io counts the bytes our read calls returned.
    if not Path("/proc/self/io").exists():
        pytest.skip("no /proc/self/io on this system")
    big = b"\x7fELF" + b"\1" * (4 << 20)
    path = write(tmp_path, fatbin_elf([[cubin(sm, payload=big) for sm in (75, 80, 86, 90)]]))

    def bytes_read() -> int:
        fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
        return int(fields["rchar"])

    before = bytes_read()
    got = read_kernels(path)
    spent = bytes_read() - before
    assert got.sm == ("sm_75", "sm_80", "sm_86", "sm_90")
    assert spent < 64 * 1024, f"read {spent} bytes of a {path.stat().st_size}-byte file"


# --- files without GPU code, and files that are not libraries -------------------------------------


def test_elf_without_the_section_is_a_cpu_only_library(tmp_path):
    got = read(tmp_path, elf64([(".text", b"\xc3" * 32)]))
    assert (got.status, got.why) == (STATUS_NO_GPU_CODE, "no GPU code (.nv_fatbin absent)")
    assert (got.sm, got.ptx, got.containers) == ((), (), 0)


def test_empty_section_is_no_gpu_code(tmp_path):
    got = read(tmp_path, elf64([(".nv_fatbin", b"")]))
    assert (got.status, got.why) == (STATUS_NO_GPU_CODE, "no GPU code (.nv_fatbin is empty)")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "empty file"),
        (b"#!/bin/sh\necho hello\n", "not an ELF or PE file"),
        (b"\x7fELF\x02\x01", "truncated ELF header"),
        (elf64([(".nv_fatbin", fatbin_section([[cubin(86)]]))], elf_class=1), "32-bit ELF is not supported"),
        (elf64([(".nv_fatbin", fatbin_section([[cubin(86)]]))], data=2), "big-endian ELF is not supported"),
        (elf64([(".nv_fatbin", fatbin_section([[cubin(86)]]))], strip_section_table=True),
         "no section header table (stripped?)"),
        (elf64([(".nv_fatbin", fatbin_section([[cubin(86)]]))], nobits=(".nv_fatbin",)),
         "the .nv_fatbin section has no data in the file"),
        (b"MZ" + b"\0" * 100, "not an ELF or PE file (MZ without a PE header)"),
        (elf64([(".nv_fatbin", b"\0" * 64)]), "no fatbin container in the GPU code section"),
        (fatbin_elf([[entry(8, 90)]]), "1 fatbin container but no cubin or PTX in it"),
        (fatbin_elf([[entry(8, 90)], [entry(8, 90)]]), "2 fatbin containers but no cubin or PTX in them"),
    ],
    ids=["empty", "text", "short-elf", "elf32", "big-endian", "stripped", "nobits", "mz-only",
         "zeros", "other-kind", "other-kinds"],
)
def test_unreadable_files_are_unknown_with_a_reason(tmp_path, data, why):
    got = read(tmp_path, data)
    assert (got.status, got.why) == (STATUS_UNKNOWN, why)
    assert (got.sm, got.ptx, got.partial) == ((), (), ())


def test_truncated_library(tmp_path):
    data = fatbin_elf([[cubin(86)], [cubin(86)]])
    # Cut anywhere before the end: the section header table (written last) is gone.
    got = read(tmp_path, data[: len(data) // 2])
    assert (got.status, got.why) == (
        STATUS_UNKNOWN, "ELF section header table runs past the end of the file (truncated?)")
    # A table that says the section is longer than the file.
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    patched = bytearray(data)
    struct.pack_into("<Q", patched, shoff + 64 + 32, 1 << 30)  # section 1 is .nv_fatbin: its sh_size
    got = read(tmp_path, bytes(patched))
    assert (got.status, got.why) == (
        STATUS_UNKNOWN, "the .nv_fatbin section runs past the end of the file (truncated?)")


def test_fifo_is_refused_without_blocking(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this system")
    fifo = tmp_path / "libtorch_cuda.so"
    os.mkfifo(fifo)
    box = []
    worker = threading.Thread(target=lambda: box.append(read_kernels(fifo)), daemon=True)
    worker.start()
    worker.join(10)
    assert box, "read_kernels blocked on a FIFO with no writer"
    assert (box[0].status, box[0].why) == (STATUS_UNKNOWN, "not a regular file (a FIFO)")
    # The second check, on the opened descriptor (a FIFO swapped in after os.stat).
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(kernels._Unknown, match=r"^not a regular file \(a FIFO\)$"):
            kernels._read_open(fd, str(fifo), 0.0)
    finally:
        os.close(fd)


def test_directory_device_and_missing_file(tmp_path):
    assert read_kernels(tmp_path).why == "not a regular file (a directory)"
    missing = read_kernels(tmp_path / "nope.so")
    assert (missing.status, missing.why) == (STATUS_UNKNOWN, "cannot open: No such file or directory")
    if Path("/dev/null").exists():
        assert read_kernels("/dev/null").why == "not a regular file (a character device)"
    assert read_kernels(None).why == "not a path: NoneType"
    # Python's own words for it: "embedded null byte" (3.10-3.12), "stat: embedded null character in path"
    # (3.13)
    assert read_kernels(str(tmp_path) + "/a\0b").why in ("cannot open: embedded null byte",
                                                          "cannot open: stat: embedded null character in "
                                                          "path")


def test_elf_without_a_section_name_table_is_unknown(tmp_path):
    data = bytearray(fatbin_elf([[cubin(86)]]))
    data[0x3E:0x40] = b"\0\0"  # e_shstrndx = SHN_UNDEF
    got = read(tmp_path, bytes(data))
    assert (got.status, got.why) == (STATUS_UNKNOWN, "bad ELF section name table index 0")


# --- corrupt sections: unknown with a reason, never an exception or a loop -----------------------


def _corrupt_sections() -> dict[str, tuple[bytes, str]]:
    good = container([cubin(86)])
    past = "runs past the end of the section (truncated?)"
    return {
        "bad-magic": (container([cubin(86)], magic=0xDEADBEEF), "bad fatbin magic 0xdeadbeef at offset 0"),
        "container-past-end": (container([cubin(86)], entries_size=1 << 40), "fatbin container at offset 0 "
            f"{past}"),
        "container-size-wraps": (container([cubin(86)], entries_size=(1 << 64) - 1),
                                 f"fatbin container at offset 0 {past}"),
        "zero-container-header": (container([cubin(86)], header_size=0),
                                  "fatbin container at offset 0 has a 0-byte header"),
        "zero-entry-header": (container([cubin(86, header_size=0)]), "fatbin entry at offset 16 has a 0-byte "
            "header"),
        "entry-past-container": (container([cubin(86, payload_size=1 << 20)]),
                                 "fatbin entry at offset 16 runs past the end of its container"),
        "second-entry-past-container": (container([cubin(86), cubin(90, payload_size=(1 << 64) - 64)]),
                                        f"fatbin entry at offset {len(good)} runs past the end of its "
                                        "container"),
        "cut-container-header": (good + b"\x50\xed\x55\xba\x01\x00",
                                 f"fatbin container header at offset {len(good)} is cut short (truncated?)"),
        "cut-in-first-entry": (good[:40], f"fatbin container at offset 0 {past}"),
        "short-entries": (container([b"\0" * 20]), "fatbin entry header at offset 16 is cut short"),
        "garbage-after": (good + b"garbage!garbage!", f"bad fatbin magic 0x62726167 at offset {len(good)}"),
    }


CORRUPT = _corrupt_sections()


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_corrupt_sections_are_unknown(name, tmp_path):
    section, why = CORRUPT[name]
    scan = parse_fatbin(section)
    assert scan.why == why
    assert (kernels_from_scan(scan).status, kernels_from_scan(scan).why) == (STATUS_UNKNOWN, why)
    # The same through a file, with and without wrapper records pointing at offset 0.
    for segment in (
        [],
        [(".nvFatBinSegment", wrappers([elf_address([(".nv_fatbin", section)], ".nv_fatbin")]))],
    ):
        got = read(tmp_path, elf64([(".nv_fatbin", section)] + segment))
        assert (got.status, got.why) == (STATUS_UNKNOWN, why)


def test_many_tiny_containers_take_linear_time():
    # 64 KiB of empty 16-byte containers: 4096 steps, then the answer.
    scan = parse_fatbin(container([]) * 4096)
    assert (scan.why, scan.containers, scan.with_code) == (None, 4096, 0)
    assert kernels_from_scan(scan).why == "4096 fatbin containers but no cubin or PTX in them"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_parse_never_raises_on_arbitrary_bytes(data):
    scan = parse_fatbin(data)
    assert scan.why is None or isinstance(scan.why, str)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=1000), st.binary(min_size=1, max_size=8))
def test_parse_never_raises_on_damaged_sections(at, junk):
    section = fatbin_section(_containers(3))
    at %= len(section)
    damaged = section[:at] + junk + section[at + len(junk):]
    scan = parse_fatbin(damaged)
    if scan.why is None:
        assert scan.containers >= 1


# --- Windows PE ----------------------------------------------------------------------------------


def test_pe_dll(tmp_path):
    section = fatbin_section(
        [[cubin(86, HOST_WINDOWS_64), cubin(89, HOST_WINDOWS_64)], [cubin(86, HOST_WINDOWS_64)]]
    )
    got = read(tmp_path, pe64([(b".text\0\0\0", b"\xc3" * 16), (b".nv_fatb", section)]), "torch_cuda.dll")
    assert got.status == STATUS_OK
    assert (got.sm, got.partial, got.containers) == (("sm_86", "sm_89"), (), 2)


def test_pe_dll_with_wrapper_records(tmp_path):
    section = fatbin_section(_containers(4))
    placeholder = [(b".nvFatBi", wrappers([0] * 5)), (b".nv_fatb", section)]
    base = pe_address(placeholder, 1)
    # 1st: relocatable code
    records = wrappers([0x180052000] + [base + o for o in container_offsets(section)])
    got = read(tmp_path, pe64([(b".nvFatBi", records), (b".nv_fatb", section)]), "torch_cuda.dll")
    assert got.status == STATUS_OK and dict(got.counts) == {"sm_75": 4, "sm_80": 4, "sm_90a": 2}


def test_pe_without_the_section(tmp_path):
    got = read(tmp_path, pe64([(b".text\0\0\0", b"\xc3" * 16)]), "torch_cpu.dll")
    assert (got.status, got.why) == (STATUS_NO_GPU_CODE, "no GPU code (.nv_fatb absent)")


# --- finding the libraries ------------------------------------------------------------------------


def test_find_libraries(tmp_path):
    assert find_torch_cuda_library(tmp_path) is None
    assert find_torchvision_library(tmp_path) is None
    (tmp_path / "torch" / "lib").mkdir(parents=True)
    (tmp_path / "torchvision").mkdir()
    (tmp_path / "torch" / "lib" / "libtorch_cpu.so").write_bytes(b"")
    assert find_torch_cuda_library(tmp_path) is None  # a CPU-only torch
    (tmp_path / "torch" / "lib" / "torch_cuda.dll").write_bytes(b"")
    assert find_torch_cuda_library(tmp_path) == str(tmp_path / "torch" / "lib" / "torch_cuda.dll")
    (tmp_path / "torch" / "lib" / "libtorch_cuda.so").write_bytes(b"")
    assert find_torch_cuda_library(str(tmp_path)) == str(tmp_path / "torch" / "lib" / "libtorch_cuda.so")
    (tmp_path / "torchvision" / "_C.pyi").write_bytes(b"")  # a stub: no library
    assert find_torchvision_library(tmp_path) is None
    (tmp_path / "torchvision" / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (tmp_path / "torchvision" / "_C.cpython-312-x86_64-linux-gnu.so").write_bytes(b"")
    assert find_torchvision_library(tmp_path) == str(
        tmp_path / "torchvision" / "_C.cpython-311-x86_64-linux-gnu.so"
    )
    (tmp_path / "torchvision" / "_C.so").write_bytes(b"")
    assert find_torchvision_library(tmp_path) == str(tmp_path / "torchvision" / "_C.so")


def test_reading_imports_no_torch_and_no_subprocess(tmp_path):
    path = write(tmp_path, fatbin_elf([[cubin(86)]]))
    code = ("import sys, json\nfrom doctor.probes.kernels import read_kernels\n"
            "got = read_kernels(sys.argv[1])\nprint(json.dumps([got.status, sorted(sys.modules)]))")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, timeout=60
    )
    status, modules = json.loads(done.stdout)
    assert status == STATUS_OK
    assert not {"torch", "subprocess", "mmap", "ctypes"} & set(modules)


def test_module_stays_stdlib_only():
    # The reader and the ELF section reader it uses (doctor/probes/elf.py): the standard library only.
    for module in (kernels, elf):
        lines = [line for line in Path(module.__file__).read_text().splitlines()
                 if line.startswith(("import ", "from ")) and line != "from doctor.probes import elf"]
        imported = {line.split()[1].split(".")[0] for line in lines}
        assert imported <= {"__future__", "os", "re", "stat", "struct", "time", "collections", "dataclasses",
                            "pathlib"}, module.__name__


# --- the real libraries (slow) --------------------------------------------------------------------

CACHE = Path(os.environ.get("TORCHDOCTOR_WHEEL_CACHE", "/tmp/torchdoctor-wheel-cache"))


@dataclass(frozen=True)
class RealLibrary:
    requirement: str
    platform_args: tuple[str, ...]
    member: str  # the library's path inside the wheel
    fixture: str  # cuobjdump's counts, in tests/fixtures/kernels/


CP311 = ("--python-version", "3.11", "--implementation", "cp", "--abi", "cp311")
TORCH = RealLibrary("torch==2.14.1", ("--platform", "manylinux_2_28_x86_64") + CP311,
                    "torch/lib/libtorch_cuda.so", "torch-2.14.1-cu130-cuobjdump.txt")
TORCHVISION = RealLibrary("torchvision==0.20.1", ("--platform", "manylinux1_x86_64") + CP311,
                          "torchvision/_C.so", "torchvision-0.20.1-cu124-cuobjdump.txt")
# A Windows CUDA DLL small enough to fetch: bitsandbytes ships one per CUDA version.
BNB_WINDOWS = RealLibrary(
    "bitsandbytes==0.45.0",
    ("--platform", "win_amd64"),
    "bitsandbytes/libbitsandbytes_cuda124.dll",
    "bitsandbytes-0.45.0-cuda124-dll-cuobjdump.txt",
)


def real_library(lib: RealLibrary) -> tuple[Path, str]:
    """(path, sha256) of ``lib.member``, from a wheel downloaded once; ``pytest.skip`` if impossible."""
    try:
        import fcntl
    except ImportError:
        pytest.skip("the wheel cache lock needs fcntl (POSIX)")
    folder = CACHE / lib.requirement.replace("==", "-")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        pytest.skip(f"cannot create {folder}: {exc}")
    target = folder / Path(lib.member).name
    marker = folder / (target.name + ".sha256")
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be downloading the same wheel
        if not marker.exists():
            wheel = _download(lib, folder / "wheel")
            digest = hashlib.sha256()
            try:
                with zipfile.ZipFile(wheel) as zf, zf.open(lib.member) as src, open(target, "wb") as dst:
                    while chunk := src.read(1 << 20):
                        digest.update(chunk)
                        dst.write(chunk)
            except (zipfile.BadZipFile, KeyError) as exc:
                wheel.unlink()  # the next run downloads it again
                pytest.skip(f"{wheel.name} is unusable ({exc}); removed it")
            marker.write_text(digest.hexdigest() + "\n")
    return target, marker.read_text().strip()


def _download(lib: RealLibrary, into: Path) -> Path:
    found = sorted(into.glob("*.whl")) if into.is_dir() else []
    if not found:
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-input",
                "--disable-pip-version-check", "-d", str(into), *lib.platform_args, lib.requirement]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
        except (OSError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"pip download {lib.requirement} failed: {exc}")
        found = sorted(into.glob("*.whl"))
        if done.returncode != 0 or not found:
            pytest.skip(f"pip download {lib.requirement} failed: {done.stderr.strip().splitlines()[-1:]}")
    return found[-1]


@dataclass(frozen=True)
class Recorded:
    sha256: str
    containers: int
    counts: dict[tuple[str, str], int]  # ("elf" | "ptx", cuobjdump's name) -> entries


def load_fixture(name: str) -> Recorded:
    sha, containers, counts = "", 0, {}
    for line in (FIXTURES / name).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, *rest = line.split()
        if key == "sha256":
            sha = rest[0]
        elif key == "containers":
            containers = int(rest[0])
        else:
            counts[(key, rest[0])] = int(rest[1])
    return Recorded(sha, containers, counts)


def as_cuobjdump_counts(counts) -> dict[tuple[str, str], int]:
    """Our targets under cuobjdump's names: it lists a ``sm_100f`` cubin as ``sm_100`` and PTX as ``sm_``."""
    named: Counter[tuple[str, str]] = Counter()
    for target, held in counts:
        if target.startswith("compute_"):
            named[("ptx", "sm_" + target[len("compute_"):])] += held
        else:
            named[("elf", target[:-1] if target.endswith("f") else target)] += held
    return dict(named)


def check_against_fixture(lib: RealLibrary) -> tuple[Kernels, Recorded]:
    path, sha = real_library(lib)
    recorded = load_fixture(lib.fixture)
    assert sha == recorded.sha256, f"{path} is not the file the fixture was made from"
    got = read_kernels(path)
    assert got.status == STATUS_OK, got.why
    assert got.containers == recorded.containers
    assert as_cuobjdump_counts(got.counts) == recorded.counts
    full = {
        name for (kind, name), n in recorded.counts.items() if kind == "elf" and 2 * n >= recorded.containers
    }
    assert {t[:-1] if t.endswith("f") else t for t in got.sm} == full
    return got, recorded


@pytest.mark.slow
def test_real_torch_2_14_1_cu130():
    got, _ = check_against_fixture(TORCH)
    assert got.sm == ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
    assert got.ptx == ()
    assert got.partial == ("sm_89", "sm_90a", "sm_100a", "sm_103f", "sm_120a", "sm_121a")
    assert dict(got.counts) == {
        "sm_75": 475,
        "sm_80": 475,
        "sm_86": 475,
        "sm_89": 1,
        "sm_90": 475,
        "sm_90a": 4,
        "sm_100": 475,
        "sm_100a": 59,
        "sm_103f": 59,
        "sm_120": 475,
        "sm_120a": 1,
        "sm_121a": 1,
    }
    # Headers only: a few hundred KB of reads from a 503 MB file, counted in bytes, not timed.
    if Path("/proc/self/io").exists():
        fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
        before = int(fields["rchar"])
        read_kernels(got.path)
        fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
        assert int(fields["rchar"]) - before < 1 << 20


@pytest.mark.slow
def test_real_torchvision_0_20_1_cu124_has_ptx():
    got, _ = check_against_fixture(TORCHVISION)
    assert got.sm == ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
    assert got.ptx == ("compute_50",)
    assert (got.partial, got.containers) == ((), 6)


@pytest.mark.slow
def test_real_windows_dll():
    got, _ = check_against_fixture(BNB_WINDOWS)
    assert got.sm == (
        "sm_50",
        "sm_52",
        "sm_60",
        "sm_61",
        "sm_70",
        "sm_75",
        "sm_80",
        "sm_86",
        "sm_89",
        "sm_90",
    )
    assert (got.ptx, got.partial, got.containers) == ((), (), 1)


# cuobjdump itself: only on request, it takes ~30 s on libtorch_cuda.so.


def cuobjdump_binary() -> Path:
    folder = CACHE / "nvidia-cuda-cuobjdump"
    found = sorted(folder.glob("nvidia/*/bin/cuobjdump"))
    if not found:
        argv = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-input",
            "--disable-pip-version-check",
            "--target",
            str(folder),
            "nvidia-cuda-cuobjdump",
        ]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        found = sorted(folder.glob("nvidia/*/bin/cuobjdump"))
        if done.returncode != 0 or not found:
            pytest.skip(f"cannot install nvidia-cuda-cuobjdump: {done.stderr.strip().splitlines()[-1:]}")
    binary = found[-1]
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return binary


def cuobjdump_counts(binary: Path, library: Path) -> dict[tuple[str, str], int]:
    counts: Counter[tuple[str, str]] = Counter()
    for kind, flag in (("elf", "--list-elf"), ("ptx", "--list-ptx")):
        done = subprocess.run([str(binary), flag, str(library)], capture_output=True, text=True, timeout=600)
        for line in done.stdout.splitlines():
            # "ELF file    1: libtorch_cuda.1.sm_75.cubin" / "PTX file    1: _C.1.sm_50.ptx"
            name = line.rsplit(".", 2)[-2] if line.startswith(("ELF file", "PTX file")) else None
            if name:
                counts[(kind, name)] += 1
    return dict(counts)


def fixture_text(what: str, sha: str, containers: int, counts: dict[tuple[str, str], int]) -> str:
    lines = [f"# cuobjdump --list-elf / --list-ptx of {what}, entries per name.",
             "# cuobjdump lists an sm_XXXf cubin as sm_XXX and a compute_XX PTX as sm_XX. See the .source "
             "note.",
             f"sha256 {sha}", f"containers {containers}"]
    order = sorted(counts, key=lambda k: (k[0], int(k[1][3:].rstrip("af")), k[1]))
    lines += [f"{kind} {name} {counts[(kind, name)]}" for kind, name in order]
    return "\n".join(lines) + "\n"


def live_mode() -> str:
    mode = os.environ.get("TORCHDOCTOR_CUOBJDUMP", "")
    if mode not in ("1", "write"):
        pytest.skip("set TORCHDOCTOR_CUOBJDUMP=1 to rerun cuobjdump (~30 s for libtorch_cuda.so)")
    return mode


@pytest.mark.slow
@pytest.mark.parametrize("lib", [TORCH, TORCHVISION, BNB_WINDOWS], ids=["torch", "torchvision", "bnb-dll"])
def test_live_cuobjdump_agrees(lib, tmp_path):
    mode = live_mode()
    path, sha = real_library(lib)
    got = read_kernels(path)
    target = path
    if path.suffix == ".dll":
        # Linux cuobjdump does not open PE files: hand it the raw .nv_fatb section instead.
        with open(path, "rb") as fh:
            fatbin, _ = kernels._locate_pe(
                kernels._FileReader(fh.fileno(), 0, path.stat().st_size), path.stat().st_size
            )
            fh.seek(fatbin.offset)
            target = tmp_path / "nv_fatb.fatbin"
            target.write_bytes(fh.read(fatbin.size))
    live = cuobjdump_counts(cuobjdump_binary(), target)
    assert live, f"cuobjdump listed nothing in {target}"
    assert as_cuobjdump_counts(got.counts) == live
    if mode == "write":
        (FIXTURES / lib.fixture).write_text(
            fixture_text(f"{lib.member} from {lib.requirement}", sha, got.containers, live))
    assert load_fixture(lib.fixture) == Recorded(sha, got.containers, live)


@pytest.mark.slow
def test_live_cuobjdump_agrees_on_the_synthetic_file(tmp_path):
    mode = live_mode()
    path = write(tmp_path, crosscheck_elf(), "synthetic.so")
    live = cuobjdump_counts(cuobjdump_binary(), path)
    got = read_kernels(path)
    assert as_cuobjdump_counts(got.counts) == live
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    if mode == "write":
        (FIXTURES / SYNTHETIC).write_text(
            fixture_text("tests/elfmaker.py crosscheck_elf()", sha, got.containers, live))
    assert load_fixture(SYNTHETIC) == Recorded(sha, got.containers, live)


SYNTHETIC = "synthetic-cuobjdump.txt"


def test_synthetic_file_is_still_the_one_cuobjdump_checked(tmp_path):
    recorded = load_fixture(SYNTHETIC)
    data = crosscheck_elf()
    assert hashlib.sha256(data).hexdigest() == recorded.sha256, (
        "tests/elfmaker.py now builds a different file: recheck it with TORCHDOCTOR_CUOBJDUMP=write")
    got = read(tmp_path, data)
    assert got.containers == recorded.containers
    assert as_cuobjdump_counts(got.counts) == recorded.counts
    assert got.sm == ("sm_75", "sm_86") and got.ptx == ()
    assert got.partial == ("sm_100", "compute_50", "compute_90a", "compute_100f")


def test_every_fixture_has_its_source_note():
    fixtures = sorted(FIXTURES.glob("*-cuobjdump.txt"))
    assert len(fixtures) >= 4
    for fixture in fixtures:
        recorded = load_fixture(fixture.name)
        assert len(recorded.sha256) == 64 and recorded.containers > 0 and recorded.counts, fixture.name
        assert (FIXTURES / (fixture.name + ".source")).exists(), fixture.name
