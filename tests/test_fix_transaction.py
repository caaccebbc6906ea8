"""`fix` as a transaction: the state folder, restore files never written over anything, the lock on an
environment, clearing what an interrupted pip leaves, and the roll back after an interrupt (and after a
second one). With real pip, a real venv and real signals: tests/hostile/test_interrupt_fix.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_fix_unit import FakeInstaller, cpu_snapshot, fake_machine, opts

from doctor import exitcodes
from doctor.errors import DoctorError
from doctor.fix import rollback
from doctor.fix.run import FixOptions, run_fix
from doctor.fix.state import EnvironmentLock, create_file, refuse_existing, state_dir
from doctor.runner import RunResult

REPO = Path(__file__).resolve().parents[1]


# --- the state folder and the restore file ---------------------------------------------------------------


def test_the_state_folder_follows_xdg_and_the_platforms(tmp_path):
    home = {"HOME": "/home/u"}
    assert state_dir(home, "linux") == Path("/home/u/.local/state/torchdoctor")
    assert state_dir({**home, "XDG_STATE_HOME": "/x/state"}, "linux") == Path("/x/state/torchdoctor")
    assert state_dir({**home, "XDG_STATE_HOME": "relative"}, "linux") == Path(
        "/home/u/.local/state/torchdoctor"
    )
    assert state_dir(home, "darwin") == Path("/home/u/Library/Application Support/torchdoctor")
    assert state_dir({"LOCALAPPDATA": "C:/Users/u/AppData/Local"}, "win32") == Path(
        "C:/Users/u/AppData/Local/torchdoctor"
    )


def test_a_restore_file_is_created_never_written_over(tmp_path):
    path = tmp_path / "restore" / "r.txt"
    assert create_file(path, "one", chosen_by_user=False) == path and path.read_text() == "one"
    second = create_file(path, "two", chosen_by_user=False)
    assert second == tmp_path / "restore" / "r-2.txt" and path.read_text() == "one"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    with pytest.raises(DoctorError, match="never writes over a file") as caught:
        create_file(path, "three", chosen_by_user=True)
    assert caught.value.exit_code == exitcodes.USAGE and path.read_text() == "one"


def test_a_symlink_is_never_written_through(tmp_path):
    precious = tmp_path / "elsewhere.txt"
    precious.write_text("the only copy")
    link = tmp_path / "restore.txt"
    link.symlink_to(precious)
    with pytest.raises(DoctorError, match="exists"):
        refuse_existing(link)
    with pytest.raises(DoctorError):
        create_file(link, "x", chosen_by_user=True)
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to(tmp_path / "missing")
    with pytest.raises(DoctorError):
        refuse_existing(dangling)
    assert precious.read_text() == "the only copy" and not (tmp_path / "missing").exists()


def test_the_lock_refuses_a_second_fix_on_the_same_environment(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path), "HOME": str(tmp_path)}
    prefix = tmp_path / "venv"
    prefix.mkdir()
    (tmp_path / "link").symlink_to(prefix)
    with EnvironmentLock(str(prefix), env):
        with pytest.raises(DoctorError, match=rf"another torchdoctor fix \(pid {os.getpid()}\) is "
            r"changing") as caught:
            with EnvironmentLock(str(tmp_path / "link"), env):  # the same environment by another path
                pass
        assert caught.value.exit_code == exitcodes.REFUSED
        with EnvironmentLock(str(tmp_path), env):  # another environment: its own lock
            pass
    with EnvironmentLock(str(prefix), env):  # released
        pass


def test_the_lock_lives_in_the_environment_whatever_home_says(tmp_path):
    """Two fixes with different $HOME (or XDG_STATE_HOME), or through another path to the same folder (a bind
    mount has another real path: the lock is on the file in the environment, so on its inode), still take
    turns."""
    prefix = tmp_path / "venv"
    prefix.mkdir()
    (tmp_path / "link").symlink_to(prefix)
    one = {"HOME": str(tmp_path / "alice"), "XDG_STATE_HOME": str(tmp_path / "alice")}
    two = {"HOME": str(tmp_path / "bob")}
    with EnvironmentLock(str(prefix), one):
        with pytest.raises(DoctorError, match="another torchdoctor fix"):
            with EnvironmentLock(str(tmp_path / "link"), two):
                pass
    assert (prefix / ".torchdoctor-fix.lock").is_file()
    assert not (tmp_path / "alice").exists() and not (tmp_path / "bob").exists()


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes anywhere")
def test_an_environment_that_cannot_hold_the_lock_is_refused(tmp_path):
    prefix = tmp_path / "venv"
    prefix.mkdir()
    prefix.chmod(0o555)
    try:
        with pytest.raises(DoctorError, match="cannot lock") as caught:
            with EnvironmentLock(str(prefix)):
                pass
        assert caught.value.exit_code == exitcodes.REFUSED
    finally:
        prefix.chmod(0o755)


def test_a_lock_path_planted_as_a_symlink_is_refused(tmp_path):
    prefix = tmp_path / "venv"
    prefix.mkdir()
    (prefix / ".torchdoctor-fix.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(DoctorError, match="cannot lock"):
        with EnvironmentLock(str(prefix)):
            pass
    assert not (tmp_path / "elsewhere").exists()


def test_the_lock_is_released_when_its_holder_is_killed(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path), "HOME": str(tmp_path)}
    holder = subprocess.Popen([
        sys.executable, "-c",
        f"import sys, time; sys.path.insert(0, {str(REPO)!r})\n"
        "from doctor.fix.state import EnvironmentLock\n"
        f"with EnvironmentLock({str(tmp_path)!r}, {env!r}):\n    print('held', flush=True); time.sleep(60)\n",
    ], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(DoctorError, match=rf"pid {holder.pid}"):
            with EnvironmentLock(str(tmp_path), env):
                pass
        holder.kill()
        holder.wait(10)
        with EnvironmentLock(str(tmp_path), env):
            pass
    finally:
        holder.kill()


# --- clearing what an interrupted pip leaves ----------------------------------------------------------------


def _dist(site: Path, name: str, version: str, files: list[str], whole: bool = True) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Name: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
    if whole:
        (info / "INSTALLER").write_text("pip\n")
    for f in files:
        (site / f).parent.mkdir(parents=True, exist_ok=True)
        (site / f).write_text(version)


def _site(tmp_path: Path) -> tuple[Path, rollback.SiteFolders]:
    site = tmp_path / "site-packages"
    site.mkdir()
    _dist(site, "torch", "2.6.0+cu126", ["torch/__init__.py", "torch/version.py"])
    _dist(site, "torchvision", "0.21.0+cu126", ["torchvision/__init__.py"])
    (site / "~umpy").mkdir()  # pip's debris from some earlier run: not this fix's to remove
    state = rollback.SiteFolders([str(site)])
    state.entries[str(site)] = rollback._names(str(site))
    state.owned[str(site)] = rollback._owned(str(site), state.entries[str(site)])
    return site, state


def test_an_interrupted_install_is_cleared_back_to_what_was_there(tmp_path):
    site, state = _site(tmp_path)
    assert state.owned[str(site)] == {"torch", "torchvision"}
    # pip stashed the old torch, wrote part of the new one, and was stopped.
    (site / "torch").rename(site / "~orch")
    (site / "torch-2.6.0+cu126.dist-info").rename(site / "~orch-2.6.0+cu126.dist-info")
    (site / "torch" / "lib").mkdir(parents=True)
    (site / "torch" / "lib" / "new.so").write_text("half")
    # the wheel's RECORD, no INSTALLER
    _dist(site, "torch", "2.7.1+cu128", ["torch/__init__.py"], whole=False)
    found = sorted(Path(p).name for p in rollback.debris(state))
    assert found == ["torch", "torch-2.7.1+cu128.dist-info", "~orch", "~orch-2.6.0+cu126.dist-info"]
    removed = rollback.clear_debris(state)
    assert sorted(Path(p).name for p in removed) == found
    assert sorted(p.name for p in site.iterdir()) == [
        "torchvision",
        "torchvision-0.21.0+cu126.dist-info",
        "~umpy",
    ]


def test_a_whole_new_install_and_what_was_there_are_left_alone(tmp_path):
    site, state = _site(tmp_path)
    _dist(site, "numpy", "2.0.0", ["numpy/__init__.py"], whole=False)  # not torch's family: not ours to judge
    _dist(site, "torchaudio", "2.6.0+cu126", ["torchaudio/__init__.py"])  # a whole new install
    assert rollback.debris(state) == [] and rollback.clear_debris(state) == []


# --- the roll back in run_fix ------------------------------------------------------------------------------


class Interrupting(FakeInstaller):
    """pip stopped half way: the first step is interrupted after changing torch; ``again``: the restore is
    interrupted too."""

    def __init__(self, again: bool = False):
        super().__init__()
        self.again = again

    def stream(self, argv, timeout, on_line, env=None):
        if "-r" in argv and self.again:
            raise KeyboardInterrupt
        if "-r" in argv or argv[2:4] == ["pip", "uninstall"]:
            return super().stream(argv, timeout, on_line, env)
        self.steps += 1
        self.state = {**self.state, "torch": self.after["torch"]}
        raise KeyboardInterrupt


def test_an_interrupted_step_is_rolled_back_and_says_so(table, tmp_path, capsys):
    fake = Interrupting()
    code = run_fix(opts(), FixOptions(yes=True), fake_machine(fake, [cpu_snapshot()], table, tmp_path))
    err = capsys.readouterr().err
    assert code == exitcodes.INTERRUPTED
    assert "interrupted (Ctrl-C) during step 1/1: the installer was stopped" in err
    assert "restored: every package is as it was before the fix" in err and "pip check: no broken" in err
    assert fake.state == fake.before


def test_interrupted_again_while_restoring_prints_the_exact_command(table, tmp_path, capsys):
    fake = Interrupting(again=True)
    code = run_fix(opts(), FixOptions(yes=True), fake_machine(fake, [cpu_snapshot()], table, tmp_path))
    err = capsys.readouterr().err
    assert code == exitcodes.INTERRUPTED
    assert "interrupted again while restoring" in err
    restore = next((tmp_path / "state").rglob("torchdoctor-restore-*.txt"))
    assert f"-m pip install -r {restore} --force-reinstall --no-deps" in err.splitlines()[-1]


def test_interrupted_before_anything_changed_there_is_nothing_to_restore(table, tmp_path, capsys):
    class Early(FakeInstaller):
        def stream(self, argv, timeout, on_line, env=None):
            if "-r" in argv:
                raise AssertionError("nothing changed: no restore should run")
            raise KeyboardInterrupt

    code = run_fix(opts(), FixOptions(yes=True), fake_machine(Early(), [cpu_snapshot()], table, tmp_path))
    assert code == exitcodes.INTERRUPTED and "nothing had changed yet" in capsys.readouterr().err


def test_the_restore_file_never_lands_in_the_working_directory(table, tmp_path):
    fake = FakeInstaller()
    work = tmp_path / "empty"
    work.mkdir()
    machine = fake_machine(fake, [cpu_snapshot(), cpu_snapshot()], table, tmp_path)
    machine.cwd = work
    run_fix(opts(), FixOptions(yes=True), machine)
    assert list(work.iterdir()) == [] and list((tmp_path / "state").rglob("torchdoctor-restore-*.txt"))


def test_a_fix_waits_for_no_one_when_another_holds_the_environment(table, tmp_path):
    fake = FakeInstaller()
    machine = fake_machine(fake, [cpu_snapshot()], table, tmp_path)
    start = time.monotonic()
    with machine.lock(cpu_snapshot().interpreter.prefix or "/home/u/venv", machine.env):
        with pytest.raises(DoctorError, match="another torchdoctor fix") as caught:
            run_fix(opts(), FixOptions(yes=True), machine)
    assert caught.value.exit_code == exitcodes.REFUSED and fake.steps == 0 and time.monotonic() - start < 10
    assert not [c for c in fake.calls if "--dry-run" in c]  # refused before the installer ran at all


@pytest.fixture(scope="module")
def table():
    from doctor.table.load import load_table

    return load_table()


def test_runresult_fakes_stay_compatible():
    assert RunResult(["x"], 0).ok and not RunResult(["x"], 0, overflowed=True).ok


def test_a_full_disk_is_one_line_and_leaves_no_file(tmp_path, monkeypatch):
    """ENOSPC while the restore file is written (a full state folder or --restore-file disk): one line, exit
    2, and no file at all under the name or beside it (before: exit 3 and a 0-byte file that blocked the
    name)."""
    import errno

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    for chosen in (True, False):
        target = tmp_path / f"restore-{chosen}.txt"
        with pytest.raises(DoctorError, match="No space left on device; nothing was changed") as caught:
            create_file(target, "torch==2.6.0\n", chosen_by_user=chosen)
        assert caught.value.exit_code == exitcodes.USAGE
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    assert create_file(tmp_path / "restore-True.txt", "x\n", chosen_by_user=True).read_text() == "x\n"


def test_a_taken_name_gets_a_suffix_and_the_file_names_itself(tmp_path):
    (tmp_path / "r.txt").write_text("someone else's\n")
    written = create_file(tmp_path / "r.txt", lambda at: "# restore with: pip install -r "
        f"{at}\n", chosen_by_user=False)
    assert (
        written == tmp_path / "r-2.txt"
        and written.read_text() == f"# restore with: pip install -r {written}\n"
    )
    assert (tmp_path / "r.txt").read_text() == "someone else's\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r-2.txt", "r.txt"]


def test_a_venv_path_with_a_newline_keeps_the_restore_file_whole():
    """Every line of the file is a comment or an exact pin, whatever the interpreter's path holds."""
    from doctor.fix.restore import restore_argvs, restore_command, restore_text
    from doctor.plan.commands import InstallSource

    python = "/tmp/evil\ntorch==0.0.1 --index-url http://evil\n/bin/python"
    before = {"torch": "2.6.0+cu126", "numpy": "1.26.4"}
    argvs = restore_argvs("pip", python, before, ["torch"], InstallSource(), "/tmp/r\nx.txt",
                          clean=[python, "-c", "pass", "/sp", "--"])
    text = restore_text(python, before, restore_command(argvs), [], "now", cleans=True)
    for line in text.splitlines():
        assert line.startswith("#") or line.startswith("torch==2.6.0+cu126  #"), line


def test_the_restore_files_clean_up_step_clears_what_a_killed_install_left(tmp_path):
    """The first command of a restore file (rollback.clean_argv), run as the user would run it: pip's stashes
    go, a torch-family dist-info cut off while written goes, and so does the torch folder no whole install
    owns any more; what a whole install owns, and a user's own "~$notes.txt" file, stay."""
    site, state = _site(tmp_path)
    (site / "torch").rename(site / "~orch")
    (site / "torch-2.6.0+cu126.dist-info").rename(site / "~orch-2.6.0+cu126.dist-info")
    _dist(site, "torch", "2.7.1+cu128", ["torch/__init__.py"])
    with open(site / "torch-2.7.1+cu128.dist-info" / "RECORD", "a") as handle:
        handle.write("torch/lib/pad/0001.bin,sha")  # cut off: uv was killed while writing it
    (site / "~$notes.txt").write_text("mine")
    argv = rollback.clean_argv(sys.executable, state)
    assert argv[1] == "-c" and argv[-2:] == ["torch", "torchvision"]
    subprocess.run(argv, check=True, timeout=60)
    assert sorted(p.name for p in site.iterdir()) == [
        "torchvision", "torchvision-0.21.0+cu126.dist-info", "~$notes.txt"]


def test_the_lock_holds_through_a_bind_mount(tmp_path):
    """The same environment seen through a bind mount (another real path, the same inode): one fix at a time.
    Needs the right to mount (root in a container here); skipped elsewhere."""
    prefix, other = tmp_path / "venv", tmp_path / "mounted"
    prefix.mkdir()
    other.mkdir()
    done = subprocess.run(["mount", "--bind", str(prefix), str(other)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.decode(errors='replace').strip()}")
    try:
        assert os.path.realpath(other) != os.path.realpath(prefix)
        with EnvironmentLock(str(prefix), {"HOME": str(tmp_path / "a")}):
            with pytest.raises(DoctorError, match="another torchdoctor fix"):
                with EnvironmentLock(str(other), {"HOME": str(tmp_path / "b")}):
                    pass
    finally:
        subprocess.run(["umount", "-l", str(other)], capture_output=True)
