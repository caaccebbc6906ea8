"""After a uv install, the installed torch files against the plan's wheels (doctor/fix/installed_wheels.py);
and how fix runs uv: without its configuration and source variables (doctor/fix/sources.py). The real uv
runs through the CLI are tests/hostile/test_fix_sources.py's."""

from __future__ import annotations

import zipfile
from pathlib import Path

from wheelhouse import StandIn, build_index, build_wheel

from doctor.fix import installed_wheels as iw
from doctor.fix import sources
from doctor.fix.preview import Change
from doctor.plan.commands import with_only_named_sources

TORCH = StandIn("torch", "2.7.1+cu128", ("cu128",), (),
                {"torch/__init__.py": "", "torch/version.py": "v = 1\n"})


def install(wheel: Path, site: Path, installer_lines: bool = True) -> Path:
    """Unpack ``wheel`` into ``site`` as an installer would, with its own files added to RECORD."""
    site.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    [dist_info] = site.glob("torch-*.dist-info")
    if installer_lines:
        (dist_info / "INSTALLER").write_text("uv\n")
        with (dist_info / "RECORD").open("a") as record:
            record.write(f"{dist_info.name}/INSTALLER,sha256=x,3\n../../../bin/torchrun,sha256=y,9\n")
    return dist_info


def test_the_plans_own_files_pass_and_other_bytes_missing_or_extra_files_fail(tmp_path):
    wheel = build_wheel(tmp_path / "files", TORCH)
    record = iw.wheel_record(wheel)
    assert set(record) >= {"torch/__init__.py", "torch/version.py"}
    dist_info = install(wheel, tmp_path / "site")
    assert iw.same_files(dist_info, record) is None

    (tmp_path / "site" / "torch" / "version.py").write_text("v = 2\n")  # a cache changed since
    assert iw.same_files(dist_info, record) == "torch/version.py holds other bytes"
    (tmp_path / "site" / "torch" / "version.py").unlink()
    assert iw.same_files(dist_info, record) == "torch/version.py is missing"

    dist_info = install(wheel, tmp_path / "site2")
    (tmp_path / "site2" / "torch" / "evil.py").write_text("")
    with (dist_info / "RECORD").open("a") as handle:
        handle.write("torch/evil.py,sha256=z,0\n")
    assert iw.same_files(dist_info, record) == "torch/evil.py is not in the plan's wheel"


def test_data_purelib_lands_in_site_packages_and_scripts_are_not_compared(tmp_path):
    wheel = build_wheel(tmp_path, TORCH)
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr("torch-2.7.1+cu128.data/purelib/torch/extra.py", "x = 1\n")
        archive.writestr("torch-2.7.1+cu128.data/scripts/run", "#!python\n")
        name = "torch-2.7.1+cu128.dist-info/RECORD"
        text = archive.read(name).decode() + (
            "torch-2.7.1+cu128.data/purelib/torch/extra.py,sha256=abc,6\n"
            "torch-2.7.1+cu128.data/scripts/run,sha256=def,9\n"
        )
    rewritten = tmp_path / "re" / wheel.name
    rewritten.parent.mkdir()
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(rewritten, "w") as dst:
        for item in src.namelist():
            if item != name:
                dst.writestr(item, src.read(item))
        dst.writestr(name, text)
    record = iw.wheel_record(rewritten)
    assert record["torch/extra.py"] == "sha256=abc" and not any("scripts" in p for p in record)


def test_the_plans_wheels_are_found_in_a_local_index_and_a_find_links_folder(tmp_path):
    index = build_index(tmp_path / "index", [TORCH])
    argv = ["uv", "pip", "install", "torch==2.7.1+cu128", "--index-url", index.as_uri() + "/cu128"]
    assert iw.local_sources(argv) == [index / "cu128"]
    [wheel] = iw.plan_wheels(argv, "torch", "2.7.1+cu128")
    assert wheel == index / "files" / TORCH.filename
    assert iw.plan_wheels(argv, "torch", "2.7.0+cu128") == []

    flat = tmp_path / "flat"
    build_wheel(flat, TORCH)
    argv = ["uv", "pip", "install", "torch==2.7.1+cu128", "--find-links", str(flat), "--no-index"]
    assert [w.name for w in iw.plan_wheels(argv, "torch", "2.7.1+cu128")] == [TORCH.filename]
    # a remote index: the wheel would have to be downloaded again, so nothing is compared
    remote = ["uv", "pip", "install", "--index-url", "https://download.pytorch.org/whl/cu128"]
    assert iw.local_sources(remote) is None
    assert iw.local_sources(["uv", "pip", "install", "torch"]) is None


def test_a_torch_not_from_the_plans_wheel_is_named(tmp_path):
    index = build_index(tmp_path / "index", [TORCH])
    argv = ["uv", "pip", "install", "torch==2.7.1+cu128", "--index-url", index.as_uri() + "/cu128"]
    site = tmp_path / "site"
    install(index / "files" / TORCH.filename, site)
    changed = [Change("torch", "2.6.0+cu126", "2.7.1+cu128"), Change("numpy", None, "2.0.0")]
    assert iw.not_the_plans(changed, [str(site)], argv, ["torch==2.7.1+cu128"]) == []
    (site / "torch" / "__init__.py").write_text("import os\n")
    [(name, why)] = iw.not_the_plans(changed, [str(site)], argv, ["torch==2.7.1+cu128"])
    assert name == "torch" and why.endswith("(torch/__init__.py holds other bytes)")
    gone = [Change("torch", None, "2.7.2+cu128")]
    assert iw.not_the_plans(gone, [str(site)], argv, ["torch==2.7.2+cu128"]) == [
        ("torch", "the installed torch 2.7.2+cu128 cannot be found")]


def test_uv_runs_without_its_configuration_and_source_variables():
    argv = ["/bin/uv", "pip", "install", "--python", "py", "torch==2.7.1", "--index-url", "X"]
    assert with_only_named_sources(argv) == [
        "/bin/uv", "pip", "install", "--no-config", "--index-strategy", "first-index", "--python", "py",
        "torch==2.7.1", "--index-url", "X"]
    assert with_only_named_sources(["uv", "pip", "uninstall", "--python", "py", "torch"])[:4] == [
        "uv", "pip", "uninstall", "--no-config"]
    clean = ["py", "-c", "pass"]
    assert with_only_named_sources(clean) == clean
    env = {"PATH": "/bin", "UV_CACHE_DIR": "/c", "UV_CONSTRAINT": "/c.txt", "UV_EXTRA_INDEX_URL": "http://x",
           "UV_NO_CONFIG": "1", "PIP_FIND_LINKS": "/evil", "UV_INSECURE_HOST": "x"}
    kept, named = sources.uv_environment(env)
    assert kept == {"PATH": "/bin", "UV_CACHE_DIR": "/c"}
    assert named == ["UV_CONSTRAINT", "UV_EXTRA_INDEX_URL", "UV_INSECURE_HOST"]
