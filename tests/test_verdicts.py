"""The verdict machinery piece by piece: who built torch (compat/distributions.py), which arch list a verdict
rests on (compat/coverage.py), the binary side of small test libraries (probes/binaries.py), the companions'
builds, the plan for a distribution's own torch, and the table rows added for them.

The end-to-end verdicts through the real CLI are in test_verdicts_e2e.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from elfmaker import (
    ARCH_SPECIFIC,
    FAMILY,
    HOST_LINUX_64,
    container,
    cubin,
    fatbin_section,
    ptx,
    with_needed,
)
from factory import companion, gpu, make_snapshot, torch_dist

from doctor.app.diagnose import diagnose
from doctor.compat import coverage, distributions
from doctor.compat.arch import arch_supports
from doctor.compat.assessment import assess
from doctor.compat.builds import companion_build, cuda_major_from_needed, torch_build
from doctor.compat.coverage import NEEDS_PTX, NO_KERNELS, RUNS, arch_source, bound_verdict
from doctor.compat.distributions import channel_name, conda_build_cuda, dist_origin
from doctor.errors import TableError
from doctor.model.environment import Conda, CondaRecord, PythonFacts
from doctor.model.requirements import Requirements, gpu_wanted_by
from doctor.model.snapshot import BinaryKernels, Dist, Provenance, RuntimeDevice, TorchRuntime
from doctor.probes import binaries
from doctor.probes.provenance import parse_tegra_release, probe_provenance
from doctor.rules.gpu_arch import check_gpu_arch
from doctor.rules.install import check_companions
from doctor.table.parse import _Parser

H100 = ("NVIDIA H100 80GB HBM3", "9.0")
RTX3090 = ("NVIDIA GeForce RTX 3090", "8.6")
RTX2080 = ("NVIDIA GeForce RTX 2080", "7.5")
B200 = ("NVIDIA B200", "10.0")
B300 = ("NVIDIA B300", "10.3")
RTX5090 = ("NVIDIA GeForce RTX 5090", "12.0")
CACHE = Path("/tmp/torchdoctor-wheel-cache")


def ids(findings) -> set[str]:
    return {f.id for f in findings}


def with_conda(snap, *records: CondaRecord):
    snap.environment.python = PythonFacts(conda=Conda(prefix="/opt/env", records=list(records)))
    return snap


# --- who built torch --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "kind"), [
    ("2.6.0+cu126", distributions.WHEEL),
    ("2.14.1+cu130", distributions.WHEEL),  # PyPI: METADATA untagged, version.py tagged
    ("2.7.0.dev20250301+cu124", distributions.NIGHTLY),
    ("2.14.1a0+git9a8b7c6", distributions.SOURCE),
    ("2.6.0a0+ecf3bae40a.nv25.01", distributions.NGC),
    ("2.6.0a0+ecf3bae40a.nv25.1", distributions.NGC),  # as packaging normalises the dist-info version
    ("2.5.0a0", distributions.SOURCE),
])
def test_origin_from_the_version(version, kind):
    snap = make_snapshot(torch=torch_dist(version, cuda="12.6"))
    assert dist_origin(snap.install.torch, snap).kind == kind


def test_an_nv_build_on_a_jetson_is_nvidias_jetson_build():
    snap = make_snapshot(torch=torch_dist("2.5.0a0+872d972e41.nv24.08", cuda="12.6"))
    snap.provenance = Provenance(tegra_release="# R36 (release), REVISION: 4.0", l4t="36.4")
    origin = dist_origin(snap.install.torch, snap)
    assert origin.kind == distributions.JETSON and origin.own_build and "36.4" in origin.detail


def test_ngc_variable_marks_an_untagged_a0_build_as_ngc():
    snap = make_snapshot(torch=torch_dist("2.6.0a0+ecf3bae", cuda="12.8"))
    snap.provenance = Provenance(nvidia_pytorch_version="25.01")
    assert dist_origin(snap.install.torch, snap).kind == distributions.NGC


@pytest.mark.parametrize(
    ("channel", "build", "kind"),
    [
        (
            "https://conda.anaconda.org/conda-forge/linux-64",
            "cuda126_mkl_py312_h1234_303",
            distributions.CONDA_FORGE,
        ),
        ("conda-forge", "cpu_mkl_py312_h1234_101", distributions.CONDA_FORGE),
        (
            "https://conda.anaconda.org/pytorch/linux-64",
            "py3.12_cuda12.4_cudnn9.1.0_0",
            distributions.PYTORCH_CONDA,
        ),
        (None, "py3.11_cuda12.1_cudnn9.1.0_0", distributions.PYTORCH_CONDA),
        (
            "https://repo.anaconda.com/pkgs/main/linux-64",
            "gpu_cuda118py310h0123_0",
            distributions.CONDA_OTHER,
        ),
        (None, "b", distributions.UNKNOWN),  # no channel, no telling build string
    ],
)
def test_origin_from_conda_meta(channel, build, kind):
    snap = with_conda(make_snapshot(torch=torch_dist("2.5.1", cuda="12.6")),
                      CondaRecord("pytorch", "2.5.1", build, channel))
    snap.install.torch.installer = "conda"
    assert dist_origin(snap.install.torch, snap).kind == kind


@pytest.mark.parametrize(("build", "expected"), [
    ("cuda126_mkl_py312_h8b1a2c3_303", ("cuda", "12.6")),
    ("cuda_126_py312h9d9c1a4_0", ("cuda", "12.6")),
    ("cuda129_py311_h02b8398_0", ("cuda", "12.9")),
    ("py3.12_cuda12.4_cudnn9.1.0_0", ("cuda", "12.4")),
    ("cuda118py39h196c800_0", ("cuda", "11.8")),
    ("py38cuda110hd0a72be_1_cuda", ("cuda", "11.0")),
    ("cuda_py312_h1d8047a_0", ("cuda", None)),
    ("cpu_mkl_py312_h1234_101", ("cpu", None)),
    ("py3.9_cpu_0", ("cpu", None)),
    ("h1234_0", (None, None)),
])
def test_conda_build_strings(build, expected):
    assert conda_build_cuda(build) == expected


def test_channel_names():
    assert channel_name("https://conda.anaconda.org/conda-forge/noarch") == "conda-forge"
    assert channel_name("pkgs/main") == "defaults" and channel_name(None) == ""


# --- companions: a missing tag is unknown, never CPU --------------------------------------------------------


def _untagged_torchvision(**kernels) -> Dist:
    tv = companion("torchvision", "0.22.1", None, None)  # pairs with the factory's torch 2.7.1
    tv.kernels = BinaryKernels(**kernels) if kernels else None
    return tv


def test_untagged_torchvision_is_unknown_not_cpu():
    snap = make_snapshot(torchvision=_untagged_torchvision(), torchaudio=None)
    assert companion_build(snap, "torchvision").kind == "unknown"
    assert "torchvision-mismatch" not in ids(check_companions(assess(snap, _table())))


def test_untagged_torchvision_reads_its_cuda_from_its_binary():
    tv = _untagged_torchvision(status="ok", sm=["sm_80"], path="/x/_C.so", needed=["libcudart.so.12"])
    snap = make_snapshot(torchvision=tv, torchaudio=None)
    build = companion_build(snap, "torchvision")
    assert (build.kind, build.cuda) == ("cuda", "12") and "libcudart.so.12" in build.evidence
    # 12 == 12, and 0.20 compares majors
    assert "torchvision-mismatch" not in ids(check_companions(assess(snap, _table())))


def test_torchvision_binary_of_another_cuda_major_is_a_mismatch():
    tv = _untagged_torchvision(status="ok", sm=["sm_80"], path="/x/_C.so", needed=["libcudart.so.11.0"])
    snap = make_snapshot(torchvision=tv, torchaudio=None)
    finding = next(f for f in check_companions(assess(snap, _table())) if f.id == "torchvision-mismatch")
    assert "a different major" in finding.detail


def test_torchvision_without_gpu_code_is_a_cpu_build():
    snap = make_snapshot(
        torchvision=_untagged_torchvision(status="no-gpu-code", path="/x/_C.so"), torchaudio=None
    )
    assert companion_build(snap, "torchvision").kind == "cpu"


def test_conda_record_gives_the_companions_cuda():
    snap = with_conda(make_snapshot(torchvision=_untagged_torchvision(), torchaudio=None),
                      CondaRecord("torchvision", "0.22.1", "cuda_126_py312h9d9c1a4_0", "conda-forge"))
    assert companion_build(snap, "torchvision").cuda == "12.6"


def test_cuda_major_from_needed():
    assert cuda_major_from_needed(["libc10.so", "libcudart.so.12"]) == "12"
    assert cuda_major_from_needed(["libcublasLt.so.13", "libcublas.so.13"]) == "13"
    assert cuda_major_from_needed(["libcusparse.so.12"]) is None  # cuSPARSE's soname is not CUDA's major


def test_torch_without_version_py_takes_its_cuda_from_the_conda_record():
    dist = Dist(
        name="torch", version="2.5.1", installer="conda", location="/opt/env/lib/python3.12/site-packages"
    )
    snap = with_conda(make_snapshot(torch=dist), CondaRecord("pytorch", "2.5.1", "cuda124_mkl_py312_h_300",
                                                             "conda-forge"))
    build = torch_build(snap)
    assert (build.kind, build.cuda) == ("cuda", "12.4") and "conda build" in build.evidence


# --- the arch list's source, and the CUDA bound
# ---------------------------------------------------------------


@pytest.mark.parametrize(("cuda", "cc", "verdict"), [
    ("12.4", (12, 0), NEEDS_PTX),  # CUDA 12.4 cannot make sm_120 cubins; only compute_90 PTX could JIT
    ("13.0", (6, 1), NO_KERNELS),  # CUDA 13 dropped Pascal: no cubin, and PTX never JITs backwards
    ("11.7", (9, 0), NEEDS_PTX),
    ("11.7", (12, 0), NEEDS_PTX),
    ("12.0", (3, 5), NO_KERNELS),  # CUDA 12 dropped Kepler
    ("12.8", (12, 0), RUNS),
    ("11.8", (9, 0), RUNS),
    ("11.4", (8, 7), RUNS),  # sm_87 from 11.4
])
def test_bound_verdicts(cuda, cc, verdict):
    table = _table()
    assert bound_verdict(table.toolkit(cuda), cc, cuda) == verdict


def _arch_snapshot(name_cc, version="2.14.1+cu130", cuda="13.0", kernels=None, runtime_arch=None):
    snap = make_snapshot(gpus=[gpu(*name_cc)], driver="580.95.05", max_cuda="13.0",
                         torch=torch_dist(version, cuda=cuda), torchvision=None, torchaudio=None)
    snap.install.torch.kernels = kernels
    if runtime_arch is not None:
        snap.runtime = TorchRuntime(status="ok", arch_list=runtime_arch, devices=[RuntimeDevice()])
    return snap


def test_sources_in_order_runtime_binary_table_bound():
    table = _table()
    binary = BinaryKernels(status="ok", path="/t/libtorch_cuda.so", sm=["sm_80"], containers=4)
    snap = _arch_snapshot(H100, kernels=binary, runtime_arch=["sm_90"])
    build, origin = torch_build(snap), distributions.torch_origin(snap)
    assert arch_source(snap, table, build, origin).kind == coverage.RUNTIME
    snap.runtime = TorchRuntime()
    assert arch_source(snap, table, build, origin).kind == coverage.BINARY
    snap.install.torch.kernels = BinaryKernels(status="unknown", why="not an ELF or PE file")
    source = arch_source(snap, table, build, origin)
    assert source.kind == coverage.TABLE and "binary: not an ELF or PE file" in source.skipped
    snap = _arch_snapshot(H100, version="2.14.1a0+git9a8b7c6")
    source = arch_source(snap, table, torch_build(snap), distributions.torch_origin(snap))
    assert source.kind == coverage.BOUND and any("not a source build" in s for s in source.skipped)


def test_pytorch_ptx_policy_needs_recorded_ptx():
    table = _table()
    assert "carry no PTX" in coverage.pytorch_ptx_policy(table, "cu124", "linux-x86_64", (12, 0))
    # 2.7 cu128 has compute_120
    assert coverage.pytorch_ptx_policy(table, "cu128", "linux-x86_64", (12, 1)) is None
    assert coverage.pytorch_ptx_policy(table, None, "linux-x86_64", (12, 0)) is None


# --- the verdict on small test libraries (the binary reader's side is in test_kernels.py)
# ----------------------


def library(tmp_path: Path, entries, name="libtorch_cuda.so", containers=3) -> BinaryKernels:
    path = tmp_path / name
    path.write_bytes(
        with_needed([(".nv_fatbin", fatbin_section([entries] * containers))], ["libcudart.so.13"])
    )
    return binaries.read_binary(path, "torch")


def arch_ids(tmp_path, kernels, name_cc, version="2.14.1a0+git9a8b7c6"):
    return ids(check_gpu_arch(assess(_arch_snapshot(name_cc, version=version, kernels=kernels), _table())))


def test_one_sm_library(tmp_path):
    kernels = library(tmp_path, [cubin(80)])
    assert kernels.sm == ["sm_80"] and kernels.needed == ["libcudart.so.13"]
    assert "gpu-arch-unsupported" in arch_ids(tmp_path, kernels, H100)
    assert arch_ids(tmp_path, kernels, RTX3090) == set()


def test_ptx_only_library_runs_forward_never_backward(tmp_path):
    kernels = library(tmp_path, [ptx(80)])
    assert kernels.ptx == ["compute_80"] and kernels.sm == []
    assert arch_ids(tmp_path, kernels, H100) == set()  # JIT-compiled
    assert "gpu-arch-unsupported" in arch_ids(tmp_path, kernels, RTX2080)


def test_arch_specific_cubins_run_on_exactly_their_capability(tmp_path):
    kernels = library(tmp_path, [cubin(90, HOST_LINUX_64 | ARCH_SPECIFIC)])
    assert kernels.sm == ["sm_90a"]
    assert arch_ids(tmp_path, kernels, H100) == set()
    assert "gpu-arch-unsupported" in arch_ids(tmp_path, kernels, B200)
    kernels = library(tmp_path, [cubin(100, HOST_LINUX_64 | ARCH_SPECIFIC)], name="b.so")
    assert "gpu-arch-unsupported" in arch_ids(tmp_path, kernels, B300)  # sm_100a is not sm_103


def test_family_cubins_run_within_their_family(tmp_path):
    kernels = library(tmp_path, [cubin(100, HOST_LINUX_64 | FAMILY)])
    assert kernels.sm == ["sm_100f"]
    assert arch_ids(tmp_path, kernels, B300) == set()  # 10.3 is in the 10.x family
    assert "gpu-arch-unsupported" in arch_ids(tmp_path, kernels, RTX5090)


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "not-elf"])
def test_unreadable_libraries_fall_back_and_never_raise(tmp_path, damage):
    good = with_needed([(".nv_fatbin", fatbin_section([[cubin(80)]] * 3))], [])
    data = {"truncated": good[: len(good) // 2], "corrupt": good.replace(b"\x50\xed\x55\xba", b"\0\0\0\0"),
            "not-elf": b"#!/bin/sh\necho hello\n"}[damage]
    path = tmp_path / "libtorch_cuda.so"
    path.write_bytes(data)
    kernels = binaries.read_binary(path, "torch")
    assert kernels.status in ("unknown", "no-gpu-code") and kernels.why
    snap = _arch_snapshot(H100, version="2.14.1a0+git9a8b7c6", kernels=kernels)
    findings = check_gpu_arch(assess(snap, _table()))
    unknown = next(f for f in findings if f.id == "arch-list-unknown")  # the source build: bound only
    assert unknown.evidence["arch_list.kind"] == "cuda-bound"
    assert any(kernels.why in s for s in unknown.evidence["not_used"])


def test_a_handful_of_kernels_is_not_support(tmp_path):
    path = tmp_path / "libtorch_cuda.so"
    containers = [[cubin(80)]] * 9 + [[cubin(80), cubin(90)]]
    path.write_bytes(with_needed([(".nv_fatbin", b"".join(container(c) for c in containers))], []))
    kernels = binaries.read_binary(path, "torch")
    assert kernels.sm == ["sm_80"] and kernels.partial == ["sm_90"]
    finding = next(f for f in check_gpu_arch(assess(_arch_snapshot(H100, kernels=kernels), _table()))
                   if f.id == "gpu-arch-unsupported")
    assert "only a handful of its kernels (sm_90" in finding.detail


# --- PTX and cubin suffix rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(("sm", "ptx_", "cc", "ok"), [
    ((), ("compute_90a",), (9, 0), True),
    ((), ("compute_90a",), (10, 0), False),  # arch-specific PTX does not JIT forward
    ((), ("compute_100f",), (10, 3), True),
    ((), ("compute_100f",), (12, 0), False),  # family PTX stays in its family
    ((), ("compute_90",), (12, 0), True),
    (("sm_100f",), (), (10, 3), True),
    (("sm_103f",), (), (10, 0), False),
    (("sm_100f",), (), (12, 0), False),
])
def test_suffix_rules(sm, ptx_, cc, ok):
    assert arch_supports(cc, sm, ptx_).supported is ok


# --- the binary probe: bounded, never raising ---------------------------------------------------------------


def test_a_hung_read_is_abandoned_after_the_timeout(tmp_path, monkeypatch):
    def slow(path, what):
        time.sleep(5)

    monkeypatch.setattr(binaries, "read_binary", slow)
    torch = torch_dist()
    torch.location = str(tmp_path)
    began = time.monotonic()
    binaries.read_install_binaries(torch, None, None, timeout=0.2)
    assert time.monotonic() - began < 1.5
    assert torch.kernels.status == "unknown" and "longer than 0.2s" in torch.kernels.why


def test_libraries_are_found_where_the_packages_are(tmp_path):
    site = tmp_path / "site-packages"
    (site / "torch" / "lib").mkdir(parents=True)
    (site / "torch" / "lib" / "libtorch_cuda.so").write_bytes(with_needed([], ["libcudart.so.12"]))
    (site / "torchaudio" / "lib").mkdir(parents=True)
    (site / "torchaudio" / "lib" / "libtorchaudio.so").write_bytes(b"\x7fELF")
    torch, audio = torch_dist(), companion("torchaudio", "2.5.1", None, None)
    torch.location = audio.location = str(site)
    vision = companion("torchvision", "0.20.1", None, None)
    vision.location = str(site)
    binaries.read_install_binaries(torch, vision, audio)
    assert torch.kernels.status == "no-gpu-code" and torch.kernels.needed == ["libcudart.so.12"]
    assert vision.kernels.status == "absent" and audio.kernels.status == "unknown"


def test_conda_prefix_lib_is_searched_only_in_a_conda_environment(tmp_path):
    prefix = tmp_path / "env"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "libtorch_cuda.so").write_bytes(b"x")
    torch = torch_dist()
    torch.location = str(prefix / "lib" / "python3.12" / "site-packages")
    assert binaries.torch_library(torch, str(prefix)) is None
    (prefix / "conda-meta").mkdir()
    assert binaries.torch_library(torch, str(prefix)) == str(prefix / "lib" / "libtorch_cuda.so")


@pytest.mark.skipif(not (CACHE / "torchvision-0.20.1" / "_C.so").exists(), reason="real torchvision not "
    "cached")
def test_real_torchvision_needs_cudart_12():
    # readelf -d of the PyPI torchvision 0.20.1 (cu124) _C.so lists libcudart.so.12 (and libcudart only)
    assert binaries.read_cuda_needed(CACHE / "torchvision-0.20.1" / "_C.so") == ["libcudart.so.12"]


@pytest.mark.skipif(not (CACHE / "torch-2.14.1" / "libtorch_cuda.so").exists(), reason="real torch not "
    "cached")
def test_real_libtorch_cuda_needs_cuda_13():
    needed = binaries.read_cuda_needed(CACHE / "torch-2.14.1" / "libtorch_cuda.so")
    assert needed == [
        "libcudart.so.13",
        "libcublas.so.13",
        "libcublasLt.so.13",
        "libcudnn.so.9",
        "libnvrtc.so.13",
    ]
    assert cuda_major_from_needed(needed) == "13"


# --- provenance --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "l4t"), [
    ("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan "
        "8\n", "36.4.3"),
    ("# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64\n", "35.4.1"),
    ("# R32 (release), REVISION: 7, GCID: 1\n", "32.7"),
    ("garbage\n", None),
    ("", None),
])
def test_tegra_release(text, l4t):
    assert parse_tegra_release(text)[1] == l4t


def test_provenance_probe_reads_under_the_sysroot(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "nv_tegra_release").write_text("# R38 (release), REVISION: 2.1, GCID: 1\n")
    (tmp_path / "proc" / "device-tree").mkdir(parents=True)
    (tmp_path / "proc" / "device-tree" / "model").write_bytes(b"NVIDIA Jetson AGX Thor Developer Kit\0")
    facts = probe_provenance(str(tmp_path), {"NVIDIA_PYTORCH_VERSION": "25.01"})
    assert (facts.l4t, facts.device_model, facts.nvidia_pytorch_version) == (
        "38.2.1", "NVIDIA Jetson AGX Thor Developer Kit", "25.01")
    assert probe_provenance(str(tmp_path / "nothing"), {}) == Provenance()


# --- the plan never replaces a distribution's own torch
# -------------------------------------------------------


def _arch_error_snapshot(version: str):
    snap = make_snapshot(gpus=[gpu(*RTX5090)], torch=torch_dist(version, cuda="12.4"), torchvision=None,
                         torchaudio=None)
    snap.install.torch.kernels = BinaryKernels(status="ok", path="/x/libtorch_cuda.so", sm=["sm_80", "sm_90"],
                                               containers=3)
    return snap


@pytest.mark.parametrize("version,words", [
    ("2.5.0a0+git1234567", "TORCH_CUDA_ARCH_LIST=\"8.0;9.0;12.0\""),
    ("2.6.0a0+ecf3bae40a.nv25.01", "newer NGC PyTorch container built with CUDA 12.8 or newer"),
])
def test_own_builds_get_their_own_remedy(version, words):
    plan = diagnose(_arch_error_snapshot(version), _table()).plan
    assert plan.status == "manual" and not plan.steps and any(words in n for n in plan.notes), plan.notes


def test_conda_forge_gets_a_conda_forge_spec():
    snap = with_conda(
        _arch_error_snapshot("2.5.1"),
        CondaRecord(
            "pytorch", "2.5.1", "cuda124_mkl_py312_h_303", "https://conda.anaconda.org/conda-forge/linux-64"
        ),
    )
    snap.install.torch.installer = "conda"
    snap.interpreter.prefix = "/opt/env"
    plan = diagnose(snap, _table()).plan
    assert plan.status == "manual" and not plan.steps
    assert any("conda install -p /opt/env -c conda-forge 'pytorch=*=cuda*' 'cuda-version>=12.8'" in n
               for n in plan.notes)


def test_the_pytorch_channel_is_replaced_and_the_plan_says_so():
    snap = with_conda(
        _arch_error_snapshot("2.5.1"),
        CondaRecord("pytorch", "2.5.1", "py3.12_cuda12.4_cudnn9.1.0_0", "pytorch"),
    )
    snap.install.torch.installer = "conda"
    snap.interpreter.prefix = "/opt/env"
    plan = diagnose(snap, _table()).plan
    assert [s.kind for s in plan.steps] == ["remove", "install"]
    assert any("replaces the pytorch channel's conda build" in n for n in plan.notes)


def test_an_unconfirmed_variant_is_never_recommended():
    # driver R575 (CUDA 12.9) and an RTX 5090: 2.13's inferred cu129 would be the only 2.13 wheel that runs
    snap = make_snapshot(gpus=[gpu(*RTX5090)], driver="575.57.08", max_cuda="12.9",
                         torch=torch_dist("2.13.0+cu130", cuda="13.0"), torchvision=None, torchaudio=None)
    plan = diagnose(snap, _table()).plan
    assert plan.target and plan.target["variant"] != "cu129"
    assert "cu129" not in " ".join(plan.commands + plan.notes)


def test_gpu_wanted_by_requirements():
    assert gpu_wanted_by(Requirements(require=["cuda", "cpu"])) == ["require cuda (--require or "
        "[tool.torchdoctor])"]
    assert gpu_wanted_by(Requirements(min_gpus=2)) == ["min-gpus 2"]
    assert gpu_wanted_by(Requirements(require=["rocm"])) == []


# --- table rows added for the verdicts ---------------------------------------------------------------------


def test_jetpack_rows():
    table = _table()
    row = table.jetpack("36.4.3")
    assert (row.jetpack, row.cuda) == ("6.1, 6.2, 6.2.1", "12.6")
    assert table.jetpack("35.4.1").cuda == "11.4" and table.jetpack("32.7.1").cuda == "10.2"
    assert table.jetpack("38.2.1").jetpack == "7.0" and table.jetpack("36.2") is None
    assert table.jetpack("garbage") is None and table.jetpack(None) is None


def test_2_14_cu130_note_names_the_family_cubin():
    import json

    data = json.loads((Path(__file__).parents[1] / "compat_tables" / "pytorch.json").read_text())
    row = next(a for a in data["arch_lists"] if (a["torch_minor"], a["variant"], a["platform"]) ==
               ("2.14", "cu130", "linux-x86_64"))
    assert "sm_103f x59" in row["note"] and "sm_103 x59" not in row["note"]


def test_unconfirmed_variants_must_be_published():
    parser = _Parser("t.json")
    release = {"minor": "2.13", "patches": [{"torch": "2.13.0"}], "python": {"min": "3.10", "max": "3.14",
               "free_threaded": []}, "variants": {"linux-x86_64": ["cpu", "cu130"]}, "pypi_default": {},
               "source": "s", "confidence": "inferred", "unconfirmed_variants": {"linux-x86_64": ["cu129"]}}
    with pytest.raises(TableError, match="unconfirmed_variants.linux-x86_64\\[0\\]: 'cu129' is not among"):
        parser.release(release, "releases[0]")
    release["unconfirmed_variants"] = {"linux-x86_64": ["cu130"]}
    assert parser.release(release, "releases[0]").recommendable_variants("linux-x86_64") == ("cpu",)


def _table():
    from doctor.table.load import load_table

    return load_table(None)


def test_docs_findings_describes_every_finding_id():
    from doctor.model.requirements import REQUIREMENT_IDS
    from doctor.rules import all_rules

    text = (Path(__file__).parents[1] / "docs" / "findings.md").read_text(encoding="utf-8")
    every = {fid for rule in all_rules() for fid in rule.ids} | set(REQUIREMENT_IDS) | {"internal-rule-error"}
    assert sorted(fid for fid in every if f"`{fid}`" not in text) == []


def test_the_early_read_is_used_only_for_the_same_file(tmp_path, monkeypatch):
    env = tmp_path / "venv"
    lib = env / "lib" / "python3.12" / "site-packages" / "torch" / "lib" / "libtorch_cuda.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(with_needed([(".nv_fatbin", fatbin_section([[cubin(80)]] * 2))], ["libcudart.so.13"]))
    (env / "bin").mkdir()
    early = binaries.EarlyRead(str(env / "bin" / "python"))
    # waits for it: the patch below must not race the thread
    assert early.result_for(lib, 5.0).sm == ["sm_80"]
    reads = []
    monkeypatch.setattr(
        binaries, "read_binary", lambda path, what: reads.append(path) or BinaryKernels(status="x")
    )
    torch = torch_dist()
    torch.location = str(lib.parents[2])
    binaries.read_install_binaries(torch, None, None, early=early)
    assert torch.kernels.sm == ["sm_80"] and reads == []  # the early result, read before the patch
    lib.write_bytes(lib.read_bytes() + b"\0" * 8)  # another file now: read again
    binaries.read_install_binaries(torch, None, None, early=early)
    assert torch.kernels.status == "x" and reads == [str(lib)]
    assert binaries.EarlyRead(str(tmp_path / "nowhere" / "bin" / "python")).result_for(lib, 1.0) is None
