"""The NVIDIA driver as a remedy (pure): whether this run may change it, and what to install when it may.

The driver is the first way out when the torch the user has (or asks for) runs on this GPU once the driver is
newer. It cannot be changed from inside a container (the kernel module is the host's) nor by a job of a
managed cluster (the nodes' driver is the administrators'), and not when the user says so
(``--no-driver-change``); then the plan's first way is a torch that runs on today's driver.

The advice names the minimum version for this OS from the table's ``cuda`` rows (NVIDIA's "CUDA Toolkit and
Corresponding Driver Versions"; Windows from its own column), the branch, and the last branch an old GPU gets
(``driver_support``: R470 for Kepler, R580 for Maxwell, Pascal and Volta). Data-center GPUs (the table's
``segment``) get NVIDIA's data-center driver and Ubuntu's ``-server`` packages; Ubuntu names its packages
``nvidia-driver-<branch>`` and ``nvidia-driver-<branch>-server`` (packages.ubuntu.com, source packages
``nvidia-graphics-drivers-<branch>[-server]``) and installs them with ``ubuntu-drivers install [--gpgpu]
nvidia:<branch>[-server]`` (Ubuntu Server documentation, "NVIDIA drivers installation").
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.model.i18n import Msg
from doctor.model.snapshot import Snapshot
from doctor.model.versions import parse_cc, version_tuple

DRIVER_DOWNLOADS = "https://www.nvidia.com/Download/index.aspx"
DATA_CENTER_DRIVERS = "https://docs.nvidia.com/datacenter/tesla/index.html"
UBUNTU_DRIVERS = "https://ubuntu.com/server/docs/nvidia-drivers-installation"
CUDA_ON_WSL = "https://docs.nvidia.com/cuda/wsl-user-guide/index.html"

_SCHEDULERS = {"slurm": "Slurm", "pbs": "PBS", "lsf": "LSF", "sge": "Grid Engine", "htcondor": "HTCondor"}


@dataclass(frozen=True, slots=True)
class DriverChange:
    """Whether this run may propose changing the driver, and if not, why and who can."""

    possible: bool
    why: str = ""  # "--no-driver-change", "this is a docker container: ..."
    who: str = ""  # "the host", "the cluster's administrators": who can update it instead


def container_kind(snap: Snapshot) -> str | None:
    section = snap.environment.container
    return (section.kind if section is not None else None) or snap.host.container


def driver_change(snap: Snapshot) -> DriverChange:
    """How the run decides it (in this order): ``--no-driver-change``; a container (``/.dockerenv``,
    ``/run/.containerenv``, container cgroups: the host probe and the container probe); a job of a cluster
    scheduler (``SLURM_JOB_ID``, ``PBS_JOBID``, ``LSB_JOBID``, ``JOB_ID`` with ``SGE_ROOT``: the host
    probe)."""
    if snap.requested.no_driver_change:
        return DriverChange(False, "--no-driver-change keeps the driver as it is", "")
    kind = container_kind(snap)
    if kind:
        return DriverChange(False, f"this is a {kind} container: the NVIDIA driver belongs to the host and "
            "is "
                            "shared by every container on it", "the host's administrator")
    if snap.host.scheduler:
        name = _SCHEDULERS.get(snap.host.scheduler, snap.host.scheduler)
        return DriverChange(False, f"this is a {name} job on a managed cluster: the nodes' NVIDIA driver "
            "belongs to "
                            "the cluster's administrators", "the cluster's administrators")
    return DriverChange(True)


@dataclass(frozen=True, slots=True)
class DriverAdvice:
    """What to install to run a CUDA version: the minimum for this OS, the branch, the commands."""

    # "580.65.06" (Linux), "570.65" (Windows); a branch floor "580" when only that is known
    minimum: str | None
    branch: int | None  # 580
    summary: str  # "the NVIDIA driver 580.65.06 or newer (R580 or a later branch)"
    then: str = ""  # what follows the install: "reboot", "restart"
    # who installs it when this run cannot ("the host's administrator: this is a docker container...")
    who: str = ""
    commands: tuple[str, ...] = ()  # this OS's commands (none where the driver is not changed from here)
    links: tuple[str, ...] = ()
    data_center: bool = False
    last_branch: int | None = None  # the newest branch these GPUs get (580 for Pascal)
    source: str = ""  # the table rows the minimum rests on

    def as_dict(self) -> dict:
        return {"minimum": self.minimum, "branch": self.branch, "summary": self.summary, "then": self.then,
                "who": self.who, "commands": list(self.commands), "links": list(self.links),
                "data_center": self.data_center, "last_branch": self.last_branch, "source": self.source}

    @property
    def sentence(self) -> str:
        """ "the NVIDIA driver 580.65.06 or newer (R580 or a later branch), then reboot" (+ who, when not
        here)."""
        text = self.summary + (Msg(", then {then}", then=self.then) if self.then else "")
        return text + (Msg("; {who}", who=self.who) if self.who else "")


def _gpu_rows(table, snap: Snapshot) -> list:
    return [row for row in (table.gpu(g.name) for g in snap.nvidia.gpus if g.name) if row is not None]


def last_branch(table, snap: Snapshot) -> tuple[int | None, str]:
    """The newest driver branch every GPU here still gets, and the architectures that set it."""
    ends = []
    for gpu in snap.nvidia.gpus:
        cc = parse_cc(gpu.compute_capability.value)
        branch = table.last_driver_branch(cc) if cc else None
        if branch is not None:
            row = next((r for r in table.driver_support if r.last_branch == branch), None)
            ends.append((branch, row.architectures if row else ""))
    return min(ends) if ends else (None, "")


def driver_advice(
    table, snap: Snapshot, cuda: str, verdict, change: DriverChange | None = None
) -> DriverAdvice:
    """The driver that runs a build made with ``cuda`` on this machine (``verdict``: its DriverVerdict)."""
    change = change or driver_change(snap)
    windows = snap.host.os == "windows"
    minimum = verdict.needed or verdict.floor
    parts = version_tuple(minimum)
    branch = parts[0] if parts else None
    data_center = any(r.segment == "data-center" for r in _gpu_rows(table, snap))
    last, archs = last_branch(table, snap)
    row = table.cuda_driver(cuda)
    source = row.source if row is not None else ""
    download = DATA_CENTER_DRIVERS if data_center else DRIVER_DOWNLOADS
    if minimum is None:
        return DriverAdvice(None, None, Msg("a driver that supports CUDA {cuda} (the table does not know its "
            "minimum)", cuda=cuda),
                            links=(download,), data_center=data_center, last_branch=last, source=source)
    version = minimum if "." in minimum else f"R{minimum}"
    span = Msg("R{branch} or a later branch", branch=branch)
    if last is not None and branch is not None and last >= branch:
        span = Msg("R{branch} to R{last}: R{last} is the last branch for {archs} "
            "GPUs", branch=branch, last=last,
                   archs=archs) if last > branch else \
            Msg("R{last}, the last branch for {archs} GPUs", last=last, archs=archs)
    kind = Msg("NVIDIA's data-center driver") if data_center else Msg("the NVIDIA driver")
    if snap.host.wsl:
        return DriverAdvice(
            minimum,
            branch,
            Msg(
                "the Windows driver {version} or newer ({span})", version=verdict.needed or version, span=span
            ),
            Msg("restart Windows"),
            Msg("WSL uses the Windows host's driver: install it on Windows, never inside WSL"),
            (),
            (DRIVER_DOWNLOADS, CUDA_ON_WSL),
            data_center,
            last,
            source,
        )
    summary = Msg("{kind} {version} or newer ({span})", kind=kind, version=version, span=span)
    if not change.possible:
        who = f"{change.who} must install it ({change.why})" if change.who else change.why
        return DriverAdvice(minimum, branch, summary, "", who, (), (download,), data_center, last, source)
    if windows:
        return DriverAdvice(
            minimum, branch, summary, Msg("restart"), "", (), (download,), data_center, last, source
        )
    install = last if last is not None and branch is not None and last >= branch else branch
    works = f"any from R{branch} to R{last} works" if install != branch else f"any from R{branch} on works"
    if data_center:
        command = (f"sudo ubuntu-drivers install --gpgpu nvidia:{install}-server  # Ubuntu; other "
            "distributions: "
                   f"NVIDIA's data-center driver {version} or newer, {DATA_CENTER_DRIVERS}")
    else:
        command = (f"sudo ubuntu-drivers install nvidia:{install}  # Ubuntu (sudo ubuntu-drivers list shows "
            "the "
                   f"branches it packages; {works}); other distributions: {DRIVER_DOWNLOADS}")
    return DriverAdvice(minimum, branch, summary, Msg("reboot"), "", (command, "sudo "
        "reboot"), (download, UBUNTU_DRIVERS),
                        data_center, last, source)
