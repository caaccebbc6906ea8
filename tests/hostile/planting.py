"""Planting the secret shapes of secrets.json: in a report to read back with ``--from``, and in a live
machine whose torch import fails with them (tests/hostile/README.md, "Secrets in shared output")."""

from __future__ import annotations

import json
from pathlib import Path

from fakeenv import make_fake_env, site_packages
from hostile import RTX5090, write_fake_nvidia_smi


def stderr_text(secrets: list[dict]) -> str:
    """What the failing torch import prints: every stderr plant, and the echoes of env and host plants."""
    lines = ["Traceback (most recent call last):", '  File "<string>", line 1, in <module>']
    for s in secrets:
        where = s["where"]
        if where == "stderr":
            lines.append(s["plant"])
        elif where.startswith("env:"):
            lines.append(f"{where[4:]}={s['plant']}")
        elif where == "hostname":
            lines.append(f"socket.gaierror: cannot reach {s['value']}")
    return "\n".join(lines)


def env_plants(secrets: list[dict]) -> dict[str, str]:
    return {s["where"][4:]: s["plant"] for s in secrets if s["where"].startswith("env:")}


def gpu_name(secrets: list[dict]) -> str:
    names = [s["plant"] for s in secrets if s["where"] == "gpu_name"]
    return " ".join(names) if names else RTX5090["name"]


def planted_report(report: dict, secrets: list[dict]) -> dict:
    """The fake machine's report with every secret planted where secrets.json says."""
    data = json.loads(json.dumps(report))
    snap = data["snapshot"]
    text = stderr_text(secrets)
    snap["runtime"].update(
        status="import-error",
        detail="ImportError: " + import_error(secrets),
        stderr_tail=text,
    )
    snap["environment"]["env"] = env_plants(secrets)
    snap["nvidia"]["gpus"][0]["name"] = gpu_name(secrets)
    for s in secrets:
        if s["where"] == "hostname":
            snap["environment"]["hostname"] = s["plant"]
        elif s["where"] == "path":
            snap["interpreter"]["path"] = s["plant"]
    return data


def import_error(secrets: list[dict]) -> str:
    """The ImportError's message: one line quoting every stderr plant and env echo."""
    return "libcudart.so.12: cannot open shared object file; " + "; ".join(
        stderr_text(secrets).splitlines()[2:]
    )


def planted_machine(root: Path, secrets: list[dict]) -> tuple[Path, Path, dict[str, str]]:
    """(python, bin folder, environment variables) of a live machine carrying the planted secrets: torch
    2.6.0+cu126 whose import prints the stderr plants and raises an ImportError quoting the last one, an
    nvidia-smi naming GPU 0 with the gpu_name plants, and the env plants as variables of the run."""
    live = [s for s in secrets if s.get("live", True)]
    py = make_fake_env(root / "venv", torch="2.6.0+cu126", cuda="12.6")
    text = stderr_text(live)
    init = site_packages(root / "venv") / "torch" / "__init__.py"
    init.write_text(
        f"import sys\nsys.stderr.write({text!r} + '\\n')\nraise ImportError({import_error(live)!r})\n"
    )
    bin_dir = root / "bin"
    write_fake_nvidia_smi(bin_dir, [dict(RTX5090, name=gpu_name(live))])
    return py, bin_dir, env_plants(live)
