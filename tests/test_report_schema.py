"""The report format: the checked-in JSON Schema matches the dataclasses, reports validate, and
read_report turns every bad input into one ReportError line."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import jsonschema
import pytest

from doctor import exitcodes
from doctor.errors import ReportError
from doctor.inputs.reports import (
    MAX_INPUT_BYTES,
    decode_input,
    detect_input_kind,
    read_input_file,
    read_report,
    validate_report,
)
from doctor.model.environment import (
    Container,
    Cpu,
    CudaHome,
    CudaLib,
    DistRecord,
    Environment,
    Libraries,
    LibraryDir,
    Memory,
    PythonFacts,
    Shm,
    UserSite,
    VisibleDevices,
    Wsl,
)
from doctor.model.findings import CheckResult, Finding, Fix
from doctor.model.report import REPORT_SCHEMA_VERSION, build_report
from doctor.model.snapshot import (
    Dist,
    Fact,
    Gpu,
    Host,
    Interpreter,
    Nvidia,
    RuntimeDevice,
    SmokeStep,
    Snapshot,
    TorchInstall,
    TorchRuntime,
)

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "schema" / "report.schema.json"
FIXTURES = Path(__file__).parent / "fixtures" / "collect_env"


def full_environment() -> Environment:
    """Every environment section, as the probes fill them in a Docker container on that box."""
    site = "/home/alice/proj/.venv/lib/python3.11/site-packages"
    return Environment(
        container=Container(kind="docker", evidence=["/.dockerenv "
            "exists"], device_nodes=["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"],
                            gpu_device_nodes=1, nvidia_visible_devices="all", nvidia_driver_capabilities=None,
                            cuda_image=False, cuda_image_evidence=[]),
        shm=Shm(path="/dev/shm", total_bytes=67108864, free_bytes=67108864),
        cpu=Cpu(cpu_count=32, affinity=32, cgroup="v2", quota_cpus=8.0, quota_source="/sys/fs/cgroup/cpu.max",
                quota_raw="800000 100000", budget=8),
        memory=Memory(source="/proc/meminfo", total_bytes=68719476736, available_bytes=60129542144,
                      swap_total_bytes=0),
        visible_devices=VisibleDevices(CUDA_VISIBLE_DEVICES="0"),
        libraries=Libraries(variable="LD_LIBRARY_PATH", value="/usr/local/cuda/lib64", dirs=[
            LibraryDir(path="/usr/local/cuda/lib64", exists=True, driver_libs=[], libs=[
                CudaLib(file="libcudart.so.12", family="cudart", version="12", real="libcudart.so.12.1.105",
                        real_version="12.1.105")])]),
        cuda_home=CudaHome(variable=None, path="/usr/local/cuda", version="12.1.105",
                           version_source="/usr/local/cuda/version.json"),
        wsl=Wsl(is_wsl=False, evidence=[]),
        python=PythonFacts(
            executable="/home/alice/proj/.venv/bin/python", sys_path=[site],
            user_site=UserSite(enabled=False, path="/home/alice/.local/lib/python3.11/site-packages"),
            dists=[DistRecord(name="torch", version="2.5.1+cu121", location=site, installer="pip",
                              path=f"{site}/torch-2.5.1+cu121.dist-info")],
            torch_origin=f"{site}/torch/__init__.py", conda=None, pyvenv_cfg={"home": "/usr/bin"},
        ),
        hostname="alice-box",
    )


def full_snapshot() -> Snapshot:
    """A snapshot with every section populated (values as a real RTX 4090 box would report)."""
    return Snapshot(
        tool_version="0.1.0",
        collected_at="2026-11-29T10:00:00Z",
        host=Host(
            os="linux",
            machine="x86_64",
            os_release="6.8.0-49-generic",
            libc="glibc 2.39",
            wsl=False,
            container="docker",
        ),
        nvidia=Nvidia(
            status="ok",
            detail="",
            driver_version=Fact("550.54.14", "nvml"),
            cuda_driver_version=Fact("12.4", "nvml"),
            gpus=[
                Gpu(
                    index=0,
                    name="NVIDIA GeForce RTX 4090",
                    compute_capability=Fact("8.9", "nvml"),
                    memory_total_mib=24564,
                    uuid="GPU-5d2ab6c4-8f1e-4b7c-9a3d-0123456789ab",
                    pci_bus_id="00000000:01:00.0",
                    mig_mode=False,
                    compute_mode="Default",
                ),
            ],
            pci_devices=["0000:01:00.0"],
            attempts=["nvml: ok"],
        ),
        interpreter=Interpreter(
            path="/home/alice/proj/.venv/bin/python",
            reason="VIRTUAL_ENV",
            version="3.11.7",
            implementation="cpython",
            bits=64,
            prefix="/home/alice/proj/.venv",
            env_kind="venv",
        ),
        install=TorchInstall(
            status="ok",
            torch=Dist(
                name="torch",
                version="2.5.1+cu121",
                build_version="2.5.1+cu121",
                cuda="12.1",
                git_version="a8d6afb511a69687bbb2b7e88a3cf67917e1697e",
                requires=["nvidia-cuda-runtime-cu12==12.1.105"],
                installer="pip",
                location="/home/alice/proj/.venv/lib/python3.11/site-packages",
                has_libtorch_cuda=True,
                has_libtorch_hip=False,
            ),
            torchvision=Dist(name="torchvision", version="0.20.1+cu121", cuda="12.1"),
            torchaudio=Dist(name="torchaudio", version="2.5.1+cu121"),
            cuda_from_requires="12.1",
        ),
        runtime=TorchRuntime(
            status="ok",
            seconds=1.8,
            torch_version="2.5.1+cu121",
            cuda_version="12.1",
            backend="cuda",
            cuda_available=True,
            device_count=1,
            devices=[
                RuntimeDevice(
                    index=0,
                    name="NVIDIA GeForce RTX 4090",
                    capability="8.9",
                    total_memory_mib=24564,
                    free_memory_mib=23000,
                )
            ],
            arch_list=["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
            cudnn_version=90100,
            nccl_version="2.21.5",
            warnings=[],
            steps=[SmokeStep(name="matmul", status="ok", seconds=0.2, device=0, data={"n": 1024})],
        ),
        environment=full_environment(),
        unknowns=[],
    )


def full_report(**changes) -> dict:
    findings = [
        Finding(
            id="shm-too-small",
            severity="warning",
            title="/dev/shm is 64 MB inside a container",
            detail="DataLoader workers share tensors through /dev/shm.",
            evidence={"shm_bytes": 67108864},
            fix=Fix(
                summary="Start the container with --shm-size=8g",
                commands=["docker run --shm-size=8g ..."],
                links=["https://docs.docker.com/"],
            ),
            rule="hazards",
        ),
        Finding(
            id="gpu-arch-unsupported",
            severity="error",
            title="RTX 4090 (sm_89) is not in this build",
            fix=Fix(
                summary="Install a build with sm_89",
                commands=[
                    "python -m pip install torch==2.5.1+cu124 --index-url "
                    "https://download.pytorch.org/whl/cu124"
                ],
            ),
            rule="core",
        ),
    ]
    checks = [
        CheckResult("core", "torch fits the GPU", "failed"),
        CheckResult("hazards", "no hazards", "failed"),
        CheckResult("runtime", "torch imports", "passed"),
    ]
    plan = {
        "status": "install",
        "steps": [
            {
                "kind": "install",
                "description": "Reinstall torch",
                "command": findings[1].fix.commands[0],
                "argv": None,
            }
        ],
        "target": {"variant": "cu124"},
        "notes": [],
    }
    report = build_report(
        full_snapshot(),
        {"version": "2026.11.1", "verified_on": "2026-11-29", "path": None},
        findings,
        checks,
        plan,
        exitcodes.FINDINGS,
    )
    report.update(changes)
    return report


# --- the schema file ---------------------------------------------------------------------------


def _generator():
    spec = importlib.util.spec_from_file_location("schema_generate", ROOT / "schema" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_checked_in_schema_equals_generated():
    assert SCHEMA_PATH.read_text(encoding="utf-8") == _generator().render_schema(), (
        "schema/report.schema.json is stale: run python schema/generate.py"
    )


def test_schema_is_valid_draft_2020_12():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["report_schema_version"]["const"] == REPORT_SCHEMA_VERSION
    # every Snapshot field is described and required
    assert set(schema["$defs"]["Snapshot"]["required"]) == set(Snapshot().to_dict())


def test_full_report_validates_with_jsonschema_and_light_check():
    report = json.loads(json.dumps(full_report()))  # as it is written to disk
    jsonschema.validate(report, json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    assert validate_report(report) == []


@pytest.mark.parametrize(
    "key", ["report_schema_version", "tool", "snapshot", "findings", "summary", "checks"]
)
def test_removing_a_required_key_fails(key):
    report = json.loads(json.dumps(full_report()))
    del report[key]
    errors = validate_report(report)
    assert any(key in e for e in errors), errors


@pytest.mark.parametrize(
    "path, value, needle",
    [
        (("snapshot", "nvidia", "gpus", 0, "memory_total_mib"), "24GB", "memory_total_mib"),
        (("findings", 0, "severity"), "fatal", "severity"),
        (("summary", "errors"), "1", "errors"),
        (("snapshot", "host"), [], "host"),
    ],
)
def test_wrong_types_are_reported(path, value, needle):
    report = json.loads(json.dumps(full_report()))
    target = report
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    errors = validate_report(report)
    assert errors and any(needle in e for e in errors), errors


def test_removing_a_snapshot_field_fails_the_schema_but_is_still_readable():
    report = json.loads(json.dumps(full_report()))
    del report["snapshot"]["runtime"]["arch_list"]
    assert any("arch_list" in e for e in validate_report(report))
    snapshot, meta = read_report(json.dumps(report), "old.json")
    assert snapshot.runtime.arch_list == []
    assert meta["missing_fields"] == ["snapshot.runtime.arch_list"]


# --- read_report -------------------------------------------------------------------------------


def test_round_trip():
    report = full_report()
    snapshot, meta = read_report(json.dumps(report), "r.json")
    original = full_snapshot()
    original.origin = "report"
    assert snapshot == original
    assert meta["kind"] == "report" and meta["original_origin"] == "probe"
    assert meta["tool_version"] == report["tool"]["version"] and meta["missing_fields"] == []
    assert meta["table"]["version"] == "2026.11.1"


def test_older_report_missing_newer_fields_is_read_with_defaults_and_unknowns():
    report = json.loads(json.dumps(full_report()))
    report["tool"]["version"] = "0.0.9"
    del report["snapshot"]["environment"]
    del report["snapshot"]["nvidia"]["gpus"][0]["mig_mode"]
    del report["snapshot"]["runtime"]["devices"][0]["free_memory_mib"]
    snapshot, meta = read_report(json.dumps(report), "old.json")
    assert snapshot.environment == Environment()
    assert snapshot.nvidia.gpus[0].mig_mode is None
    assert set(meta["missing_fields"]) == {
        "snapshot.environment",
        "snapshot.nvidia.gpus[].mig_mode",
        "snapshot.runtime.devices[].free_memory_mib",
    }
    assert any(
        u.startswith("snapshot.environment: not in this report (written by torchdoctor 0.0.9)")
        for u in snapshot.unknowns
    )


def _error(text, source="in.json") -> str:
    with pytest.raises(ReportError) as info:
        read_report(text, source)
    message = str(info.value)
    assert "\n" not in message and message.startswith(source)
    assert info.value.exit_code == exitcodes.USAGE
    return message


def test_truncated_json():
    text = json.dumps(full_report(), indent=2)
    assert "truncated JSON" in _error(text[: len(text) // 2])


def test_invalid_json_that_is_not_truncated():
    assert "invalid JSON" in _error('{"report_schema_version": 1,, }')


def test_json_that_is_not_an_object():
    assert "JSON a list, not a torchdoctor report" in _error("[1, 2, 3]")
    assert "not a torchdoctor report" in _error('"hello"')


def test_json_object_that_is_not_a_report():
    assert "without 'report_schema_version'" in _error('{"name": "something else"}')


def test_other_major_version_names_both_versions():
    report = full_report(report_schema_version=2)
    message = _error(json.dumps(report))
    assert "report format 2" in message and f"reads format {REPORT_SCHEMA_VERSION}" in message
    assert "upgrade torchdoctor" in message


def test_malformed_snapshot_names_the_field():
    report = json.loads(json.dumps(full_report()))
    report["snapshot"]["nvidia"]["gpus"] = "none"
    assert "snapshot.nvidia.gpus" in _error(json.dumps(report))


def test_random_text_file():
    assert "neither a torchdoctor JSON report nor" in _error(
        "Dear diary,\ntoday I installed CUDA.\n", "notes.txt"
    )


def test_empty_file():
    assert "empty file" in _error("   \n", "empty.txt")


def test_binary_garbage(tmp_path):
    path = tmp_path / "garbage.bin"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    with pytest.raises(ReportError, match="binary file"):
        read_input_file(str(path))
    with pytest.raises(ReportError, match="not UTF-8"):
        decode_input(b"\xff\xfe\xfa not utf8 \xc3\x28", "x.txt")
    assert "binary file" in _error("abc\x00def")


def test_utf16_from_powershell_is_decoded(tmp_path):
    text = (FIXTURES / "composed-2.8-windows-cpu.txt").read_text(encoding="utf-8")
    path = tmp_path / "env.txt"
    path.write_bytes(text.encode("utf-16"))  # PowerShell 5 `>` redirection writes UTF-16 LE with BOM
    snapshot, meta = read_report(read_input_file(str(path)), str(path))
    assert meta["kind"] == "collect_env" and snapshot.host.os == "windows"


def test_huge_file_refused_before_parsing(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as handle:
        handle.truncate(MAX_INPUT_BYTES + 1)  # sparse: no 20 MB written
    with pytest.raises(ReportError, match="too large"):
        read_input_file(str(path))
    with pytest.raises(ReportError, match="too large"):
        read_report("{" + " " * MAX_INPUT_BYTES + "}", "big.json")


def test_missing_file(tmp_path):
    with pytest.raises(ReportError, match="cannot read"):
        read_input_file(str(tmp_path / "nope.json"))


def test_detect_input_kind():
    assert detect_input_kind(json.dumps(full_report())) == "report"
    assert detect_input_kind("\ufeff  {") == "report"
    assert detect_input_kind((FIXTURES / "torch-2.13.0-cpu-linux-real.txt").read_text()) == "collect_env"
    assert detect_input_kind("OS: Ubuntu\nGCC version: 12\n") == "unknown"
    assert detect_input_kind("") == "unknown"


def test_read_report_dispatches_collect_env():
    snapshot, meta = read_report((FIXTURES / "torch-2.13.0-cpu-linux-real.txt").read_text(), "env.txt")
    assert meta["kind"] == "collect_env" and snapshot.origin == "collect_env"
    assert snapshot.install.torch.version == "2.13.0+cpu"


def test_validate_report_without_jsonschema_uses_the_light_check(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_jsonschema(name, *args, **kwargs):
        if name == "jsonschema":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_jsonschema)
    report = json.loads(json.dumps(full_report()))
    assert validate_report(report) == []
    broken = copy.deepcopy(report)
    del broken["summary"]
    broken["findings"][0]["severity"] = "fatal"
    errors = validate_report(broken)
    assert "report: missing key 'summary'" in errors
    assert any("findings[0].severity" in e for e in errors)
    assert validate_report([]) == ["report: expected an object, got a list"]


def test_markdown_paste_from_an_issue_reads_back():
    from doctor.render.markdown import render_markdown

    issue = (
        "I get this error, here is torchdoctor's output:\n\n" + render_markdown(full_report()) + "\nthanks!\n"
    )
    assert detect_input_kind(issue) == "report"
    snapshot, meta = read_report(issue.replace("\n", "\r\n"), "issue.md")
    assert meta["kind"] == "report" and snapshot.nvidia.gpus[0].name == "NVIDIA GeForce RTX 4090"
