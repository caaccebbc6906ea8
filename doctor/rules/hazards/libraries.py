"""Library shadowing: CUDA libraries on the library path older than the ones torch's wheel ships, and a
CUDA_HOME toolkit whose version differs from torch's CUDA (it matters when building extensions)."""

from __future__ import annotations

from typing import Any

from doctor.compat.assessment import Assessment
from doctor.compat.builds import Build
from doctor.model import shells
from doctor.model import snapshot as S
from doctor.model.environment import CudaHome, Libraries
from doctor.model.findings import ERROR, INFO, WARNING, Finding, Fix
from doctor.model.i18n import Msg
from doctor.model.snapshot import as_plain
from doctor.model.versions import normalize_name
from doctor.rules import not_observed, skipped, unknown, without_torch
from doctor.rules.hazards.common import (
    export,
    is_cuda_build,
    mm,
    mm_text,
    same_dir,
    split_path,
    torch_cuda,
)

# Library family -> the pip distributions that ship it (CUDA 12 names, then CUDA 13 names).
_FAMILY_DISTS = {
    "cudnn": ("nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-cudnn-cu11", "nvidia-cudnn"),
    "cublas": ("nvidia-cublas-cu12", "nvidia-cublas", "nvidia-cublas-cu11"),
    "nvjitlink": ("nvidia-nvjitlink-cu12", "nvidia-nvjitlink"),
    "cudart": ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu11"),
    "nccl": ("nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-nccl-cu11"),
    "cusparse": ("nvidia-cusparse-cu12", "nvidia-cusparse", "nvidia-cusparse-cu11"),
}
# Families whose library version follows torch's CUDA major.minor (cuSPARSE, cuDNN and NCCL do not).
_FOLLOWS_CUDA = ("cudart", "nvjitlink", "cublas")


def expected_lib_versions(snap: S.Snapshot, build: Build | None) -> dict[str, tuple[str, str]]:
    """Family -> (version, where it came from) for the libraries the installed torch uses."""
    expected: dict[str, tuple[str, str]] = {}
    python = snap.environment.python
    dists = python.dists if python is not None else []
    declared = _declared_pins(snap)
    for family, names in _FAMILY_DISTS.items():
        # What torch declares comes first: another package (TensorFlow) may have installed another version.
        pin = next((declared[n] for n in names if n in declared), None)
        if pin is not None:
            expected[family] = (pin[0], f"torch's requirement {pin[1]}")
            continue
        for dist in dists:  # sys.path order: the first one is the one imported
            if normalize_name(dist.name) in names and dist.version:
                expected[family] = (str(dist.version), f"{dist.name} {dist.version}")
                break
    cuda = torch_cuda(snap, build)
    if cuda:
        for family in _FOLLOWS_CUDA:
            expected.setdefault(family, (cuda, f"torch's CUDA {cuda}"))
    return expected


def _declared_pins(snap: S.Snapshot) -> dict[str, tuple[str, str]]:
    """{normalised name: (version, the requirement)} of the exact pins (==) in torch's Requires-Dist."""
    from packaging.requirements import InvalidRequirement, Requirement

    dist = snap.install.torch
    pins: dict[str, tuple[str, str]] = {}
    for line in dist.requires if dist is not None else []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        exact = [s.version for s in req.specifier if s.operator == "==" and "*" not in s.version]
        if len(exact) == 1:
            pins[normalize_name(req.name)] = (exact[0], f"{req.name}=={exact[0]}")
    return pins


def _symptom(family: str, wheel: str, found: str) -> str:
    w, f = mm(wheel) or (0, 0), mm(found) or (0, 0)
    if family == "nvjitlink":
        return f"undefined symbol: __nvJitLinkComplete_{w[0]}_{w[1]}, version libnvJitLink.so.{w[0]}"
    if family == "cusparse":
        return (f"libcusparse.so.{w[0]}: undefined symbol: __nvJitLinkAddData_{w[0]}_{w[1]}, version "
            f"libnvJitLink.so.{w[0]}")
    if family == "cudnn":
        return (
            f"cuDNN version incompatibility: PyTorch was compiled  against ({w[0]}, {w[1]}, …) but found "
            "runtime "
            f"version ({f[0]}, {f[1]}, …)"
        )
    if family == "cublas":
        return f"libcublas.so.{w[0]}: undefined symbol: cublasLt…, version libcublasLt.so.{w[0]}"
    return f"undefined symbol … lib{family}.so.{w[0]}"


def check_library_shadowing(facts: Assessment) -> list[Finding]:
    snap, build = facts.snap, facts.build
    if build is None:
        return without_torch(snap)
    if build.kind == "unknown":
        return unknown(Msg("whether torch is a CUDA build is not known"))
    if not is_cuda_build(build):
        return skipped(Msg("not a CUDA build of torch: it loads no CUDA library"))
    if snap.environment.libraries is None and snap.environment.cuda_home is None:
        return not_observed(snap, Msg("the library search path and CUDA_HOME"), snap.environment.error)
    return _check_ld_library_path(snap, build) + _check_cuda_home(snap, build)


def _check_ld_library_path(snap: S.Snapshot, build: Build) -> list[Finding]:
    libs = snap.environment.libraries or Libraries()
    dirs = libs.dirs
    if not dirs or not is_cuda_build(build):
        return []  # a CPU build loads no CUDA library
    expected = expected_lib_versions(snap, build)
    offending: list[dict[str, Any]] = []
    for entry in dirs:
        for lib in entry.libs:
            family = lib.family
            found = lib.real_version or lib.version
            if family not in expected or not found:
                continue
            wheel, source = expected[family]
            have, want = mm(found), mm(wheel)
            # Same major = same soname, so the dynamic loader can pick this file instead of the wheel's.
            # Only an older minor breaks: newer CUDA libraries keep the symbols of older minors
            # (the failures seen are "undefined symbol: __nvJitLinkComplete_12_4" from a 12.1 library).
            if have and want and have[0] == want[0] and None not in (have[1], want[1]) and have[1] < want[1]:
                offending.append(
                    {
                        "dir": entry.path,
                        "file": lib.file,
                        "version": found,
                        "family": family,
                        "wheel_version": wheel,
                        "wheel_source": source,
                    }
                )
    if not offending:
        return []
    windows = snap.host.os == "windows" or libs.variable == "PATH"
    variable = libs.variable or ("PATH" if windows else "LD_LIBRARY_PATH")
    bad_dirs = list(dict.fromkeys(o["dir"] for o in offending))
    # What stays: the variable's other folders, less those the probe found missing (a fix names only real
    # paths).
    missing = [d.path for d in libs.dirs if d.exists is False and d.path]
    keep = [d for d in split_path(libs.value, windows)
            if not any(same_dir(d, b) for b in bad_dirs) and not any(same_dir(d, m) for m in missing)]
    symptoms = list(dict.fromkeys(_symptom(o["family"], o["wheel_version"], o["version"]) for o in offending))
    listing = "; ".join(
        f"{o['dir']}/{o['file']} ({mm_text(o['version'])}, torch's wheel has "
        f"{mm_text(o['wheel_version'])} from {o['wheel_source']})"
        for o in offending
    )
    runtime_text = f"{snap.runtime.detail} {snap.runtime.stderr_tail}"
    broke = snap.runtime.status in ("import-error", "crashed", "error") and (
        "undefined symbol" in runtime_text or "cuDNN version incompatibility" in runtime_text
    )
    return [
        Finding(
            "library-path-shadows-cuda-libs",
            ERROR if broke else WARNING,
            Msg("{variable} puts other CUDA library versions ahead of torch's own", variable=variable),
            Msg("{listing}. The dynamic loader searches {variable} before the wheel's nvidia/*/lib folders "
                "for "
            "libraries that torch's libraries load indirectly (cuBLAS loads cuBLASLt, cuSPARSE loads "
            "nvJitLink, "
            "cuDNN loads its sub-libraries), so these files can be picked instead. Typical "
            "errors: ", listing=listing, variable=variable)
            + "; ".join(f'"{s}"' for s in symptoms)
            + ".",
            {"variable": variable, "value": libs.value, "offending": offending},
            Fix(
                Msg("Take those folders out of {variable} (also where it is set: ~/.bashrc, the module "
                    "system, the "
                "container image).", variable=variable),
                [export(variable, keep, windows)],
            ),
        )
    ]


def _check_cuda_home(snap: S.Snapshot, build: Build) -> list[Finding]:
    home = snap.environment.cuda_home or CudaHome()
    toolkit, cuda = home.version, torch_cuda(snap, build)
    have, want = mm(toolkit), mm(cuda)
    if not have or not want or have == want:
        return []
    what = home.variable or "the default toolkit"
    return [
        Finding(
            "cuda-home-version-mismatch",
            INFO,
            Msg("{what} ({path}) is CUDA {mm_text}, torch was built with CUDA "
                "{mm_text2}", what=what, path=home.path, mm_text=mm_text(toolkit), mm_text2=mm_text(cuda)),
            Msg("This matters only when building CUDA extensions (torch.utils.cpp_extension, pip installs "
                "that compile): "
            "\"The detected CUDA version ({mm_text}) mismatches the version that was used to compile PyTorch "
            "({mm_text2}). Please make sure to use the same CUDA versions.\" (an error when the major "
            "versions differ, a warning otherwise).", mm_text=mm_text(toolkit), mm_text2=mm_text(cuda)),
            {"cuda_home": as_plain(home), "torch.cuda": cuda},
            _toolkit_fix(snap, home, cuda),
        )
    ]


TOOLKIT_DOWNLOADS = "https://developer.nvidia.com/cuda-toolkit-archive"


def _toolkit_fix(snap: S.Snapshot, home: CudaHome, cuda: str) -> Fix:
    """Point CUDA_HOME at a toolkit of torch's CUDA that is installed here; when none is, say what to install
    (NVIDIA's ``cuda-toolkit-X-Y`` package, from its CUDA repository) and name no folder that does not
    exist."""
    want = mm(cuda)
    match = [t for t in (home.installed or []) if mm(t.version) == want]
    windows = snap.host.os == "windows"
    if match:
        path = match[-1].path
        # A machine path in PowerShell double quotes would run any $(...) in it: quoted by the one quoting.
        shell = shells.POWERSHELL if windows else shells.POSIX
        try:
            line = ("$env:CUDA_HOME = " if windows else "export CUDA_HOME=") + shells.quote(path, shell)
        except shells.Unrepresentable as exc:
            line = shells.refusal(shell, str(exc))
        return Fix(Msg("Before building extensions, point CUDA_HOME at the CUDA {mm_text} toolkit installed "
            "in "
                   "{path}.", mm_text=mm_text(cuda), path=path), [line])
    others = ", ".join(f"{t.path} (CUDA {mm_text(t.version)})" for t in home.installed or []) or "none"
    major, minor = want if want and want[1] is not None else (mm_text(cuda), 0)
    return Fix(
        Msg(
            "No CUDA {mm_text} toolkit is installed here (toolkits found: {others}). Before building "
            "extensions, install one (NVIDIA's cuda-toolkit-{major}-{minor} package from its CUDA "
            "repository: "
            "{TOOLKIT_DOWNLOADS}) and point CUDA_HOME at the folder it installs.",
            mm_text=mm_text(cuda),
            others=others,
            major=major,
            minor=minor,
            TOOLKIT_DOWNLOADS=TOOLKIT_DOWNLOADS,
        ),
        links=[TOOLKIT_DOWNLOADS],
    )
