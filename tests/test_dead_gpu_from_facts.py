"""Dead GPUs decided from what the machine shows (issue 29's corpus), over constructed snapshots and fake
roots:

- a container whose nvidia-smi works but that has no libcuda.so.1 lacks the 'compute' capability, whatever
  NVIDIA_DRIVER_CAPABILITIES says;
- a cuda-compat libcuda mounted into a driver folder is recognised by its version;
- WSL 1's driver state is "no GPU", said as WSL 1;
- the Microsoft Store's Python without torch, with long paths off, cannot install torch;
- a CUDA torch whose nvidia-* wheels sit in another site-packages does not import.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
from factory import gpu, make_snapshot, torch_dist

from doctor.compat.assessment import assess
from doctor.compat.forward import forward_compat_in_use
from doctor.model import snapshot as S
from doctor.model.environment import CompatDir, Container, DriverLibCopy, Loader, PythonFacts, WindowsFacts
from doctor.model.findings import ERROR, WARNING
from doctor.rules.hazards import containers, installs
from doctor.rules.runtime import check_runtime
from doctor.table.load import load_table

GEFORCE = gpu(name="NVIDIA GeForce RTX 3090", cc="8.6")


def _ids(findings):
    return {f.id: f.severity for f in findings}


NVML = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"  # what the 'utility' capability mounts


def _in_container(caps, libcuda_paths, nvml=(NVML,)):
    snap = make_snapshot()
    snap.host.container = "docker"
    snap.environment.container = Container(kind="docker", device_nodes=["/dev/nvidia0", "/dev/nvidiactl"],
                                           gpu_device_nodes=1, nvidia_driver_capabilities=caps)
    snap.environment.loader = Loader(copies=[DriverLibCopy("libcuda.so.1", p, "default", "570.124.04")
                                             for p in libcuda_paths]
                                     + [DriverLibCopy("libnvidia-ml.so.1", p, "default", "570.124.04")
                                        for p in nvml])
    return snap


@pytest.mark.parametrize("caps", [None, "compute,utility"])
def test_working_nvidia_smi_without_libcuda_is_the_missing_compute_capability(caps):
    snap = _in_container(caps, [])
    found = [f for f in containers.check_containers(assess(snap, None))
             if f.id == "nvidia-driver-capabilities-no-compute"]
    assert len(found) == 1 and found[0].severity == ERROR
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in found[0].fix.commands[0]
    assert ("is not set" in str(found[0].title)) is (caps is None)


def test_no_driver_library_in_the_folders_searched_is_no_evidence():
    """nvidia-smi works, so its libnvidia-ml.so.1 is somewhere; when the folders searched hold neither it nor
    libcuda.so.1, they are not where this container's libraries are: nothing is concluded."""
    snap = _in_container(None, [], nvml=())
    found = _ids(containers.check_containers(assess(snap, None)))
    assert "nvidia-driver-capabilities-no-compute" not in found


def test_unset_capabilities_with_libcuda_mounted_is_quiet():
    snap = _in_container(None, ["/usr/lib/x86_64-linux-gnu/libcuda.so.1"])
    found = _ids(containers.check_containers(assess(snap, None)))
    assert "nvidia-driver-capabilities-no-compute" not in found


def _compat_mounted(driver: str, mounted: str, compat: str = "530.30.02"):
    snap = make_snapshot(gpus=[GEFORCE], driver=driver, max_cuda="12.0")
    snap.environment.loader = Loader(
        copies=[DriverLibCopy("libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "default", mounted)],
        compat=[CompatDir("/usr/local/cuda-12.1/compat", compat)],
    )
    return snap


def test_compat_libcuda_mounted_into_the_driver_folder_is_recognised():
    forward = forward_compat_in_use(_compat_mounted("525.125.06", "530.30.02"), load_table())
    assert forward is not None and forward.gpus == "geforce" and forward.supported is False


def test_the_drivers_own_libcuda_is_not_taken_for_compat():
    # the host driver is the compat package's version: the libcuda in the driver folder is its own
    assert forward_compat_in_use(_compat_mounted("530.30.02", "530.30.02"), load_table()) is None
    # a libcuda of another version than any compat folder's: not a compat copy either
    assert forward_compat_in_use(_compat_mounted("525.125.06", "535.54.03"), load_table()) is None


def test_wsl1_driver_state_says_wsl1_and_no_gpu(tmp_path):
    from doctor.probes.nvidia.probe import probe_nvidia

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/version").write_text("Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com)\n")
    result = probe_nvidia(root=str(tmp_path), nvml=False, env={"PATH": ""}, system="linux")
    assert result.status == S.NVIDIA_NO_GPU
    assert result.detail.startswith("WSL 1, kernel 4.4.0-19041-Microsoft") and "WSL2" not in result.detail


STORE = (r"C:\Users\u\AppData\Local\Microsoft\WindowsApps\PythonSoftwareFoundation.Python.3.8_qbz5n2kfra8p0"
         r"\python.exe")


@pytest.mark.parametrize(("path", "torch", "severity"), [
    (STORE, None, ERROR),  # the Store's deep site-packages: torch's files pass 260 characters
    (STORE, "default", WARNING),  # torch is installed there: it fitted
    (r"C:\Python38\python.exe", None, WARNING),  # elsewhere it depends on the folder
])  # fmt: skip
def test_long_paths_off_is_an_error_for_the_store_python_without_torch(path, torch, severity):
    snap = make_snapshot(os="windows", torch=torch, python="3.8.10")
    snap.interpreter.path = path
    snap.environment.windows = WindowsFacts(long_paths_enabled=False)
    snap.environment.python = PythonFacts(dists=[])
    found = [f for f in installs.check_interpreter_hygiene(assess(snap, None))
             if f.id == "windows-long-paths-disabled"]
    assert [f.severity for f in found] == [severity]


LIB = "/venv/lib/python3.11/site-packages"
LIB64 = "/venv/lib64/python3.11/site-packages"


@pytest.mark.parametrize(("wheels_in", "apart"), [(LIB, True), (LIB64, False)])
def test_cuda_wheels_in_another_site_packages_are_a_warning(wheels_in, apart):
    requires = ['nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux"', "filelock"]
    snap = make_snapshot(torch=torch_dist("2.9.0+cu128", "12.8", requires=requires))
    snap.install.torch.location = LIB64
    snap.environment.python = PythonFacts(installed=[["torch", "2.9.0+cu128", LIB64],
                                                     ["nvidia-cudnn-cu12", "9.10.2.21", wheels_in]])
    snap.runtime.status = "skipped"
    found = [f for f in check_runtime(assess(snap, None)) if f.id == "torch-cuda-wheels-apart"]
    assert bool(found) is apart
    if apart:  # torch also looks on sys.path: the smoke test, not these facts, says whether it imports
        assert found[0].severity == WARNING and LIB in str(found[0].title)
        assert found[0].fix.commands == [f"ln -s {LIB}/nvidia {LIB64}/nvidia"]


# test-infra#8094's runner: its conda environment under RUNNER_TEMP (77 characters to site-packages)
RUNNER_SITE = r"C:\actions-runner\_work\_temp\conda_environment_25961163736\Lib\site-packages"


def _installing(torch_version: str):
    """A plan that installs ``torch_version`` ("2.13.0+cu126") in place of what is there."""
    torch, _, variant = torch_version.partition("+")
    wheel = SimpleNamespace(torch=torch, variant=variant or "cpu")
    return SimpleNamespace(target=SimpleNamespace(wheel=wheel))


def _long_paths_off(torch_version, folder, choice=None, prefix=None, sys_path=(), installed="2.6.0+cpu"):
    """``torch_version``: the torch the plan installs over ``installed`` in ``folder``."""
    snap = make_snapshot(os="windows", torch=torch_dist(installed, None) if torch_version else None,
                         python="3.10.11")
    snap.interpreter.path = r"C:\x\python.exe"
    snap.interpreter.prefix = prefix or ""
    if snap.install.torch is not None:
        snap.install.torch.location = folder
    snap.environment.windows = WindowsFacts(long_paths_enabled=False)
    snap.environment.python = PythonFacts(dists=[], sys_path=list(sys_path))
    choice = _installing(torch_version) if torch_version and choice is None else choice
    facts = replace(assess(snap, load_table()), choice=choice)
    found = [f for f in installs.check_interpreter_hygiene(facts) if f.id == "windows-long-paths-disabled"]
    assert len(found) == 1
    return found[0]


def test_torch_2_13s_deepest_file_passes_260_in_a_ci_runners_conda_environment():
    # 77 + 1 + len("torch-2.13.0+cu126.dist-info/licenses/.../duktape-1.5.2/LICENSE.txt") = 77 + 1 + 173
    row = load_table().windows_longest_path("2.13.0")
    assert (row.length, row.wheel) == (167, "torch-2.13.0-cp312-cp312-win_amd64.whl")
    found = _long_paths_off("2.13.0+cu126", RUNNER_SITE + "\\" + "x" * 9)
    assert found.severity == ERROR
    assert found.evidence["longest_member_length"] == 173
    assert "87 characters, plus 1 for the separator, plus 173" in str(found.detail)
    assert "WinError 206" in str(found.detail) and "duktape-1.5.2\\LICENSE.txt" in str(found.detail)


def test_a_torch_already_installed_and_kept_is_no_verdict():
    """Written whole once: its deepest path proves nothing about an install that is not going to happen."""
    keep = SimpleNamespace(target=None)
    found = _long_paths_off("2.13.0+cu126", RUNNER_SITE + "\\" + "x" * 9, choice=keep,
                            installed="2.13.0+cu126")
    assert found.severity == WARNING and "longest_member_length" not in found.evidence


@pytest.mark.parametrize(("torch_version", "words"), [
    ("2.13.0+cu126", "makes 251 characters (77 + 1 + 173), below 260"),
    ("2.13.0.dev20260522+cu130", "is not known"),  # a nightly: no row
])  # fmt: skip
def test_below_260_or_unknown_stays_a_warning(torch_version, words):
    found = _long_paths_off(torch_version, RUNNER_SITE)
    assert found.severity == WARNING
    assert words in str(found.detail)


def test_without_torch_the_plans_choice_is_judged_in_the_interpreters_own_site_packages():
    prefix = "C:\\" + "p" * 100
    site = prefix + r"\Lib\site-packages"
    table = load_table()
    snap = make_snapshot(os="windows", torch=None, python="3.12.7")
    facts = assess(snap, table)
    target = facts.choice.target.wheel if facts.choice and facts.choice.target else None
    assert target is not None
    found = _long_paths_off(None, "", choice=facts.choice, prefix=prefix, sys_path=[prefix, site])
    assert found.evidence["site_packages"] == site
    name = target.torch if target.variant == "cpu" else f"{target.torch}+{target.variant}"
    assert found.evidence["torch"] == name
    row = table.windows_longest_path(name)
    total = len(site) + 1 + row.length_for(name)
    assert found.severity == (ERROR if total >= 260 else WARNING)


def test_no_site_packages_known_keeps_the_old_warning():
    found = _long_paths_off(None, "", prefix=r"C:\Python310", sys_path=[r"C:\elsewhere"])
    assert found.severity == WARNING and "site_packages" not in found.evidence


def test_the_store_pythons_count_is_made_in_its_user_site():
    # pip cannot write under WindowsApps: it installs into the user site, LocalCache\local-packages\...
    user = (r"C:\Users\u\AppData\Local\Packages\PythonSoftwareFoundation.Python.3.12_qbz5n2kfra8p0\LocalCache"
            r"\local-packages\Python312\site-packages")
    snap = make_snapshot(os="windows", torch=None, python="3.12.7")
    snap.interpreter.path = STORE
    prefix = r"C:\Program Files\WindowsApps\PythonSoftwareFoundation.Python.3.12_3.12.2032.0_x64"
    snap.interpreter.prefix = prefix
    snap.environment.windows = WindowsFacts(long_paths_enabled=False)
    snap.environment.python = PythonFacts(dists=[], sys_path=[prefix + r"\Lib\site-packages"])
    snap.environment.python.user_site.path = user
    found = [f for f in installs.check_interpreter_hygiene(assess(snap, load_table()))
             if f.id == "windows-long-paths-disabled"]
    # the count decides: the user site, 1, the plan's torch's deepest file
    [finding] = found
    assert finding.evidence["site_packages"] == user
    total = len(user) + 1 + finding.evidence["longest_member_length"]
    assert finding.severity == (ERROR if total >= 260 else WARNING)
