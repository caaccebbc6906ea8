"""Which GPU targets an installed ROCm torch build really holds, read from ``libtorch_hip.so`` (stdlib only).

``torch.cuda.get_arch_list()`` needs torch imported; the answer is also in the library's ELF section
``.hip_fatbin``, which the HIP runtime reads at load time: a run of *clang offload bundles*, one per compiled
source file, each padded with zeros to the next 4096-byte boundary. An uncompressed bundle (clang's
OffloadBundler.cpp, and ROCm's ``roc-obj-ls``, which walks the section the same way) is

* the 24 bytes ``__CLANG_OFFLOAD_BUNDLE__``, then a u64 count of entries;
* per entry: u64 offset (from the bundle's start), u64 size, u64 length of the entry ID, the ID itself:
  ``hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`` (older: ``hip-amdgcn-amd-amdhsa-gfx906``), and one empty
  ``host-x86_64-unknown-linux`` entry;
* then the code objects, at their offsets.

``--offload-compress`` (every torch ROCm build since pytorch/pytorch#143986) stores each bundle compressed
instead (llvm/lib/Object/OffloadBundle.cpp, ``CompressedOffloadBundle``): ``CCOB``, u16 format version, u16
method (0 zlib, 1 zstd), then format 1: u32 uncompressed size, u64 hash; format 2: u32 total size, u32
uncompressed size, u64 hash; format 3: u64 total size, u64 uncompressed size, u64 hash; then the compressed
bytes of an uncompressed bundle. Its entry IDs sit at the start of that bundle, so only a prefix is
decompressed: zlib with the standard library, zstd only where Python has ``compression.zstd`` (3.14+).
Elsewhere a zstd bundle is counted as unread and said so: its targets are unknown, not absent.

Only bundle headers are read (``os.pread``), code objects are skipped by their sizes. Which targets count as
the build's uses the rule of the CUDA reader (doctor/probes/kernels.py): a target held by at least half of
the bundles that hold code; one held by fewer is ``partial``.
"""

from __future__ import annotations

import os
import re
import stat
import struct
import time
import zlib
from collections import Counter, namedtuple

from doctor.model.amd import HipKernels
from doctor.model.files import kind_of
from doctor.probes import elf

SECTION = b".hip_fatbin"
MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_MAGIC = b"CCOB"
METHODS = {0: "zlib", 1: "zstd"}
_CCOB_HEADERS = {1: 20, 2: 24, 3: 32}  # format version -> header size
_CHUNK = 4096  # bundles start on 4096-byte boundaries: one read finds the end of the padding, one a header
_MAX_ENTRIES = 4096  # a bundle holds one entry per target and the host's: a few dozen at most
_MAX_ID = 4096
_PREFIX_IN = 1 << 20  # compressed bytes read to reach a compressed bundle's header
_PREFIX_OUT = 1 << 16  # decompressed bytes kept: the header of a bundle of hundreds of targets
_TARGET_RE = re.compile(r"(gfx[0-9a-f]+(?::[A-Za-z0-9_]+[+-])*)$")
_PROCESSOR_RE = re.compile(r"^gfx(\d+)([0-9a-f])([0-9a-f])$")


class _Unknown(Exception):
    """Internal: the input cannot be read; the message is the one-line reason."""


class HipScan(namedtuple("HipScan", "bundles with_code counts compressed unread methods why",
                         defaults=(0, 0, (), 0, 0, (), None))):
    """What one ``.hip_fatbin`` section holds (``parse_hip_fatbin``): ``bundles`` walked; ``with_code``, those
    whose targets are known and not empty; ``counts``, (target ID, bundles holding it) sorted by target;
    ``compressed`` bundles, of which ``unread`` could not be decompressed; ``methods`` met ("zlib", "zstd");
    ``why``, set when the section is corrupt or was not read to its end."""

    __slots__ = ()


def target_of(entry_id: str) -> str | None:
    """The target ID of a bundle entry ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-" -> "gfx90a:xnack-");
    None for the host's entry and anything that names no AMD GPU."""
    if "amdgcn" not in entry_id:
        return None
    m = _TARGET_RE.search(entry_id)
    return m.group(1) if m else None


def processor_of(target: str) -> str:
    """"gfx90a:xnack-" -> "gfx90a"."""
    return target.split(":", 1)[0]


def target_key(target: str):
    """Sort key: by processor number (gfx803 < gfx90a < gfx1030), then features."""
    m = _PROCESSOR_RE.match(processor_of(target))
    if not m:
        return (1, (0, 0, 0), target)
    return (0, (int(m.group(1)), int(m.group(2), 16), int(m.group(3), 16)), target)


# --- the pure parser ------------------------------------------------------------------------------


def parse_hip_fatbin(data) -> HipScan:
    """Summarise a ``.hip_fatbin`` section given as bytes, bytearray or memoryview. Never raises."""
    try:
        view = memoryview(data).cast("B")
    except TypeError as exc:
        return HipScan(why=f"not a byte buffer: {exc}")
    return _scan(lambda offset, size: bytes(view[offset : offset + size]), len(view), None)


def parse_bundle_ids(head: bytes, size: int | None = None) -> list[tuple[int, int, str]]:
    """(offset, size, entry ID) of each entry of the uncompressed bundle whose first bytes are ``head`` (of
    ``size`` bytes in all, when known: its code objects must fit); raises ValueError when ``head`` is not one
    and _Unknown when its header is cut short or does not fit."""
    if not head.startswith(MAGIC):
        raise ValueError("not a clang offload bundle")
    entries, _ = _entries(lambda offset, length: head[offset : offset + length], 0, size)
    return entries


def _scan(read, size: int, deadline: float | None) -> HipScan:
    counts: Counter[str] = Counter()
    bundles = with_code = compressed = unread = 0
    methods: set[str] = set()
    why = None
    try:
        offset, head = _skip_zeros(read, 0, size)
        while offset < size:
            if deadline is not None and time.perf_counter() > deadline:
                raise _Unknown(f"stopped after {bundles} bundles: reading took longer than its time limit")
            if len(head) < 64:
                head = read(offset, _CHUNK)
            if head.startswith(MAGIC):
                entries, header_end = _entries(_Cached(read, offset, head), offset, size)
                targets = {t for t in (target_of(entry_id) for _, _, entry_id in entries) if t}
                end = max([header_end] + [offset + at + length for at, length, _ in entries])
            elif head.startswith(COMPRESSED_MAGIC):
                compressed += 1
                version, method, total, header_size, uncompressed = _compressed_header(head, offset, size)
                methods.add(METHODS[method])
                targets = _compressed_targets(read, offset, header_size, total, method, uncompressed)
                if targets is None:
                    unread += 1
                if total is None:  # format 1 says nothing of where the next bundle starts
                    bundles += 1
                    with_code += bool(targets)
                    counts.update(targets or ())
                    why = (f"compressed bundle format {version} at offset {offset} has no size: "
                           "the rest was not read")
                    break
                end = offset + total
            else:
                raise _Unknown(f"no offload bundle at offset {offset} (it starts {head[:8]!r})")
            bundles += 1
            with_code += bool(targets)
            counts.update(targets or ())
            offset, head = _skip_zeros(read, end, size)
    except _Unknown as exc:
        return HipScan(bundles=bundles, why=str(exc))
    ordered = tuple(sorted(counts.items(), key=lambda item: target_key(item[0])))
    return HipScan(bundles, with_code, ordered, compressed, unread, tuple(sorted(methods)), why)


def _entries(read, start: int, size: int | None) -> tuple[list[tuple[int, int, str]], int]:
    """The entries of the uncompressed bundle at ``start`` and where its header ends (``size``: where the
    section ends, None when not known)."""
    head = read(start, 32)
    if len(head) < 32:
        raise _Unknown(f"offload bundle header at offset {start} is cut short")
    (count,) = struct.unpack_from("<Q", head, 24)
    if count > _MAX_ENTRIES:
        raise _Unknown(f"offload bundle at offset {start} claims {count} entries")
    at, entries = start + 32, []
    for _ in range(count):
        fixed = read(at, 24)
        if len(fixed) < 24:
            raise _Unknown(f"offload bundle entry at offset {at} is cut short")
        entry_at, length, id_size = struct.unpack("<QQQ", fixed)
        if id_size > _MAX_ID:
            raise _Unknown(f"offload bundle entry at offset {at} has a {id_size}-byte ID")
        raw = read(at + 24, id_size)
        if len(raw) < id_size:
            raise _Unknown(f"offload bundle entry ID at offset {at + 24} is cut short")
        if size is not None and start + entry_at + length > size:
            raise _Unknown(f"code object of the bundle at offset {start} runs past the end of the section")
        entries.append((entry_at, length, raw.decode("utf-8", "replace")))
        at += 24 + id_size
    return entries, at


def _compressed_header(head: bytes, offset: int, size: int) -> tuple[int, int, int | None, int, int]:
    """(format version, method, total size or None for format 1, header size, uncompressed size) of a CCOB
    bundle."""
    if len(head) < 8:
        raise _Unknown(f"compressed bundle header at offset {offset} is cut short")
    version, method = struct.unpack_from("<HH", head, 4)
    header_size = _CCOB_HEADERS.get(version)
    if header_size is None:
        raise _Unknown(f"compressed bundle at offset {offset} has format {version}, which is not known here")
    if method not in METHODS:
        raise _Unknown(f"compressed bundle at offset {offset} names compression method {method}")
    if len(head) < header_size:
        raise _Unknown(f"compressed bundle header at offset {offset} is cut short")
    total = None
    if version == 1:
        (uncompressed,) = struct.unpack_from("<I", head, 8)
    elif version == 2:
        total, uncompressed = struct.unpack_from("<II", head, 8)
    else:
        total, uncompressed = struct.unpack_from("<QQ", head, 8)
    if total is not None and (total < header_size or offset + total > size):
        raise _Unknown(f"compressed bundle at offset {offset} runs past the end of the section")
    return version, method, total, header_size, uncompressed


def _compressed_targets(read, offset: int, header_size: int, total: int | None, method: int,
                        uncompressed: int) -> set[str] | None:
    """The targets of a compressed bundle, from a decompressed prefix; None when it cannot be decompressed
    here."""
    decompress = _decompressor(method)
    if decompress is None:
        return None
    stored = _PREFIX_IN if total is None else min(_PREFIX_IN, total - header_size)
    try:
        prefix = decompress(read(offset + header_size, stored))
    except Exception as exc:  # noqa: BLE001 - zlib.error, zstd's errors: the data is not what it claims
        raise _Unknown(f"compressed bundle at offset {offset} does not decompress: {exc}") from None
    try:
        entries = parse_bundle_ids(prefix, uncompressed)
    except (ValueError, _Unknown) as exc:
        raise _Unknown(f"compressed bundle at offset {offset} holds no readable header: {exc}") from None
    return {t for t in (target_of(entry_id) for _, _, entry_id in entries) if t}


def _decompressor(method: int):
    """A function giving at most _PREFIX_OUT decompressed bytes of a stream's start, or None."""
    if method == 0:
        return lambda data: zlib.decompressobj().decompress(data, _PREFIX_OUT)
    try:
        from compression import zstd  # Python 3.14+
    except ImportError:
        return None
    return lambda data: zstd.ZstdDecompressor().decompress(data, max_length=_PREFIX_OUT)


def _skip_zeros(read, offset: int, size: int) -> tuple[int, bytes]:
    """The first non-zero byte at or after ``offset`` (the padding between bundles), and the bytes read from
    there on (the start of the next bundle's header, read along)."""
    while offset < size:
        chunk = read(offset, _CHUNK)
        if not chunk:
            return size, b""
        rest = chunk.lstrip(b"\0")
        offset += len(chunk) - len(rest)
        if rest:
            return offset, rest
    return offset, b""


class _Cached:
    """Reads of one bundle's header, served from the bytes already read where they reach."""

    def __init__(self, read, start: int, head: bytes):
        self._read, self._start, self._head = read, start, head

    def __call__(self, offset: int, size: int) -> bytes:
        at = offset - self._start
        if 0 <= at and at + size <= len(self._head):
            return self._head[at : at + size]
        return self._read(offset, size)


def split_coverage(counts, with_code: int) -> tuple[list[str], list[str]]:
    """(targets, partial) by the half rule (module doc)."""
    full, partial = [], []
    for target, held in counts:
        (full if with_code and 2 * held >= with_code else partial).append(target)
    return sorted(full, key=target_key), sorted(partial, key=target_key)


def kernels_from_scan(scan: HipScan, path: str = "", began: float | None = None) -> HipKernels:
    """The result for a parsed section, with the coverage rule applied."""
    seconds = round(time.perf_counter() - began, 6) if began is not None else None
    common = {"path": path, "bundles": scan.bundles, "compressed": scan.compressed, "unread": scan.unread,
              "compression": list(scan.methods), "seconds": seconds}
    unread = _unread_why(scan)
    if scan.why and not scan.with_code:
        return HipKernels(status="unknown", why=scan.why, **common)
    if scan.with_code == 0:
        why = unread or ("no offload bundle in the GPU code section" if not scan.bundles
                         else f"{scan.bundles} offload bundles but no AMD GPU code object in them")
        return HipKernels(status="unknown", why=why, **common)
    targets, partial = split_coverage(scan.counts, scan.with_code)
    processors = sorted({processor_of(t) for t in targets}, key=target_key)
    why = "; ".join(part for part in (unread, scan.why) if part) or None
    return HipKernels(status="ok", why=why, targets=targets, processors=processors, partial=partial, **common)


def _unread_why(scan: HipScan) -> str | None:
    if not scan.unread:
        return None
    methods = ", ".join(m for m in scan.methods if m != "zlib") or "their method"
    return (f"{scan.unread} of {scan.bundles} bundles are compressed with {methods}: their targets are "
            "unknown without a decompressor for it (Python 3.14's compression.zstd)")


# --- the file reader ------------------------------------------------------------------------------


def read_hip_kernels(path, timeout: float | None = None) -> HipKernels:
    """The GPU targets in the ELF library at ``path``. Never raises; stops after ``timeout`` seconds.

    Regular files only: anything else is refused before it is opened, and again on the opened descriptor."""
    began = time.perf_counter()
    try:
        path = os.fspath(path)
    except TypeError:
        return HipKernels(why=f"not a path: {type(path).__name__}", path=str(path))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            return _unknown(path, began, f"{kind_of(mode)}, not a regular file")
        fd = os.open(path, flags | getattr(os, "O_BINARY", 0))
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        return _unknown(path, began, f"cannot open: {getattr(exc, 'strerror', None) or exc}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _unknown(path, began, f"{kind_of(info.st_mode)}, not a regular file")

        def read_file(offset: int, size: int) -> bytes:
            return _pread(fd, size, offset) if offset >= 0 and size > 0 else b""

        section = elf.first_named(elf.sections(read_file, info.st_size), SECTION.decode(), info.st_size)
        if section is None or section.size == 0:
            return HipKernels(status="no-gpu-code", why=f"no GPU code ({SECTION.decode()} absent or empty)",
                              path=path, seconds=round(time.perf_counter() - began, 6))

        def read_section(offset: int, size: int) -> bytes:
            size = min(size, section.size - offset)
            return read_file(section.offset + offset, size) if size > 0 else b""

        deadline = began + timeout if timeout is not None else None
        return kernels_from_scan(_scan(read_section, section.size, deadline), path, began)
    except (_Unknown, elf.ElfError) as exc:
        return _unknown(path, began, str(exc))
    except OSError as exc:
        return _unknown(path, began, f"read failed: {exc.strerror or exc}")
    except struct.error:  # a read came back short: the file shrank while we read it
        return _unknown(path, began, "the file changed while it was read")
    finally:
        os.close(fd)


def _pread(fd: int, size: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # Windows has no pread
    return os.read(fd, size)


def _unknown(path: str, began: float, why: str) -> HipKernels:
    return HipKernels(status="unknown", why=why, path=path, seconds=round(time.perf_counter() - began, 6))
