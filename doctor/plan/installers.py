"""Which installer carries out the fix (pip, uv; conda only removes) and the exact argv for each.

Command building is pure; the few functions that look at the machine (``find_uv``, ``pip_version``,
``pip_config``) say so in their names and take a ``runner`` (default: doctor.runner.run, imported
only when used, so that plan.py stays free of subprocess). The same pins and the same index go
to pip and to uv, so the two are interchangeable: ``uv pip install --python <target>`` is pip's
command with uv's front end.

uv's ``--torch-backend`` is deliberately not used: it picks the index from uv's own driver
detection (the driver's CUDA only, not the GPU's architectures nor the compat table), so it can
disagree with the plan, and it follows a mirror only through ``UV_TORCH_BACKEND_INDEX``. Exact
local-version pins plus an explicit ``--index-url`` are equivalent where it is right and exact
where it is not (PROBES.md §6).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from doctor.model.versions import normalize_name
from doctor.table.load import DEFAULT_INDEX_BASE as DEFAULT_INDEX
from doctor.table.load import index_url

PIP = "pip"
UV = "uv"
AUTO = "auto"
INSTALLERS = (PIP, UV, AUTO)

# Packages that may change with torch: the three, the compiler, and the CUDA wheels they pin.
TORCH_FAMILY = {"torch", "torchvision", "torchaudio", "triton", "pytorch-triton", "pytorch-triton-rocm"}
FAMILY_PREFIXES = ("nvidia-", "cuda-", "pytorch-triton")
# conda packages that mean "conda owns torch": they must go before pip installs over them.
CONDA_TORCH = ("pytorch", "pytorch-gpu", "pytorch-cuda", "cpuonly", "libtorch", "torchvision", "torchaudio")
MIN_PIP_REPORT = (22, 2)  # pip install --dry-run --report


def in_torch_family(name: str) -> bool:
    name = normalize_name(name)
    return name in TORCH_FAMILY or name.startswith(FAMILY_PREFIXES)


@dataclass(frozen=True)
class InstallSource:
    """Where wheels come from: the PyTorch index (or a mirror of it), a flat find-links, or only local files."""

    index_base: str = DEFAULT_INDEX  # <base>/<variant> must be a PEP 503 simple index
    find_links: str | None = None  # a folder or a URL of a flat listing (pip/uv -f)
    no_index: bool = False  # only find_links: offline installs
    base_given: bool = False  # the base came from --index-url-base / TORCHDOCTOR_INDEX_URL_BASE

    def args(self, variant: str | None, extra_variants: tuple[str, ...] = ()) -> list[str]:
        """The index options for a wheel of ``variant`` (None: the installer's default index)."""
        out: list[str] = []
        # With find-links alone the default index (PyPI or the user's pip config) serves the
        # non-torch dependencies; an explicit base still wins for the torch wheels themselves.
        use_index = not self.no_index and variant and (self.find_links is None or self.base_given)
        if use_index:
            out += ["--index-url", index_url(variant, self.index_base)]
            for extra in extra_variants:
                if extra != variant:
                    out += ["--extra-index-url", index_url(extra, self.index_base)]
        if self.find_links:
            out += ["--find-links", self.find_links]
        if self.no_index:
            out.append("--no-index")
        return out


def source_from_options(index_url_base: str | None, find_links: str | None, no_index: bool) -> InstallSource:
    """Validate and normalise the command-line source options (a local folder becomes a file:// URL)."""
    from doctor.errors import DoctorError

    if no_index and not find_links:
        raise DoctorError("--no-index needs --find-links DIR_OR_URL (where the wheels are)")
    base = DEFAULT_INDEX
    if index_url_base:
        base = index_url_base.strip()
        if "://" not in base:
            folder = Path(base).expanduser()
            if not folder.is_dir():
                raise DoctorError(f"--index-url-base {index_url_base!r}: not a URL and not a folder")
            base = folder.resolve().as_uri()
        base = base.rstrip("/")
    links = find_links
    if links and "://" not in links:
        folder = Path(links).expanduser()
        if not folder.exists():
            raise DoctorError(f"--find-links {find_links!r}: no such folder")
        links = str(folder.resolve())
    return InstallSource(base, links, no_index, bool(index_url_base))


def choose_installer(requested: str, snap) -> tuple[str, str]:
    """(installer, why). ``auto`` picks uv for an environment uv made, else pip."""
    if requested in (PIP, UV):
        return requested, f"--installer {requested}"
    if snap.interpreter.env_kind == "uv-venv":
        return UV, "the environment was made by uv"
    for dist in (snap.install.torch, snap.install.torchvision, snap.install.torchaudio):
        if dist is not None and (dist.installer or "").strip() == "uv":
            return UV, f"{dist.name} was installed by uv"
    return PIP, "default"


def find_uv(env: dict | None = None, which=shutil.which) -> str | None:
    """uv on PATH, else the one installed beside torchdoctor (pip install torchdoctor[uv] / uv tool)."""
    env = os.environ if env is None else env
    found = which("uv", path=env.get("PATH"))
    if found:
        return found
    beside = Path(sys.executable).parent / ("uv.exe" if os.name == "nt" else "uv")
    return str(beside) if beside.is_file() else None


def install_argv(
    installer: str,
    python: str,
    pins: list[str],
    variant: str | None,
    source: InstallSource,
    uv: str = "uv",
    extra_variants: tuple[str, ...] = (),
    requirements: str | None = None,
) -> list[str]:
    """``<python> -m pip install <pins> <index options>`` or ``uv pip install --python <python> ...``."""
    head = [uv, "pip", "install", "--python", python] if installer == UV else [python, "-m", "pip", "install"]
    body = ["-r", requirements] if requirements else list(pins)
    return head + body + source.args(variant, extra_variants)


def dry_run_argv(installer: str, install: list[str], report: str) -> list[str]:
    """The install command as a dry run: pip writes a JSON report, uv prints '+'/'-' lines."""
    if installer == UV:
        return install[:3] + ["--dry-run"] + install[3:]
    return install[:4] + ["--dry-run", "--report", report, "--quiet"] + install[4:]


def uninstall_argv(installer: str, python: str, names: list[str], uv: str = "uv") -> list[str]:
    if installer == UV:
        return [uv, "pip", "uninstall", "--python", python, *names]
    return [python, "-m", "pip", "uninstall", "-y", *names]


def conda_remove_argv(conda: str, prefix: str, names: list[str]) -> list[str]:
    # --force removes only these packages, not what depends on them: pip puts torch back right after.
    return [conda, "remove", "-p", prefix, "--force", "-y", *names]


def conda_torch_records(snap) -> list[dict]:
    """The conda records in the target environment that are torch itself (pytorch, pytorch-cuda, cpuonly...)."""
    conda = ((snap.environment or {}).get("python") or {}).get("conda") or {}
    return [r for r in conda.get("records") or [] if r.get("name") in CONDA_TORCH]


# --- the installer's view of the environment (I/O, through the runner) -----------------------------

# Run by the target interpreter: every installed distribution as [name, version]. Python 3.8+, stdlib only.
FREEZE_SCRIPT = (
    "import importlib.metadata as m, json, sys\n"
    "out = sorted({(d.metadata['Name'] or '', d.version) for d in m.distributions() if d.metadata['Name']})\n"
    "sys.stdout.write(json.dumps(out))\n"
)


def read_freeze(python: str, runner=None, timeout: float = 60.0) -> dict[str, str] | None:
    """{normalised name: version} of the target environment, or None when it cannot be read."""
    import json

    res = (runner or _run)([python, "-c", FREEZE_SCRIPT], timeout=timeout)
    if not res.ok:
        return None
    try:
        return {normalize_name(name): version for name, version in json.loads(res.stdout)}
    except (ValueError, TypeError):
        return None


def parse_pip_version(text: str) -> tuple[int, ...] | None:
    """'pip 23.2.1 from /x (python 3.12)' -> (23, 2, 1)."""
    match = re.match(r"\s*pip (\d+(?:\.\d+)*)", text or "")
    return tuple(int(x) for x in match[1].split(".")) if match else None


def pip_version(python: str, runner=None) -> tuple[int, ...] | None:
    res = (runner or _run)([python, "-m", "pip", "--version"], timeout=60.0)
    return parse_pip_version(res.stdout) if res.ok else None


@dataclass
class PipConfig:
    values: dict[str, str] = field(
        default_factory=dict
    )  # "global.constraint" -> "/etc/xdg/pip/constraints.txt"


def parse_pip_config(text: str) -> PipConfig:
    """`pip config list` lines: ``global.index-url='https://...'`` or ``:env:.find-links='/x'``."""
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip("'\"")
    return PipConfig(values)


def read_pip_config(python: str, runner=None) -> PipConfig:
    res = (runner or _run)([python, "-m", "pip", "config", "list"], timeout=60.0)
    return parse_pip_config(res.stdout) if res.ok else PipConfig()


def config_warnings(config: PipConfig, pins: list[str], read_text=None) -> list[str]:
    """What in the user's pip configuration could override the fix. Respected, never stripped: said."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    read_text = read_text or _read_text
    wanted = {}
    for pin in pins:
        name, _, version = pin.partition("==")
        wanted[normalize_name(name)] = version
    out = []
    for key, value in sorted(config.values.items()):
        option = key.rpartition(".")[2]
        if option == "constraint":
            for path in value.split():
                for line in (read_text(path) or "").splitlines():
                    line = line.split("#")[0].strip()
                    if not line:
                        continue
                    try:
                        req = Requirement(line)
                    except InvalidRequirement:
                        continue
                    target = wanted.get(normalize_name(req.name))
                    if target is None:
                        continue
                    try:
                        ok = req.specifier.contains(Version(target), prereleases=True)
                    except InvalidVersion:
                        ok = True
                    verdict = (
                        "the target satisfies it" if ok else f"it forbids {req.name}=={target}: pip will fail"
                    )
                    out.append(f"pip config {key}={path} constrains {line}; {verdict}.")
        elif option == "extra-index-url":
            out.append(
                f"pip config {key}={value} adds indexes beside the plan's; the exact pins keep the "
                "torch builds from coming from them."
            )
        elif option == "no-index":
            out.append(f"pip config {key}={value}: pip will use only --find-links locations.")
    return out


def _run(*args, **kwargs):
    # Imported late: plan.py imports this module, and the plan must stay free of subprocess.
    from doctor.runner import run

    return run(*args, **kwargs)


def _read_text(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None
