"""doctor.probes.binaries: the DT_NEEDED names of a library (the shared libraries the loader must find), read
through the section headers (doctor/probes/elf.py) from small files packed here byte by byte, then broken one
field at a time."""

from __future__ import annotations

import io
import struct

from doctor.probes.binaries import _needed, read_cuda_needed

SHT_PROGBITS, SHT_STRTAB, SHT_DYNAMIC, SHT_NOBITS = 1, 3, 6, 8
DT_NULL, DT_NEEDED, DT_SONAME = 0, 1, 14


def dynamic(*needed: str, extra: list[tuple[int, int]] = (), end: bool = True) -> tuple[bytes, bytes]:
    """A .dynamic table (its DT_NEEDED entries first, then ``extra`` (tag, value) entries, then DT_NULL unless
    ``end`` is False) and the .dynstr it points into."""
    strings, entries = b"\0", b""
    for name in needed:
        entries += struct.pack("<qQ", DT_NEEDED, len(strings))
        strings += name.encode() + b"\0"
    for tag, value in extra:
        entries += struct.pack("<qQ", tag, value)
    if end:
        entries += struct.pack("<qQ", DT_NULL, 0)
    return entries, strings


def build(entries: bytes, strings: bytes, *, before: list[tuple[int, bytes]] = (), shentsize: int = 64,
          shnum: int | None = None, shstrndx: int | None = None, size0: int = 0, link0: int = 0,
          dyn_link: int | None = None, dyn_size: int | None = None, str_size: int | None = None,
          elf_class: int = 2, data: int = 1, shoff: int | None = None) -> bytes:
    """An ELF64 header, the (sh_type, data) sections of ``before``, a .dynstr, a .dynamic (linked to it), a
    .shstrtab, then the section header table. The keywords overwrite what the headers would say."""
    named = [(".x", sh_type, blob) for sh_type, blob in before]
    named += [(".dynstr", SHT_STRTAB, strings), (".dynamic", SHT_DYNAMIC, entries)]
    names = b"\0" + b"".join(name.encode() + b"\0" for name, _, _ in named) + b".shstrtab\0"
    named.append((".shstrtab", SHT_STRTAB, names))
    rows = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, size0, link0, 0, 0, 0).ljust(shentsize, b"\0")]
    body = b""
    dynstr_index = len(before) + 1
    for name, sh_type, blob in named:
        offset = 64 + len(body)
        size, link = len(blob), 0
        if name == ".dynamic":
            size = len(blob) if dyn_size is None else dyn_size
            link = dynstr_index if dyn_link is None else dyn_link
        if name == ".dynstr" and str_size is not None:
            size = str_size
        rows.append(struct.pack("<IIQQQQIIQQ", names.find(name.encode() + b"\0"), sh_type, 0, offset, offset,
                                size, link, 0, 1, 16 if name == ".dynamic" else 0).ljust(shentsize, b"\0"))
        body += blob
    table_at = 64 + len(body)
    header = b"\x7fELF" + bytes([elf_class, data, 1, 0]) + b"\0" * 8 + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, table_at if shoff is None else shoff, 0, 64, 56, 0, shentsize,
        len(rows) if shnum is None else shnum, len(rows) - 1 if shstrndx is None else shstrndx)
    return header + body + b"".join(rows)


def needed(data: bytes) -> list[str]:
    return _needed(io.BytesIO(data))


def test_the_needed_names_in_table_order_other_tags_skipped_and_dt_null_ends_it():
    entries, strings = dynamic("libcudart.so.12", "libc.so.6", extra=[(DT_SONAME, 1)])
    assert needed(build(entries, strings)) == ["libcudart.so.12", "libc.so.6"]
    after_null = entries + struct.pack("<qQ", DT_NEEDED, 1)
    assert needed(build(after_null, strings)) == ["libcudart.so.12", "libc.so.6"]


def test_the_dynamic_section_is_found_by_type_the_first_of_them():
    other_entries, _ = dynamic("libother.so.1")
    first = build(*dynamic("libcudart.so.12"), before=[(SHT_PROGBITS, b"\xc3" * 40)])
    assert needed(first) == ["libcudart.so.12"]
    # a dynamic section before it (linked to section 0, the null section: it names nothing) wins
    earlier = build(*dynamic("libcudart.so.12"), before=[(SHT_DYNAMIC, other_entries)])
    assert needed(earlier) == []


def test_read_cuda_needed_keeps_the_cuda_libraries_of_a_file(tmp_path):
    path = tmp_path / "_C.so"
    names = ("libc10.so", "libcudart-1a2b3c4d.so.12", "libcublasLt.so.13", "libc.so.6")
    path.write_bytes(build(*dynamic(*names)))
    assert read_cuda_needed(path) == ["libcudart-1a2b3c4d.so.12", "libcublasLt.so.13"]
    assert read_cuda_needed(tmp_path / "missing.so") == []


def test_a_bad_name_table_index_does_not_hide_the_needed_names():
    # the loader never reads section names, so neither does this reader
    entries, strings = dynamic("libcudart.so.12")
    good = build(entries, strings)
    shnum = struct.unpack_from("<H", good, 0x3C)[0]
    for index in (0, shnum, 0xFFFF):  # 0xFFFF: the index is section 0's sh_link, 0 here
        assert needed(build(entries, strings, shstrndx=index)) == ["libcudart.so.12"], index


def test_a_name_table_past_the_end_of_the_file_does_not_hide_the_needed_names():
    data = bytearray(build(*dynamic("libcudart.so.12")))
    shoff, (shnum,) = struct.unpack_from("<Q", data, 0x28)[0], struct.unpack_from("<H", data, 0x3C)
    struct.pack_into("<Q", data, shoff + (shnum - 1) * 64 + 32, 1 << 40)  # .shstrtab's sh_size
    assert needed(bytes(data)) == ["libcudart.so.12"]


def test_past_0xff00_sections_the_count_is_in_section_0():
    entries, strings = dynamic("libcudart.so.12")
    assert needed(build(entries, strings, shnum=0, size0=4)) == ["libcudart.so.12"]
    assert needed(build(entries, strings, shnum=0, size0=0)) == []
    assert needed(build(entries, strings, shnum=0, size0=(1 << 16) + 1)) == []


def test_a_larger_section_header_size_is_followed():
    assert needed(build(*dynamic("libcudart.so.12"), shentsize=80)) == ["libcudart.so.12"]


def test_files_without_a_readable_section_table_need_nothing():
    entries, strings = dynamic("libcudart.so.12")
    good = build(entries, strings)
    assert needed(b"") == []
    assert needed(b"MZ" + good[2:]) == []
    assert needed(good[:40]) == []  # the ELF header itself is cut short
    assert needed(build(entries, strings, elf_class=1)) == []  # 32-bit
    assert needed(build(entries, strings, data=2)) == []  # big-endian
    assert needed(build(entries, strings, shoff=0)) == []  # stripped section table
    assert needed(build(entries, strings, shentsize=32)) == []
    assert needed(good[:-1]) == []  # the section table is cut short
    assert needed(build(entries, strings, shoff=len(good))) == []


def test_no_dynamic_section_or_one_out_of_bounds_needs_nothing():
    entries, strings = dynamic("libcudart.so.12")
    assert needed(build(b"", strings)) == []  # an empty table
    static = build(entries, strings)
    shoff = struct.unpack_from("<Q", static, 0x28)[0]
    as_progbits = bytearray(static)
    struct.pack_into("<I", as_progbits, shoff + 2 * 64 + 4, SHT_PROGBITS)  # .dynamic is section 2
    assert needed(bytes(as_progbits)) == []
    assert needed(build(entries, strings, dyn_link=4)) == []  # sh_link past the last section
    assert needed(build(entries, strings, dyn_link=0)) == []  # the null section holds no names
    assert needed(build(entries, strings, dyn_size=(1 << 20) + 16)) == []  # over the 1 MiB bound


def test_an_entry_naming_a_place_past_its_name_table_is_skipped():
    entries, strings = dynamic("libcudart.so.12", "libc.so.6")
    libc_at = strings.index(b"libc.so.6")
    assert needed(build(entries, strings, str_size=libc_at)) == ["libcudart.so.12"]
    assert needed(build(entries, strings, str_size=libc_at + 1)) == ["libcudart.so.12", "libc.so.6"]


def test_a_name_is_read_to_at_most_256_bytes():
    long = "lib" + "x" * 300 + ".so"
    assert needed(build(*dynamic(long, "libc.so.6"))) == [long[:256], "libc.so.6"]


def test_a_table_without_dt_null_ends_with_its_section():
    entries, strings = dynamic("libcudart.so.12", "libc.so.6", end=False)
    assert needed(build(entries + b"\x01" * 7, strings)) == ["libcudart.so.12", "libc.so.6"]


def test_a_file_that_ends_inside_the_table_or_a_name_needs_nothing():
    # a partial answer is no answer: the missing entries may name the CUDA runtime
    entries, strings = dynamic("libcudart.so.12", "libc.so.6")
    table_last = [(SHT_STRTAB, strings, len(strings), 0), (SHT_DYNAMIC, entries, len(entries), 1)]
    assert needed(data_last(table_last)) == ["libcudart.so.12", "libc.so.6"]
    for cut in (1, 16):  # inside DT_NULL; DT_NULL gone
        assert needed(data_last(table_last[:1] + [(SHT_DYNAMIC, entries[:-cut], len(entries), 1)])) == [], cut
    # a size past the end of the file, but DT_NULL inside it: the whole table was read
    longer = table_last[:1] + [(SHT_DYNAMIC, entries, len(entries) + 64, 1)]
    assert needed(data_last(longer)) == ["libcudart.so.12", "libc.so.6"]
    names_last = [(SHT_DYNAMIC, entries, len(entries), 2), (SHT_STRTAB, strings, len(strings), 0)]
    assert needed(data_last(names_last)) == ["libcudart.so.12", "libc.so.6"]
    cut_name = names_last[:1] + [(SHT_STRTAB, strings[:-1], len(strings), 0)]  # libc.so.6 loses its NUL
    assert needed(data_last(cut_name)) == []


def data_last(sections: list[tuple[int, bytes, int, int]]) -> bytes:
    """An ELF64 whose section table (no name table) follows the header, then the (sh_type, data, declared
    size, sh_link) sections back to back: the file ends with the last one's data."""
    table_size = (len(sections) + 1) * 64
    rows, body = [b"\0" * 64], b""
    for sh_type, blob, declared, link in sections:
        offset = 64 + table_size + len(body)
        rows.append(struct.pack("<IIQQQQIIQQ", 0, sh_type, 0, offset, offset, declared, link, 0, 1, 0))
        body += blob
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8 + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 64, 0, 64, 56, 0, 64, len(rows), 0)
    return header + b"".join(rows) + body
