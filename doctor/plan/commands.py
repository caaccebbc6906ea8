"""The one builder of every install command torchdoctor prints or runs (pure, stdlib only).

Findings, plan steps, the restore command and the distributed hints all come from here, so the
installer (pip or uv), the index or mirror, the pins and the shell quoting are the same everywhere.
Findings state what they need as ``Action`` data (doctor/model/findings.py); ``Commands`` writes each
action out for this run. Stdlib only and Python 3.8 compatible: rank 0 of a distributed check uses it
inside the target interpreter.

uv's ``--torch-backend`` is deliberately not used: it picks the index from uv's own driver detection
(the driver's CUDA only, not the GPU's architectures nor the compat table), so it can disagree with
the plan, and it follows a mirror only through ``UV_TORCH_BACKEND_INDEX``. Exact local-version pins
plus an explicit ``--index-url`` are equivalent where it is right and exact where it is not (uv's
crates/uv-torch/src/backend.rs and docs/guides/integration/pytorch.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from doctor.model import shells
from doctor.model.findings import CONDA_REMOVE, INSTALL, REINSTALL, SHELL, UNINSTALL, VENV, Action

DEFAULT_INDEX_BASE = "https://download.pytorch.org/whl"
PIP = "pip"
UV = "uv"
AUTO = "auto"
INSTALLERS = (PIP, UV, AUTO)


def index_url(variant: str, base: str = DEFAULT_INDEX_BASE) -> str:
    """The PyTorch wheel index of a variant: "cu128" -> https://download.pytorch.org/whl/cu128."""
    return f"{base.rstrip('/')}/{variant}"


@dataclass(frozen=True)
class InstallSource:
    """Where wheels come from: the PyTorch index (or a mirror of it), a flat find-links, or only local
    files."""

    index_base: str = DEFAULT_INDEX_BASE  # <base>/<variant> must be a PEP 503 simple index
    find_links: str | None = None  # a folder or a URL of a flat listing (pip/uv -f); "{variant}" is filled in
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
        links = self.find_links
        if links and "{variant}" in links:  # a flat listing per variant (--mirror aliyun)
            links = links.replace("{variant}", variant) if variant else None
        if links:
            out += ["--find-links", links]
        if self.no_index:
            out.append("--no-index")
        return out


# --- argv --------------------------------------------------------------------------------------------


def install_argv(
    installer: str,
    python: str,
    pins: list[str],
    variant: str | None,
    source: InstallSource,
    uv: str = "uv",
    extra_variants: tuple[str, ...] = (),
    requirements: str | None = None,
    flags: tuple[str, ...] = (),
) -> list[str]:
    """``<python> -m pip install <flags> <pins> <index options>`` or ``uv pip install --python <python>
    ...``."""
    head = [uv, "pip", "install", "--python", python] if installer == UV else [python, "-m", "pip", "install"]
    body = ["-r", requirements] if requirements else list(pins)
    return head + list(flags) + body + source.args(variant, extra_variants)


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


def conda_install_argv(conda: str, prefix: str, channel: str, specs: list[str]) -> list[str]:
    """``conda install -p <prefix> -c <channel> <specs>``: a distribution's own build, from its own
    channel."""
    return [conda, "install", "-p", prefix, "-c", channel, *specs]


def force_flag(installer: str) -> str:
    """Reinstall even where metadata says the build is there (a half-done install can leave that)."""
    return "--reinstall" if installer == UV else "--force-reinstall"


def reinstall_argv(
    installer: str,
    python: str,
    requirements: str,
    variant: str | None,
    source: InstallSource,
    uv: str = "uv",
    extra_variants: tuple = (),
) -> list[str]:
    """Reinstall exactly the builds a requirements file lists, and nothing else (the restore command):
    ``... install -r <file> --force-reinstall --no-deps <index options>``. Their dependencies were in
    place before, so ``--no-deps``; forced, because a half-done install can leave metadata that says
    they are there."""
    argv = install_argv(installer, python, [], variant, source, uv, extra_variants, requirements=requirements)
    at = argv.index("-r") + 2  # after "-r <file>"
    return argv[:at] + [force_flag(installer), "--no-deps"] + argv[at:]


def check_argv(installer: str, python: str, uv: str = "uv") -> list[str]:
    """``pip check`` / ``uv pip check`` of the target: is every installed distribution's requirement met?"""
    if installer == UV:
        return [uv, "pip", "check", "--python", python]
    return [python, "-m", "pip", "check"]


def pip_argv(python: str, *args: str) -> list[str]:
    """``<python> -m pip <args>``: the target's own pip, asked about itself (``--version``, ``config
    list``)."""
    return [python, "-m", "pip", *args]


def pin_problem(spec: str) -> str | None:
    """Why a package spec read from a machine ("name" or "name==version": a version from a dist-info folder's
    name, a report's facts) must not go into a command, or None. packaging decides: a PEP 508 name and an
    exact PEP 440 version, nothing else. Where packaging is missing (rank 0 in the target interpreter) only
    the characters such a pin is made of pass; the quoting (doctor/model/shells.py) keeps even those from
    running. The reason never quotes the value: it is printed where a shell may read it."""
    name, sep, version = spec.partition("==")
    try:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return None if _PIN_CHARACTERS.fullmatch(spec) else "a package pin read from the machine is not valid"
    try:
        if Requirement(name).name != name:
            raise InvalidRequirement(name)
    except InvalidRequirement:
        return "a package name read from the machine is not a valid name"
    if not sep:
        return None
    try:
        Version(version)
    except InvalidVersion:
        return f"{name}: the version read from the machine is not a PEP 440 version"
    if version != "".join(version.split()):
        return f"{name}: the version read from the machine is not a PEP 440 version"
    return None


_PIN_CHARACTERS = re.compile(r"[A-Za-z0-9._-]+(==[A-Za-z0-9.+!_-]+)?")


def requirement_problem(spec: str) -> str | None:
    """Why a requirement as torch's metadata (or the table) states it must not go into a command, or None: it
    may have extras and a range ("cuda-toolkit[cublas,...]==13.0.3", "numpy<2"), but no marker, URL or space;
    packaging decides. Never quotes the value (see pin_problem)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requirement = Requirement(spec)
    except InvalidRequirement:
        requirement = None
    if requirement is None or requirement.url or requirement.marker or spec != "".join(spec.split()):
        return "a requirement read from the machine is not a plain PEP 508 requirement"
    return None


def with_report_argv(install: list[str], report: str) -> list[str]:
    """A pip install that also writes pip's JSON ``--report`` of what it installed, and from where."""
    return install[:4] + ["--report", report] + install[4:]


def index_options(argv: list[str]) -> list[str]:
    """The index options of an install argv (``--index-url X``, ``--extra-index-url X``, ``--find-links X``,
    ``--no-index``), in order: the sources the command itself names."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in ("--index-url", "--extra-index-url", "--find-links") and i + 1 < len(argv):
            out += argv[i : i + 2]
            i += 2
            continue
        if argv[i] == "--no-index":
            out.append(argv[i])
        i += 1
    return out


def named_sources(argv: list[str]) -> tuple[list[str], list[str], bool]:
    """(index URLs, find-links locations, whether the default index is replaced: --index-url or --no-index)
    of an install argv."""
    options = index_options(argv)  # each of these options is followed by its value there
    indexes = [options[i + 1] for i, option in enumerate(options)
               if option in ("--index-url", "--extra-index-url")]
    links = [options[i + 1] for i, option in enumerate(options) if option == "--find-links"]
    return indexes, links, "--index-url" in options or "--no-index" in options


def with_only_named_sources(argv: list[str]) -> list[str]:
    """A ``uv pip ...`` command as fix runs it: no configuration file, and for an install the first index
    that has a package (doctor/fix/sources.py: with the environment fix gives it, uv uses only the
    sources the command names). Any other command as it is."""
    if argv[1:2] != ["pip"] or len(argv) < 3:
        return list(argv)
    flags = ["--no-config"] + (["--index-strategy", "first-index"] if argv[2] == "install" else [])
    return argv[:3] + flags + argv[3:]


def ensurepip_argv(python: str) -> list[str]:
    """``<python> -m ensurepip``: what to run where the target has no pip."""
    return [python, "-m", "ensurepip"]


def render_argv(argv: list[str], os_name: str = "linux") -> str:
    """The command line a user copies, in the shell of ``os_name`` (doctor/model/shells.py: the argv exactly,
    or a comment line saying why it cannot be written safely)."""
    return shells.render(argv, shells.shell_for(os_name))


# --- actions -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Commands:
    """How this run writes commands: for which interpreter, with which installer, from which source,
    for which shell. Build one per run; every finding and plan step goes through it."""

    python: str = "python3"  # the target interpreter
    installer: str = PIP
    source: InstallSource = field(default_factory=InstallSource)
    os: str = "linux"  # "windows": PowerShell quoting, Scripts\\python.exe
    uv: str = "uv"
    conda: str = "conda"  # for the removal steps where conda owns torch (fix: $CONDA_EXE)

    def argv(self, action: Action) -> list[str]:
        """The argv of an install/reinstall/uninstall action (VENV: the install into the new env)."""
        python = self.venv_python(action.text) if action.kind == VENV else (action.python or self.python)
        if action.kind == UNINSTALL:
            return uninstall_argv(self.installer, python, list(action.packages), self.uv)
        if action.kind in (INSTALL, REINSTALL, VENV):
            flags = (force_flag(self.installer),) if action.kind == REINSTALL else ()
            return install_argv(self.installer, python, list(action.packages), action.variant, self.source,
                                self.uv, flags=flags)
        raise ValueError(f"action {action.kind!r} has no argv")

    def line(self, action: Action) -> str:
        """The command line a user copies."""
        if action.kind == SHELL:
            return action.text
        if action.kind == CONDA_REMOVE:
            return render_argv([self.conda, "remove", "-p", action.text, *action.packages], self.os)
        problems = [
            p for p in map(requirement_problem if action.declared else pin_problem, action.packages) if p
        ]
        if problems and action.kind != UNINSTALL:  # an uninstall names what is there; it installs nothing
            return shells.refusal(shells.shell_for(self.os), "; ".join(problems))
        command = render_argv(self.argv(action), self.os)
        if action.kind == VENV:
            return f"{render_argv(self.venv_argv(action.text), self.os)} && {command}"
        return command

    def venv_python(self, folder: str) -> str:
        return f"{folder}\\Scripts\\python.exe" if self.os == "windows" else f"{folder}/bin/python"

    def venv_argv(self, folder: str) -> list[str]:
        """Make a virtual environment with the target interpreter (uv: ``uv venv --python <python>``)."""
        if self.installer == UV:
            return [self.uv, "venv", "--python", self.python, folder]
        return [self.python, "-m", "venv", folder]

    def fill(self, findings, pins: tuple[tuple[str, ...], str | None] | None = None) -> None:
        """Write out the actions of every finding's fix into its ``commands``. ``pins``: (the plan's pins,
        their index variant), what an action marked ``plan`` installs; with none, such an action writes no
        command (never an unpinned install from whatever index is the default)."""
        for finding in findings:
            fix = finding.fix
            if fix is None or not fix.actions:
                continue
            lines = []
            for action in fix.actions:
                if action.plan:
                    if not pins or not pins[0]:
                        continue
                    action = Action(action.kind, tuple(pins[0]), pins[1], action.python, action.text)
                lines.append(self.line(action))
            fix.commands = lines
