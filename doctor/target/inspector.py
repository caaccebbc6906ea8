"""Describe this interpreter and its installed torch as one JSON object, WITHOUT importing torch.

torchdoctor runs this file by path in the *target* interpreter (see ``interpreter.py``). It is stdlib-only and
must run on Python 3.6 to 3.14 (torch 1.x had wheels for 3.6 and 3.7). The whole file also stays *parsable* by
Python 2.7 (no f-strings, annotations, keyword-only arguments) so that a too-old target prints a clean JSON
error instead of a SyntaxError. It reads files only: ``find_spec`` locates a package without executing it,
``version.py`` is parsed with ``ast``, dist-info is read as text.
"""

from __future__ import print_function

import os  # already loaded by the interpreter's start-up, so nothing can shadow it
import sys

# Running a file puts its folder (doctor/probes) first on sys.path. Drop it before any other
# import so nothing in torchdoctor's own folder can shadow a stdlib module or ``torch``.
try:
    if sys.path and os.path.realpath(sys.path[0] or ".") == os.path.dirname(os.path.realpath(__file__)):
        del sys.path[0]
except Exception:
    pass

import json  # noqa: E402
import re  # noqa: E402
from collections import Counter  # noqa: E402

SCHEMA = 1
MIN_PYTHON = (3, 6)
PACKAGES = ("torch", "torchvision", "torchaudio")
# Distributions worth listing besides the three packages (duplicates, CUDA wheels, NVML bindings).
EXTRA_DISTS = ("pynvml", "nvidia-ml-py", "cuda-toolkit", "cuda-bindings", "triton", "pytorch-triton")
CONDA_NAMES = ("pytorch", "pytorch-gpu", "pytorch-cuda", "cudatoolkit", "cpuonly", "libtorch", "torchvision",
               "torchaudio")
VERSION_PY_FIELDS = ("__version__", "cuda", "hip", "rocm", "xpu", "git_version", "debug")
# Shared libraries whose presence tells the build kind (RECORD first, then the file system).
BUILD_LIBS = {
    "cuda": ("torch/lib/libtorch_cuda.so", "torch/lib/torch_cuda.dll"),
    "hip": ("torch/lib/libtorch_hip.so", "torch/lib/torch_hip.dll"),
}


def _version_string():
    return sys.version.split()[0]


def _too_old():
    """The JSON for an interpreter torch (and this script) cannot serve."""
    version = _version_string()
    impl = getattr(getattr(sys, "implementation", None), "name", "cpython")
    return {
        "inspector": SCHEMA,
        "error": "too-old",
        "detail": "Python %s is too old: torch needs 3.6+ (current releases need 3.10+)" % version,
        "interpreter": {"version": version, "implementation": impl, "executable": sys.executable},
    }


# --- the interpreter ----------------------------------------------------------------------------


def _read_text(path, limit=None):
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit) if limit else handle.read()
    except (IOError, OSError):
        return None
    return data.decode("utf-8", "replace")


def _parse_pyvenv_cfg(text):
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def _env_kind(prefix, base_prefix, pyvenv_cfg):
    if pyvenv_cfg is not None or prefix != base_prefix:
        return "uv-venv" if pyvenv_cfg and "uv" in pyvenv_cfg else "venv"
    if os.path.isdir(os.path.join(prefix, "conda-meta")):
        return "conda-base" if _is_conda_base(prefix) else "conda"
    return "system"


def _is_conda_base(prefix):
    # Named environments live in <base>/envs/<name>; the base one holds conda itself.
    if os.path.basename(os.path.dirname(prefix.rstrip("/\\"))) == "envs":
        return False
    return os.path.isdir(os.path.join(prefix, "condabin")) or os.path.isdir(os.path.join(prefix, "envs"))


def describe_interpreter():
    import struct
    import sysconfig

    prefix = sys.prefix
    base_prefix = getattr(sys, "base_prefix", prefix)
    cfg_text = _read_text(os.path.join(prefix, "pyvenv.cfg"))
    pyvenv_cfg = _parse_pyvenv_cfg(cfg_text) if cfg_text is not None else None
    is_venv = pyvenv_cfg is not None or prefix != base_prefix

    marker_text = None
    stdlib = sysconfig.get_path("stdlib")
    if stdlib and not is_venv:
        marker_text = _read_text(os.path.join(stdlib, "EXTERNALLY-MANAGED"), 8192)

    user_site = {"enabled": False, "path": None}
    try:
        import site

        user_site = {"enabled": bool(site.ENABLE_USER_SITE), "path": site.getusersitepackages()}
    except Exception:
        pass

    return {
        "version": _version_string(),
        "implementation": sys.implementation.name,
        "bits": struct.calcsize("P") * 8,
        "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "prefix": prefix,
        "base_prefix": base_prefix,
        "executable": sys.executable,
        "env_kind": _env_kind(prefix, base_prefix, pyvenv_cfg),
        "externally_managed": marker_text is not None,
        "externally_managed_text": marker_text,
        "pyvenv_cfg": pyvenv_cfg,
        "sys_path": list(sys.path),
        "user_site": user_site,
        # macOS only: an x86_64 interpreter on Apple silicon runs under Rosetta 2 (no MPS, no arm64 wheels)
        "machine": os.uname().machine if sys.platform == "darwin" else None,
    }


# --- distributions ------------------------------------------------------------------------------


def _normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _wanted(name):
    return name in PACKAGES or name in EXTRA_DISTS or name.startswith(("nvidia-", "pytorch-triton"))


def _name_from_dir(path):
    """'torch-2.6.0+cu126.dist-info' -> 'torch' without reading METADATA (cheap filter)."""
    base = os.path.basename(str(path))
    for suffix in (".dist-info", ".egg-info"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    return _normalize(base.split("-")[0])


def _dist_path(dist):
    return getattr(dist, "_path", None)  # PathDistribution: the dist-info folder (3.8 to 3.14)


def _dist_record(dist, name):
    path = _dist_path(dist)
    location = None
    try:
        location = str(dist.locate_file(""))
    except Exception:
        if path is not None:
            location = os.path.dirname(str(path))
    installer = None
    try:
        text = dist.read_text("INSTALLER")
        if text is not None:
            installer = text.strip() or None
    except Exception:
        pass
    try:
        version = dist.version
    except Exception:
        version = None
    return {
        "name": name,
        "version": version,
        "location": location,
        "installer": installer,
        "path": str(path) if path is not None else None,
    }


class _DistInfo(object):
    """The part of ``importlib.metadata.PathDistribution`` this script uses, for a *.dist-info folder.

    importlib.metadata imports email, pathlib, zipfile and csv, most of the inspector's work; a dist-info
    folder is simple enough to read directly (PEP 376/566).
    """

    def __init__(self, path):
        self._path = path
        self._headers = None

    def locate_file(self, name):
        return os.path.join(os.path.dirname(self._path), name) if name else os.path.dirname(self._path)

    def read_text(self, filename):
        try:
            with open(os.path.join(self._path, filename), encoding="utf-8") as handle:
                return handle.read()
        except (IOError, OSError, ValueError):
            return None

    def _all_headers(self):
        """METADATA's header block as [(lowercased name, value)], like email's parser keeps it."""
        if self._headers is None:
            text = self.read_text("METADATA") or self.read_text("PKG-INFO") or ""
            headers = []
            for line in text.split("\n\n", 1)[0].split("\n"):
                line = line.rstrip("\r")
                if not line:
                    break  # the body (the long description) starts after the first empty line
                if line[0] in " \t" and headers:
                    headers[-1] = (headers[-1][0], headers[-1][1] + "\n" + line)
                    continue
                key, sep, value = line.partition(":")
                if sep:
                    headers.append((key.strip().lower(), value.lstrip(" \t")))
            self._headers = headers
        return self._headers

    def _get_all(self, key):
        return [value for name, value in self._all_headers() if name == key]

    @property
    def metadata(self):
        first = {}
        for name, value in self._all_headers():
            first.setdefault(name, value)
        return _Headers(first)

    @property
    def version(self):
        found = self._get_all("version")
        return found[0] if found else None

    @property
    def requires(self):
        found = self._get_all("requires-dist")
        return found if found else None


class _Headers(dict):
    """``metadata["Name"]`` like email.message.Message: case-insensitive, None when absent."""

    def __getitem__(self, key):
        return self.get(key.lower())


def _fast_distributions():
    """The *.dist-info folders in the sys.path folders, in order, or None when only
    importlib.metadata can be trusted: a zip on sys.path, a finder that adds distributions of its
    own, an interesting *.egg-info (its requires.txt has another format), or a non-POSIX system.
    """
    import importlib.machinery

    if os.sep != "/":
        return None
    for finder in sys.meta_path:
        if getattr(finder, "find_distributions", None) and finder is not importlib.machinery.PathFinder:
            return None
    found = []
    for entry in sys.path:
        folder = entry or "."
        if os.path.isfile(folder):
            return None  # a zip archive: importlib.metadata reads inside it
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            low = name.lower()
            if low.endswith(".egg-info"):
                if _wanted(_normalize(low[: -len(".egg-info")].partition("-")[0])):
                    return None
            elif low.endswith(".dist-info"):
                found.append(_DistInfo(os.path.join(folder.rstrip("/") or "/", name)))
    return found


def _distributions():
    try:
        fast = _fast_distributions()
    except Exception:
        fast = None
    if fast is not None:
        return fast
    try:
        import importlib.metadata as metadata
    except ImportError:  # Python 3.6 and 3.7: no importlib.metadata, read the folders ourselves
        return _sibling("installed").scanned_distributions(_DistInfo)
    return list(metadata.distributions())


def list_dists():
    """Every interesting distribution on sys.path, in sys.path order, duplicates kept.

    Returns (records, dist objects keyed by record index) so the package details can reuse them.
    """
    records = []
    objects = []
    for dist in _distributions():
        path = _dist_path(dist)
        if path is not None:
            name = _name_from_dir(path)
        else:
            try:
                name = _normalize(dist.metadata["Name"] or "")
            except Exception:
                continue
        if not _wanted(name):
            continue
        record = _dist_record(dist, name)
        if path is not None and record["version"] is not None:
            # The folder-name prefix can lie (e.g. 'torch_nightly'); trust METADATA's Name.
            try:
                real = _normalize(dist.metadata["Name"] or name)
            except Exception:
                real = name
            if real != name:
                record["name"] = real
                if not _wanted(real):
                    continue
        records.append(record)
        objects.append(dist)
    # sys.path order across folders; within one folder listdir order is arbitrary, so sort by name.
    first_seen = {}
    for record in records:
        first_seen.setdefault(record["location"], len(first_seen))
    order = sorted(
        range(len(records)), key=lambda i: (first_seen[records[i]["location"]], records[i]["path"] or "")
    )
    return [records[i] for i in order], [objects[i] for i in order]


# torch's generated version.py is a few lines of `name[: type] = literal`; reading those with a regex
# spares every check the import of ast. Any other line sends the whole file to ast.
_SIMPLE_LINE = re.compile(
    r"""^(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*[A-Za-z_][A-Za-z0-9_.\[\], ]*)?\s*=\s*"""
    r"""(?P<value>'[^'\\\n]*'|"[^"\\\n]*"|None|True|False|-?[0-9]+)"""
    r"""|__all__\s*=\s*\[[A-Za-z0-9_'", ]*\]"""
    r"""|from [A-Za-z0-9_.]+ import [A-Za-z0-9_, ]+|import [A-Za-z0-9_.]+)\s*$"""
)
_LITERALS = {"None": None, "True": True, "False": False}
# Also read by the line parser without ast: torchvision's `if _check_cuda_version() > 0:` block (its
# indented body is not top-level, so ast's reading skips it too) and assignments to other names.
_BLOCK_HEADER = re.compile(r"^if [^#]*:\s*$")
_OTHER_ASSIGNMENT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]*)?=[^=]")


def _parse_simple_version_py(text):
    """The values of a version.py made only of simple lines, or None if any line is not simple."""
    values = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line[0] in " \t" or _BLOCK_HEADER.match(line):
            continue
        match = _SIMPLE_LINE.match(line)
        if match is None:
            other = _OTHER_ASSIGNMENT.match(line)
            if other is not None and other.group("name") not in VERSION_PY_FIELDS:
                continue
            return None
        name, value = match.group("name"), match.group("value")
        if name in VERSION_PY_FIELDS:
            if value in _LITERALS:
                values[name] = _LITERALS[value]
            elif value[0] in "'\"":
                values[name] = value[1:-1]
            else:  # a 5,000-digit literal is no version field (and int() refuses 4,300+ digits)
                values[name] = int(value) if len(value) <= 18 else None
    return values


def parse_version_py(text):
    """The literal top-level assignments of a torch-style version.py (never executed)."""
    simple = _parse_simple_version_py(text)
    if simple is not None:
        return simple
    import ast

    values = {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return values
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in VERSION_PY_FIELDS:
                try:
                    values[target.id] = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError):
                    pass
    return values


def _find_package(name):
    """(package folder or None, origin or None) from find_spec: locates without executing."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return None, None
    if spec is None:
        return None, None
    locations = list(spec.submodule_search_locations or [])
    origin = spec.origin if spec.origin not in (None, "namespace") else None
    folder = locations[0] if locations else None
    return folder, origin


def _build_libs(dist, location):
    """{"cuda": bool|None, "hip": bool|None}: RECORD lists every file (one read), else look on disk."""
    record = _read_record(dist)
    found = {}
    for kind, candidates in BUILD_LIBS.items():
        if record:
            found[kind] = any(
                record.startswith(c.encode() + b",") or (b"\n" + c.encode() + b",") in record
                for c in candidates
            )
        elif location:
            found[kind] = any(os.path.exists(os.path.join(location, c)) for c in candidates)
        else:
            found[kind] = None
    return found


def _read_record(dist):
    """torch's RECORD as bytes (1.4 MB: decoding it as text cost more than the search), or None."""
    if dist is None:
        return None
    path = _dist_path(dist)
    if path is not None:
        try:
            with open(os.path.join(str(path), "RECORD"), "rb") as handle:
                return handle.read()
        except (IOError, OSError):
            return None
    try:
        text = dist.read_text("RECORD")
    except Exception:
        return None
    return text.encode("utf-8", "replace") if text else None


def describe_package(name, records, objects):
    folder, origin = _find_package(name)
    chosen = None
    # Prefer the dist-info next to the package that `import` would load; else the first one.
    for record, dist in zip(records, objects):  # noqa: B905 (strict= needs 3.10)
        if record["name"] != name:
            continue
        if chosen is None:
            chosen = (record, dist)
        if (
            folder
            and record["location"]
            and os.path.normcase(os.path.dirname(folder)) == os.path.normcase(record["location"])
        ):
            chosen = (record, dist)
            break
    if chosen is None and folder is None:
        return None

    record, dist = chosen if chosen else ({}, None)
    requires = []
    if dist is not None:
        try:
            requires = list(dist.requires or [])
        except Exception:
            requires = []
    version_py = {}
    if folder:
        text = _read_text(os.path.join(folder, "version.py"), 65536)
        if text is not None:
            version_py = parse_version_py(text)
    location = record.get("location") or (os.path.dirname(folder) if folder else None)
    info = {
        "name": name,
        "version": record.get("version"),
        "dist_path": record.get("path"),
        "installer": record.get("installer"),
        "location": location,
        "folder": folder,
        "origin": origin,
        "requires": requires,
        "version_py": version_py,
    }
    if name == "torch":
        libs = _build_libs(dist, location)
        info["has_libtorch_cuda"] = libs["cuda"]
        info["has_libtorch_hip"] = libs["hip"]
    return info


# pip moves a folder it replaces aside, beside it, as "~" + characters from "-~.=%0123456789" + the name with
# as many leading characters dropped ("~orch", "~orch-2.6.0+cu126.dist-info", "~-rch"): pip's
# AdjacentTempDirectory._generate_names (pip/_internal/utils/temp_dir.py), which StashedUninstallPathSet
# (pip/_internal/req/req_uninstall.py) uses for folders only; files it stashes go to a temporary folder.
PIP_STASH = re.compile(r"^~[-~.=%0-9]*[A-Za-z0-9_][A-Za-z0-9_.+-]*$")


def site_folders():
    """The folders pip and uv install into (purelib, platlib): the only ones their leftovers can be in."""
    import sysconfig

    found = []
    for key in ("purelib", "platlib"):
        try:
            path = sysconfig.get_path(key)
        except Exception:
            continue
        if path and os.path.isdir(path) and path not in found:
            found.append(path)
    return found


def find_leftovers(records=()):
    """What an interrupted install leaves in the interpreter's own site-packages (never elsewhere on sys.path,
    where a user's "~notes/" or "~$Report.docx" is theirs): pip's stash of what it was replacing (folders by
    pip's naming, PIP_STASH), *.dist-info folders without RECORD, one without INSTALLER beside another of the
    same name (a wheel half extracted over a whole install), and a half-written torch, torchvision or
    torchaudio (``half_written``)."""
    found = []
    for entry in site_folders():
        try:
            names = sorted(os.listdir(entry))
        except OSError:
            continue
        dists = Counter(n.split("-")[0].lower() for n in names if n.endswith(".dist-info"))
        for name in names:
            path = os.path.join(entry, name)
            if not os.path.isdir(path) or os.path.islink(path):
                continue
            if name.startswith("~"):
                if PIP_STASH.match(name):
                    found.append(path)
                continue
            twin = name.endswith(".dist-info") and dists[name.split("-")[0].lower()] > 1
            needed = ("RECORD",) + (("INSTALLER",) if twin else ())
            if name.endswith(".dist-info") and not all(os.path.exists(os.path.join(path, f)) for f in needed):
                found.append(path)
        found += [p for p in half_written(entry, records) if p not in found]
    return found


def half_written(folder, records):
    """torch, torchvision or torchaudio in ``folder`` half written by an install that was killed: a dist-info
    whose RECORD lists files that are not there (the path of the dist-info), or a package folder that no
    dist-info or egg-info describes (the path of the folder)."""
    found = []
    described = set()
    for record in records:
        if record.get("name") not in PACKAGES or not record.get("path"):
            continue
        if os.path.realpath(str(record.get("location") or "")) != os.path.realpath(folder):
            continue
        described.add(record["name"])
        if _missing_from_record(folder, record["path"]):
            found.append(record["path"])
    for name in PACKAGES:
        package = os.path.join(folder, name)
        if name not in described and os.path.isfile(os.path.join(package, "__init__.py")):
            found.append(package)
    return found


def _missing_from_record(folder, dist_info):
    """Whether the RECORD was cut off while written (pip and uv end it with a newline), or a Python source it
    lists inside ``folder`` is missing. Sources only: they are what an interrupted install leaves out wherever
    it stopped; compiled files may be cleared without harm, and a missing library is the smoke test's to
    find."""
    import csv

    data = _read_text(os.path.join(dist_info, "RECORD"))
    if data is None:
        return False  # no RECORD: find_leftovers lists it as such
    if not data.endswith("\n"):
        return True
    try:
        rows = list(csv.reader(data.splitlines()))
    except csv.Error:  # a NUL byte or a broken quote: not the RECORD an install that finished writes
        return True
    for row in rows:
        relative = row[0] if row else ""
        if not relative.endswith(".py") or relative.startswith(("..", "/")):
            continue
        if not os.path.exists(os.path.join(folder, relative)):
            return True
    return False


# --- conda --------------------------------------------------------------------------------------


def describe_conda(prefix):
    meta = os.path.join(prefix, "conda-meta")
    if not os.path.isdir(meta):
        return None
    records = []
    try:
        names = sorted(os.listdir(meta))
    except OSError:
        names = []
    for filename in names:
        if not filename.endswith(".json"):
            continue
        parts = filename[: -len(".json")].rsplit("-", 2)
        if len(parts) != 3 or parts[0] not in CONDA_NAMES:
            continue
        # conda writes keys sorted, so "channel" sits near the top: no need to parse the file list.
        head = _read_text(os.path.join(meta, filename), 65536) or ""
        match = re.search(r'"channel"\s*:\s*"([^"]*)"', head)
        channel = match.group(1) if match else None
        records.append({"name": parts[0], "version": parts[1], "build": parts[2], "channel": channel})
    return {"prefix": prefix, "is_base": _is_conda_base(prefix), "records": records}


# --- main ---------------------------------------------------------------------------------------


def _sibling(name):
    """A stdlib-only module beside this file, loaded by path (this folder is off sys.path, on purpose)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.realpath(__file__)), name + ".py")
    spec = importlib.util.spec_from_file_location("_torchdoctor_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inspect():
    out = {"inspector": SCHEMA, "problems": []}
    out["interpreter"] = describe_interpreter()
    try:
        records, objects = list_dists()
    except Exception as exc:
        records, objects = [], []
        out["problems"].append("listing distributions failed: %s: %s" % (type(exc).__name__, exc))
    out["dists"] = records
    out["packages"] = {}
    for name in PACKAGES:
        try:
            out["packages"][name] = describe_package(name, records, objects)
        except Exception as exc:
            out["packages"][name] = None
            out["problems"].append("reading %s failed: %s: %s" % (name, type(exc).__name__, exc))
    torch = out["packages"].get("torch")
    out["torch_origin"] = torch["origin"] if torch else None
    try:
        out["leftovers"] = find_leftovers(records)
    # a RECORD the csv module cannot read (a NUL byte) must not cost the whole answer
    except Exception as exc:
        out["problems"].append("looking for leftovers failed: %s: %s" % (type(exc).__name__, exc))
    try:
        installed = _sibling("installed")
        out["installed"] = installed.installed_versions()
        out["markers"] = installed.marker_environment()
    except Exception as exc:
        out["problems"].append("listing installed versions failed: %s: %s" % (type(exc).__name__, exc))
    # PYTHONPATH folders come before site-packages: a torch there shadows the environment's own
    out["pythonpath"] = os.environ.get("PYTHONPATH")
    try:
        out["conda"] = describe_conda(sys.prefix)
    except Exception as exc:
        out["conda"] = None
        out["problems"].append("reading conda-meta failed: %s: %s" % (type(exc).__name__, exc))
    return out


def main():
    if sys.version_info[:2] < MIN_PYTHON:
        result = _too_old()
    else:
        try:
            result = inspect()
        except Exception as exc:
            result = {"inspector": SCHEMA, "error": "crashed", "detail": "%s: %s" % (type(exc).__name__, exc)}
    if len(sys.argv) > 1:
        # torchdoctor's per-run token: another JSON line printed later is not this
        result["nonce"] = sys.argv[1]
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
