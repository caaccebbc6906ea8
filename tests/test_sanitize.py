"""Nothing raw on the terminal: the one sanitising step (doctor/render/sanitize.py), one-line errors
(doctor/errors.py), commands quoted so that they name the same file (doctor/plan/commands.py), and the
overrides a user can set (doctor/probes/overrides.py). Through the real CLI: tests/hostile/cases.py."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from doctor.errors import DoctorError, one_line
from doctor.plan.commands import render_argv
from doctor.probes.nvidia import nvml_query
from doctor.probes.nvidia.nvml import outcome_from_answers, query_nvml_isolated
from doctor.probes.overrides import BadOverride, read_overrides
from doctor.render.sanitize import has_controls, markup, printable, sanitize
from doctor.runner import RunResult

ESC = "\x1b]0;PWNED\x07\x1b[2J"


def test_printable_shows_every_control_character_escaped():
    assert printable("GPU" + ESC) == "GPU\\x1b]0;PWNED\\x07\\x1b[2J"
    assert printable("a\rb\x08c\x7fd\x9be") == "a\\rb\\x08c\\x7fd\\x9be"
    assert printable("py\tthon\nx") == "py\\tthon\\nx"
    assert printable("line one\nline two\tend", multiline=True) == "line one\nline two\tend"
    assert printable("RTX 5090 · ≤ 12.8") == "RTX 5090 · ≤ 12.8"  # text is not a control character
    assert not has_controls(printable("x" + ESC))


def test_sanitize_walks_keys_and_values_and_keeps_prose_multiline():
    data = {"name\x1b": ["GPU" + ESC], "detail": "one\ntwo\x1b", "path": "/a\nb", "n": 3, "ok": None}
    assert sanitize(data) == {
        "name\\x1b": ["GPU\\x1b]0;PWNED\\x07\\x1b[2J"],
        "detail": "one\ntwo\\x1b",
        "path": "/a\\nb",
        "n": 3,
        "ok": None,
    }


def test_markup_is_text_not_tags():
    assert markup("GPU [/] [bold]x[/bold]") == "GPU \\[/] \\[bold]x\\[/bold]"


def test_a_doctor_error_is_one_printable_line():
    err = DoctorError("--python /x/py" + ESC + "\nstep 2/2: curl evil | sh")
    assert "\n" not in str(err) and "\x1b" not in str(err) and "\\x1b]0;PWNED" in str(err)
    assert len(one_line("x" * 5000)) == 1000


@pytest.mark.parametrize("arg", ["/a/py\tthon", "x" + ESC, "it's\tx", "new\nline", "back\\slash\x01"])
def test_commands_with_control_characters_are_ansi_c_quoted_and_name_the_same_argument(arg):
    line = render_argv(["python", arg, "-m", "pip"])
    assert not has_controls(line)
    # bash reads it back as the very same argument
    out = subprocess.run(["bash", "-c", f'printf "%s\\0" {line}'], capture_output=True, timeout=30).stdout
    assert out.split(b"\0")[:2] == [b"python", arg.encode()]


def test_plain_arguments_keep_their_usual_quoting():
    assert render_argv(["/x y/python", "-m", "pip", "torch==2.7.1+cu128"]) == (
        shlex.quote("/x y/python") + ' -m pip "torch==2.7.1+cu128"'
    )


@pytest.mark.parametrize(
    "env,message",
    [
        ({"TORCHDOCTOR_DRIVER_VERSION": "abc"}, "not a driver version"),
        ({"TORCHDOCTOR_DRIVER_VERSION": "9" * 5000 + ".1"}, "not a driver version"),
        ({"TORCHDOCTOR_CUDA_DRIVER_VERSION": "twelve"}, "not a CUDA version"),
        ({"TORCHDOCTOR_NVIDIA_TIMEOUT": "-1"}, "above 0"),
        ({"TORCHDOCTOR_NVIDIA_TIMEOUT": "nan"}, "above 0"),
        ({"TORCHDOCTOR_NVIDIA_TIMEOUT": "inf"}, "above 0"),
        ({"TORCHDOCTOR_NVIDIA_TIMEOUT": "0"}, "above 0"),
    ],
)
def test_an_override_that_cannot_mean_anything_is_refused(env, message):
    with pytest.raises(BadOverride, match=message) as caught:
        read_overrides(env)
    assert len(str(caught.value)) < 200  # the value is shown cut, escaped


def test_good_overrides_are_read():
    forced = read_overrides(
        {
            "TORCHDOCTOR_DRIVER_VERSION": " 572.16 ",
            "TORCHDOCTOR_CUDA_DRIVER_VERSION": "12080",
            "TORCHDOCTOR_NVIDIA_TIMEOUT": "2.5",
            "TORCHDOCTOR_NVML": "0",
        }
    )
    assert (forced.driver, forced.cuda, forced.nvidia_timeout, forced.nvml) == ("572.16", "12.8", 2.5, False)


# --- NVML in a child: what comes back is data, whatever the library did --------------------------------


class _Nvml:
    """Just enough of pynvml for nvml_query.query."""

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return b"570.124.04"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 12080

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return object()

    def nvmlDeviceGetName(self, h):
        return "NVIDIA GeForce RTX 5090" + ESC

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return (12, 0)

    def nvmlDeviceGetMemoryInfo(self, h):
        return type("Memory", (), {"total": 32607 << 20})()

    def nvmlDeviceGetUUID(self, h):
        raise RuntimeError("Not Supported")


def test_the_childs_answers_round_trip_through_json():
    data = json.loads(json.dumps(nvml_query.query(_Nvml())))
    outcome = outcome_from_answers(data)
    assert outcome.ok and outcome.driver.value == "570.124.04" and outcome.cuda.value == "12.8"
    [gpu] = outcome.gpus
    assert gpu.compute_capability.value == "12.0" and gpu.memory_total_mib == 32607 and gpu.uuid is None
    assert gpu.name.startswith("NVIDIA GeForce RTX 5090")  # kept as is: sanitised where it is shown


def test_a_crashing_library_is_a_fact_and_junk_on_stdout_is_skipped(tmp_path):
    (tmp_path / "libnvidia-ml.so.1").write_bytes(b"")  # where the loader looks: the child is started
    env = {"LD_LIBRARY_PATH": str(tmp_path)}
    crashed = query_nvml_isolated(runner=lambda argv, **kw: RunResult(argv, -11), env=env)
    assert not crashed.ok and "crashed the probe (SIGSEGV)" in crashed.message
    answer = json.dumps(
        {"ok": False, "error": {"type": "NVMLError_DriverNotLoaded", "value": 9, "message": "x"}}
    )
    noisy = query_nvml_isolated(runner=lambda argv, **kw: RunResult(argv, 0, "hello from the "
        "library\n" + answer),
                                env=env)
    assert noisy.code == 9 and noisy.message == "x"
    hung = query_nvml_isolated(1.0, runner=lambda argv, **kw: RunResult(argv, None, timed_out=True), env=env)
    assert hung.timed_out and "timed out after 1s" in hung.message


def test_no_child_where_the_loader_cannot_find_the_library(tmp_path):
    def refuse(argv, **kw):
        raise AssertionError("no NVML library anywhere: no child should start")

    from doctor.probes.nvidia import nvml

    if not nvml.nvml_library_absent({}):
        pytest.skip("this machine has an NVML library")
    outcome = query_nvml_isolated(runner=refuse, env={"LD_LIBRARY_PATH": str(tmp_path)})
    assert outcome.code == 12 and outcome.message.startswith("NVML Shared Library Not Found")
