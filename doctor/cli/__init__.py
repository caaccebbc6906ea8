"""The command line. ``main(argv) -> int`` is the one entry point; every expected error becomes one line
on stderr and a documented exit code (doctor/exitcodes.py). typer (commands.py) reads the command line and
owns usage errors and help.
"""

from __future__ import annotations

import sys

from doctor import __version__, exitcodes

# What the user's environment can make torchdoctor's own Python run besides torchdoctor: modules on PYTHONPATH
# (a project's re.py or importlib/ shadows the standard library; the target still gets PYTHONPATH, as the
# user's `import torch` does), and PYTHONINSPECT (an interactive prompt once the run ends: a hang). Such a run
# starts again with -E (these ignored), torchdoctor's own folder first on sys.path, '' (the working folder)
# dropped. PYTHONHOME is left alone: this interpreter started with it, so it is its own home, and a bad one
# stops Python before any of torchdoctor runs. So is whatever a console-script wrapper imports before main().
_BOOT = "import sys; sys.path[:] = [sys.argv[1]] + [p for p in sys.path if p]; sys.argv = sys.argv[2:]; " \
    "from doctor.cli import main; sys.exit(main())"


def _run_isolated() -> None:
    """Start again without the environment's PYTHONPATH and PYTHONINSPECT (above) when they are set; returns
    when there is no need (or it cannot). POSIX replaces this process; Windows waits for the new one."""
    import os

    if sys.flags.ignore_environment or sys.flags.isolated or not sys.executable:
        return
    if os.environ.get("PYTHONHOME"):
        return
    own = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    foreign = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
               if p and os.path.realpath(p) != os.path.realpath(own)]
    if not foreign and not os.environ.get("PYTHONINSPECT"):
        return
    argv = [sys.executable, "-E", "-c", _BOOT, own, sys.argv[0], *sys.argv[1:]]
    try:
        sys.stdout.flush()
        if os.name == "posix":
            os.execv(sys.executable, argv)
        import subprocess

        raise SystemExit(subprocess.call(argv))
    except OSError:
        return


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        _run_isolated()
    from doctor.app.process import guard, output_failed

    with guard():  # SIGTERM/SIGHUP act like Ctrl-C; no child outlives the command (doctor/runner.py)
        code = _main(argv)
    return output_failed(code)  # after the guard's last flush of stdout and stderr


def _main(argv: list[str] | None = None) -> int:
    from doctor.errors import DoctorError

    args = sys.argv[1:] if argv is None else list(argv)
    _guard_streams()
    try:
        from doctor.cli.commands import run

        return run(args)
    except DoctorError as exc:
        from doctor.app.language import error_line

        # one line (in the run's language), then its evidence indented
        print(error_line(exc), file=sys.stderr)
        for line in exc.details:
            print(f"  {line}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("torchdoctor: interrupted", file=sys.stderr)
        return exitcodes.INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the one place unexpected errors are turned into a report
        _internal_error(exc)
        return exitcodes.INTERNAL


def _guard_streams() -> None:
    """A stdout or stderr that cannot encode our glyphs (cp1252, ascii) gets ASCII stand-ins instead of a
    UnicodeEncodeError (doctor/app/streams.py)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            "✓✗≤→…·—".encode(getattr(stream, "encoding", None) or "utf-8")
        except (UnicodeEncodeError, LookupError):
            from doctor.app.streams import guard_streams

            guard_streams()
            return


def _internal_error(exc: BaseException) -> None:
    import os
    import platform
    import traceback
    from pathlib import Path

    print(f"torchdoctor: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
    tb = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
    print(f"  please report it with: torchdoctor {__version__}, Python {platform.python_version()}, "
          f"{platform.platform()}, at {where}", file=sys.stderr)
    if os.environ.get("TORCHDOCTOR_DEBUG"):
        traceback.print_exception(exc)
    else:
        print("  (set TORCHDOCTOR_DEBUG=1 for the full traceback)", file=sys.stderr)
