"""The options of a run, as the command line gave them, validated before anything is probed.

Every value that can only be wrong becomes one line and exit 2 here, so a typo never costs a probe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from doctor.errors import DoctorError
from doctor.plan.commands import DEFAULT_INDEX_BASE, InstallSource


@dataclass
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
    torch: str | None = None  # the torch to end with: a CI requirement (check) and the plan's choice (every command)
    cuda: str | None = None
    config: Path | None = None
    no_driver_change: bool = False  # the plan keeps today's driver (--no-driver-change)
    index_url_base: str | None = None  # a mirror of download.pytorch.org/whl for every printed command

    @property
    def output_format(self) -> str:
        return self.format or ("json" if self.json else "text")


def validate(opts: CheckOptions) -> None:
    """Option values that can only be wrong: one line and exit 2 before any probing."""
    if opts.device != "all" and not opts.device.isdigit():
        raise DoctorError(f"--device {opts.device!r}: give a device index (0, 1, ...) or 'all'")
    if not opts.smoke_timeout > 0:
        raise DoctorError(f"--smoke-timeout {opts.smoke_timeout}: must be a positive number of seconds")
    if opts.json and opts.format not in (None, "json"):
        raise DoctorError(f"--json and --format {opts.format} contradict each other: pick one")
    if opts.config is not None and not opts.config.is_file():
        raise DoctorError(f"--config {opts.config}: no such file")


def choose_interpreter(python: str | None) -> tuple[str | None, str]:
    """The interpreter this run inspects, and why: chosen once, here. One that --python names but that is
    not there is a usage error (exit 2); finding none at all is a fact the check reports."""
    import os

    from doctor.probes.interpreter import choose_interpreter as choose

    path, reason = choose(python, os.environ, os.getcwd())
    if python:
        if path is None:
            raise DoctorError(reason)
        if os.name == "posix" and not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise DoctorError(f"--python {python}: {path} is not an executable file")
    return path, reason


def source_from_options(index_url_base: str | None, find_links: str | None, no_index: bool) -> InstallSource:
    """Validate and normalise the command-line source options (a local folder becomes a file:// URL)."""
    if no_index and not find_links:
        raise DoctorError("--no-index needs --find-links DIR_OR_URL (where the wheels are)")
    base = DEFAULT_INDEX_BASE
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
