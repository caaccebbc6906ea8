"""``fix --mirror NAME``: the presets of the known PyTorch wheel mirrors, each with the argument form its
layout needs, checked before use with one small request, and the official index with a clear line when the
mirror does not serve the wheel. The network is faked only at the HTTP boundary: a real local HTTP server (in
a thread) stands in for a mirror of each layout, and a port nobody listens on for one that is down."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fakeenv import make_fake_env

from doctor.plan.commands import InstallSource
from doctor.plan.mirrors import FLAT, FLAT_ALL, INDEX, PRESETS, PYPI, cannot_serve, parse_mirror, wanted_file
from doctor.probes.mirror import probe_mirror

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "nvidia"))
from fake_smi import write_fake_nvidia_smi  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RTX5090 = {"name": "NVIDIA GeForce RTX 5090", "cc": "12.0", "mem_mib": 32607}
WHEEL = "torch-2.7.1%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl"
# What each layout serves, for the wheel the RTX 5090 / cu126 machine's plan installs.
PAGES = {
    "/nju/cu128/torch/": f'<a href="/whl/cu128/{WHEEL}#sha256=00">{WHEEL.replace("%2B", "+")}</a>',
    "/aliyun/cu128/": f'<a href="{WHEEL}">{WHEEL}</a>',
    "/sjtu/torch_stable.html": "<a href='cu126/torch-2.6.0%2Bcu126-cp312.whl'>x</a>\n" * 3000
                               + f"<a href='cu128/{WHEEL}'>cu128/{WHEEL}</a>",
    # a mirror that lags behind
    "/old/cu128/": '<a href="torch-2.5.1%2Bcu121-cp312.whl">torch-2.5.1+cu121</a>',
}


class _Mirror(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        body = PAGES.get(self.path)
        if body is None:
            self.send_error(404)
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


LOCAL = {"no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost"}  # a proxy of the test machine


@pytest.fixture(autouse=True)
def _no_proxy_for_the_local_server(monkeypatch):
    for name, value in LOCAL.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Mirror)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def down() -> str:
    """The address of a mirror that is down: a port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_presets_are_the_documented_mirrors_with_their_argument_forms():
    assert {n: m.layout for n, m in PRESETS.items()} == {"nju": INDEX, "aliyun": FLAT, "sjtu": FLAT_ALL,
                                                          "tuna": PYPI}
    pins = ["torch==2.7.1+cu128", "torchvision==0.22.1+cu128"]
    assert PRESETS["nju"].source().args("cu128") == ["--index-url", "https://mirrors.nju.edu.cn/pytorch/whl/cu128"]
    assert PRESETS["aliyun"].source().args("cu128") == [
        "--find-links", "https://mirrors.aliyun.com/pytorch-wheels/cu128/"]
    assert PRESETS["sjtu"].source().args("cu128") == [
        "--find-links", "https://mirror.sjtu.edu.cn/pytorch-wheels/torch_stable.html"]
    assert PRESETS["tuna"].source() is None and cannot_serve(PRESETS["tuna"], pins, "cu128")
    assert wanted_file(pins) == ("torch-2.7.1+cu128-", "torch-2.7.1%2Bcu128-")
    # never a URL the reference marks unverified or probably nonexistent
    for mirror in PRESETS.values():
        assert "tuna.tsinghua.edu.cn/pytorch" not in mirror.base and "ustc" not in mirror.base
    assert parse_mirror("NJU") is PRESETS["nju"] and parse_mirror("ustc") is None
    assert parse_mirror("aliyun=http://10.0.0.1/pw/").base == "http://10.0.0.1/pw"
    assert parse_mirror("aliyun=not-a-url") is None
    assert InstallSource(find_links="x/{variant}/").args(None) == []


@pytest.mark.parametrize("path,serves", [("/nju/cu128/torch/", True), ("/aliyun/cu128/", True),
                                         ("/sjtu/torch_stable.html", True), ("/old/cu128/", False),
                                         ("/nju/cu130/torch/", False)])
def test_the_probe_looks_for_the_wheel_in_the_listing(server, path, serves):
    answer = probe_mirror(server + path, ("torch-2.7.1+cu128-", "torch-2.7.1%2Bcu128-"))
    assert answer.serves is serves
    if path == "/nju/cu130/torch/":
        assert answer.why == "HTTP 404"


def test_the_probe_of_a_mirror_that_is_down_fails_fast(down):
    answer = probe_mirror(down + "/nju/cu128/torch/", ("torch-2.7.1+cu128-",), timeout=2)
    assert not answer.serves and answer.why


def _fix_dry_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        write_fake_nvidia_smi(bin_dir, [RTX5090], driver="570.124.04", cuda="12.8")
        (tmp_path / "sysroot").mkdir()
        make_fake_env(tmp_path / "venv", torch="2.6.0+cu126", cuda="12.6", torchvision="0.21.0+cu126")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "TORCHDOCTOR_INDEX_URL_BASE")
    }
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(REPO),
        TORCHDOCTOR_NVML="0",
        TORCHDOCTOR_SYSROOT=str(tmp_path / "sysroot"),
        NO_COLOR="1",
        LANG="C.UTF-8",
        COLUMNS="200",
        **LOCAL,
    )
    argv = [sys.executable, "-m", "doctor", "fix", "--dry-run", "--no-smoke", "--python",
            str(tmp_path / "venv" / "bin" / "python"), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


OFFICIAL = "--index-url https://download.pytorch.org/whl/cu128"


@pytest.mark.slow
def test_fix_uses_each_layout_with_its_argument_form(tmp_path, server):
    cases = {
        "nju": (f"--index-url {server}/nju/cu128", "serves torch-2.7.1+cu128-"),
        "aliyun": (f"--find-links {server}/aliyun/cu128/", "serves torch-2.7.1+cu128-"),
        "sjtu": (f"--find-links {server}/sjtu/torch_stable.html", "serves torch-2.7.1+cu128-"),
    }
    for name, (form, line) in cases.items():
        res = _fix_dry_run(tmp_path, "--mirror", f"{name}={server}/{name}")
        assert res.returncode == 1, res.stderr
        assert form in res.stdout and '"torch==2.7.1+cu128"' in res.stdout, (name, res.stdout)
        assert "download.pytorch.org" not in res.stdout, name
        assert f"torchdoctor: mirror {name}: " in res.stderr and line in res.stderr, (name, res.stderr)


@pytest.mark.slow
def test_fix_falls_back_to_the_official_index_with_a_clear_line(tmp_path, server, down):
    for mirror, why in ((f"nju={down}/nju", f"{down}/nju/cu128/torch/"),  # down
                        (f"aliyun={server}/old", "does not name torch-2.7.1+cu128-"),  # lags behind
                        ("tuna", "tuna mirrors PyPI only")):  # no CUDA builds at all (and no request)
        res = _fix_dry_run(tmp_path, "--mirror", mirror)
        assert res.returncode == 1, res.stderr
        assert OFFICIAL in res.stdout, (mirror, res.stdout)
        assert "cannot serve this plan" in res.stderr and why in res.stderr, (mirror, res.stderr)
        assert "installing from the official index https://download.pytorch.org/whl instead" in res.stderr
    zh = _fix_dry_run(tmp_path, "--mirror", "tuna", "--lang", "zh")
    assert "改用官方索引" in zh.stderr and OFFICIAL in zh.stdout


def test_mirror_usage_errors(tmp_path):
    res = _fix_dry_run(tmp_path, "--mirror", "ustc")
    assert res.returncode == 2 and "--mirror 'ustc': give one of nju, aliyun, sjtu, tuna" in res.stderr
    res = _fix_dry_run(tmp_path, "--mirror", "nju", "--find-links", str(tmp_path))
    assert res.returncode == 2 and "contradict" in res.stderr


@pytest.mark.slow
def test_check_and_report_write_commands_for_a_mirror_that_serves_the_wheel(tmp_path, server, down):
    _fix_dry_run(tmp_path)  # makes the machine
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "TORCHDOCTOR_INDEX_URL_BASE")
    }
    env.update(
        PATH=f"{tmp_path / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(REPO),
        TORCHDOCTOR_NVML="0",
        TORCHDOCTOR_SYSROOT=str(tmp_path / "sysroot"),
        NO_COLOR="1",
        LANG="C.UTF-8",
        COLUMNS="200",
        **LOCAL,
    )
    python = str(tmp_path / "venv" / "bin" / "python")
    for command in (["check", "--no-smoke"], ["report", "--no-smoke", "--format", "markdown"]):
        served = subprocess.run(
            [
                sys.executable,
                "-m",
                "doctor",
                *command,
                "--python",
                python,
                "--mirror",
                f"aliyun={server}/aliyun",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert f"--find-links {server}/aliyun/cu128/" in served.stdout, served.stdout + served.stderr
        assert "serves torch-2.7.1+cu128-" in served.stderr
        fallback = subprocess.run([sys.executable, "-m", "doctor", *command, "--python", python, "--mirror",
                                   f"nju={down}/nju"], capture_output=True, text=True, env=env, timeout=120)
        assert OFFICIAL in fallback.stdout and down not in fallback.stdout
        assert "cannot serve this plan" in fallback.stderr
