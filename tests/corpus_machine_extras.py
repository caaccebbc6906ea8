"""Additions to tests/corpus_machine.py's specs for facts of issue 29's reports (the format is in
tests/fixtures/corpus_platforms/README.md, "Additions for issue 29"):

- ``target.moved``: distribution name -> a folder relative to the venv (``lib64/python3.11/site-packages``):
  the distribution's files leave the venv's site-packages for that folder, which stays on sys.path through a
  ``.pth`` line (as a platlib/purelib split does: pip puts a platform wheel in lib64, a pure one in lib);
- ``target.user_site``: ``{"torch": ..., "cuda": ...}``, a copy of torch in the user site
  (``~/.local/lib/pythonX.Y/site-packages``, HOME inside the machine's folder). The venv then includes the
  system site-packages, as a Python outside a venv does: only then is the user site on sys.path;
- ``windows``: a Windows machine, which the CLI on this Linux host cannot inspect. Its report is composed
  (``windows_report``): this host's ``check --json`` of the same fake target, with the Windows facts put in,
  the long-path setting read by the real Windows probe through a fake ``winreg``, and with
  ``display_adapters`` the AMD and Intel GPUs read by the real probes from the registry's Display class keys;
  ``check --from`` then diagnoses that report.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from fakeenv import make_fake_env, site_packages

REPO = Path(__file__).resolve().parents[1]
EXTRA_TARGET_KEYS = {"moved", "user_site"}


def move_dists(venv: Path, moved: dict[str, str]) -> None:
    """Move each named distribution (its RECORD's files and its dist-info) to its folder under ``venv``."""
    site = site_packages(venv)
    pth = []
    for name, relative in moved.items():
        folder = Path(venv) / relative
        top = Path(venv) / Path(relative).parts[0]
        if top.is_symlink():  # a venv's lib64 is a link to lib; here the two are apart
            top.unlink()
        folder.mkdir(parents=True, exist_ok=True)
        stem = name.replace("-", "_")
        infos = [p for p in site.glob("*.dist-info") if p.name.split("-")[0].lower() == stem]
        assert infos, f"no {name} in {site}"
        for info in infos:
            for line in (info / "RECORD").read_text().splitlines():
                path = line.split(",")[0]
                source = site / path
                if path and source.is_file() and not path.startswith(info.name):
                    (folder / path).parent.mkdir(parents=True, exist_ok=True)
                    shutil.move(str(source), str(folder / path))
            shutil.move(str(info), str(folder / info.name))
        pth.append(str(folder))
    (site / "corpus-moved.pth").write_text("".join(f"{p}\n" for p in dict.fromkeys(pth)))


def user_site(python: Path, venv: Path, home: Path, target: dict) -> dict[str, str]:
    """torch in the user site of ``python`` under ``home``; the variables the CLI needs (HOME)."""
    cfg = Path(venv) / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace("include-system-site-packages = false",
                                           "include-system-site-packages = true"))
    env = dict(os.environ, HOME=str(home))
    folder = Path(subprocess.run([str(python), "-c", "import site; print(site.getusersitepackages())"],
                                 env=env, check=True, capture_output=True, text=True).stdout.strip())
    other = make_fake_env(home / ".user-site-build", python=str(python), torch=target["torch"],
                          cuda=target.get("cuda"), deps=False)
    shutil.copytree(site_packages(Path(other).parents[1]), folder, dirs_exist_ok=True)
    shutil.rmtree(home / ".user-site-build")
    return {"HOME": str(home)}


class _FakeWinreg:
    """The part of ``winreg`` the Windows probe uses, over {(key path, value name): value}."""

    HKEY_LOCAL_MACHINE = "HKLM"

    def __init__(self, values: dict):
        self.values = values

    def OpenKey(self, root, path):  # noqa: N802 - winreg's names
        return contextlib.nullcontext(path)

    def EnumKey(self, key, index):  # noqa: N802
        below = sorted({k[len(key) + 1:].split("\\")[0] for k, _ in self.values if k.startswith(key + "\\")})
        if index >= len(below):
            raise OSError(259, "No more data is available")
        return below[index]

    def QueryValueEx(self, key, name):  # noqa: N802
        if (key, name) not in self.values:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        return self.values[(key, name)], 4  # REG_DWORD


def windows_report(linux_report: dict, windows: dict) -> dict:
    """``linux_report`` (``check --json`` of the fake target on this host) as the Windows machine ``windows``
    describes: ``interpreter`` (the python.exe path), ``python`` (its version), ``registry`` ({value name:
    value} under HKLM\\SYSTEM\\CurrentControlSet\\Control\\FileSystem; a value left out is absent) and
    optionally ``prefix`` (its sys.prefix: sys.path then holds <prefix>\\Lib\\site-packages, where pip
    installs)."""
    from doctor.model.snapshot import as_plain
    from doctor.probes.environment.windows import FILESYSTEM_KEY, probe_windows

    report = json.loads(json.dumps(linux_report))
    snap = report["snapshot"]
    snap["host"].update(os="windows", machine="x86_64", libc="")
    snap["interpreter"].update(path=windows["interpreter"], version=windows["python"])
    if "prefix" in windows:  # sys.prefix, and the sys.path CPython builds from it on Windows
        prefix, (major, minor) = windows["prefix"], windows["python"].split(".")[:2]
        snap["interpreter"]["prefix"] = prefix
        snap["environment"]["python"]["sys_path"] = [
            f"{prefix}\\python{major}{minor}.zip", f"{prefix}\\DLLs", f"{prefix}\\Lib", prefix,
            f"{prefix}\\Lib\\site-packages"]
    registry = {(FILESYSTEM_KEY, name): value for name, value in (windows.get("registry") or {}).items()}
    snap["environment"]["windows"] = as_plain(probe_windows(_FakeWinreg(registry)))
    if "display_adapters" in windows:
        _display_adapters(snap, windows["display_adapters"])
    for key in ("loader", "wsl"):  # Linux-only sections: the Windows probe does not read them
        snap["environment"][key] = None if key == "loader" else {"is_wsl": False, "evidence": []}
    return report


def _display_adapters(snap: dict, adapters: dict) -> None:
    """The AMD and Intel GPU facts as the real probes read them on Windows, from a fake registry holding the
    Display class's adapter keys (``{"0000": {"MatchingDeviceId": "PCI\\VEN_1002&DEV_744C", "DriverDesc":
    ...}}``)."""
    from doctor.model.snapshot import as_plain
    from doctor.probes.amd import probe_amd
    from doctor.probes.windows_adapters import DISPLAY_CLASS_KEY, read_display_adapters

    values = {(f"{DISPLAY_CLASS_KEY}\\{sub}", name): value
              for sub, fields in adapters.items() for name, value in fields.items()}
    winreg = _FakeWinreg(values)
    snap["amd"] = as_plain(probe_amd(env={}, system="win32", winreg=winreg))
    intel = [a.device for a in read_display_adapters(winreg) or [] if a.vendor == "0x8086"]
    snap["host"]["intel_gpus"] = intel or None


def check_windows(machine, windows: dict) -> tuple[int, dict]:
    """The composed report of ``machine`` (a FakeMachine) as the Windows machine, through ``check --from``."""
    done = machine.run("--json")
    if not done.stdout.strip() or "Traceback" in done.stderr:
        raise AssertionError(f"no report (rc {done.returncode}): {done.stderr[-1500:]}")
    path = machine.root / "windows-report.json"
    path.write_text(json.dumps(windows_report(json.loads(done.stdout), windows)))
    done = subprocess.run([sys.executable, "-m", "doctor", "check", "--from", str(path), "--json"],
                          capture_output=True, text=True, env=machine.env, cwd=str(machine.root / "work"),
                          timeout=120)
    if not done.stdout.strip() or "Traceback" in done.stderr:
        raise AssertionError(f"no report (rc {done.returncode}): {done.stderr[-1500:]}")
    return done.returncode, json.loads(done.stdout)
