"""The user's configuration: ``[tool.torchdoctor]`` of a pyproject.toml (I/O; the values are checked
by doctor/model/requirements.py).

A configuration that applies is never ignored: an unknown key, a value of the wrong type or a file
that is not valid TOML is one line and exit 2, naming the file, the key and what was expected. A
pyproject.toml without a ``[tool.torchdoctor]`` table is simply not a configuration, and neither is
someone else's broken pyproject.toml that never mentions torchdoctor.
"""

from __future__ import annotations

import re
import sys

from doctor.errors import DoctorError
from doctor.model.files import toml_module
from doctor.model.requirements import Requirements, requirements_from_table

# A file that names our table somewhere (as a header, a dotted key or an inline table): when it does not
# parse, the user meant it for us and must hear about it.
_MENTIONS_US = re.compile(r"^\s*\[+\s*tool\s*\.\s*[\"']?torchdoctor\b|\btool\s*\.\s*[\"']?torchdoctor\b"
                          r"|^\s*torchdoctor\s*=", re.MULTILINE)

MAX_CONFIG_BYTES = 4 << 20  # a pyproject.toml is a few KB


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


# "torchdoctor" as a key: before "=", "." or "]", bare or quoted ([tool.torchdoctor], tool.torchdoctor.x = 1,
# torchdoctor = {...} under [tool]); a dependency "torchdoctor>=0.2" is no key.
_OUR_KEY = re.compile(rb"torchdoctor[\"']?[ \t]*[=.\]]")


def _may_name_our_table(raw: bytes) -> bool:
    """False only when parsing could find neither our table nor a mention of it (so the answer is None, valid
    TOML or not): no "torchdoctor" as a key, no backslash (a quoted key's escapes can spell it), no UTF-16.
    Another tool's pyproject.toml is then not parsed at all: its errors are not ours to report."""
    if b"\\" in raw or raw.startswith(_UTF16_BOMS):
        return True
    if b"torchdoctor" not in raw:
        return False
    return bool(_OUR_KEY.search(raw) or _MENTIONS_US.search(raw.decode("utf-8", errors="replace")))


def _decode(data: bytes, path: str) -> str:
    if data.startswith(_UTF16_BOMS):
        raise DoctorError(f"{path}: saved as UTF-16 (PowerShell's > does that): TOML must be UTF-8")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DoctorError(
            f"{path}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}): TOML must be UTF-8"
        ) from None



def _toml():
    module = toml_module()
    if module is None:  # an install that skipped the tomli dependency on 3.10
        raise DoctorError("reading pyproject.toml on Python 3.10 needs the tomli package: "
                          f"{sys.executable} -m pip install tomli")
    return module


def load_pyproject_requirements(path: str, other_keys: tuple[str, ...] = (), explicit: bool = True
                                ) -> Requirements | None:
    """``[tool.torchdoctor]`` of a pyproject.toml; None when the file or the table is absent.

    ``explicit``: the file was named (``--config``), so a file that does not parse is an error whatever
    it holds; otherwise (./pyproject.toml found by looking) only when it mentions ``tool.torchdoctor``.
    ``other_keys`` are [tool.torchdoctor] keys owned by other features, accepted and ignored here.
    Raises DoctorError with one line naming the file and key for anything malformed.
    """
    from doctor.model.files import FileRefused, read_bytes

    try:  # bytes, bounded, a regular file only (doctor/model/files.py); TOML is UTF-8 by definition
        raw = read_bytes(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return None
    except FileRefused as exc:
        raise DoctorError(f"{path}: cannot read: {exc}") from None
    except OSError as exc:
        raise DoctorError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not explicit and not _may_name_our_table(raw):
        return None  # not ours, valid or not (see below): left unparsed
    toml = _toml()
    try:
        data = toml.loads(_decode(raw, path))
    except (DoctorError, ValueError, RecursionError) as exc:  # TOMLDecodeError is a ValueError
        utf16 = raw.startswith(_UTF16_BOMS)
        text = raw.decode("utf-16" if utf16 else "utf-8", errors="replace")
        if not explicit and not _MENTIONS_US.search(text):
            return None  # someone else's pyproject.toml, broken for them too, but not a config of ours
        if isinstance(exc, DoctorError):
            raise
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).splitlines()[0][:200]
        raise DoctorError(f"{path}: invalid TOML, so its [tool.torchdoctor] cannot be read: {why}") from None
    tool = data.get("tool", {})
    table = tool.get("torchdoctor") if isinstance(tool, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise DoctorError(f"{path}: [tool.torchdoctor] must be a table (a [tool.torchdoctor] section), "
                          f"got {type(table).__name__} {table!r}")
    return requirements_from_table(table, f"{path}: [tool.torchdoctor]", other_keys)
