"""Run every probe and assemble the snapshot.

The probes are independent, so they run concurrently (NVML, the target-interpreter inspector,
the import probe / smoke test, host and environment facts); the slowest one sets the time.
None of them raises: a probe that crashes anyway becomes a fact saying so.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from doctor import __version__
from doctor.model.i18n import Msg
from doctor.probes.target_python import choose_interpreter, run_inspector
from doctor.runner import run

if TYPE_CHECKING:
    from doctor.model.snapshot import Interpreter, Snapshot, TorchInstall

# Only what starting the target interpreter's children needs is imported above: the snapshot's data classes,
# the other probes and what reads the children's output are imported while the children run.


@dataclass(slots=True)
class ProbeOptions:
    interpreter: tuple[str | None, str] | None = None  # (path, why), chosen once by the caller
    python: str | None = None  # --python, when the caller did not choose (tests, benchmarks)
    smoke: bool = True  # False with --no-smoke: torch is never imported
    smoke_timeout: float = 60.0
    device: str = "all"
    inspect_timeout: float = 20.0
    nvidia_timeout: float = 5.0
    binaries_timeout: float = 5.0  # reading the GPU code of torch's libraries (doctor/probes/binaries.py)
    # what the probes are doing, for a progress display: (task, words) as a task starts or moves on,
    # (task, None) when it is done. Called from the probe threads.
    progress: Callable[[str, str | None], object] | None = None


def _meanwhile(fn) -> None:
    """The caller's work while the children run. Its usage error (a broken table: exit 2) ends the children at
    once and is raised, as it was before anything started; any other error is left to the caller, which does
    that work again where it would have done it without us."""
    from doctor.errors import DoctorError

    try:
        fn()
    except DoctorError:
        from doctor.runner import kill_running

        kill_running()  # the smoke test may have a minute left: the answer is already exit 2
        raise
    except Exception:  # noqa: BLE001 - the caller redoes what did not finish (diagnose_machine: the table)
        pass


def _guard(what: str, fn, fallback):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - a probe bug must not kill the check
        return fallback(f"internal error in the {what} probe: {type(exc).__name__}: {exc}")


def collect(opts: ProbeOptions, env=None, cwd: str | None = None, runner=run, meanwhile=None) -> Snapshot:
    """Probe everything. The children of the target interpreter start first, since they take longest;
    NVML, host and environment facts are read while they run. ``meanwhile`` (the caller's work: loading the
    table, importing the judges) also runs on this thread while the children run, so that its cost is hidden;
    a DoctorError it raises ends the children and is raised from here."""
    env = dict(os.environ if env is None else env)
    cwd = cwd or os.getcwd()
    python, reason = opts.interpreter or choose_interpreter(opts.python, env, cwd)
    smoke = opts.smoke and python is not None
    if smoke:
        from doctor.probes.runtime import probe_runtime, short_path
    tell = opts.progress or (lambda task, words: None)

    def step(task: str, words: str, fn):
        """Run one probe, telling the progress display it started and ended."""
        tell(task, words)
        try:
            return fn()
        finally:
            tell(task, None)

    early = None

    def inspect():
        if python is None:
            from doctor.model.snapshot import Interpreter, TorchInstall

            return (
                Interpreter(reason=reason, error=reason),
                TorchInstall(status="unknown", detail=reason),
                None,
            )

        def run_and_read():
            result, nonce = run_inspector(python, runner, opts.inspect_timeout)
            from doctor.probes.interpreter import parse_inspector_output

            return parse_inspector_output(python, reason, result, nonce)

        def failed(why: str):
            from doctor.model.snapshot import Interpreter, TorchInstall

            return (
                Interpreter(path=python, reason=reason, error=why),
                TorchInstall(status="error", detail=why),
                None,
            )

        found = _guard(
            "interpreter",
            lambda: step("packages", Msg("reading the packages of the target interpreter"), run_and_read),
            failed,
        )
        # The libraries are found where the inspector says the packages are: read them on this worker,
        # while NVML, the host and the environment probes run on the others.
        _guard("binaries", lambda: _read_binaries(found[0], found[1], opts.binaries_timeout, early),
               lambda why: None)
        _guard("hip kernels", lambda: _read_hip_kernels(found[1], opts.binaries_timeout), lambda why: None)
        return found

    def runtime():
        from doctor.model.snapshot import TorchRuntime

        if not opts.smoke:
            return TorchRuntime(status="skipped", detail="--no-smoke: torch was not imported")
        if python is None:
            return TorchRuntime(status="skipped", detail="no interpreter to run")
        return _guard(
            "runtime",
            lambda: step("smoke", Msg("starting {path}", path=short_path(python)), lambda: probe_runtime(
                python, mode="smoke", device=opts.device, timeout=opts.smoke_timeout, runner=runner, env=env,
                progress=(lambda words: tell("smoke", words)) if opts.progress else None,
            )),
            lambda why: TorchRuntime(status="error", detail=why),
        )

    # a worker for each probe that runs on its own thread (smoke test, inspector, NVIDIA, AMD), all at once
    pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="probe")
    try:
        f_runtime = pool.submit(runtime) if smoke else None
        f_inspect = pool.submit(inspect)
        from doctor.model.environment import Environment
        from doctor.model.snapshot import Nvidia, Project, Provenance, Snapshot, TorchRuntime
        from doctor.probes.binaries import EarlyRead
        from doctor.probes.overrides import (
            ENV_NVIDIA_TIMEOUT,
            ENV_SYSROOT,
            BadOverride,
            Overrides,
            read_overrides,
        )

        # Escape hatches for users (a hung NVML, host /sys mounted elsewhere) that double as test seams.
        # (Checked before probing: doctor/app/options.py refuses a bad one. Here one is ignored.)
        try:
            forced = read_overrides(env)
        except BadOverride:
            forced = Overrides(sysroot=env.get(ENV_SYSROOT) or "/")
        root, use_nvml = forced.sysroot, forced.nvml
        nvidia_timeout = forced.nvidia_timeout if env.get(ENV_NVIDIA_TIMEOUT) else opts.nvidia_timeout

        # torch's library is read while the inspector runs (a cold page cache waits for the disk beside it)
        early = _guard("binaries", lambda: EarlyRead(python), lambda why: None)
        from doctor.probes.nvidia import probe_nvidia

        def nvidia():
            return _guard(
                "nvidia",
                lambda: step("driver", Msg("reading the NVIDIA driver"), lambda: probe_nvidia(
                    runner=runner,
                    root=root,
                    env=env,
                    timeout=nvidia_timeout,
                    nvml=None if use_nvml else False,
                )),
                lambda why: Nvidia(status="unknown", detail=why, attempts=[why]),
            )

        f_nvidia = pool.submit(nvidia)
        f_amd = pool.submit(lambda: _guard("amd", lambda: _probe_amd(runner, root, env, nvidia_timeout),
                                           lambda why: _amd_fallback(why)))
        from doctor.probes.environment import probe_environment
        from doctor.probes.host import probe_host
        from doctor.probes.provenance import probe_provenance

        host = _guard("host", lambda: probe_host(root=root, env=env), lambda why: _host_fallback())
        provenance = _guard("provenance", lambda: probe_provenance(root=root, env=env),
                            lambda why: Provenance(why=why))
        environment = _guard(
            "environment",
            lambda: probe_environment(root=root, env=env, host=host),
            lambda why: Environment(error=why),
        )
        if meanwhile is not None:
            _meanwhile(meanwhile)
        interpreter, install, python_facts = f_inspect.result()
        from doctor.probes.project import probe_project

        # The project's pins (a few bounded file reads) need the environment's folder, which the inspector
        # gave.
        project = _guard(
            "project",
            lambda: probe_project(interpreter.prefix or None, cwd, interpreter.env_kind),
            lambda why: Project(why=why),
        )
        snap = Snapshot(
            tool_version=__version__,
            collected_at=_now_utc(),
            origin="probe",
            host=host,
            nvidia=f_nvidia.result(),
            amd=f_amd.result(),
            interpreter=interpreter,
            install=install,
            runtime=f_runtime.result() if f_runtime else runtime(),
            environment=environment,
            provenance=provenance,
            gpu_wanted=[f"--device {opts.device}"] if opts.device not in ("", "all") else [],
            project=project,
        )
    except KeyboardInterrupt:
        # The children run in their own process groups, which Ctrl-C does not reach: end them now,
        # or the wait below would last each one's time limit.
        from doctor.runner import kill_running

        kill_running()
        raise
    finally:
        pool.shutdown(wait=True)
    if install.status == "absent" and snap.runtime.status == "import-error":
        # The two ran side by side; with no torch installed the failed import says nothing new.
        snap.runtime = TorchRuntime(status="skipped", detail="torch is not installed: nothing to import")
    if python_facts is not None:
        snap.environment.python = python_facts
    snap.environment.hostname = _hostname()
    return snap


def _read_binaries(interpreter: Interpreter, install: TorchInstall, timeout: float, early=None) -> None:
    from doctor.probes.binaries import read_install_binaries

    read_install_binaries(
        install.torch, install.torchvision, install.torchaudio, interpreter.prefix or None, timeout, early
    )


def _read_hip_kernels(install: TorchInstall, timeout: float) -> None:
    """The GPU targets of a ROCm torch's libtorch_hip.so (doctor/probes/hip_kernels.py)."""
    torch = install.torch
    if torch is None or not torch.has_libtorch_hip or not torch.location:
        return
    from doctor.probes.hip_kernels import read_hip_kernels

    library = os.path.join(torch.location, "torch", "lib", "libtorch_hip.so")
    torch.hip_kernels = read_hip_kernels(library, timeout)


def _probe_amd(runner, root: str, env, timeout: float):
    from doctor.probes.amd import probe_amd

    return probe_amd(runner=runner, root=root, env=env, timeout=timeout)


def _amd_fallback(why: str):
    from doctor.model.amd import Amd

    return Amd(detail=why, attempts=[why])


def _host_fallback():
    from doctor.model.snapshot import Host

    return Host()


def _now_utc() -> str:
    """Now, in UTC, to the second: "2026-11-30T14:05:09+00:00"."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _hostname() -> str:
    try:
        return socket.gethostname()
    except OSError:
        return ""
