"""The user's configuration: ``[tool.torchdoctor]`` of a pyproject.toml (I/O; the values are checked
by doctor/model/requirements.py)."""

from __future__ import annotations

from doctor.errors import DoctorError
from doctor.model.requirements import Requirements, requirements_from_table

MAX_CONFIG_BYTES = 4 << 20  # a pyproject.toml is a few KB


def _decode(data: bytes, path: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DoctorError(f"{path}: saved as UTF-16 (PowerShell's > does that): TOML must be UTF-8")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DoctorError(
            f"{path}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}): TOML must be UTF-8"
        ) from None


def load_pyproject_requirements(path: str, other_keys: tuple[str, ...] = ()) -> Requirements | None:
    """``[tool.torchdoctor]`` of a pyproject.toml; None when the file or the table is absent.

    ``other_keys`` are [tool.torchdoctor] keys owned by other features, accepted and ignored here.
    Raises DoctorError with one line naming the file and key for anything malformed.
    """
    import tomllib

    from doctor.model.files import FileRefused, read_bytes

    try:  # bytes, bounded, a regular file only (doctor/model/files.py); TOML is UTF-8 by definition
        data = tomllib.loads(_decode(read_bytes(path, MAX_CONFIG_BYTES), path))
    except FileNotFoundError:
        return None
    except FileRefused as exc:
        raise DoctorError(f"{path}: cannot read: {exc}") from None
    except OSError as exc:
        raise DoctorError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise DoctorError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise DoctorError(f"{path}: invalid TOML: nested too deeply") from None
    except ValueError as exc:  # an integer past CPython's 4,300-digit limit
        raise DoctorError(f"{path}: invalid TOML: {str(exc).splitlines()[0][:120]}") from None
    tool = data.get("tool", {})
    table = tool.get("torchdoctor") if isinstance(tool, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise DoctorError(f"{path}: [tool.torchdoctor] must be a table")
    return requirements_from_table(table, f"{path}: [tool.torchdoctor]", other_keys)
