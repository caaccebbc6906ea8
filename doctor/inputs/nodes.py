"""Reading the node reports for `fleet summarize`: files, or folders searched recursively for *.json.

Each report `torchdoctor check --json` wrote on a node becomes a ``NodeReport``: the few facts the
fleet view compares. Plain ``json`` parsing, not ``Snapshot.from_dict``: 10,000 reports must take
seconds. Defensive, since any shape may arrive: a file that cannot be read is an
``UnreadableReport`` with a one-line reason, never a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from doctor.model.files import FileRefused, read_bytes

MAX_REPORT_BYTES = 20 << 20  # a node report is ~20 KB; anything this big is not one
UNKNOWN = "(unknown)"
NONE = "(none)"
# What is known to be absent is said as such, in the words `check` uses, not as unknown.
NO_GPU = "no GPU"  # the probe found no NVIDIA device (nvidia.status "no-gpu")
NOT_INSTALLED = "not installed"  # the target interpreter has no torch (install.status "absent")


@dataclass
class NodeReport:
    node: str
    path: str
    driver: str = UNKNOWN
    torch_build: str = UNKNOWN
    gpu_models: str = NONE  # "8x NVIDIA H100 80GB HBM3", "(none)"
    findings: str = NONE  # sorted finding ids, comma-joined: the node's "finding set"
    finding_ids: tuple[str, ...] = ()
    errors: int = 0
    plan_commands: tuple[str, ...] = ()


class UnreadableReport(ValueError):
    """A report file that is not a torchdoctor report; the message is the one-line reason."""


def find_report_files(paths: Iterable[str]) -> tuple[list[tuple[str, bool]], list[tuple[str, str]]]:
    """(path, seen as a regular file) of each file as given and each *.json in folders searched recursively
    (sorted, a folder's own files before its sub-folders', as os.walk lists them; linked folders are not
    entered); missing paths as unreadable."""
    files: list[tuple[str, bool]] = []
    missing: list[tuple[str, str]] = []
    for path in paths:
        if os.path.isdir(path):
            _walk(path, files)
        elif os.path.exists(path):
            files.append((path, False))
        else:
            missing.append((path, "no such file or folder"))
    return files, missing


def _walk(top: str, files: list[tuple[str, bool]]) -> None:
    # os.scandir rather than os.walk: its entries know a regular file without a stat (10,000 stats saved).
    # A stack rather than recursion: a folder nested thousands deep is listed, not a RecursionError.
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            continue  # os.walk skips a folder it cannot list, too
        folders = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if not entry.is_symlink():
                    folders.append(entry.path)
            elif entry.name.endswith(".json"):
                try:
                    regular = entry.is_file(follow_symlinks=False)
                except OSError:
                    regular = False
                files.append((entry.path, regular))
        stack.extend(reversed(folders))  # the first sub-folder is listed next, as os.walk lists it


def read_node_report(path: str, regular: bool = False) -> NodeReport:
    try:
        data = json.loads(read_bytes(path, MAX_REPORT_BYTES, regular=regular))
    except FileRefused as exc:
        raise UnreadableReport(str(exc)) from None
    except OSError as exc:
        raise UnreadableReport(exc.strerror or str(exc)) from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise UnreadableReport(f"not JSON: {str(exc).splitlines()[0][:120]}") from None
    return parse_node_report(data, path)


def parse_node_report(data: Any, path: str) -> NodeReport:
    """One report dict -> the facts the fleet view compares. Defensive: any shape may arrive."""
    if not isinstance(data, dict):
        raise UnreadableReport(f"expected a JSON object, got {type(data).__name__}")
    if "snapshot" not in data or "report_schema_version" not in data:
        raise UnreadableReport("not a torchdoctor report (no report_schema_version / snapshot)")
    if data.get("report_schema_version") != 1:
        raise UnreadableReport(f"report_schema_version {data.get('report_schema_version')!r} (this reads 1)")
    snapshot = _obj(data.get("snapshot"))
    environment = _obj(snapshot.get("environment"))
    nvidia = _obj(snapshot.get("nvidia"))
    install = _obj(snapshot.get("install"))
    torch = _obj(install.get("torch"))
    hostname = environment.get("hostname")
    # A redacted report says "<host>": then the file name (srun --output=reports/%N.json) names the node.
    node = hostname if isinstance(hostname, str) and hostname and hostname != "<host>" else _stem(path)
    driver = _obj(nvidia.get("driver_version")).get("value")
    build = torch.get("build_version") or torch.get("version")
    models: dict[str, int] = {}  # GPU model -> how many this node has
    for gpu in _list(nvidia.get("gpus")):
        if isinstance(gpu, dict):
            name = str(gpu.get("name") or "?")
            models[name] = models.get(name, 0) + 1
    findings = [f for f in _list(data.get("findings")) if isinstance(f, dict)]
    ids = tuple(sorted({str(f.get("id")) for f in findings if f.get("id")}))
    commands = []
    for step in _list(_obj(data.get("plan")).get("steps")):
        command = step.get("command") if isinstance(step, dict) else None
        if isinstance(command, str) and command:
            commands.append(command)
    return NodeReport(
        node=node,
        path=path,
        driver=str(driver) if driver else NO_GPU if nvidia.get("status") == "no-gpu" else UNKNOWN,
        torch_build=str(build) if build else NOT_INSTALLED if install.get("status") == "absent" else UNKNOWN,
        gpu_models=", ".join(f"{n}x {m}" for m, n in sorted(models.items())) or NONE,
        findings=", ".join(ids) or NONE,
        finding_ids=ids,
        errors=sum(f.get("severity") == "error" for f in findings),
        plan_commands=tuple(commands),
    )


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _stem(path: str) -> str:
    name = os.path.basename(path)
    return name[: -len(".json")] if name.endswith(".json") else name


def read_node_reports(paths: Iterable[str]) -> tuple[list[NodeReport], list[tuple[str, str]]]:
    """Every readable report under ``paths``, and (path, one-line reason) for the others."""
    files, unreadable = find_report_files(paths)
    nodes = []
    for path, regular in files:
        try:
            nodes.append(read_node_report(path, regular))
        except UnreadableReport as exc:
            unreadable.append((path, str(exc)))
    return nodes, unreadable
