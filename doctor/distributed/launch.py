"""Starting the check from the torchdoctor CLI: torchrun in the target interpreter, through the runner.

Imported by ``torchdoctor distributed``, which never imports torch: only the stdlib at module level.
The ranks themselves start in doctor/distributed/entry.py (``-m doctor.distributed``).
"""

from __future__ import annotations

import json
import os
from typing import Any

# Seconds for the rendezvous and for each collective; the rank's --timeout defaults to it too.
DEFAULT_TIMEOUT_S = 60.0
MAX_REPORT_BYTES = 64 << 20  # rank 0's report of many ranks; anything larger is not one


def launch_command(python: str, nproc_per_node: int, args: list[str] | None = None) -> list[str]:
    """argv to run the check on this node with the target interpreter's torchrun."""
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(nproc_per_node),
        "-m",
        "doctor.distributed",
    ] + list(args or [])


def run_local(
    python: str,
    nproc_per_node: int,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    extra_args: list[str] | None = None,
    runner: Any = None,
    env: dict[str, str] | None = None,
) -> tuple[dict | None, Any]:
    """Run torchrun on this node; return (rank 0's report or None, the RunResult)."""
    import tempfile

    from doctor.model.files import read_bytes
    from doctor.runner import run

    runner = runner or run
    child_env = dict(os.environ if env is None else env)
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, child_env.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="torchdoctor-dist-") as tmp:
        out = os.path.join(tmp, "report.json")
        args = ["--json", "-o", out, "--timeout", str(timeout_s)] + list(extra_args or [])
        argv = launch_command(python, nproc_per_node, args)
        # rendezvous + collectives + sweep each bounded by timeout_s; torchrun start-up on top
        # torchrun starts every rank in a session of its own: stopped, the ranks are looked for as well
        # (by the runner's owner mark), and each rank's own watchdog ends it at its deadline.
        kwargs = {"sessions": True} if runner is run else {}
        result = runner(argv, timeout=4 * timeout_s + 60, env=child_env, **kwargs)
        try:
            data = json.loads(read_bytes(out, MAX_REPORT_BYTES))
        except (OSError, ValueError, RecursionError):
            return None, result
        return (data if isinstance(data, dict) else None), result
