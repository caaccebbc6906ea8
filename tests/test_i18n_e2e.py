"""Chinese output end to end, through the real CLI (``python -m doctor``) on the README's machines, faked at
the probe boundary the golden tests use (a fake venv, a fake nvidia-smi, a fixed /proc/meminfo): Chinese text
from ``LANG=zh_CN.UTF-8`` and from ``--lang zh``; finding ids, commands and exit codes as in English; the
machine summary aligned and no line longer than 80 cells where its English line is not; ``--json`` byte for
byte the English report; ``--format github|junit`` English unless ``--lang`` asks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fakeenv import find_python, make_fake_env
from rich.cells import cell_len
from test_golden import RTX5090, _machine, _normalise

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "nvidia"))
from fake_smi import write_fake_nvidia_smi  # noqa: E402

# (scenario, exit code, finding ids, words the Chinese text must hold)
SCENARIOS = [
    (
        "rtx5090-cu126",
        1,
        ["gpu-arch-unsupported", "ram-smaller-than-gpu-memory"],
        ["驱动", "显卡 0", "没有显卡 0 NVIDIA GeForce RTX 5090（sm_120）的内核", "修复方案", "退出码 1"],
    ),
    (
        "cpu-on-gpu",
        1,
        ["torch-cpu-build", "ram-smaller-than-gpu-memory"],
        ["有 NVIDIA 显卡的机器上装的是纯 CPU 版 torch", "修复方案", "退出码 1"],
    ),
    ("no-torch", 1, ["torch-not-installed"], ["中未安装 torch", "修复方案", "退出码 1"]),
]
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def machine(tmp_path: Path, scenario: str) -> tuple[Path, dict]:
    if scenario == "cpu-on-gpu":  # the README's CPU torch on a GPU machine
        _, env = _machine(tmp_path, "no-torch")
        python = make_fake_env(tmp_path / "cpuvenv", python=find_python("3.12"), torch="2.7.1+cpu", cuda=None)
        write_fake_nvidia_smi(tmp_path / "bin", [RTX5090], driver="570.124.04", cuda="12.8")
        return python, env
    return _machine(tmp_path, scenario)


def run(tmp_path: Path, env: dict, *args: str, lang_env: str = "C.UTF-8", columns: int = 80):
    env = dict(env, LANG=lang_env, COLUMNS=str(columns))
    env.pop("LC_ALL", None)
    env.pop("LC_MESSAGES", None)
    res = subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, env=env, cwd=tmp_path,
                         timeout=120)
    return res.returncode, _normalise(res.stdout.decode("utf-8"), tmp_path), res.stderr.decode("utf-8")


def commands(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if " -m pip " in line or line.startswith("        ")]


def ids(text: str) -> list[str]:
    return re.findall(r"^  [✗!i] ([a-z0-9-]+)  ", text, re.M)


@pytest.mark.slow
@pytest.mark.parametrize("scenario,code,finding_ids,words", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_chinese_check_text(tmp_path, scenario, code, finding_ids, words):
    python, env = machine(tmp_path, scenario)
    args = ["check", "--no-smoke", "--python", str(python)]
    en_code, english, _ = run(tmp_path, env, *args)
    for how, (zh_code, chinese, err) in {
        "LANG": run(tmp_path, env, *args, lang_env="zh_CN.UTF-8"),
        "--lang": run(tmp_path, env, *args, "--lang", "zh"),
    }.items():
        assert zh_code == en_code == code, (how, err)
        assert CHINESE.search(chinese), how
        for word in words:
            assert word in chinese, (how, word, chinese)
        assert ids(chinese) == ids(english) == finding_ids, how
        assert commands(chinese) == commands(english), how
        en_lines, zh_lines = english.splitlines(), chinese.splitlines()
        assert len(zh_lines) == len(en_lines), how
        for en, zh in zip(en_lines, zh_lines, strict=True):
            if cell_len(en) <= 80 and "<TMP>" not in zh:
                assert cell_len(zh) <= 80, (how, zh)
        # the machine summary: every value starts in the same column, whatever the label's language
        summary = zh_lines[2:zh_lines.index("", 2)]
        rows = [line for line in summary if not line.startswith("   ")]
        assert len(rows) >= 5, (how, rows)
        assert all(_value_column(row) == 12 for row in rows), (how, rows)


def _value_column(row: str) -> int:
    """The terminal column (in cells) where a machine summary row's value starts."""
    match = re.match(r"^  (\S+(?: \d+)?) +", row)
    assert match, row
    return cell_len(match.group(0))


@pytest.mark.slow
def test_json_is_byte_identical_in_chinese(tmp_path):
    python, env = machine(tmp_path, "rtx5090-cu126")
    args = ["check", "--no-smoke", "--json", "--python", str(python)]
    english = run(tmp_path, env, *args)
    chinese = run(tmp_path, env, *args, lang_env="zh_CN.UTF-8")
    assert chinese[0] == english[0] == 1
    timing = re.compile(r'"(seconds|collected_at|elapsed_s)": [^,\n]*')
    assert timing.sub("T", chinese[1]) == timing.sub("T", english[1])
    assert not CHINESE.search(chinese[1])
    json.loads(chinese[1])


@pytest.mark.slow
def test_ci_formats_stay_english_unless_asked(tmp_path):
    python, env = machine(tmp_path, "no-torch")
    for fmt in ("github", "junit"):
        args = ["check", "--no-smoke", "--format", fmt, "--python", str(python)]
        code, text, _ = run(tmp_path, env, *args, lang_env="zh_CN.UTF-8")
        assert code == 1 and "torch is not installed in" in text and not CHINESE.search(text), fmt
        code, text, _ = run(tmp_path, env, *args, "--lang", "zh", lang_env="zh_CN.UTF-8")
        assert code == 1 and CHINESE.search(text), fmt


@pytest.mark.parametrize(
    "args,line",
    [
        (["check", "--device", "x"], "torchdoctor: 错误: --device 'x'：请给出设备编号（0、1……）或 'all'"),
        (
            ["check", "--json", "--format", "text"],
            "torchdoctor: 错误: --json 与 --format text 互相矛盾：只能选一个",
        ),
        (["check", "--lang", "fr"], "torchdoctor: 错误: --lang 'fr'：请给出 en, zh 之一"),
    ],
)
def test_usage_errors_in_chinese_keep_exit_2(tmp_path, args, line):
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES")}
    english = subprocess.run(
        [sys.executable, "-m", "doctor", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(env, LANG="C.UTF-8"),
        timeout=60,
    )
    chinese = subprocess.run(
        [sys.executable, "-m", "doctor", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(env, LANG="zh_CN.UTF-8"),
        timeout=60,
    )
    assert chinese.returncode == english.returncode == 2
    assert chinese.stderr.strip() == line and english.stderr.startswith("torchdoctor: error: " + args[1])


@pytest.mark.parametrize("args,lang", [
    (["check", "--no-smok"], "zh_CN.UTF-8"),
    (["check", "--no-smok", "--lang", "zh"], "C.UTF-8"),
    (["check", "--lang=zh", "--no-smok"], "C.UTF-8"),
])
def test_parser_usage_errors_in_chinese_keep_exit_2_and_the_option_names(tmp_path, args, lang):
    """typer's own usage errors (an unknown option): the frame in Chinese, click's message and the options as
    they are, exit 2; English is click's own text."""
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES")}
    english = subprocess.run(
        [sys.executable, "-m", "doctor", "check", "--no-smok"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(env, LANG="C.UTF-8"),
        timeout=60,
    )
    chinese = subprocess.run(
        [sys.executable, "-m", "doctor", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(env, LANG=lang),
        timeout=60,
    )
    assert chinese.returncode == english.returncode == 2
    assert english.stderr.splitlines() == [
        "Usage: torchdoctor check [OPTIONS]", "Try 'torchdoctor check -h' for help.", "",
        "Error: No such option: --no-smok (Possible options: --no-smoke)"]
    assert chinese.stderr.splitlines() == [
        "用法：torchdoctor check [OPTIONS]", "运行 'torchdoctor check -h' 查看帮助。", "",
        "错误：No such option: --no-smok (Possible options: --no-smoke)"]


@pytest.mark.slow
def test_markdown_report_in_chinese_keeps_its_json_english(tmp_path):
    python, env = machine(tmp_path, "no-torch")
    args = ["report", "--no-smoke", "--format", "markdown", "--python", str(python)]
    code_en, english, _ = run(tmp_path, env, *args)
    code_zh, chinese, err = run(tmp_path, env, *args, "--lang", "zh")
    assert code_en == code_zh == 0, err
    assert (
        "中未安装 torch" in chinese and "`torch-not-installed`" in chinese and "完整报告（JSON）" in chinese
    )
    fenced = re.compile(r"```json\n(.*?)\n```", re.S)
    timing = re.compile(r'"(seconds|collected_at|elapsed_s)": [^,\n]*')
    assert timing.sub("T", fenced.search(chinese).group(1)) == timing.sub(
        "T", fenced.search(english).group(1)
    )


def test_explain_in_chinese(tmp_path):
    message = ("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current "
        "PyTorch installation.")
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES")}
    argv = [sys.executable, "-m", "doctor", "explain", "--no-probe", message]
    english = subprocess.run(
        argv, capture_output=True, text=True, cwd=tmp_path, env=dict(env, LANG="C.UTF-8"), timeout=60
    )
    chinese = subprocess.run(
        argv, capture_output=True, text=True, cwd=tmp_path, env=dict(env, LANG="zh_CN.UTF-8"), timeout=60
    )
    assert chinese.returncode == english.returncode
    assert "gpu-arch-unsupported  torch 没有这张显卡架构的内核" in chinese.stdout
    assert "pip install torch --index-url https://download.pytorch.org/whl/cu128" in chinese.stdout
    assert ids(english.stdout) == ids(chinese.stdout)
    as_json = subprocess.run(argv + ["--json"], capture_output=True, text=True, cwd=tmp_path,
                             env=dict(env, LANG="zh_CN.UTF-8"), timeout=60)
    assert not CHINESE.search(as_json.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("scenario,extra", [("rtx5090-cu126", []), ("cpu-on-gpu", ["-q"])])
def test_readme_zh_shows_the_real_output(tmp_path, scenario, extra):
    """README.zh.md's pasted output is what the CLI prints on these machines (made under /tmp/demo)."""
    python, env = machine(tmp_path, scenario)
    _, chinese, _ = run(tmp_path, env, "check", "--no-smoke", *extra, "--python", str(python),
                        lang_env="zh_CN.UTF-8", columns=100)
    readme = (Path(__file__).resolve().parents[1] / "README.zh.md").read_text(encoding="utf-8")
    assert chinese.replace("<TMP>", "/tmp/demo").strip("\n") in readme


def test_the_chinese_readme_has_the_same_two_set_up_commands():
    """README.zh.md gives the English README's two commands, character for character."""
    root = Path(__file__).resolve().parents[1]
    english = (root / "README.md").read_text(encoding="utf-8")
    chinese = (root / "README.zh.md").read_text(encoding="utf-8")
    test_command = english.split("<!-- test-command -->\n```sh\n", 1)[1].split("\n```", 1)[0]
    check_command = next(line for line in english.splitlines() if line.startswith("python3 -m venv .tdvenv"))
    assert test_command in chinese and check_command in chinese
