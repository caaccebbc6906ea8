"""One fix at a time per environment, whoever runs it and by whatever path (issue 27).

The lock used to live in the user's state folder, keyed on the environment's real path: two fixes with
different $HOMEs (two users, sudo, a CI job) each took a lock of their own and both installed. It lives
in the environment now (``<prefix>/.torchdoctor-fix.lock``).

Deterministic, with real pip, a real venv (fixworld.py) and the real CLI: the first fix is held at its
consent prompt (a pseudo-terminal on stdin; fix takes the lock before the preview and the prompt), so it
holds the lock for as long as the test wants. The second, `fix --yes` with another $HOME and state folder,
through a symlink to the venv or a bind mount of it, must refuse with the documented line (exit 6) and
change nothing; then the first is answered "n" and changes nothing either. On the code before the lock
moved, the second run installs (exit 0).
"""

from __future__ import annotations

import os
import pty
import subprocess
import threading
import time
from pathlib import Path

import pytest
from fixworld import OLD, cli_env, fresh_venv, get_fix_world, installed, pip_check
from hostile import base_env, cli_argv, run_cli

from doctor import exitcodes

pytestmark = [pytest.mark.hostile, pytest.mark.slow]

PROMPT = "Proceed? [y/N]"


@pytest.fixture(scope="module")
def world():
    found = get_fix_world()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def fix_args(world, python: Path, *more: str) -> list[str]:
    return ["fix", "--no-smoke", "--python", str(python), "--index-url-base", world.small.as_uri(), *more]


def own_env(world, home: Path) -> dict:
    env = cli_env(world, base_env(None))
    env["HOME"] = env["XDG_STATE_HOME"] = str(home)
    return env


class AtThePrompt:
    """A fix whose stdin is a pseudo-terminal: it stops at its consent prompt, holding the lock."""

    def __init__(self, args: list[str], env: dict, cwd: Path):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(cli_argv(args), stdin=slave, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
        os.close(slave)
        self.out, self.err = bytearray(), bytearray()
        self.readers = [threading.Thread(target=self._read, args=(s, b), daemon=True)
                        for s, b in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _read(stream, into: bytearray) -> None:
        for chunk in iter(lambda: stream.read1(4096), b""):
            into.extend(chunk)

    def text(self) -> str:
        out, err = (b.decode(errors="replace") for b in (self.out, self.err))
        return f"--- stdout:\n{out}\n--- stderr:\n{err}"

    def wait_for_prompt(self, limit: float) -> bool:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and self.proc.poll() is None:
            if PROMPT in self.out.decode(errors="replace"):
                return True
            time.sleep(0.05)
        return PROMPT in self.out.decode(errors="replace")

    def answer(self, text: str, limit: float) -> int:
        os.write(self.master, text.encode())
        code = self.proc.wait(limit)
        for reader in self.readers:
            reader.join(5)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(10)
        os.close(self.master)


@pytest.fixture
def other_path(world, tmp_path, request):
    """A fresh venv (tmp_path/venv) and its folder seen through another path: a symlink, or a bind mount
    (another real path, the same inode)."""
    venv = fresh_venv(world, tmp_path / "venv")
    other = tmp_path / "other"
    if request.param == "symlink":
        other.symlink_to(venv, target_is_directory=True)
        yield other
        return
    other.mkdir()
    done = subprocess.run(["mount", "--bind", str(venv), str(other)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot bind-mount here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield other
    finally:
        subprocess.run(["umount", str(other)], capture_output=True)


@pytest.mark.parametrize("other_path", ["symlink", "bind"], indirect=True)
def test_a_second_fix_with_another_home_by_another_path_is_refused(world, tmp_path, other_path):
    venv = tmp_path / "venv"
    homes = [tmp_path / "alice", tmp_path / "bob"]
    first = AtThePrompt(fix_args(world, venv / "bin" / "python"), own_env(world, homes[0]), tmp_path)
    try:
        asked = first.wait_for_prompt(180)
        assert asked, f"the first fix never asked (exit {first.proc.poll()})\n{first.text()}"
        # (no needles: run_cli would take the first fix, whose command line names the venv, for a leftover)
        second = run_cli(fix_args(world, other_path / "bin" / "python", "--yes"), own_env(world, homes[1]),
                         cwd=tmp_path, limit=180)
        assert second.returncode == exitcodes.REFUSED, second.summary()
        [line] = [line for line in second.err.splitlines() if line.strip()]
        assert f"another torchdoctor fix (pid {first.proc.pid}) is changing " in line, second.summary()
        assert line.rstrip().endswith("wait for it to finish, then run fix again"), second.summary()
        assert "Wrote the restore file" not in second.out
        assert not list(homes[1].rglob("torchdoctor-restore-*")), "the refused fix wrote a restore file"
        state = installed(venv)
        assert all(state.get(n) == v for n, v in OLD.items()), f"the refused fix changed the venv: {state}"
        code = first.answer("n\n", 60)
    finally:
        first.close()
    assert code == exitcodes.REFUSED, first.text()
    state = installed(venv)
    assert all(state.get(n) == v for n, v in OLD.items()), f"the venv changed: {state}\n{first.text()}"
    assert pip_check(venv)[0] == 0
