"""Redaction: plant secrets in a realistic report and prove none reaches the output."""

from __future__ import annotations

import json

import pytest
from test_report_schema import full_report

from doctor.redact import ENV_ALLOW_LIST, redact_report
from doctor.report_io import validate_report

USER = "alice"
HOST = "gpu-box-17.corp.example"
HOME = "/home/alice"
TOKEN = "hf_QxVb7rT2mN9pLk4Zs8Wd3Yc6"
GH_TOKEN = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
UUID = "GPU-5d2ab6c4-8f1e-4b7c-9a3d-0123456789ab"
ENV = {
    "HF_TOKEN": TOKEN,
    "GITHUB_TOKEN": GH_TOKEN,
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "HOME": HOME,
    "USER": USER,
    "CUDA_VISIBLE_DEVICES": "0,1",
    "PIP_INDEX_URL": "https://bob:s3cretpass@pypi.corp.example/simple",
    "LD_LIBRARY_PATH": "/home/alice/cuda/lib64:/usr/local/cuda/lib64",
    "PATH": "/home/alice/.local/bin:/usr/bin",
}


def planted_report() -> dict:
    report = full_report()
    snap = report["snapshot"]
    snap["interpreter"]["path"] = "/home/alice/proj/.venv/bin/python"
    snap["interpreter"]["prefix"] = "/scratch/alice/envs/a"
    snap["nvidia"]["gpus"][0]["uuid"] = UUID
    snap["nvidia"]["detail"] = f"nvidia-smi -L: GPU 0: NVIDIA GeForce RTX 4090 (UUID: {UUID})"
    snap["nvidia"]["attempts"] = [f"nvml: ok on {HOST}", "MIG-9e5a2c1b-3f4d-5e6f-7a8b-9c0d1e2f3a4b"]
    snap["environment"] = {
        "env": dict(ENV),
        "HF_TOKEN": TOKEN,  # a probe that stored a variable as a plain key
        "hostname": HOST.split(".")[0],
        "mounts": ["10.20.30.40:/export/datasets", "[fe80::1ff:fe23:4567:890a]:2049"],
        "loopback": "127.0.0.1 and ::1",
    }
    snap["runtime"]["stderr_tail"] = (
        f'Traceback (most recent call last):\n  File "{HOME}/proj/train.py", line 3\n'
        f"token={TOKEN} url=https://user:{GH_TOKEN}@github.com/x.git\nC:\\Users\\alice\\AppData\\x"
    )
    report["findings"][0]["evidence"]["path"] = f"{HOME}/.cache/torch"
    report["findings"][0]["fix"]["commands"].append(f"{HOME}/proj/.venv/bin/python -m pip install torch")
    return report


def redacted() -> dict:
    return redact_report(planted_report(), env=ENV, hostname=HOST, username=USER, home=HOME)


@pytest.mark.parametrize(
    "secret",
    [
        USER,
        HOME,
        HOST,
        HOST.split(".")[0],
        TOKEN,
        GH_TOKEN,
        "wJalrXUtnFEMI",
        UUID,
        "9e5a2c1b-3f4d",
        "10.20.30.40",
        "fe80::1ff:fe23:4567:890a",
        "s3cretpass",
        "bob:",
    ],
)
def test_no_secret_reaches_the_output(secret):
    text = json.dumps(redacted())
    assert secret not in text


def test_what_replaces_them():
    out = redacted()
    snap = out["snapshot"]
    assert snap["interpreter"]["path"] == "~/proj/.venv/bin/python"
    assert snap["interpreter"]["prefix"] == "/scratch/<user>/envs/a"
    assert snap["nvidia"]["gpus"][0]["uuid"] == "GPU-<redacted>"
    assert snap["nvidia"]["gpus"][0]["pci_bus_id"] == "00000000:01:00.0"  # kept: not personal
    assert snap["nvidia"]["attempts"] == ["nvml: ok on <host>", "MIG-<redacted>"]
    assert snap["environment"]["mounts"] == ["<ip>:/export/datasets", "[<ip>]:2049"]
    assert snap["environment"]["loopback"] == "127.0.0.1 and ::1"
    assert "C:\\Users\\alice" not in snap["runtime"]["stderr_tail"]
    assert out["findings"][0]["fix"]["commands"][-1] == "~/proj/.venv/bin/python -m pip install torch"


def test_environment_variables_only_from_the_allow_list():
    env = redacted()["snapshot"]["environment"]
    assert set(env["env"]) == {"CUDA_VISIBLE_DEVICES", "PIP_INDEX_URL", "LD_LIBRARY_PATH"}
    assert env["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert env["env"]["PIP_INDEX_URL"] == "https://pypi.corp.example/simple"  # credentials stripped
    assert env["env"]["LD_LIBRARY_PATH"] == "~/cuda/lib64:/usr/local/cuda/lib64"
    assert "HF_TOKEN" not in env
    assert {"CUDA_VISIBLE_DEVICES", "VIRTUAL_ENV", "CONDA_PREFIX", "PIP_INDEX_URL"} <= ENV_ALLOW_LIST


def test_versions_are_not_mistaken_for_ip_addresses():
    report = full_report()
    report["snapshot"]["install"]["torch"]["requires"] = [
        "cuda-toolkit==13.0.3.0",
        "nvidia-cudnn-cu12==9.1.0.70",
    ]
    report["snapshot"]["install"]["torch"]["version"] = "2.5.1.1"
    report["snapshot"]["runtime"]["detail"] = "loaded libcudnn.so.9.1.0.70 and 8.9.7.29"
    out = redact_report(report, env={}, hostname="h", username="u", home="/nonexistent")
    torch = out["snapshot"]["install"]["torch"]
    assert torch["requires"] == ["cuda-toolkit==13.0.3.0", "nvidia-cudnn-cu12==9.1.0.70"]
    assert torch["version"] == "2.5.1.1"
    # glued to a name it is a version; a bare dotted quad in free text is treated as an address
    assert out["snapshot"]["runtime"]["detail"] == "loaded libcudnn.so.9.1.0.70 and <ip>"


def test_times_and_cpp_namespaces_are_not_ipv6():
    report = full_report()
    report["snapshot"]["runtime"]["detail"] = "at 18:56:58 in c10::cuda and torchvision::nms (ab:cd:ef)"
    out = redact_report(report, env={}, hostname="", username="", home="")
    assert out["snapshot"]["runtime"]["detail"] == report["snapshot"]["runtime"]["detail"]


def test_short_or_generic_names_do_not_wreck_the_report():
    report = full_report()
    out = redact_report(report, env={}, hostname="localhost", username="root", home="/root")
    assert out["snapshot"]["nvidia"]["gpus"][0]["name"] == "NVIDIA GeForce RTX 4090"
    out = redact_report(report, env={}, hostname="a", username="nv", home="/")
    assert out["snapshot"]["install"]["torch"]["version"] == "2.5.1+cu121"


def test_input_is_not_modified_and_output_still_validates():
    report = planted_report()
    before = json.dumps(report, sort_keys=True)
    out = redact_report(report, env=ENV, hostname=HOST, username=USER, home=HOME)
    assert json.dumps(report, sort_keys=True) == before
    assert validate_report(json.loads(json.dumps(out))) == []


def test_defaults_come_from_this_process(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("MY_API_TOKEN", "zz-planted-0123456789")
    report = full_report()
    report["snapshot"]["interpreter"]["path"] = str(tmp_path / "venv" / "bin" / "python")
    report["snapshot"]["runtime"]["detail"] = "auth zz-planted-0123456789"
    out = redact_report(report)
    assert out["snapshot"]["interpreter"]["path"] == "~/venv/bin/python"
    assert "zz-planted" not in json.dumps(out)
