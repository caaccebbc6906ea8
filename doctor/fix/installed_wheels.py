"""After a uv install: are the torch-family files in the environment those of a wheel the plan's own
sources hold? (issue 27)

uv records no source. An index install leaves no ``direct_url.json`` and uv writes no report; INSTALLER
says "uv"; the WHEEL file's ``Tag`` lines and any ``Build`` line say what the wheel claimed about itself
(an impostor claims the same); RECORD is copied from the wheel. And uv links the files from its cache
without hashing them again: a cache changed since (``UV_CACHE_DIR`` shared with a CI job, say) installs
other files under the original RECORD. What can be checked honestly is the content: fix hashes the
installed files of each torch-family distribution the install changed and compares them with the RECORD
of a wheel of that name and version that the plan's sources hold; files the wheel does not have, missing
files and other bytes all fail.

That needs the plan's wheel, so it is done where every source of the plan is local (a ``file://`` index,
a find-links folder): the wheel is read there. For a remote index it would mean downloading the wheel
again; fix does not, and says so in its summary (the install ran with only the plan's sources:
doctor/fix/sources.py).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit
from urllib.request import url2pathname

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from doctor.model.files import read_text
from doctor.plan import installers
from doctor.plan.commands import named_sources

PAGE_LIMIT = 16 << 20
RECORD_LIMIT = 64 << 20
# What an installer adds to a dist-info folder of its own: not the wheel's.
INSTALLER_FILES = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json", "uv_cache.json"}


def local_sources(install: list[str]) -> list[Path] | None:
    """The folders of the install command's sources (index URLs and find-links), when every one is local;
    None when one is remote (or the command names none: the default index)."""
    indexes, links, _ = named_sources(install)
    out = []
    for source in indexes + links:
        path = _local(source)
        if path is None:
            return None
        out.append(path)
    return out or None


def _local(source: str) -> Path | None:
    if "://" not in source:
        return Path(source).absolute()
    parts = urlsplit(source)
    return Path(url2pathname(unquote(parts.path))) if parts.scheme == "file" else None


def plan_wheels(install: list[str], name: str, version: str) -> list[Path]:
    """The wheel files of ``name`` ``version`` that the command's local sources hold: linked from the
    index's project page (PEP 503: ``<index>/<name>/``), or lying in a find-links folder."""
    indexes, links, _ = named_sources(install)
    out = []
    project = canonicalize_name(name)
    for index in indexes:
        folder = _local(index)
        page = folder / project / "index.html" if folder else None
        text = read_text(str(page), PAGE_LIMIT) if page else None
        if text:
            out += [w for w in _linked(text, page.as_uri()) if _wheel_of(w, project, version)]
    for link in links:
        folder = _local(link)
        if folder and folder.is_dir():
            out += sorted(w for w in folder.glob("*.whl") if _wheel_of(w, project, version))
    return out


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [value for key, value in attrs if key == "href" and value]


def _linked(page_text: str, page_url: str) -> list[Path]:
    parser = _Links()
    parser.feed(page_text)
    out = []
    for href in parser.hrefs:
        url = urljoin(page_url, href).partition("#")[0]
        path = _local(url)
        if path is not None and path.suffix == ".whl":
            out.append(path)
    return out


def _wheel_of(path: Path, project: str, version: str) -> bool:
    """Whether the file is a wheel of ``project`` ``version`` by its name."""
    try:
        name, found, _build, _tags = parse_wheel_filename(unquote(path.name))
    except (InvalidWheelFilename, InvalidVersion):
        return False
    return name == project and _same_version(str(found), version)


def installed_dist_info(folders: list[str], name: str, version: str) -> Path | None:
    """The ``<name>-<version>.dist-info`` folder of one distribution in the site-packages ``folders``."""
    project = canonicalize_name(name)
    for folder in folders:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            dist, _, ver = entry[: -len(".dist-info")].partition("-")
            if canonicalize_name(dist) == project and _same_version(ver, version):
                return Path(folder) / entry
    return None


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def wheel_record(wheel: Path) -> dict[str, str] | None:
    """{path as installed, relative to site-packages: "sha256=..."} of the wheel's RECORD; None when the
    wheel cannot be read. Files under ``.data/purelib`` and ``.data/platlib`` land in site-packages; the
    other ``.data`` folders (scripts, headers, data) elsewhere, rewritten (scripts): not compared."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD")]
            if len(names) != 1:
                return None
            with archive.open(names[0]) as handle:
                text = handle.read(RECORD_LIMIT).decode("utf-8", "replace")
    except (OSError, zipfile.BadZipFile, KeyError, ValueError):
        return None
    out = {}
    for path, digest in _record_lines(text):
        top, _, rest = path.partition("/")
        if top.endswith(".data"):
            kind, _, inside = rest.partition("/")
            if kind not in ("purelib", "platlib"):
                continue
            path = inside
        out[path] = digest
    return out


def _record_lines(text: str) -> list[tuple[str, str]]:
    """(path, hash) of each RECORD line that has a hash (RECORD's own line has none)."""
    out = []
    for row in csv.reader(text.splitlines()):
        if len(row) >= 2 and row[0] and row[1]:
            out.append((row[0], row[1]))
    return out


def same_files(dist_info: Path, record: dict[str, str]) -> str | None:
    """Why the installed distribution is not the wheel whose RECORD is ``record``; None when every file of
    the wheel is there with its bytes and the installed RECORD lists no file the wheel lacks."""
    site = dist_info.parent
    for path, digest in record.items():
        algorithm, _, want = digest.partition("=")
        if algorithm not in hashlib.algorithms_guaranteed:
            return f"{path}: RECORD names an unknown hash ({algorithm})"
        have = _digest(site / path, algorithm)
        if have is None:
            return f"{path} is missing"
        if have != want:
            return f"{path} holds other bytes"
    installed = read_text(str(dist_info / "RECORD"), RECORD_LIMIT)
    if installed is None:
        return "its RECORD cannot be read"
    for path, _digest_value in _record_lines(installed):
        if path.startswith("../") or "__pycache__/" in path:
            continue  # scripts uv wrote into bin/, and bytecode it compiled
        if path.startswith(dist_info.name + "/") and path.rpartition("/")[2] in INSTALLER_FILES:
            continue
        if path not in record:
            return f"{path} is not in the plan's wheel"
    return None


def _digest(path: Path, algorithm: str) -> str | None:
    digest = hashlib.new(algorithm)
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def not_the_plans(changed: list, folders: list[str], install: list[str], pins: list[str]) -> list[tuple]:
    """(name, why) for each torch-family distribution the install put in (``changed``: what the two freezes
    say changed) whose files are not those of a wheel of the plan's local sources. The pinned ones always;
    the rest of the family where the command replaces the default index (as sources.foreign)."""
    _, _, whole_family = named_sources(install)
    pinned = {canonicalize_name(p.partition("==")[0]) for p in pins}
    out = []
    for change in changed:
        name = canonicalize_name(change.name)
        if change.new is None or not installers.in_torch_family(name):
            continue
        if name not in pinned and not whole_family:
            continue
        what = f"{name} {change.new}"
        dist_info = installed_dist_info(folders, name, change.new)
        if dist_info is None:
            out.append((name, f"the installed {what} cannot be found"))
            continue
        wheels = plan_wheels(install, name, change.new)
        if not wheels:
            out.append((name, f"no {what} wheel is in the plan's sources"))
            continue
        whys = []
        for wheel in wheels:
            record = wheel_record(wheel)
            why = same_files(dist_info, record) if record is not None else f"{wheel.name} cannot be read"
            if why is None:
                break
            whys.append(why)
        else:
            out.append((name, f"its installed files are not the plan's {what} wheel ({whys[0]})"))
    return out
