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


# --- the package list against what the PyPI wheel declares (the table's requires_dist) -----------------


def _linux(*packages: str) -> str:
    return _paste("OS: Ubuntu 22.04.4 LTS (x86_64)", "Python version: 3.10.12 (64-bit runtime)",
                  "Is CUDA available: N/A", "GPU models and configuration: Could not collect",
                  "Nvidia driver version: Could not collect", "", "Versions of relevant libraries:",
                  *(f"[pip3] {p}" for p in packages))


def _declared(diag):
    return {f.id: f for f in diag.findings if f.rule == "declared-requirements"}


def test_a_cudnn_wheel_another_package_pinned_is_judged_against_torchs_pin(table):
    # torch 2.1.1 from PyPI pins nvidia-cudnn-cu12==8.9.2.26 (its METADATA); jax[cuda12] brought 9.5.1.17
    row = table.declared_requirements("2.1.1", "linux-x86_64")
    present = [r.split(";")[0].replace(" (", "").replace(")", "") for r in row.requires
               if r.startswith(("nvidia-", "triton")) and "cudnn" not in r]
    diag = diagnose(parse_collect_env(_linux("nvidia-cudnn-cu12==9.5.1.17", "torch==2.1.1", *present)), table)
    found = _declared(diag)
    assert set(found) == {"torch-cudnn-requirement-unmet"}
    cudnn = found["torch-cudnn-requirement-unmet"]
    assert cudnn.severity == "error" and "nvidia-cudnn-cu12==8.9.2.26" in " ".join(cudnn.fix.commands)
    assert cudnn.evidence["declared_by"] == row.wheel and "METADATA" in cudnn.evidence["table.source"]


def test_cuda_wheels_missing_from_a_list_that_shows_them_are_missing(table):
    diag = diagnose(parse_collect_env(_linux("nvidia-cudnn-cu12==8.9.2.26", "torch==2.1.1")), table)
    found = _declared(diag)["torch-requirements-unmet"]
    assert found.severity == "error" and "nvidia-cublas-cu12==12.1.3.1" in " ".join(found.fix.commands)
    assert "filelock" not in found.detail  # collect_env never lists pure-Python packages: not judged


def test_a_list_without_any_cuda_wheel_cannot_say_they_are_missing(table):
    # collect_env before torch 2.6 lists no nvidia-* wheel at all
    diag = diagnose(parse_collect_env(_linux("torch==2.0.1")), table)
    assert not _declared(diag)
    note = str(next(c.note for c in diag.checks if c.rule == "declared-requirements"))
    assert _checks(diag)["declared-requirements"] == "unknown"
    assert "nvidia-cudnn-cu11==8.5.0.96" in note and "before torch 2.6" in note


@pytest.mark.parametrize("torch, state", [("2.1.1+cu118", "skipped"), ("2.1.1.post9", "unknown")])
def test_builds_the_table_cannot_speak_for(table, torch, state):
    # a local tag: a wheel of another index; a version the table has no row for: unknown, never passed
    diag = diagnose(parse_collect_env(_linux("nvidia-cudnn-cu12==8.9.2.26", f"torch=={torch}")), table)
    assert not _declared(diag) and _checks(diag)["declared-requirements"] == state


def test_condas_pytorch_is_not_judged_against_the_pypi_wheel(table):
    # conda's pytorch 2.1.1 shows in pip's list without a local tag, but its CUDA libraries are conda
    # packages: a pip nvidia-* wheel beside it (another package's) does not make the others missing
    text = _linux("nvidia-nccl-cu12==2.19.3", "torch==2.1.1") + (
        "[conda] pytorch                   2.1.1           py3.10_cuda12.1_cudnn8.9.2_0    pytorch\n")
    diag = diagnose(parse_collect_env(text), table)
    assert not _declared(diag) and _checks(diag)["declared-requirements"] != "passed"


def test_markers_are_evaluated_for_the_pasted_machine(table):
    # torch 2.7.0's aarch64 wheel declares its CUDA wheels for platform_machine == "x86_64" only
    text = _linux("nvidia-cudnn-cu12==9.1.0.70", "torch==2.7.0").replace("(x86_64)", "(aarch64)")
    diag = diagnose(parse_collect_env(text), table)
    assert not _declared(diag) and _checks(diag)["declared-requirements"] == "passed"


def test_an_error_no_signature_knows_is_still_the_import_error_when_torch_is_in_it():
    # the title of pytorch/pytorch#138986: no exception name, no WinError number
    line = 'Error loading ".venv\\Lib\\site-packages\\torch\\lib\\c10_xpu.dll" or one of its dependencies'
    snap = parse_collect_env(line + "\n\n" + _paste(*_WINDOWS))
    assert snap.environment.collect_env.pasted_errors is None
    assert snap.environment.collect_env.pasted_import_error == line
    assert snap.runtime.status == "import-error" and snap.runtime.detail.endswith(line)


def test_the_pasted_machine_is_spelled_as_markers_read_it_on_windows():
    # PEP 508's platform_machine is platform.machine(): "AMD64" on 64-bit Windows, not the table's "x86_64"
    from doctor.rules.dependencies import _paste_markers

    text = _paste("OS: Microsoft Windows 11 Pro (x86_64)", "Python version: 3.12.5 (64-bit runtime)")
    markers = _paste_markers(parse_collect_env(text))
    assert markers["platform_machine"] == "AMD64" and markers["sys_platform"] == "win32"
