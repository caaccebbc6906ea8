"""The machine for the interrupted-fix tests: real pip, a local index, and a torch wheel big enough that
installing it takes seconds (tests/hostile/README.md, "Interrupted fix").

- an RTX 5090 behind the fake nvidia-smi (driver 570.124.04, CUDA 12.8), NVML off, an empty sysroot;
- a local PEP 503 index (tests/wheelhouse.py) with stand-in wheels: torch 2.6.0+cu126 / torchvision
  0.21.0+cu126 / torchaudio 2.6.0+cu126 under cu126/, the 2.7.1+cu128 trio under cu128/, the CUDA runtime
  wheel they require and numpy everywhere. In the "big" index the torch 2.7.1+cu128 wheel carries PAD_MB of
  random (incompressible) bytes, stored, so pip spends seconds hashing and unpacking it;
- a template venv (real pip) holding the 2.6.0+cu126 trio and numpy; each test copies it.

The plan torchdoctor makes for this machine is exactly `pip install torch==2.7.1+cu128
torchvision==0.22.1+cu128 torchaudio==2.7.1+cu128 --index-url <index>/cu128`.

The world is built once into a cache folder shared by the session's tests (and reused by later sessions
of the same user and interpreter while its ``.complete`` marker exists: the padded wheel and the template
venv take ~15 s).
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import zipfile
from dataclasses import dataclass
from pathlib import Path

from fakeenv import find_python, site_packages
from hostile import HOST_ENVIRON, RTX5090, write_fake_nvidia_smi
from wheelhouse import CUDA_RUNTIME, StandIn, build_index, torch_family

PAD_MB = 200
PAD_FILES = 5_000  # pip's time goes per file: 5,000 files take it a second or two to write (and to remove)
CACHE = Path(os.environ.get("TORCHDOCTOR_HOSTILE_CACHE", f"/tmp/torchdoctor-hostile-cache-{os.getuid()}"))
OLD = {"torch": "2.6.0+cu126", "torchvision": "0.21.0+cu126", "torchaudio": "2.6.0+cu126"}
NEW = {"torch": "2.7.1+cu128", "torchvision": "0.22.1+cu128", "torchaudio": "2.7.1+cu128"}
BIG_WHEEL = "torch-2.7.1+cu128-py3-none-any.whl"


@dataclass
class FixWorld:
    root: Path
    py: str  # the base interpreter of the template venv
    big: Path  # index with the padded torch 2.7.1+cu128
    small: Path  # the same index without the padding
    template: Path
    bin: Path
    sysroot: Path


def wheels() -> list[StandIn]:
    out = torch_family("2.6.0", "0.21.0", "2.6.0", {"cu126": "12.6"})
    out += torch_family("2.7.1", "0.22.1", "2.7.1", {"cu128": "12.8"})
    out.append(StandIn(CUDA_RUNTIME[0], CUDA_RUNTIME[1], (), (), {"nvidia/cuda_runtime/__init__.py": ""}))
    out.append(StandIn("numpy", "1.0.0", (), (), {"numpy/__init__.py": "__version__ = '1.0.0'\n"}))
    return out


def get_fix_world() -> FixWorld | str:
    """The world, built (under a lock) if the cache lacks it; a string says why it cannot be built."""
    py = find_python("3.12") or find_python("3.11")
    if py is None:
        return "needs a real Python 3.12 or 3.11 interpreter (pyenv) for the target venv"
    # The fake nvidia-smi's shebang names this interpreter: a cache built by another checkout's venv (gone
    # since, maybe) is not this one's.
    builder = hashlib.sha256(sys.executable.encode()).hexdigest()[:10]
    root = CACHE / f"pad{PAD_MB}x{PAD_FILES}-{builder}"
    world = FixWorld(
        root, py, root / "big", root / "small", root / "template", root / "bin", root / "sysroot"
    )
    root.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / ".complete").exists():
            for child in root.iterdir():
                shutil.rmtree(child) if child.is_dir() else child.unlink()
            _build(world)
            (root / ".complete").write_text("ok\n")
    return world


def _build(world: FixWorld) -> None:
    build_index(world.small, wheels())
    build_index(world.big, wheels())
    _pad(world.big, BIG_WHEEL, PAD_MB)
    write_fake_nvidia_smi(world.bin, [RTX5090], driver="570.124.04", cuda="12.8")
    world.sysroot.mkdir()
    subprocess.run(
        [world.py, "-m", "venv", str(world.template)], check=True, capture_output=True, timeout=300
    )
    pins = [f"{n}=={v}" for n, v in OLD.items()] + ["numpy==1.0.0"]
    subprocess.run(
        [
            str(world.template / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            *pins,
            "--index-url",
            world.small.as_uri() + "/cu126",
        ],
        check=True,
        capture_output=True,
        env=pip_env(),
        timeout=300,
    )


def _pad(index: Path, filename: str, megabytes: int, files: int = PAD_FILES) -> None:
    """Rewrite ``filename`` with ``megabytes`` of random bytes added in ``files`` files (stored: no
    compression to hide behind; many files: pip spends seconds writing them), its RECORD updated, and the
    sha256 in every index page that links it."""
    path = index / "files" / filename
    tmp = path.with_suffix(".tmp")
    size = (megabytes << 20) // files
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", allowZip64=True) as dst:
        record_name = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        lines = []
        for number in range(files):
            name = f"torch/lib/standin_padding/{number:05d}.bin"
            data = os.urandom(size)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            lines.append(f"{name},sha256={digest},{size}")
            dst.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data, zipfile.ZIP_STORED)
        for name in src.namelist():
            data = src.read(name)
            if name == record_name:
                data = data.replace(
                    f"{record_name},,".encode(), ("\n".join(lines) + f"\n{record_name},,").encode()
                )
            dst.writestr(name, data, zipfile.ZIP_DEFLATED)
    tmp.replace(path)
    sha = _sha256(path)
    link = re.compile(re.escape(urllib.parse.quote(filename)) + "#sha256=[0-9a-f]+")
    for page in index.glob("*/torch/index.html"):
        page.write_text(link.sub(f"{urllib.parse.quote(filename)}#sha256={sha}", page.read_text()))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def pip_env(extra: dict | None = None) -> dict:
    env = {
        k: v for k, v in HOST_ENVIRON.items()
        if not k.startswith(("PIP_", "UV_")) and k not in ("VIRTUAL_ENV",)
    }
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.update(extra or {})
    return env


def fresh_venv(world: FixWorld, dest: Path) -> Path:
    shutil.copytree(world.template, dest, symlinks=True)
    return dest


def installed(venv: Path) -> dict[str, str]:
    """name -> version from every dist-info, plus '<pkg>/version.py' -> its __version__ for the torch trio."""
    site = site_packages(venv)
    out = {}
    for dist in site.glob("*.dist-info"):
        meta = dist / "METADATA"
        if meta.is_file():
            fields = dict(line.split(": ", 1) for line in meta.read_text().splitlines() if ": " in line)
            out[fields.get("Name", dist.name)] = fields.get("Version", "?")
    for name in OLD:
        version_py = site / name / "version.py"
        if version_py.is_file():
            found = re.search(r"__version__ = '([^']*)'", version_py.read_text())
            out[f"{name}/version.py"] = found.group(1) if found else "?"
    return out


def leftovers(venv: Path) -> list[str]:
    """What an interrupted pip leaves in site-packages: its renamed `~orch` folders."""
    return sorted(p.name for p in site_packages(venv).iterdir() if p.name.startswith("~"))


def pip_check(venv: Path) -> tuple[int, str]:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "check"],
        capture_output=True,
        text=True,
        env=pip_env(),
        timeout=120,
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def has_builds(state: dict[str, str], builds: dict[str, str]) -> bool:
    return all(state.get(n) == v and state.get(f"{n}/version.py") == v for n, v in builds.items())


def cli_env(world: FixWorld, base: dict) -> dict:
    env = dict(base)
    env["PATH"] = f"{world.bin}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["TORCHDOCTOR_SYSROOT"] = str(world.sysroot)
    return env
