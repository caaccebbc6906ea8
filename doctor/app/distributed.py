"""`torchdoctor distributed`: torchrun in the target interpreter; rank 0's report rendered here."""

from __future__ import annotations

import json
from pathlib import Path

from doctor import exitcodes
from doctor.app.options import CheckOptions, choose_interpreter
from doctor.app.output import deliver
from doctor.errors import DoctorError


def run_distributed(python: str | None, nproc: int, timeout: float, as_json: bool, output: Path | None,
                    quiet: bool = False) -> int:
    from doctor.app.options import validate_distributed
    from doctor.distributed.launch import run_local
    from doctor.probes.nvidia.kernel import read_pci_nvidia_devices
    from doctor.render.distributed import render_text
    from doctor.render.sanitize import printable

    validate_distributed(nproc, timeout, len(read_pci_nvidia_devices() or []))
    path, reason = choose_interpreter(python)
    if path is None:
        raise DoctorError(f"no interpreter to run torchrun with: {reason}")
    report, result = run_local(path, nproc, timeout)
    if report is None:
        tail = (result.stderr or result.stdout or "").strip().splitlines()[-1:] or [""]
        raise DoctorError(f"torchrun in {path} produced no report ({result.describe()}): {tail[0]}",
                          exitcodes.FINDINGS)
    # JSON stays exact; the text view of what the ranks reported (host and GPU names...) is made printable.
    text = json.dumps(report, indent=2) + "\n" if as_json else printable(render_text(report), multiline=True)
    deliver(text, CheckOptions(output=output, quiet=quiet))
    return int(report.get("summary", {}).get("exit_code", exitcodes.OK))
