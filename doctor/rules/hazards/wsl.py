"""WSL: WSL 1, which has no GPU at all; under WSL 2, driver libraries found before the Windows driver's own
in /usr/lib/wsl/lib, and a Linux NVIDIA driver installed inside WSL. Each is an error when torch is a CUDA
build and the driver does not answer: the GPU cannot be used."""

from __future__ import annotations

from doctor.compat.assessment import Assessment
from doctor.compat.wsl import wsl_version
from doctor.model import shells
from doctor.model import snapshot as S
from doctor.model.environment import Libraries, Wsl
from doctor.model.findings import ERROR, INFO, WARNING, Finding, Fix
from doctor.model.i18n import Msg
from doctor.rules import skipped
from doctor.rules.hazards.common import WSL_LIB_DIR, export, missing, same_dir, split_path


def check_wsl(facts: Assessment) -> list[Finding]:
    snap = facts.snap
    if not snap.host.wsl:
        gap = missing(snap, snap.environment.wsl, "whether this is WSL")
        if gap is not None:
            return gap
    wsl = snap.environment.wsl or Wsl()
    if not (wsl.is_wsl or snap.host.wsl):
        return skipped(Msg("not WSL"))
    cuda = facts.build is not None and facts.build.kind == "cuda"
    # A report read from collect_env text has no WSL section: its Python platform line names the kernel.
    if (wsl.version or wsl_version(snap.host.os_release)) == 1:
        # No torch yet counts as a CUDA build: on Linux the torch pip installs by default is one.
        gpu_build = facts.build is None or facts.build.kind in ("cuda", "unknown")
        return [_wsl1(wsl, gpu_build, wsl.kernel_release or snap.host.os_release)]
    # What breaks the Windows driver's libraries stops CUDA when the driver no longer answers.
    severity = ERROR if cuda and snap.nvidia.status != S.NVIDIA_OK else WARNING
    findings = []
    libs = snap.environment.libraries or Libraries()
    offenders = []
    for entry in libs.dirs:
        if same_dir(str(entry.path), WSL_LIB_DIR):
            break  # everything after the WSL folder is searched later: harmless
        if entry.driver_libs:
            offenders.append(entry)
    conf_offenders = []
    for conf in wsl.ld_so_conf or []:
        if any(same_dir(d, WSL_LIB_DIR) for d in conf.dirs):
            break
        for directory, names in conf.driver_libs.items():
            if names:
                conf_offenders.append({"file": conf.file, "dir": directory, "driver_libs": names})
    if offenders or conf_offenders:
        commands = []
        if offenders:
            bad = [e.path for e in offenders]
            rest = [
                d
                for d in split_path(libs.value)
                if not any(same_dir(d, b) for b in bad) and not same_dir(d, WSL_LIB_DIR)
            ]
            commands.append(export("LD_LIBRARY_PATH", [WSL_LIB_DIR] + rest))
        for conf_file in dict.fromkeys(o["file"] for o in conf_offenders):
            commands.append(Msg("sudo mv {quote} {quote}.disabled && sudo "
                "ldconfig", quote=shells.quote(conf_file)))
        where = [f"{e.path} ({', '.join(e.driver_libs)}) in LD_LIBRARY_PATH" for e in offenders] + [
            f"{o['dir']} ({', '.join(o['driver_libs'])}) from {o['file']}" for o in conf_offenders
        ]
        findings.append(
            Finding(
                "wsl-library-path-order",
                severity,
                Msg("libcuda/libnvidia-ml are found before {WSL_LIB_DIR}", WSL_LIB_DIR=WSL_LIB_DIR),
                Msg("On WSL2 the Windows driver provides libcuda.so and libnvidia-ml.so in /usr/lib/wsl/lib; "
                    "copies found "
                "earlier ({where}) cannot talk to the GPU, so nvidia-smi fails and torch sees no "
                "device.", where='; '.join(where)),
                {"offending": where, "LD_LIBRARY_PATH": libs.value},
                Fix(Msg("Put {WSL_LIB_DIR} first.", WSL_LIB_DIR=WSL_LIB_DIR), commands),
            )
        )
    linux_driver = wsl.linux_driver or []
    packages = wsl.driver_packages or []
    if linux_driver or packages:
        findings.append(_linux_driver(wsl, linux_driver, packages, severity))
    return findings


WSL_GUIDE = "https://docs.nvidia.com/cuda/wsl-user-guide/index.html"
WSL_VERSIONS = "https://learn.microsoft.com/windows/wsl/basic-commands#set-wsl-version-to-1-or-2"


def _wsl1(wsl: Wsl, cuda: bool, release: str | None) -> Finding:
    """WSL 1 translates Linux system calls and has no GPU paravirtualisation: no CUDA at all."""
    distro = wsl.distro or "<distro>"
    return Finding(
        "wsl1-no-gpu",
        ERROR if cuda else INFO,
        Msg("this is WSL 1, which has no GPU: CUDA cannot work here"),
        Msg("The kernel release {release} is WSL 1's. WSL 1 has no GPU paravirtualisation (/dev/dxg) and no "
            "access to the Windows driver, so CUDA finds no device and torch.cuda.is_available() is False. "
            "Only "
            "WSL 2 passes the GPU through.", release=release or "?"),
        {"kernel_release": release, "wsl.evidence": list(wsl.evidence), "distro": wsl.distro},
        Fix(Msg("Convert the distribution to WSL 2, in Windows (PowerShell or cmd), then open it again."),
            [f"wsl --set-version {shells.quote(distro, shells.POWERSHELL) if wsl.distro else distro} 2  # in "
                "Windows",
             "wsl --set-default-version 2  # in Windows, for distributions installed later"],
            [WSL_VERSIONS, WSL_GUIDE]),
    )


def _linux_driver(wsl: Wsl, linux_driver: list[str], packages: list[str], severity: str) -> Finding:
    """A Linux NVIDIA driver inside WSL 2: its libcuda/libnvidia-ml and nvidia-smi shadow the Windows
    driver's."""
    if packages:
        commands = [f"sudo apt-get purge {' '.join(shells.quote(p) for p in packages)}"]
    else:  # its files without dpkg's status at hand: dpkg names the package that owns one
        files = [p for p in linux_driver if ".so." in p]
        commands = [f"sudo apt-get purge $(dpkg -S {shells.quote(f)} | cut -d: -f1)" for f in files[:1]]
        if any("dkms" in p or "/proc/driver" in p or "/sys/module" in p for p in linux_driver):
            commands.append(Msg("dkms status  # then: sudo apt-get purge the nvidia-dkms-* package it names"))
    commands.append("sudo apt-get autoremove --purge")
    if not any(same_dir(d, WSL_LIB_DIR) for conf in wsl.ld_so_conf or [] for d in conf.dirs):
        commands.append(f"echo {WSL_LIB_DIR} | sudo tee /etc/ld.so.conf.d/ld.wsl.conf")
    commands.append("sudo ldconfig")
    commands.append("wsl --shutdown  # in Windows, then open the distribution again")
    found = list(linux_driver) + [f"dpkg: {p}" for p in packages]
    return Finding(
        "wsl-linux-driver-installed",
        severity,
        Msg("a Linux NVIDIA driver is installed inside WSL"),
        Msg("Under WSL2 the Windows NVIDIA driver is the driver; NVIDIA's CUDA on WSL guide says not to "
            "install a "
            "Linux display driver in the distribution. Its libraries and nvidia-smi shadow the ones in "
            "{WSL_LIB_DIR} and break CUDA. Found: {linux_driver}. Driver versions under WSL are the Windows "
            "driver's, never a Linux branch: update the driver on Windows.",
            WSL_LIB_DIR=WSL_LIB_DIR, linux_driver=", ".join(found)),
        {"linux_driver": list(linux_driver), "driver_packages": list(packages), "nvidia_smi": wsl.nvidia_smi},
        Fix(Msg("Remove the Linux driver packages (keep the CUDA toolkit, if any) and keep {WSL_LIB_DIR} "
            "first; "
                "update the driver on Windows instead.", WSL_LIB_DIR=WSL_LIB_DIR),
            commands, [WSL_GUIDE]),
    )
