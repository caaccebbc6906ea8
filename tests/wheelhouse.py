"""Tiny stand-in wheels and local package indexes for the `torchdoctor fix` end-to-end tests.

Each wheel is a valid wheel (``METADATA``, ``WHEEL``, ``RECORD`` with sha256 hashes) built with
``zipfile``; the torch family carries ``<pkg>/version.py`` shaped like the real one (``cuda`` set
on CUDA builds) and an ``__init__.py`` that raises, so nothing can import it by mistake. Tags are
``py3-none-any`` so any interpreter accepts them. The default set mirrors what
download.pytorch.org/whl/cu121/torch/ serves for torch 2.5.1: ``+cpu`` and ``+cu121`` builds of
torch/torchvision/torchaudio, the ``nvidia-cuda-runtime-cu12`` pin the CUDA build requires, and
an unrelated ``numpy`` in two versions (1.0.0 to install, 2.0.0 to prove nothing upgrades it).

Layouts:

- ``build_index(root, wheels)``: a PEP 503 index per variant, ``root/<variant>/<project>/index.html``
  (what ``--index-url-base file://root`` turns into ``file://root/cu121``), files under ``root/files``;
- ``build_flat(dir, wheels)``: every wheel in one folder (``--find-links DIR --no-index``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import shutil
import urllib.parse
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

IMPORT_MUST_NOT_HAPPEN = "torchdoctor fix test stand-in: import must not happen"
CUDA_RUNTIME = ("nvidia-cuda-runtime-cu12", "12.1.105")


@dataclass(frozen=True)
class StandIn:
    name: str
    version: str
    variants: tuple[str, ...]  # the index folders that serve it ("cpu", "cu121"); () = every one
    requires: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def filename(self) -> str:
        return f"{self.name.replace('-', '_')}-{self.version}-py3-none-any.whl"


def version_py(version: str, cuda: str | None) -> str:
    return (
        f"__version__ = {version!r}\ndebug = False\ncuda = {cuda!r}\n"
        "git_version = '0123456789abcdef0123456789abcdef01234567'\nhip = None\nxpu = None\n"
    )


def torch_family(
    torch: str = "2.5.1",
    vision: str = "0.20.1",
    audio: str = "2.5.1",
    variants: dict[str, str | None] | None = None,
) -> list[StandIn]:
    """torch/torchvision/torchaudio for each variant ({"cpu": None, "cu121": "12.1"}: variant -> cuda)."""
    variants = {"cpu": None, "cu121": "12.1"} if variants is None else variants
    raising = f"raise RuntimeError({IMPORT_MUST_NOT_HAPPEN!r})\n"
    out = []
    for variant, cuda in variants.items():
        tv = f"{torch}+{variant}"
        deps = [f"{CUDA_RUNTIME[0]}=={CUDA_RUNTIME[1]}"] if cuda else []
        out.append(
            StandIn(
                "torch",
                tv,
                (variant,),
                tuple(deps),
                {"torch/__init__.py": raising, "torch/version.py": version_py(tv, cuda)},
            )
        )
        for name, ver in (("torchvision", vision), ("torchaudio", audio)):
            full = f"{ver}+{variant}"
            out.append(
                StandIn(
                    name,
                    full,
                    (variant,),
                    ("numpy", f"torch=={torch}"),
                    {f"{name}/__init__.py": raising, f"{name}/version.py": version_py(full, cuda)},
                )
            )
    return out


def default_wheels() -> list[StandIn]:
    wheels = torch_family()
    wheels.append(
        StandIn(CUDA_RUNTIME[0], CUDA_RUNTIME[1], ("cu121",), (), {"nvidia/cuda_runtime/__init__.py": ""})
    )
    for version in ("1.0.0", "2.0.0"):
        wheels.append(
            StandIn("numpy", version, (), (), {"numpy/__init__.py": f"__version__ = {version!r}\n"})
        )
    return wheels


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(folder: Path, wheel: StandIn, extra_files: dict[str, str] | None = None) -> Path:
    """Write ``wheel`` into ``folder``; return its path. ``extra_files`` go in as they are (no checks)."""
    folder.mkdir(parents=True, exist_ok=True)
    dist_info = f"{wheel.name.replace('-', '_')}-{wheel.version}.dist-info"
    metadata = ["Metadata-Version: 2.1", f"Name: {wheel.name}", f"Version: {wheel.version}"]
    metadata += [f"Requires-Dist: {r}" for r in wheel.requires]
    files = dict(wheel.files)
    files[f"{dist_info}/METADATA"] = "\n".join(metadata) + "\n"
    files[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: torchdoctor-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [_record_line(p, t.encode()) for p, t in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    path = folder / wheel.filename
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in {**files, **(extra_files or {})}.items():
            zf.writestr(name, text)
    return path


def _project_page(name: str, links: list[tuple[str, str]]) -> str:
    anchors = "\n".join(
        f'    <a href="{html.escape(href)}">{html.escape(text)}</a><br/>' for href, text in links
    )
    return f"<!DOCTYPE html>\n<html><body>\n  <h1>Links for {name}</h1>\n{anchors}\n</body></html>\n"


def build_index(root: Path, wheels: list[StandIn] | None = None, broken: set[str] | None = None) -> Path:
    """A PEP 503 index per variant under ``root`` (``root/cpu/torch/index.html`` ...); returns ``root``.

    ``broken``: wheel filenames to build so that installing them fails *after* resolution (a file
    outside the install scheme, which pip refuses while installing, not while resolving).
    """
    wheels = default_wheels() if wheels is None else wheels
    files = root / "files"
    built = {}
    for w in wheels:
        extra = {"../../escape.txt": "x"} if broken and w.filename in broken else None
        built[w] = build_wheel(files, w, extra)
    variants = sorted({v for w in wheels for v in w.variants})
    for variant in variants:
        served = [w for w in wheels if not w.variants or variant in w.variants]
        projects: dict[str, list[StandIn]] = {}
        for w in served:
            projects.setdefault(w.name, []).append(w)
        (root / variant).mkdir(parents=True, exist_ok=True)
        (root / variant / "index.html").write_text(
            _project_page("simple", [(f"{p}/", p) for p in sorted(projects)])
        )
        for project, ws in projects.items():
            page = root / variant / project / "index.html"
            page.parent.mkdir(parents=True, exist_ok=True)
            links = []
            for w in ws:
                digest = hashlib.sha256(built[w].read_bytes()).hexdigest()
                links.append((f"../../files/{urllib.parse.quote(w.filename)}#sha256={digest}", w.filename))
            page.write_text(_project_page(project, links))
    return root


def build_flat(folder: Path, wheels: list[StandIn] | None = None) -> Path:
    """Every wheel in one flat folder, for ``--find-links``."""
    wheels = default_wheels() if wheels is None else wheels
    for w in wheels:
        build_wheel(folder, w)
    return folder


def copy_index(source: Path, mirror: Path) -> Path:
    """A second, independent copy of an index (a stand-in for a mirror of download.pytorch.org/whl)."""
    shutil.copytree(source, mirror)
    return mirror
