"""CI preflight requirements: each one met and unmet, on snapshots built from tests/factory.py."""

from __future__ import annotations

import pytest
from factory import gpu, make_snapshot, torch_dist

from doctor.app.config import load_pyproject_requirements
from doctor.compat.assessment import assess
from doctor.errors import DoctorError
from doctor.model.requirements import (
    REQUIREMENT_IDS,
    Requirements,
    merge,
    parse_memory_mib,
    validate_requirements,
)
from doctor.model.snapshot import RuntimeDevice, TorchRuntime
from doctor.rules.requirements import check_requirements as check_facts
from doctor.table.load import load_table

TABLE = load_table()


def check_requirements(snapshot, req: Requirements):
    """The requirements rule on a snapshot, with the facts a run derives from it and the bundled table."""
    return check_facts(assess(snapshot, TABLE), req)


def ids(snapshot, **req) -> list[str]:
    return [f.id for f in check_requirements(snapshot, Requirements(**req))]


def cpu_snapshot(**kw):
    return make_snapshot(
        torch=torch_dist("2.13.0+cpu", cuda=None),
        gpus=[],
        nvidia_status="no-gpu",
        driver=None,
        max_cuda=None,
        **kw,
    )


def with_runtime(snapshot, **kw):
    snapshot.runtime = TorchRuntime(status="ok", **kw)
    return snapshot


# --- --require ---------------------------------------------------------------------------------


def test_require_cuda_met_from_static_facts():
    assert ids(make_snapshot(), require=["cuda"]) == []


def test_require_cuda_cpu_build_without_gpu_has_the_full_reason():
    findings = check_requirements(cpu_snapshot(), Requirements(require=["cuda"]))
    assert [f.id for f in findings] == ["requirement-cuda"]
    f = findings[0]
    assert f.severity == "error" and f.rule == "requirements"
    assert f.title == (
        "--require cuda: no CUDA device usable: torch 2.13.0+cpu is a CPU build and no NVIDIA GPU was found"
    )


def test_require_cuda_driver_broken():
    snap = make_snapshot(nvidia_status="driver-library-mismatch", gpus=[])
    [f] = check_requirements(snap, Requirements(require=["cuda"]))
    assert "driver-library-mismatch" in f.title


def test_require_cuda_runtime_overrides_static_facts():
    # static facts look fine, but torch said no: the runtime wins
    snap = with_runtime(make_snapshot(), cuda_version="12.8", cuda_available=False, backend="cuda")
    [f] = check_requirements(snap, Requirements(require=["cuda"]))
    assert "torch.cuda.is_available() is False" in f.title
    ok = with_runtime(make_snapshot(), cuda_version="12.8", cuda_available=True, backend="cuda")
    assert ids(ok, require=["cuda"]) == []


def test_require_cuda_on_rocm_build_is_unmet_but_rocm_is_met():
    snap = with_runtime(
        make_snapshot(torch=torch_dist("2.5.1+rocm6.2", cuda=None, hip="6.2"), gpus=[]),
        hip_version="6.2.41133",
        cuda_available=True,
        backend="rocm",
    )
    assert ids(snap, require=["cuda"]) == ["requirement-cuda"]
    assert ids(snap, require=["rocm"]) == []
    assert ids(snap, require=["gpu"]) == []


def test_require_rocm_unverified_without_runtime():
    snap = make_snapshot(torch=torch_dist("2.5.1+rocm6.2", cuda=None, hip="6.2"), gpus=[])
    [f] = check_requirements(snap, Requirements(require=["rocm"]))
    assert "import probe did not run" in f.title
    assert ids(make_snapshot(), require=["rocm"]) == ["requirement-rocm"]


def test_require_mps():
    mac = make_snapshot(
        os="darwin", machine="arm64", torch=torch_dist("2.5.1", cuda=None), gpus=[], nvidia_status="no-gpu"
    )
    assert ids(mac, require=["mps"]) == []
    assert ids(mac, require=["gpu"]) == []
    assert ids(make_snapshot(), require=["mps"]) == ["requirement-mps"]
    intel_mac_runtime = with_runtime(mac, backend="cpu")
    assert ids(intel_mac_runtime, require=["mps"]) == ["requirement-mps"]


def test_require_gpu():
    assert ids(make_snapshot(), require=["gpu"]) == []
    [f] = check_requirements(cpu_snapshot(), Requirements(require=["gpu"]))
    assert f.id == "requirement-gpu" and f.title.startswith("--require gpu: no GPU usable:")


def test_require_cpu():
    assert ids(cpu_snapshot(), require=["cpu"]) == []
    assert ids(make_snapshot(), require=["cpu"]) == []
    assert ids(make_snapshot(torch=None), require=["cpu"]) == ["requirement-cpu"]
    broken = make_snapshot()
    broken.runtime = TorchRuntime(status="import-error", detail="undefined symbol: __nvJitLinkComplete_12_4")
    [f] = check_requirements(broken, Requirements(require=["cpu"]))
    assert "does not import" in f.title and "__nvJitLinkComplete_12_4" in f.title


def test_torch_not_installed():
    [f] = check_requirements(make_snapshot(torch=None), Requirements(require=["cuda"]))
    assert f.title == "--require cuda: no CUDA device usable: torch is not installed"


# --- counts, capability, memory ----------------------------------------------------------------


def test_min_gpus():
    two = make_snapshot(gpus=[gpu(index=0), gpu(index=1)])
    assert ids(two, min_gpus=2) == []
    [f] = check_requirements(make_snapshot(), Requirements(min_gpus=2))
    assert f.id == "requirement-min-gpus" and f.title.startswith("--min-gpus 2: found 1 GPU (")
    assert f.evidence["found"] == 1


def test_min_gpus_uses_torch_device_count_when_it_ran():
    # CUDA_VISIBLE_DEVICES=0 on a 2-GPU box: the driver lists 2, torch sees 1
    snap = with_runtime(
        make_snapshot(gpus=[gpu(index=0), gpu(index=1)]),
        cuda_version="12.8",
        cuda_available=True,
        device_count=1,
    )
    [f] = check_requirements(snap, Requirements(min_gpus=2))
    assert f.evidence["source"] == "torch.cuda.device_count()"


def test_min_compute_capability():
    assert ids(make_snapshot(), min_compute_capability="8.0") == []
    assert ids(make_snapshot(), min_compute_capability="8.9") == []
    [f] = check_requirements(make_snapshot(), Requirements(min_compute_capability="9.0"))
    assert f.id == "requirement-min-compute-capability" and "CC 8.9" in f.title
    pascal = make_snapshot(gpus=[gpu("NVIDIA GeForce GTX 1080 Ti", cc="6.1")])
    assert ids(pascal, min_compute_capability="7.0") == ["requirement-min-compute-capability"]
    unknown = make_snapshot(gpus=[gpu(cc=None)])
    [f] = check_requirements(unknown, Requirements(min_compute_capability="7.0"))
    assert "CC unknown" in f.title
    assert ids(cpu_snapshot(), min_compute_capability="7.0") == ["requirement-min-compute-capability"]


def test_min_compute_capability_counts_qualifying_gpus_against_min_gpus():
    mixed = make_snapshot(
        gpus=[
            gpu("NVIDIA GeForce RTX 5090", cc="12.0", index=0),
            gpu("NVIDIA GeForce GTX 1080", cc="6.1", index=1),
        ]
    )
    assert ids(mixed, min_compute_capability="8.0") == []
    assert ids(mixed, min_compute_capability="8.0", min_gpus=2) == ["requirement-min-compute-capability"]


def test_min_compute_capability_compares_numerically():
    blackwell = make_snapshot(gpus=[gpu("NVIDIA GeForce RTX 5090", cc="12.0")])
    assert ids(blackwell, min_compute_capability="9.0") == []  # "12.0" < "9.0" as strings


@pytest.mark.parametrize(
    "text, mib",
    [("40GB", 38146.97), ("40GiB", 40960), ("40000MiB", 40000), ("24 gb", 22888.18), ("1.5TiB", 1572864)],
)
def test_parse_memory(text, mib):
    assert parse_memory_mib(text) == pytest.approx(mib, abs=0.01)


def test_min_gpu_memory():
    assert ids(make_snapshot(), min_gpu_memory="24GB") == []  # an RTX 4090 "24GB" card has 24564 MiB
    [f] = check_requirements(make_snapshot(), Requirements(min_gpu_memory="40GB"))
    assert f.id == "requirement-min-gpu-memory" and "24564 MiB" in f.title
    assert f.evidence["required_mib"] == 38147
    a100 = make_snapshot(gpus=[gpu("NVIDIA A100-SXM4-40GB", cc="8.0", mem=40960)])
    assert ids(a100, min_gpu_memory="40GB") == [] and ids(a100, min_gpu_memory="40GiB") == []


def test_runtime_devices_preferred_for_capability_and_memory():
    snap = with_runtime(
        make_snapshot(),
        cuda_version="12.8",
        cuda_available=True,
        devices=[RuntimeDevice(index=0, name="NVIDIA A100", capability="8.0", total_memory_mib=81920)],
    )
    assert ids(snap, min_gpu_memory="80GB", min_compute_capability="8.0") == []


# --- torch and CUDA versions -------------------------------------------------------------------


def test_torch_specifier():
    assert ids(make_snapshot(), torch=">=2.5,<2.8") == []
    [f] = check_requirements(make_snapshot(), Requirements(torch=">=2.8"))
    assert f.id == "requirement-torch" and f.title == "--torch >=2.8: torch 2.7.1+cu128 is installed"
    assert ids(make_snapshot(torch=None), torch=">=2") == ["requirement-torch"]
    assert ids(make_snapshot(torch=torch_dist("2.9.0.dev20250601+cu128")), torch=">=2.9.0.dev0") == []


@pytest.mark.parametrize(
    "wanted, met",
    [("12.8", True), ("12.x", True), ("12", True), ("12.6", False), ("13.x", False), ("13.0", False)],
)
def test_cuda_version(wanted, met):
    assert (ids(make_snapshot(), cuda=wanted) == []) is met


def test_cuda_version_on_cpu_build():
    [f] = check_requirements(cpu_snapshot(), Requirements(cuda="12.x"))
    assert f.id == "requirement-cuda-version" and "is not a CUDA build" in f.title


def test_ignore_and_every_id_is_declared():
    findings = check_requirements(
        cpu_snapshot(), Requirements(require=["cuda", "gpu"], min_gpus=1, ignore=["requirement-gpu"])
    )
    assert [f.id for f in findings] == ["requirement-cuda", "requirement-min-gpus"]
    assert all(f.id in REQUIREMENT_IDS for f in findings)


# --- configuration -----------------------------------------------------------------------------


def write(tmp_path, text: str) -> str:
    path = tmp_path / "pyproject.toml"
    path.write_text(text)
    return str(path)


def test_load_pyproject(tmp_path):
    path = write(
        tmp_path,
        """
[project]
name = "x"

[tool.torchdoctor]
require = ["cuda"]
min-gpus = 2
min-compute-capability = "8.0"
min_gpu_memory = "40GB"
torch = ">=2.5,<2.8"
cuda = "12.x"
strict = true
ignore = ["shm-too-small"]
""",
    )
    req = load_pyproject_requirements(path)
    assert req == Requirements(
        require=["cuda"],
        min_gpus=2,
        min_compute_capability="8.0",
        min_gpu_memory="40GB",
        torch=">=2.5,<2.8",
        cuda="12.x",
        strict=True,
        ignore=["shm-too-small"],
    )


def test_load_pyproject_absent(tmp_path):
    assert load_pyproject_requirements(str(tmp_path / "missing.toml")) is None
    assert load_pyproject_requirements(write(tmp_path, "[project]\nname='x'\n")) is None


def test_float_capability_and_comma_string(tmp_path):
    req = load_pyproject_requirements(
        write(tmp_path, "[tool.torchdoctor]\nmin-compute-capability = 8.0\nrequire = 'cuda, gpu'\n")
    )
    assert req.min_compute_capability == "8.0" and req.require == ["cuda", "gpu"]


@pytest.mark.parametrize(
    "body, needle",
    [
        ("min-gpus = 'two'", "min-gpus must be an integer"),
        ("require = ['tpu']", "require 'tpu' is not one of"),
        ("min-gpu-memory = '40'", "min-gpu-memory '40' is not a size"),
        ("torch = '>>2'", "torch '>>2' is not a version specifier"),
        ("cuda = 'twelve'", "cuda 'twelve' is not a CUDA version"),
        ("min-compute-capability = 'sm_80'", "min-compute-capability 'sm_80'"),
        ("strict = 'yes'", "strict must be true or false"),
        ("colour = 'red'", "unknown key 'colour'"),
    ],
)
def test_bad_pyproject_values_name_the_key(tmp_path, body, needle):
    path = write(tmp_path, f"[tool.torchdoctor]\n{body}\n")
    with pytest.raises(DoctorError) as info:
        load_pyproject_requirements(path)
    message = str(info.value)
    assert needle in message and "[tool.torchdoctor]" in message and "\n" not in message


def test_invalid_toml(tmp_path):
    with pytest.raises(DoctorError, match="invalid TOML"):
        load_pyproject_requirements(write(tmp_path, "[tool.torchdoctor\n"))


def test_other_keys_are_left_to_their_owner(tmp_path):
    path = write(tmp_path, "[tool.torchdoctor]\nindex-base = 'https://mirror/whl'\nrequire = ['cpu']\n")
    assert load_pyproject_requirements(path, other_keys=("index-base",)).require == ["cpu"]


def test_validate_cli_values():
    validate_requirements(Requirements(require=["cuda"], min_gpu_memory="8GiB"))
    with pytest.raises(DoctorError, match="--require|require 'xla'"):
        validate_requirements(Requirements(require=["xla"]), where="--require")


def test_merge_cli_wins():
    file = Requirements(require=["cuda"], min_gpus=4, torch=">=2.5", cuda="12.x", ignore=["a"], strict=True)
    cli = Requirements(min_gpus=1, cuda="13.0", ignore=["b"])
    merged = merge(cli, file)
    assert merged == Requirements(
        require=["cuda"], min_gpus=1, torch=">=2.5", cuda="13.0", strict=True, ignore=["a", "b"]
    )
    assert merge(cli, None) == cli and merge(None, file) == file
    assert merge(Requirements(require=["cpu"]), file).require == ["cpu"]
    assert merge(Requirements(min_gpus=0), file).min_gpus == 0  # an explicit 0 still wins


# --- ./pyproject.toml found by looking: parsed only when it may hold our table ---

OURS = {  # every way a pyproject.toml can hold (or mean, and break) a [tool.torchdoctor] table: always parsed
    "header": "[tool.torchdoctor]\nstrict = true\n",
    "spaced header": "[ tool . torchdoctor ]\nstrict = true\n",
    "quoted header": "[tool.\"torchdoctor\"]\nstrict = true\n",
    "literal header": "[tool.'torchdoctor' ]\nstrict = true\n",
    "dotted key": "[tool]\ntorchdoctor.strict = true\n",
    "top-level dotted key": "tool.torchdoctor.strict = true\n",
    "inline under tool": "[tool]\ntorchdoctor = { strict = true }\n",
    "inline tool": "tool = {torchdoctor={strict=true}}\n",
    "escaped key": "[tool.\"\\u0074orchdoctor\"]\nstrict = true\n",
    "broken, ours": "[tool.torchdoctor\nstrict = true\n",
    "broken, tabbed": "[tool.torchdoctor\t\nstrict = true\n",
}
NOT_OURS = {  # no table of ours, valid or not
    "someone else's": "[project]\nname = 'x'\n",
    "a dependency": "[project]\nname = 'x'\ndependencies = ['torchdoctor>=0.2']\n",
    # parsed: "]"
    "a dependency last in its list": "[project]\nname = 'x'\ndependencies = [\"torchdoctor\"]\n",
    "broken, not ours": "this is [not toml\n",
    "a mention in a comment": "# checked with torchdoctor in CI\n[project]\nname = 'x'\n",
    "a backslash": "[project]\nname = 'x'\ndescription = 'a\\\\b'\n",
}


def _parsed(path, monkeypatch, real):
    """(answer or error text, whether the TOML parser was asked)."""
    import doctor.app.config as config

    asked = []

    def toml():
        asked.append(True)
        return real()

    monkeypatch.setattr(config, "_toml", toml)
    try:
        answer = load_pyproject_requirements(path, explicit=False)
    except DoctorError as exc:
        answer = str(exc)
    return answer, bool(asked)


@pytest.mark.parametrize("name", list(OURS))
def test_a_pyproject_that_may_hold_our_table_is_parsed(tmp_path, monkeypatch, name):
    import doctor.app.config as config

    answer, asked = _parsed(write(tmp_path, OURS[name]), monkeypatch, config._toml)
    assert asked
    if name.startswith("broken"):
        assert "invalid TOML" in answer
    else:
        assert answer == Requirements(strict=True)


@pytest.mark.parametrize("name", list(NOT_OURS))
def test_a_pyproject_without_our_table_is_none_parsed_or_not(tmp_path, monkeypatch, name):
    import doctor.app.config as config

    path = write(tmp_path, NOT_OURS[name])
    answer, asked = _parsed(path, monkeypatch, config._toml)
    assert answer is None
    # the parser is skipped unless escapes could spell our name, or "torchdoctor" stands where a key would
    assert asked == (name in ("a backslash", "a dependency last in its list"))
    if not name.startswith("broken"):  # named with --config, a file is always parsed
        assert load_pyproject_requirements(path) is None


def test_a_utf16_pyproject_of_ours_is_still_refused(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_bytes("[tool.torchdoctor]\nstrict = true\n".encode("utf-16"))
    with pytest.raises(DoctorError, match="UTF-16"):
        load_pyproject_requirements(str(path), explicit=False)
