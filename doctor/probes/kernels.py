"""Which GPU code an installed torch build really contains, read from its binary (stdlib only).

``torch.cuda.get_arch_list()`` needs torch imported; this reads the same answer straight from
``torch/lib/libtorch_cuda.so`` (``torch_cuda.dll`` on Windows, torchvision's ``_C.so``/``_C.pyd``)
without importing anything.

The format, as measured on real files (torch 2.14.1 cu130, torchvision 0.20.1 cu124,
bitsandbytes 0.45.0 for Windows) and on fatbins built with CUDA 13.0's ``fatbinary``:

* The code sits in the ELF section ``.nv_fatbin`` (PE: ``.nv_fatb``, the name cut to 8 bytes):
  a run of fatbin *containers*, one per compiled source file. A container is a 16-byte header
  (u32 magic ``0xBA55ED50``, u16 version, u16 header size, u64 size of the entries that follow),
  then its entries. An entry header starts u16 kind (1 = PTX, 2 = ELF cubin), u16 version, u32
  header size, u64 payload size; the SM number (major*10+minor) is the u32 at byte 28 and a u64
  of flags is at byte 40. Headers are 64 to 112 bytes; the payload follows.
* Flag ``0x100000`` marks an arch-specific target (``sm_90a``) and ``0x200000`` a family target
  (``sm_103f``). ``cuobjdump --list-elf`` prints the ``a`` but drops the ``f`` of a cubin
  (it lists an ``sm_103f`` cubin as ``sm_103``); ``--list-ptx`` keeps both. We keep both.
* Flags ``0x2000`` (LZ4-style) and ``0x8000`` (zstd, every cubin of the cu130 wheel) mark a
  compressed payload; the payload size field is the stored size, so skipping works the same.
* ``.nvFatBinSegment`` (PE: ``.nvFatBi``) holds one 24-byte wrapper per container (u32 magic
  ``0x466243b1``, u32 version, u64 address of the container, u64). The linker fills the addresses
  in, so they give every container's offset at once. We use them only when they tile the section
  exactly (first at 0, each container ending where the next begins, the last at the end);
  otherwise we walk the containers one after another. Both ways give the same counts.

Reading: only headers are read (``os.pread`` of a few bytes; seek+read where there is no pread), payloads are
skipped by their size, so a library of hundreds of MB costs a few thousand small reads. Read one after
another, each would wait for the disk on a cold page cache, so we walk the containers breadth-first from the
wrapper offsets, and once reads have had to wait for the disk we announce the rest of that round's pages with
``posix_fadvise(WILLNEED)``: they arrive in parallel. From then on each header's page is announced as soon as
its offset is known, so the disk works while the round is parsed (on a warm cache no advice is given). pread
rather than mmap: a file that shrinks while we read it (pip replacing torch) gives a short read, not a SIGBUS,
and mmap's page faults were no faster here.

Which targets count as "the build supports sm_X" (``Kernels.sm``)? In torch 2.14.1 cu130 every
one of the 475 containers holds cubins for sm_75, sm_80, sm_86, sm_90, sm_100 and sm_120: exactly
the ``-gencode`` flags the library records as a string, and what ``get_arch_list()`` says. All
other targets sit in a few containers: sm_100a and sm_103f in 59 (12%), sm_90a in 4, sm_89,
sm_120a and sm_121a in 1 (kernels built for extra targets one by one). Its
libtorch_cuda_linalg.so (MAGMA) holds sm_80 to sm_120 in all 65 containers but no sm_75.
The split is stark, so the rule is: a target held by at least half of the
containers that hold any cubin or PTX is the build's (``sm`` / ``ptx``); one held by fewer is
``partial``: a GPU that only matches a partial target runs a handful of kernels and fails the rest.
Half rather than all, so that a build where some sources were compiled for a narrower list (an
extension that needs sm_80+) still reports its real arch list; the per-target counts
(``Kernels.counts``) stay available for anything finer.
"""

from __future__ import annotations

import os
import re
import stat
import struct
import time
from collections import Counter, namedtuple

from doctor.probes import elf

STATUS_OK = "ok"
STATUS_NO_GPU_CODE = "no-gpu-code"  # a real finding: a CPU-only library
STATUS_UNKNOWN = "unknown"

_MAGIC = 0xBA55ED50
_CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
_ENTRY = struct.Struct("<HHIQ12xI8xQ")  # kind, version, header size, payload size, sm @28, flags @40
_KIND_PTX = 1
_KIND_CUBIN = 2
_FLAG_ARCH_SPECIFIC = 0x100000  # sm_90a
_FLAG_FAMILY = 0x200000  # sm_100f
_WRAPPER = struct.Struct("<IIQQ")  # magic, version, container address, (unused)
_WRAPPER_MAGIC = 0x466243B1
_MAX_WRAPPER_BYTES = 1 << 20  # 43690 containers; torch has 475. Larger: walk instead of trusting it

_TARGET_RE = re.compile(r"^(sm|compute)_(\d+)([af]?)$")


class _Unknown(Exception):
    """Internal: the input cannot be read; the message is the one-line reason."""


# Value classes as plain named tuples: immutable, compared and hashed as tuples.
class FatbinScan(namedtuple("FatbinScan", "containers with_code counts why", defaults=(0, 0, (), None))):
    """What one ``.nv_fatbin`` section holds, from its headers alone (``parse_fatbin``): ``containers``
    walked; ``with_code``, those holding at least one cubin or PTX entry; ``counts``, (target, containers
    holding it) sorted by target; ``why``, set when the section is corrupt (the other fields then mean
    nothing)."""

    __slots__ = ()


class Kernels(namedtuple("Kernels", "status why path sm ptx partial containers counts seconds",
                         defaults=((), (), (), 0, (), 0.0))):
    """The GPU code of one library file (``read_kernels``): ``status`` (STATUS_OK, STATUS_NO_GPU_CODE or
    STATUS_UNKNOWN), ``why`` (None when ok, else one line: "not an ELF or PE file", ...), ``path``; ``sm``,
    the cubin targets held by at least half of the containers, sorted; ``ptx``, the PTX targets ("compute_50")
    by the same rule; ``partial``, the targets held by fewer (a handful of kernels only); ``containers``;
    ``counts``, every target with the number of containers holding it; ``seconds``."""

    __slots__ = ()


# --- the pure parser ----------------------------------------------------------------------------


def parse_fatbin(data) -> FatbinScan:
    """Summarise a ``.nv_fatbin`` section given as bytes, bytearray, memoryview or mmap.

    Never raises and runs in time linear in ``len(data)``: every step moves forward by at least
    16 bytes, and every size is checked against what is left before it is followed.
    """
    try:
        view = memoryview(data).cast("B")
    except TypeError as exc:
        return FatbinScan(why=f"not a byte buffer: {exc}")
    return _scan(_BufferReader(view), len(view), None)


def split_coverage(counts, with_code: int) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(sm, ptx, partial)`` from per-target container counts, by the half rule (module doc)."""
    full_sm, full_ptx, partial = [], [], []
    for target, held in counts:
        if with_code and 2 * held >= with_code:
            (full_ptx if target.startswith("compute_") else full_sm).append(target)
        else:
            partial.append(target)
    return tuple(sorted(full_sm, key=_target_key)), tuple(sorted(full_ptx, key=_target_key)), tuple(
        sorted(partial, key=_target_key))


def _target(kind: int, sm: int, flags: int) -> str | None:
    if kind not in (_KIND_PTX, _KIND_CUBIN):
        return None  # other kinds (NVVM/LTO IR) are neither runnable nor JIT-able by the driver alone
    suffix = "a" if flags & _FLAG_ARCH_SPECIFIC else "f" if flags & _FLAG_FAMILY else ""
    return f"{'sm' if kind == _KIND_CUBIN else 'compute'}_{sm}{suffix}"


def _target_key(target: str):
    m = _TARGET_RE.match(target)
    if not m:
        return (2, 0, target)
    return (0 if m.group(1) == "sm" else 1, int(m.group(2)), m.group(3))


class _BufferReader:
    def __init__(self, view: memoryview):
        self._view = view

    def read(self, offset: int, size: int):
        return self._view[offset : offset + size]

    def read_many(self, offsets: list[int], size: int, announced: bool = False) -> list:
        view = self._view
        return [view[offset : offset + size] for offset in offsets]

    def advisor(self):
        return None  # in memory already


_DISK_WAIT = 50e-6  # a read from the page cache takes ~2 us, one from the disk ~100 us
_COLD_AFTER = 3  # the first group's size: a cold start shows after a few reads
_TIMED_GROUP = 8  # warm reads are timed in groups: two clock calls per read cost ~15% of a warm scan


class _FileReader:
    """Bounded reads of the ``size`` bytes of an open file that start at ``base``."""

    def __init__(self, fd: int, base: int, size: int):
        self._fd, self._base, self._size = fd, base, size
        self._cold = False

    def read(self, offset: int, size: int) -> bytes:
        size = min(size, self._size - offset)
        if size <= 0 or offset < 0:
            return b""
        if hasattr(os, "pread"):
            return os.pread(self._fd, size, self._base + offset)
        os.lseek(self._fd, self._base + offset, os.SEEK_SET)  # Windows has no pread
        return os.read(self._fd, size)

    def read_many(self, offsets: list[int], size: int, announced: bool = False) -> list[bytes]:
        """``size`` bytes at each (non-negative) offset, fewer near the end.

        Reading headers one after another costs a disk round-trip each on a cold page cache. So as
        soon as two groups of reads in a row took a disk wait per read, the kernel is asked for all
        the remaining pages at once (posix_fadvise WILLNEED): they arrive in parallel, and the reads
        that follow wait for about one round-trip in all. From then on every batch is announced
        before it is read. A warm cache never pays for the extra system calls.
        """
        if not hasattr(os, "pread"):
            return [self.read(offset, size) for offset in offsets]
        if self._cold:
            if not announced:
                self._prefetch(offsets, size)
            return [self.read(offset, size) for offset in offsets]
        pread, fd, base, limit, clock = os.pread, self._fd, self._base, self._size, time.perf_counter
        heads: list[bytes] = []
        start, step, slow = 0, _COLD_AFTER, 0
        while start < len(offsets):
            began = clock()
            for offset in offsets[start : start + step]:
                heads.append(
                    pread(fd, size if offset + size <= limit else max(0, limit - offset), base + offset)
                )
            start += step
            # Two slow groups in a row: one alone may just be this process losing the CPU.
            slow = slow + 1 if clock() - began > step * _DISK_WAIT else 0
            if slow == 2 and start < len(offsets):
                rest = offsets[start:]
                self._cold = True
                self._prefetch(rest, size)
                heads.extend(self.read(offset, size) for offset in rest)
                break
            step = _TIMED_GROUP
        return heads

    def advisor(self):
        """Once the cache has shown cold, ``announce(offset, size)``: one header's page asked for as soon as
        its offset is known, the disk working while the round is parsed. None while warm (no extra system
        calls)."""
        if not self._cold or not hasattr(os, "posix_fadvise"):
            return None
        fd, base, advise, willneed = self._fd, self._base, os.posix_fadvise, os.POSIX_FADV_WILLNEED

        def announce(offset: int, size: int) -> None:
            try:
                advise(fd, base + offset, size, willneed)
            except OSError:
                pass

        return announce

    def _prefetch(self, offsets: list[int], size: int) -> None:
        if not hasattr(os, "posix_fadvise"):
            return
        fd, base, advise, willneed = self._fd, self._base, os.posix_fadvise, os.POSIX_FADV_WILLNEED
        try:
            for offset in offsets:
                advise(fd, base + offset, size, willneed)
        except OSError:
            pass


_BATCH = 4096  # containers walked together: bounds memory on a corrupt section of tiny containers


def _scan(reader, size: int, hints) -> FatbinScan:
    counts: Counter[str] = Counter()
    containers = with_code = 0
    try:
        ranges = _containers_from_hints(reader, size, hints) if hints else None
        for batch in [ranges] if ranges is not None else _chained(reader, size):
            for targets in _walk_entries(reader, batch):
                containers += 1
                with_code += bool(targets)
                counts.update(targets)
    except _Unknown as exc:
        return FatbinScan(why=str(exc))
    ordered = tuple(sorted(counts.items(), key=lambda item: _target_key(item[0])))
    return FatbinScan(containers=containers, with_code=with_code, counts=ordered)


# A container's header is read together with its first entry's: one read instead of two.
_CONTAINER_READ = _CONTAINER.size + _ENTRY.size


def _read_container(reader, offset: int, size: int) -> tuple[int, int, bytes | None]:
    return _parse_container(reader.read(offset, _CONTAINER_READ), offset, size)


def _parse_container(head, offset: int, size: int) -> tuple[int, int, bytes | None]:
    """``(first entry, end, the first entry's header if it was read along)`` of a container."""
    if len(head) < _CONTAINER.size:
        raise _Unknown(f"fatbin container header at offset {offset} is cut short (truncated?)")
    magic, _version, header_size, entries_size = _CONTAINER.unpack_from(head)
    if magic != _MAGIC:
        raise _Unknown(f"bad fatbin magic {magic:#010x} at offset {offset}")
    if header_size < _CONTAINER.size:
        raise _Unknown(f"fatbin container at offset {offset} has a {header_size}-byte header")
    end = offset + header_size + entries_size
    if end > size:
        raise _Unknown(f"fatbin container at offset {offset} runs past the end of the section (truncated?)")
    first = head[header_size:] if len(head) >= header_size + _ENTRY.size else None
    return offset + header_size, end, first


def _chained(reader, size: int):
    """Batches of containers' entry ranges, each container found at the end of the one before."""
    batch: list[tuple[int, int, bytes | None]] = []
    offset = _skip_zeros(reader, 0, size)
    while offset < size:
        entry, end, first = _read_container(reader, offset, size)
        batch.append((entry, end, first))
        if len(batch) == _BATCH:
            yield batch
            batch = []
        offset = _skip_zeros(reader, end, size)
    yield batch


def _skip_zeros(reader, offset: int, size: int) -> int:
    """The first non-zero byte at or after ``offset`` (a linker may pad between containers)."""
    while offset < size:
        chunk = bytes(reader.read(offset, 64))
        if not chunk:
            return size
        stripped = len(chunk) - len(chunk.lstrip(b"\0"))
        offset += stripped
        if stripped < len(chunk):
            return offset
    return offset


def _containers_from_hints(reader, size: int, hints) -> list[tuple[int, int, bytes | None]] | None:
    """The containers' entry ranges when the wrapper offsets tile the section exactly, else None."""
    starts = sorted({h for h in hints if 0 <= h < size})
    if not starts or starts[0] != 0:
        return None
    ranges = []
    for i, (start, head) in enumerate(zip(starts, reader.read_many(starts, _CONTAINER_READ), strict=True)):
        try:
            entry, end, first = _parse_container(head, start, size)
        except _Unknown:
            return None  # the chained walk will say what is wrong
        if end != (starts[i + 1] if i + 1 < len(starts) else size):
            return None
        ranges.append((entry, end, first))
    return ranges


def _walk_entries(reader, ranges: list[tuple[int, int, bytes | None]]) -> list[set[str]]:
    """The targets each container holds, reading the n-th entry of every container in round n."""
    unpack, entry_size = _ENTRY.unpack_from, _ENTRY.size
    names: dict[tuple[int, int, int], str | None] = {}
    held: list[set[str]] = [set() for _ in ranges]
    cursors = [(i, entry, end) for i, (entry, end, _) in enumerate(ranges) if entry < end]
    firsts = [first for entry, end, first in ranges if entry < end]
    heads = firsts if all(first is not None for first in firsts) else None
    announced = False
    while cursors:
        if heads is None:
            heads = reader.read_many([entry for _, entry, _ in cursors], entry_size, announced)
        advise = reader.advisor()
        following = []
        for (i, entry, end), head in zip(cursors, heads, strict=True):
            if len(head) < entry_size or entry + entry_size > end:
                raise _Unknown(f"fatbin entry header at offset {entry} is cut short")
            kind, _version, header_size, payload_size, sm, flags = unpack(head)
            if header_size < entry_size:
                raise _Unknown(f"fatbin entry at offset {entry} has a {header_size}-byte header")
            after = entry + header_size + payload_size
            if after > end:
                raise _Unknown(f"fatbin entry at offset {entry} runs past the end of its container")
            key = (kind, sm, flags & (_FLAG_ARCH_SPECIFIC | _FLAG_FAMILY))
            if key not in names:
                names[key] = _target(kind, sm, flags)
            if names[key]:
                held[i].add(names[key])
            if after < end:
                following.append((i, after, end))
                if advise is not None:
                    advise(after, entry_size)
        cursors, heads, announced = following, None, advise is not None
    return held


# --- finding the section in an ELF or PE file ---------------------------------------------------


# offset in the file, size, and the address it is loaded at (what the wrapper pointers point at)
_Section = namedtuple("_Section", "offset size address")


def _locate(reader, file_size: int) -> tuple[str, _Section | None, _Section | None]:
    """``(section name, .nv_fatbin or None when absent, wrapper section or None)``."""
    if file_size == 0:
        raise _Unknown("empty file")
    magic = bytes(reader.read(0, 4))
    if magic == b"\x7fELF":
        return (".nv_fatbin", *_locate_elf(reader, file_size))
    if magic[:2] == b"MZ":
        return (".nv_fatb", *_locate_pe(reader, file_size))
    raise _Unknown("not an ELF or PE file")


def _locate_elf(reader, file_size: int) -> tuple[_Section | None, _Section | None]:
    try:
        found = elf.sections(reader.read, file_size)
        fatbin = elf.first_named(found, ".nv_fatbin", file_size)
    except elf.ElfError as exc:
        raise _Unknown(str(exc)) from None
    # The wrapper records only help: one the file does not hold is passed over (the last good one is used).
    segment = None
    for section in found:
        if section.name == ".nvFatBinSegment" and section.problem(file_size) is None:
            segment = section
    return (None if fatbin is None else _Section(fatbin.offset, fatbin.size, fatbin.address),
            None if segment is None else _Section(segment.offset, segment.size, segment.address))


def _locate_pe(reader, file_size: int) -> tuple[_Section | None, _Section | None]:
    dos = bytes(reader.read(0, 64))
    if len(dos) < 64:
        raise _Unknown("truncated PE header")
    (pe_at,) = struct.unpack_from("<I", dos, 0x3C)
    coff = bytes(reader.read(pe_at, 24 + 112))
    if len(coff) < 24 + 2 or coff[:4] != b"PE\0\0":
        raise _Unknown("not an ELF or PE file (MZ without a PE header)")
    _machine, nsections, _, _, _, optional_size, _ = struct.unpack_from("<HHIIIHH", coff, 4)
    (opt_magic,) = struct.unpack_from("<H", coff, 24)
    if opt_magic == 0x20B and len(coff) >= 24 + 32:
        (image_base,) = struct.unpack_from("<Q", coff, 24 + 24)
    elif opt_magic == 0x10B and len(coff) >= 24 + 32:
        (image_base,) = struct.unpack_from("<I", coff, 24 + 28)
    else:
        raise _Unknown("bad PE optional header")
    table_at = pe_at + 24 + optional_size
    table = bytes(reader.read(table_at, 40 * nsections))
    if len(table) < 40 * nsections:
        raise _Unknown("PE section table runs past the end of the file (truncated?)")
    fatbin = segment = None
    for i in range(nsections):
        name, virtual_size, virtual_address, raw_size, raw_at = struct.unpack_from("<8sIIII", table, 40 * i)
        # The raw data is padded to the file alignment; the virtual size is the real one.
        size = min(virtual_size, raw_size) if virtual_size else raw_size
        found = _Section(raw_at, size, image_base + virtual_address)
        if name == b".nv_fatb" and fatbin is None:
            if raw_at + size > file_size:
                raise _Unknown("the .nv_fatb section runs past the end of the file (truncated?)")
            fatbin = found
        elif name == b".nvFatBi" and raw_at + size <= file_size:
            segment = found
    return fatbin, segment


def _wrapper_offsets(fd: int, fatbin: _Section, segment: _Section | None) -> list[int] | None:
    """Container offsets inside ``fatbin`` that the linker recorded in the wrapper section."""
    if segment is None or segment.size > _MAX_WRAPPER_BYTES:
        return None
    raw = bytes(_FileReader(fd, segment.offset, segment.size).read(0, segment.size))
    offsets = []
    for i in range(len(raw) // _WRAPPER.size):
        magic, _version, address, _ = _WRAPPER.unpack_from(raw, i * _WRAPPER.size)
        if magic == _WRAPPER_MAGIC:
            offsets.append(address - fatbin.address)  # wrappers of relocatable code point elsewhere
    return offsets


# --- the probe ----------------------------------------------------------------------------------


def read_kernels(path) -> Kernels:
    """The GPU targets compiled into the ELF or PE library at ``path``. Never raises.

    Regular files only: a FIFO, device, socket or directory is refused before it is opened, and
    again on the opened descriptor (opened non-blocking, so that a FIFO swapped in cannot hang us).
    """
    began = time.perf_counter()
    try:
        path = os.fspath(path)
    except TypeError:
        return _unknown(str(path), began, f"not a path: {type(path).__name__}")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        # Opening a device can have effects (a tape rewinds): refuse what is not a file before.
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            return _unknown(path, began, f"not a regular file ({_file_kind(mode)})")
        fd = os.open(path, flags)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        return _unknown(path, began, f"cannot open: {getattr(exc, 'strerror', None) or exc}")
    try:
        return _read_open(fd, path, began)
    except _Unknown as exc:
        return _unknown(path, began, str(exc))
    except OSError as exc:
        return _unknown(path, began, f"read failed: {exc.strerror or exc}")
    except struct.error:  # a read came back short: the file shrank while we read it
        return _unknown(path, began, "the file changed while it was read")
    finally:
        os.close(fd)


def _read_open(fd: int, path: str, began: float) -> Kernels:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # swapped for something else since os.stat
        raise _Unknown(f"not a regular file ({_file_kind(info.st_mode)})")
    file_size = info.st_size
    whole = _FileReader(fd, 0, file_size)
    name, fatbin, segment = _locate(whole, file_size)
    if fatbin is None:
        return _done(path, began, STATUS_NO_GPU_CODE, f"no GPU code ({name} absent)")
    if fatbin.size == 0:
        return _done(path, began, STATUS_NO_GPU_CODE, f"no GPU code ({name} is empty)")
    scan = _scan(
        _FileReader(fd, fatbin.offset, fatbin.size), fatbin.size, _wrapper_offsets(fd, fatbin, segment)
    )
    return kernels_from_scan(scan, path, began)


def kernels_from_scan(scan: FatbinScan, path: str = "", began: float | None = None) -> Kernels:
    """The result for a parsed section (``parse_fatbin``), with the coverage rule applied."""
    if scan.why:
        return _done(path, began, STATUS_UNKNOWN, scan.why)
    if scan.with_code == 0:
        if scan.containers == 1:
            why = "1 fatbin container but no cubin or PTX in it"
        elif scan.containers:
            why = f"{scan.containers} fatbin containers but no cubin or PTX in them"
        else:
            why = "no fatbin container in the GPU code section"
        return _done(path, began, STATUS_UNKNOWN, why, containers=scan.containers, counts=scan.counts)
    sm, ptx, partial = split_coverage(scan.counts, scan.with_code)
    return _done(path, began, STATUS_OK, None, sm=sm, ptx=ptx, partial=partial,
                 containers=scan.containers, counts=scan.counts)


def _done(path: str, began: float | None, status: str, why: str | None, **fields) -> Kernels:
    seconds = time.perf_counter() - began if began is not None else 0.0
    return Kernels(status=status, why=why, path=path, seconds=round(seconds, 6), **fields)


def _unknown(path: str, began: float, why: str) -> Kernels:
    return _done(path, began, STATUS_UNKNOWN, why)


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return "not a plain file"
