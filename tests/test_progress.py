"""Progress on stderr while a check runs, when stderr is a terminal: seen through a pseudo-terminal during a
real CPU-torch smoke test (tests/realtorch.py); nothing when stderr is piped, with --json or with -q."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from realtorch import real_cpu_torch_python

from doctor.probes.runtime import ProgressReader, short_path

REPO = Path(__file__).resolve().parents[1]
pty = pytest.importorskip("pty")


def env_for(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    sysroot = tmp_path / "sysroot"
    sysroot.mkdir(exist_ok=True)
    env.update(PYTHONPATH=str(REPO), TORCHDOCTOR_NVML="0", TORCHDOCTOR_SYSROOT=str(sysroot), TERM="xterm",
               COLUMNS="120")
    env.pop("NO_COLOR", None)
    return env


def run_with_terminal_stderr(
    args: list[str], env: dict[str, str], timeout: float = 180
) -> tuple[int, str, str]:
    """The CLI with stderr on a pseudo-terminal and stdout on a pipe: (exit code, stdout, what the terminal
    got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "doctor", *args], stdout=subprocess.PIPE, stderr=slave,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other side closed: the process is done
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    out = proc.stdout.read().decode()
    return proc.wait(timeout=10), out, seen.decode("utf-8", "replace")


@pytest.mark.slow
def test_a_terminal_sees_what_the_smoke_test_is_doing(tmp_path_factory, tmp_path):
    python = real_cpu_torch_python(tmp_path_factory)
    code, out, terminal = run_with_terminal_stderr(["check", "--python", str(python)], env_for(tmp_path))
    assert code == 0, out + terminal
    assert f"importing torch in {short_path(str(python))}" in terminal
    # Which steps are drawn depends on the status line's refresh (a CPU matmul can come and go between two
    # frames): at least one of the device's steps is, named with the device.
    steps = re.findall(r"smoke test: ([\w-]+) on the CPU", terminal)
    assert steps, terminal
    assert "\x1b[2K" in terminal  # a status line, redrawn in place and cleared at the end
    # stdout: the report
    assert "importing torch" not in out and "Runtime   torch 2.13.0+cpu imported in" in out


@pytest.mark.slow
def test_no_progress_when_piped_or_asked_for_json_or_quiet(tmp_path_factory, tmp_path):
    python = real_cpu_torch_python(tmp_path_factory)
    env = env_for(tmp_path)
    piped = subprocess.run(
        [sys.executable, "-m", "doctor", "check", "--python", str(python)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert piped.returncode == 0 and piped.stderr == ""
    for extra in (["--json"], ["-q"]):
        code, out, terminal = run_with_terminal_stderr(["check", "--python", str(python), *extra], env)
        assert code == 0 and "importing torch" not in terminal and "smoke test" not in terminal, extra


def test_the_child_lines_in_words():
    said = []
    reader = ProgressReader("/x/venv/bin/python", said.append)
    for line in ('{"running": {"name": "import", "device": null}}', '{"facts": {"backend": "cuda"}}',
                 '{"running": {"name": "init", "device": '
                 'null}}', '{"running": {"name": "matmul", "device": 1}}',
                 "not json at all", '{"step": {"name": "matmul", "status": "ok", "seconds": 0.1}}'):
        reader.line(line)
    assert said == ["importing torch in /x/venv/bin/python", "smoke test: initialising the devices",
                    "smoke test: matmul on GPU 1"]


def test_long_paths_keep_their_end():
    path = "/opt/" + "x" * 80 + "/bin/python"
    assert short_path(path).endswith("/bin/python") and len(short_path(path)) == 48


class _Recorder:
    """Stands in for the rich status (doctor.app.progress.Progress): records what it is told."""

    made: list = []

    def __init__(self):
        self.calls, self.started, self.stopped = [], False, False
        _Recorder.made.append(self)

    def __call__(self, task, words):
        self.calls.append((task, words))

    def start(self):
        self.started = True

    def stop(self):
        self.stopped = True


def test_a_run_done_before_the_delay_shows_nothing(monkeypatch):
    from doctor.app import progress as P

    _Recorder.made = []
    monkeypatch.setattr(P, "Progress", _Recorder)
    with P.progress(True, delay=5.0) as tell:
        tell("driver", "reading the NVIDIA driver")
        tell("driver", None)
    assert _Recorder.made == []  # never built: rich never imported for a quick run


def test_a_run_that_lasts_shows_the_latest_task_then_follows(monkeypatch):
    import time

    from doctor.app import progress as P

    _Recorder.made = []
    monkeypatch.setattr(P, "Progress", _Recorder)
    with P.progress(True, delay=0.05) as tell:
        tell("driver", "reading the NVIDIA driver")
        tell("packages", "reading the packages")
        tell("driver", None)
        deadline = time.monotonic() + 5
        while not (_Recorder.made and _Recorder.made[0].started) and time.monotonic() < deadline:
            time.sleep(0.01)
        tell("smoke", "smoke test: matmul on the CPU")
    shown = _Recorder.made[0]
    assert shown.started and shown.stopped
    # what came before the status started is handed over (only what still runs), then what follows
    assert shown.calls == [("packages", "reading the packages"), ("smoke", "smoke test: matmul on the CPU")]
