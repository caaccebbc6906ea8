"""The host probe over a fake ``platform`` module and a fake root directory."""

from __future__ import annotations

import platform
from types import SimpleNamespace

import pytest

from doctor.probes.environment.containers import parse_container_kind
from doctor.probes.host import normalise_machine, probe_host, read_wsl_marker


def fake_platform(
    system="Linux", machine="x86_64", release="6.1.0-18-amd64", version="#1 SMP", libc=("glibc", "2.36")
):
    return SimpleNamespace(
        system=lambda: system,
        machine=lambda: machine,
        release=lambda: release,
        version=lambda: version,
        libc_ver=lambda: libc,
    )


def make_root(tmp_path, files=None):
    root = tmp_path / "root"
    root.mkdir()
    for path, text in (files or {}).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return str(root)


def test_plain_linux_host(tmp_path):
    host = probe_host(root=make_root(tmp_path), env={}, platform_module=fake_platform())
    assert (host.os, host.machine, host.os_release, host.libc) == (
        "linux",
        "x86_64",
        "6.1.0-18-amd64",
        "glibc 2.36",
    )
    assert (host.wsl, host.container) == (False, None)
    assert host.platform == "linux-x86_64"


@pytest.mark.parametrize(
    ("system", "machine", "expected"),
    [
        ("Linux", "x86_64", "x86_64"),
        ("Linux", "aarch64", "aarch64"),
        ("Linux", "arm64", "aarch64"),
        ("Windows", "AMD64", "x86_64"),
        ("Windows", "ARM64", "arm64"),
        ("Darwin", "arm64", "arm64"),
        ("Darwin", "x86_64", "x86_64"),
    ],
)
def test_machine_is_normalised(tmp_path, system, machine, expected):
    host = probe_host(
        root=make_root(tmp_path), env={}, platform_module=fake_platform(system=system, machine=machine)
    )
    assert host.machine == expected
    assert normalise_machine(system.lower(), machine) == expected


def test_windows_uses_the_build_number_and_skips_linux_checks(tmp_path):
    root = make_root(tmp_path, {"/.dockerenv": ""})
    plat = fake_platform(system="Windows", machine="AMD64", release="11", version="10.0.22631", libc=("", ""))
    host = probe_host(root=root, env={}, platform_module=plat)
    assert (host.os, host.os_release, host.libc, host.container, host.wsl) == (
        "windows",
        "10.0.22631",
        "",
        None,
        False,
    )
    assert host.platform == "windows-x86_64"


def test_musl_is_detected_by_its_loader(tmp_path):
    root = make_root(tmp_path, {"/lib/ld-musl-x86_64.so.1": ""})
    host = probe_host(root=root, env={}, platform_module=fake_platform(libc=("", "")))
    assert host.libc == "musl"
    # glibc wins when platform reports it (Debian's musl-tools also installs ld-musl).
    assert probe_host(root=root, env={}, platform_module=fake_platform()).libc == "glibc 2.36"


@pytest.mark.parametrize(
    ("files", "env", "expected"),
    [
        ({"/.dockerenv": ""}, {}, "docker"),
        ({"/run/.containerenv": ""}, {}, "podman"),
        ({}, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, "kubernetes"),
        # a pod on a Docker runtime also has /.dockerenv: kubernetes is the more useful answer
        (
            {"/.dockerenv": "", "/proc/1/cgroup": "11:devices:/kubepods/besteffort/pod1234/abcd\n"},
            {},
            "kubernetes",
        ),
        ({"/proc/self/cgroup": "12:pids:/docker/3f1c0a9e\n"}, {}, "docker"),
        ({"/proc/1/cgroup": "0::/system.slice/containerd.service\n"}, {}, "containerd"),
        ({"/proc/1/cgroup": "0::/\n", "/proc/self/cgroup": "0::/\n"}, {}, None),
    ],
)
def test_container_kind(tmp_path, files, env, expected):
    host = probe_host(root=make_root(tmp_path, files), env=env, platform_module=fake_platform())
    assert host.container == expected


@pytest.mark.parametrize(
    ("files", "marker"),
    [
        ({"/dev/dxg": ""}, "/dev/dxg"),
        ({"/usr/lib/wsl/lib/libcuda.so.1": ""}, "/usr/lib/wsl/lib"),
        (
            {"/proc/version": "Linux version 5.15.153.1-microsoft-standard-WSL2 (root@941d701f84f1)\n"},
            "/proc/version",
        ),
        ({"/proc/version": "Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org)\n"}, None),
    ],
)
def test_wsl(tmp_path, files, marker):
    root = make_root(tmp_path, files)
    assert read_wsl_marker(root) == marker
    assert probe_host(root=root, env={}, platform_module=fake_platform()).wsl is (marker is not None)


def test_cgroup_v2_says_nothing():
    assert parse_container_kind("0::/\n", "", {}, {})[0] is None
    assert parse_container_kind("0::/machine.slice/libpod-4f2a.scope\n", "", {}, {})[0] == "podman"


def test_real_host_matches_platform():
    host = probe_host()
    assert host.os == platform.system().lower()
    assert host.machine and host.os_release == (
        platform.version() if host.os == "windows" else platform.release()
    )
