"""The declared-requirements and NumPy ABI rules as pure functions of a snapshot (issue 29, the install
side)."""

from __future__ import annotations

import pytest
from factory import make_snapshot, torch_dist

from doctor.compat.assessment import assess
from doctor.model.environment import PythonFacts
from doctor.model.findings import ERROR, WARNING
from doctor.rules.dependencies import check_declared_requirements, check_numpy_abi
from doctor.table.load import default_table_path, load_table

SITE = "/home/u/venv/lib/python3.12/site-packages"
LINUX = {"os_name": "posix", "sys_platform": "linux", "platform_system": "Linux",
         "platform_machine": "x86_64",
         "python_version": "3.12", "python_full_version": "3.12.1", "implementation_name": "cpython",
         "implementation_version": "3.12.1", "platform_python_implementation": "CPython"}
WINDOWS = dict(LINUX, os_name="nt", sys_platform="win32", platform_system="Windows", platform_machine="AMD64")
REQUIRES = ["filelock", "typing-extensions>=4.10.0",
            'nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux" and platform_machine == "x86_64"',
            'opt-einsum>=3.3; extra == "opt-einsum"']


@pytest.fixture(scope="module")
def table():
    return load_table(default_table_path())


def snapshot(installed, markers=LINUX, requires=REQUIRES, version="2.4.1+cu121"):
    dist = torch_dist(version, "12.1", requires=requires)
    snap = make_snapshot(torch=dist, torchvision=None, torchaudio=None)
    snap.environment.python = PythonFacts(installed=[[n, v, SITE] for n, v in installed], markers=markers)
    return snap


def test_everything_declared_is_installed():
    snap = snapshot([("filelock", "3.16.1"), ("typing-extensions", "4.12.2"),
                     ("nvidia-cudnn-cu12", "9.1.0.70")])
    assert check_declared_requirements(assess(snap, None)) == []


def test_markers_are_the_targets_own():
    # on Windows the nvidia-* pin does not apply; an extra's requirement never does
    snap = snapshot([("filelock", "3.16.1"), ("typing-extensions", "4.12.2")], markers=WINDOWS)
    assert check_declared_requirements(assess(snap, None)) == []


def test_a_missing_cuda_wheel_is_an_error_and_an_old_pure_python_one_a_warning():
    snap = snapshot([("filelock", "3.16.1"), ("typing-extensions", "4.12.2")])
    found = check_declared_requirements(assess(snap, None))
    assert [(f.id, f.severity) for f in found] == [("torch-requirements-unmet", ERROR)]
    assert found[0].fix.actions[0].packages == ("nvidia-cudnn-cu12==9.1.0.70",)
    snap = snapshot([("filelock", "3.16.1"), ("typing-extensions", "4.5.0"),
                     ("nvidia-cudnn-cu12", "9.1.0.70")])
    found = check_declared_requirements(assess(snap, None))
    assert [(f.id, f.severity) for f in found] == [("torch-requirements-unmet", WARNING)]


def test_first_on_sys_path_counts():
    snap = snapshot([("filelock", "3.16.1"), ("typing-extensions", "4.12.2"),
                     ("nvidia-cudnn-cu12", "8.9.4.25"),
                     ("nvidia-cudnn-cu12", "9.1.0.70")])
    found = check_declared_requirements(assess(snap, None))
    assert [f.id for f in found] == ["torch-cudnn-requirement-unmet"]


def test_without_the_installed_versions_it_cannot_tell():
    snap = snapshot([])
    snap.environment.python.installed = None
    assert check_declared_requirements(assess(snap, None)).status == "unknown"
    snap.origin = "report"  # an older report, read back: it never held them
    assert check_declared_requirements(assess(snap, None)).status == "skipped"


def test_a_marker_on_an_unreported_variable_is_unknown_not_a_verdict():
    snap = snapshot([], requires=['pywin32; platform_release >= "10"'])
    assert check_declared_requirements(assess(snap, None)).status == "unknown"


@pytest.mark.parametrize("version,os_name,numpy,bad", [
    ("2.2.2+cu121", "linux", "2.1.0", True), ("2.2.2+cu121", "linux", "1.26.4", False),
    ("2.3.0+cu121", "linux", "2.0.0", False), ("2.3.1+cpu", "windows", "2.0.0", True),
    ("2.4.0+cu121", "windows", "2.1.0", True), ("2.4.1+cu121", "windows", "2.1.0", False),
    ("1.13.1+cu117", "linux", "2.0.0rc1", True),
])
def test_numpy_abi_boundary(table, version, os_name, numpy, bad):
    snap = snapshot([("numpy", numpy)], version=version)
    snap.host.os = os_name
    found = check_numpy_abi(assess(snap, table))
    assert [f.id for f in found] == (["numpy-too-new-for-torch"] if bad else [])


def test_missing_cuda_wheels_whose_libraries_are_on_the_library_path_are_a_warning():
    # an HPC module or a CUDA image puts cuDNN on LD_LIBRARY_PATH: torch may load that one instead
    from doctor.model.environment import CudaLib, Libraries, LibraryDir

    snap = snapshot([("filelock", "3.16.1"), ("typing-extensions", "4.12.2")])
    cudnn = LibraryDir(
        path="/opt/cudnn/lib", exists=True, libs=[CudaLib(file="libcudnn.so.9", family="cudnn")]
    )
    snap.environment.libraries = Libraries(variable="LD_LIBRARY_PATH", value="/opt/cudnn/lib", dirs=[cudnn])
    found = check_declared_requirements(assess(snap, None))
    assert [(f.id, f.severity) for f in found] == [("torch-requirements-unmet", WARNING)]
    assert "/opt/cudnn/lib" in found[0].detail
    snap.environment.libraries.dirs = []  # nothing there: the import fails
    assert check_declared_requirements(assess(snap, None))[0].severity == ERROR
