"""The loaded compatibility table: every lookup is a dict access or a bisect over an index built once."""

from __future__ import annotations

import bisect
import re

from packaging.version import Version

from doctor.model.versions import minor_key as _minor_key
from doctor.model.versions import variant_to_cuda
from doctor.table.gpus import gpu_indexes, normalise_gpu_name, strip_gpu_suffixes
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
    Release,
    WindowsLongestPath,
    _public,
    spec_holds,
)


class CompatTable:
    """A loaded, validated table with O(1) lookups. Build it with ``load_table``."""

    def __init__(
        self,
        path: str,
        schema_version: int,
        table_version: str,
        verified_on: str,
        releases: tuple[Release, ...],
        arch_lists: tuple[ArchList, ...],
        cuda_drivers: tuple[CudaDriver, ...],
        major_floors: tuple[MajorFloor, ...],
        driver_branches: tuple[DriverBranch, ...],
        gpu_models: tuple[GpuModel, ...],
        gpu_aliases: dict[str, str] | None = None,
        cuda_toolkits: tuple[CudaToolkit, ...] = (),
        cudnn_support: tuple[CudnnSupport, ...] = (),
        companion_checks: tuple[CompanionCudaCheck, ...] = (),
        jetpack: tuple[JetPackRow, ...] = (),
        driver_support: tuple[DriverSupport, ...] = (),
        forward_compat: tuple[ForwardCompat, ...] = (),
        numpy_abi: tuple[NumpyAbi, ...] = (),
        requires_dist: tuple[DeclaredRequirements, ...] = (),
        windows_longest_paths: tuple[WindowsLongestPath, ...] = (),
    ):
        self.path = path
        self.schema_version = schema_version
        self.table_version = table_version
        self.verified_on = verified_on
        self.releases = tuple(sorted(releases, key=lambda r: _key(r.minor)))
        self.arch_lists = arch_lists
        self.cuda_drivers = cuda_drivers
        self.major_floors = major_floors
        self.driver_branches = tuple(sorted(driver_branches, key=lambda b: b.branch))
        self.gpu_models = gpu_models
        self.numpy_abi = numpy_abi
        self.requires_dist = requires_dist
        self._requires = {(r.torch, r.platform): r for r in requires_dist}
        self.windows_longest_paths = windows_longest_paths
        self._longest = {w.torch: w for w in windows_longest_paths}

        self._releases = {r.minor: r for r in self.releases}
        self._arch = {(a.torch_minor, a.variant, a.platform): a for a in arch_lists}
        # (variant, platform) -> (ascending minors, their rows) for the older-minor fallback
        self._arch_series: dict[tuple[str, str], tuple[list[Version], list[ArchList]]] = {}
        for row in sorted(arch_lists, key=lambda a: _key(a.torch_minor)):
            minors, rows = self._arch_series.setdefault((row.variant, row.platform), ([], []))
            minors.append(_key(row.torch_minor))
            rows.append(row)
        self._cuda = {c.cuda: c for c in cuda_drivers}
        self._majors = {m.major: m for m in major_floors}
        self._branches = {b.branch: b for b in self.driver_branches}
        self._branch_numbers = [b.branch for b in self.driver_branches]
        self._gpus_exact, self._gpus_loose = gpu_indexes(gpu_models, gpu_aliases or {})
        self.cuda_toolkits = tuple(sorted(cuda_toolkits, key=lambda t: _key(t.cuda)))
        self.cudnn_rows = cudnn_support
        self.companion_checks = companion_checks
        self._toolkits = {t.cuda: t for t in self.cuda_toolkits}
        # cuda major -> (ascending first cuDNN versions, their rows) for the nearest-lower lookup
        self._cudnn: dict[int, tuple[list[Version], list[CudnnSupport]]] = {}
        for row in sorted(cudnn_support, key=lambda c: _key(c.cudnn)):
            versions, rows = self._cudnn.setdefault(row.cuda_major, ([], []))
            versions.append(_key(row.cudnn))
            rows.append(row)
        self.jetpack_rows = jetpack
        self.driver_support = driver_support
        self._jetpack = {j.l4t: j for j in jetpack}
        self.forward_compat = forward_compat
        self._forward = {f.gpus: f for f in forward_compat}
        self._companions: dict[str, tuple[CompanionCudaCheck, ...]] = {}
        for check in companion_checks:
            self._companions[check.package] = (*self._companions.get(check.package, ()), check)

    def forward_compat_for(self, gpus: str | None) -> ForwardCompat | None:
        """The forward-compatibility row of a GPU class ("data-center", "geforce", ...), or None."""
        return self._forward.get(gpus) if gpus else None

    def __repr__(self) -> str:
        return f"CompatTable({self.path!r}, table_version={self.table_version!r})"

    def release(self, version: str) -> Release | None:
        """The row of a torch minor: "2.7", "2.7.1", "2.7.1+cu128" and "2.8.0a0+git..." all give 2.x."""
        key = _minor_key(version)
        return self._releases.get(key) if key else None

    def arch_list(self, torch_version: str, variant: str, platform: str) -> ArchList | None:
        """The arch list of a build; falls back to the newest older row of the same variant and platform
        (arch lists rarely change), but only when that variant is published for this release."""
        minor = _minor_key(torch_version)
        if minor is None:
            return None
        variant = variant.strip().lower()
        exact = self._arch.get((minor, variant, platform))
        if exact is not None:
            return exact
        release = self._releases.get(minor)
        if release is None or variant not in release.variants_for(platform):
            return None
        minors, rows = self._arch_series.get((variant, platform), ([], []))
        at = bisect.bisect_right(minors, _key(minor))
        return rows[at - 1] if at else None

    def cuda_driver(self, cuda: str) -> CudaDriver | None:
        """The GA driver row of a CUDA minor: "12.8", "12.8.1" or "cu128"."""
        key = variant_to_cuda(cuda.strip().lower()) or _minor_key(cuda)
        return self._cuda.get(key) if key else None

    def major_floor(self, major: int) -> MajorFloor | None:
        return self._majors.get(major)

    def max_cuda_for_driver(self, driver_version: str) -> DriverBranch | None:
        """The branch of "570.124.04" (570 -> "12.8"); an unknown branch takes the nearest lower one
        (Windows 572.x is R570), and a driver older than every known branch gives None."""
        match = re.match(r"^\s*(\d{1,9})(?!\d)", driver_version or "")
        if not match:
            return None
        branch = int(match.group(1))
        exact = self._branches.get(branch)
        if exact is not None:
            return exact
        at = bisect.bisect_right(self._branch_numbers, branch)
        return self._branches[self._branch_numbers[at - 1]] if at else None

    def gpu(self, name: str) -> GpuModel | None:
        """The model of an NVML name. Exact normalised match first, then without memory/form-factor
        suffixes (only where every model sharing that stem has the same compute capability)."""
        light = normalise_gpu_name(name)
        found = self._gpus_exact.get(light)
        if found is None:
            found = self._gpus_loose.get(strip_gpu_suffixes(light))
        return found

    def toolkit(self, cuda: str) -> CudaToolkit | None:
        """The targets nvcc of a CUDA minor compiles offline: "12.8", "12.8.1" or "cu128"."""
        key = variant_to_cuda((cuda or "").strip().lower()) or _minor_key(cuda or "")
        return self._toolkits.get(key) if key else None

    def cudnn_support(self, cudnn: str, cuda_major: int) -> CudnnSupport | None:
        """The support row of a cuDNN version ("9.1.0.70") built for a CUDA major: the row with the
        newest first version not above it, for that CUDA major. None when no row covers it."""
        key = _minor_key(cudnn or "")
        versions, rows = self._cudnn.get(cuda_major, ([], []))
        if key is None or not versions:
            return None
        at = bisect.bisect_right(versions, _key(key))
        return rows[at - 1] if at else None

    def cudnn_min_cc(self, torch_version: str, variant: str | None = None) -> str | None:
        """The lowest compute capability the cuDNN of a torch build supports ("5.0" for cuDNN 9).

        With a variant ("cu118"): that build's cuDNN. Without: the answer shared by every CUDA variant of
        the release that records its cuDNN, or None when they differ or none is recorded."""
        release = self.release(torch_version)
        if release is None:
            return None
        variants = [variant.strip().lower()] if variant else sorted(release.cudnn)
        answers = set()
        for name in variants:
            cuda = variant_to_cuda(name)
            version = release.cudnn_version(name)
            row = self.cudnn_support(version, int(cuda.split(".")[0])) if cuda and version else None
            if row is None:
                return None
            answers.add(row.min_compute_capability)
        return answers.pop() if len(answers) == 1 else None

    def windows_longest_path(self, torch: str | None) -> WindowsLongestPath | None:
        """The longest member path of the PyPI win_amd64 wheels of ``torch``'s release ("2.13.0+cu126" -> the
        2.13.0 row); None for a release the table lacks (a nightly "2.13.0.dev20260522" among them)."""
        return self._longest.get(_public(torch)) if torch else None

    def jetpack(self, l4t: str | None) -> JetPackRow | None:
        """The JetPack of a Jetson Linux (L4T) release: "36.4.3" -> the "36.4" row, else the "36" row; None
        when neither is recorded."""
        parts = (l4t or "").split(".")
        if not parts[0].isdigit():
            return None
        major = str(int(parts[0]))
        if len(parts) > 1 and parts[1].isdigit():
            found = self._jetpack.get(f"{major}.{int(parts[1])}")
            if found is not None:
                return found
        return self._jetpack.get(major)

    def last_driver_branch(self, cc) -> int | None:
        """The last driver branch that supports a GPU of compute capability ``cc`` ((6, 1) or "6.1"): 580 for
        Pascal, 470 for Kepler; None when every branch the table knows does (or nothing is recorded)."""
        if isinstance(cc, str):
            parts = cc.split(".")
            cc = (
                (int(parts[0]), int(parts[1]))
                if len(parts) == 2 and all(p.isdigit() for p in parts)
                else None
            )
        if not cc:
            return None
        ends = [row.last_branch for row in self.driver_support
                if _cc(row.min_compute_capability) <= tuple(cc) <= _cc(row.max_compute_capability)]
        return min(ends) if ends else None

    def numpy_limit(self, torch: str, os_name: str) -> NumpyAbi | None:
        """The NumPy a torch build ("2.2.2+cu121") on ``os_name`` was compiled for, when the table records
        one: the row whose torch range holds it (an OS's own row first), else None."""
        wanted = _public(torch)
        rows = sorted(self.numpy_abi, key=lambda n: n.os == "all")
        for row in rows:
            if row.os in ("all", os_name) and spec_holds(row.torch, wanted):
                return row
        return None

    def declared_requirements(self, torch: str, platform: str) -> DeclaredRequirements | None:
        """What the PyPI wheel of ``torch`` ("2.1.1") for ``platform`` declares, when the table records it;
        None for a build with a local tag ("2.1.1+cu118", from another index) or a release not recorded."""
        if "+" in torch:
            return None
        return self._requires.get((_public(torch), platform))

    def companion_cuda_check(self, package: str, version: str) -> CompanionCudaCheck | None:
        """How a companion package ("torchvision", "0.15.2+cu117") compares its CUDA with torch's at
        import: the row whose version range holds it, or None when no row does."""
        wanted = _public(version)
        for check in self._companions.get((package or "").strip().lower(), ()):
            if spec_holds(check.versions, wanted):  # None: not a version at all
                return check
        return None


def _key(text: str) -> Version:
    """The sort key of a version the table parser has validated (and of _minor_key's answers); packaging's
    InvalidVersion (a ValueError) for anything else."""
    return Version(text)


def _cc(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)
