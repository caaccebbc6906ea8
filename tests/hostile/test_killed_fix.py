"""SIGKILL in the middle of `fix --yes` (issue 27): nothing can clean up then, so the restore file must do it
alone, and `check` must see a torch the install left half written.

Before: after SIGKILL mid-install, the restore file's own command failed 5 times out of 5 (pip cannot get past
its stash ``~orch`` and a torch folder of two builds) unless one first ran the leftovers command that the file
did not mention; and after SIGKILL of a uv install, ``check --no-smoke`` said the half-written torch was fine.

Real pip and uv, fixworld.py's venv and big local index, the whole run killed (torchdoctor and the installer,
as a power cut or the OOM killer would): then the restore file's command, read from the file, run as written.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from fakeenv import site_packages
from fixworld import NEW, OLD, cli_env, fresh_venv, get_fix_world, has_builds, installed, pip_check
from hostile import Launched, base_env, live_processes, run_cli
from test_interrupt_fix import fix_args, run_restore

pytestmark = [pytest.mark.hostile, pytest.mark.slow]


@pytest.fixture(scope="module")
def world():
    found = get_fix_world()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def _command_in(restore_file: Path) -> str:
    lines = restore_file.read_text().splitlines()
    return lines[lines.index("# Restore the previous state with:") + 1].removeprefix("#   ")


def _kill_all(cli: Launched) -> None:
    """SIGKILL to torchdoctor and every process of the run (the installer runs in a session of its own)."""
    for proc in live_processes(cli.marker, cli.needles):
        try:
            proc.send_signal(signal.SIGKILL)
        except Exception:
            pass
    cli.signal(signal.SIGKILL)
    cli.wait_exit(10)


def _killed_mid_install(world, root: Path, installer: str) -> tuple[Path, Path]:
    root.mkdir(parents=True)
    venv = fresh_venv(world, root / "venv")
    site = site_packages(venv)
    restore = root / "restore.txt"
    args = fix_args(world, venv, world.big, "--installer", installer, "--restore-file", str(restore))
    with Launched(args, cli_env(world, base_env(None)), cwd=root, needles=(str(venv),)) as cli:
        if installer == "pip":
            # the old torch stashed, the new one being written
            reached = cli.wait_for(lambda: "Successfully uninstalled "
                "torch-2.6.0" in cli.out(), 120, poll=0.01)
            time.sleep(1.0)
        else:
            # uv removes the old torch, then links the new files in: kill as soon as they start to appear
            reached = cli.wait_for(lambda: (site / "torch" / "lib" / "standin_padding").exists() or not
                                   (site / "torch-2.6.0+cu126.dist-info").exists(), 120, poll=0.005)
            time.sleep(0.05)
        assert reached, f"the moment never came:\n{cli.out()[-1500:]}\n{cli.err()[-1500:]}"
        _kill_all(cli)
    assert restore.is_file()
    return venv, restore


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_the_restore_file_alone_brings_the_old_builds_back_after_sigkill(world, tmp_path, installer):
    venv, restore = _killed_mid_install(world, tmp_path / installer, installer)
    state = installed(venv)
    if has_builds(state, OLD) and pip_check(venv)[0] == 0:
        pytest.skip(f"the kill came before {installer} changed anything")
    command = _command_in(restore)
    assert command.startswith(str(venv / "bin" / "python") + " -c "), command  # the clean-up comes first
    failed = run_restore(command)
    state, (code, text) = installed(venv), pip_check(venv)
    assert not failed and code == 0 and has_builds(state, OLD), f"{failed}\n{state}\n{text}"
    assert not [p.name for p in site_packages(venv).iterdir() if p.name.startswith("~")]


def test_check_sees_a_torch_uv_left_half_written(world, tmp_path):
    venv, _ = _killed_mid_install(world, tmp_path / "uv-check", "uv")
    state = installed(venv)
    if has_builds(state, OLD):
        pytest.skip("the kill came before uv changed anything")
    if has_builds(state, NEW) and pip_check(venv)[0] == 0:
        pytest.skip("the kill came after uv had finished (a loaded machine): nothing is half-written")
    env = cli_env(world, base_env(None))
    res = run_cli(["check", "--no-smoke", "--json", "--python", str(venv / "bin" / "python")], env,
                  cwd=tmp_path, limit=60)
    assert res.returncode == 1, res.summary()
    found = {f["id"]: f["severity"] for f in json.loads(res.out)["findings"]}
    assert "error" in (found.get("interrupted-install-leftovers"), found.get("torch-not-installed")), (
        f"{state}\n{found}"
    )
