"""Small ELF64 and PE32+ files holding synthetic fatbins, built at test time (tests/test_kernels.py).

The layout follows what was measured on real libraries (see doctor/probes/kernels.py); one file
built here was checked by hand with ``cuobjdump --list-elf`` / ``--list-ptx`` (CUDA 13.5), see
tests/fixtures/kernels/synthetic-cuobjdump.txt (``crosscheck_elf``).

Usage::

    data = fatbin_section([[cubin(86), ptx(86)], [cubin(86)]])
    path.write_bytes(elf64([(".nv_fatbin", data)]))
"""

from __future__ import annotations

import struct

MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_CUBIN = 2
HOST_LINUX_64 = 0x11  # the flags every Linux x86_64 entry carries (64-bit, Linux host)
HOST_WINDOWS_64 = 0x41
ARCH_SPECIFIC = 0x100000  # sm_90a
FAMILY = 0x200000  # sm_100f
COMPRESSED = 0x2000  # LZ4-style (torchvision 0.20 PTX)
COMPRESSED_ZSTD = 0x8000  # every cubin of torch 2.14.1 cu130
EXTENDED_HEADER = 0x1000000  # set with the 112-byte headers of sm_100 and later

ELF_BASE = 0x400000  # section address = file offset + ELF_BASE, so that addresses differ from offsets
PE_IMAGE_BASE = 0x180000000


def entry(kind: int, sm: int, flags: int = HOST_LINUX_64, payload: bytes | None = None,
          header_size: int | None = None, payload_size: int | None = None) -> bytes:
    """One fatbin entry: its header and its payload, laid out as CUDA 13.0's ``fatbinary`` does.

    PTX headers are 80 bytes (64, then a 16-byte option block that cuobjdump insists on); cubin
    headers 64, or 112 with ``EXTENDED_HEADER``. ``payload_size`` overrides the size written in the
    header (to build corrupt entries); ``header_size`` the header's size (padded with zeros).
    """
    if payload is None:
        payload = tiny_cubin(sm) if kind == KIND_CUBIN else tiny_ptx(sm)
    if header_size is None:
        header_size = 80 if kind == KIND_PTX else 112 if flags & EXTENDED_HEADER else 64
    stored = len(payload) if payload_size is None else payload_size
    minor, major = (8, 1) if kind == KIND_CUBIN else (0, 9)  # cubin format 1.8 / PTX ISA 9.0
    options_at = 64 if header_size > 64 else 0
    head = struct.pack(
        "<HHIQIIHHIIIQQQ",
        kind, 0x0101, header_size, stored,
        0, options_at, minor, major, sm,
        0, 0, flags, 0, 0,
    )
    if options_at:
        head += struct.pack("<I", 0x48)
    return head.ljust(header_size, b"\0") + payload


def tiny_cubin(sm: int) -> bytes:
    """The smallest cubin ``cuobjdump --list-elf`` accepts: an EM_CUDA ELF header and a name table.

    cuobjdump names a cubin from its payload (an ``a`` target also carries ``-arch sm_90a`` inside),
    so this payload lists as plain ``sm_XX`` whatever the entry's flags say.
    """
    blob = bytearray(elf64([]))
    blob[7:9] = bytes([0x41, 8])  # the ELFOSABI / ABI version bytes of CUDA 13 cubins
    struct.pack_into("<HH", blob, 16, 2, 190)  # ET_EXEC, EM_CUDA
    struct.pack_into("<I", blob, 48, 0x06000000 | sm << 8 | (4 if sm < 100 else 2))  # e_flags as ptxas writes
    return bytes(blob)


def tiny_ptx(sm: int) -> bytes:
    text = f".version 9.0\n.target sm_{sm}\n.address_size 64\n".encode()
    return text + b"\0" * (8 - len(text) % 8)


def cubin(sm: int, flags: int = HOST_LINUX_64, **kw) -> bytes:
    return entry(KIND_CUBIN, sm, flags, **kw)


def ptx(sm: int, flags: int = HOST_LINUX_64, **kw) -> bytes:
    return entry(KIND_PTX, sm, flags, **kw)


def container(entries: list[bytes], entries_size: int | None = None, header_size: int = 16,
              magic: int = MAGIC) -> bytes:
    body = b"".join(entries)
    size = len(body) if entries_size is None else entries_size
    return struct.pack("<IHHQ", magic, 1, header_size, size).ljust(header_size, b"\0") + body


def fatbin_section(containers: list[list[bytes]]) -> bytes:
    """A ``.nv_fatbin`` section: one container per list of entries, back to back."""
    return b"".join(container(entries) for entries in containers)


def container_offsets(section: bytes) -> list[int]:
    """Where each container of a well-formed section starts (to build wrapper records)."""
    offsets, at = [], 0
    while at < len(section):
        offsets.append(at)
        _, _, header_size, size = struct.unpack_from("<IHHQ", section, at)
        at += header_size + size
    return offsets


def wrappers(addresses: list[int]) -> bytes:
    """A ``.nvFatBinSegment`` (PE: ``.nvFatBi``): one 24-byte record per container address."""
    return b"".join(struct.pack("<IIQQ", 0x466243B1, 1, address, 0) for address in addresses)


def elf64(sections: list[tuple[str, bytes]], *, elf_class: int = 2, data: int = 1,
          nobits: tuple[str, ...] = (), strip_section_table: bool = False,
          types: dict[str, int] | None = None, links: dict[str, str] | None = None) -> bytes:
    """A little-endian ELF64 shared object holding ``sections`` (plus ``.shstrtab``).

    Section data is laid out in order from byte 64, each 8-aligned; the section header table
    comes last. ``elf_class``/``data`` set the identification bytes only (1 = 32-bit / 2 =
    big-endian) to build files a reader must refuse.
    """
    names = b"\0"
    name_at = {}
    for name, _ in sections + [(".shstrtab", b"")]:
        name_at[name] = len(names)
        names += name.encode() + b"\0"
    body = bytearray(b"\0" * 64)
    placed = []  # (name, offset, size)
    for name, blob in sections + [(".shstrtab", names)]:
        body += b"\0" * (-len(body) % 8)
        placed.append((name, len(body), len(blob)))
        body += blob
    body += b"\0" * (-len(body) % 8)
    shoff = len(body)
    headers = [b"\0" * 64]  # section 0 is the null section
    index = {name: i + 1 for i, (name, _, _) in enumerate(placed)}
    for name, offset, size in placed:
        sh_type = 8 if name in nobits else 3 if name == ".shstrtab" else (types or {}).get(name, 1)
        address = 0 if name == ".shstrtab" else ELF_BASE + offset
        link = index.get((links or {}).get(name, ""), 0)
        headers.append(
            struct.pack("<IIQQQQIIQQ", name_at[name], sh_type, 2, address, offset, size, link, 0, 8, 0)
        )
    body += b"".join(headers)
    ident = b"\x7fELF" + bytes([elf_class, data, 1, 0]) + b"\0" * 8
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 0 if strip_section_table else shoff, 0, 64, 56, 0, 64,
        len(headers), len(headers) - 1,
    )
    body[:64] = header
    return bytes(body)


def with_needed(sections: list[tuple[str, bytes]], needed: list[str]) -> bytes:
    """An ELF64 holding ``sections`` plus a ``.dynamic`` section (SHT_DYNAMIC, linked to its ``.dynstr``)
    whose DT_NEEDED entries name ``needed``. Found through the section headers (``readelf -S`` shows it as
    DYNAMIC), as doctor/probes/binaries.py reads it; there is no program header, so ``readelf -d`` does not
    list it."""
    strings = b"\0"
    entries = b""
    for name in needed:
        entries += struct.pack("<qQ", 1, len(strings))  # DT_NEEDED, offset in .dynstr
        strings += name.encode() + b"\0"
    entries += struct.pack("<qQ", 0, 0)  # DT_NULL
    return elf64(
        sections + [(".dynstr", strings), (".dynamic", entries)],
        types={".dynstr": 3, ".dynamic": 6},
        links={".dynamic": ".dynstr"},
    )


def elf_address(sections: list[tuple[str, bytes]], name: str) -> int:
    """The address ``elf64`` gives section ``name`` (to point wrapper records at containers)."""
    at = 64
    for section, blob in sections:
        at += -at % 8
        if section == name:
            return ELF_BASE + at
        at += len(blob)
    raise KeyError(name)


def fatbin_elf(containers: list[list[bytes]], *, with_wrappers: bool = True) -> bytes:
    """An ELF64 holding these containers in ``.nv_fatbin`` and, by default, their wrapper records."""
    section = fatbin_section(containers)
    if not with_wrappers:
        return elf64([(".nv_fatbin", section)])
    placeholder = [(".nv_fatbin", section), (".nvFatBinSegment", wrappers([0] * len(containers)))]
    base = elf_address(placeholder, ".nv_fatbin")
    segment = wrappers([base + offset for offset in container_offsets(section)])
    return elf64([(".nv_fatbin", section), (".nvFatBinSegment", segment)])


def pe64(sections: list[tuple[bytes, bytes]]) -> bytes:
    """A minimal PE32+ DLL with these (8-byte name, data) sections, raw data 0x200-aligned.

    Only what a section reader needs is filled in: the DOS stub's e_lfanew, the COFF header, the
    optional header's magic and ImageBase, and the section table.
    """
    dos = b"MZ".ljust(0x3C, b"\0") + struct.pack("<I", 64)
    optional = struct.pack("<HBBIIIIIQ", 0x20B, 14, 0, 0, 0, 0, 0, 0x1000, PE_IMAGE_BASE).ljust(240, b"\0")
    coff = b"PE\0\0" + struct.pack("<HHIIIHH", 0x8664, len(sections), 0, 0, 0, len(optional), 0x2022)
    table_end = 64 + len(coff) + len(optional) + 40 * len(sections)
    raw_at = table_end + (-table_end % 0x200)
    table, raw = b"", b""
    for (name, blob), address in zip(sections, _pe_addresses(sections), strict=True):
        raw_size = len(blob) + (-len(blob) % 0x200)
        table += struct.pack("<8sIIIIIIHHI", name, len(blob), address - PE_IMAGE_BASE, raw_size,
                             raw_at + len(raw), 0, 0, 0, 0, 0x40000040)
        raw += blob.ljust(raw_size, b"\0")
    head = dos + coff + optional + table
    return head.ljust(raw_at, b"\0") + raw


def _pe_addresses(sections: list[tuple[bytes, bytes]]) -> list[int]:
    addresses, at = [], 0x1000
    for _, blob in sections:
        addresses.append(PE_IMAGE_BASE + at)
        at += len(blob) + (-len(blob) % 0x1000) or 0x1000
    return addresses


def pe_address(sections: list[tuple[bytes, bytes]], index: int) -> int:
    """The load address ``pe64`` gives the ``index``-th of these sections."""
    return _pe_addresses(sections)[index]


def crosscheck_elf() -> bytes:
    """The synthetic library that was checked by hand with cuobjdump (fixtures/kernels/synthetic-*).

    ``a``/``f`` appear on PTX only: cuobjdump names a cubin from its payload, which ``tiny_cubin``
    does not mark, but a PTX entry from the header flags this file sets.
    """
    return fatbin_elf([
        [cubin(75), cubin(86), ptx(50)],
        [cubin(75), cubin(86), cubin(100, HOST_LINUX_64 | EXTENDED_HEADER), ptx(100, HOST_LINUX_64 | FAMILY),
         ptx(90, HOST_LINUX_64 | ARCH_SPECIFIC)],
        [cubin(75), cubin(86)],
    ])
