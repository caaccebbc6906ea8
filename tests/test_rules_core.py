"""The core rules and the fix plan, table-driven over make_snapshot() and the real bundled table."""

from __future__ import annotations

import pytest
from factory import companion, gpu, make_snapshot, torch_dist

from doctor.app.diagnose import diagnose
from doctor.compat.arch import arch_supports
from doctor.table.load import load_table


@pytest.fixture(scope="module")
def table():
    return load_table()


def ids(diag):
    return sorted({f.id for f in diag.findings})


def test_healthy_machine_has_no_findings_and_nothing_to_fix(table):
    diag = diagnose(make_snapshot(), table)
    assert ids(diag) == []
    assert diag.plan.status == "healthy"
    # nothing fails; a check whose facts this snapshot lacks says so instead of passing
    assert {c.status for c in diag.checks} <= {"passed", "skipped", "unknown"}
    states = {c.rule: c.status for c in diag.checks}
    assert states["gpu-arch"] == states["driver-cuda"] == "passed"
    assert states["runtime"] == "skipped" and states["shm"] == "unknown"


CASES = [
    # (name, snapshot changes, expected ids, expected install pin fragment or None)
    (
        "rtx5090-on-cu126",
        dict(
            gpus=[gpu("NVIDIA GeForce RTX 5090", "12.0")],
            torch=torch_dist("2.6.0+cu126", "12.6"),
            torchvision=companion("torchvision", "0.21.0+cu126", "12.6", "2.6.0"),
            torchaudio=None,
        ),
        ["gpu-arch-unsupported"],
        '"torch==2.7.1+cu128" "torchvision==0.22.1+cu128" --index-url https://download.pytorch.org/whl/cu128',
    ),
    (
        "cpu-build-with-gpu",
        dict(torch=torch_dist("2.5.1+cpu", None), torchvision=None, torchaudio=None),
        ["torch-cpu-build"],
        '"torch==2.5.1+cu124" --index-url https://download.pytorch.org/whl/cu124',
    ),
    (
        "no-torch-with-gpu",
        dict(torch=None, torchvision=None, torchaudio=None),
        ["torch-not-installed"],
        "+cu126",
    ),
    (
        "no-torch-no-gpu",
        dict(
            torch=None,
            torchvision=None,
            torchaudio=None,
            gpus=[],
            driver=None,
            max_cuda=None,
            nvidia_status="no-gpu",
            pci=[],
        ),
        ["torch-not-installed"],
        "+cpu",
    ),
    (
        "cu130-on-r535",
        dict(
            driver="535.104.05",
            max_cuda="12.2",
            torch=torch_dist("2.14.1+cu130", "13.0"),
            torchvision=None,
            torchaudio=None,
        ),
        ["driver-too-old"],
        '"torch==2.14.1+cu126"',
    ),
    # same major, but below CUDA 11.x's minor-version-compatibility floor (450.80.02): it cannot start
    (
        "cu118-below-the-11x-floor",
        dict(
            driver="450.57",
            max_cuda="11.0",
            torch=torch_dist("2.7.1+cu118", "11.8"),
            torchvision=None,
            torchaudio=None,
        ),
        ["driver-too-old"],
        None,
    ),
    (
        "cu128-on-r535-minor-compat",
        dict(driver="535.104.05", max_cuda="12.2"),
        ["driver-older-than-build"],
        None,
    ),
    (
        "pascal-on-cu128",
        dict(
            gpus=[gpu("Tesla P100-PCIE-16GB", "6.0")],
            torch=torch_dist("2.8.0+cu128", "12.8"),
            torchvision=None,
            torchaudio=None,
        ),
        ["gpu-arch-unsupported"],
        '"torch==2.8.0+cu126"',
    ),
    (
        "volta-on-cu130",
        dict(
            gpus=[gpu("Tesla V100-SXM2-32GB", "7.0")],
            driver="580.65.06",
            max_cuda="13.0",
            torch=torch_dist("2.14.1+cu130", "13.0"),
            torchvision=None,
            torchaudio=None,
        ),
        ["gpu-arch-unsupported"],
        '"torch==2.14.1+cu126"',
    ),
    (
        "torchvision-cpu-build",
        dict(torchvision=companion("torchvision", "0.22.1+cpu", None, "2.7.1")),
        ["torchvision-mismatch"],
        '"torch==2.7.1+cu128" "torchvision==0.22.1+cu128" "torchaudio==2.7.1+cu128"',
    ),
    # torchvision itself checks only the CUDA major: 12.6 beside 12.8 is fine
    (
        "torchvision-other-cuda-minor",
        dict(torchvision=companion("torchvision", "0.22.1+cu126", "12.6", "2.7.1")),
        [],
        None,
    ),
    (
        "torchvision-other-release",
        dict(torchvision=companion("torchvision", "0.21.0+cu128", "12.8", "2.6.0")),
        ["torchvision-mismatch"],
        '"torchvision==0.22.1+cu128"',
    ),
    (
        "torchaudio-other-release",
        dict(torchaudio=companion("torchaudio", "2.6.0+cu128", "12.8", "2.6.0")),
        ["torchaudio-mismatch"],
        '"torchaudio==2.7.1+cu128"',
    ),
    (
        "python-without-wheels",
        dict(python="3.16.0", torch=None, torchvision=None, torchaudio=None),
        ["python-unsupported", "torch-not-installed"],
        None,
    ),
    (
        "python38-on-rtx5090",
        dict(
            python="3.8.18",
            gpus=[gpu("NVIDIA GeForce RTX 5090", "12.0")],
            torch=None,
            torchvision=None,
            torchaudio=None,
        ),
        ["python-unsupported", "torch-not-installed"],
        None,
    ),
    (
        "driver-missing",
        dict(nvidia_status="no-driver", gpus=[], driver=None, max_cuda=None, pci=["0000:01:00.0"]),
        ["nvidia-driver-missing"],
        None,
    ),
    (
        "driver-library-mismatch",
        dict(nvidia_status="driver-library-mismatch", gpus=[], driver=None, max_cuda=None),
        ["driver-library-mismatch"],
        None,
    ),
    (
        "container-lost-gpu",
        dict(nvidia_status="container-lost-gpu", gpus=[], driver=None, max_cuda=None),
        ["container-lost-gpu-access"],
        None,
    ),
    (
        "windows-pypi-cpu",
        dict(os="windows", torch=torch_dist("2.7.1", None), torchvision=None, torchaudio=None),
        ["torch-cpu-build"],
        '"torch==2.7.1+cu128" --index-url https://download.pytorch.org/whl/cu128',
    ),
]


@pytest.mark.parametrize("name,changes,expected,pin", CASES, ids=[c[0] for c in CASES])
def test_rule_cases(table, name, changes, expected, pin):
    diag = diagnose(make_snapshot(**changes), table)
    assert ids(diag) == sorted(expected)
    if pin is None:
        assert not any(s.kind == "install" for s in diag.plan.steps)
    else:
        install = [s for s in diag.plan.steps if s.kind == "install"]
        assert len(install) == 1 and pin in install[0].command
        assert install[0].command.startswith("/home/u/venv/bin/python -m pip install ")
        # every wheel finding carries the same exact command
        wheel = [f for f in diag.findings if f.fix and f.fix.commands]
        assert wheel and all(install[0].command in f.fix.commands for f in wheel)


def test_only_the_driver_is_too_old_keeps_the_installed_build(table):
    snap = make_snapshot(driver="450.57", max_cuda="11.0", torch=torch_dist("2.7.1+cu118", "11.8"),
                         torchvision=None, torchaudio=None)
    plan = diagnose(snap, table).plan
    assert plan.status == "driver-first"
    assert [s.kind for s in plan.steps] == ["driver"]
    assert "stays" in " ".join(plan.notes)


@pytest.mark.parametrize("torch,cuda,hip,variant", [
    ("2.7.1+rocm6.3", None, "6.3.42131", "rocm6.3"),  # an AMD GPU NVIDIA's probes cannot see
    ("2.7.1+cu128", "12.8", None, "cu128"),  # a CUDA build in a container started without its GPU
])
def test_without_an_nvidia_gpu_the_installed_accelerator_kind_is_kept(table, torch, cuda, hip, variant):
    dist = torch_dist(torch, cuda, hip=hip)
    snap = make_snapshot(gpus=[], driver=None, max_cuda=None, nvidia_status="no-gpu", pci=[], torch=dist,
                         torchvision=companion("torchvision", "0.21.0+cpu", None, "2.6.0"), torchaudio=None)
    diag = diagnose(snap, table)
    assert ids(diag) == ["torchvision-mismatch"]
    install = next(s for s in diag.plan.steps if s.kind == "install")
    assert f'"torch==2.7.1+{variant}" "torchvision==0.22.1+{variant}"' in install.command


def test_windows_commands_use_windows_quoting(table):
    snap = make_snapshot(os="windows", torch=torch_dist("2.7.1", None), torchvision=None, torchaudio=None)
    snap.interpreter.path = r"C:\Users\Bob Smith\venv\Scripts\python.exe"
    install = next(s for s in diagnose(snap, table).plan.steps if s.kind == "install")
    assert install.command.startswith('& "C:\\Users\\Bob Smith\\venv\\Scripts\\python.exe" -m pip install ')
    assert "'" not in install.command
    snap.interpreter.path = r"C:\venv\Scripts\python.exe"
    install = next(s for s in diagnose(snap, table).plan.steps if s.kind == "install")
    assert install.command.startswith("C:\\venv\\Scripts\\python.exe -m pip install \"torch==2.7.1+cu128\"")


def test_a_version_without_digits_does_not_crash_the_plan(table):
    snap = make_snapshot(torch=torch_dist("garbage+cu1", None), torchvision=None, torchaudio=None)
    diag = diagnose(snap, table)
    assert diag.plan.status in ("install", "healthy", "none", "manual")


def test_companion_requirement_ranges_are_honoured(table):
    # torchvision 0.29.2 declares torch>=2.14.0 (a stable-ABI wheel): fine beside 2.14.1 and 2.15.0
    tv = companion("torchvision", "0.29.2+cu132", "13.2", None)
    tv.requires = ["torch>=2.14.0"]
    h100 = [gpu("NVIDIA H100 80GB HBM3", "9.0")]
    for torch in (torch_dist("2.14.1+cu130", "13.0"), torch_dist("2.15.0+cu132", "13.2")):
        snap = make_snapshot(gpus=h100, driver="595.45.04", max_cuda="13.2", torch=torch, torchvision=tv,
                             torchaudio=None)
        assert ids(diagnose(snap, table)) == []
    old = make_snapshot(
        gpus=h100,
        driver="595.45.04",
        max_cuda="13.2",
        torch=torch_dist("2.13.0+cu130", "13.0"),
        torchvision=tv,
        torchaudio=None,
    )
    assert ids(diagnose(old, table)) == ["torchvision-mismatch"]


def test_driver_too_old_with_no_wheel_for_it_says_which_driver_first(table):
    # An RTX 5090 needs a cu128+ build; R520 (CUDA 11.8) can run none of them.
    snap = make_snapshot(gpus=[gpu("NVIDIA GeForce RTX 5090", "12.0")], driver="520.61.05", max_cuda="11.8",
                         torch=None, torchvision=None, torchaudio=None)
    diag = diagnose(snap, table)
    assert diag.plan.status == "driver-first"
    driver_step, install = diag.plan.steps
    assert driver_step.kind == "driver" and "580.65.06 or newer" in driver_step.description
    assert install.kind == "install" and "+cu12" in install.command or "+cu13" in install.command


def test_mixed_gpus_get_one_environment_per_group(table):
    snap = make_snapshot(gpus=[gpu("NVIDIA GeForce GTX 1080 "
        "Ti", "6.1", 0), gpu("NVIDIA GeForce RTX 5090", "12.0", 1)],
                         torch=torch_dist("2.6.0+cu126", "12.6"), torchvision=None, torchaudio=None)
    diag = diagnose(snap, table)
    assert "gpus-need-different-wheels" in ids(diag)
    group = next(f for f in diag.findings if f.id == "gpus-need-different-wheels")
    text = "\n".join(group.fix.commands)
    assert "CUDA_VISIBLE_DEVICES=0 " in text and "CUDA_VISIBLE_DEVICES=1 " in text
    assert "+cu126" in text and ("+cu128" in text or "+cu129" in text)
    assert diag.plan.status == "manual"


def test_gpu_capability_filled_from_table_when_nothing_reported_it(table):
    snap = make_snapshot(gpus=[gpu("NVIDIA GeForce RTX 5090", None)], torch=torch_dist("2.6.0+cu126", "12.6"),
                         torchvision=None, torchaudio=None)
    diag = diagnose(snap, table)
    assert snap.nvidia.gpus[0].compute_capability.value == "12.0"
    assert snap.nvidia.gpus[0].compute_capability.source.startswith("table")
    assert ids(diag) == ["gpu-arch-unsupported"]


def test_driver_max_cuda_filled_from_branch_table(table):
    snap = make_snapshot(max_cuda=None, driver="535.104.05")
    diagnose(snap, table)
    assert snap.nvidia.cuda_driver_version.value == "12.2"


def test_pypi_wheel_without_local_tag_is_read_from_version_py(table):
    # PyPI 2.14.1: METADATA "2.14.1", version.py "2.14.1+cu130"; on a 580 driver with an H100 that is healthy.
    snap = make_snapshot(gpus=[gpu("NVIDIA H100 80GB HBM3", "9.0")], driver="580.65.06", max_cuda="13.0",
                         torch=torch_dist("2.14.1+cu130", "13.0", metadata_version="2.14.1"),
                         torchvision=None, torchaudio=None)
    assert ids(diagnose(snap, table)) == []


def test_a_crashing_rule_becomes_a_finding_and_hides_nothing(table):
    from doctor.compat.assessment import assess
    from doctor.rules import Rule, all_rules, run_rules

    def boom(facts):
        raise ValueError("kaboom")

    rules = [Rule("boom", "explodes", boom)] + all_rules()
    findings, checks = run_rules(assess(make_snapshot(torch=torch_dist("2.5.1+cpu", None), torchvision=None,
                                                      torchaudio=None), table), rules)
    assert {"internal-rule-error", "torch-cpu-build"} <= {f.id for f in findings}
    assert checks[0].status == "crashed"


@pytest.mark.parametrize("cc,sm,ptx,ok", [
    ((12, 0), ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"], [], False),
    ((12, 0), ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], [], True),
    ((8, 9), ["sm_80", "sm_86", "sm_90"], [], True),  # 8.9 runs sm_86 cubins
    ((8, 6), ["sm_80", "sm_89"], [], True),  # sm_80 covers 8.6
    ((8, 0), ["sm_86", "sm_90"], [], False),  # no cubin at or below 8.0 in major 8
    ((12, 1), ["sm_90", "sm_100", "sm_120"], [], True),  # GB10 runs sm_120
    ((10, 0), ["sm_90"], ["compute_90"], True),  # PTX JIT forward
    ((9, 0), ["sm_90a"], [], True),
    ((9, 1), ["sm_90a"], [], False),  # arch-specific cubins run only on exactly 9.0
    ((8, 7), ["sm_80", "sm_86"], [], False),  # Jetson Orin cannot run dGPU sm_80/86 cubins
    ((6, 1), ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], [], False),
    ((3, 7), ["sm_50", "sm_60"], [], False),
])
def test_arch_support(cc, sm, ptx, ok):
    assert arch_supports(cc, sm, ptx).supported is ok


@pytest.mark.parametrize("cc,sm,cuda,ok", [
    ((8, 7), ["sm_80", "sm_90"], "13.0", False),  # Orin before the CUDA 13.2 unification
    ((8, 7), ["sm_80", "sm_90"], "13.2", True),
    ((7, 2), ["sm_70"], "13.4", True),
    ((8, 7), ["sm_90"], "13.2", False),  # only sm_70/80/86 were unified
    ((10, 1), ["sm_100"], "13.0", False),  # Thor: sm_100 does not run on 10.1
    ((10, 1), ["sm_110"], "13.0", True),  # sm_101 was renamed sm_110
    ((11, 0), ["sm_101"], "13.0", True),
    ((10, 3), ["sm_100"], "13.0", True),  # B300 runs sm_100 cubins
])
def test_arch_support_jetson_and_thor(cc, sm, cuda, ok):
    assert arch_supports(cc, sm, (), cuda).supported is ok


def test_every_cuda_arch_row_of_the_table_is_consistent_with_its_family(table):
    # Over the real table: every cu128+ Linux x86_64 build covers RTX 50xx; no cu126 build does.
    for release in table.releases:
        for variant in release.variants_for("linux-x86_64"):
            row = table.arch_list(release.latest.torch, variant, "linux-x86_64")
            if row is None or not variant.startswith("cu"):
                continue
            covers = arch_supports((12, 0), row.sm, row.ptx or ()).supported
            if variant in ("cu126", "cu124", "cu121", "cu118"):
                assert not covers, (release.minor, variant)
            elif variant >= "cu128":
                assert covers, (release.minor, variant)
