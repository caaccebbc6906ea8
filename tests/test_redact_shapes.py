"""Every planted secret shape of tests/hostile/secrets.json through the redactor directly (fast, and the first
place to look when a shape leaks), and what must survive redaction (versions, hashes, bus ids, commands).
The shapes in every shared output of the real CLI: tests/hostile/test_hostile_cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.render.redact import redact_report

SECRETS = json.loads((Path(__file__).parent / "hostile" / "secrets.json").read_text(encoding="utf-8"))[
    "secrets"
]


def _report(
    text: str, env: dict | None = None, hostname: str = "", path: str = "/opt/venv/bin/python"
) -> dict:
    return {
        "snapshot": {
            "environment": {"hostname": hostname, "env": env or {}},
            "interpreter": {"path": path},
            "runtime": {"stderr_tail": text, "detail": "ImportError: " + text.replace("\n", "; ")},
        }
    }


@pytest.mark.parametrize("secret", SECRETS, ids=[s["id"] for s in SECRETS])
def test_every_planted_shape_is_redacted(secret):
    where, plant = secret["where"], secret["plant"]
    env, hostname, path, text = {}, "", "/opt/venv/bin/python", ""
    if where == "stderr":
        text = plant
    elif where.startswith("env:"):
        env = {where[4:]: plant}
        text = f"{where[4:]}={plant}"
    elif where == "gpu_name":
        text = plant
    elif where == "hostname":
        hostname, text = plant, f"socket.gaierror: cannot reach {secret['value']}"
    elif where == "path":
        path = plant
    out = json.dumps(redact_report(_report(text, env, hostname, path), env={}, hostname="box", username="me",
                                   home="/home/me"))
    assert secret["value"] not in out, out


@pytest.mark.parametrize(
    "text",
    [
        "torch 2.7.1+cu128 needs driver 570.124.04; cuda-toolkit==13.0.3.0",
        "git_version 9c1e7a4f2b8d6035e1f4a7c9b2d8e6f0a1b2c3d4",  # a 40-hex git hash: not an AWS secret
        "PCI 0000:01:00.0, compute capability 12.0, 32607 MiB",
        "python -m pip install \"torch==2.7.1+cu128\" --index-url https://download.pytorch.org/whl/cu128",
        "CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO OMP_NUM_THREADS=8",
        "sha256=1f3a2b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70",
        "GPU 0: NVIDIA GeForce RTX 5090",
    ],
)
def test_what_is_no_secret_survives(text):
    out = redact_report({"detail": text}, env={}, hostname="box", username="me", home="/home/me")
    assert out["detail"] == text
