"""Messages as data (doctor/model/i18n.py, doctor/locale/zh.json): every message the code makes has a Chinese
translation with the same placeholders; translations keep the terminal's alignment (wide characters count two
cells, measured with rich.cells as the renderer does); the language comes from --lang, else LC_ALL /
LC_MESSAGES / LANG; English never reads a catalog."""

from __future__ import annotations

import ast
import copy
import json
import pickle
import re
from pathlib import Path

import pytest
from rich.cells import cell_len

from doctor.app.language import choose_language
from doctor.model import i18n
from doctor.model.i18n import EN, ZH, Msg, concat, join, language, language_from_env, localize, parse_language

REPO = Path(__file__).resolve().parents[1]
CATALOG = REPO / "doctor" / "locale" / "zh.json"
MAKERS = {"Msg", "N_", "tr", "say"}  # the calls whose first argument is a message template
FIELD = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


def code_templates() -> dict[str, str]:
    """Every template the code makes a message of: {template: where}."""
    found = {}
    for path in sorted((REPO / "doctor").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else None
            )
            if name not in MAKERS:
                continue
            first = node.args[0]
            # a template, or a choice of two ("... GPU" if n == 1 else "... GPUs")
            for arg in (first.body, first.orelse) if isinstance(first, ast.IfExp) else (first,):
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.setdefault(arg.value, f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def catalog() -> dict[str, str]:
    data = json.loads(CATALOG.read_text(encoding="utf-8"))
    merged: dict[str, str] = {}
    for section in data["messages"].values():
        assert not set(section) & set(merged), "a message is in two sections"
        merged.update(section)
    return merged


def test_every_message_has_a_chinese_translation():
    messages = catalog()
    missing = {t: where for t, where in code_templates().items() if t not in messages}
    assert not missing, f"add these to {CATALOG.name}: {missing}"
    assert len(messages) >= 450


@pytest.mark.parametrize("english,chinese", sorted(catalog().items()))
def test_placeholders_are_identical_between_languages(english, chinese):
    assert sorted(FIELD.findall(chinese)) == sorted(FIELD.findall(english))
    assert chinese.strip(), english
    # both format with the same parameters (format specs included)
    names = {m.split(":")[0].split("!")[0] for m in re.findall(r"\{(\w+[^{}]*)\}", english)}
    params = {n: 1.5 for n in names}
    assert english.format(**params) is not None and chinese.format(**params) is not None


def test_chinese_text_uses_the_glossary():
    glossary = (REPO / "docs" / "glossary-zh.md").read_text(encoding="utf-8")
    messages = catalog()
    for english_word, chinese_word in (
        ("driver", "驱动"),
        ("GPU", "显卡"),
        ("compute capability", "计算能力"),
        ("virtual environment", "虚拟环境"),
        ("wheel", "预编译包"),
    ):
        assert chinese_word in glossary
        uses = [zh for en, zh in messages.items() if english_word in en.replace("GPUs", "GPU")]
        assert uses and any(chinese_word in zh for zh in uses), english_word
    # what is never translated: commands, CUDA versions, product names
    for en, zh in messages.items():
        for keep in re.findall(r"--[a-z][a-z-]+|\bCUDA\b|\bnvidia-smi\b|\bPyTorch\b", en):
            assert keep in zh, (keep, en, zh)


def test_translated_labels_keep_the_machine_summary_aligned():
    from doctor.render.text import LABEL_CELLS

    messages = catalog()
    for label in ("OS", "Driver", "GPU {index}", "Runtime"):
        assert cell_len(messages[label].format(index=7)) <= LABEL_CELLS
    for chinese in messages.values():
        assert i18n.cells(chinese) == cell_len(chinese), chinese  # the model's own count is rich's count
    assert i18n.pad("驱动", 9) + "|" == "驱动     |" and cell_len(i18n.pad("驱动", 9)) == 9


def test_english_is_the_value_and_never_reads_a_catalog():
    i18n._catalogs.clear()
    msg = Msg("torch {label} has no kernels for GPU {index} {name} ({sm_name})", label="2.6.0+cu126", index=0,
              name="NVIDIA GeForce RTX 5090", sm_name="sm_120")
    assert msg == "torch 2.6.0+cu126 has no kernels for GPU 0 NVIDIA GeForce RTX 5090 (sm_120)"
    assert json.dumps({"title": msg}) == json.dumps({"title": str(msg)})
    assert localize(msg, EN) is msg and not i18n._catalogs
    assert localize(msg, ZH) == "torch 2.6.0+cu126 没有显卡 0 NVIDIA GeForce RTX 5090（sm_120）的内核"


def test_messages_survive_concatenation_joining_copies_and_sanitising():
    a, b = Msg("no NVIDIA GPU"), Msg("torch is not installed")
    both = concat(a, " / ", b)
    assert both == "no NVIDIA GPU / torch is not installed"
    assert localize(both, ZH) == "没有 NVIDIA 显卡 / 未安装 torch"
    assert localize(join(", ", [a, b]), ZH) == "没有 NVIDIA 显卡，未安装 torch"
    assert localize(a + "!", ZH) == "没有 NVIDIA 显卡!"
    for twin in (copy.deepcopy(b), pickle.loads(pickle.dumps(b))):
        assert twin == b and localize(twin, ZH) == "未安装 torch"
    assert (
        localize(Msg("torch is not installed in {path}", path="/x").map(str.upper), ZH) == "/X 中未安装 torch"
    )


def test_plain_texts_are_matched_only_when_sure():
    # a text made outside the mechanism (a probe's reason) is said whole or by a template of one-word captures
    assert localize("--no-smoke: torch was not imported", ZH) == "--no-smoke：未导入 torch"
    assert localize("torch 2.6.0 has no wheel that fits; 2.7.1 is the nearest release that does", ZH) == \
        "torch 2.6.0 没有合适的预编译包；2.7.1 是最接近的合适版本"
    for prose in ("statvfs(/dev/shm) failed", "torch was not imported", "nvidia-smi: not found"):
        assert localize(prose, ZH) == prose


@pytest.mark.parametrize("env,expected", [
    ({"LANG": "zh_CN.UTF-8"}, ZH), ({"LANG": "zh_SG"}, ZH), ({"LANG": "zh_TW.UTF-8"}, EN),
    ({"LANG": "en_US.UTF-8"}, EN), ({"LANG": "C.UTF-8"}, EN), ({}, EN), ({"LANG": "de_DE.UTF-8"}, EN),
    ({"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}, EN), ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_US"}, ZH),
    ({"LC_ALL": "", "LANG": "zh_CN.UTF-8"}, ZH),
])
def test_the_language_of_the_environment(env, expected):
    assert language_from_env(env) == expected


def test_lang_option_wins_and_machine_formats_stay_english():
    zh = {"LANG": "zh_CN.UTF-8"}
    assert choose_language(None, "text", zh) == ZH
    for fmt in ("json", "github", "junit"):
        assert choose_language(None, fmt, zh) == EN
    assert choose_language("zh", "junit", {}) == ZH and choose_language("en", None, zh) == EN
    assert parse_language("zh-Hans") == ZH and parse_language("fr") is None


def test_a_language_is_chosen_for_a_block_only():
    with language(ZH):
        assert i18n.current_language() == ZH
    assert i18n.current_language() == EN


def test_every_explain_signature_is_translated():
    """`explain` says each signature's title, meaning and fix from the catalog's "signatures" section."""
    signatures = json.loads((REPO / "compat_tables" / "signatures.json").read_text(encoding="utf-8"))[
        "signatures"
    ]
    section = json.loads(CATALOG.read_text(encoding="utf-8"))["messages"]["signatures"]
    messages = catalog()
    missing = [
        f"{s['id']}.{key}"
        for s in signatures
        for key in ("title", "meaning", "fix")
        if s[key] not in messages
    ]
    assert not missing
    with language(ZH):
        assert (
            localize(signatures[0]["title"])
            == section[signatures[0]["title"]]
            == messages[signatures[0]["title"]]
        )
