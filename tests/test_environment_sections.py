"""The typed environment sections (doctor/model/environment.py): written to JSON in the shape reports
have always had, read back from 0.1.0 reports, described by the schema, and judged once for conda."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
from factory import make_snapshot, torch_dist

from doctor.compat.assessment import assess
from doctor.compat.installs import CONDA_REMOVE_BEFORE_PIP, CONDA_TORCH, conda_torch
from doctor.errors import ReportError
from doctor.inputs.collect_env import parse_collect_env
from doctor.inputs.reports import read_report, validate_report
from doctor.model import environment as M
from doctor.model.report import build_report
from doctor.model.snapshot import Snapshot, SnapshotFormatError, as_plain
from doctor.plan import installers
from doctor.rules import run_rules
from doctor.rules.hazards import RULES

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "golden"
COLLECT_ENV = Path(__file__).parent / "fixtures" / "collect_env"
SECTION_CLASSES = [c for c in vars(M).values() if dataclasses.is_dataclass(c) and c.__module__ == M.__name__]

# An environment as torchdoctor 0.1.0 wrote it on a WSL2 machine, with every shape a section can have:
# sections that are only their reason, keys that appear only when stated, nulls that are facts.
ENVIRONMENT_0_1_0 = {
    "container": {"why": "probe failed: PermissionError: [Errno 13] Permission denied: '/dev'"},
    "shm": {"path": "/dev/shm", "why": "statvfs(/dev/shm) failed: No such file or directory"},
    "cpu": {"cpu_count": 16, "affinity": 8, "cgroup": "v2", "quota_cpus": 4.0,
            "quota_source": "/sys/fs/cgroup/user.slice/cpu.max", "quota_raw": "400000 100000", "budget": 4},
    "memory": {"source": "psutil", "total_bytes": 17179869184, "available_bytes": 8589934592,
               "swap_why": "psutil.swap_memory() failed: no /proc/swaps"},
    "visible_devices": {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
    "libraries": {"variable": "LD_LIBRARY_PATH", "value": "/usr/local/cuda-12.4/lib64", "dirs": [
        {"path": "/usr/local/cuda-12.4/lib64", "exists": True, "driver_libs": ["libcuda.so.1"], "libs": [
            {"file": "libnvJitLink.so.12", "family": "nvjitlink", "version": "12", "real": "libnvJitLink.so.12.4.127",
             "real_version": "12.4.127"},
            {"file": "libcudart.so", "family": "cudart", "version": None}]}]},
    "cuda_home": {"variable": None, "path": "/usr/local/cuda", "version": None,
                  "version_source": "/usr/local/cuda/version.json",
                  "why": "no readable version.json or version.txt in /usr/local/cuda"},
    "wsl": {"is_wsl": True, "evidence": ["/dev/dxg exists", "WSL_DISTRO_NAME is "
        "set"], "wsl_lib_dir_exists": True,
            "ld_so_conf": [{"file": "/etc/ld.so.conf.d/ld.wsl.conf", "dirs": ["/usr/lib/wsl/lib"], "driver_libs": {}},
                           {"file": "/etc/ld.so.conf.d/nvidia.conf", "dirs": ["/usr/lib/nvidia"],
                            "driver_libs": {"/usr/lib/nvidia": ["libcuda.so.1"]}}],
            "linux_driver": ["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.14"]},
    "python": {"executable": "/opt/conda/envs/ml/bin/python", "sys_path": ["/opt/conda/envs/ml/lib/python3.11"],
               "user_site": {"enabled": True, "path": "/home/u/.local/lib/python3.11/site-packages"},
               "dists": [{"name": "torch", "version": "2.6.0+cu124", "location": "/opt/conda/envs/ml/lib/python3.11",
                          "installer": "pip", "path": None}],
               "torch_origin": None,
               "conda": {"prefix": "/opt/conda/envs/ml", "is_base": False, "records": [
                   {"name": "pytorch", "version": "2.5.1", "build": "py3.11_cuda12.1_cudnn9.1.0_0", "channel": None}]},
               "pyvenv_cfg": None, "externally_managed_text": None, "problems": [], "error": None},
    "hostname": "DESKTOP-1234",
}  # fmt: skip


def report_with(environment) -> dict:
    report = json.loads((GOLDEN / "rtx5090-cu126.json").read_text())
    report["snapshot"]["host"] = as_plain(make_snapshot().host)  # the golden file keeps only host.os
    report["snapshot"]["environment"] = environment
    return report


# --- writing: the JSON keeps its shape ------------------------------------------------------------


def test_the_sparse_rules():
    assert as_plain(M.CudaHome(why="not set")) == {"why": "not set"}  # could not be read: only the reason
    assert as_plain(M.CudaHome(path="/usr/local/cuda")) == {
        "variable": None,
        "path": "/usr/local/cuda",
        "version": None,
    }
    assert as_plain(M.Shm(path="/dev/shm", why="statvfs "
        "failed")) == {"path": "/dev/shm", "why": "statvfs failed"}
    assert as_plain(M.Environment()) == {}
    assert as_plain(M.Environment(hostname="h", shm=M.Shm(why="w"))) == {"shm": {"why": "w"}, "hostname": "h"}


@pytest.mark.parametrize("name", ["rtx5090-cu126", "cpu-healthy", "no-torch"])
def test_golden_reports_read_back_into_typed_sections_and_write_the_same_json(name):
    report = json.loads((GOLDEN / f"{name}.json").read_text())
    report["snapshot"]["host"] = as_plain(make_snapshot().host)
    snapshot, meta = read_report(json.dumps(report), f"{name}.json")
    env = snapshot.environment
    assert isinstance(env.container, M.Container) and env.container.kind is None
    assert isinstance(env.cpu, M.Cpu) and env.cpu.budget == report["snapshot"]["environment"]["cpu"]["budget"]
    assert env.cuda_home == M.CudaHome(why="CUDA_HOME and CUDA_PATH are not set and /usr/local/cuda does not "
        "exist")
    assert env.visible_devices == M.VisibleDevices() and env.hostname == "vm"
    assert isinstance(env.python, M.PythonFacts) and all(
        isinstance(d, M.DistRecord) for d in env.python.dists
    )
    assert meta["missing_fields"] == []
    assert snapshot.to_dict()["environment"] == report["snapshot"]["environment"]


def test_every_0_1_0_shape_reads_back_and_writes_the_same_json():
    report = report_with(ENVIRONMENT_0_1_0)
    assert validate_report(report) == []
    snapshot, meta = read_report(json.dumps(report), "wsl.json")
    env = snapshot.environment
    assert env.container == M.Container(why=ENVIRONMENT_0_1_0["container"]["why"])
    assert env.shm.total_bytes is None and env.memory.swap_total_bytes is None
    assert env.libraries.dirs[0].libs[0].real_version == "12.4.127"
    assert env.wsl.ld_so_conf[1].driver_libs == {"/usr/lib/nvidia": ["libcuda.so.1"]}
    assert env.python.conda.records[0] == M.CondaRecord(
        "pytorch", "2.5.1", "py3.11_cuda12.1_cudnn9.1.0_0", None
    )
    assert meta["missing_fields"] == []  # keys written only when stated are never "missing"
    assert snapshot.to_dict()["environment"] == ENVIRONMENT_0_1_0


def test_sections_a_report_lacks_are_unknown_and_the_rules_say_nothing():
    environment = {"hostname": "old-box"}  # written before the hazard probes existed
    snapshot, meta = read_report(json.dumps(report_with(environment)), "old.json")
    assert snapshot.environment == M.Environment(hostname="old-box")
    assert meta["missing_fields"] == []
    findings = [f for rule in RULES for f in rule.func(assess(snapshot, None))]
    assert findings == []


def test_cpu_without_cgroup_keys_as_0_1_0_wrote_it_off_linux():
    environment = {"cpu": {"cpu_count": 8, "affinity": None, "budget": 8}}
    snapshot, meta = read_report(json.dumps(report_with(environment)), "mac.json")
    assert snapshot.environment.cpu == M.Cpu(cpu_count=8, budget=8) and meta["missing_fields"] == []


# --- reading: a section of the wrong type is one clear line ----------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda env: env.update(container="docker"), "snapshot.environment.container"),
        (lambda env: env["cpu"].update(budget="4"), "snapshot.environment.cpu.budget"),
        (
            lambda env: env["libraries"]["dirs"][0].update(libs={}),
            "snapshot.environment.libraries.dirs[0].libs",
        ),
        (lambda env: env["python"]["dists"].append("torch"), "snapshot.environment.python.dists[1]"),
        (
            lambda env: env["python"]["conda"].update(records=None),
            "snapshot.environment.python.conda.records",
        ),
        (
            lambda env: env["wsl"]["ld_so_conf"][0].update(dirs="/usr/lib"),
            "snapshot.environment.wsl.ld_so_conf[0].dirs",
        ),
        (
            lambda env: env.update(visible_devices={"CUDA_VISIBLE_DEVICES": 0}),
            "snapshot.environment.visible_devices.CUDA_VISIBLE_DEVICES",
        ),
        (lambda env: env.update(hostname=["a"]), "snapshot.environment.hostname"),
    ],
)
def test_a_section_of_the_wrong_type_is_a_report_error_naming_the_field(change, field):
    environment = copy.deepcopy(ENVIRONMENT_0_1_0)
    change(environment)
    with pytest.raises(ReportError) as info:
        read_report(json.dumps(report_with(environment)), "bad.json")
    message = str(info.value)
    assert message.startswith("bad.json: malformed report: ") and field in message and "\n" not in message
    assert any(field in e for e in validate_report(report_with(environment)))


def test_from_dict_errors_name_the_environment_path():
    with pytest.raises(SnapshotFormatError, match=r"^snapshot\.environment\.python\.conda\.is_base: expected "
        r"bool"):
        Snapshot.from_dict({"environment": {"python": {"conda": {"is_base": "yes"}}}})


@pytest.mark.parametrize("environment", [[], "none", 3])
def test_an_environment_that_is_not_an_object(environment):
    with pytest.raises(ReportError, match=r"snapshot\.environment: expected an object"):
        read_report(json.dumps(report_with(environment)), "bad.json")


# --- the schema ---------------------------------------------------------------------------------


def test_the_schema_describes_every_sections_fields():
    schema = json.loads((ROOT / "schema" / "report.schema.json").read_text())
    defs = schema["$defs"]
    assert defs["Snapshot"]["properties"]["environment"] == {"$ref": "#/$defs/Environment"}
    assert len(SECTION_CLASSES) >= 18
    for cls in SECTION_CLASSES:
        described = defs[cls.__name__]
        assert list(described["properties"]) == [f.name for f in dataclasses.fields(cls)], cls.__name__
        assert described.get("description"), cls.__name__
    for key, cls in M.SECTIONS.items():
        assert defs["Environment"]["properties"][key] == {"anyOf": [{"$ref": f"#/$defs/{cls.__name__}"},
                                                                    {"type": "null"}]}
        assert defs[cls.__name__]["required"] == []  # sparse: a section may be only its reason
    # every field but those written only when stated (leftovers: what an interrupted pip left, if anything)
    assert defs["PythonFacts"]["required"] == [f.name for f in dataclasses.fields(M.PythonFacts)
                                               if f.metadata.get(M.WRITTEN) != M.WHEN_STATED]


# --- the rules' evidence stays plain JSON ---------------------------------------------------------


def test_findings_from_typed_sections_carry_plain_json_evidence():
    report = report_with(ENVIRONMENT_0_1_0)
    snapshot, _ = read_report(json.dumps(report), "wsl.json")
    snapshot.install.torch = torch_dist("2.6.0+cu126", cuda="12.6")
    snapshot.environment.cuda_home = M.CudaHome(
        variable="CUDA_HOME", path="/usr/local/cuda-11.8", version="11.8"
    )
    findings, checks = run_rules(assess(snapshot, None), RULES)
    ids = {f.id for f in findings}
    assert {"cuda-home-version-mismatch", "mixed-conda-pip-torch", "wsl-library-path-order",
            "wsl-linux-driver-installed", "library-path-shadows-cuda-libs"} <= ids, ids
    assert "internal-rule-error" not in ids
    json.dumps(build_report(snapshot, {}, findings, checks, {}, 1))  # no default=: a dataclass would raise
    mixed = next(f for f in findings if f.id == "mixed-conda-pip-torch")
    assert mixed.evidence["conda.records"] == ENVIRONMENT_0_1_0["python"]["conda"]["records"]
    assert mixed.evidence["dists"] == ENVIRONMENT_0_1_0["python"]["dists"]


# --- collect_env text: what it does not state stays unknown ---------------------------------------


def test_collect_env_states_no_hazard_section():
    snapshot = parse_collect_env((COLLECT_ENV / "torch-2.13.0-cpu-linux-real.txt").read_text())
    env = snapshot.environment
    assert [key for key in M.SECTIONS if getattr(env, key) is not None] == []
    assert env.python is None and env.hostname is None
    assert list(snapshot.to_dict()["environment"]) == ["collect_env"]
    assert [f for rule in RULES for f in rule.func(assess(snapshot, None))] == []


# --- conda ownership, decided once ----------------------------------------------------------------


def conda_snapshot(*names: str):
    snap = make_snapshot()
    snap.interpreter.prefix = "/opt/conda/envs/t"
    snap.environment.python = M.PythonFacts(conda=M.Conda(prefix="/opt/conda/envs/t", records=[
        M.CondaRecord(name=n, version="1", build="b", channel="pytorch") for n in names]))  # fmt: skip
    return snap


def test_one_function_answers_the_rules_and_the_plan():
    snap = conda_snapshot(
        "pytorch", "pytorch-cuda", "cudatoolkit", "cpuonly", "torchvision", "numpy", "pytorch-cpu"
    )
    owned = conda_torch(snap)
    assert [r.name for r in owned.torch] == ["pytorch", "pytorch-cpu"]
    assert [r.name for r in owned.cuda] == ["pytorch-cuda", "cudatoolkit"]
    assert [r.name for r in owned.companions] == ["torchvision"]
    # what pip must not install over: conda's torch, its variant pins and companions; not cudatoolkit
    assert [r.name for r in owned.remove_before_pip] == ["pytorch", "pytorch-cuda", "cpuonly", "torchvision"]
    assert owned.prefix == "/opt/conda/envs/t"
    assert installers.conda_torch_records(snap) == [as_plain(r) for r in owned.remove_before_pip]
    assert set(CONDA_TORCH) - set(CONDA_REMOVE_BEFORE_PIP) == {"pytorch-cpu"}


def test_no_python_or_no_conda_is_no_conda_torch():
    no_conda = Snapshot.from_dict({"environment": {"python": {"conda": None}}})
    for snap in (make_snapshot(), no_conda, conda_snapshot()):
        owned = conda_torch(snap)
        assert (owned.torch, owned.cuda, owned.companions, owned.remove_before_pip) == ((), (), (), ())
    assert installers.conda_torch_records(make_snapshot()) == []


def test_each_caller_keeps_its_own_answer():
    # conda's torchvision alone: the plan removes it before pip installs, the rule sees no conda torch
    from doctor.app.diagnose import diagnose
    from doctor.table.load import load_table

    snap = conda_snapshot("torchvision")
    snap.install.torch = torch_dist("2.7.1+cpu", cuda=None)
    snap.environment.python.dists = [M.DistRecord(name="torch", version="2.7.1+cpu", installer="pip")]
    diagnosis = diagnose(snap, load_table())
    assert "mixed-conda-pip-torch" not in {f.id for f in diagnosis.findings}
    assert diagnosis.plan.steps[0].kind == "remove"
    assert diagnosis.plan.steps[0].command == "conda remove -p /opt/conda/envs/t --force -y torchvision"
