"""The NVIDIA probe: parsers over recorded outputs, the combiner over fake NVML / runner / root.

Fakes stand only at the boundary: a pynvml-like object (raising pynvml's real NVMLError
classes), a runner keyed by exact argv, a fake root directory for /sys and /proc, and a fake
``nvidia-smi`` executable run through the real runner.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pynvml
import pytest
from hypothesis import given
from hypothesis import strategies as st

from doctor.model.snapshot import (
    NVIDIA_CONTAINER_LOST,
    NVIDIA_MISMATCH,
    NVIDIA_NO_DRIVER,
    NVIDIA_NO_GPU,
    NVIDIA_NO_PERMISSION,
    NVIDIA_OK,
    NVIDIA_UNKNOWN,
)
from doctor.model.versions import cuda_from_int, parse_cc
from doctor.probes.nvidia import probe_nvidia
from doctor.probes.nvidia.kernel import read_pci_nvidia_devices
from doctor.probes.nvidia.parsers import (
    classify_nvml_error,
    classify_smi_failure,
    normalise_bus_id,
    parse_compute_caps,
    parse_proc_version,
    parse_smi_banner,
    parse_smi_query,
    parse_sys_module_version,
)
from doctor.probes.nvidia.smi import COMPUTE_CAP_ARGS, QUERY_ARGS, find_nvidia_smi
from doctor.runner import RunResult, run

FIXTURES = Path(__file__).parent / "fixtures" / "nvidia"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def load_fake_smi():
    spec = importlib.util.spec_from_file_location("fake_smi", FIXTURES / "fake_smi.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- parsers over every recorded output ----------------------------------------------------------

QUERY_ROWS = [
    {
        "index": 0,
        "name": "NVIDIA GeForce RTX 5090",
        "uuid": "GPU-5f2c1d8e-0a3b-4c6d-9e1f-2a3b4c5d6e7f",
        "memory.total": 32607,
        "pci.bus_id": "00000000:01:00.0",
        "driver_version": "570.124.04",
    },
    {
        "index": 1,
        "name": "NVIDIA GB10",
        "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "memory.total": None,
        "pci.bus_id": "0000000F:01:00.0",
        "driver_version": "570.124.04",
    },
]

# file -> (parser, expected). A new recording needs a line here (test_every_fixture_has_an_expectation).
EXPECTED = {
    "smi-banner-r525-narrow.txt": (parse_smi_banner, ("525.85.12", "12.0")),
    "smi-banner-r535-wide.txt": (parse_smi_banner, ("535.104.05", "12.2")),
    "smi-banner-r610-kmd.txt": (parse_smi_banner, ("610.43.02", "13.3")),
    "smi-q-r610-deprecated.txt": (parse_smi_banner, ("610.57.04", "13.3")),
    "smi-fail-no-driver.txt": (classify_smi_failure, NVIDIA_NO_DRIVER),
    "smi-fail-mismatch.txt": (classify_smi_failure, NVIDIA_MISMATCH),
    "smi-fail-unknown-error.txt": (classify_smi_failure, NVIDIA_CONTAINER_LOST),
    "smi-fail-no-permission.txt": (classify_smi_failure, NVIDIA_NO_PERMISSION),
    "smi-fail-wsl-no-libnvidia-ml.txt": (classify_smi_failure, NVIDIA_NO_DRIVER),
    "smi-query-compute-cap-rejected.txt": (classify_smi_failure, NVIDIA_UNKNOWN),
    "proc-version-proprietary.txt": (parse_proc_version, "375.74"),
    "proc-version-open.txt": (parse_proc_version, "550.144.03"),
    "proc-version-jetson.txt": (parse_proc_version, "35.3.1"),
    "sys-module-version.txt": (parse_sys_module_version, "550.144.03"),
    "smi-query-gpu.csv": (parse_smi_query, QUERY_ROWS),
    "smi-query-compute-cap.csv": (parse_compute_caps, ["12.0", "12.1"]),
}


def test_every_fixture_has_an_expectation_and_a_source_note():
    readme = fixture("README.md")
    recorded = {p.name for p in FIXTURES.iterdir() if p.suffix in (".txt", ".csv")}
    assert recorded == set(EXPECTED)
    for name in recorded:
        assert f"`{name}`" in readme, f"{name} has no source note in README.md"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parsers_on_recorded_outputs(name):
    parser, expected = EXPECTED[name]
    text = fixture(name)
    if parser is classify_smi_failure:
        status, detail = parser(text)
        assert status == expected
        if status != NVIDIA_UNKNOWN:
            assert detail == text.strip()  # verbatim, both lines for the mismatch
        assert parse_smi_banner(text) is None
    else:
        assert parser(text) == expected


def test_mismatch_detail_keeps_the_nvml_library_line():
    _, detail = classify_smi_failure(fixture("smi-fail-mismatch.txt"))
    assert detail.splitlines() == [
        "Failed to initialize NVML: Driver/library version mismatch",
        "NVML library version: 570.124",
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (12040, "12.4"),
        (12080, "12.8"),
        (12020, "12.2"),
        (13000, "13.0"),
        (13030, "13.3"),
        (11020, "11.2"),
        (9020, "9.2"),
    ],
)
def test_cuda_from_int(value, expected):
    assert cuda_from_int(value) == expected


def test_banner_without_cuda_and_garbage():
    assert parse_smi_banner("| NVIDIA-SMI 470.82.01  Driver Version: 470.82.01  CUDA Version: N/A |") == (
        "470.82.01",
        None,
    )
    assert parse_smi_banner("\x7fELF garbage") is None
    assert parse_smi_banner("") is None


def test_query_rows_tolerate_units_headers_and_garbage():
    text = ("index, name, memory.total [MiB]\n0, NVIDIA H100 80GB HBM3, 81559 MiB\nsegfault\n1, X, [Not "
        "Supported]\n")
    rows = parse_smi_query(text, ("index", "name", "memory.total"))
    assert rows == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory.total": 81559},
        {"index": 1, "name": "X", "memory.total": None},
    ]
    assert parse_smi_query("garbage\n\x00\x01") == []


def test_compute_caps_reject_non_numbers():
    assert parse_compute_caps("9.0\n[N/A]\n") == ["9.0", None]
    assert parse_compute_caps(fixture("smi-query-compute-cap-rejected.txt")) is None
    assert parse_compute_caps("") is None


def test_proc_version_and_sys_module_garbage():
    assert parse_proc_version("GCC version:  gcc version 12\n") is None
    assert parse_proc_version(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module 535.54.03 Tue Jun 6 22:20:39 UTC\n"
    ) == ("535.54.03")
    assert parse_sys_module_version("not a version\n") is None


@pytest.mark.parametrize(
    ("bus", "expected"),
    [("00000000:01:00.0", "0000:01:00.0"), ("0000:C1:00.0", "0000:c1:00.0"), ("01:00.0", "0000:01:00.0")],
)
def test_normalise_bus_id(bus, expected):
    assert normalise_bus_id(bus) == expected


@given(st.text())
def test_parsers_never_raise(text):
    parse_smi_banner(text)
    parse_smi_query(text)
    parse_compute_caps(text)
    parse_proc_version(text)
    parse_sys_module_version(text)
    assert classify_smi_failure(text)[0]


def test_classify_nvml_error_by_value_and_by_class_name():
    assert classify_nvml_error(pynvml.NVMLError(18)) == (18, "RM has detected an NVML/RM version mismatch.")
    NVMLError_DriverNotLoaded = type(
        "NVMLError_DriverNotLoaded", (Exception,), {}
    )  # a binding without .value
    assert classify_nvml_error(NVMLError_DriverNotLoaded("Driver Not Loaded")) == (9, "Driver Not Loaded")
    code, message = classify_nvml_error(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"))
    assert code is None and message.startswith("UnicodeDecodeError")


# --- fakes ---------------------------------------------------------------------------------------

RTX_5090 = {
    "name": "NVIDIA GeForce RTX 5090",
    "cc": (12, 0),
    "mem_mib": 32607,
    "uuid": "GPU-5f2c1d8e-0a3b-4c6d-9e1f-2a3b4c5d6e7f",
    "bus": "00000000:01:00.0",
    "mig": None,
    "compute_mode": 0,
}
H100 = {
    "name": "NVIDIA H100 80GB HBM3",
    "cc": (9, 0),
    "mem_mib": 81559,
    "uuid": "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
    "bus": "00000000:C1:00.0",
    "mig": [1, 1],
    "compute_mode": 3,
}


class FakeNvml:
    """The pynvml calls the probe makes, answering from a list of GPU dicts."""

    def __init__(
        self, gpus=(), driver="570.124.04", cuda=12080, init_error=None, fail=None, as_bytes=False, gate=None
    ):
        self.gpus, self.driver, self.cuda = list(gpus), driver, cuda
        self.init_error, self.fail, self.as_bytes, self.gate = init_error, dict(fail or {}), as_bytes, gate
        self.inits = self.shutdowns = 0

    def _answer(self, name, value):
        if name in self.fail:
            raise self.fail[name]
        if self.as_bytes and isinstance(value, str):
            return value.encode()
        return value

    def nvmlInit(self):
        self.inits += 1
        if self.gate is not None:
            self.gate.wait(30)  # a hung driver
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self):
        return self._answer("nvmlSystemGetDriverVersion", self.driver)

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self._answer("nvmlSystemGetCudaDriverVersion_v2", self.cuda)

    def nvmlSystemGetCudaDriverVersion(self):
        return self._answer("nvmlSystemGetCudaDriverVersion", self.cuda)

    def nvmlDeviceGetCount(self):
        return self._answer("nvmlDeviceGetCount", len(self.gpus))

    def nvmlDeviceGetHandleByIndex(self, index):
        return self._answer("nvmlDeviceGetHandleByIndex", index)

    def nvmlDeviceGetName(self, h):
        return self._answer("nvmlDeviceGetName", self.gpus[h]["name"])

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return self._answer("nvmlDeviceGetCudaComputeCapability", self.gpus[h]["cc"])

    def nvmlDeviceGetMemoryInfo(self, h):
        return self._answer(
            "nvmlDeviceGetMemoryInfo", SimpleNamespace(total=self.gpus[h]["mem_mib"] * 1024 * 1024)
        )

    def nvmlDeviceGetUUID(self, h):
        return self._answer("nvmlDeviceGetUUID", self.gpus[h]["uuid"])

    def nvmlDeviceGetPciInfo(self, h):
        bus = self.gpus[h]["bus"]
        return self._answer(
            "nvmlDeviceGetPciInfo", SimpleNamespace(busId=bus.encode() if self.as_bytes else bus)
        )

    def nvmlDeviceGetMigMode(self, h):
        if self.gpus[h]["mig"] is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self._answer("nvmlDeviceGetMigMode", self.gpus[h]["mig"])

    def nvmlDeviceGetComputeMode(self, h):
        return self._answer("nvmlDeviceGetComputeMode", self.gpus[h]["compute_mode"])


def nvml_error(code):
    return pynvml.NVMLError(code)  # the real binding's subclass, value and str()


class FakeRunner:
    """Answers exact argv tuples; anything else fails the test."""

    def __init__(self, answers=None):
        self.answers = {tuple(k): v for k, v in (answers or {}).items()}
        self.calls = []

    def __call__(self, argv, timeout=10.0, env=None, stdin=None, cwd=None):
        key = tuple(str(a) for a in argv)
        self.calls.append(key)
        assert key in self.answers, f"unexpected command {key}"
        return self.answers[key]


def ok(argv, stdout):
    return RunResult(list(argv), 0, stdout)


def failed(argv, stdout, rc):
    return RunResult(list(argv), rc, stdout)


def make_root(tmp_path, pci=(), files=None):
    """A fake / with PCI devices [(address, vendor, class)] and extra files {path: text}."""
    root = tmp_path / "root"
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    for address, vendor, klass in pci:
        device = root / "sys/bus/pci/devices" / address
        device.mkdir()
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text(klass + "\n")
    for path, text in (files or {}).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return str(root)


NVIDIA_VGA = ("0000:01:00.0", "0x10de", "0x030000")


@pytest.fixture
def smi_bin(tmp_path):
    """A PATH folder holding a placeholder nvidia-smi; the fake runner answers for it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "nvidia-smi"
    exe.write_text("#!/bin/sh\nexit 99\n")
    exe.chmod(0o755)
    return str(exe), {"PATH": str(bin_dir)}


def smi_answers(exe, banner=None, query=None, caps=None):
    answers = {}
    if banner is not None:
        answers[(exe,)] = banner if isinstance(banner, RunResult) else ok([exe], banner)
    if query is not None:
        answers[(exe, *QUERY_ARGS)] = query if isinstance(query, RunResult) else ok([exe, *QUERY_ARGS], query)
    if caps is not None:
        answers[(exe, *COMPUTE_CAP_ARGS)] = (
            caps if isinstance(caps, RunResult) else ok([exe, *COMPUTE_CAP_ARGS], caps)
        )
    return answers


# --- NVML path -----------------------------------------------------------------------------------


def test_nvml_healthy_rtx_5090(tmp_path):
    fake = FakeNvml([RTX_5090])
    result = probe_nvidia(runner=FakeRunner(), root=make_root(tmp_path, [NVIDIA_VGA]), nvml=fake, env={})
    assert result.status == NVIDIA_OK and result.detail == ""
    assert (result.driver_version.value, result.driver_version.source) == ("570.124.04", "nvml")
    assert (result.cuda_driver_version.value, result.cuda_driver_version.source) == ("12.8", "nvml")
    [gpu] = result.gpus
    assert gpu.name == "NVIDIA GeForce RTX 5090"
    assert gpu.compute_capability.value == "12.0" and parse_cc(gpu.compute_capability.value) == (12, 0)
    assert gpu.compute_capability.source == "nvml"
    assert (gpu.memory_total_mib, gpu.uuid, gpu.pci_bus_id) == (32607, RTX_5090["uuid"], "0000:01:00.0")
    assert (gpu.mig_mode, gpu.compute_mode) == (None, "Default")
    assert result.pci_devices == ["0000:01:00.0"]
    assert result.attempts == ["nvml: ok (1 GPUs)"]
    assert (fake.inits, fake.shutdowns) == (1, 1)


def test_nvml_two_gpus_with_bytes_strings(tmp_path):
    fake = FakeNvml([H100, RTX_5090], driver="570.124.04", cuda=12080, as_bytes=True)
    result = probe_nvidia(runner=FakeRunner(), root=make_root(tmp_path), nvml=fake, env={})
    assert result.status == NVIDIA_OK
    assert result.driver_version.value == "570.124.04"
    assert [g.name for g in result.gpus] == ["NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 5090"]
    assert [g.compute_capability.value for g in result.gpus] == ["9.0", "12.0"]
    assert [g.index for g in result.gpus] == [0, 1]
    assert result.gpus[0].uuid == H100["uuid"] and result.gpus[0].pci_bus_id == "0000:c1:00.0"
    assert (result.gpus[0].mig_mode, result.gpus[0].compute_mode) == (True, "Exclusive_Process")


def test_nvml_cuda_falls_back_to_v1_and_fields_may_be_unsupported(tmp_path):
    not_supported = nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
    fake = FakeNvml(
        [RTX_5090],
        cuda=12040,
        fail={
            "nvmlSystemGetCudaDriverVersion_v2": nvml_error(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND),
            "nvmlDeviceGetMemoryInfo": not_supported,  # unified-memory GB10
            "nvmlDeviceGetCudaComputeCapability": not_supported,
        },
    )
    result = probe_nvidia(runner=FakeRunner(), root=make_root(tmp_path), nvml=fake, env={})
    assert result.status == NVIDIA_OK
    assert result.cuda_driver_version.value == "12.4"
    [gpu] = result.gpus
    assert gpu.memory_total_mib is None
    assert not gpu.compute_capability.known
    assert "Not Supported" in gpu.compute_capability.why and gpu.compute_capability.source == "nvml"


def test_nvml_cuda_unknown_keeps_why(tmp_path):
    err = nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    fake = FakeNvml(
        [RTX_5090], fail={"nvmlSystemGetCudaDriverVersion_v2": err, "nvmlSystemGetCudaDriverVersion": err}
    )
    result = probe_nvidia(runner=FakeRunner(), root=make_root(tmp_path), nvml=fake, env={})
    assert result.driver_version.value == "570.124.04"
    assert not result.cuda_driver_version.known and "Function Not Found" in result.cuda_driver_version.why


def test_nvml_undecodable_name_is_not_fatal(tmp_path):
    fake = FakeNvml(
        [RTX_5090],
        fail={"nvmlDeviceGetName": UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")},
    )
    result = probe_nvidia(runner=FakeRunner(), root=make_root(tmp_path), nvml=fake, env={})
    assert result.status == NVIDIA_OK
    assert result.gpus[0].name == "" and result.gpus[0].compute_capability.value == "12.0"
    assert any("UnicodeDecodeError" in line for line in result.attempts)


def test_nvml_shutdown_even_when_a_later_call_fails(tmp_path):
    fake = FakeNvml([RTX_5090], fail={"nvmlDeviceGetCount": nvml_error(pynvml.NVML_ERROR_UNKNOWN)})
    result = probe_nvidia(runner=FakeRunner(), root=make_root(tmp_path, [NVIDIA_VGA]), nvml=fake, env={})
    assert fake.shutdowns == 1
    assert result.status == NVIDIA_CONTAINER_LOST


@pytest.mark.parametrize(
    ("code", "pci", "expected"),
    [
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, [NVIDIA_VGA], NVIDIA_MISMATCH),
        (pynvml.NVML_ERROR_UNKNOWN, [NVIDIA_VGA], NVIDIA_CONTAINER_LOST),
        (pynvml.NVML_ERROR_NO_PERMISSION, [NVIDIA_VGA], NVIDIA_NO_PERMISSION),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, [NVIDIA_VGA], NVIDIA_NO_DRIVER),
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, [NVIDIA_VGA], NVIDIA_NO_DRIVER),
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, [], NVIDIA_NO_GPU),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, [("0000:00:02.0", "0x8086", "0x030000")], NVIDIA_NO_GPU),
    ],
)
def test_nvml_init_errors_without_nvidia_smi(tmp_path, code, pci, expected):
    fake = FakeNvml(init_error=nvml_error(code))
    runner = FakeRunner()
    result = probe_nvidia(runner=runner, root=make_root(tmp_path, pci), nvml=fake, env={"PATH": ""})
    assert result.status == expected
    assert runner.calls == []  # nvidia-smi is not on PATH
    assert result.attempts[:2] == [f"nvml: {pynvml.NVMLError(code)}", "nvidia-smi: not found"]
    assert not result.driver_version.known and "nvidia-smi: not found" in result.driver_version.why
    if expected in (NVIDIA_MISMATCH, NVIDIA_CONTAINER_LOST, NVIDIA_NO_PERMISSION):
        assert result.detail == str(pynvml.NVMLError(code))


def test_nvml_hang_is_bounded(tmp_path):
    gate = threading.Event()
    try:
        start = time.perf_counter()
        result = probe_nvidia(
            runner=FakeRunner(),
            root=make_root(tmp_path, [NVIDIA_VGA]),
            nvml=FakeNvml([RTX_5090], gate=gate),
            env={"PATH": ""},
            timeout=0.3,
        )
        elapsed = time.perf_counter() - start
    finally:
        gate.set()
    assert elapsed < 2.0
    assert result.status == NVIDIA_UNKNOWN
    assert result.attempts[0] == "nvml: timed out after 0.3s (a hung driver?)"
    assert "timed out" in result.detail


def test_missing_pynvml_is_a_fact(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    result = probe_nvidia(runner=FakeRunner(), root=make_root(tmp_path), env={"PATH": ""})
    assert result.attempts[0].startswith("nvml: not importable (ModuleNotFoundError")
    assert result.status == NVIDIA_NO_GPU


def test_module_import_does_not_import_pynvml():
    code = ("import sys, doctor.probes.nvidia, doctor.probes.nvidia.nvml, doctor.probes.host; print('pynvml' "
        "in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"



def test_parsers_touch_nothing_outside():
    """The parser layer is pure: no runner, no files, no NVML binding; only text in, values out."""
    import ast

    import doctor.probes.nvidia.parsers as parsers

    tree = ast.parse(Path(parsers.__file__).read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "csv", "re", "typing", "doctor.model.snapshot"}, imported

# --- nvidia-smi fallback (fake runner) -----------------------------------------------------------

NO_NVML = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND


def test_smi_fallback_wide_banner_and_queries(tmp_path, smi_bin):
    exe, env = smi_bin
    runner = FakeRunner(
        smi_answers(
            exe,
            fixture("smi-banner-r535-wide.txt"),
            fixture("smi-query-gpu.csv"),
            fixture("smi-query-compute-cap.csv"),
        )
    )
    result = probe_nvidia(
        runner=runner, root=make_root(tmp_path), nvml=FakeNvml(init_error=nvml_error(NO_NVML)), env=env
    )
    assert result.status == NVIDIA_OK
    assert (result.driver_version.value, result.driver_version.source) == ("535.104.05", "nvidia-smi")
    assert (result.cuda_driver_version.value, result.cuda_driver_version.source) == ("12.2", "nvidia-smi")
    assert [(g.index, g.name, g.compute_capability.value) for g in result.gpus] == [
        (0, "NVIDIA GeForce RTX 5090", "12.0"),
        (1, "NVIDIA GB10", "12.1"),
    ]
    assert result.gpus[1].memory_total_mib is None and result.gpus[1].pci_bus_id == "000f:01:00.0"
    assert result.gpus[0].compute_capability.source == "nvidia-smi"
    assert result.attempts == ["nvml: NVML Shared Library Not Found", "nvidia-smi: ok"]
    assert runner.calls == [(exe,), (exe, *QUERY_ARGS), (exe, *COMPUTE_CAP_ARGS)]


def test_smi_fallback_r610_kmd_banner(tmp_path, smi_bin):
    exe, env = smi_bin
    runner = FakeRunner(
        smi_answers(exe, fixture("smi-banner-r610-kmd.txt"), fixture("smi-query-gpu.csv"), "12.0\n12.1\n")
    )
    result = probe_nvidia(
        runner=runner, root=make_root(tmp_path), nvml=FakeNvml(init_error=nvml_error(NO_NVML)), env=env
    )
    assert (result.driver_version.value, result.cuda_driver_version.value) == ("610.43.02", "13.3")


def test_smi_compute_cap_rejected_by_old_driver(tmp_path, smi_bin):
    exe, env = smi_bin
    rejected = failed([exe, *COMPUTE_CAP_ARGS], fixture("smi-query-compute-cap-rejected.txt"), 2)
    runner = FakeRunner(
        smi_answers(exe, fixture("smi-banner-r525-narrow.txt"), fixture("smi-query-gpu.csv"), rejected)
    )
    result = probe_nvidia(
        runner=runner, root=make_root(tmp_path), nvml=FakeNvml(init_error=nvml_error(NO_NVML)), env=env
    )
    assert result.status == NVIDIA_OK and len(result.gpus) == 2
    for gpu in result.gpus:
        assert not gpu.compute_capability.known
        assert 'Field "compute_cap" is not a valid field to query.' in gpu.compute_capability.why
    assert any(line.startswith("nvidia-smi --query-gpu=compute_cap:") for line in result.attempts)


@pytest.mark.parametrize(
    ("name", "rc", "nvml_code", "expected"),
    [
        ("smi-fail-no-driver.txt", 9, pynvml.NVML_ERROR_DRIVER_NOT_LOADED, NVIDIA_NO_DRIVER),
        ("smi-fail-mismatch.txt", 18, pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, NVIDIA_MISMATCH),
        ("smi-fail-mismatch.txt", 18, NO_NVML, NVIDIA_MISMATCH),  # binding broken, smi still tells
        ("smi-fail-unknown-error.txt", 255, pynvml.NVML_ERROR_UNKNOWN, NVIDIA_CONTAINER_LOST),
        ("smi-fail-no-permission.txt", 4, pynvml.NVML_ERROR_NO_PERMISSION, NVIDIA_NO_PERMISSION),
        ("smi-fail-wsl-no-libnvidia-ml.txt", 12, NO_NVML, NVIDIA_NO_DRIVER),
    ],
)
def test_smi_failures(tmp_path, smi_bin, name, rc, nvml_code, expected):
    exe, env = smi_bin
    text = fixture(name)
    runner = FakeRunner(smi_answers(exe, failed([exe], text, rc)))
    root = make_root(tmp_path, [NVIDIA_VGA])
    result = probe_nvidia(runner=runner, root=root, nvml=FakeNvml(init_error=nvml_error(nvml_code)), env=env)
    assert result.status == expected
    assert result.detail == text.strip()  # the message users would search for, verbatim
    assert runner.calls == [(exe,)]  # no queries after a failed banner


def test_smi_timeout_is_unknown(tmp_path, smi_bin):
    exe, env = smi_bin
    hung = RunResult([exe], None, timed_out=True, seconds=5.0)
    runner = FakeRunner(smi_answers(exe, hung))
    result = probe_nvidia(
        runner=runner,
        root=make_root(tmp_path, [NVIDIA_VGA]),
        nvml=FakeNvml(init_error=nvml_error(NO_NVML)),
        env=env,
    )
    assert result.status == NVIDIA_UNKNOWN
    assert result.detail == "nvidia-smi did not answer within 5s (a hung driver?)"
    assert "nvidia-smi: timed out after 5s" in result.attempts


def test_smi_garbage_is_unknown(tmp_path, smi_bin):
    exe, env = smi_bin
    runner = FakeRunner(smi_answers(exe, "\ufffd\ufffdELF\x00 ??? \n"))
    result = probe_nvidia(
        runner=runner, root=make_root(tmp_path), nvml=FakeNvml(init_error=nvml_error(NO_NVML)), env=env
    )
    assert result.status == NVIDIA_UNKNOWN
    assert result.detail.startswith("unrecognised nvidia-smi output:")


def test_smi_no_devices_with_empty_pci_bus_is_no_gpu(tmp_path, smi_bin):
    exe, env = smi_bin
    runner = FakeRunner(smi_answers(exe, failed([exe], "No devices were found\n", 6)))
    result = probe_nvidia(runner=runner, root=make_root(tmp_path), nvml=FakeNvml([]), env=env)
    assert result.status == NVIDIA_NO_GPU
    assert result.detail == "No devices were found"
    assert result.driver_version.value == "570.124.04"  # NVML initialised: the driver is there


# --- kernel files, PCI, WSL, Windows -------------------------------------------------------------


def test_pci_scan_keeps_only_nvidia_display_devices(tmp_path):
    root = make_root(
        tmp_path,
        [
            NVIDIA_VGA,
            ("0000:01:00.1", "0x10de", "0x040300"),  # the GPU's HDMI audio function
            ("0000:41:00.0", "0x10de", "0x030200"),  # a 3D controller (data-centre GPUs)
            ("0000:00:02.0", "0x8086", "0x030000"),  # Intel iGPU
        ],
    )
    assert read_pci_nvidia_devices(root) == ["0000:01:00.0", "0000:41:00.0"]
    assert read_pci_nvidia_devices(str(tmp_path / "nowhere")) is None


@pytest.mark.parametrize(
    ("files", "expected_source"),
    [
        ({"/sys/module/nvidia/version": "550.144.03\n"}, "/sys/module/nvidia/version"),
        ({"/proc/driver/nvidia/version": fixture("proc-version-open.txt")}, "/proc/driver/nvidia/version"),
    ],
)
def test_kernel_module_without_user_space(tmp_path, files, expected_source):
    root = make_root(tmp_path, [NVIDIA_VGA], files)
    nvml = FakeNvml(init_error=nvml_error(NO_NVML))
    result = probe_nvidia(runner=FakeRunner(), root=root, nvml=nvml, env={"PATH": ""})
    assert (result.driver_version.value, result.driver_version.source) == ("550.144.03", expected_source)
    assert not result.cuda_driver_version.known
    assert "only the kernel module version" in result.cuda_driver_version.why
    # The module is loaded, so this is not "no driver": the libraries are missing (container without runtime).
    assert result.status == NVIDIA_UNKNOWN and "kernel module" in result.detail


def test_mismatch_reports_the_running_kernel_module(tmp_path, smi_bin):
    exe, env = smi_bin
    runner = FakeRunner(smi_answers(exe, failed([exe], fixture("smi-fail-mismatch.txt"), 18)))
    root = make_root(tmp_path, [NVIDIA_VGA], {"/sys/module/nvidia/version": "570.86.15\n"})
    nvml = FakeNvml(init_error=nvml_error(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH))
    result = probe_nvidia(runner=runner, root=root, nvml=nvml, env=env)
    assert result.status == NVIDIA_MISMATCH
    assert result.driver_version.value == "570.86.15"
    assert "NVML library version: 570.124" in result.detail


def test_jetson_l4t_number_is_not_a_driver_version(tmp_path):
    root = make_root(tmp_path, [], {"/proc/driver/nvidia/version": fixture("proc-version-jetson.txt")})
    nvml = FakeNvml(init_error=nvml_error(NO_NVML))
    result = probe_nvidia(runner=FakeRunner(), root=root, nvml=nvml, env={"PATH": ""})
    assert not result.driver_version.known
    assert "L4T release 35.3.1" in result.driver_version.why


@pytest.mark.parametrize(
    "files",
    [
        {"/dev/dxg": ""},
        {
            "/proc/version": "Linux version 5.15.153.1-microsoft-standard-WSL2 (root@941d701f84f1) (gcc "
                "(GCC) 11.2.0)"
        },
    ],
)
def test_wsl_without_driver_is_never_no_gpu(tmp_path, files):
    root = make_root(tmp_path, [], files)  # WSL2 shows no PCI devices
    nvml = FakeNvml(init_error=nvml_error(NO_NVML))
    result = probe_nvidia(runner=FakeRunner(), root=root, nvml=nvml, env={"PATH": ""})
    assert result.status == NVIDIA_UNKNOWN
    assert result.detail.startswith("WSL2")


def test_wsl_nvidia_smi_location(tmp_path):
    root = make_root(tmp_path, [], {"/usr/lib/wsl/lib/nvidia-smi": "", "/dev/dxg": ""})
    exe = str(Path(root) / "usr/lib/wsl/lib/nvidia-smi")
    assert find_nvidia_smi(root, {"PATH": ""}, "linux") == exe
    runner = FakeRunner(
        smi_answers(exe, fixture("smi-banner-r535-wide.txt"), fixture("smi-query-gpu.csv"), "12.0\n12.1\n")
    )
    result = probe_nvidia(
        runner=runner, root=root, nvml=FakeNvml(init_error=nvml_error(NO_NVML)), env={"PATH": ""}
    )
    assert result.status == NVIDIA_OK and len(result.gpus) == 2


def test_windows_nvidia_smi_locations(tmp_path):
    system_root, program_files = tmp_path / "Windows", tmp_path / "Program Files"
    env = {"PATH": "", "SystemRoot": str(system_root), "ProgramFiles": str(program_files)}
    assert find_nvidia_smi(str(tmp_path), env, "windows") is None
    legacy = program_files / "NVIDIA Corporation" / "NVSMI" / "nvidia-smi.exe"
    legacy.parent.mkdir(parents=True)
    legacy.write_text("")
    assert find_nvidia_smi(str(tmp_path), env, "windows") == str(legacy)
    dch = system_root / "System32" / "nvidia-smi.exe"
    dch.parent.mkdir(parents=True)
    dch.write_text("")
    assert find_nvidia_smi(str(tmp_path), env, "windows") == str(dch)  # DCH first, as collect_env


def test_unscannable_pci_bus(tmp_path):
    nvml = FakeNvml(init_error=nvml_error(NO_NVML))
    empty = str(tmp_path / "empty")
    linux = probe_nvidia(runner=FakeRunner(), root=empty, nvml=nvml, env={"PATH": ""}, system="linux")
    assert linux.status == NVIDIA_UNKNOWN and "cannot be scanned" in linux.detail
    mac = probe_nvidia(runner=FakeRunner(), root=empty, nvml=nvml, env={"PATH": ""}, system="darwin")
    assert mac.status == NVIDIA_NO_GPU


# --- env overrides -------------------------------------------------------------------------------


def test_env_overrides_replace_detected_values(tmp_path):
    env = {"TORCHDOCTOR_DRIVER_VERSION": "535.104.05", "TORCHDOCTOR_CUDA_DRIVER_VERSION": "12.2"}
    result = probe_nvidia(runner=FakeRunner(), root=make_root(tmp_path), nvml=FakeNvml([RTX_5090]), env=env)
    assert (result.driver_version.value, result.driver_version.source) == (
        "535.104.05",
        "env:TORCHDOCTOR_DRIVER_VERSION",
    )
    assert (result.cuda_driver_version.value, result.cuda_driver_version.source) == (
        "12.2",
        "env:TORCHDOCTOR_CUDA_DRIVER_VERSION",
    )
    assert result.gpus[0].compute_capability.value == "12.0"  # the rest is still detected


def test_env_override_on_a_gpu_free_machine_and_integer_cuda(tmp_path):
    env = {"PATH": "", "TORCHDOCTOR_DRIVER_VERSION": "580.65.06", "TORCHDOCTOR_CUDA_DRIVER_VERSION": "13000"}
    nvml = FakeNvml(init_error=nvml_error(NO_NVML))
    result = probe_nvidia(runner=FakeRunner(), root=make_root(tmp_path), nvml=nvml, env=env)
    assert result.driver_version.value == "580.65.06" and result.cuda_driver_version.value == "13.0"
    assert result.status == NVIDIA_NO_GPU  # the override forces versions, not GPUs


# --- the fake nvidia-smi through the real runner -------------------------------------------------


@pytest.fixture
def fake_smi():
    return load_fake_smi()


def test_fake_smi_through_real_runner(tmp_path, fake_smi):
    bin_dir = tmp_path / "bin"
    gpus = [
        {
            "name": "NVIDIA GeForce RTX 5090",
            "cc": "12.0",
            "mem_mib": 32607,
            "uuid": RTX_5090["uuid"],
            "bus": "00000000:01:00.0",
        },
        {
            "name": "NVIDIA H100 80GB HBM3",
            "cc": "9.0",
            "mem_mib": 81559,
            "uuid": H100["uuid"],
            "bus": "00000000:C1:00.0",
        },
    ]
    exe = fake_smi.write_fake_nvidia_smi(bin_dir, gpus, driver="610.43.02", cuda="13.3", banner="kmd")
    result = probe_nvidia(
        runner=run,
        root=make_root(tmp_path),
        nvml=FakeNvml(init_error=nvml_error(NO_NVML)),
        env={"PATH": str(bin_dir)},
    )
    assert result.status == NVIDIA_OK
    assert (result.driver_version.value, result.cuda_driver_version.value) == ("610.43.02", "13.3")
    assert [(g.name, g.compute_capability.value, g.memory_total_mib, g.pci_bus_id) for g in result.gpus] == [
        ("NVIDIA GeForce RTX 5090", "12.0", 32607, "0000:01:00.0"),
        ("NVIDIA H100 80GB HBM3", "9.0", 81559, "0000:c1:00.0"),
    ]
    assert fake_smi.read_calls(bin_dir) == [[], list(QUERY_ARGS), list(COMPUTE_CAP_ARGS)]
    assert (
        run([str(exe), "-L"]).stdout.splitlines()[0]
        == f"GPU 0: NVIDIA GeForce RTX 5090 (UUID: {RTX_5090['uuid']})"
    )


@pytest.mark.parametrize(
    ("mode", "nvml_code", "expected", "detail_part"),
    [
        (
            "mismatch",
            pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
            NVIDIA_MISMATCH,
            "NVML library version: 570.124",
        ),
        ("no-driver", pynvml.NVML_ERROR_DRIVER_NOT_LOADED, NVIDIA_NO_DRIVER, "couldn't communicate"),
        ("unknown-error", pynvml.NVML_ERROR_UNKNOWN, NVIDIA_CONTAINER_LOST, "Unknown Error"),
        ("garbage", NO_NVML, NVIDIA_UNKNOWN, "unrecognised nvidia-smi output"),
    ],
)
def test_fake_smi_failure_modes_through_real_runner(
    tmp_path, fake_smi, mode, nvml_code, expected, detail_part
):
    bin_dir = tmp_path / "bin"
    fake_smi.write_fake_nvidia_smi(bin_dir, [{}], mode=mode)
    result = probe_nvidia(
        runner=run,
        root=make_root(tmp_path, [NVIDIA_VGA]),
        nvml=FakeNvml(init_error=nvml_error(nvml_code)),
        env={"PATH": str(bin_dir)},
    )
    assert result.status == expected
    assert detail_part in result.detail


def test_fake_smi_without_compute_cap_through_real_runner(tmp_path, fake_smi):
    bin_dir = tmp_path / "bin"
    fake_smi.write_fake_nvidia_smi(
        bin_dir, [{"cc": "8.6"}], driver="470.182.03", cuda="11.4", mode="no-compute-cap"
    )
    result = probe_nvidia(
        runner=run,
        root=make_root(tmp_path),
        nvml=FakeNvml(init_error=nvml_error(NO_NVML)),
        env={"PATH": str(bin_dir)},
    )
    assert result.status == NVIDIA_OK and result.driver_version.value == "470.182.03"
    assert not result.gpus[0].compute_capability.known
    assert "not a valid field" in result.gpus[0].compute_capability.why


@pytest.mark.slow
def test_fake_smi_hang_is_bounded_by_the_timeout(tmp_path, fake_smi):
    bin_dir = tmp_path / "bin"
    fake_smi.write_fake_nvidia_smi(bin_dir, [{}], mode="hang")
    start = time.perf_counter()
    result = probe_nvidia(
        runner=run,
        root=make_root(tmp_path, [NVIDIA_VGA]),
        nvml=FakeNvml(init_error=nvml_error(NO_NVML)),
        env={"PATH": str(bin_dir)},
        timeout=1.0,
    )
    elapsed = time.perf_counter() - start
    assert result.status == NVIDIA_UNKNOWN
    assert "did not answer within 1s" in result.detail
    assert elapsed < 3.5  # one timeout, no further calls after the banner hung
    assert fake_smi.read_calls(bin_dir) == [[]]


def test_nvml_false_skips_nvml(tmp_path, smi_bin):
    exe, env = smi_bin
    runner = FakeRunner(
        smi_answers(exe, fixture("smi-banner-r535-wide.txt"), fixture("smi-query-gpu.csv"), "12.0\n12.1\n")
    )
    result = probe_nvidia(runner=runner, root=make_root(tmp_path), nvml=False, env=env)
    assert result.attempts[:2] == ["nvml: disabled (TORCHDOCTOR_NVML=0)", "nvidia-smi: ok"]
    assert result.status == NVIDIA_OK
