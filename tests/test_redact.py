"""Redaction: plant secrets in a realistic report and prove none reaches the output."""

from __future__ import annotations

import json

import pytest
from test_report_schema import full_report

from doctor.inputs.reports import validate_report
from doctor.render.redact import ENV_ALLOW_LIST, redact_report

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


def _redact_text(text: str, **kwargs) -> str:
    """One planted string through a report redacted with no local identity."""
    report = full_report()
    report["snapshot"]["runtime"]["detail"] = text
    args = {"env": {}, "hostname": "", "username": "", "home": ""} | kwargs
    return redact_report(report, **args)["snapshot"]["runtime"]["detail"]


@pytest.mark.parametrize(
    "url, expected, secret",
    [
        ("https://bob:s3cr/t@pypi.corp.example/simple", "https://pypi.corp.example/simple", "s3cr"),
        ("https://bob:p@ss@host.example/simple", "https://host.example/simple", "ss@"),
        ("https://bob@corp:s3/x@host.example/simple", "https://host.example/simple", "s3/x"),
        ("https://bob:pw@host.example/a@b", "https://host.example/a@b", "pw@"),
        ("https://bob:pw@host.example?q=a@b", "https://host.example?q=a@b", "pw@"),
        ("--index-url https://bob:a/b@h.example/s x@y", "--index-url https://h.example/s x@y", "a/b"),
    ],
)
def test_url_credentials_up_to_the_last_at_of_the_authority(url, expected, secret):
    out = _redact_text(url)
    assert out == expected
    assert secret not in out and "bob" not in out


@pytest.mark.parametrize(
    "text",
    [
        "file:///home/u/x@y/z",
        "https://example.com/a@b/c",
        "git+https://github.com/org/repo.git@v1.0",
        "git+https://gitlab.corp.example:8443/org/repo.git@v1.0",  # a port, not a password
        "http://h.example/?q=a@b",
    ],
)
def test_an_at_outside_the_authority_is_not_a_credential(text):
    assert _redact_text(text.replace("/home/u/", "/srv/u/")) == text.replace("/home/u/", "/srv/u/")


@pytest.mark.parametrize(
    "path, expected",
    [
        ("C:\\Users\\John Smith\\venv\\Scripts\\python.exe", "~\\venv\\Scripts\\python.exe"),
        ("C:/Users/John Smith/venv/python.exe", "~/venv/python.exe"),
        ("/Users/Alice Smith/proj/.venv/bin/python", "~/proj/.venv/bin/python"),
        ('File "/home/Alice Smith/train.py", line 3', 'File "~/train.py", line 3'),
        ("PATH=/home/Alice Smith/bin:/usr/bin", "PATH=~/bin:/usr/bin"),
        ("paths /home/alice and /home/bob/data are mounted", "paths ~ and ~/data are mounted"),
    ],
)
def test_home_folders_with_spaces_lose_the_whole_name(path, expected):
    out = _redact_text(path)
    assert out == expected
    assert "Smith" not in out


def test_a_report_from_another_machine_loses_its_own_identity():
    """`check --from`: the report's host and user are not this process's."""
    report = full_report()
    snap = report["snapshot"]
    snap["interpreter"]["path"] = "/home/alice/venv/bin/python"
    snap["interpreter"]["prefix"] = "/scratch/alice/envs/a"
    snap["environment"] = {
        "hostname": "alicebox",
        "env": {"CONDA_DEFAULT_ENV": "alice-exp", "LD_LIBRARY_PATH": "/data/alice/cuda/lib64"},
    }
    snap["nvidia"]["attempts"] = ["nvml: ok on alicebox.lab.example", "ssh alice@alicebox"]
    snap["runtime"]["stderr_tail"] = "PermissionError: /srv/runs/alice/ckpt owned by alice"
    out = redact_report(report, env={}, hostname="thisbox", username="bob", home="/home/bob")
    text = json.dumps(out)
    assert "alicebox" not in text and "alice" not in text
    env = out["snapshot"]["environment"]
    assert env["hostname"] == "<host>"
    assert env["env"]["CONDA_DEFAULT_ENV"] == "<user>-exp"
    assert env["env"]["LD_LIBRARY_PATH"] == "/data/<user>/cuda/lib64"
    assert out["snapshot"]["interpreter"]["path"] == "~/venv/bin/python"
    assert out["snapshot"]["nvidia"]["attempts"] == ["nvml: ok on <host>.lab.example", "ssh <user>@<host>"]
    assert validate_report(json.loads(text)) == []


def test_a_windows_report_with_a_spaced_user_name_loses_every_part():
    report = full_report()
    report["snapshot"]["interpreter"]["path"] = "C:\\Users\\John Smith\\venv\\Scripts\\python.exe"
    report["snapshot"]["runtime"]["detail"] = "owner: Smith, John (JSMITH-LAPTOP)"
    report["snapshot"]["environment"] = {"hostname": "JSMITH-LAPTOP"}
    text = json.dumps(redact_report(report, env={}, hostname="", username="", home=""))
    for secret in ("John", "Smith", "JSMITH"):
        assert secret not in text


def test_the_report_s_own_variables_name_its_user_and_secrets():
    report = full_report()
    report["snapshot"]["environment"] = {
        "env": {"USER": "carol", "HOSTNAME": "carolbox", "HF_TOKEN": "hf_PlantedElsewhere0123456789"},
    }
    report["snapshot"]["runtime"]["detail"] = "carol on carolbox: hf_PlantedElsewhere0123456789"
    out = redact_report(report, env={}, hostname="", username="", home="")
    assert out["snapshot"]["runtime"]["detail"] == "<user> on <host>: <redacted>"


def test_generic_home_names_are_not_scrubbed_elsewhere():
    report = full_report()
    report["snapshot"]["interpreter"]["path"] = "/home/ubuntu/venv/bin/python"
    report["snapshot"]["runtime"]["detail"] = (
        "/Users/Shared/x; run sudo ubuntu-drivers install; Shared memory"
    )
    out = redact_report(report, env={}, hostname="", username="", home="")
    assert out["snapshot"]["runtime"]["detail"] == "~/x; run sudo ubuntu-drivers install; Shared memory"
