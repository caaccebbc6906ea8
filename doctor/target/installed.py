"""What is installed beside torch, for the inspector (doctor/target/inspector.py loads this file by path).

Runs in the *target* interpreter: stdlib only, Python 3.6+. Names and versions are read from the folder
names a wheel install writes ("numpy-2.1.0.dist-info"), the files only where a name holds no version.
"""

import os
import re
import sys

_VERSION = re.compile(r"^Version:[ \t]*(\S+)", re.M)


def _folders():
    for entry in sys.path:
        folder = entry or "."
        try:
            yield folder, sorted(os.listdir(folder))
        except OSError:
            continue


def _normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def scanned_distributions(dist_info):
    """Every *.dist-info and *.egg-info folder on sys.path as ``dist_info(path)`` objects: what
    importlib.metadata would list, for Python 3.6 and 3.7, which do not have it."""
    return [dist_info(os.path.join(folder, name)) for folder, names in _folders() for name in names
            if name.lower().endswith((".dist-info", ".egg-info"))
            and os.path.isdir(os.path.join(folder, name))]


def _version_from_files(path):
    """The Version header of METADATA or PKG-INFO (an egg-info may be a single PKG-INFO-like file)."""
    candidates = [path]
    if os.path.isdir(path):
        candidates = [os.path.join(path, "METADATA"), os.path.join(path, "PKG-INFO")]
    for candidate in candidates:
        try:
            with open(candidate, "rb") as handle:
                text = handle.read(65536).decode("utf-8", "replace")
        except (IOError, OSError):
            continue
        match = _VERSION.search(text)
        if match:
            return match.group(1)
    return ""


def installed_versions():
    """[name, version, sys.path folder] of every distribution on sys.path, in sys.path order (the first of a
    name is the one `import` finds)."""
    found = []
    for folder, names in _folders():
        for name in names:
            stem, dot, suffix = name.rpartition(".")
            if not dot or suffix.lower() not in ("dist-info", "egg-info"):
                continue
            dist, _, version = stem.partition("-")
            version = version.split("-")[0]
            if not version[:1].isdigit():
                version = _version_from_files(os.path.join(folder, name))
            if version:
                found.append([_normalize(dist), version, folder])
    return found


def marker_environment():
    """PEP 508's marker variables for this interpreter, as packaging.markers.default_environment() has them,
    less platform_release and platform_version (the kernel's build text: no wheel's requirement reads
    them)."""
    import platform

    info = sys.implementation.version
    impl_version = "%d.%d.%d" % (info.major, info.minor, info.micro)
    if info.releaselevel != "final":
        impl_version += info.releaselevel[0] + str(info.serial)
    return {
        "implementation_name": sys.implementation.name,
        "implementation_version": impl_version,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_system": platform.system(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }
