"""Redaction skips a step when a cheap test says its pattern cannot match, and works each string out once per
report. Both are only speed: these tests run every step on every string regardless, and hold the skipping
and the memo to giving exactly what running them all gives, on the planted secrets, real texts and random
mixes of the fragments the patterns look for."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from test_redact import ENV, HOME, HOST, USER, planted_report

from doctor.render.redact import _Redactor

HERE = Path(__file__).parent
SECRETS = json.loads((HERE / "hostile" / "secrets.json").read_text(encoding="utf-8"))["secrets"]

# What the patterns look for, and the letters re.IGNORECASE pairs with ASCII ones (long s, Kelvin sign).
FRAGMENTS = [
    "GPU-",
    "MIG-",
    "MIG-GPU-",
    "5d2ab6c4-8f1e-4b7c-9a3d-0123456789ab",
    "/0/1",
    "/home/",
    "/Users/",
    "Users",
    "\\",
    "C:",
    "/scratch/",
    "home/",
    "@",
    ":",
    "://",
    "https",
    "=",
    "token",
    "TOKEN=",
    "api_key=",
    "Bearer ",
    "basic ",
    "ba\u017fic ",
    "to\u212aen ",
    "ſ",
    "\u212a",
    "ALICE",
    "alice",
    "Alice",
    "gpu-box-17",
    "GPU-BOX-17",
    "10.0.0.1",
    "010.020.030.040",
    "127.0.0.1",
    "::1",
    "fe80::1ff:fe23:4567:890a",
    "eyJhbGciOiJIUzI1NiJ9",
    ".",
    "..",
    "-----BEGIN RSA PRIVATE KEY-----",
    "hooks.slack.com/services/T0/B0/xyz",
    "hf_",
    "ghp_",
    "sk-",
    "AKIA",
    "ABCDEFGHIJKLMNOP",
    "aB3dE5gH7jK9",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    " ",
    "/",
    "x",
    "0",
    "12",
    "\n",
    "'",
    '"',
    "~",
    "<redacted>",
    "<user>",
    "version",
    "13.0.3.0",
    "==",
    "s3cretpass",
    "bob:pw@",
    "Smith",
    "\u017fmith",
    "JOHN",
]
# Each at the shortest a pattern can match, where a length test decides whether it runs.
SHORTEST = [
    "hf_aB3dE5gH7jK9", "sk-aB3dE5gH7jK9", "Basic aB3dE5gH", "Token aB3dE5gH", "x aB3dE5gH7jK9" * 3,
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aB3dE5gH7jK9" * 5, "\u017fmith", "JOHN \u017fMITH",
]


def _redactor() -> _Redactor:
    return _Redactor(
        ENV,
        hostnames=[HOST, "gpu-box-17"],
        usernames=[USER, "John Smith"],
        homes=[HOME, "C:\\Users\\alice"],
        secret_env=list(ENV.items()),
    )


def _strings(value) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [*_strings(k), *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def _corpus() -> list[str]:
    texts = _strings(planted_report())
    for secret in SECRETS:
        texts += [secret["value"], secret["plant"]]
    for name in ("cpu-healthy.json", "no-torch.json"):
        texts += _strings(json.loads((HERE / "golden" / name).read_text(encoding="utf-8")))
    texts += [
        json.loads(line)["text"]
        for line in (HERE / "fixtures" / "explain" / "corpus.jsonl").open(encoding="utf-8")
    ]
    texts += (
        (HERE / "fixtures" / "collect_env" / "composed-2.5.1-cu121-rtx4090-pip.txt").read_text().splitlines()
    )
    texts += SHORTEST
    rng = random.Random(17)
    texts += ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    return list(dict.fromkeys(texts))


CORPUS = _corpus()


@pytest.mark.parametrize("steps_name", ["steps_for_text", "steps_for_versions"])
def test_a_step_is_skipped_only_where_it_would_change_nothing(steps_name):
    redactor = _redactor()
    steps = getattr(redactor, steps_name)
    changed = 0
    for text in CORPUS:
        current = text
        for number, (may_match, apply) in enumerate(steps):
            after = apply(current)
            if not may_match(current):
                assert after == current, f"step {number} skipped but it would redact {current!r}"
            changed += after != current
            current = after
    assert changed > 1000, "the corpus should make the steps work, not just pass through"


def test_skipping_and_memo_give_what_running_every_step_gives():
    redactor = _redactor()
    for key, steps in (("detail", redactor.steps_for_text), ("version", redactor.steps_for_versions)):
        for text in CORPUS:
            expected = text
            for _may_match, apply in steps:
                expected = apply(expected)
            assert redactor.text(text, key) == expected
            assert redactor.text(text, key) == expected  # the second time from the memo


def test_the_memo_keeps_version_keys_apart():
    redactor = _redactor()
    assert redactor.text("cuda-toolkit 13.0.3.0", "version") == "cuda-toolkit 13.0.3.0"
    assert redactor.text("cuda-toolkit 13.0.3.0", "detail") == "cuda-toolkit <ip>"
    assert redactor.text("cuda-toolkit 13.0.3.0", "requires_dist") == "cuda-toolkit 13.0.3.0"
