"""What the install would change, asked of the installer before anything changes: pip's
``--dry-run --report`` JSON (pip >= 22.2) or uv's dry-run lines, read against the environment
before. Also what did change afterwards (the two freezes compared)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

from doctor.fix import environment as fixenv
from doctor.model.files import read_bytes
from doctor.model.versions import normalize_name
from doctor.plan import installers
from doctor.plan.commands import PIP, UV, dry_run_argv
from doctor.runner import RunResult


@dataclass
class Change:
    name: str
    old: str | None  # None: newly installed
    new: str | None  # None: removed

    def __str__(self) -> str:
        if self.old is None:
            return f"{self.name} {self.new} (new)"
        if self.new is None:
            return f"{self.name} {self.old} (removed)"
        return f"{self.name} {self.old} → {self.new}"


def outside_torch(changes: list[Change]) -> list[Change]:
    """Upgrades, downgrades and removals of packages that are not torch's own (new ones are fine)."""
    return [c for c in changes if c.old is not None and not installers.in_torch_family(c.name)]


@dataclass
class Preview:
    """What the dry run said the install would do."""

    changes: list[Change] = field(default_factory=list)
    download_bytes: int | None = None  # None: unknown (only local files have a size we can read)
    note: str = ""  # e.g. "pip 21.3 has no --dry-run --report: not previewed"
    origins: list[tuple[str, str]] = field(default_factory=list)  # (name, URL of its file): pip's report only

    @property
    def outside(self) -> list[Change]:
        return outside_torch(self.changes)

    @property
    def added(self) -> list[str]:
        """The packages the install would bring in that are not there yet."""
        return [c.name for c in self.changes if c.old is None and c.new is not None]


def parse_pip_report(data: dict, before: dict[str, str], stat=os.path.getsize) -> Preview:
    """pip's ``--report`` JSON (pip >= 22.2) against the environment before -> changes and download size."""
    changes, size, known, origins = [], 0, True, []
    for item in data.get("install") or []:
        meta = item.get("metadata") or {}
        name = normalize_name(meta.get("name") or "")
        new = meta.get("version")
        if before.get(name) != new:
            changes.append(Change(name, before.get(name), new))
        url = ((item.get("download_info") or {}).get("url")) or ""
        origins.append((name, str(url)))
        parsed = urlparse(url)
        if parsed.scheme == "file":
            try:
                size += stat(unquote(parsed.path))
            except OSError:
                known = False
        else:
            known = False
    return Preview(sorted(changes, key=lambda c: c.name), size if known else None, origins=origins)


def read_pip_report(path: str) -> list[tuple[str, str]] | None:
    """(name, URL of its file) of every package pip's ``--report`` says it installed; None when unreadable."""
    try:
        data = json.loads(read_bytes(path, 256 << 20))
    except (OSError, ValueError, RecursionError):
        return None
    try:
        return parse_pip_report(data, {}, stat=lambda _: 0).origins
    except (AttributeError, TypeError):  # not the shape pip writes
        return None


def parse_uv_dry_run(text: str, before: dict[str, str]) -> Preview:
    """uv's dry-run lines ' - torch==2.5.1+cpu' / ' + torch==2.5.1+cu121' -> changes."""
    removed, added = {}, {}
    for line in text.splitlines():
        match = re.match(r"^\s*([+-])\s+([A-Za-z0-9._-]+)==(\S+)", line)
        if match:
            (added if match[1] == "+" else removed)[normalize_name(match[2])] = match[3]
    changes = [
        Change(n, removed.get(n, before.get(n)), added.get(n)) for n in sorted(set(removed) | set(added))
    ]
    return Preview([c for c in changes if c.old != c.new], None)


def diff_freeze(before: dict[str, str], after: dict[str, str]) -> list[Change]:
    names = sorted(set(before) | set(after))
    return [Change(n, before.get(n), after.get(n)) for n in names if before.get(n) != after.get(n)]


def preview_install(
    installer: str, argv: list[str], before: dict[str, str], pip_ver, runner, env: dict | None = None
) -> Preview | RunResult:
    """The dry run of the install ``argv``. A RunResult means it failed (nothing was changed). ``env``: the
    one uv runs in (doctor/fix/sources.py); pip's dry run runs in fix's own."""
    if installer == UV:
        res = runner(dry_run_argv(UV, argv, ""), timeout=fixenv.STEP_TIMEOUT, env=env)
        if not res.ok:
            return res
        return parse_uv_dry_run(res.stdout + "\n" + res.stderr, before)
    if pip_ver is not None and pip_ver < fixenv.MIN_PIP_REPORT:
        return Preview(
            note=f"pip {'.'.join(map(str, pip_ver))} has no --dry-run --report (needs 22.2): "
            "the changes were not previewed; the before/after comparison still runs"
        )
    with tempfile.TemporaryDirectory(prefix="torchdoctor-") as tmp:
        report = os.path.join(tmp, "report.json")
        res = runner(dry_run_argv(PIP, argv, report), timeout=fixenv.STEP_TIMEOUT)
        if not res.ok:
            return res
        try:
            return parse_pip_report(json.loads(read_bytes(report, 256 << 20)), before)
        except (OSError, ValueError, RecursionError) as exc:
            return Preview(note=f"pip's report could not be read ({exc}): changes not previewed")
