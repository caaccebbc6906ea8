"""Validation of the table's JSON: every field checked for type and shape, the first bad one raised as
one ``TableError`` line naming the file and the field, never a traceback."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from doctor.errors import TableError
from doctor.model.versions import VARIANT_RE as _VARIANT_RE
from doctor.model.versions import minor_key as _minor_key
from doctor.model.versions import variant_to_cuda
from doctor.table.compat import CompatTable
from doctor.table.rows import (
    ArchList,
    CompanionCudaCheck,
    CudaDriver,
    CudaToolkit,
    CudnnSupport,
    DeclaredRequirements,
    DriverBranch,
    DriverSupport,
    ForwardCompat,
    GpuModel,
    JetPackRow,
    MajorFloor,
    NumpyAbi,
    Patch,
    Release,
    WindowsLongestPath,
    _public,
    _sm_number,
)

SCHEMA_VERSION = 1
CONFIDENCES = ("verified", "inferred", "unverified")
PLATFORMS = ("linux-x86_64", "linux-aarch64", "windows-x86_64", "darwin-arm64", "darwin-x86_64")

_MINOR_RE = re.compile(r"^\d+\.\d+$")
_L4T_RE = re.compile(r"^\d+(\.\d+)?$")
_DRIVER_RE = re.compile(r"^\d+(\.\d+)*$")
_SM_RE = re.compile(r"^sm_\d+[af]?$")
_PTX_RE = re.compile(r"^compute_\d+[af]?$")
_PLAIN_SM_RE = re.compile(r"^sm_\d+$")
_FREE_THREADED_RE = re.compile(r"^\d+\.\d+t$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_CUDA_CHECKS = ("major.minor", "major")
_SEGMENTS = ("data-center",)
FORWARD_COMPAT_GPUS = ("data-center", "jetson", "rtx-server-ready", "geforce")


class _Parser:
    """Turns the JSON document into rows, raising a one-line TableError at the first bad field."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, where: str, message: str) -> TableError:
        # one line whatever a hand-edited table holds: a key may contain a newline (hypothesis found one)
        text = f"compat table {self.path}: {where}: {message}"
        return TableError("".join(ch if ch >= " " and ch != "\x7f" else repr(ch)[1:-1] for ch in text))

    # typed field access ---------------------------------------------------------------------

    def get(self, obj: dict, key: str, where: str, kinds: tuple[type, ...], optional: bool = False) -> Any:
        if key not in obj:
            if optional:
                return None
            raise self.fail(f"{where}.{key}" if where else key, "missing")
        value = obj[key]
        if value is None and optional:
            return None
        # bool is an int subclass: a stray true/false must not pass as a number
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            wanted = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds)
            raise self.fail(f"{where}.{key}" if where else key, f"expected {wanted}, got {_json_kind(value)}")
        return value

    def string(
        self, obj: dict, key: str, where: str, pattern: re.Pattern | None = None, what: str = ""
    ) -> str:
        value = self.get(obj, key, where, (str,))
        self.check_pattern(value, f"{where}.{key}", pattern, what)
        return value

    def opt_string(self, obj: dict, key: str, where: str, pattern: re.Pattern | None = None, what: str = ""):
        value = self.get(obj, key, where, (str,), optional=True)
        if value is not None:
            self.check_pattern(value, f"{where}.{key}", pattern, what)
        return value

    def check_pattern(self, value: str, where: str, pattern: re.Pattern | None, what: str) -> None:
        if pattern is not None and not pattern.match(value):
            raise self.fail(where, f"{value!r} is not {what}")

    def check_version(self, value: str, where: str) -> None:
        try:
            Version(value)
        except InvalidVersion:
            raise self.fail(where, f"{value!r} is not a version") from None

    def version(self, obj: dict, key: str, where: str, optional: bool = False) -> str | None:
        value = self.get(obj, key, where, (str,), optional=optional)
        if value is not None:
            try:
                Version(value)
            except InvalidVersion:
                raise self.fail(f"{where}.{key}", f"{value!r} is not a version") from None
        return value

    def strings(
        self, obj: dict, key: str, where: str, pattern: re.Pattern | None = None, what: str = ""
    ) -> tuple:
        values = self.get(obj, key, where, (list,))
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise self.fail(f"{where}.{key}[{i}]", f"expected a string, got {_json_kind(value)}")
            self.check_pattern(value, f"{where}.{key}[{i}]", pattern, what)
        return tuple(values)

    def provenance(self, obj: dict, where: str) -> tuple[str, str]:
        source = self.get(obj, "source", where, (str,))
        if not source.strip():
            raise self.fail(f"{where}.source", "is empty")
        confidence = self.get(obj, "confidence", where, (str,))
        if confidence not in CONFIDENCES:
            raise self.fail(f"{where}.confidence", f"{confidence!r} is not one of {', '.join(CONFIDENCES)}")
        return source, confidence

    def rows(self, data: dict, key: str) -> list[tuple[str, dict]]:
        rows = self.get(data, key, "", (list,))
        out = []
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise self.fail(f"{key}[{i}]", f"expected an object, got {_json_kind(row)}")
            out.append((f"{key}[{i}]", row))
        return out

    def unique(self, seen: dict, key: Any, where: str, shown: str) -> None:
        if key in seen:
            raise self.fail(where, f"duplicate {shown} (first at {seen[key]})")
        seen[key] = where

    # sections --------------------------------------------------------------------------------

    def table(self, data: Any) -> CompatTable:
        if not isinstance(data, dict):
            raise self.fail("(top level)", f"expected an object, got {_json_kind(data)}")
        schema = self.get(data, "schema_version", "", (int,))
        if schema != SCHEMA_VERSION:
            raise self.fail(
                "schema_version", f"{schema} is not supported (this torchdoctor reads {SCHEMA_VERSION})"
            )
        table_version = self.get(data, "table_version", "", (str,))
        verified_on = self.get(data, "verified_on", "", (str,))
        for key, value in (("table_version", table_version), ("verified_on", verified_on)):
            if not value.strip():
                raise self.fail(key, "is empty")

        releases = self.section(data, "releases", self.release, lambda r: r.minor, "release minor")
        by_minor = {r.minor: r for r in releases}
        arch_lists = self.section(
            data,
            "arch_lists",
            self.arch_row,
            lambda a: (a.torch_minor, a.variant, a.platform),
            "arch list row",
        )
        for (where, _), row in zip(self.rows(data, "arch_lists"), arch_lists, strict=True):
            release = by_minor.get(row.torch_minor)
            if release is None:
                raise self.fail(f"{where}.torch_minor", f"{row.torch_minor!r} has no row in releases")
            if row.variant not in release.variants_for(row.platform):
                raise self.fail(
                    f"{where}.variant",
                    f"{row.variant!r} is not a {row.platform} variant of torch {row.torch_minor} in releases",
                )
        cuda = self.section(data, "cuda", self.cuda_row, lambda c: c.cuda, "CUDA version")
        majors = self.section(data, "cuda_majors", self.major_row, lambda m: m.major, "CUDA major")
        branches = self.section(data, "driver_branches", self.branch_row, lambda b: b.branch, "driver branch")
        aliases: dict[str, str] = {}
        gpus = self.section(
            data, "gpus", lambda row, where: self.gpu_row(row, where, aliases), lambda g: g.name, "GPU name"
        )
        # Optional sections (schema 1 stays readable without them).
        toolkits = self.section(
            data, "cuda_toolkits", self.toolkit_row, lambda t: t.cuda, "CUDA toolkit", True
        )
        cudnn = self.section(
            data, "cudnn", self.cudnn_row, lambda c: (c.cudnn, c.cuda_major), "cuDNN row", True
        )
        companions = self.companion_rules(data)
        numpy_abi = self.section(data, "numpy_abi", self.numpy_row, lambda n: (n.torch, n.os), "numpy_abi "
            "row", True)
        jetpack = self.section(data, "jetpack", self.jetpack_row, lambda j: j.l4t, "Jetson Linux "
            "release", True)
        support = self.section(data, "driver_support", self.support_row, lambda d: d.last_branch,
                               "driver_support last_branch", True)
        forward = self.section(data, "forward_compat", self.forward_row, lambda f: f.gpus, "forward_compat "
            "gpus", True)
        requires = self.section(data, "requires_dist", self.requires_row, lambda r: (r.torch, r.platform),
                                "requires_dist row", True)
        longest = self.section(data, "windows_longest_paths", self.longest_path_row, lambda w: w.torch,
                               "windows_longest_paths torch", True)
        for (where, _), release in zip(self.rows(data, "releases"), releases, strict=True):
            for variant in release.cudnn:
                if variant not in {v for names in release.variants.values() for v in names}:
                    raise self.fail(f"{where}.cudnn.{variant}", f"{variant!r} is not a variant of torch "
                        f"{release.minor}")
        return CompatTable(
            self.path,
            schema,
            table_version,
            verified_on,
            tuple(releases),
            tuple(arch_lists),
            tuple(cuda),
            tuple(majors),
            tuple(branches),
            tuple(gpus),
            aliases,
            tuple(toolkits),
            tuple(cudnn),
            tuple(companions),
            tuple(jetpack),
            tuple(support),
            tuple(forward),
            tuple(numpy_abi),
            tuple(requires),
            tuple(longest),
        )

    def section(
        self, data: dict, key: str, parse: Callable, identity: Callable, shown: str, optional: bool = False
    ) -> list:
        if optional and key not in data:
            return []
        seen: dict = {}
        parsed = []
        for where, row in self.rows(data, key):
            item = parse(row, where)
            self.unique(seen, identity(item), where, f"{shown} {identity(item)!r}")
            parsed.append(item)
        return parsed

    def release(self, row: dict, where: str) -> Release:
        minor = self.get(row, "minor", where, (str,))
        if not _MINOR_RE.match(minor):
            raise self.fail(f"{where}.minor", f"{minor!r} is not a version (major.minor)")
        patches = []
        seen: dict = {}
        for i, item in enumerate(self.get(row, "patches", where, (list,))):
            at = f"{where}.patches[{i}]"
            if not isinstance(item, dict):
                raise self.fail(at, f"expected an object, got {_json_kind(item)}")
            torch = self.version(item, "torch", at)
            if _minor_key(torch) != minor:
                raise self.fail(f"{at}.torch", f"{torch!r} is not a {minor}.x version")
            self.unique(seen, _public(torch), f"{at}.torch", f"torch patch {torch!r}")
            patch_free_threaded = None
            if item.get("free_threaded") is not None:
                patch_free_threaded = self.strings(item, "free_threaded", at, _FREE_THREADED_RE, "a Python "
                    "like '3.13t'")
            patches.append(
                Patch(
                    torch,
                    self.version(item, "torchvision", at, optional=True),
                    self.version(item, "torchaudio", at, optional=True),
                    patch_free_threaded,
                )
            )
            if "confidence" in item and item["confidence"] not in CONFIDENCES:
                raise self.fail(
                    f"{at}.confidence", f"{item['confidence']!r} is not one of {', '.join(CONFIDENCES)}"
                )
        if not patches:
            raise self.fail(f"{where}.patches", "is empty")
        patches.sort(key=lambda p: Version(p.torch))

        python = self.get(row, "python", where, (dict,))
        py_min = self.version(python, "min", f"{where}.python")
        py_max = self.version(python, "max", f"{where}.python")
        free_threaded = self.strings(python, "free_threaded", f"{where}.python", _FREE_THREADED_RE, "a "
            "Python like '3.13t'")

        variants = {}
        for platform, names in self.get(row, "variants", where, (dict,)).items():
            at = f"{where}.variants.{platform}"
            if platform not in PLATFORMS:
                raise self.fail(at, f"unknown platform (expected one of {', '.join(PLATFORMS)})")
            if not isinstance(names, list):
                raise self.fail(at, f"expected a list, got {_json_kind(names)}")
            for i, name in enumerate(names):
                if not isinstance(name, str) or not _VARIANT_RE.match(name):
                    raise self.fail(f"{at}[{i}]", f"{name!r} is not a variant (cpu, cuNNN, rocmX.Y[.Z], xpu)")
            if len(set(names)) != len(names):
                raise self.fail(at, "lists a variant twice")
            variants[platform] = tuple(names)

        pypi_default = {}
        for platform, name in self.get(row, "pypi_default", where, (dict,)).items():
            at = f"{where}.pypi_default.{platform}"
            if not isinstance(name, str) or name not in variants.get(platform, ()):
                raise self.fail(at, f"{name!r} is not among {where}.variants.{platform}")
            pypi_default[platform] = name

        cudnn = {}
        for variant, version in (self.get(row, "cudnn", where, (dict,), optional=True) or {}).items():
            at = f"{where}.cudnn.{variant}"
            if variant_to_cuda(variant) is None:
                raise self.fail(at, f"{variant!r} is not a CUDA variant (cuNNN)")
            if not isinstance(version, str) or _minor_key(version) is None:
                raise self.fail(at, f"{version!r} is not a cuDNN version")
            self.check_version(version, at)
            cudnn[variant] = version

        requires_python = {}
        for package, spec in (self.get(row, "requires_python", where, (dict,), optional=True) or {}).items():
            at = f"{where}.requires_python.{package}"
            if not isinstance(spec, str):
                raise self.fail(at, f"expected a string, got {_json_kind(spec)}")
            try:
                SpecifierSet(spec)
            except InvalidSpecifier:
                raise self.fail(at, f"{spec!r} is not a version specifier") from None
            requires_python[package] = spec

        unconfirmed = {}
        for platform, names in (
            self.get(row, "unconfirmed_variants", where, (dict,), optional=True) or {}
        ).items():
            at = f"{where}.unconfirmed_variants.{platform}"
            if not isinstance(names, list):
                raise self.fail(at, f"expected a list, got {_json_kind(names)}")
            for i, name in enumerate(names):
                if name not in variants.get(platform, ()):
                    raise self.fail(f"{at}[{i}]", f"{name!r} is not among {where}.variants.{platform}")
            unconfirmed[platform] = tuple(names)

        source, confidence = self.provenance(row, where)
        unverified = self.strings(row, "unverified_fields", where) if "unverified_fields" in row else ()
        return Release(
            minor,
            tuple(patches),
            py_min,
            py_max,
            free_threaded,
            variants,
            pypi_default,
            source,
            confidence,
            unverified,
            cudnn,
            requires_python,
            unconfirmed,
        )

    def arch_row(self, row: dict, where: str) -> ArchList:
        minor = self.string(row, "torch_minor", where, _MINOR_RE, "a version (major.minor)")
        variant = self.string(row, "variant", where, _VARIANT_RE, "a variant (cpu, cuNNN, rocmX.Y[.Z], xpu)")
        platform = self.string(row, "platform", where)
        if platform not in PLATFORMS:
            raise self.fail(f"{where}.platform", f"{platform!r} is not one of {', '.join(PLATFORMS)}")
        sm = self.strings(row, "sm", where, _SM_RE, "a cubin target like 'sm_80'")
        ptx = None
        if row.get("ptx") is not None:
            ptx = self.strings(row, "ptx", where, _PTX_RE, "a PTX target like 'compute_120'")
        elif "ptx" not in row:
            raise self.fail(f"{where}.ptx", "missing (use null when unknown)")
        return ArchList(minor, variant, platform, sm, ptx, *self.provenance(row, where))

    def cuda_row(self, row: dict, where: str) -> CudaDriver:
        cuda = self.string(row, "cuda", where, _MINOR_RE, "a CUDA version (major.minor)")
        min_linux = self.opt_string(row, "min_linux", where, _DRIVER_RE, "a driver version")
        min_windows = self.opt_string(row, "min_windows", where, _DRIVER_RE, "a driver version")
        return CudaDriver(cuda, min_linux, min_windows, *self.provenance(row, where))

    def major_row(self, row: dict, where: str) -> MajorFloor:
        major = self.get(row, "major", where, (int,))
        min_linux = self.opt_string(row, "min_linux", where, _DRIVER_RE, "a driver version")
        min_windows = self.opt_string(row, "min_windows", where, _DRIVER_RE, "a driver version")
        return MajorFloor(major, min_linux, min_windows, *self.provenance(row, where))

    def branch_row(self, row: dict, where: str) -> DriverBranch:
        branch = self.get(row, "branch", where, (int,))
        max_cuda = self.string(row, "max_cuda", where, _MINOR_RE, "a CUDA version (major.minor)")
        return DriverBranch(branch, max_cuda, *self.provenance(row, where))

    def toolkit_row(self, row: dict, where: str) -> CudaToolkit:
        cuda = self.string(row, "cuda", where, _MINOR_RE, "a CUDA version (major.minor)")
        sm = self.strings(row, "sm", where, _PLAIN_SM_RE, "a plain cubin target like 'sm_80'")
        if not sm:
            raise self.fail(f"{where}.sm", "is empty")
        numbers = [_sm_number(t) for t in sm]
        if numbers != sorted(set(numbers)):
            raise self.fail(f"{where}.sm", "is not ascending without repeats")
        lowest = self.string(row, "lowest_sm", where, _PLAIN_SM_RE, "a plain cubin target like 'sm_80'")
        highest = self.string(row, "highest_sm", where, _PLAIN_SM_RE, "a plain cubin target like 'sm_80'")
        if lowest != sm[0]:
            raise self.fail(f"{where}.lowest_sm", f"{lowest!r} is not the lowest of sm ({sm[0]!r})")
        if highest != sm[-1]:
            raise self.fail(f"{where}.highest_sm", f"{highest!r} is not the highest of sm ({sm[-1]!r})")
        return CudaToolkit(cuda, sm, lowest, highest, *self.provenance(row, where))

    def cudnn_row(self, row: dict, where: str) -> CudnnSupport:
        cudnn = self.string(row, "cudnn", where, _MINOR_RE, "a cuDNN version (major.minor)")
        cuda_major = self.get(row, "cuda_major", where, (int,))
        cc = self.string(row, "min_compute_capability", where, _MINOR_RE, "a compute capability "
            "(major.minor)")
        return CudnnSupport(cudnn, cuda_major, cc, *self.provenance(row, where))

    def numpy_row(self, row: dict, where: str) -> NumpyAbi:
        specs = {}
        for key in ("torch", "numpy"):
            text = self.string(row, key, where)
            try:
                SpecifierSet(text)
            except InvalidSpecifier:
                raise self.fail(f"{where}.{key}", f"{text!r} is not a version specifier") from None
            specs[key] = text
        os_name = self.string(row, "os", where)
        if os_name not in ("all", "linux", "windows", "darwin"):
            raise self.fail(f"{where}.os", f"{os_name!r} is not one of all, linux, windows, darwin")
        return NumpyAbi(specs["torch"], os_name, specs["numpy"], *self.provenance(row, where))

    def pypi_torch(self, row: dict, where: str) -> str:
        """The row's ``torch``: a release as PyPI names it (a version without a local tag)."""
        torch = self.string(row, "torch", where)
        try:
            Version(torch)
        except InvalidVersion:
            raise self.fail(f"{where}.torch", f"{torch!r} is not a version") from None
        if "+" in torch:
            raise self.fail(f"{where}.torch", f"{torch!r}: the PyPI build has no local tag")
        return torch

    def requires_row(self, row: dict, where: str) -> DeclaredRequirements:
        from packaging.requirements import InvalidRequirement, Requirement

        torch = self.pypi_torch(row, where)
        platform = self.string(row, "platform", where)
        if platform not in PLATFORMS:
            raise self.fail(f"{where}.platform", f"{platform!r} is not one of {', '.join(PLATFORMS)}")
        wheel = self.string(row, "wheel", where)
        lines = self.get(row, "requires", where, (list,))
        for i, line in enumerate(lines):
            try:
                Requirement(line)
            except (InvalidRequirement, TypeError):
                raise self.fail(f"{where}.requires[{i}]", f"{line!r} is not a requirement") from None
        return DeclaredRequirements(torch, platform, wheel, tuple(lines), *self.provenance(row, where))

    def longest_path_row(self, row: dict, where: str) -> WindowsLongestPath:
        torch = self.pypi_torch(row, where)
        wheel = self.string(row, "wheel", where)
        if not (wheel.startswith(f"torch-{torch}-") and wheel.endswith("-win_amd64.whl")):
            raise self.fail(f"{where}.wheel", f"{wheel!r} is not a win_amd64 wheel of torch {torch}")
        sha256 = self.string(row, "sha256", where, _SHA256_RE, "a sha256 (64 lowercase hex digits)")
        member = self.string(row, "member", where)
        if not member.strip():
            raise self.fail(f"{where}.member", "is empty")
        length = self.get(row, "length", where, (int,))
        if isinstance(length, bool) or length != len(member):
            raise self.fail(f"{where}.length", f"{length!r} is not the length of member ({len(member)})")
        return WindowsLongestPath(torch, wheel, sha256, member, length, *self.provenance(row, where))

    def jetpack_row(self, row: dict, where: str) -> JetPackRow:
        l4t = self.string(row, "l4t", where, _L4T_RE, "a Jetson Linux release (major or major.minor)")
        jetpack = self.string(row, "jetpack", where)
        cuda = self.string(row, "cuda", where, _MINOR_RE, "a CUDA version (major.minor)")
        note = self.get(row, "note", where, (str,), optional=True) or ""
        return JetPackRow(l4t, jetpack, cuda, note, *self.provenance(row, where))

    def support_row(self, row: dict, where: str) -> DriverSupport:
        low = self.string(row, "min_compute_capability", where, _MINOR_RE, "a compute capability "
            "(major.minor)")
        high = self.string(row, "max_compute_capability", where, _MINOR_RE, "a compute capability "
            "(major.minor)")
        if Version(low) > Version(high):
            raise self.fail(f"{where}.min_compute_capability", f"{low!r} is above max_compute_capability "
                f"{high!r}")
        branch = self.get(row, "last_branch", where, (int,))
        architectures = self.get(row, "architectures", where, (str,), optional=True) or ""
        return DriverSupport(low, high, branch, architectures, *self.provenance(row, where))

    def forward_row(self, row: dict, where: str) -> ForwardCompat:
        gpus = self.string(row, "gpus", where)
        if gpus not in FORWARD_COMPAT_GPUS:
            raise self.fail(f"{where}.gpus", f"{gpus!r} is not one of {', '.join(FORWARD_COMPAT_GPUS)}")
        supported = self.get(row, "supported", where, (bool,))
        note = self.get(row, "note", where, (str,), optional=True) or ""
        return ForwardCompat(gpus, supported, note, *self.provenance(row, where))

    def companion_rules(self, data: dict) -> list[CompanionCudaCheck]:
        rules = self.get(data, "companion_rules", "", (dict,), optional=True)
        if rules is None:
            return []
        checks = []
        for i, row in enumerate(self.get(rules, "cuda_check", "companion_rules", (list,))):
            where = f"companion_rules.cuda_check[{i}]"
            if not isinstance(row, dict):
                raise self.fail(where, f"expected an object, got {_json_kind(row)}")
            package = self.string(row, "package", where).strip().lower()
            versions = self.string(row, "versions", where)
            try:
                SpecifierSet(versions)
            except InvalidSpecifier:
                raise self.fail(f"{where}.versions", f"{versions!r} is not a version specifier") from None
            compares = self.string(row, "compares", where)
            if compares not in _CUDA_CHECKS:
                raise self.fail(f"{where}.compares", f"{compares!r} is not one of {', '.join(_CUDA_CHECKS)}")
            checks.append(CompanionCudaCheck(package, versions, compares, *self.provenance(row, where)))
        return checks

    def gpu_row(self, row: dict, where: str, aliases: dict[str, str]) -> GpuModel:
        name = self.string(row, "name", where)
        cc = self.string(row, "compute_capability", where, _MINOR_RE, "a compute capability (major.minor)")
        arch = self.string(row, "arch", where)
        if "aliases" in row:
            for alias in self.strings(row, "aliases", where):
                aliases[alias] = name
        segment = self.opt_string(row, "segment", where)
        if segment is not None and segment not in _SEGMENTS:
            raise self.fail(f"{where}.segment", f"{segment!r} is not one of {', '.join(_SEGMENTS)}")
        return GpuModel(name, cc, arch, *self.provenance(row, where), segment)


_KIND_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "an object", bool: "a boolean"}


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    return _KIND_NAMES.get(type(value), type(value).__name__)
