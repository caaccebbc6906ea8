"""What torch, torchvision and torchaudio declare they need, against what is installed beside them.

``pip check`` in rule form: every ``Requires-Dist`` line of the three, its marker evaluated for the target
interpreter (its own PEP 508 variables, read by the inspector), checked against the versions on its sys.path.
A wheel whose CUDA libraries (nvidia-*, cuda-toolkit) are missing or of another version does not import, so
those are errors; so is NumPy 2 under a torch built against NumPy 1 (the table's ``numpy_abi`` rows).
"""

from __future__ import annotations

from doctor.compat.assessment import Assessment
from doctor.model import snapshot as S
from doctor.model.findings import ERROR, INSTALL, UNINSTALL, WARNING, Action, Finding, Fix
from doctor.model.i18n import Msg
from doctor.model.versions import normalize_name
from doctor.rules import Rule, not_observed, skipped, unknown, without_torch

TRIO = ("torch", "torchvision", "torchaudio")
# The CUDA libraries a CUDA wheel loads at import: without the right version, `import torch` fails
# ("libcudnn.so.9: cannot open shared object file", "undefined symbol ... version libcublasLt.so.12").
_NATIVE_PREFIXES = ("nvidia-", "cuda-", "triton", "pytorch-triton")
_CUDA_SUFFIX = ("-cu11", "-cu12", "-cu13")


def installed_map(py) -> dict[str, tuple[str, str]] | None:
    """{normalised name: (version, folder)} of the first distribution of each name on sys.path (the one
    imported)."""
    if py is None or py.installed is None:
        return None
    found: dict[str, tuple[str, str]] = {}
    for row in py.installed:
        if len(row) >= 2:
            found.setdefault(normalize_name(row[0]), (row[1], row[2] if len(row) > 2 else ""))
    return found


def _native(name: str) -> bool:
    return name.startswith(_NATIVE_PREFIXES)


def unmet_requirements(snap: S.Snapshot) -> tuple[list[dict], list[str]] | None:
    """(the unmet requirements of the trio, the lines that could not be judged), or None without the facts.
    Each unmet one: {"of", "requirement", "name", "installed" (None: missing), "native"}."""
    # packaging.markers pulls in subprocess (through packaging.tags): imported when a rule runs, not on import
    from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    py = snap.environment.python
    have = installed_map(py)
    if have is None or py.markers is None:
        return None
    env = dict(py.markers, extra="")
    unmet, undecided = [], []
    for owner in TRIO:
        dist = getattr(snap.install, owner)
        if dist is None:
            continue
        for line in dist.requires:
            try:
                req = Requirement(line)
                # packaging fills a variable the target did not report from torchdoctor's own process: not
                # this target's fact, so such a marker is left undecided
                if req.marker is not None and _unreported(str(req.marker), env):
                    raise UndefinedEnvironmentName(line)
                if req.marker is not None and not req.marker.evaluate(env):
                    continue
            except (InvalidRequirement, InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
                undecided.append(f"{owner}: {line}")
                continue
            name = normalize_name(req.name)
            if name in TRIO:
                continue  # the companions rule judges torch's pairing with torchvision and torchaudio
            found = have.get(name)
            if found is not None and str(req.specifier):
                try:
                    ok = req.specifier.contains(Version(found[0]), prereleases=True)
                except InvalidVersion:
                    undecided.append(f"{owner}: {line} ({name} {found[0]})")
                    continue
            else:
                ok = found is not None
            if not ok:
                extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
                unmet.append({"of": owner, "requirement": f"{req.name}{extras}{req.specifier}", "name": name,
                              "installed": found[0] if found else None, "native": _native(name)})
    return unmet, undecided


_MARKER_VARIABLES = ("os_name", "sys_platform", "platform_machine", "platform_python_implementation",
                     "platform_release", "platform_system", "platform_version", "python_version",
                     "python_full_version", "implementation_name", "implementation_version")


def _unreported(marker: str, env: dict) -> bool:
    return any(name in marker and name not in env for name in _MARKER_VARIABLES)


def _pin(item: dict) -> str:
    return item["requirement"]


def _describe(item: dict) -> str:
    if item["installed"] is None:
        return Msg("{of} needs {requirement}: not installed", of=item["of"], requirement=item["requirement"])
    return Msg("{of} needs {requirement}: {name} {installed} is installed", of=item["of"],
               requirement=item["requirement"], name=item["name"], installed=item["installed"])


def check_declared_requirements(facts: Assessment) -> list[Finding]:
    snap = facts.snap
    if snap.install.torch is None:
        return without_torch(snap)
    if _on_pythonpath(snap):
        return skipped(Msg("the torch that imports is on PYTHONPATH, not in this environment: "
                           "pythonpath-torch-shadows says so"))
    result = unmet_requirements(snap)
    row = None
    torch = snap.install.torch
    if result is None and _from_collect_env(snap) is not None and "+" not in (torch.version or "") \
            and torch.installer != "conda":
        # a collect_env text has no Requires-Dist: what the PyPI wheel declares comes from the table (a build
        # with a local tag comes from another index, and conda's pytorch takes its CUDA libraries from conda
        # packages, not nvidia-* wheels: both declare other things, left unjudged)
        row = facts.table.declared_requirements(snap.install.torch.version, snap.host.platform)
        if row is None:
            return unknown(Msg("what torch {version} declares for {platform} is not in the compatibility "
                               "table, and a collect_env text does not hold it: `pip check` in that "
                               "environment tells",
                               version=snap.install.torch.version, platform=snap.host.platform))
        result = unmet_in_paste(snap, row)
    if result is None:
        py = snap.environment.python
        why = py.error if py is not None and py.error else None
        return not_observed(snap, Msg("the versions installed beside torch"), why)
    unmet, undecided = result
    findings = []
    cudnn = [u for u in unmet if u["name"].startswith("nvidia-cudnn") and u["installed"] is not None]
    others = [u for u in unmet if u not in cudnn]
    if cudnn:
        item = cudnn[0]
        findings.append(Finding(
            "torch-cudnn-requirement-unmet", ERROR,
            Msg("{of}'s cuDNN requirement is unmet: it needs {requirement}, {installed} is installed",
                of=item["of"], requirement=item["requirement"], installed=item["installed"]),
            Msg("The wheel loads the cuDNN of the {name} wheel in this environment; with another version it "
                "fails at import or in the first convolution (\"undefined symbol\", \"cuDNN version "
                "incompatibility\"). Another package pinned {name} to its own version (TensorFlow pins its "
                "own cuDNN): packages that need different cuDNN versions cannot share one environment.",
                name=item["name"]),
            _evidence({"unmet": cudnn}, row),
            Fix(Msg("Keep the two in separate virtual environments, or install the version torch needs "
                    "(which breaks the other package's pin):"),
                actions=[Action(INSTALL, tuple(_pin(u) for u in cudnn), declared=True)]),
        ))
    if others:
        needed = [u for u in others if u["native"] or u["installed"] is None]
        missing_native = [u for u in needed if u["native"] and u["installed"] is None]
        # all that is missing is CUDA wheels whose libraries are on the library path (an HPC module, a CUDA
        # image): torch may load those instead, so this is pip's complaint, not proof the import fails
        elsewhere = _on_library_path(snap, missing_native) if len(missing_native) == len(needed) else []
        severity = ERROR if needed and not elsewhere else WARNING
        listing = "; ".join(_describe(u) for u in others)
        detail = (Msg("{listing}. pip check reports the same.", listing=listing) if row is None else
                  Msg("{listing}: the collect_env package list against what the PyPI wheel ({wheel}) "
                      "declares.", listing=listing, wheel=row.wheel))
        if severity == WARNING and elsewhere:
            detail += Msg(" Their libraries are on the library path ({dirs}): torch may load those instead.",
                          dirs=", ".join(elsewhere))
        if any(u["native"] for u in others):
            detail += Msg(" The CUDA libraries come as separate wheels (nvidia-*, cuda-toolkit) that torch "
                          "loads at import: without them `import torch` fails (\"libcudnn.so.9: cannot open "
                          "shared object file\", \"undefined symbol\"). Installing torch with --no-deps, or "
                          "from a mirror that lacks them, leaves them out.")
        findings.append(Finding(
            "torch-requirements-unmet", severity,
            Msg("{count} of the requirements torch declares are not installed as declared", count=len(others))
            if len(others) != 1 else Msg("a requirement torch declares is not installed as declared"),
            detail,
            _evidence({"unmet": others, "undecided": undecided}, row),
            Fix(Msg("Install what is declared:"),
                actions=[Action(INSTALL, tuple(_pin(u) for u in others), declared=True)]),
        ))
    findings += _two_cuda_majors(snap, facts.build)
    if not findings and undecided:
        return unknown(Msg("some requirements could not be judged: {lines}", lines="; ".join(undecided)))
    return findings


def _evidence(evidence: dict, row) -> dict:
    if row is not None:
        evidence.update({"declared_by": row.wheel, "table.source": row.source})
    return evidence


# What torch/utils/collect_env.py lists of `pip list` (a name holding one of these), from torch 2.6 on; torch
# 2.5 and older list none of the CUDA wheels, so a paste without any nvidia-* line says nothing of them.
COLLECT_ENV_LISTS = ("torch", "numpy", "triton", "optree", "cuda-cudart", "cuda-cupti", "cuda-libraries",
                     "cuda-opencl", "cuda-nvrtc", "cuda-runtime", "cublas", "cudnn", "cufft", "curand",
                     "cusolver", "cusparse", "nccl", "nvjitlink", "nvtx")


def unmet_in_paste(snap: S.Snapshot, row) -> tuple[list[dict], list[str]]:
    """(the unmet requirements, the lines not judged) of a collect_env package list against what the table
    records the PyPI wheel declares (``row``). A requirement the list does not show counts as missing only
    where the list proves collect_env would have shown it: a CUDA wheel when the list shows nvidia-* wheels at
    all (collect_env of torch 2.6 and later)."""
    from packaging.markers import UndefinedComparison, UndefinedEnvironmentName
    from packaging.requirements import Requirement
    from packaging.version import InvalidVersion, Version

    have = _from_collect_env(snap) or {}
    lists_cuda_wheels = any(name.startswith("nvidia-") for name in have)
    env = _paste_markers(snap)
    unmet, undecided, unseen = [], [], []
    for line in row.requires:
        req = Requirement(line)  # checked when the table was read
        try:
            if req.marker is not None and _unreported(str(req.marker), env):
                raise UndefinedEnvironmentName(line)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
        except (UndefinedComparison, UndefinedEnvironmentName):
            undecided.append(f"torch: {line}")
            continue
        name = normalize_name(req.name)
        if name in TRIO:
            continue
        found = have.get(name)
        if found is None:
            if not _native(name):
                continue  # a pure-Python package: collect_env never lists those
            if not (lists_cuda_wheels and any(p in name for p in COLLECT_ENV_LISTS)):
                unseen.append(f"{req.name}{req.specifier}")  # a CUDA wheel this list would not show
                continue
            ok = False
        else:
            try:
                ok = not str(req.specifier) or req.specifier.contains(Version(found[0]), prereleases=True)
            except InvalidVersion:
                undecided.append(f"torch: {line} ({name} {found[0]})")
                continue
        if not ok:
            extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
            unmet.append({"of": "torch", "requirement": f"{req.name}{extras}{req.specifier}", "name": name,
                          "installed": found[0] if found else None, "native": _native(name)})
    if unseen:
        why = ("it shows no nvidia-* wheel, and collect_env before torch 2.6 lists none"
               if not lists_cuda_wheels else "collect_env does not list them")
        undecided.append(f"the CUDA wheels torch {row.torch} declares ({', '.join(unseen)}) are not in the "
                         f"package list: {why}; `pip list` in that environment shows whether they are "
                         "installed")
    return unmet, undecided


def _paste_markers(snap: S.Snapshot) -> dict:
    """The PEP 508 variables a collect_env text states: the OS and CPU, and the Python version when given."""
    host, py = snap.host, snap.interpreter.version
    env = {"extra": ""}
    if host.os == "linux":
        env.update(platform_system="Linux", sys_platform="linux", os_name="posix")
    elif host.os == "windows":
        env.update(platform_system="Windows", sys_platform="win32", os_name="nt")
    elif host.os == "darwin":
        env.update(platform_system="Darwin", sys_platform="darwin", os_name="posix")
    if host.machine:
        # what platform.machine() says there: Windows spells it AMD64 / ARM64 (host.machine: the table's)
        windows = {"x86_64": "AMD64", "arm64": "ARM64"} if host.os == "windows" else {}
        env["platform_machine"] = windows.get(host.machine, host.machine)
    if py and py.count(".") >= 1:
        env["python_version"] = ".".join(py.split(".")[:2])
        if py.count(".") == 2:
            env["python_full_version"] = py
    return env


# nvidia wheel name (without "nvidia-" and "-cuXX") -> the library family the environment probe reads
_WHEEL_FAMILY = {"cudnn": "cudnn", "cublas": "cublas", "nvjitlink": "nvjitlink", "cuda-runtime": "cudart",
                 "nccl": "nccl", "cusparse": "cusparse"}


def _on_library_path(snap: S.Snapshot, missing: list[dict]) -> list[str]:
    """The library-path folders that hold the library of every missing nvidia-* wheel, or [] when one of them
    is not there (or is not a library the environment probe reads: cuda-toolkit's many, cuFFT, ...)."""
    libs = snap.environment.libraries
    if not missing or libs is None:
        return []
    folders = []
    for item in missing:
        stem = item["name"].removeprefix("nvidia-")
        for suffix in _CUDA_SUFFIX:
            stem = stem.removesuffix(suffix)
        family = _WHEEL_FAMILY.get(stem) if item["name"].startswith("nvidia-") else None
        holding = [d.path for d in libs.dirs
                   if family and d.path and any(lib.family == family for lib in d.libs)]
        if not holding:
            return []
        folders += holding
    return list(dict.fromkeys(folders))


def _on_pythonpath(snap: S.Snapshot) -> bool:
    """torch imports from a $PYTHONPATH folder: what that copy declares is no remedy for this environment."""
    py, dist = snap.environment.python, snap.install.torch
    if py is None or not py.pythonpath or dist is None or not dist.location:
        return False
    separator = ";" if snap.host.os == "windows" else ":"
    folders = {f.rstrip("/\\") for f in py.pythonpath.split(separator) if f}
    return dist.location.rstrip("/\\") in folders


def _two_cuda_majors(snap: S.Snapshot, build) -> list[Finding]:
    """nvidia-cudnn-cu11 beside nvidia-cudnn-cu12: two CUDA majors of one library in one environment. Both
    install into the same nvidia/ namespace folder, so either can be the one a wheel loads."""
    have = installed_map(snap.environment.python) or {}
    families: dict[str, list[str]] = {}
    for name in have:
        if name.startswith("nvidia-") and name.endswith(_CUDA_SUFFIX):
            families.setdefault(name[: -len("-cu12")], []).append(name)
    doubled = {base: sorted(names) for base, names in families.items() if len(names) > 1}
    if not doubled:
        return []
    listing = "; ".join(", ".join(f"{n} {have[n][0]}" for n in names) for names in doubled.values())
    major = (build.cuda or "").split(".")[0] if build is not None and build.cuda else None
    stale = [n for names in doubled.values() for n in names if major and not n.endswith(f"-cu{major}")]
    return [Finding(
        "cuda-wheels-two-majors", WARNING,
        Msg("CUDA library wheels of two CUDA majors are installed side by side"),
        Msg("{listing}. Each pair installs into the same nvidia/ folder, so which library a wheel loads "
            "depends on "
            "the order they were installed in.", listing=listing),
        {"doubled": doubled, "torch.cuda": build.cuda if build is not None else None},
        Fix(Msg("Uninstall the ones of the other CUDA major (torch {cuda} needs the -cu{major} ones), then "
                "reinstall torch's.", cuda=build.cuda, major=major),
            actions=[Action(UNINSTALL, tuple(stale))]) if stale else None,
    )]


def _from_collect_env(snap: S.Snapshot) -> dict[str, tuple[str, str]] | None:
    """{name: (version, "")} from a collect_env paste's package list ("[pip3] numpy==2.1.0")."""
    text = snap.environment.collect_env
    if text is None or not text.pip:
        return None
    found: dict[str, tuple[str, str]] = {}
    for line in text.pip:
        name, sep, version = line.split("]", 1)[-1].strip().partition("==")
        if sep and name and version:
            found.setdefault(normalize_name(name), (version.strip(), ""))
    return found


def check_numpy_abi(facts: Assessment) -> list[Finding]:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    snap, table, build = facts.snap, facts.table, facts.build
    if build is None:
        return without_torch(snap)
    have = installed_map(snap.environment.python)
    if have is None:
        have = _from_collect_env(snap)
    if have is None:
        return not_observed(snap, Msg("the NumPy installed beside torch"))
    numpy = have.get("numpy")
    if numpy is None:
        return skipped(Msg("NumPy is not installed"))
    limit = table.numpy_limit(build.version, snap.host.os or "linux")
    if limit is None:
        return []
    try:
        fits = SpecifierSet(limit.numpy).contains(Version(numpy[0]), prereleases=True)
    except InvalidVersion:
        return unknown(Msg("the NumPy version {version} could not be read", version=numpy[0]))
    if fits:
        return []
    where = Msg(" on Windows") if limit.os == "windows" else ""
    return [Finding(
        "numpy-too-new-for-torch", ERROR,
        Msg("torch {label} cannot use NumPy {numpy}: it was built for NumPy {spec}", label=build.label,
            numpy=numpy[0], spec=limit.numpy),
        Msg("torch {range}{where} was compiled against NumPy 1's C API. With NumPy {numpy} it prints \"A "
            "module that "
            "was compiled using NumPy 1.x cannot be run in NumPy 2\" at import and every conversion fails "
            "with "
            "\"RuntimeError: Numpy is not available\" (tensor.numpy(), torch.from_numpy, DataLoader "
            "workers).",
            range=limit.torch, where=where, numpy=numpy[0]),
        {"numpy": numpy[0], "numpy.location": numpy[1], "torch": build.label, "needs": limit.numpy,
         "table.source": limit.source},
        Fix(Msg("Install a NumPy torch {label} was built for, or a torch release that supports NumPy 2.",
                label=build.label),
            actions=[Action(INSTALL, (f"numpy{limit.numpy}",), declared=True)]),
        [] if limit.confidence == "verified" else [f"numpy_abi {limit.torch} {limit.os}"],
    )]


RULES = [
    Rule("declared-requirements", Msg("the packages torch declares are installed as declared"),
         check_declared_requirements,
         ("torch-requirements-unmet", "torch-cudnn-requirement-unmet", "cuda-wheels-two-majors")),
    Rule("numpy-abi", Msg("the installed NumPy suits the torch build"), check_numpy_abi,
         ("numpy-too-new-for-torch",)),
]
