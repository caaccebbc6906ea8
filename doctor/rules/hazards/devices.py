"""Device selection: CUDA_VISIBLE_DEVICES parsed the way torch parses it, against the GPUs the driver
lists."""

from __future__ import annotations

from typing import Any

from doctor.compat.assessment import Assessment
from doctor.model import shells
from doctor.model import snapshot as S
from doctor.model.environment import VisibleDevices
from doctor.model.findings import INFO, WARNING, Finding, Fix
from doctor.model.i18n import Msg
from doctor.rules import skipped
from doctor.rules.hazards.common import missing, usable_gpus

# --- CUDA_VISIBLE_DEVICES -----------------------------------------------------------------------


def _strtoul(text: str) -> int:
    """torch's ``_strtoul``: the integer a string starts with, -1 when none (W213 torch/cuda/__init__.py)."""
    if not text:
        return -1
    idx = 0
    for idx, char in enumerate(text):
        if not (char.isdigit() or (idx == 0 and char in "+-")):
            break
        if idx + 1 == len(text):
            idx += 1
    try:
        return int(text[:idx]) if idx > 0 else -1
    except ValueError:  # a lone "+" or "-": torch would raise here; CUDA ignores the entry
        return -1


def parse_visible_devices(value: str) -> dict[str, Any]:
    """Parse CUDA_VISIBLE_DEVICES the way torch's ``_parse_visible_devices`` does (torch/cuda/__init__.py).

    Returns {"kind": "index"|"uuid"|"mig", "entries": [...], "duplicate": entry or None,
    "ignored": [entries after the first invalid/negative one]}. A repeated entry empties the list.
    """
    raw = value.split(",")
    if value.startswith(("GPU-", "MIG-")):
        prefix = value[:4]
        kind = "uuid" if prefix == "GPU-" else "mig"
        entries: list[Any] = []
        for pos, elem in enumerate(raw):
            if elem in entries:
                return {"kind": kind, "entries": [], "duplicate": elem, "ignored": []}
            if not elem.startswith(prefix):
                return {"kind": kind, "entries": entries, "duplicate": None, "ignored": raw[pos:]}
            entries.append(elem)
        return {"kind": kind, "entries": entries, "duplicate": None, "ignored": []}
    entries = []
    for pos, elem in enumerate(raw):
        number = _strtoul(elem.strip())
        if number in entries:
            return {"kind": "index", "entries": [], "duplicate": elem.strip(), "ignored": []}
        if number < 0:
            return {"kind": "index", "entries": entries, "duplicate": None, "ignored": raw[pos:]}
        entries.append(number)
    return {"kind": "index", "entries": entries, "duplicate": None, "ignored": []}


def map_visible_devices(parsed: dict[str, Any], gpus: list[S.Gpu]) -> tuple[list[S.Gpu], list[str]]:
    """The GPUs torch will see, in order, and the entries that match none (they end the list)."""
    seen: list[S.Gpu] = []
    entries = parsed["entries"]
    for pos, entry in enumerate(entries):
        if parsed["kind"] == "index":
            match = next((g for g in gpus if g.index == entry), None)
        else:
            hits = [g for g in gpus if g.uuid and g.uuid.startswith(entry)]
            match = hits[0] if len(hits) == 1 else None  # ambiguous prefixes match nothing
        if match is None or match in seen:
            return seen, [str(e) for e in entries[pos:]]
        seen.append(match)
    return seen, []


def _describe(gpu: S.Gpu) -> str:
    return f"GPU {gpu.index} {gpu.name}" + (f" ({gpu.uuid})" if gpu.uuid else "")


def check_visible_devices(facts: Assessment) -> list[Finding]:
    snap = facts.snap
    gap = missing(snap, snap.environment.visible_devices, "CUDA_VISIBLE_DEVICES")
    if gap is not None:
        return gap
    visible = snap.environment.visible_devices or VisibleDevices()
    build = facts.build
    if build is not None and build.kind == "rocm":
        # ROCm reads HIP_/ROCR_VISIBLE_DEVICES first; not modelled here
        return skipped(Msg("a ROCm build selects devices with HIP_VISIBLE_DEVICES, which is not checked"))
    gpus = usable_gpus(snap)
    value = visible.CUDA_VISIBLE_DEVICES
    order = visible.CUDA_DEVICE_ORDER
    mixed = len({g.name for g in gpus}) > 1
    order_note = ""
    if mixed and order != "PCI_BUS_ID":
        order_note = (
            " These GPUs differ, and CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, "
            "so CUDA's indices may not be nvidia-smi's."
        )
    if value is None:
        if mixed and order != "PCI_BUS_ID":
            return [
                Finding(
                    "cuda-device-order-differs",
                    INFO,
                    Msg("cuda:0 may not be nvidia-smi's GPU 0 on this mixed-GPU machine"),
                    Msg("CUDA numbers devices fastest first by default, nvidia-smi and NVML by PCI bus, so "
                        "cuda:N and "
                    "nvidia-smi's GPU N can be different cards. Set CUDA_DEVICE_ORDER=PCI_BUS_ID so both "
                    "agree."),
                    {"gpus": [_describe(g) for g in gpus], "CUDA_DEVICE_ORDER": order},
                    Fix(Msg("Make CUDA number GPUs like "
                        "nvidia-smi."), ["export CUDA_DEVICE_ORDER=PCI_BUS_ID"]),
                )
            ]
        return []
    parsed = parse_visible_devices(value)
    evidence = {
        "CUDA_VISIBLE_DEVICES": value,
        "parsed": [str(e) for e in parsed["entries"]],
        "CUDA_DEVICE_ORDER": order,
        "gpus": [_describe(g) for g in gpus],
    }
    expect_gpu = bool(gpus) or (build is not None and build.kind == "cuda")
    severity = WARNING if expect_gpu else INFO
    if parsed["duplicate"] is not None:
        unique = list(dict.fromkeys(e.strip() for e in value.split(",")))
        return [
            Finding(
                "cuda-visible-devices-duplicate",
                severity,
                Msg("CUDA_VISIBLE_DEVICES={value!r} repeats {duplicate!r}, which hides every "
                    "GPU", value=value, duplicate=parsed['duplicate']),
                Msg("CUDA (and torch, which parses it the same way) treats a repeated entry as an invalid "
                    "list and "
                "shows no device at all: torch.cuda.is_available() == False."),
                evidence | {"duplicate": parsed["duplicate"]},
                Fix(Msg("List each GPU once."), ["export "
                    f"CUDA_VISIBLE_DEVICES={shells.quote(','.join(unique))}"]),
            )
        ]
    shown, unmatched = map_visible_devices(parsed, gpus) if gpus and parsed["kind"] != "mig" else (None, [])
    ignored = [str(e).strip() for e in parsed["ignored"]] + unmatched
    if not parsed["entries"] or shown == []:
        reason = (
            Msg("is empty")
            if not value.strip()
            else Msg("starts with {ignored!r}, "
                "which ", ignored=ignored[0]) + (Msg("matches no GPU") if unmatched else Msg("is not a GPU"))
        )
        return [
            Finding(
                "cuda-visible-devices-hides-all",
                severity,
                Msg("CUDA_VISIBLE_DEVICES={value!r} hides every GPU", value=value),
                Msg("The value {reason}; CUDA stops reading the list at the first entry that is negative, "
                    "invalid or "
                "matches no device, so torch sees no GPU (torch.cuda.is_available() == "
                "False).", reason=reason)
                + (Msg(" This machine has {len} GPU(s).", len=len(gpus)) if gpus else ""),
                evidence | {"ignored": ignored},
                Fix(
                    Msg("Unset it, or list the GPUs to use (nvidia-smi -L shows indices and UUIDs)."),
                    ["unset CUDA_VISIBLE_DEVICES", "nvidia-smi -L"],
                ),
            )
        ]
    findings = []
    if ignored:
        kept = [str(e) for e in parsed["entries"]][: len(shown) if shown is not None else None]
        findings.append(
            Finding(
                "cuda-visible-devices-no-match",
                WARNING,
                Msg("CUDA_VISIBLE_DEVICES={value!r}: {map} "
                    "ignored", value=value, map=', '.join(map(repr, ignored))),
                Msg("CUDA stops at the first entry that is invalid, negative or matches no GPU, and drops "
                    "the rest; torch "
                "sees only {kept}.", kept=', '.join(kept)) + (Msg(" This machine has {len} "
                    "GPU(s).", len=len(gpus)) if gpus else ""),
                evidence | {"ignored": ignored},
                Fix(
                    Msg("List only GPUs that exist (nvidia-smi -L shows indices and UUIDs)."),
                    [f"export CUDA_VISIBLE_DEVICES={shells.quote(','.join(kept))}", "nvidia-smi -L"],
                ),
            )
        )
    if shown and (len(shown) < len(gpus) or [g.index for g in shown] != sorted(g.index for g in shown)):
        mapping = "; ".join(f"cuda:{i} = {_describe(g)}" for i, g in enumerate(shown))
        by_index = parsed["kind"] == "index"
        findings.append(
            Finding(
                "cuda-visible-devices-subset",
                INFO,
                Msg("torch sees {len} of {len2} GPUs: "
                    "{mapping}", len=len(shown), len2=len(gpus), mapping=mapping),
                Msg("CUDA_VISIBLE_DEVICES={value!r} selects and orders the GPUs torch sees.", value=value)
                + (order_note if by_index else ""),
                evidence | {"mapping": mapping},
                Fix(
                    Msg("Set CUDA_DEVICE_ORDER=PCI_BUS_ID so the indices mean nvidia-smi's."),
                    ["export CUDA_DEVICE_ORDER=PCI_BUS_ID"],
                )
                if by_index and order_note
                else None,
            )
        )
    return findings
