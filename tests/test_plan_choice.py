"""The plan's choices, pure: the wheel that exists for this Python, the version asked for, the
driver-or-downgrade choice and when the driver cannot change, the project's pins, the driver advice, the one
command builder. Over make_snapshot() and the real bundled table."""

from __future__ import annotations

from dataclasses import replace

import pytest
from factory import gpu, make_snapshot, torch_dist

from doctor.app.diagnose import diagnose
from doctor.compat.assessment import assess
from doctor.compat.builds import torch_build
from doctor.compat.drivers import driver_advice, driver_change
from doctor.compat.interpreters import python_in_range, venv_line
from doctor.compat.pins import project_pin, wanted_torch
from doctor.compat.wheels import (
    NATIVE,
    NEEDS_OTHER_PYTHON,
    NO_GPU,
    NO_PYTHON,
    NO_SUCH_VERSION,
    NO_WHEEL_FOR_GPUS,
    TOO_OLD,
    DriverVerdict,
    Fit,
    Machine,
    Wheel,
    _nearest,
    change_cost,
    choose,
    driver_reachable,
    machine_from_snapshot,
    public_spec,
    torch_version,
)
from doctor.errors import DoctorError
from doctor.model.environment import Container
from doctor.model.findings import INSTALL, REINSTALL, SHELL, Action, Finding, Fix
from doctor.model.snapshot import Project, Requested, TorchPin
from doctor.plan.commands import Commands
from doctor.probes.host import detect_scheduler, find_pythons
from doctor.probes.project import (
    _is_requirements,
    parse_lock,
    parse_pyproject,
    parse_requirements,
    poetry_spec,
    project_folder,
)
from doctor.table.load import load_table


@pytest.fixture(scope="module")
def table():
    return load_table()


def machine(
    python="3.12.1", ccs=((8, 9),), driver="570.124.04", max_cuda="12.8", installed=None, **kw
) -> Machine:
    return Machine(
        "linux-x86_64", "linux", python, tuple(ccs), len(ccs), True, driver, max_cuda, installed, **kw
    )


# --- wheels that exist
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("python, free, torch", [
    ("3.13.1", True, "2.12.0"),  # 2.12.1 dropped cp313t; 2.13 on publish 3.14t only
    ("3.14.0", True, "2.15.0"),
    ("3.13.1", False, "2.15.0"),
    ("3.9.18", False, "2.8.0"),  # the last release with Python 3.9 wheels
])
def test_the_newest_release_with_a_wheel_for_this_python(table, python, free, torch):
    choice = choose(table, machine(python, free_threaded=free), None)
    assert choice.target.wheel.torch == torch


def test_no_release_for_a_free_threaded_python_without_builds(table):
    choice = choose(table, machine("3.12.1", free_threaded=True), None)
    assert choice.target is None and "3.12.1 (free-threaded, 3.12t)" in choice.reason


def test_python_3141_gets_torch_but_not_a_torchvision_that_excludes_it(table):
    snap = make_snapshot(python="3.14.1", torch=None, torchvision=None, torchaudio=None)
    plan = diagnose(snap, table).plan
    [install] = [s for s in plan.steps if s.kind == "install"]
    assert '"torch==2.15.0+cu126"' in install.command and "torchvision" not in install.command
    assert any("Requires-Python >=3.10,!=3.14.1" in n for n in plan.notes)
    plan = diagnose(make_snapshot(python="3.14.2", torch=None, torchvision=None, torchaudio=None), table).plan
    assert '"torchvision==0.29.2+cu126"' in plan.steps[0].command


# --- the version asked for
# -----------------------------------------------------------------------------------


def test_public_spec_drops_local_labels():
    assert str(public_spec("==2.3.1+cu121")) == "==2.3.1"
    assert public_spec("not a spec") is None and public_spec("") is None


def test_an_exact_version_gets_the_variant_that_fits(table):
    choice = choose(
        table, machine(ccs=((8, 6),), driver="535.104.05", max_cuda="12.2"), None, wanted="==2.3.1"
    )
    assert choice.target.wheel.label == "2.3.1+cu121" and choice.asked == "2.3.1"


def test_a_version_without_wheels_for_this_python_names_both_ways(table):
    choice = choose(table, machine("3.9.18"), None, wanted="==2.9.1")
    assert choice.unavailable == NO_PYTHON and choice.target is None
    assert "Python 3.10 to 3.14" in choice.reason and "torch 2.8.0 is the last release" in choice.reason
    assert choice.nearest.wheel.torch == "2.8.0"
    old = choose(table, machine("3.13.1"), None, wanted="==2.0.1")
    assert (
        old.unavailable == NO_PYTHON
        and "torch 2.6.0 is the first release with wheels for Python 3.13" in old.reason
    )


def test_a_version_without_kernels_for_this_gpu(table):
    choice = choose(table, machine(ccs=((12, 0),)), None, wanted="==2.3.1")
    assert choice.unavailable == NO_GPU and choice.nearest.wheel.label == "2.7.1+cu128"


def test_a_version_the_table_does_not_know(table):
    assert choose(table, machine(), None, wanted="==9.9").unavailable == NO_SUCH_VERSION


def test_the_installed_version_wins_when_it_matches_the_spec(table):
    choice = choose(table, machine(installed="cu128"), "2.7.1", wanted=">=2.5,<2.8")
    assert choice.target.wheel.label == "2.7.1+cu128" and choice.reason == "keeps torch 2.7.1"


# --- versions ordered as PEP 440 orders them
# -----------------------------------------------------------------


def runs(torch: str) -> Fit:
    return Fit(Wheel(torch, None, None, "cu128", torch[:3]), DriverVerdict(NATIVE), True, True)


@pytest.mark.parametrize("installed, final, later", [
    ("2.8.0.dev20250601+cu128", "2.8.0", "2.8.1"),  # a nightly
    ("2.7.1rc1", "2.7.1", "2.7.2"),  # a release candidate
])
def test_a_nightly_or_release_candidate_ranks_below_its_final_release(installed, final, later):
    assert torch_version(installed) < torch_version(final) < torch_version(later)
    public = installed.split("+")[0]
    assert change_cost(installed, runs(final)) == f"an upgrade from torch {public} to {final}"
    assert change_cost(installed, runs("2.6.0")) == f"a downgrade from torch {public} to 2.6.0"
    # the nearest release above the installed one is its own final release, not the one after it
    assert (
        _nearest([(None, runs("2.6.0")), (None, runs(final)), (None, runs(later))], public).wheel.torch
        == final
    )


def test_a_version_that_does_not_parse_compares_with_nothing():
    # int()'s limit
    assert torch_version("not-a-version") is None and torch_version("2." + "1" * 5000) is None
    assert change_cost("2.7.x", runs("2.7.1")) == "another build of torch 2.7.1 (cu128)"
    assert _nearest([(None, runs("2.6.0")), (None, runs("2.7.1"))], "garbage").wheel.torch == "2.7.1"


# --- two ways out
# --------------------------------------------------------------------------------------------


def test_the_driver_route_keeps_the_installed_build_and_names_today_beside_it(table):
    m = machine(ccs=((12, 0),), installed="cu130")
    choice = choose(table, m, "2.12.1")
    assert choice.target is None and choice.needs_driver.wheel.label == "2.12.1+cu130"
    assert choice.today.wheel.label == "2.11.0+cu128"


def test_no_driver_route_past_the_last_branch_of_old_gpus(table):
    assert table.last_driver_branch((3, 7)) == 470 and table.last_driver_branch((6, 1)) == 580
    assert table.last_driver_branch((7, 5)) is None
    # a build that needs R590 never runs on a Pascal GPU, whatever driver is installed; on Ada it does
    later = Fit(Wheel("2.99.0", None, None, "cu131", "2.99"), DriverVerdict(TOO_OLD, "590.44.01"), True, True)
    assert not driver_reachable(table, machine(ccs=((6, 1),)), later)
    assert driver_reachable(table, machine(ccs=((8, 9),)), later)


def rtx5090_2121(**kw):
    return make_snapshot(gpus=[gpu("NVIDIA GeForce RTX "
        "5090", "12.0")], torch=torch_dist("2.12.1+cu130", "13.0",
                         metadata_version="2.12.1"), torchvision=None, torchaudio=None, **kw)


def test_plan_driver_first_then_downgrade_where_the_driver_cannot_change(table):
    plan = diagnose(rtx5090_2121(), table).plan
    assert plan.status == "driver-first" and [a["kind"] for a in plan.alternatives] == ["driver", "wheel"]
    # nothing to reinstall: PyPI's own build
    assert plan.pins == ["torch==2.12.1"] and plan.pins_variant is None
    snap = rtx5090_2121()
    snap.environment.container = Container(kind="docker")
    plan = diagnose(snap, table).plan
    assert plan.status == "install" and plan.target["label"] == "2.11.0+cu128"
    assert plan.pins == ["torch==2.11.0+cu128"] and plan.pins_variant == "cu128"
    assert [a["kind"] for a in plan.alternatives] == ["wheel", "driver"]


def test_a_pinned_version_that_needs_a_driver_is_never_swapped_for_another(table):
    # the project pins 2.12.1, the driver cannot change: nothing is installed in its place, a finding says why
    snap = rtx5090_2121()
    snap.requested = Requested(torch=TorchPin("==2.12.1", "requirements.txt:1"), no_driver_change=True)
    snap.install.torch = None
    snap.install.status = "absent"
    diag = diagnose(snap, table)
    assert diag.plan.status == "manual" and diag.plan.steps == []
    f = next(f for f in diag.findings if f.id == "torch-version-unavailable")
    assert "needs a newer driver" in f.title and f.evidence["nearest"] == "2.11.0+cu128"


def test_driver_change_is_decided_in_a_documented_order():
    snap = make_snapshot()
    assert driver_change(snap).possible
    snap.host.scheduler = "slurm"
    assert "Slurm job" in driver_change(snap).why
    snap.environment.container = Container(kind="podman")
    assert "podman container" in driver_change(snap).why
    snap.requested = Requested(no_driver_change=True)
    assert driver_change(snap).why.startswith("--no-driver-change")


@pytest.mark.parametrize("os_name, wsl, minimum, commands", [
    ("linux", False, "580.65.06", 2),
    # CUDA 13.x: the Windows driver is "R580 or newer" (no GA Windows driver row)
    ("windows", False, "580", 0),
    ("linux", True, "580.65.06", 0),  # WSL: the Windows driver, nothing inside WSL
])
def test_driver_advice_per_os(table, os_name, wsl, minimum, commands):
    snap = rtx5090_2121(os=os_name)
    snap.host.wsl = wsl
    machine = machine_from_snapshot(snap, torch_build(snap), table.accelerators)
    keep = choose(table, machine, "2.12.1").needs_driver
    advice = driver_advice(table, snap, "13.0", keep.driver)
    assert advice.minimum == minimum and len(advice.commands) == commands
    if wsl:
        assert "install it on Windows, never inside WSL" in advice.sentence


# --- the project's pins
# --------------------------------------------------------------------------------------


def test_requirements_lines():
    text = ("# torch pinned\n-r base.txt\n--index-url https://x\ntorch[opt]==2.3.1+cu121 ; sys_platform == "
        "'linux'"
            "  # why\ntorchvision==0.18.1\ntorch>=2.0 \\\n    --hash=sha256:abc\ngit+https://x/y.git\n")
    pins = parse_requirements(text, "requirements-gpu.txt")
    assert [(p.spec, p.source, p.marker) for p in pins] == [
        ("==2.3.1+cu121", "requirements-gpu.txt:4", 'sys_platform == "linux"'),
        (">=2.0", "requirements-gpu.txt:6", None)]


def test_pyproject_and_locks():
    text = ('[project]\nname = "x"\ndependencies = ["torch>=2.5,<2.8"]\n[project.optional-dependencies]\n'
            'gpu = ["torch==2.7.1"]\n[dependency-groups]\ndev = ["pytest"]\n'
            '[tool.poetry.dependencies]\ntorch = {version = "^2.6", source = "pytorch"}\n')
    assert [(p.spec, p.source) for p in parse_pyproject(text)] == [
        ("<2.8,>=2.5", "pyproject.toml [project] dependencies"),
        ("==2.7.1", "pyproject.toml [project.optional-dependencies] gpu"),
        (">=2.6,<3.0", "pyproject.toml [tool.poetry.dependencies]")]
    problems = []
    assert parse_pyproject("[project", problems) == [] and problems[0].startswith("pyproject.toml: invalid "
        "TOML")
    lock = ('[[package]]\nname = "numpy"\nversion = "2.0.0"\n\n[[package]]\nname = "torch"\nversion = '
        '"2.3.1+cu121"\n'
            'source = { registry = "https://download.pytorch.org/whl/cu121" }\n')
    assert [(p.spec, p.source) for p in parse_lock(lock, "uv.lock")] == [("==2.3.1+cu121", "uv.lock")]
    assert (
        poetry_spec("2.3.1") == "==2.3.1"
        and poetry_spec("~2.3.1") == ">=2.3.1,<2.4"
        and poetry_spec("*") is None
    )


def test_the_project_pin_combines_its_statements():
    snap = make_snapshot(python="3.12.1")
    snap.project = Project(folder="/p", pins=[
        TorchPin(">=2.5", "pyproject.toml [project] dependencies"),
        TorchPin("==2.3.1", "requirements.txt:1", 'python_version < "3.12"'),  # not for this Python
        TorchPin("<2.8", "requirements.txt:2")])
    pin = project_pin(snap)
    assert (pin.spec, pin.source) == (">=2.5,<2.8", "pyproject.toml [project] dependencies, "
        "requirements.txt:2")
    snap.project.pins.append(TorchPin("==2.7.1+cu128", "uv.lock"))
    assert (project_pin(snap).spec, project_pin(snap).source) == ("==2.7.1", "uv.lock")  # the lock file wins
    snap.requested = Requested(torch=TorchPin("==2.6.0", "--torch"))
    assert wanted_torch(snap).source == "--torch"  # and the command line wins over the project


def test_the_project_folder_is_the_environments_or_a_working_folder_it_belongs_to(tmp_path):
    project, other = tmp_path / "proj", tmp_path / "other"
    (project / ".venv").mkdir(parents=True)
    other.mkdir()
    (project / "requirements.txt").write_text("torch==2.3.1\n")
    (other / "pyproject.toml").write_text("[project]\n")
    assert project_folder(str(project / ".venv"), str(other), "venv") == str(project)
    assert project_folder(str(tmp_path / "elsewhere/.venv"), str(other), "venv") is None  # not its business
    # a system Python serves the folder it runs in
    assert project_folder("/usr", str(other), "system") == str(other)
    (other / "envs" / "a").mkdir(parents=True)  # a venv deeper inside the working folder belongs to it
    assert project_folder(str(other / "envs" / "a"), str(other), "venv") == str(other)
    (tmp_path / "other-sibling" / "a").mkdir(parents=True)  # a name that only starts like it does not
    assert project_folder(str(tmp_path / "other-sibling" / "a"), str(other), "venv") is None


def test_requirements_files_are_recognised_as_pathlibs_glob_did(tmp_path):
    names = [
        "requirements.txt",
        "requirements-dev.txt",
        "requirements_gpu.txt",
        "requirements.txt.bak",
        "requirement.txt",
        "dev-requirements.txt",
        "requirements.in",
        "requirementstxt",
        ".requirements.txt",
    ]
    for name in names:
        (tmp_path / name).write_text("")
    assert {n for n in names if _is_requirements(n)} == {p.name for p in tmp_path.glob("requirements*.txt")}


# --- one builder
# ---------------------------------------------------------------------------------------------


def test_plan_actions_are_written_with_the_plans_pins_or_not_at_all():
    fix = Fix("again", actions=[Action(REINSTALL, ("torch",), plan=True), Action(SHELL, text="echo ok")])
    findings = [Finding("x", "error", "t", fix=fix)]
    commands = Commands(python="/v/bin/python")
    commands.fill(findings, (("torch==2.7.1+cu128",), "cu128"))
    assert fix.commands == ['/v/bin/python -m pip install --force-reinstall "torch==2.7.1+cu128" --index-url '
                            "https://download.pytorch.org/whl/cu128", "echo ok"]
    commands.fill(findings, ((), None))
    assert fix.commands == ["echo ok"]  # never an unpinned install from the default index
    assert Commands(python="/v/bin/python", installer="uv").line(Action("venv", ("torch==2.7.1",), None,
                                                                        text=".venv")).startswith(
        "uv venv --python /v/bin/python .venv && uv pip install --python .venv/bin/python")
    assert Commands(python="py").line(Action(INSTALL, ("torch==1",), "cu128", python=".venv/bin/python")) == \
        '.venv/bin/python -m pip install "torch==1" --index-url https://download.pytorch.org/whl/cu128'


def test_a_build_that_already_fits_is_not_told_it_stays_once_the_driver_is_updated(table):
    # issue 13: --device 0 without a GPU made the smoke test say torch-cpu-build, and the plan answered "torch
    # 2.13.0+cpu stays: it runs once the driver is updated". The same build is no plan step, no driver story.
    from doctor.plan.plan import build_plan

    snap = make_snapshot(gpus=[], driver=None, max_cuda=None, nvidia_status="no-gpu", pci=[],
                         torch=torch_dist("2.13.0+cpu", None), torchvision=None, torchaudio=None)
    plan = build_plan(assess(snap, table), [Finding("torch-cpu-build", "error", "a CPU build", fix=Fix("x"))])
    assert plan.status == "none" and plan.steps == []
    assert "already the build that fits" in plan.reason
    assert not any("driver" in n for n in plan.notes)


# --- host facts and devices
# ----------------------------------------------------------------------------------


def test_scheduler_and_interpreters(tmp_path):
    assert detect_scheduler({"SLURM_JOB_ID": "1"}) == "slurm"
    assert (
        detect_scheduler({"JOB_ID": "1"}) is None
        and detect_scheduler({"JOB_ID": "1", "SGE_ROOT": "/x"}) == "sge"
    )
    for name in ("python3.10", "python3.12", "uv"):
        exe = tmp_path / name
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    pythons, uv = find_pythons({"PATH": str(tmp_path)})
    assert pythons == {"3.10": str(tmp_path / "python3.10"), "3.12": str(tmp_path / "python3.12")}
    assert uv == str(tmp_path / "uv")


def test_only_interpreters_that_are_here_are_named():
    snap = make_snapshot()
    snap.host.pythons = {"3.9": "/usr/bin/python3.9", "3.11": "/usr/bin/python3.11"}
    other = python_in_range(snap, "3.10", "3.14")
    assert (other.version, other.path) == ("3.11", "/usr/bin/python3.11")
    assert venv_line(other, ".venv") == "/usr/bin/python3.11 -m venv .venv"
    snap.host.pythons = {}
    other = python_in_range(snap, "3.10", "3.14")
    assert other.path is None and not other.available and venv_line(other, ".venv") is None
    snap.host.uv = "/usr/local/bin/uv"
    assert venv_line(python_in_range(snap, "3.10", "3.14"), ".venv") == \
        "/usr/local/bin/uv venv --seed --python 3.14 .venv"


def test_device_n_is_checked_against_what_the_machine_has():
    from doctor.app.run import check_device

    snap = make_snapshot()
    check_device("0", snap)
    with pytest.raises(DoctorError) as info:
        check_device("1", snap)
    assert "no device 1 (the NVIDIA driver lists 1 GPU(s))" in str(info.value) and info.value.exit_code == 2
    with pytest.raises(DoctorError) as info:
        check_device("9" * 5000, snap)  # never handed to int(): Python refuses 5000-digit strings
    assert "--device 999999999999...: this machine has no device" in str(info.value)
    rocm = make_snapshot(gpus=[], driver=None, max_cuda=None, nvidia_status="no-gpu", pci=[],
                         torch=torch_dist("2.7.1+rocm6.3", None, hip="6.3"))
    check_device("0", rocm)  # an AMD GPU the NVIDIA probes cannot see: not judged
    unknown = replace(make_snapshot(), nvidia=replace(make_snapshot().nvidia, status="unknown", gpus=[]))
    check_device("3", unknown)  # cannot tell: not judged


def test_a_distributions_own_torch_gets_no_pip_reinstall_from_any_finding(table):
    # conda-forge's torch, healthy for the plan, with a hazard that would reinstall torch: no pip command for
    # it
    from doctor.model.environment import Conda, CondaRecord, PythonFacts
    from doctor.plan.plan import build_plan

    snap = make_snapshot(torch=torch_dist("2.5.1", "12.6", metadata_version="2.5.1"), torchvision=None,
                         torchaudio=None)
    snap.interpreter.env_kind, snap.interpreter.prefix = "conda", "/opt/conda/envs/ml"
    snap.environment.python = PythonFacts(conda=Conda(records=[CondaRecord(
        "pytorch", "2.5.1", "cuda126_mkl_py312_h8b1a2c3_303", "https://conda.anaconda.org/conda-forge/linux-64")]))
    plan = build_plan(assess(snap, table), [])
    assert plan.status == "healthy" and plan.pins == []
    fix = Fix("again", actions=[Action(REINSTALL, ("torch",), plan=True)])
    Commands(python="/opt/conda/envs/ml/bin/python").fill([Finding("x", "warning", "t", fix=fix)],
                                                         (tuple(plan.pins), plan.pins_variant))
    assert fix.commands == []


@pytest.mark.parametrize("name, cc, note", [
    ("GeForce GTX 680", "3.0", "CUDA 10.2 to 10.2 can compile kernels for these GPUs: only a build made"),
    ("GeForce GTX 580", "2.0", "No CUDA version the table knows can compile kernels for these GPUs."),
])
def test_no_wheel_for_the_gpus_says_which_cuda_could_build_one(table, name, cc, note):
    # the plan's note follows the choice's code, never the words of its reason
    snap = make_snapshot(gpus=[gpu(name, cc)], torch=None, torchvision=None, torchaudio=None)
    plan = diagnose(snap, table).plan
    assert assess(snap, table).choice.code == NO_WHEEL_FOR_GPUS
    assert plan.status == "manual"
    assert plan.reason == "no published wheel has kernels for every GPU of this machine"
    assert plan.notes[1].startswith(note)


def test_the_build_the_gpu_needs_without_a_wheel_for_this_python(table):
    snap = make_snapshot(python="3.8.10", gpus=[gpu("NVIDIA GeForce RTX 5090", "12.0")], torch=None,
                         torchvision=None, torchaudio=None)
    diag = diagnose(snap, table)
    assert assess(snap, table).unpinned.code == NEEDS_OTHER_PYTHON
    [f] = [f for f in diag.findings if f.id == "python-unsupported"]
    assert f.title == "the torch this machine needs has no wheel for Python 3.8.10"
    assert f.evidence["reason"].startswith("torch 2.11.0+cu128, the build this machine needs, has no wheel")
