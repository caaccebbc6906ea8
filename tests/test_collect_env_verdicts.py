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


_WINDOWS = ("OS: Microsoft Windows 11", "Python version: 3.12 (64-bit runtime)", "Is CUDA available: N/A",
            "GPU models and configuration: Could not collect", "Nvidia driver version: Could not collect", "",
            "Versions of relevant libraries:")
_FBGEMM = ('OSError: [WinError 126] The specified module could not be found. Error loading "C:\\Users\\u\\'
           'AppData\\Local\\Programs\\Python\\Python312\\Lib\\site-packages\\torch\\lib\\fbgemm.dll" or '
           'one of its dependencies.')


def test_a_traceback_pasted_before_the_text_is_the_import_error_with_its_cause(table):
    text = "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n" + _FBGEMM + "\n\n"
    snap = parse_collect_env(text + _paste(*_WINDOWS))
    pasted = snap.environment.collect_env.pasted_errors
    assert [p.signature for p in pasted] == ["windows-dll-load-failed"]
    assert pasted[0].groups["dll"].endswith("torch\\lib\\fbgemm.dll") and pasted[0].line == _FBGEMM
    assert snap.runtime.status == "import-error" and _FBGEMM in snap.runtime.detail
    diag = diagnose(snap, table)
    found = next(f for f in diag.findings if f.id == "torch-import-error")
    assert found.severity == "error" and "libomp140.x86_64.dll" in found.detail and "..." not in found.title
    assert "Install torch 2.4.1 or later" in str(found.fix.summary)


def test_a_traceback_pasted_after_the_library_list_counts_too(table):
    snap = parse_collect_env(_paste(*_WINDOWS) + "\n" + _FBGEMM + "\n")
    assert snap.runtime.status == "import-error"


def test_na_without_packages_or_error_is_unknown_and_says_how_to_find_out(table):
    snap = parse_collect_env(_paste(*_WINDOWS))
    assert snap.environment.collect_env.pasted_errors is None  # nothing around the text: nothing matched
    diag = diagnose(snap, table)
    assert not [f for f in diag.findings if f.severity == "error"]
    note = str(next(c.note for c in diag.checks if c.rule == "runtime"))
    assert _checks(diag)["runtime"] == "unknown" and 'py -c "import torch"' in note


def test_an_error_that_is_not_torchs_import_does_not_make_one():
    # a known message, but nothing shows `import torch` failing: N/A stays unexplained
    snap = parse_collect_env("nvidia-smi: command not found\n\n" + _paste(*_WINDOWS))
    assert snap.environment.collect_env.pasted_errors[0].finding == "nvidia-driver-missing"
    assert snap.runtime.status == "skipped"
