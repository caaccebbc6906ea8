"""The options of a run, as the command line gave them, validated before anything is probed.

Every value that can only be wrong becomes one line and exit 2 here, so a typo never costs a probe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from doctor.errors import DoctorError
from doctor.model.i18n import Msg

if TYPE_CHECKING:
    from doctor.plan.commands import InstallSource


@dataclass(slots=True)
class CheckOptions:
    python: str | None = None
    smoke: bool = True
    json: bool = False
    table: Path | None = None
    verbose: bool = False
    smoke_timeout: float = 60.0
    device: str = "all"
    strict: bool = False
    ignore: list[str] = field(default_factory=list)
    inputs: list[Path] = field(default_factory=list)  # --from: reports / collect_env texts / folders
    format: str | None = None  # text, json, markdown, github, junit (None: text, or json with --json)
    output: Path | None = None
    redact: bool = True
    shared: bool = False  # output meant for others (`report`): redacted even on stdout
    require: list[str] = field(default_factory=list)
    min_gpus: int | None = None
    min_compute_capability: str | None = None
    min_gpu_memory: str | None = None
    # the torch to end with: a CI requirement (check) and the plan's choice (every command)
    torch: str | None = None
    cuda: str | None = None
    config: Path | None = None
    quiet: bool = False  # -q: no progress, no machine summary; only what needs doing (nothing when healthy)
    python_named: bool = True  # `python` came from --python (explain may take it from a traceback instead)
    no_driver_change: bool = False  # the plan keeps today's driver (--no-driver-change)
    index_url_base: str | None = None  # a mirror of download.pytorch.org/whl for every printed command
    # --mirror NAME (doctor/plan/mirrors.py), checked with one request (app/mirror.py)
    mirror: str | None = None

    @property
    def output_format(self) -> str:
        return self.format or ("json" if self.json else "text")


MAX_TIMEOUT_S = 24 * 3600.0  # a time limit longer than a day is a typo, never a plan
MAX_DEVICE_INDEX_DIGITS = 6


def validate(opts: CheckOptions) -> None:
    """Option values that can only be wrong: one line and exit 2 before any probing."""
    if opts.device != "all" and not (opts.device.isdigit() and len(opts.device) <= MAX_DEVICE_INDEX_DIGITS):
        raise DoctorError(Msg("--device {device}: give a device index (0, 1, ...) or "
            "'all'", device=repr(opts.device)))
    check_timeout("--smoke-timeout", opts.smoke_timeout)
    if not opts.inputs:
        validate_overrides()
    if opts.json and opts.format not in (None, "json"):
        raise DoctorError(Msg("--json and --format {format} contradict each other: pick "
            "one", format=opts.format))
    if opts.config is not None and not opts.config.is_file():
        raise DoctorError(Msg("--config {path}: no such file", path=str(opts.config)))


def choose_interpreter(python: str | None) -> tuple[str | None, str]:
    """The interpreter this run inspects, and why: chosen once, here. One that --python names but that is
    not there is a usage error (exit 2); finding none at all is a fact the check reports."""
    import os

    from doctor.probes.target_python import choose_interpreter as choose

    path, reason = choose(python, os.environ, os.getcwd())
    refused = reason.partition("./.venv refused: ")[2]
    if refused:
        import sys

        from doctor.errors import one_line

        refused = refused[:-1] if refused.endswith(")") else refused
        print(one_line(f"torchdoctor: not running ./.venv/ of the working folder: {refused}"),
              file=sys.stderr)
    if python:
        if path is None:
            raise DoctorError(reason)
        if os.name == "posix" and not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise DoctorError(Msg("--python {python}: {path} is not an executable "
                "file", python=python, path=path))
    return path, reason


def _say_index_from_environment(value: str) -> None:
    """An index that TORCHDOCTOR_INDEX_URL_BASE set (a profile, a CI secret) and not the command line: every
    command then installs from it, so one line on stderr says where it came from (credentials hidden)."""
    import os
    import sys

    if os.environ.get("TORCHDOCTOR_INDEX_URL_BASE") != value:
        return
    if any(a == "--index-url-base" or a.startswith("--index-url-base=") for a in sys.argv[1:]):
        return
    from doctor.errors import one_line
    from doctor.fix.sources import shown

    print(one_line(f"torchdoctor: the index is {shown(value.strip())}, from TORCHDOCTOR_INDEX_URL_BASE"),
          file=sys.stderr)


def source_from_options(index_url_base: str | None, find_links: str | None, no_index: bool) -> InstallSource:
    """Validate and normalise the command-line source options (a local folder becomes a file:// URL)."""
    from doctor.plan.commands import DEFAULT_INDEX_BASE, InstallSource

    check_source_text("--index-url-base", index_url_base)
    check_source_text("--find-links", find_links)
    if no_index and not find_links:
        raise DoctorError(Msg("--no-index needs --find-links DIR_OR_URL (where the wheels are)"))
    base = DEFAULT_INDEX_BASE
    if index_url_base:
        _say_index_from_environment(index_url_base)
        base = index_url_base.strip()
        if "://" not in base:
            folder = Path(base).expanduser()
            if not folder.is_dir():
                raise DoctorError(Msg("--index-url-base {value}: not a URL and not a "
                    "folder", value=repr(index_url_base)))
            base = folder.resolve().as_uri()
        base = base.rstrip("/")
    links = find_links
    if links and "://" not in links:
        folder = Path(links).expanduser()
        if not folder.exists():
            raise DoctorError(Msg("--find-links {value}: no such folder", value=repr(find_links)))
        links = str(folder.resolve())
    return InstallSource(base, links, no_index, bool(index_url_base))


def check_timeout(option: str, value: float, most: float = MAX_TIMEOUT_S) -> float:
    """A time limit must be a finite number of seconds above 0 and at most ``most`` (nan, inf, 0 and 1e308
    are refused: no child could be given them as a limit)."""
    from doctor.model.files import bounded_float

    if bounded_float(value, 0.0, most) is None:
        raise DoctorError(Msg("{option} {value}: give a number of seconds above 0 and at most "
            "{most:g}", option=option,
                              value=value, most=most))
    return float(value)


def validate_overrides(env=None) -> None:
    """TORCHDOCTOR_DRIVER_VERSION, _CUDA_DRIVER_VERSION and _NVIDIA_TIMEOUT: one that cannot mean anything
    is a usage error (a forced driver version is never shown as if nvidia-smi had read it)."""
    import os

    from doctor.probes.overrides import BadOverride, read_overrides

    try:
        read_overrides(os.environ if env is None else env)
    except BadOverride as exc:
        raise DoctorError(str(exc)) from None


def validate_distributed(nproc_per_node: int, timeout: float, devices: int | None = None) -> None:
    """`distributed`: at least one rank and no more than this node can run (its CPUs, or its GPUs when it
    has more), and a usable time limit; checked before torchrun starts anything."""
    import os

    check_timeout("--timeout", timeout)
    most = max(os.cpu_count() or 1, devices or 0)
    if not 1 <= nproc_per_node <= most:
        raise DoctorError(
            f"--nproc-per-node {nproc_per_node}: give 1 to {most} (this node has {os.cpu_count() or 1} CPU(s)"
            + (f" and {devices} GPU(s)" if devices else "")
            + "); for more ranks use several nodes: torchrun ... -m doctor.distributed"
        )


def check_source_text(option: str, value: str | None) -> None:
    """A URL or folder given on the command line goes into printed commands: no control characters, no
    line breaks (a newline would print a forged line under the plan)."""
    if value is not None and any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in value):
        raise DoctorError(Msg("{option} {value}: contains a control character or a line break", option=option,
                              value=repr(value)))
