"""`torchdoctor fix` logic over snapshots, with the installer faked at the runner boundary.

The real pip/uv runs are in test_fix_e2e.py; here: refusals (PEP 668, conda base, no consent),
uv/poetry projects, installer choice, index options, parsing pip's report and uv's dry run,
the restore command, pip config warnings, conda removal steps, and a step failing mid-plan.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from factory import companion, make_snapshot, torch_dist

from doctor import exitcodes
from doctor.app.diagnose import diagnose
from doctor.app.options import CheckOptions, source_from_options
from doctor.app.output import emit
from doctor.app.run import exit_code_for, make_report
from doctor.errors import DoctorError
from doctor.fix import environment as fixenv
from doctor.fix import rollback
from doctor.fix.preview import Change, Preview, parse_pip_report, parse_uv_dry_run
from doctor.fix.project import detect_project, project_change, target_project
from doctor.fix.restore import restore_argvs, restore_command
from doctor.fix.run import FixOptions, Machine, run_fix
from doctor.fix.state import EnvironmentLock
from doctor.model.environment import Conda, CondaRecord, PythonFacts
from doctor.model.versions import variant_of
from doctor.plan import commands, installers
from doctor.plan.commands import InstallSource
from doctor.runner import RunResult
from doctor.table.load import load_table

PY = "/home/u/venv/bin/python"
WHEELS = "https://download.pytorch.org/whl/cu128"  # where the fake pip says its wheels come from
BEFORE = {"torch": "2.7.1+cpu", "torchvision": "0.22.1+cpu", "torchaudio": "2.7.1+cpu", "numpy": "1.26.4"}
AFTER = {
    "torch": "2.7.1+cu128",
    "torchvision": "0.22.1+cu128",
    "torchaudio": "2.7.1+cu128",
    "numpy": "1.26.4",
}


@pytest.fixture(scope="module")
def table():
    return load_table()


def cpu_snapshot(**interp):
    snap = make_snapshot(
        torch=torch_dist("2.7.1+cpu", None),
        torchvision=companion("torchvision", "0.22.1+cpu", None, "2.7.1"),
        torchaudio=companion("torchaudio", "2.7.1+cpu", None, "2.7.1"),
    )
    for key, value in interp.items():
        setattr(snap.interpreter, key, value)
    return snap


class FakeInstaller:
    """The runner and the streaming runner of one fake pip: answers by the shape of argv, records calls."""

    def __init__(self, before=BEFORE, after=AFTER, fail_step: int | None = None, report_extra=()):
        self.state = dict(before)
        self.after = after
        self.fail_step = fail_step
        self.report_extra = list(report_extra)
        self.calls: list[list[str]] = []
        self.steps = 0
        self.before = dict(before)
        self.restored: list[list[str]] = []

    def runner(self, argv, timeout=10.0, env=None, stdin=None, cwd=None):
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        if argv[1:2] == ["-c"] and argv[2] == fixenv.FREEZE_SCRIPT:
            return RunResult(argv, 0, json.dumps(sorted(self.state.items())))
        if argv[1:] == ["-m", "pip", "--version"]:
            return RunResult(argv, 0, "pip 24.0 from /x/pip (python 3.12)\n")
        if argv[1:] == ["-m", "pip", "config", "list"]:
            return RunResult(argv, 0, "")
        if argv[1:] == ["-m", "pip", "check"]:
            return RunResult(argv, 0, "No broken requirements found.\n")
        if argv[1:2] == ["-c"] and argv[2] == rollback.SITE_SCRIPT:
            return RunResult(argv, 0, "[]")  # no site folders: nothing of pip's debris to look for
        if "--dry-run" in argv:
            path = argv[argv.index("--report") + 1]
            items = [
                {"metadata": {"name": n, "version": v}, "download_info": {"url": f"{WHEELS}/{n}.whl"}}
                for n, v in self.after.items()
                if self.state.get(n) != v
            ] + self.report_extra
            Path(path).write_text(json.dumps({"install": items}))
            return RunResult(argv, 0)
        raise AssertionError(f"unexpected command {argv}")

    def stream(self, argv, timeout, on_line, env=None):
        self.calls.append(list(argv))
        if "-r" in argv or argv[2:4] == ["pip", "uninstall"]:  # the rollback's restore commands
            self.restored.append(list(argv))
            if "-r" in argv:
                self.state = dict(self.before)
            return RunResult(list(argv), 0)
        self.steps += 1
        if "--report" in argv:  # what pip writes of a real install: where each wheel came from
            items = [{"metadata": {"name": n, "version": v}, "download_info": {"url": f"{WHEELS}/{n}.whl"}}
                     for n, v in self.after.items() if self.state.get(n) != v]
            Path(argv[argv.index("--report") + 1]).write_text(json.dumps({"install": items}))
        on_line("Installing collected packages: torch")
        if self.fail_step == self.steps:
            on_line("ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device")
            self.state = {**self.state, "torch": self.after["torch"]}  # half done, as pip leaves it
            return RunResult(list(argv), 1, "ERROR: No space left on device")
        if argv[:2] == ["conda", "remove"]:
            return RunResult(list(argv), 0)
        self.state = dict(self.after)
        return RunResult(list(argv), 0)


class Tty(io.StringIO):
    def isatty(self):
        return True


def fake_machine(fake, snaps, table, tmp_path, stdin=None):
    """diagnose() returns the given snapshots in turn (before, after), written with the caller's commands
    as the app's diagnose_machine does."""
    queue = list(snaps)

    def diagnose_fake(opts, commands=None):
        snap = queue.pop(0) if len(queue) > 1 else queue[0]
        return table, diagnose(snap, table, commands=commands(snap) if commands else None)

    (tmp_path / "env").mkdir(exist_ok=True)  # the fake environment's folder, where its lock lives
    return Machine(
        lock=lambda prefix, env: EnvironmentLock(str(tmp_path / "env"), env),
        runner=fake.runner,
        stream=fake.stream,
        stdin=stdin or io.StringIO(""),
        env={"PATH": "", "XDG_STATE_HOME": str(tmp_path / "state")},  # restore files and locks go there
        cwd=tmp_path,
        diagnose=diagnose_fake,
        report=make_report,
        emit=emit,
        exit_code=exit_code_for,
    )


def opts():
    return CheckOptions(python=PY, smoke=False)


def test_yes_runs_the_pinned_install_writes_restore_and_verifies(table, tmp_path, capsys):
    fake = FakeInstaller()
    machine = fake_machine(fake, [cpu_snapshot(), make_snapshot()], table, tmp_path)
    code = run_fix(opts(), FixOptions(yes=True), machine)
    out = capsys.readouterr().out
    assert code == exitcodes.OK, out
    installs = [c for c in fake.calls if "install" in c and "--dry-run" not in c]
    # pip also writes its report of the install (where each wheel came from): fix checks it afterwards
    assert installs[0][4] == "--report" and installs[0][5].endswith(".json")
    assert [c[:4] + c[6:] for c in installs] == [
        [
            PY,
            "-m",
            "pip",
            "install",
            "torch==2.7.1+cu128",
            "torchvision==0.22.1+cu128",
            "torchaudio==2.7.1+cu128",
            "--index-url",
            "https://download.pytorch.org/whl/cu128",
        ]
    ]
    restore = next((tmp_path / "state").rglob("torchdoctor-restore-*.txt"))
    pins = [line.split()[0] for line in restore.read_text().splitlines() if not line.startswith("#")]
    assert pins == ["torch==2.7.1+cpu", "torchvision==0.22.1+cpu", "torchaudio==2.7.1+cpu"]
    assert (
        f"{PY} -m pip install -r {restore} --force-reinstall --no-deps --index-url https://download.pytorch.org/whl/cpu"
        in out
    )
    assert "step 1/1: Install torch 2.7.1+cu128" in out  # plain progress lines off a terminal
    assert "gone torch-cpu-build" in out and "Fixed: torch-cpu-build." in out


def test_no_consent_in_a_non_interactive_run_refuses_with_exit_6_before_any_installer_call(table, tmp_path):
    fake = FakeInstaller()
    with pytest.raises(DoctorError) as exc:
        run_fix(opts(), FixOptions(), fake_machine(fake, [cpu_snapshot()], table, tmp_path))
    assert exc.value.exit_code == exitcodes.REFUSED and "pass --yes" in str(exc.value)
    assert fake.steps == 0 and not list((tmp_path / "state").rglob("torchdoctor-restore-*"))
    # Not even a freeze or the dry run (which resolves, and may download, the whole plan).
    assert fake.calls == []


@pytest.mark.parametrize("answer, code, steps", [("n\n", exitcodes.REFUSED, 0), ("y\n", exitcodes.OK, 1)])
def test_interactive_prompt_asks_and_obeys(table, tmp_path, answer, code, steps, capsys):
    fake = FakeInstaller()
    machine = fake_machine(fake, [cpu_snapshot(), make_snapshot()], table, tmp_path, stdin=Tty(answer))
    assert run_fix(opts(), FixOptions(), machine) == code
    assert fake.steps == steps
    assert "Proceed? [y/N]" in capsys.readouterr().out


@pytest.mark.parametrize(
    "interp, words",
    [
        (
            {"externally_managed": True, "env_kind": "system", "path": "/usr/bin/python3"},
            "externally managed (PEP 668)",
        ),
        ({"env_kind": "conda-base", "prefix": "/opt/conda"}, "conda base environment /opt/conda"),
    ],
)
def test_pep668_and_conda_base_are_refused_unless_forced(table, tmp_path, interp, words):
    fake = FakeInstaller()
    machine = fake_machine(fake, [cpu_snapshot(**interp)], table, tmp_path)
    with pytest.raises(DoctorError) as exc:
        run_fix(opts(), FixOptions(yes=True), machine)
    assert exc.value.exit_code == exitcodes.REFUSED and words in str(exc.value)
    assert "python3 -m venv .venv" in str(exc.value) or "conda create" in str(exc.value)
    assert fake.steps == 0
    fake = FakeInstaller()
    machine = fake_machine(fake, [cpu_snapshot(**interp), make_snapshot()], table, tmp_path)
    assert run_fix(opts(), FixOptions(yes=True, force=True), machine) == exitcodes.OK
    # PEP 668: the plan makes a virtual environment and installs there (never --break-system-packages)
    assert fake.steps == (2 if interp.get("externally_managed") else 1)
    assert not any("--break-system-packages" in " ".join(c) for c in fake.calls)


def test_a_step_failing_midway_is_rolled_back(table, tmp_path, capsys):
    prefix = tmp_path / "miniforge" / "envs" / "t"  # the lock lives in the environment: it must exist
    prefix.mkdir(parents=True)
    snap = cpu_snapshot(env_kind="conda", prefix=str(prefix))
    snap.environment.python = PythonFacts(conda=Conda(records=[
        CondaRecord(name="pytorch", version="2.7.1", build="py3.12_cpu_0", channel="pytorch"),
        CondaRecord(name="cpuonly", version="2.0", build="0", channel="pytorch"),
    ]))
    fake = FakeInstaller(fail_step=2)
    code = run_fix(opts(), FixOptions(yes=True), fake_machine(fake, [snap], table, tmp_path))
    err = capsys.readouterr().err
    assert code == exitcodes.FIX_FAILED
    conda = next(c for c in fake.calls if c[:2] == ["conda", "remove"])
    assert conda == [
        "conda",
        "remove",
        "-p",
        str(prefix),
        "--force",
        "-y",
        "pytorch",
        "cpuonly",
    ]
    assert "step 2/2 failed (python exited with 1)" in err and "No space left on device" in err
    # The fix rolls itself back: the old builds reinstalled exactly from their index, then pip check.
    [reinstall] = [c for c in fake.restored if "-r" in c]
    assert reinstall[-4:] == ["--force-reinstall", "--no-deps", "--index-url", "https://download.pytorch.org/whl/cpu"]
    assert "restored: every package is as it was before the fix" in err and "pip check: no broken" in err
    assert fake.state == fake.before and [PY, "-m", "pip", "check"] in fake.calls
    restore = next((tmp_path / "state").rglob("torchdoctor-restore-*.txt")).read_text()
    assert "conda had: pytorch=2.7.1=py3.12_cpu_0 (channel pytorch)" in restore


def test_changes_outside_torch_refused_under_yes_unless_forced(table, tmp_path):
    extra = [{"metadata": {"name": "numpy", "version": "2.2.0"}, "download_info": {"url": "https://x/n.whl"}}]
    fake = FakeInstaller(report_extra=extra)
    with pytest.raises(DoctorError) as exc:
        run_fix(opts(), FixOptions(yes=True), fake_machine(fake, [cpu_snapshot()], table, tmp_path))
    assert exc.value.exit_code == exitcodes.REFUSED and "numpy 1.26.4 → 2.2.0" in str(exc.value)
    assert fake.steps == 0


def project_snapshot(project: Path):
    venv = project / ".venv"
    return cpu_snapshot(prefix=str(venv), path=str(venv / "bin" / "python"))


def test_uv_and_poetry_projects_get_the_pyproject_change_not_an_install(table, tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.uv]\ndev-dependencies = []\n')
    fake = FakeInstaller()
    snap = project_snapshot(tmp_path)
    assert run_fix(opts(), FixOptions(yes=True), fake_machine(fake, [snap], table, tmp_path)) == 0
    out = capsys.readouterr().out
    assert fake.steps == 0 and "This is a uv project" in out
    assert (
        '[[tool.uv.index]]\nname = "pytorch-cu128"\nurl = "https://download.pytorch.org/whl/cu128"\nexplicit '
        '= true'
        in out
    )
    assert 'torch = { index = "pytorch-cu128" }' in out and '"torch==2.7.1+cu128",' in out


def test_the_target_environments_project_counts_not_the_working_directorys(table, tmp_path, capsys):
    project, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "uv.lock").write_text("")
    # fix --python proj/.venv run from an unrelated folder: the environment's project refuses the install.
    fake = FakeInstaller()
    machine = fake_machine(fake, [project_snapshot(project)], table, elsewhere)
    assert run_fix(opts(), FixOptions(yes=True), machine) == exitcodes.OK
    assert fake.steps == 0 and "This is a uv project" in capsys.readouterr().out
    # fix --python elsewhere/.venv run from inside the project: not the project's environment, installed.
    fake = FakeInstaller()
    machine = fake_machine(fake, [project_snapshot(elsewhere), make_snapshot()], table, project)
    assert run_fix(opts(), FixOptions(yes=True), machine) == exitcodes.OK
    assert fake.steps == 1 and "This is a uv project" not in capsys.readouterr().out


def test_target_project_rules(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "poetry.lock").write_text("")
    assert target_project(str(project / ".venv"), tmp_path) == "poetry"  # the env's folder, whatever the cwd
    assert target_project(str(tmp_path / "other" / ".venv"), project) is None  # unrelated env
    # The working directory's project, where the environment is plausibly its own:
    assert target_project(str(project / "envs" / "a"), project) == "poetry"  # inside it
    cache = tmp_path / ".cache" / "pypoetry" / "virtualenvs" / "proj-AbC123-py3.12"
    assert target_project(str(cache), project) == "poetry"
    assert (
        target_project(str(tmp_path / "uvenv"), project, {"UV_PROJECT_ENVIRONMENT": "../uvenv"}) == "poetry"
    )
    assert target_project(None, project) == "poetry"  # unknown prefix: the working directory


def test_project_detection(tmp_path):
    assert detect_project(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text("[tool.poetry]\nname = 'x'\n")
    assert detect_project(tmp_path) == "poetry"
    (tmp_path / "uv.lock").write_text("")
    assert detect_project(tmp_path) == "uv"
    target = {
        "torch": "2.7.1",
        "torchvision": "0.22.1",
        "variant": "cu128",
        "index_url": "https://download.pytorch.org/whl/cu128",
    }
    text = project_change("poetry", target, ["torch", "torchvision"], InstallSource())
    assert 'torch = {version = "==2.7.1+cu128", source = "pytorch-cu128"}' in text
    assert '[[tool.poetry.source]]\nname = "pytorch-cu128"' in text and 'priority = "explicit"' in text


def test_installer_choice():
    snap = cpu_snapshot()
    assert installers.choose_installer("auto", snap)[0] == "pip"
    assert installers.choose_installer("uv", snap)[0] == "uv"
    snap.interpreter.env_kind = "uv-venv"
    assert installers.choose_installer("auto", snap) == ("uv", "the environment was made by uv")
    snap = cpu_snapshot()
    snap.install.torch.installer = "uv"
    assert installers.choose_installer("auto", snap)[0] == "uv"
    assert installers.choose_installer("pip", snap)[0] == "pip"


def test_source_options_and_the_commands_they_make(tmp_path):
    pins = ["torch==2.5.1+cu121"]
    default = commands.install_argv("pip", "py", pins, "cu121", InstallSource())
    assert default == [
        "py",
        "-m",
        "pip",
        "install",
        *pins,
        "--index-url",
        "https://download.pytorch.org/whl/cu121",
    ]
    mirror = source_from_options("https://mirror.example/pytorch/whl/", None, False)
    assert mirror.args("cu121") == ["--index-url", "https://mirror.example/pytorch/whl/cu121"]
    flat = source_from_options(None, str(tmp_path), False)
    assert flat.args("cu121") == ["--find-links", str(tmp_path)]  # the default index serves the other deps
    offline = source_from_options(None, str(tmp_path), True)
    assert offline.args("cu121") == ["--find-links", str(tmp_path), "--no-index"]
    assert source_from_options(str(tmp_path), None, False).args("cpu") == [
        "--index-url",
        tmp_path.resolve().as_uri() + "/cpu",
    ]
    with pytest.raises(DoctorError):
        source_from_options(None, None, True)
    uv = commands.install_argv("uv", "py", pins, "cu121", InstallSource(), uv="/bin/uv")
    assert uv[:5] == ["/bin/uv", "pip", "install", "--python", "py"]
    assert commands.dry_run_argv("uv", uv, "")[:4] == ["/bin/uv", "pip", "install", "--dry-run"]


def test_restore_command_reinstalls_the_old_builds_from_their_index():
    src = InstallSource()
    [argv] = restore_argvs(
        "pip", "py", {"torch": "2.5.1+cpu", "torchvision": "0.20.1+cu121"}, [], src, "r.txt"
    )
    assert argv == [
        "py",
        "-m",
        "pip",
        "install",
        "-r",
        "r.txt",
        "--force-reinstall",
        "--no-deps",
        "--index-url",
        "https://download.pytorch.org/whl/cpu",
        "--extra-index-url",
        "https://download.pytorch.org/whl/cu121",
    ]
    # PyPI builds have no local tag: their index is the default one.
    assert restore_argvs("uv", "py", {"torch": "2.5.1"}, [], src, "r.txt", uv="uv") == [[
        "uv",
        "pip",
        "install",
        "--python",
        "py",
        "-r",
        "r.txt",
        "--reinstall",
        "--no-deps",
    ]]
    # Nothing before: restoring is removing.
    assert restore_argvs("pip", "py", {}, ["torch"], src, "r.txt") == [
        ["py", "-m", "pip", "uninstall", "-y", "torch"]
    ]


def test_restore_puts_back_the_old_cuda_wheels_and_removes_the_new_ones(table, tmp_path, capsys):
    before = {
        **BEFORE,
        "nvidia-cublas-cu12": "12.1.3.1",
        "triton": "3.1.0",
        "filelock": "3.0.0",
    }
    after = {
        **AFTER,
        "nvidia-cublas-cu12": "12.8.3.14",
        "nvidia-cuda-runtime-cu12": "12.8.57",
        "triton": "3.3.1",
        "filelock": "3.0.0",
        "sympy": "1.13.1",  # a new dependency outside torch's family: left alone
    }
    fake = FakeInstaller(before=before, after=after)
    machine = fake_machine(fake, [cpu_snapshot(), make_snapshot()], table, tmp_path)
    assert run_fix(opts(), FixOptions(yes=True), machine) == exitcodes.OK
    out = capsys.readouterr().out
    restore = next((tmp_path / "state").rglob("torchdoctor-restore-*.txt"))
    pins = [line.split()[0] for line in restore.read_text().splitlines() if not line.startswith("#")]
    assert pins == [
        "torch==2.7.1+cpu",
        "torchvision==0.22.1+cpu",
        "torchaudio==2.7.1+cpu",
        "nvidia-cublas-cu12==12.1.3.1",
        "triton==3.1.0",
    ]
    command = (
        f"{PY} -m pip uninstall -y nvidia-cuda-runtime-cu12 && "
        f"{PY} -m pip install -r {restore} --force-reinstall --no-deps "
        "--index-url https://download.pytorch.org/whl/cpu"
    )
    assert command in out and f"#   {command}\n" in restore.read_text()
    assert "that was not there before: nvidia-cuda-runtime-cu12." in restore.read_text()
    argvs = restore_argvs(
        "uv", "py", before, ["torch", "nvidia-cuda-runtime-cu12", "sympy"], InstallSource(), "r"
    )
    assert argvs[0] == ["uv", "pip", "uninstall", "--python", "py", "nvidia-cuda-runtime-cu12"]
    assert restore_command([]) == "nothing to restore"


def test_variant_of_uses_the_index_variants():
    assert variant_of("2.5.1+cu121") == "cu121" and variant_of("2.6.0+rocm6.2.4") == "rocm6.2.4"
    assert variant_of("2.5.1") is None and variant_of("2.5.1+git123") is None and variant_of(None) is None


def test_parse_pip_report_and_uv_dry_run(tmp_path):
    wheel = tmp_path / "torch-2.5.1+cu121-py3-none-any.whl"
    wheel.write_bytes(b"x" * 1234)
    report = {
        "install": [
            {
                "metadata": {"name": "torch", "version": "2.5.1+cu121"},
                "download_info": {"url": wheel.as_uri()},
            },
            {
                "metadata": {"name": "nvidia_cuda_runtime_cu12", "version": "12.1.105"},
                "download_info": {"url": wheel.as_uri()},
            },
        ]
    }
    preview = parse_pip_report(report, {"torch": "2.5.1+cpu", "numpy": "1.0.0"})
    assert [str(c) for c in preview.changes] == [
        "nvidia-cuda-runtime-cu12 12.1.105 (new)",
        "torch 2.5.1+cpu → 2.5.1+cu121",
    ]
    assert preview.download_bytes == 2468 and preview.outside == []
    text = "Would install 2 packages\n + numpy==2.0.0\n - torch==2.5.1+cpu\n + torch==2.5.1+cu121\n"
    preview = parse_uv_dry_run(text, {"numpy": "1.0.0", "torch": "2.5.1+cpu"})
    assert preview.outside == [Change("numpy", "1.0.0", "2.0.0")]
    assert Preview().download_bytes is None


def test_pip_config_constraint_is_read_and_judged(tmp_path):
    # This machine's own constraint (/etc/xdg/pip/constraints.txt): "torch<=2.14.1".
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("# cap\ntorch<=2.14.1\ntorchvision<=0.29.1\n")
    config = fixenv.parse_pip_config(
        f"global.constraint='{constraints}'\nglobal.extra-index-url='file:///opt/pypi/simple'\n"
    )
    ok = fixenv.config_warnings(config, ["torch==2.5.1+cu121"])
    assert any("the target satisfies it" in w for w in ok)
    # indexes are named by doctor/fix/sources.py (tests/hostile/test_fix_sources.py), with their origin
    assert not any("extra-index-url" in w for w in ok)
    bad = fixenv.config_warnings(config, ["torch==2.15.0+cu126"])
    assert any("forbids torch==2.15.0+cu126: pip will fail" in w for w in bad)


def test_conda_owned_torch_puts_removal_first_in_the_plan(table):
    snap = cpu_snapshot(env_kind="conda", prefix="/opt/envs/t")
    snap.environment.python = PythonFacts(
        conda=Conda(records=[CondaRecord(name="pytorch", version="2.7.1", build="b")])
    )
    plan = diagnose(snap, table).plan
    assert [s.kind for s in plan.steps] == ["remove", "install"]
    assert plan.steps[0].command == "conda remove -p /opt/envs/t --force -y pytorch"
