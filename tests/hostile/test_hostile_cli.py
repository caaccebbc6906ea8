"""Hostile inputs through the real command line: nothing broken, nothing left behind, nothing leaked,
nothing raw on the terminal.

``test_hostile_input`` runs every case of cases.py (the corpus, as data) and holds each to the rules
every case shares; ``test_secret_*`` plant the secret shapes of secrets.json in a report and in a live
probe and look for them in every shared output. tests/hostile/README.md lists the cases and which fail
today.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cases import CASES, ESC_CLEAR, ESC_TITLE, Case, Ctx
from hostile import (
    RTX5090,
    Outcome,
    base_env,
    controls,
    params_of,
    run_cli,
    run_on_pty,
    write_fake_nvidia_smi,
)
from planting import planted_machine, planted_report

pytestmark = pytest.mark.hostile
NEVER = {3}  # internal error


def params(cases: list[Case]):
    return [
        pytest.param(c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else [])
        for c in cases
    ]


def slowdown() -> float:
    """How much slower every run is on a machine busier than its cores (this suite runs cases side by
    side, and CI runs two Pythons' suites at once): about load/cores."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def guard_limit(case: Case) -> float:
    """Where the guard kills a run. It only has to tell a hang (minutes) from a slow run (seconds): the time
    bound below judges the seconds. The load average lags by a minute, and CI runs two suites' worth of cases
    at once, so the limit is three times the case's, scaled by the load when the run starts."""
    bound = (case.max_seconds or 0) * slowdown()
    return max(3 * case.limit * slowdown(), bound + 1)


def assert_outcome(case: Case, ctx: Ctx, res: Outcome) -> None:
    """The rules every hostile input is held to, then the case's own checks."""
    summary = res.summary()
    assert not res.timed_out, f"hung: still running at the {guard_limit(case):g}s limit\n{summary}"
    assert not res.memory_killed, f"memory bomb: past the guard's limit\n{summary}"
    assert res.returncode is not None and res.returncode >= 0, (
        f"killed by signal {-res.returncode}\n{summary}"
    )
    assert res.returncode not in NEVER, f"internal error (exit 3)\n{summary}"
    assert res.returncode in case.exits, (
        f"exit {res.returncode}, expected one of {sorted(case.exits)}\n{summary}"
    )
    if case.max_seconds is not None:
        # The bounds catch hangs and floods (seconds against minutes), scaled by the load (slowdown).
        slower = slowdown()
        limit = case.max_seconds * slower
        assert res.seconds <= limit, f"took {res.seconds:.1f}s > {limit:.1f}s (load x{slower:.1f})\n{summary}"
    assert res.peak_rss_mb <= case.max_rss_mb, (
        f"peak RSS {res.peak_rss_mb:.0f} MB > {case.max_rss_mb}\n{summary}"
    )
    assert b"Traceback" not in res.stdout + res.stderr, summary
    lowered = res.text.lower()
    assert "internal error" not in lowered and "internal-rule-error" not in lowered, summary
    if case.json_stdout:
        try:
            json.loads(res.stdout)
        except ValueError as exc:
            raise AssertionError(f"stdout is not one JSON document ({exc})\n{summary}") from None
    else:
        assert not controls(res.stdout), (
            f"raw control characters on stdout: {controls(res.stdout)}\n{summary}"
        )
    assert not controls(res.stderr), f"raw control characters on stderr: {controls(res.stderr)}\n{summary}"
    for path in ctx.outputs:
        if path.is_file() and path.suffix != ".json":
            data = path.read_bytes()
            assert not controls(data), f"raw control characters in {path.name}: {controls(data)}"
    assert not res.leftovers, f"left running after exit: {res.leftovers}\n{summary}"
    for check in ctx.checks:
        check(res, ctx)


def run_case(world, root: Path, case: Case):
    """Build the case's input in its own folder and run it: (ctx, Outcome)."""
    tmp = root / case.name
    tmp.mkdir(parents=True)
    ctx = Ctx(world, tmp, base_env(world), tmp)
    args = case.build(ctx)
    return ctx, run_cli(
        args, ctx.env, cwd=ctx.cwd, limit=guard_limit(case), stdin=ctx.stdin, settle=case.settle
    )


def case_job(jobs, case: Case):
    root = jobs.tmp.getbasetemp() / "hostile-cases"
    root.mkdir(exist_ok=True)
    return (
        ("case", case.name),
        "idle" if case.max_seconds else "cpu",
        lambda: run_case(jobs.world, root, case),
    )


def hostile_jobs(jobs, items) -> None:
    """conftest.py's scheduler: start the runs the selected tests of this module need."""
    for item in items:
        params = params_of(item)
        if isinstance(params.get("case"), Case):
            jobs.submit(*case_job(jobs, params["case"]))
        if params.get("output") in SHARED_OUTPUTS:
            jobs.submit(*shared_job(jobs, params["output"]))


@pytest.mark.parametrize("case", params(CASES))
def test_hostile_input(case: Case, jobs):
    ctx, res = jobs.result(*case_job(jobs, case))
    assert_outcome(case, ctx, res)


# --- secrets in shared output ----------------------------------------------------------------------------

SECRETS = json.loads((Path(__file__).parent / "secrets.json").read_text(encoding="utf-8"))["secrets"]
# Each shared output: how it is made, from the planted report (--from) or from a live probe of a machine
# whose torch import fails with the planted texts (the smoke test's stderr and import error).
SHARED_OUTPUTS = {
    "from-markdown": ("from", ["check", "--format", "markdown"], None),
    "from-github": ("from", ["check", "--format", "github"], "summary.md"),
    "from-junit": ("from", ["check", "--format", "junit"], None),
    "from-junit-o": ("from", ["check", "--format", "junit", "-o", "{out}/out.xml"], "out.xml"),
    "from-json-o": ("from", ["check", "--format", "json", "-o", "{out}/out.json"], "out.json"),
    "from-text-o": ("from", ["check", "-o", "{out}/out.txt"], "out.txt"),
    "live-report": ("live", ["report"], None),
    "live-report-o": ("live", ["report", "-o", "{out}/out.json"], "out.json"),
    "live-report-markdown": ("live", ["report", "--format", "markdown"], None),
    "live-markdown": ("live", ["check", "--format", "markdown"], None),
    "live-github": ("live", ["check", "--format", "github"], "summary.md"),
    "live-junit": ("live", ["check", "--format", "junit"], None),
    "live-json-o": ("live", ["check", "--format", "json", "-o", "{out}/out.json"], "out.json"),
    "live-text-o": ("live", ["check", "-o", "{out}/out.txt"], "out.txt"),
}


def planted(jobs) -> tuple[Path, tuple[Path, Path, dict[str, str]]]:
    """Once per session: the planted report, and the live machine carrying the planted secrets."""

    def build():
        root = jobs.tmp.getbasetemp() / "hostile-secrets"
        root.mkdir()
        report = root / "planted.json"
        report.write_text(json.dumps(planted_report(jobs.world.report_data, SECRETS)), encoding="utf-8")
        return report, planted_machine(root / "live", SECRETS)

    return jobs.result("planted", "setup", build)


def produce_shared(jobs, name: str):
    """One shared output: (Outcome, the text of everything it wrote: stdout, then the file it names)."""
    report, (py, bin_dir, variables) = planted(jobs)
    kind, args, written = SHARED_OUTPUTS[name]
    out = report.parent / name
    out.mkdir()
    env = base_env(jobs.world, GITHUB_STEP_SUMMARY=str(out / "summary.md"))
    if kind == "from":
        argv = [*args, "--from", str(report)]
    else:
        env.update(variables)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
        argv = [*args, "--python", str(py), "--smoke-timeout", "20"]
    res = run_cli([a.replace("{out}", str(out)) for a in argv], env, cwd=out, limit=60)
    text = res.out + (
        (out / written).read_text(encoding="utf-8") if written and (out / written).is_file() else ""
    )
    return res, text


def shared_job(jobs, name: str):
    return ("shared", name), "cpu", lambda: produce_shared(jobs, name)


def secret_params():
    out = []
    for output, (kind, _args, _written) in SHARED_OUTPUTS.items():
        for s in SECRETS:
            if kind == "live" and not s.get("live", True):
                continue
            leaks = output in s.get("leaks_today", [])
            marks = (
                [
                    pytest.mark.xfail(
                        strict=True, reason=f"leaks today: {s['value']!r} is in the {output} output"
                    )
                ]
                if leaks
                else []
            )
            out.append(pytest.param(output, s, id=f"{output}-{s['id']}", marks=marks))
    return out


@pytest.mark.parametrize("output", list(SHARED_OUTPUTS))
def test_shared_output_runs_cleanly(output, jobs):
    """The runs behind the secret checks: a normal exit, the planted findings, no traceback."""
    res, text = jobs.result(*shared_job(jobs, output))
    assert res.returncode in (0, 1), res.summary()
    assert b"Traceback (most recent" not in res.stderr, res.summary()
    assert "torch-import-error" in text, f"the planted import error is not reported\n{res.summary()}"


@pytest.mark.parametrize("output,secret", secret_params())
def test_secret_absent_from_shared_output(output, secret, jobs):
    res, text = jobs.result(*shared_job(jobs, output))
    assert res.returncode in (0, 1), res.summary()
    assert secret["value"] not in text, f"{secret['id']} leaked into {output}"


# --- a real terminal ----------------------------------------------------------------------------------

TERMINAL_SOURCES = {
    "nvidia-smi-gpu-name": "the GPU name nvidia-smi reports",
    "report-gpu-name": "the GPU name of a report read with --from",
}


@pytest.mark.parametrize("source", list(TERMINAL_SOURCES))
def test_escape_sequences_never_reach_a_terminal(source, world, tmp_path):
    """On a pty (colours on: TERM=xterm-256color, no NO_COLOR) rich writes its own styling, so only the
    planted sequences are looked for: the window-title OSC and the clear-screen CSI."""
    env = base_env(world, TERM="xterm-256color", COLUMNS="120")
    env.pop("NO_COLOR")
    name = "NVIDIA GeForce RTX 5090" + ESC_TITLE + ESC_CLEAR
    if source == "nvidia-smi-gpu-name":
        bin_dir = tmp_path / "bin"
        write_fake_nvidia_smi(bin_dir, [dict(RTX5090, name=name)])
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
        args = ["check", "--no-smoke", "-v", "--python", str(world.py)]
    else:
        data = json.loads(json.dumps(world.report_data))
        data["snapshot"]["nvidia"]["gpus"][0]["name"] = name
        (tmp_path / "r.json").write_text(json.dumps(data))
        args = ["check", "-v", "--from", str(tmp_path / "r.json")]
    returncode, screen = run_on_pty(args, env, cwd=tmp_path)
    assert returncode == 1, screen[-2000:]
    assert b"RTX 5090" in screen
    assert ESC_TITLE[:-1].encode() not in screen and ESC_CLEAR.encode() not in screen, screen[:1500]


def test_readme_describes_every_case_and_shape():
    readme = (Path(__file__).parent / "README.md").read_text(encoding="utf-8")
    missing = [c.name for c in CASES if f"`{c.name}`" not in readme]
    missing += [s["id"] for s in SECRETS if f"`{s['id']}`" not in readme]
    assert not missing, f"tests/hostile/README.md does not describe: {missing}"
