"""The section headers of an ELF library, with their names (stdlib only).

The CUDA and HIP kernel readers (doctor/probes/kernels.py, hip_kernels.py) find their code by section
name; the DT_NEEDED reader (doctor/probes/binaries.py) finds the dynamic section by type. Only little-endian
ELF64 is read: every library torch ships for Linux is one. Nothing is trusted that the file does not back:
the table, the name table and a section's data must lie inside the file.
"""

from __future__ import annotations

import struct
from collections import namedtuple

SHT_NOBITS = 8  # a section that takes no room in the file (.bss)
_HEADER = struct.Struct("<IIQQQQII")  # name, type, flags, address, offset, size, link, info, ...
_HEADER_SIZE = 64  # ... then addralign and entsize, not read
_MAX_NAME_TABLE = 1 << 20  # a section name table is a few hundred bytes
_MAX_SECTIONS = 1 << 16


class ElfError(Exception):
    """The file cannot be read as a little-endian ELF64 file; the message is the one-line reason."""


class Section(namedtuple("Section", "name type address offset size link")):
    """One section header: ``name`` (decoded; "" when the name table does not hold it), ``type`` (sh_type),
    ``address`` (where it is loaded), ``offset`` and ``size`` in the file, ``link`` (sh_link)."""

    __slots__ = ()

    def problem(self, file_size: int) -> str | None:
        """Why the file does not hold this section's data, or None when it does."""
        if self.type == SHT_NOBITS:
            return f"the {self.name} section has no data in the file"
        if self.offset + self.size > file_size:
            return f"the {self.name} section runs past the end of the file (truncated?)"
        return None


def sections(read, file_size: int, named: bool = True) -> list[Section]:
    """Every section header of the ELF file of ``file_size`` bytes that ``read(offset, size)`` reads (it
    returns fewer bytes past the end). Raises ElfError when there is no readable table. ``named=False``: the
    name table is not read and every name is "", so a missing or broken one is no error (for a reader that
    finds its section by type: the loader never looks at section names)."""
    ident = bytes(read(0, 64))
    if ident[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if len(ident) < 64:
        raise ElfError("truncated ELF header")
    if ident[4] == 1:
        raise ElfError("32-bit ELF is not supported")
    if ident[4] != 2:
        raise ElfError(f"bad ELF class {ident[4]}")
    if ident[5] == 2:
        raise ElfError("big-endian ELF is not supported")
    if ident[5] != 1:
        raise ElfError(f"bad ELF data encoding {ident[5]}")
    (shoff,) = struct.unpack_from("<Q", ident, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
    if shoff == 0:
        raise ElfError("no section header table (stripped?)")
    if shentsize < _HEADER_SIZE:
        raise ElfError(f"bad ELF section header size {shentsize}")
    if shnum == 0 or shstrndx == 0xFFFF:  # past 0xff00 sections: the real values are in section 0
        first = bytes(read(shoff, _HEADER_SIZE))
        if len(first) < _HEADER_SIZE:
            raise ElfError("ELF section header table runs past the end of the file (truncated?)")
        _, _, _, _, _, size0, link0, _ = _HEADER.unpack_from(first)
        shnum = shnum or size0
        shstrndx = link0 if shstrndx == 0xFFFF else shstrndx
    if shnum > _MAX_SECTIONS or shoff + shnum * shentsize > file_size:
        raise ElfError("ELF section header table runs past the end of the file (truncated?)")
    if named and (shstrndx == 0 or shstrndx >= shnum):  # 0: no name table, so no section can be found by name
        raise ElfError(f"bad ELF section name table index {shstrndx}")
    table = bytes(read(shoff, shnum * shentsize))
    if len(table) < shnum * shentsize:  # the file shrank since its size was taken
        raise ElfError("ELF section header table runs past the end of the file (truncated?)")
    headers = [_HEADER.unpack_from(table, i * shentsize) for i in range(shnum)]
    if not named:
        return [Section("", sh_type, address, offset, size, link)
                for _, sh_type, _, address, offset, size, link, _ in headers]
    _, _, _, _, names_off, names_size, _, _ = headers[shstrndx]
    if names_size > _MAX_NAME_TABLE or names_off + names_size > file_size:
        raise ElfError("bad ELF section name table")
    names = bytes(read(names_off, names_size))
    found = []
    for name_at, sh_type, _flags, address, offset, size, link, _info in headers:
        name_end = names.find(b"\0", name_at)
        name = names[name_at:name_end] if 0 <= name_at < name_end else b""
        found.append(Section(name.decode("utf-8", "replace"), sh_type, address, offset, size, link))
    return found


def first_named(found: list[Section], name: str, file_size: int) -> Section | None:
    """The first section called ``name``; None when there is none. Raises ElfError when the file does not
    hold its data."""
    for section in found:
        if section.name == name:
            why = section.problem(file_size)
            if why:
                raise ElfError(why)
            return section
    return None
