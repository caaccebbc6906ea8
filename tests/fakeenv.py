"""Fake target environments: a REAL venv whose site-packages holds a metadata-only torch.

Reusable by any test (import ``make_fake_env`` from ``fakeenv``; tests/ is on sys.path under
pytest's default import mode). What it builds, under ``root``:

- ``python -m venv --without-pip root`` with the given interpreter (about 0.05-0.2 s);
- ``torch-<ver>.dist-info/`` with METADATA (Name, Version, Requires-Dist), INSTALLER, RECORD;
- ``torch/version.py`` in the shape real wheels have (``__version__``, ``debug``, ``cuda``,
  ``git_version``, ``hip``, ``xpu``), and ``torch/__init__.py`` whose behaviour on import is
  chosen by ``import_behaviour`` (by default it raises, so a test can prove torch was NOT imported);
- optionally torchvision / torchaudio with their version.py and ``Requires-Dist: torch (==X)``.

No real torch, no pip, no network. ``add_dist_info`` adds further metadata-only distributions
(e.g. nvidia-* wheels or a second torch elsewhere).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

IMPORT_MUST_NOT_HAPPEN = "torchdoctor test stand-in: import must not happen"

_SAME = object()  # "use the torch CUDA version" default for tv_cuda / ta_cuda
FAKE_GIT_VERSION = "0123456789abcdef0123456789abcdef01234567"

# torch/__init__.py bodies, by import_behaviour.
_INIT_BODIES = {
    "raise": f"raise RuntimeError({IMPORT_MUST_NOT_HAPPEN!r})\n",
    "ok": "from torch.version import __version__  # noqa: F401\n",
    "hang": "import time\nwhile True:\n    time.sleep(60)\n",
    "segfault": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    "exit": "import sys\nsys.exit(3)\n",
}


def make_fake_env(
    root: Path,
    python: str = sys.executable,
    torch: str | None = "2.6.0+cu126",
    cuda: str | None = "12.6",
    torchvision: str | None = None,
    tv_cuda: object = _SAME,
    torchaudio: str | None = None,
    requires: list[str] | None = None,
    installer: str | None = "pip",
    import_behaviour: str = "raise",
    build_version: str | None = None,
    hip: str | None = None,
    libtorch_cuda: bool | None = None,
    deps: bool = True,
) -> Path:
    """Create the venv and return the path of its python.

    ``torch``: the dist-info METADATA version ("2.6.0+cu126"; PyPI style "2.14.1" has no tag). ``cuda``:
    torch/version.py ``cuda`` (None: a CPU build). ``build_version``: version.py ``__version__`` (default:
    ``torch``, with ``+cuXYZ`` appended when it has no tag and ``cuda`` is set). ``requires``: torch's
    Requires-Dist lines (default: the usual pure-Python deps plus, for a CUDA build, the pin real wheels
    carry: ``nvidia-cuda-runtime-cuXX==X.Y.*`` up to CUDA 12, ``cuda-toolkit[...]==X.Y.3`` from 13).
    ``tv_cuda``: the CUDA tag for torchvision/torchaudio versions without one (default: ``cuda``).
    ``installer``: INSTALLER text (None: no file). ``import_behaviour``: "raise" (default), "ok", "hang",
    "segfault" or "exit". ``libtorch_cuda``: list torch/lib/libtorch_cuda.so in RECORD (default: when ``cuda``
    is set). ``deps``: also install, metadata-only, what torch, torchvision and torchaudio declare (each
    requirement whose marker holds for this interpreter, at a version it allows), as pip would have (default);
    False leaves them out, as ``pip install --no-deps`` does. ``torch=None`` builds a venv without torch.
    """
    if import_behaviour not in _INIT_BODIES:
        raise ValueError(f"import_behaviour must be one of {sorted(_INIT_BODIES)}")
    root = Path(root)
    subprocess.run([python, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True)
    site = site_packages(root)
    if torch is not None:
        if build_version is None:
            build_version = torch if "+" in torch else torch + (_cuda_tag(cuda) if cuda else "")
        if requires is None:
            requires = default_torch_requires(cuda)
        with_cuda_lib = bool(cuda) if libtorch_cuda is None else libtorch_cuda
        version_py = (
            f"__version__ = {build_version!r}\n"
            "debug = False\n"
            f"cuda: Optional[str] = {cuda!r}\n"
            f"git_version = {FAKE_GIT_VERSION!r}\n"
            f"hip: Optional[str] = {hip!r}\n"
            "rocm: Optional[str] = None\n"
            "xpu: Optional[str] = None\n"
        )
        files = {
            "torch/__init__.py": _INIT_BODIES[import_behaviour],
            "torch/version.py": "from typing import Optional\n\n" + version_py,
        }
        extra_record = ["torch/lib/libtorch_cpu.so"] + (
            ["torch/lib/libtorch_cuda.so"] if with_cuda_lib else []
        )
        add_dist_info(site, "torch", torch, requires, installer, files, extra_record)
    tag_cuda = cuda if tv_cuda is _SAME else tv_cuda
    torch_base = torch.split("+")[0] if torch else None
    for name, version in (("torchvision", torchvision), ("torchaudio", torchaudio)):
        if version is None:
            continue
        tagged = version if "+" in version else version + (_cuda_tag(tag_cuda) if tag_cuda else "")
        # Real torchvision computes `cuda` at import (from torchvision.extension); keep that shape.
        files = {
            f"{name}/__init__.py": _INIT_BODIES[import_behaviour],
            f"{name}/version.py": (
                f"__version__ = {tagged!r}\ngit_version = {FAKE_GIT_VERSION!r}\n"
                f"from {name}.extension import _check_cuda_version\n"
                "if _check_cuda_version() > 0:\n    cuda = _check_cuda_version()\n"
            ),
        }
        pin = [f"torch (=={torch_base})"] if torch_base else ["torch"]
        add_dist_info(site, name, version, ["numpy"] + pin, installer, files)
    if deps:
        install_declared(site, python)
    return python_of(root)


def install_declared(site: Path, python: str) -> None:
    """Write a metadata-only distribution for every requirement the torch family in ``site`` declares and that
    holds for ``python`` (its markers evaluated there), at the lowest version the requirement allows."""
    import json

    from packaging.requirements import Requirement

    env = json.loads(subprocess.run(
        [python, "-c", "import json, os, platform, sys; print(json.dumps({'os_name': os.name, "
         "'sys_platform': sys.platform, 'platform_machine': platform.machine(), 'platform_system': "
         "platform.system(), 'python_version': '%d.%d' % sys.version_info[:2], 'python_full_version': "
         "platform.python_version(), 'implementation_name': sys.implementation.name, "
         "'platform_python_implementation': platform.python_implementation(), 'extra': ''}))"],
        check=True, capture_output=True, text=True).stdout)
    present = {p.name.split("-")[0].lower().replace("_", "-") for p in Path(site).glob("*.dist-info")}
    wanted: dict[str, str] = {}
    for dist_info in sorted(Path(site).glob("*.dist-info")):
        for line in (dist_info / "METADATA").read_text().splitlines():
            if not line.startswith("Requires-Dist: "):
                continue
            req = Requirement(line[len("Requires-Dist: "):])
            name = req.name.lower().replace("_", "-")
            if name in present or (req.marker is not None and not req.marker.evaluate(env)):
                continue
            wanted.setdefault(name, _lowest(req))
    for name, version in wanted.items():
        add_dist_info(site, name, version)


def _lowest(req) -> str:
    """A version the requirement allows: its == or >= bound ("12.6.*" becomes "12.6.0"), else 1.0."""
    for spec in req.specifier:
        if spec.operator in ("==", "===", ">=", "~="):
            return spec.version.replace(".*", ".0")
    return "1.0"


def default_torch_requires(cuda: str | None) -> list[str]:
    """Requires-Dist lines shaped like real Linux wheels' METADATA (torch 2.6.0, 2.14.1)."""
    base = ["filelock", "typing-extensions>=4.10.0", "sympy>=1.13.3", "networkx", "jinja2", "fsspec"]
    if not cuda:
        return base
    major = int(cuda.split(".")[0])
    marker = '; platform_system == "Linux"'
    if major >= 13:
        pins = [
            f"cuda-toolkit[cublas,cudart,cufft,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]=={cuda}.3{marker}",
            f"nvidia-cudnn-cu{major}==9.24.0.43{marker}",
        ]
    else:
        pins = [
            f'nvidia-cuda-runtime-cu{major}=={cuda}.77{marker} and platform_machine == "x86_64"',
            f'nvidia-cudnn-cu{major}==9.5.1.17{marker} and platform_machine == "x86_64"',
        ]
    return base + pins


def add_dist_info(
    site: Path,
    name: str,
    version: str,
    requires: list[str] | None = None,
    installer: str | None = "pip",
    files: dict[str, str] | None = None,
    extra_record: list[str] | None = None,
) -> Path:
    """Write ``<name>-<version>.dist-info`` (and ``files``) into ``site``; return the dist-info path."""
    site = Path(site)
    files = files or {}
    for relative, text in files.items():
        target = site / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    dist_info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    metadata += [f"Requires-Dist: {line}" for line in requires or []]
    (dist_info / "METADATA").write_text("\n".join(metadata) + "\n")
    if installer is not None:
        # pip writes "pip\n"; uv writes "uv" without a newline.
        (dist_info / "INSTALLER").write_text(installer if installer == "uv" else installer + "\n")
    record = [f"{path},," for path in list(files) + list(extra_record or [])]
    record += [f"{dist_info.name}/{f},," for f in ("METADATA", "INSTALLER", "RECORD")]
    (dist_info / "RECORD").write_text("\n".join(record) + "\n")
    return dist_info


def site_packages(root: Path) -> Path:
    """The venv's site-packages folder (POSIX lib/pythonX.Y/site-packages or Windows Lib/...)."""
    root = Path(root)
    found = sorted(root.glob("lib/python*/site-packages")) + sorted(root.glob("Lib/site-packages"))
    if not found:
        raise FileNotFoundError(f"no site-packages under {root}")
    return found[0]


def python_of(root: Path) -> Path:
    root = Path(root)
    for candidate in (root / "bin" / "python", root / "Scripts" / "python.exe"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"no python in {root}")


def _cuda_tag(cuda: str) -> str:
    return "+cu" + cuda.replace(".", "")


# --- real interpreters -----------------------------------------------------------------------------


def pyenv_root() -> Path | None:
    """pyenv's root from ``pyenv root``, $PYENV_ROOT or ~/.pyenv; None when there is no pyenv."""
    import os
    import shutil

    exe = shutil.which("pyenv")
    if exe:
        done = subprocess.run([exe, "root"], capture_output=True, text=True, timeout=20)
        if done.returncode == 0 and done.stdout.strip():
            return Path(done.stdout.strip())
    for candidate in (os.environ.get("PYENV_ROOT"), str(Path.home() / ".pyenv")):
        if candidate and Path(candidate, "versions").is_dir():
            return Path(candidate)
    return None


def find_python(version: str) -> str | None:
    """A real interpreter for ``version`` ("3.8", "2.7"...): pyenv's, then ``pythonX.Y`` on PATH."""
    import shutil

    root = pyenv_root()
    if root is not None:
        matches = sorted(
            (p for p in (root / "versions").glob(f"{version}.*") if p.name.replace(".", "").isdigit()),
            key=lambda p: [int(x) for x in p.name.split(".")],
        )
        for folder in reversed(matches):
            exe = folder / "bin" / "python"
            if exe.exists():
                return str(exe)
    return shutil.which(f"python{version}")


# --- a "system" interpreter: a real one under a prefix of our own --------------------------------------


def make_system_python(
    root: Path,
    python: str,
    externally_managed: str | None = None,
    free_threaded: bool = False,
) -> Path:
    """A real interpreter that is not a venv, under ``root`` (``root/bin/python3.X``), whose standard library
    is the real one linked in file by file, with an empty site-packages of its own. Python finds its prefix
    from the executable's location, so this copy is a system Python of its own: what a distribution's
    ``/usr/bin/python3`` is, without touching the real one.

    ``externally_managed``: the text of a PEP 668 ``EXTERNALLY-MANAGED`` file in its stdlib (pip refuses to
    install there). ``free_threaded``: its build configuration says ``Py_GIL_DISABLED = 1`` (the variable the
    inspector reads, as a free-threaded 3.13t build has it); the interpreter itself keeps its GIL.
    Needs an interpreter whose binary finds libpython by an absolute RUNPATH or links it statically (pyenv's
    and distributions' do)."""
    import os
    import shutil

    info = subprocess.run(
        [python, "-c", "import sys, sysconfig; print(sys.executable); print(sysconfig.get_path('stdlib')); "
         "print('%d.%d' % sys.version_info[:2])"],
        check=True, capture_output=True, text=True,
    ).stdout.split("\n")
    executable, stdlib, version = Path(os.path.realpath(info[0])), Path(info[1]), info[2]
    root = Path(root)
    (root / "bin").mkdir(parents=True, exist_ok=True)
    exe = root / "bin" / f"python{version}"
    shutil.copy2(executable, exe)
    lib = root / "lib" / f"python{version}"
    lib.mkdir(parents=True, exist_ok=True)
    for entry in stdlib.iterdir():
        if entry.name == "site-packages" or entry.name.startswith("_sysconfigdata"):
            continue
        (lib / entry.name).symlink_to(entry)
    for data in stdlib.glob("_sysconfigdata*.py"):
        text = data.read_text()
        if free_threaded:
            text = text.replace("'Py_GIL_DISABLED': 0", "'Py_GIL_DISABLED': 1")
        (lib / data.name).write_text(text)
    (lib / "site-packages").mkdir(exist_ok=True)
    if externally_managed is not None:
        (lib / "EXTERNALLY-MANAGED").write_text(externally_managed)
    return exe
