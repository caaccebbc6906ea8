"""Reading the node reports for `fleet summarize`: files, or folders searched recursively for *.json.

Each report `torchdoctor check --json` wrote on a node becomes a ``NodeReport``: the few facts the
fleet view compares. Plain ``json`` parsing, not ``Snapshot.from_dict``: 10,000 reports must take
seconds. Defensive, since any shape may arrive: a file that cannot be read is an
``UnreadableReport`` with a one-line reason, never a traceback.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from doctor.model.files import FileRefused, read_bytes

MAX_REPORT_BYTES = 20 << 20  # a node report is ~20 KB; anything this big is not one
UNKNOWN = "(unknown)"
NONE = "(none)"


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

    def value(self, dimension: str) -> str:
        return getattr(self, dimension)


class UnreadableReport(ValueError):
    """A report file that is not a torchdoctor report; the message is the one-line reason."""


def find_report_files(paths: Iterable[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Files as given, folders searched recursively for *.json (sorted); missing paths as unreadable."""
    files: list[str] = []
    missing: list[tuple[str, str]] = []
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs.sort()
                files.extend(os.path.join(root, n) for n in sorted(names) if n.endswith(".json"))
        elif os.path.exists(path):
            files.append(path)
        else:
            missing.append((path, "no such file or folder"))
    return files, missing


def read_node_report(path: str, seen: dict | None = None) -> NodeReport:
    """One report file. ``seen``: what earlier files of this run parsed to (see ``_known``), so that the reports
    of a fleet's identical nodes are parsed once."""
    try:
        raw = read_bytes(path, MAX_REPORT_BYTES)
    except FileRefused as exc:
        raise UnreadableReport(str(exc)) from None
    except OSError as exc:
        raise UnreadableReport(exc.strerror or str(exc)) from None
    if seen is not None:
        return _known(raw, path, seen)
    return parse_node_report(_loads(raw), path)


def _loads(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise UnreadableReport(f"not JSON: {str(exc).splitlines()[0][:120]}") from None


# --- nodes whose reports differ only in per-node names ------------------------------------------------------------
# The reports of a fleet's healthy nodes are often the same text but for the hostname and the time they were taken.
# The fleet view reads neither but the environment's hostname, so a report equal to an earlier one with those two
# strings cut out gives that one's facts, without parsing its JSON again (10,000 reports: most of `fleet
# summarize`'s time was json.loads). A value is cut only when it is a string after such a key that follows `{`, `,`
# or white space, without escapes or control characters: in valid JSON that is always the key and its whole value,
# and other such text in its place keeps the JSON valid and every other value as it was. Anything else is compared
# as it is. (More keys, GPU UUIDs say, cost more to cut than json.loads saves on 4 KB.)
_VOLATILE_KEYS = (b'"hostname"', b'"collected_at"')
_VALUE = re.compile(rb'\s*:\s*"([^"\\\x00-\x1f]*)"')
_STARTS = frozenset(b"{, \t\r\n")


def _blanked(raw: bytes) -> tuple[tuple[bytes, ...], list[bytes]] | None:
    """``raw`` cut around the string values of the per-node keys: (the text between them, the values in order);
    None when there is nothing to cut."""
    cuts = []
    for key in _VOLATILE_KEYS:
        at = raw.find(key)
        while at >= 0:
            # anything else (a null, a number, an escape, text inside a string) stays: it is compared as it is
            value = _VALUE.match(raw, at + len(key)) if at and raw[at - 1] in _STARTS else None
            if value is not None:
                cuts.append((value.start(1), value.end(1)))
            at = raw.find(key, at + len(key))
    if not cuts:
        return None
    cuts.sort()
    parts, values, last = [], [], 0
    for start, end in cuts:
        parts.append(raw[last:start])
        values.append(raw[start:end])
        last = end
    parts.append(raw[last:])
    return tuple(parts), values


def _known(raw: bytes, path: str, seen: dict) -> NodeReport:
    cut = _blanked(raw)
    if cut is None:
        return parse_node_report(_loads(raw), path)
    parts, values = cut
    known = seen.get(parts)
    if known is None:  # the first of its kind is parsed; where its hostname is, is found when a second one comes
        node = parse_node_report(_loads(raw), path)
        seen[parts] = [node, None]
        return node
    first, hostname_at = known
    if hostname_at is None:
        hostname_at = known[1] = _hostname_at(parts, first)
    if hostname_at is False:
        return parse_node_report(_loads(raw), path)
    if isinstance(hostname_at, int):
        try:
            hostname = values[hostname_at].decode("utf-8")
        except UnicodeDecodeError:  # json.loads would read it (surrogates) or refuse it: let it say which
            return parse_node_report(_loads(raw), path)
    else:
        hostname = hostname_at[0]  # not among the cuts: the same in every report of this kind
    return NodeReport(_node_name(hostname, path), path, first.driver, first.torch_build, first.gpu_models,
                      first.findings, first.finding_ids, first.errors, first.plan_commands)


def _hostname_at(parts: tuple[bytes, ...], first: NodeReport):
    """Where the environment's hostname is: the number of its cut, or (its value,) when it is not cut; False when
    the report with other text in its cuts does not give the same facts (then every report of its kind is
    parsed). Found by parsing the report once more with a marker in every cut: a control character and the cut's
    number, which no value cut holds."""
    marked = parts[0] + b"".join(b"\\u0001%d" % i + part for i, part in enumerate(parts[1:]))
    try:
        data = json.loads(marked)
        probe = parse_node_report(data, first.path)
    except (ValueError, RecursionError, UnreadableReport):
        return False
    hostname = _environment(data).get("hostname")
    if isinstance(hostname, str) and hostname.startswith("\x01"):
        at = int(hostname[1:])
        if replace(probe, node=first.node) == first:
            return at
        return False
    if probe != first:
        return False
    return (hostname,)


def _environment(data: Any) -> dict:
    return _obj(_obj(_obj(data).get("snapshot")).get("environment"))


def _node_name(hostname: Any, path: str) -> str:
    # A redacted report says "<host>": then the file name (srun --output=reports/%N.json) names the node.
    return hostname if isinstance(hostname, str) and hostname and hostname != "<host>" else _stem(path)


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
    torch = _obj(_obj(snapshot.get("install")).get("torch"))
    node = _node_name(environment.get("hostname"), path)
    driver = _obj(nvidia.get("driver_version")).get("value")
    build = torch.get("build_version") or torch.get("version")
    models = Counter(str(g.get("name") or "?") for g in _list(nvidia.get("gpus")) if isinstance(g, dict))
    findings = [f for f in _list(data.get("findings")) if isinstance(f, dict)]
    ids = tuple(sorted({str(f.get("id")) for f in findings if f.get("id")}))
    steps = [s for s in _list(_obj(data.get("plan")).get("steps")) if isinstance(s, dict)]
    return NodeReport(
        node=node,
        path=path,
        driver=str(driver) if driver else UNKNOWN,
        torch_build=str(build) if build else UNKNOWN,
        gpu_models=", ".join(f"{n}x {m}" for m, n in sorted(models.items())) or NONE,
        findings=", ".join(ids) or NONE,
        finding_ids=ids,
        errors=sum(f.get("severity") == "error" for f in findings),
        plan_commands=tuple(
            str(s["command"]) for s in steps if isinstance(s.get("command"), str) and s["command"]
        ),
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
    nodes, seen = [], {}
    for path in files:
        try:
            nodes.append(read_node_report(path, seen))
        except UnreadableReport as exc:
            unreadable.append((path, str(exc)))
    return nodes, unreadable
