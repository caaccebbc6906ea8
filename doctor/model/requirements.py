"""What a project or CI job requires of the machine (`--require cuda --min-gpus 2 ...`, or
``[tool.torchdoctor]``): the values, how each is spelled and validated, and how the command line
and the file combine (the command line wins). Pure: reading the file is the app's (app/config.py),
checking the machine is a rule's (rules/requirements.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import Any

from doctor.errors import DoctorError

BACKENDS = ("cuda", "rocm", "xpu", "mps", "gpu", "cpu")
RULE = "requirements"
IDS = {
    "cuda": "requirement-cuda",
    "rocm": "requirement-rocm",
    "xpu": "requirement-xpu",
    "mps": "requirement-mps",
    "gpu": "requirement-gpu",
    "cpu": "requirement-cpu",
    "min_gpus": "requirement-min-gpus",
    "min_compute_capability": "requirement-min-compute-capability",
    "min_gpu_memory": "requirement-min-gpu-memory",
    "torch": "requirement-torch",
    "cuda_version": "requirement-cuda-version",
}
REQUIREMENT_IDS = tuple(IDS.values())

_UNITS = {  # bytes per unit; GB is decimal as on spec sheets ("A100 40GB" has 40960 MiB)
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
# Numbers are bounded (a 5,000-digit one is not a size or a version, and int() refuses 4,300+ digits).
_MEMORY_RE = re.compile(r"^\s*(\d{1,12}(?:\.\d{1,6})?)\s*([KMGT]i?B|B)\s*$", re.IGNORECASE)
_CC_RE = re.compile(r"^\d{1,3}\.\d{1,3}$")
CUDA_RE = re.compile(r"^(\d{1,3})(?:\.(\d{1,3}|x))?$")
MAX_GPUS = 1 << 20


@dataclass(slots=True)
class Requirements:
    require: list[str] = field(default_factory=list)  # "cuda", "rocm", "xpu", "mps", "gpu", "cpu"
    min_gpus: int | None = None
    min_compute_capability: str | None = None  # "8.0"
    min_gpu_memory: str | None = None  # "40GB", "40GiB", "40000MiB"
    torch: str | None = None  # PEP 440 specifier: ">=2.5,<2.8"
    cuda: str | None = None  # "12.4" (major.minor) or "12.x" / "12" (major)
    strict: bool = False
    ignore: list[str] = field(default_factory=list)  # finding ids

    @property
    def empty(self) -> bool:
        return not (
            self.require
            or self.min_gpus is not None
            or self.min_compute_capability
            or self.min_gpu_memory
            or self.torch
            or self.cuda
        )


def gpu_wanted_by(req: Requirements) -> list[str]:
    """What in the stated requirements says a GPU is wanted (for ``Snapshot.gpu_wanted``): a GPU backend, a
    GPU count, a compute capability or a GPU memory size. ``rocm`` and ``mps`` want a GPU too, but not an
    NVIDIA one."""
    out = [f"require {backend} (--require or [tool.torchdoctor])" for backend in req.require
           if backend in ("cuda", "gpu")]
    if req.min_gpus:
        out.append(f"min-gpus {req.min_gpus}")
    if req.min_compute_capability:
        out.append(f"min-compute-capability {req.min_compute_capability}")
    if req.min_gpu_memory:
        out.append(f"min-gpu-memory {req.min_gpu_memory}")
    return out


def requirements_from_table(
    table: dict[str, Any], where: str, other_keys: tuple[str, ...] = ()
) -> Requirements:
    known = {f.name for f in fields(Requirements)}
    values: dict[str, Any] = {}
    for raw_key, value in table.items():
        key = raw_key.replace("-", "_")
        if raw_key in other_keys or key in other_keys:
            continue
        if key not in known:
            import difflib

            spelled = sorted(k.replace("_", "-") for k in known)
            close = difflib.get_close_matches(raw_key.replace("_", "-"), spelled, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise DoctorError(f"{where}: unknown key {raw_key!r} ({hint}known: {', '.join(spelled)})")
        values[key] = _coerce(key, raw_key, value, where)
    req = Requirements(**values)
    validate_requirements(req, where)
    return req


def _coerce(key: str, raw_key: str, value: Any, where: str) -> Any:
    def bad(expected: str) -> DoctorError:
        return DoctorError(f"{where}: {raw_key} must be {expected}, got {value!r}")

    if key in ("require", "ignore"):
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
        raise bad("a string or a list of strings")
    if key == "min_gpus":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
        return value
    if key == "strict":
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if (
        key in ("min_compute_capability", "cuda")
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    ):
        return str(value)  # min-compute-capability = 8.0 written as a TOML float
    if not isinstance(value, str):
        raise bad("a string")
    return value


def validate_requirements(req: Requirements, where: str = "requirements") -> None:
    """Raise DoctorError (one line naming the setting) when a value cannot be understood."""
    for item in req.require:
        if item not in BACKENDS:
            raise DoctorError(f"{where}: require {item!r} is not one of {', '.join(BACKENDS)}")
    if req.min_gpus is not None and not 0 <= req.min_gpus <= MAX_GPUS:
        raise DoctorError(f"{where}: min-gpus must be between 0 and {MAX_GPUS}, got "
            f"{req.min_gpus if abs(req.min_gpus) < 10**18 else 'a larger number'}")
    if req.min_compute_capability is not None and not _CC_RE.match(req.min_compute_capability):
        raise DoctorError(
            f'{where}: min-compute-capability {req.min_compute_capability!r} is not major.minor like "8.0"'
        )
    if req.min_gpu_memory is not None:
        parse_memory_mib(req.min_gpu_memory, where)
    if req.torch is not None:
        specifier(req.torch, where)
    if req.cuda is not None and not CUDA_RE.match(req.cuda.strip()):
        raise DoctorError(f'{where}: cuda {req.cuda!r} is not a CUDA version like "12.4" or "12.x"')


def parse_memory_mib(text: str, where: str = "requirements") -> float:
    """ "40GB" -> 38146.97 MiB (decimal GB, as on spec sheets); "40GiB" -> 40960; "40000MiB" -> 40000."""
    m = _MEMORY_RE.match(text or "")
    if not m:
        raise DoctorError(
            f'{where}: min-gpu-memory {text!r} is not a size like "40GB", "40GiB" or "40000MiB"'
        )
    return float(m.group(1)) * _UNITS[m.group(2).lower()] / 2**20


def specifier(text: str, where: str):
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        if re.search(r"\d{19}", text):  # packaging would int() it when comparing: not a version anyway
            raise InvalidSpecifier(text)
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise DoctorError(f'{where}: torch {text!r} is not a version specifier like ">=2.5,<2.8"') from None


def merge(cli: Requirements | None, file: Requirements | None) -> Requirements:
    """The command line wins per setting; ``ignore`` lists are combined; ``strict`` if either says so."""
    if file is None:
        return replace(cli) if cli else Requirements()
    if cli is None:
        return replace(file)
    return Requirements(
        require=list(cli.require) or list(file.require),
        min_gpus=cli.min_gpus if cli.min_gpus is not None else file.min_gpus,
        min_compute_capability=cli.min_compute_capability or file.min_compute_capability,
        min_gpu_memory=cli.min_gpu_memory or file.min_gpu_memory,
        torch=cli.torch or file.torch,
        cuda=cli.cuda or file.cuda,
        strict=cli.strict or file.strict,
        ignore=list(dict.fromkeys([*file.ignore, *cli.ignore])),
    )
