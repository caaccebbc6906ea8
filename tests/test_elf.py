"""doctor.probes.elf: the ELF section header reader the CUDA and HIP kernel readers share, on small files
whose headers are packed here byte by byte, then broken one field at a time."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.probes.elf import SHT_NOBITS, ElfError, Section, first_named, sections

SHT_PROGBITS, SHT_STRTAB = 1, 3
BASE = 0x400000


def build(named: list[tuple[str, bytes, int]], *, elf_class: int = 2, data: int = 1, shentsize: int = 64,
          shnum: int | None = None, shstrndx: int | None = None, shoff: int | None = None,
          size0: int = 0, link0: int = 0) -> bytes:
    """An ELF64 header, the (name, data, sh_type) sections back to back from byte 64, a ``.shstrtab`` last
    and the section header table after it. The keywords overwrite what the header would say."""
    names = b"\0"
    name_at = []
    for name, _, _ in named + [(".shstrtab", b"", 0)]:
        name_at.append(len(names))
        names += name.encode() + b"\0"
    body = b""
    rows = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, size0, link0, 0, 0, 0).ljust(shentsize, b"\0")]
    for (_, blob, sh_type), at in zip(named + [(".shstrtab", names, SHT_STRTAB)], name_at, strict=True):
        offset = 64 + len(body)
        rows.append(struct.pack("<IIQQQQIIQQ", at, sh_type, 0, BASE + offset, offset, len(blob), 7, 0, 1, 0)
                    .ljust(shentsize, b"\0"))
        body += blob
    table_at = 64 + len(body)
    header = b"\x7fELF" + bytes([elf_class, data, 1, 0]) + b"\0" * 8 + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, table_at if shoff is None else shoff, 0, 64, 56, 0, shentsize,
        len(rows) if shnum is None else shnum, len(rows) - 1 if shstrndx is None else shstrndx)
    return header + body + b"".join(rows)


def reader(data: bytes):
    return lambda offset, size: data[offset : offset + size]


def read_all(data: bytes) -> list[Section]:
    return sections(reader(data), len(data))


def why(data: bytes, file_size: int | None = None) -> str:
    with pytest.raises(ElfError) as caught:
        sections(reader(data), len(data) if file_size is None else file_size)
    return str(caught.value)


GOOD = [(".text", b"\xc3" * 24, SHT_PROGBITS), (".hip_fatbin", b"bundles!", SHT_PROGBITS),
        (".bss", b"", SHT_NOBITS)]


def test_a_good_file_lists_every_section_with_its_name():
    data = build(GOOD)
    found = read_all(data)
    assert [s.name for s in found] == ["", ".text", ".hip_fatbin", ".bss", ".shstrtab"]
    text, fatbin = found[1], found[2]
    assert (text.type, text.offset, text.size, text.address) == (SHT_PROGBITS, 64, 24, BASE + 64)
    assert text.link == 7
    assert data[fatbin.offset : fatbin.offset + fatbin.size] == b"bundles!"
    assert first_named(found, ".hip_fatbin", len(data)) == fatbin
    assert first_named(found, ".nv_fatbin", len(data)) is None


def test_the_first_of_two_sections_with_one_name_is_found():
    data = build([(".nv_fatbin", b"first", SHT_PROGBITS), (".nv_fatbin", b"second", SHT_PROGBITS)])
    found = first_named(read_all(data), ".nv_fatbin", len(data))
    assert data[found.offset : found.offset + found.size] == b"first"


def test_wider_section_headers_are_stepped_over():
    # sh_entsize larger than 64 (no linker writes one, the format allows it): each header starts a stride on
    assert [s.name for s in read_all(build(GOOD, shentsize=80))][1:3] == [".text", ".hip_fatbin"]


def test_past_0xff00_sections_the_count_and_name_table_index_are_in_section_0():
    # e_shnum = 0: the count is section 0's sh_size; e_shstrndx = SHN_XINDEX: the index is its sh_link
    assert [s.name for s in read_all(build(GOOD, shnum=0, size0=5))][2] == ".hip_fatbin"
    assert [s.name for s in read_all(build(GOOD, shstrndx=0xFFFF, link0=4))][2] == ".hip_fatbin"
    both = build(GOOD, shnum=0, size0=5, shstrndx=0xFFFF, link0=4)
    assert [s.name for s in read_all(both)] == ["", ".text", ".hip_fatbin", ".bss", ".shstrtab"]


def test_a_name_outside_the_name_table_is_empty_not_an_error():
    data = bytearray(build(GOOD))
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    struct.pack_into("<I", data, shoff + 64, 10_000)  # .text's sh_name
    assert [s.name for s in read_all(bytes(data))][:3] == ["", "", ".hip_fatbin"]


@pytest.mark.parametrize(("data", "reason"), [
    (b"", "not an ELF file"),
    (b"MZ\x90\x00" + b"\0" * 100, "not an ELF file"),
    (b"\x7fELF\x02\x01", "truncated ELF header"),
    (build(GOOD, elf_class=1), "32-bit ELF is not supported"),
    (build(GOOD, elf_class=3), "bad ELF class 3"),
    (build(GOOD, data=2), "big-endian ELF is not supported"),
    (build(GOOD, data=0), "bad ELF data encoding 0"),
    (build(GOOD, shoff=0), "no section header table (stripped?)"),
    (build(GOOD, shentsize=56), "bad ELF section header size 56"),
    (build(GOOD, shstrndx=0), "bad ELF section name table index 0"),
    (build(GOOD, shstrndx=5), "bad ELF section name table index 5"),
    (build(GOOD, shnum=0, size0=0), "bad ELF section name table index 4"),
    (build(GOOD, shstrndx=0xFFFF, link0=0), "bad ELF section name table index 0"),
], ids=["empty", "pe", "short-header", "elf32", "bad-class", "big-endian", "bad-encoding", "stripped",
        "narrow-headers", "no-name-table", "name-table-index-past-the-table", "shnum-0-and-section-0-says-0",
        "xindex-to-section-0"])
def test_malformed_headers_give_one_reason(data, reason):
    assert why(data) == reason


TRUNCATED = "ELF section header table runs past the end of the file (truncated?)"


def test_a_table_past_the_end_of_the_file():
    data = build(GOOD)
    assert why(data[:-1]) == TRUNCATED  # the last header cut
    assert why(build(GOOD, shnum=200)) == TRUNCATED
    assert why(build(GOOD, shoff=1 << 40)) == TRUNCATED
    # the count in section 0, which is itself past the end / more than any linker writes
    assert why(build(GOOD, shnum=0, shoff=1 << 40)) == TRUNCATED
    assert why(build(GOOD, shnum=0, size0=(1 << 16) + 1)) == TRUNCATED
    assert why(build(GOOD, shstrndx=0xFFFF, shoff=len(data) - 32)) == TRUNCATED
    # the file shrank between taking its size and reading the table
    assert why(data[:-100], file_size=len(data)) == TRUNCATED


def test_a_name_table_that_is_too_big_or_past_the_end():
    data = build(GOOD)
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    names_header = shoff + 4 * 64  # .shstrtab's header
    for field, value in ((32, 1 << 21), (32, len(data)), (24, len(data))):  # its sh_size, then sh_offset
        broken = bytearray(data)
        struct.pack_into("<Q", broken, names_header + field, value)
        assert why(bytes(broken)) == "bad ELF section name table"


def test_unnamed_the_name_table_is_neither_read_nor_required():
    # a reader that finds its section by type (DT_NEEDED: the dynamic section) needs no name table
    data = build(GOOD)
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    too_big = bytearray(data)
    struct.pack_into("<Q", too_big, shoff + 4 * 64 + 32, 1 << 21)
    expected = [(s.type, s.offset, s.size, s.link) for s in read_all(data)]
    for broken in (data, build(GOOD, shstrndx=0), build(GOOD, shstrndx=5), bytes(too_big),
                   build(GOOD, shstrndx=0xFFFF, link0=0)):
        found = sections(reader(broken), len(broken), named=False)
        assert [s.name for s in found] == [""] * 5
        assert [(s.type, s.offset, s.size, s.link) for s in found][:4] == expected[:4]
    # the table itself must still be whole
    with pytest.raises(ElfError, match="runs past the end"):
        sections(reader(data[:-1]), len(data) - 1, named=False)
    spent = []
    sections(lambda offset, size: spent.append(size) or data[offset : offset + size], len(data), named=False)
    assert len(spent) == 2  # the header and the table


def test_a_section_the_file_does_not_hold():
    data = build(GOOD)
    found = read_all(data)
    with pytest.raises(ElfError, match=r"^the \.bss section has no data in the file$"):
        first_named(found, ".bss", len(data))
    with pytest.raises(ElfError) as caught:
        first_named(found, ".hip_fatbin", found[2].offset + 7)
    assert str(caught.value) == "the .hip_fatbin section runs past the end of the file (truncated?)"
    assert found[2].problem(len(data)) is None and found[3].problem(len(data)) is not None


def test_reads_stay_small():
    data = build(GOOD) + b"\0" * (1 << 20)
    spent = []

    def read(offset, size):
        spent.append(size)
        return data[offset : offset + size]

    sections(read, len(data))
    assert len(spent) == 3 and sum(spent) < 1024  # the header, the table, the names


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 511), st.integers(0, 255)), max_size=6), st.integers(0, 600))
def test_any_corruption_gives_a_list_or_an_elf_error(changes, cut):
    data = bytearray(build(GOOD))
    for at, value in changes:
        data[at % len(data)] = value
    data = bytes(data[: len(data) - cut])
    try:
        found = read_all(data)
    except ElfError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert all(isinstance(s, Section) for s in found)
