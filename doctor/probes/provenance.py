"""Where this machine's torch may come from besides pip: an NVIDIA NGC container or a Jetson (L4T).

Read from the environment and from files under ``root`` (``TORCHDOCTOR_SYSROOT``), never raising:

- ``$NVIDIA_PYTORCH_VERSION`` ("25.01") is set in NVIDIA's NGC PyTorch containers; NVIDIA's own builds carry
  the same YY.MM in their version ("2.6.0a0+ecf3bae40a.nv25.01").
- ``/etc/nv_tegra_release`` exists on Jetson (Jetson Linux, formerly L4T); its first line reads
  ``# R36 (release), REVISION: 4.3, GCID: ...``, i.e. L4T 36.4.3, which names the JetPack (the table's
  ``jetpack`` rows). ``/proc/device-tree/model`` names the module ("NVIDIA Jetson AGX Orin Developer Kit").
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from doctor.model.snapshot import Provenance
from doctor.probes.environment.files import read_text

_TEGRA_RE = re.compile(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*(\d+)(?:\.(\d+))?", re.IGNORECASE)


def parse_tegra_release(text: str | None) -> tuple[str | None, str | None]:
    """(the first line, the L4T release "36.4.3") of /etc/nv_tegra_release; (None, None) without it (pure)."""
    if not text:
        return None, None
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")[:200]
    match = _TEGRA_RE.search(first)
    if not match:
        return first or None, None
    major, minor, patch = match.group(1), match.group(2), match.group(3)
    return (
        first,
        f"{int(major)}.{int(minor)}.{int(patch)}" if patch is not None else f"{int(major)}.{int(minor)}",
    )


def probe_provenance(root: str = "/", env: Mapping[str, str] | None = None) -> Provenance:
    env = env or {}
    facts = Provenance()
    ngc = (env.get("NVIDIA_PYTORCH_VERSION") or "").strip()
    if ngc:
        facts.nvidia_pytorch_version = ngc[:40]
    facts.tegra_release, facts.l4t = parse_tegra_release(read_text(root, "/etc/nv_tegra_release", 4096))
    model = read_text(root, "/proc/device-tree/model", 256)
    if model:
        facts.device_model = model.replace("\0", "").strip()[:200] or None
    return facts
