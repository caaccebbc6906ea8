"""WSL2: driver libraries found before the Windows driver's own in /usr/lib/wsl/lib, and a Linux NVIDIA
driver installed inside WSL."""

from __future__ import annotations

import shlex

from doctor.compat.assessment import Assessment
from doctor.model.environment import Libraries, Wsl
from doctor.model.findings import WARNING, Finding, Fix
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
            commands.append(Msg("sudo mv {quote} {quote}.disabled && sudo ldconfig", quote=shlex.quote(conf_file)))
        where = [f"{e.path} ({', '.join(e.driver_libs)}) in LD_LIBRARY_PATH" for e in offenders] + [
            f"{o['dir']} ({', '.join(o['driver_libs'])}) from {o['file']}" for o in conf_offenders
        ]
        findings.append(
            Finding(
                "wsl-library-path-order",
                WARNING,
                Msg("libcuda/libnvidia-ml are found before {WSL_LIB_DIR}", WSL_LIB_DIR=WSL_LIB_DIR),
                Msg("On WSL2 the Windows driver provides libcuda.so and libnvidia-ml.so in /usr/lib/wsl/lib; copies found "
                "earlier ({where}) cannot talk to the GPU, so nvidia-smi fails and torch sees no device.", where='; '.join(where)),
                {"offending": where, "LD_LIBRARY_PATH": libs.value},
                Fix(Msg("Put {WSL_LIB_DIR} first.", WSL_LIB_DIR=WSL_LIB_DIR), commands),
            )
        )
    linux_driver = wsl.linux_driver or []
    if linux_driver:
        files = [p for p in linux_driver if ".so." in p]
        commands = [f"sudo apt-get purge $(dpkg -S {shlex.quote(f)} | cut -d: -f1)" for f in files[:1]]
        if any("dkms" in p or "/proc/driver" in p or "/sys/module" in p for p in linux_driver):
            commands.append(Msg("dkms status  # then: sudo apt-get purge the nvidia-dkms-* package it names"))
        commands.append(Msg("sudo ldconfig"))
        findings.append(
            Finding(
                "wsl-linux-driver-installed",
                WARNING,
                Msg("a Linux NVIDIA driver is installed inside WSL"),
                Msg("Under WSL2 the Windows NVIDIA driver is the driver; NVIDIA's CUDA on WSL guide says not to install a "
                "Linux display driver in the distribution. Its libraries shadow the ones in {WSL_LIB_DIR} "
                "and break CUDA. Found: {linux_driver}.", WSL_LIB_DIR=WSL_LIB_DIR, linux_driver=', '.join(linux_driver)),
                {"linux_driver": list(linux_driver)},
                Fix(
                    Msg("Remove the Linux driver packages (keep the CUDA toolkit, if any); update the driver on Windows "
                    "instead."),
                    commands,
                    ["https://docs.nvidia.com/cuda/wsl-user-guide/index.html"],
                ),
            )
        )
    return findings
