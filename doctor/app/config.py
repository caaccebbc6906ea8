"""The user's configuration: ``[tool.torchdoctor]`` of a pyproject.toml (I/O; the values are checked
by doctor/model/requirements.py)."""

from __future__ import annotations

from doctor.errors import DoctorError
from doctor.model.requirements import Requirements, requirements_from_table


def load_pyproject_requirements(path: str, other_keys: tuple[str, ...] = ()) -> Requirements | None:
    """``[tool.torchdoctor]`` of a pyproject.toml; None when the file or the table is absent.

    ``other_keys`` are [tool.torchdoctor] keys owned by other features, accepted and ignored here.
    Raises DoctorError with one line naming the file and key for anything malformed.
    """
    import tomllib

    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DoctorError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise DoctorError(f"{path}: invalid TOML: {exc}") from None
    tool = data.get("tool", {})
    table = tool.get("torchdoctor") if isinstance(tool, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise DoctorError(f"{path}: [tool.torchdoctor] must be a table")
    return requirements_from_table(table, f"{path}: [tool.torchdoctor]", other_keys)
