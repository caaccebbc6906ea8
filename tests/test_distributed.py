"""`torchdoctor distributed`: pure analysis, the NCCL/P2P paths through stand-ins, and real torchrun runs.

Stand-ins sit only at the boundary: a fake ``torch`` / ``torch.distributed`` / ``pynvml`` object
handed to the functions, and a dict-backed store. The slow tests run the real CPU torch 2.13.0 with
Gloo under ``torchrun`` (2 and 3 ranks) on this machine.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import types
from argparse import Namespace
from pathlib import Path

import pytest

from doctor import exitcodes
from doctor.distributed import analysis as A
from doctor.distributed import entry as E
from doctor.distributed import failures as F
from doctor.distributed import fixes as X
from doctor.distributed import launch as L
from doctor.distributed import report as R
from doctor.model.findings import INSTALL
from doctor.model.versions import variant_of
from doctor.plan.commands import UV, Commands, InstallSource
from doctor.render import distributed as V
from doctor.target import rank as C
from doctor.target import rank_collectives as CC
from doctor.target import rank_snapshot as CS
from doctor.target import rank_topology as CT

REPO = Path(__file__).resolve().parents[1]
MESSAGES = json.loads((Path(__file__).parent / "fixtures" / "distributed" / "messages.json").read_text())


# --- rank environment ------------------------------------------------------------------------------


def test_torchrun_variables_win_over_slurm():
    env = {
        "RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29400",
        "TORCHELASTIC_RUN_ID": "abc", "TORCHELASTIC_USE_AGENT_STORE": "True", "SLURM_PROCID": "0", "SLURM_NTASKS": "2",
    }  # fmt: skip
    renv = C.read_rank_env(env)
    assert (renv.rank, renv.world_size, renv.local_rank) == (3, 8, 1)
    assert (renv.master_addr, renv.master_port, renv.launcher, renv.agent_store) == (
        "10.0.0.1",
        29400,
        "torchrun",
        True,
    )
    assert renv.store_prefix == "torchdoctor/abc/0"
    assert renv.error is None


def test_slurm_variables_and_master_from_the_node_list():
    env = {
        "SLURM_PROCID": "5",
        "SLURM_NTASKS": "16",
        "SLURM_LOCALID": "1",
        "SLURM_JOB_NODELIST": "gpu[07-09,12]",
    }
    renv = C.read_rank_env(env)
    assert (renv.rank, renv.world_size, renv.local_rank, renv.launcher) == (5, 16, 1, "slurm")
    assert renv.master_addr == "gpu07" and renv.master_port == C.DEFAULT_PORT and renv.agent_store is False
    assert renv.error is None


@pytest.mark.parametrize(
    "nodelist, first",
    [
        ("gpu[07-09,12],cpu01", "gpu07"),
        ("node1,node2", "node1"),
        ("a-b[3]", "a-b3"),
        ("solo", "solo"),
        ("", ""),
    ],
)
def test_first_slurm_host(nodelist, first):
    assert C.first_slurm_host(nodelist) == first


@pytest.mark.parametrize(
    "env, error",
    [
        ({"RANK": "1", "WORLD_SIZE": "2"}, "MASTER_ADDR is not set"),
        ({"RANK": "x", "WORLD_SIZE": "2"}, "bad rank variable"),
        ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h"}, "outside the world size"),
    ],
)
def test_bad_rank_variables_are_one_clear_error(env, error):
    assert error in C.read_rank_env(env).error


def test_a_bad_rank_environment_exits_with_usage_before_anything_starts(monkeypatch, capsys):
    monkeypatch.setenv("RANK", "4")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    assert E.main(["--timeout", "1"]) == exitcodes.USAGE
    assert "rank 4 is outside the world size 2" in capsys.readouterr().err


# --- failure classification on recorded messages -------------------------------------------------------


@pytest.mark.parametrize("message", MESSAGES, ids=[f"{m['kind']}:{m['source'][:40]}" for m in MESSAGES])
def test_recorded_messages_are_classified(message):
    assert F.classify_failure(message["text"], message["type"]) == message["kind"]
    if "ranks" in message:
        assert F.parse_monitored_barrier_ranks(message["text"]) == message["ranks"]


def test_nccl_network_failure_advises_socket_ifname_and_ib():
    commands = " ".join(X.nccl_fix(F.NCCL_NETWORK).commands)
    for needed in ("NCCL_DEBUG=INFO", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE=1"):
        assert needed in commands
    assert "NCCL_P2P_DISABLE=1" in " ".join(X.nccl_fix(F.NCCL_TIMEOUT).commands)


# --- analysis ------------------------------------------------------------------------------------------


def rank_entry(rank, torch="2.13.0+cpu", status="ok", seconds=0.001, **snap):
    snapshot = {"torch_version": torch, "cuda_version": None, "nccl_version": None, "driver_version": None}
    snapshot.update(snap)
    return {
        "rank": rank, "node": f"n{rank // 2}", "status": status, "snapshot": snapshot, "error": None,
        "bandwidth": [{"bytes": 1 << 20, "seconds": seconds, "algbw_gbps": 1.0, "busbw_gbps": 1.0}],
    }  # fmt: skip


def test_version_mismatch_names_the_minority_rank_and_the_fix():
    ranks = [rank_entry(0, "2.6.0+cu126"), rank_entry(1, "2.5.1+cu124"), rank_entry(2, "2.6.0+cu126")]
    (finding,) = A.find_version_mismatches(ranks)
    assert finding.id == "distributed-version-mismatch" and finding.severity == "error"
    assert (
        finding.evidence["odd_ranks"] == {1: "2.5.1+cu124"} and finding.evidence["majority"] == "2.6.0+cu126"
    )
    assert "rank 1 (n0) has 2.5.1+cu124" in finding.title
    # the plan's one builder writes it: exact local-version pin, quoted, from the variant's index
    assert finding.fix.commands == [
        'python -m pip install "torch==2.6.0+cu126" --index-url https://download.pytorch.org/whl/cu126'
    ]


def test_version_tie_goes_to_rank_0_and_unknown_values_are_ignored():
    ranks = [rank_entry(0, driver_version="570.1"), rank_entry(1, driver_version="550.2"), rank_entry(2)]
    (finding,) = A.find_version_mismatches(ranks)
    assert finding.evidence["field"] == "driver_version"
    assert finding.evidence["odd_ranks"] == {1: "550.2"}


def test_agreeing_ranks_have_no_mismatch():
    assert A.find_version_mismatches([rank_entry(r, nccl_version="2.21.5") for r in range(4)]) == []


@pytest.mark.parametrize(
    "version, command",
    [
        (
            "2.13.0+cpu",
            'python -m pip install "torch==2.13.0+cpu" --index-url https://download.pytorch.org/whl/cpu',
        ),
        (
            "2.7.1+rocm6.3",
            'python -m pip install "torch==2.7.1+rocm6.3" --index-url https://download.pytorch.org/whl/rocm6.3',
        ),
        ("2.14.1", 'python -m pip install "torch==2.14.1"'),
        ("2.6.0a0+gitabc", 'python -m pip install "torch==2.6.0a0"'),  # a source build: no index has it
    ],
)
def test_torch_install_command(version, command):
    assert X.torch_install_command(version) == command
    action = X.torch_install_action(version)
    assert action.kind == INSTALL and action.variant == variant_of(version)


def test_the_install_hint_follows_the_mirror_and_the_installer_of_its_commands():
    mirror = Commands(
        python="python", source=InstallSource("https://mirror.example/pytorch", base_given=True)
    )
    assert X.torch_install_command("2.6.0+cu126", mirror) == (
        'python -m pip install "torch==2.6.0+cu126" --index-url https://mirror.example/pytorch/cu126'
    )
    ranks = [rank_entry(0, "2.6.0+cu126"), rank_entry(1, "2.5.1+cu124"), rank_entry(2, "2.6.0+cu126")]
    report = R.build_report(ranks, 3, "gloo", "torchrun", "h:1", 10.0, commands=mirror)
    (finding,) = [f for f in report["findings"] if f["id"] == "distributed-version-mismatch"]
    assert finding["fix"]["commands"] == [X.torch_install_command("2.6.0+cu126", mirror)]
    uv = Commands(python="python", installer=UV)
    assert X.torch_install_command("2.13.0+cpu", uv) == (
        'uv pip install --python python "torch==2.13.0+cpu" --index-url https://download.pytorch.org/whl/cpu'
    )


def test_rank_that_never_arrived_is_a_rendezvous_finding_naming_it():
    ranks = [rank_entry(0), R.missing_entry(1, {}), R.missing_entry(3, {})]
    ids = {f.id: f for f in A.analyze(ranks, "10.0.0.1:29500")}
    finding = ids["distributed-rendezvous-timeout"]
    assert finding.evidence["missing_ranks"] == [1, 3]
    assert "ranks 1, 3 never reached the rendezvous at 10.0.0.1:29500" in finding.title
    assert "nc -zv 10.0.0.1 29500" in finding.fix.commands[0]


def test_rank_that_died_mid_job_is_named_with_where_it_stopped():
    # fmt: skip
    published = {
        "hello": {"hostname": "n1", "torch_version": "2.13.0+cpu"},
        "stage": {"current": "", "completed": ["snapshot", "rendezvous", "init_process_group"]},
    }
    rank0 = rank_entry(0, status="failed")
    rank0["error"] = {"stage": "all_reduce", "type": "RuntimeError", "message": MESSAGES[0]["text"]}
    findings = {f.id: f for f in A.analyze([rank0, R.missing_entry(1, published)], "h:1")}
    missing = findings["distributed-rank-missing"]
    assert "rank 1 (n1) stopped after 'init_process_group'" in missing.detail
    failed = findings["distributed-collective-failed"]
    assert failed.evidence["culprits"] == [1] and "(rank 1 did not answer)" in failed.title


def test_a_rank_with_its_own_nccl_error_reports_that_error():
    # fmt: skip
    entry = R.missing_entry(
        2,
        {
            "hello": {"hostname": "n1"},
            "error": {"stage": "all_reduce", "type": "DistBackendError", "message": MESSAGES[6]["text"]},
        },
    )
    assert entry["status"] == "failed"
    (finding,) = [f for f in A.analyze([rank_entry(0), entry], "h:1") if f.id == "distributed-nccl-error"]
    assert finding.evidence["ranks"] == [2] and "No route to host" in finding.detail
    assert any("NCCL_SOCKET_IFNAME" in c for c in finding.fix.commands)


def test_bus_bandwidth_follows_nccl_tests():
    assert CC.bandwidth_row(1_000_000_000, 1.0, 2)["busbw_gbps"] == pytest.approx(1.0)
    assert CC.bandwidth_row(1_000_000_000, 0.5, 4)["busbw_gbps"] == pytest.approx(2.0 * 2 * 3 / 4)
    assert CC.bandwidth_row(1_000_000_000, 1.0, 8)["algbw_gbps"] == pytest.approx(1.0)
    assert CC.bandwidth_row(1_000_000_000, 1.0, 1)["busbw_gbps"] == 0.0


def test_slowest_rank_and_the_slow_rank_warning():
    ranks = [rank_entry(0, seconds=0.010), rank_entry(1, seconds=0.011), rank_entry(2, seconds=0.050)]
    slow = A.slowest_rank(ranks)
    assert (slow["rank"], slow["median_seconds"]) == (2, 0.011)
    (finding,) = A.find_slow_rank(ranks)
    assert finding.id == "distributed-slow-rank" and finding.evidence["rank"] == 2
    assert A.find_slow_rank(ranks[:2]) == []  # two ranks: no majority to compare with


def test_peer_access_off_between_nvlink_gpus():
    entry = rank_entry(0)
    entry["topology"] = {
        "peer_access": [[None, False, True], [False, None, True], [True, True, None]],
        "nvml": {"links": {"0-1": "NVLINK", "0-2": "NODE", "1-2": "NVLINK"}, "error": None},
    }
    (finding,) = A.find_peer_access_off([entry])
    assert finding.id == "gpu-peer-access-off" and finding.evidence["pairs"] == [[0, 1]]
    entry["topology"]["peer_access"][0][1] = entry["topology"]["peer_access"][1][0] = True
    assert A.find_peer_access_off([entry]) == []


def test_report_json_round_trips_and_renders():
    report = R.build_report(
        [rank_entry(1, "2.5.1+cpu"), rank_entry(0)], 2, "gloo", "torchrun", "h:1", 10.0, {"X": "1"}
    )
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert report["summary"]["exit_code"] == exitcodes.FINDINGS and report["test_seams"] == {"X": "1"}
    again = json.loads(json.dumps(report))
    text = V.render_text(again)
    assert "distributed-version-mismatch" in text and "TEST SEAMS ACTIVE" in text


def test_parse_sizes():
    assert E.parse_sizes("4K, 1M,2GiB,512") == (4096, 1 << 20, 2 << 30, 512)
    with pytest.raises(ValueError):
        E.parse_sizes("lots")


# --- the NCCL / P2P / NVML paths through stand-ins -------------------------------------------------------


class FakeTensor:
    def __init__(self, values, device):
        self.values, self.device = [float(v) for v in values], device

    def __add__(self, other):
        return FakeTensor([v + other for v in self.values], self.device)

    def __mul__(self, other):
        return FakeTensor([v * other for v in self.values], self.device)

    def cpu(self):
        return self

    def tolist(self):
        return list(self.values)

    def numel(self):
        return len(self.values)


def fake_torch(gpus=2, peer=None, cuda="12.6"):
    peer = peer or {}
    props = [
        types.SimpleNamespace(name="NVIDIA H100", major=9, minor=0, total_memory=80 << 30, pci_domain_id=0, pci_bus_id=0x10 + i, pci_device_id=0)
        for i in range(gpus)
    ]  # fmt: skip
    calls = []
    cuda_ns = types.SimpleNamespace(
        is_available=lambda: gpus > 0,
        device_count=lambda: gpus,
        get_device_properties=lambda i: props[i],
        set_device=lambda i: calls.append(("set_device", i)),
        synchronize=lambda device=None: calls.append(("synchronize", device)),
        can_device_access_peer=lambda i, j: peer.get((i, j), True),
        nccl=types.SimpleNamespace(version=lambda: (2, 21, 5)),
    )
    return types.SimpleNamespace(
        __version__="2.6.0+cu126",
        version=types.SimpleNamespace(cuda=cuda, hip=None),
        cuda=cuda_ns,
        float32="float32",
        device=lambda kind, index=None: types.SimpleNamespace(type=kind, index=index),
        arange=lambda n, dtype=None, device=None: FakeTensor(range(n), device),
        zeros=lambda n, dtype=None, device=None: FakeTensor([0] * n, device),
        ones=lambda n, dtype=None, device=None: FakeTensor([1] * n, device),
        calls=calls,
    )


class FakeStore:
    def __init__(self, data=None):
        self.data = data if data is not None else {}

    def set(self, key, value):
        self.data[key] = value.encode() if isinstance(value, str) else value

    def get(self, key):
        return self.data[key]

    def check(self, keys):
        return all(k in self.data for k in keys)

    def set_timeout(self, timeout):
        pass


class FakePrefixStore(FakeStore):
    def __init__(self, prefix, store):
        self.prefix, self.store = prefix, store

    def set(self, key, value):
        self.store.set(f"{self.prefix}/{key}", value)

    def get(self, key):
        return self.store.get(f"{self.prefix}/{key}")

    def check(self, keys):
        return self.store.check([f"{self.prefix}/{k}" for k in keys])


class FakeDist:
    """torch.distributed for rank 0 of a world whose other ranks behave like rank 0 (or fail)."""

    def __init__(self, world, store, fail=None):
        self.world, self.store, self.fail, self.calls = world, store, fail or {}, []

    def TCPStore(self, host, port, world, is_master, **kwargs):  # noqa: N802 - torch's name
        self.calls.append(("TCPStore", host, port, world, is_master, sorted(kwargs)))
        return self.store

    def PrefixStore(self, prefix, store):  # noqa: N802
        return FakePrefixStore(prefix, store)

    def is_nccl_available(self):
        return True

    def init_process_group(self, **kwargs):
        self.calls.append(("init_process_group", kwargs["backend"], kwargs["rank"], kwargs["world_size"]))

    def _maybe_fail(self, name):
        if name in self.fail:
            raise RuntimeError(self.fail[name])

    def all_reduce(self, tensor):
        self._maybe_fail("all_reduce")
        rank = 0  # the other ranks hold the same pattern shifted by their rank
        tensor.values = [self.world * (v - rank) + sum(range(self.world)) for v in tensor.values]

    def broadcast(self, tensor, src):
        self._maybe_fail("broadcast")
        tensor.values = [7.0 * i for i in range(len(tensor.values))]

    def barrier(self, device_ids=None):
        self.calls.append(("barrier", device_ids))

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        self.calls.append(("monitored_barrier", wait_all_ranks))

    def gather_object(self, obj, out, dst=0):
        self._maybe_fail("gather_object")
        out[0] = obj
        for r in range(1, self.world):
            out[r] = json.loads(self.store.get(f"torchdoctor/job/0/result/{r}"))

    def is_initialized(self):
        return True

    def destroy_process_group(self):
        self.calls.append(("destroy",))


class FakeNvml:
    """pynvml for 3 GPUs: an NVLink between 0 and 1 (listed in the opposite PCI order), PCIe to 2."""

    NVML_NVLINK_MAX_LINKS = 4
    NVML_FEATURE_ENABLED = 1

    class NotSupported(Exception):
        pass

    def __init__(self):
        self.buses = {"h0": 0x12, "h1": 0x11, "h2": 0x10}  # NVML index order differs from torch's

    def nvmlInit(self):  # noqa: N802
        pass

    def nvmlShutdown(self):  # noqa: N802
        pass

    def nvmlSystemGetDriverVersion(self):  # noqa: N802
        return "570.124.06"

    def nvmlDeviceGetCount(self):  # noqa: N802
        return 3

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        return f"h{i}"

    def nvmlDeviceGetPciInfo(self, handle):  # noqa: N802
        bus = self.buses[handle]
        return types.SimpleNamespace(domain=0, bus=bus, device=0, busId=f"00000000:{bus:02x}:00.0".encode())

    def nvmlDeviceGetNvLinkState(self, handle, link):  # noqa: N802
        if handle == "h0" or link > 1:
            raise self.NotSupported("Not Supported")
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle, link):  # noqa: N802
        peer = {"h1": 0x12, "h2": 0x11}[handle]
        return types.SimpleNamespace(busId=f"0000:{peer:02x}:00.0")

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):  # noqa: N802
        return 40


def test_nvml_topology_maps_torch_order_by_pci_and_finds_nvlink():
    torch = fake_torch(gpus=3)  # torch order: bus 0x10, 0x11, 0x12 = NVML handles h2, h1, h0
    topo = CT.nvml_topology(FakeNvml(), CT._torch_pci_ids(torch))
    assert topo["mapping"] == "pci" and topo["error"] is None
    # NVML: h1<->h0 (torch 1-2) and h2<->h1 (torch 0-1) are NVLink; torch 0-2 is PCIe "NODE"
    assert topo["links"] == {"0-1": "NVLINK", "0-2": "NODE", "1-2": "NVLINK"}


def test_nvml_that_does_not_load_is_a_fact_not_a_crash():
    class Broken:
        def nvmlInit(self):  # noqa: N802
            raise RuntimeError("NVML Shared Library Not Found")

    assert CT.nvml_topology(Broken(), [])["error"] == "nvml: NVML Shared Library Not Found"
    version, why = CS.read_driver_version(Broken(), sys_root="/nonexistent")
    assert version is None and "NVML Shared Library Not Found" in why


def test_driver_version_falls_back_to_sysfs(tmp_path):
    (tmp_path / "sys/module/nvidia").mkdir(parents=True)
    (tmp_path / "sys/module/nvidia/version").write_text("570.124.06\n")
    assert CS.read_driver_version(None, sys_root=str(tmp_path)) == (
        "570.124.06",
        "/sys/module/nvidia/version",
    )


@pytest.mark.parametrize("raw, text", [((2, 21, 5), "2.21.5"), (2708, "2.7.8"), (21903, "2.19.3")])
def test_nccl_version_forms(raw, text):
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(nccl=types.SimpleNamespace(version=lambda: raw)))
    assert CS.read_nccl_version(torch) == text


def nccl_rank0(fail=None, peer=None, other_torch="2.6.0+cu126"):
    """Rank 0 of a 2-rank NCCL job through stand-ins; rank 1 has already published its result."""
    store = FakeStore()
    other = rank_entry(
        1, other_torch, cuda_version="12.6", nccl_version="2.21.5", driver_version="570.124.06"
    )
    other["node"] = "n0"
    store.set("torchdoctor/job/0/hello/1", json.dumps(other["snapshot"]))
    if not fail:
        store.set("torchdoctor/job/0/result/1", json.dumps(other))
    else:
        # fmt: skip
        store.set(
            "torchdoctor/job/0/error/1",
            json.dumps({"stage": "all_reduce", "type": "DistBackendError", "message": fail["all_reduce"]}),
        )
    torch, dist = fake_torch(gpus=3, peer=peer), FakeDist(2, store, fail)
    # fmt: skip
    renv = C.RankEnv(
        rank=0,
        world_size=2,
        master_addr="n0",
        master_port=29500,
        launcher="torchrun",
        agent_store=True,
        store_prefix="torchdoctor/job/0",
    )
    state = C.RankState(env=renv)
    args = Namespace(
        backend="auto", timeout=2.0, sizes="", iters=2, no_topology=False, json=True, output=None
    )
    watchdog = types.SimpleNamespace(finish=lambda: True)
    return torch, dist, state, args, watchdog


def test_nccl_job_through_stand_ins(capsys):
    torch, dist, state, args, watchdog = nccl_rank0(peer={(0, 1): False, (1, 0): False})
    code = E.run_rank(torch, dist, FakeNvml(), state, args, (1 << 10, 1 << 12), {}, watchdog)
    report = json.loads(capsys.readouterr().out)
    assert (
        "TCPStore",
        "n0",
        29500,
        2,
        False,
        ["timeout", "wait_for_workers"],
    ) in dist.calls  # agent store: client
    assert ("init_process_group", "nccl", 0, 2) in dist.calls
    assert ("barrier", [0]) in dist.calls and ("set_device", 0) in torch.calls
    assert any(call[0] == "synchronize" for call in torch.calls)  # timing waits for the device
    assert report["backend"] == "nccl" and [r["status"] for r in report["ranks"]] == ["ok", "ok"]
    snap = report["ranks"][0]["snapshot"]
    assert (snap["nccl_version"], snap["driver_version"], snap["driver_source"]) == (
        "2.21.5",
        "570.124.06",
        "nvml",
    )
    assert [row["bytes"] for row in report["bandwidth"]] == [1 << 10, 1 << 12]
    ids = [f["id"] for f in report["findings"]]
    assert ids == ["gpu-peer-access-off"] and code == exitcodes.OK  # a warning alone does not fail
    assert report["findings"][0]["evidence"]["pairs"] == [[0, 1]]


def test_nccl_error_on_rank_0_reports_both_ranks_errors(capsys):
    message = MESSAGES[6]["text"]
    torch, dist, state, args, watchdog = nccl_rank0(fail={"all_reduce": message})
    code = E.run_rank(torch, dist, None, state, args, (1 << 10,), {}, watchdog)
    report = json.loads(capsys.readouterr().out)
    assert code == exitcodes.FINDINGS
    (finding,) = [f for f in report["findings"] if f["id"] == "distributed-nccl-error"]
    assert finding["evidence"]["ranks"] == [0, 1] and finding["evidence"]["stage"] == "all_reduce"
    assert "export NCCL_SOCKET_IFNAME=<interface, e.g. eth0 or ib0>" in finding["fix"]["commands"]
    assert ("destroy",) not in dist.calls  # never tear down a broken NCCL group (it can hang)


def test_gather_object_failure_falls_back_to_the_store(capsys):
    torch, dist, state, args, watchdog = nccl_rank0()
    dist.fail["gather_object"] = "Numpy is not available"  # torch 2.13 object collectives need numpy
    code = E.run_rank(torch, dist, None, state, args, (1 << 10,), {}, watchdog)
    report = json.loads(capsys.readouterr().out)
    assert code == exitcodes.OK and [r["rank"] for r in report["ranks"]] == [0, 1]
    assert "gather_object failed (Numpy is not available)" in report["note"]


# --- the watchdog (its own process: it ends the process it runs in) ----------------------------------------

WATCHDOG_SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {repo!r})
    from doctor.target.rank import Watchdog
    Watchdog({deadline}, lambda reason: print("FIRED", reason, flush=True), exit_code=9).start()
    print("READY", flush=True)
    time.sleep(30)
    """
)


@pytest.mark.parametrize("how", ["deadline", "sigterm"])
def test_watchdog_ends_a_stuck_rank(how):
    script = WATCHDOG_SCRIPT.format(repo=str(REPO), deadline=1.0 if how == "deadline" else 20)
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "READY"
    if how == "sigterm":
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=15)
    assert proc.returncode == 9 and time.monotonic() - start < 10
    assert ("deadline of 1s reached" if how == "deadline" else "stopped by the launcher (SIGTERM)") in out


def test_rank_code_imports_and_fails_cleanly_on_python_38_without_torch():
    from fakeenv import find_python

    python = find_python("3.8")
    if python is None:
        pytest.skip("no Python 3.8 interpreter (pyenv or python3.8 on PATH)")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO), "RANK": "0", "WORLD_SIZE": "1"}
    # fmt: skip
    done = subprocess.run(
        [python, "-m", "doctor.distributed", "--timeout", "5"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert done.returncode == exitcodes.REQUIREMENT, done.stderr
    assert "import torch failed" in done.stderr and "Traceback" not in done.stderr


# Everything rank 0 imports: the target interpreter has Python 3.8+, torch, and maybe not even packaging.
RANK_SIDE = (
    "doctor.distributed.entry", "doctor.distributed.analysis", "doctor.distributed.report",
    "doctor.distributed.failures", "doctor.distributed.fixes", "doctor.distributed.launch",
    "doctor.render.distributed", "doctor.model.findings", "doctor.model.versions", "doctor.plan.commands",
    "doctor.target.rank", "doctor.target.rank_collectives", "doctor.target.rank_snapshot",
    "doctor.target.rank_topology",
)  # fmt: skip

RANK_SIDE_SCRIPT = """
import importlib, json, sys
for name in {modules!r}:
    importlib.import_module(name)
from doctor.distributed.report import build_report
from doctor.plan.commands import Commands, InstallSource
from doctor.render.distributed import render_text
ranks = [{{"rank": r, "node": "n", "status": "ok", "error": None, "bandwidth": [],
          "snapshot": {{"torch_version": v}}}} for r, v in enumerate(["2.6.0+cu126", "2.5.1+cu124", "2.6.0+cu126"])]
mirror = Commands(python="python", source=InstallSource("https://mirror.example/pytorch", base_given=True))
report = build_report(ranks, 3, "gloo", "torchrun", "h:1", 10.0, commands=mirror)
render_text(report)
loaded = sorted({{"packaging", "typer", "rich", "torch"}} & set(sys.modules))
print(json.dumps({{"version": list(sys.version_info[:2]), "loaded": loaded, "report": report}}))
"""


def test_rank_side_modules_import_and_report_on_the_lowest_target_python():
    from fakeenv import find_python

    python = find_python("3.8")
    if python is None:
        pytest.skip("no Python 3.8 interpreter (pyenv or python3.8 on PATH)")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)}
    script = RANK_SIDE_SCRIPT.format(modules=RANK_SIDE)
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["version"] == [3, 8] and out["loaded"] == []
    (finding,) = out["report"]["findings"]
    assert finding["id"] == "distributed-version-mismatch"
    assert finding["fix"]["commands"] == [
        'python -m pip install "torch==2.6.0+cu126" --index-url https://mirror.example/pytorch/cu126'
    ]


# --- real torchrun runs: CPU torch 2.13.0, Gloo
# ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def torch_python(tmp_path_factory):
    from realtorch import real_cpu_torch_python

    return real_cpu_torch_python(tmp_path_factory)


def torchrun(python, nproc, tmp_path, seams=None, timeout=10, limit=60):
    out = tmp_path / "dist.json"
    env = dict(os.environ, PYTHONPATH=str(REPO), **(seams or {}))
    argv = [str(Path(python).parent / "torchrun"), "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1",
            "--master-port", str(free_port()), "-m", "doctor.distributed", "--json", "-o", str(out),
            "--timeout", str(timeout)]  # fmt: skip
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=limit)
    seconds = time.monotonic() - start
    assert out.exists(), done.stderr[-3000:]
    return json.loads(out.read_text()), done, seconds


@pytest.mark.slow
def test_real_healthy_job_through_run_local(torch_python):
    report, result = L.run_local(str(torch_python), 2, timeout_s=10, extra_args=["--sizes", "4K,256K"])
    assert report is not None, result.stderr[-3000:]
    assert result.returncode == 0 and report["status"] == "ok" and report["findings"] == []
    assert report["backend"] == "gloo" and report["launcher"] == "torchrun" and report["world_size"] == 2
    assert [r["status"] for r in report["ranks"]] == ["ok", "ok"]
    steps = [s["name"] for s in report["ranks"][1]["steps"]]
    assert steps[:6] == ["snapshot", "rendezvous", "init_process_group", "all_reduce", "broadcast", "barrier"]
    rows = report["bandwidth"]
    assert [r["bytes"] for r in rows] == [4096, 262144]
    assert all(
        r["algbw_gbps"] > 0 and r["busbw_gbps"] == pytest.approx(r["algbw_gbps"], rel=1e-3) for r in rows
    )
    assert report["ranks"][0]["snapshot"]["torch_version"] == "2.13.0+cpu"


@pytest.mark.slow
def test_real_three_ranks_with_a_different_torch_on_rank_1(torch_python, tmp_path):
    seams = {C.FAKE_VERSION_SEAM: "1:2.5.1+cpu"}
    report, done, _ = torchrun(torch_python, 3, tmp_path, seams)
    assert done.returncode != 0 and report["test_seams"] == seams
    assert [r["status"] for r in report["ranks"]] == ["ok", "ok", "ok"]
    (finding,) = report["findings"]
    assert finding["id"] == "distributed-version-mismatch"
    assert (
        finding["evidence"]["odd_ranks"] == {"1": "2.5.1+cpu"}
        and finding["evidence"]["majority"] == "2.13.0+cpu"
    )
    rows = report["bandwidth"]
    assert all(r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 4 / 3, rel=1e-3) for r in rows)


@pytest.mark.slow
def test_real_rank_that_dies_is_named_and_the_others_end_within_the_timeout(torch_python, tmp_path):
    report, done, seconds = torchrun(torch_python, 3, tmp_path, {C.EXIT_RANK_SEAM: "1"}, timeout=10)
    assert seconds < 10 + 15  # the timeout, plus interpreter and torch start-up on 2 cores
    assert report["missing_ranks"] == [1]
    ids = {f["id"]: f for f in report["findings"]}
    assert "rank 1" in ids["distributed-rank-missing"]["title"]
    assert "stopped after 'init_process_group'" in ids["distributed-rank-missing"]["detail"]
    assert "exitcode  : 17" in done.stderr  # torchrun's own summary agrees on who died


@pytest.mark.slow
def test_real_rank_that_never_starts_is_named_by_rank_0(torch_python, tmp_path):
    """srun-like launch (no torchrun): rank 0 hosts the store and waits --timeout for rank 1."""
    out = tmp_path / "dist.json"
    env = dict(os.environ, PYTHONPATH=str(REPO), RANK="0", WORLD_SIZE="2", LOCAL_RANK="0",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))  # fmt: skip
    start = time.monotonic()
    done = subprocess.run([str(torch_python), "-m", "doctor.distributed", "--json", "-o", str(out), "--timeout", "4"],
                          capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert time.monotonic() - start < 4 + 15
    report = json.loads(out.read_text())
    assert done.returncode == exitcodes.FINDINGS and report["launcher"] == "env"
    assert report["missing_ranks"] == [1] and report["ranks"][0]["status"] == "ok"
    (finding,) = report["findings"]
    assert finding["id"] == "distributed-rendezvous-timeout" and finding["evidence"]["missing_ranks"] == [1]


def test_the_watchdogs_own_timeout_is_classified_as_a_timeout():
    from doctor.distributed.failures import COLLECTIVE_TIMEOUT, PEER_DIED, classify_failure

    assert classify_failure("deadline of 60s reached during all_reduce", "Timeout") == COLLECTIVE_TIMEOUT
    assert classify_failure("SIGTERM from torchrun during barrier", "Timeout") == PEER_DIED
