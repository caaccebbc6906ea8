"""What `check --from` concludes from collect_env texts that hold less than a probe would: no CPU
architecture, a traceback pasted around the text, a package list judged against torch's declared pins.
In-process (parse_collect_env, then diagnose with the bundled table)."""

from __future__ import annotations

import pytest

from doctor.app.diagnose import diagnose
from doctor.inputs.collect_env import parse_collect_env
from doctor.table.load import load_table


@pytest.fixture(scope="module")
def table():
    return load_table()


def _checks(diag) -> dict[str, str]:
    return {c.rule: c.status for c in diag.checks}


def _paste(*lines: str) -> str:
    return "\n".join(("Collecting environment information...", "PyTorch version: N/A",
                      "Is debug build: N/A", "CUDA used to build PyTorch: N/A", "") + lines) + "\n"


@pytest.mark.parametrize("python, verdict",
                         [("3.10.11", "unknown"), ("3.12.5", "unknown"), ("3.5.2", "error")])
def test_python_without_architecture_is_judged_on_every_platform_of_the_os(table, python, verdict):
    # "OS: Microsoft Windows" and "(64-bit runtime)": no CPU architecture. Not "no wheels on windows-".
    text = _paste("OS: Microsoft Windows", f"Python version: {python} (64-bit runtime)",
                  "Is CUDA available: N/A", "GPU models and configuration: Could not collect",
                  "Nvidia driver version: Could not collect")
    diag = diagnose(parse_collect_env(text), table)
    found = [f for f in diag.findings if f.id == "python-unsupported"]
    if verdict == "unknown":
        assert not found and _checks(diag)["python"] == "unknown"
        assert "windows-x86_64" in str(next(c.note for c in diag.checks if c.rule == "python"))
    else:
        assert found and "on windows" in found[0].title and "windows-" not in found[0].title
