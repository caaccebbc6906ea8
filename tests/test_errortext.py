"""doctor.inputs.errortext: the signature data, the matcher on real pasted errors, and hostile input.

The corpus (tests/fixtures/explain/corpus.jsonl, README beside it) holds real messages from public
threads, split into dev (tuned on) and holdout (never tuned on) before any signature was written.
"""

from __future__ import annotations

import copy
import json
import re
import time
from pathlib import Path

import pytest

from doctor.compat import signatures as sg
from doctor.inputs import errortext as em
from doctor.inputs.errortext import explain_text, load_signatures

ROOT = Path(__file__).resolve().parent.parent
SIGNATURES_PATH = ROOT / "compat_tables" / "signatures.json"
CORPUS_PATH = ROOT / "tests" / "fixtures" / "explain" / "corpus.jsonl"

# Finding ids introduced for `explain`: causes `torchdoctor check` cannot see, or sees only through a
# generic symptom id (torch-import-error, cudnn-error). Anything else must be one of check's ids, so a
# typo cannot invent a finding.
EXPLAIN_ONLY_IDS = {
    "checkpoint-needs-cuda": "a GPU checkpoint loaded where CUDA is unavailable",
    "cuda-device-side-assert": "a kernel's bounds assertion (labels / indices out of range)",
    "cuda-fork-reinit": "CUDA used in a forked child after the parent initialised it",
    "cuda-forward-compat-error": "CUDA error 804, forward-compat libcuda on an unsupported GPU",
    "cuda-init-failed": "the CUDA driver failed to initialise / unclassified cudaGetDeviceCount error",
    "cuda-mps-error": "CUDA error 805, MPS daemon unreachable",
    "cuda-out-of-memory": "the GPU ran out of memory during work",
    "cuda-runtime-error": "generic fallback for any other CUDA error",
    "cuda-unknown-error": "cudaErrorUnknown at start-up (broken driver state)",
    "cudnn-library-missing": "libcudnn cannot be found",
    "cudnn-not-initialized": "CUDNN_STATUS_NOT_INITIALIZED",
    "cudnn-version-incompatible": "torch loaded another cuDNN than it was built with",
    "dataloader-worker-died": "a DataLoader worker exited or was killed",
    "loss-is-nan": "training loss became NaN",
    "nccl-system-error": "NCCL unhandled system error",
    "nccl-timeout": "a collective timed out (NCCL watchdog)",
    "no-matching-wheel": "pip finds no wheel of the requested torch version",
    "nvidia-fabric-manager-not-running": "CUDA error 802 on NVSwitch systems",
    "nvjitlink-symbol-missing": "an older libnvJitLink shadows torch's",
    "shape-mismatch": "tensor shapes do not fit",
    "tensors-on-different-devices": "tensors on two devices combined",
    "torch-cuda-symbol-error": "libtorch_cuda finds older CUDA/NCCL libraries",
    "torchaudio-backend-missing": "torchaudio has no I/O backend",
    "wheel-platform-unsupported": "a wheel built for another Python/platform",
    "windows-dll-load-failed": "WinError 126/127 loading torch's DLLs",
    # the platform families (tests/fixtures/explain/README.md)
    "rocm-amdgpu-ids-missing": "libdrm cannot find amdgpu.ids (harmless)",
    "rocm-wsl-runtime-missing": "ROCm torch under WSL2 without AMD's WSL runtime",
    "mps-op-not-implemented": "an operator without an MPS kernel",
    "mps-macos-too-old": "macOS older than MPS (or the operator) needs",
    "macos-arch-mismatch": "x86_64 and arm64 libraries mixed on macOS",
    "macos-x86-no-torch-wheels": "x86_64 macOS sees no torch after 2.2.2",
    "windows-dll-init-failed": "WinError 1114 initialising a torch DLL",
    "wsl-libcuda-not-on-path": "libcuda.so of the Windows driver not found under WSL2",
    "ptxas-too-old-for-gpu": "Triton's ptxas does not know the GPU",
    "gpu-newer-than-build-range": "the range warning for a GPU just above the build's newest architecture",
}
# ids `torchdoctor distributed` reports (the doctor/distributed/ package); used only in `related`
DISTRIBUTED_IDS = {"distributed-nccl-error", "distributed-collective-failed"}


def _check_ids() -> set[str]:
    from doctor.rules import all_rules

    return {finding_id for rule in all_rules() for finding_id in rule.ids}


@pytest.fixture(scope="module")
def raw_signatures() -> dict:
    return json.loads(SIGNATURES_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def sigs(raw_signatures):
    return load_signatures(raw_signatures)


def _corpus(split: str) -> list[dict]:
    rows = [json.loads(line) for line in CORPUS_PATH.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if r["split"] == split]


def _first(sigs, text) -> str | None:
    findings = explain_text(text, sigs).findings
    return findings[0].finding if findings else None


def _accuracy(sigs, rows) -> tuple[float, list[tuple[str, str | None, str]]]:
    misses = []
    for row in rows:
        got = _first(sigs, row["text"])
        if got != row["expected"]:
            misses.append((row["expected"], got, row["source"]))
    return 1 - len(misses) / len(rows), misses


# --- the data ---------------------------------------------------------------------------------------


def test_signature_file_is_versioned_and_loads(raw_signatures, sigs):
    assert raw_signatures["schema_version"] == 1
    assert re.fullmatch(r"\d{4}\.\d{2}\.\d{2}", raw_signatures["signatures_version"])
    assert sigs.signatures_version == raw_signatures["signatures_version"]
    assert len(sigs.signatures) >= 40
    assert len({s.id for s in sigs.signatures}) == len(sigs.signatures)


def test_finding_ids_are_checks_or_declared_new_ones(sigs):
    check = _check_ids()
    assert not set(EXPLAIN_ONLY_IDS) & check, "a 'new' id that check already has: reuse check's"
    for sig in sigs.signatures:
        assert sig.finding in check or sig.finding in EXPLAIN_ONLY_IDS, (sig.id, sig.finding)
        for related in sig.related:
            assert related in check | set(EXPLAIN_ONLY_IDS) | DISTRIBUTED_IDS, (sig.id, related)
    used = {s.finding for s in sigs.signatures}
    assert set(EXPLAIN_ONLY_IDS) <= used, "declared but unused new ids"


def test_check_ids_the_brief_names_are_reused(sigs):
    used = {s.finding for s in sigs.signatures}
    for finding in (
        "gpu-arch-unsupported",
        "driver-too-old",
        "nvidia-driver-missing",
        "driver-library-mismatch",
        "container-lost-gpu-access",
        "torch-cpu-build",
        "torchvision-mismatch",
        "torchaudio-mismatch",
        "python-unsupported",
        "cuda-visible-devices-hides-all",
        "shm-too-small",
        "library-path-shadows-cuda-libs",
    ):
        assert finding in used


@pytest.mark.parametrize("index", range(len(json.loads(SIGNATURES_PATH.read_text())["signatures"])))
def test_each_example_matches_its_own_row_first(sigs, index):
    sig = sigs.signatures[index]
    assert sig.examples
    for example in sig.examples:
        findings = explain_text(example, sigs).findings
        assert findings, (sig.id, example)
        assert findings[0].signature == sig.id, (sig.id, [f.signature for f in findings])
        assert findings[0].finding == sig.finding


def test_every_row_is_matched_by_an_example_or_the_corpus(sigs):
    matched = set()
    for split in ("dev", "holdout"):
        for row in _corpus(split):
            matched.update(m.signature for m in explain_text(row["text"], sigs).matches)
    for sig in sigs.signatures:
        for example in sig.examples:
            matched.update(m.signature for m in explain_text(example, sigs).matches)
    assert matched == {s.id for s in sigs.signatures}


def test_needles_are_lowercase_literals_of_the_pattern(sigs):
    for sig in sigs.signatures:
        assert sig.needles
        for needle in sig.needles:
            assert needle == needle.lower() and len(needle) >= sg.MIN_NEEDLE


# --- the corpus -------------------------------------------------------------------------------------


def test_corpus_shape():
    dev, holdout = _corpus("dev"), _corpus("holdout")
    assert len(dev) + len(holdout) >= 100
    assert 0.15 <= len(holdout) / (len(dev) + len(holdout)) <= 0.25
    for row in dev + holdout:
        assert set(row) - {"family"} == {"text", "expected", "source", "split"}
        assert row.get("family", "amd") in FAMILIES
        assert row["source"].startswith("https://")
        assert row["text"].strip()
    sources = [r["source"] for r in dev + holdout]
    assert len(sources) == len(set(sources)), "one entry per thread"


FAMILIES = ("amd", "apple", "windows", "libraries", "older", "range", "containers", "collect_env")


def _by_family(sigs, rows) -> str:
    counts: dict[str, list[int]] = {}
    for row in rows:
        right = _first(sigs, row["text"]) == row["expected"]
        for key in (row["family"], "families") if "family" in row else ("original",):
            counts.setdefault(key, [0, 0])
            counts[key][0] += right
            counts[key][1] += 1
    return ", ".join(f"{k} {ok}/{n}" for k, (ok, n) in counts.items())


def test_dev_accuracy(sigs):
    rows = _corpus("dev")
    accuracy, misses = _accuracy(sigs, rows)
    print(f"\ndev accuracy: {accuracy:.3f} ({len(rows) - len(misses)}/{len(rows)}): {_by_family(sigs, rows)}")
    for expected, got, source in misses:
        print(f"  miss: expected {expected}, got {got}: {source}")
    assert accuracy >= 0.90
    families = [r for r in rows if "family" in r]
    assert _accuracy(sigs, families)[0] >= 0.90


def test_holdout_accuracy(sigs):
    # Never tuned on: computed and printed. The assertion was added after the first look at the result.
    rows = _corpus("holdout")
    accuracy, misses = _accuracy(sigs, rows)
    right = len(rows) - len(misses)
    print(f"\nholdout accuracy: {accuracy:.3f} ({right}/{len(rows)}): {_by_family(sigs, rows)}")
    for expected, got, source in misses:
        print(f"  miss: expected {expected}, got {got}: {source}")
    # First look: 52/52. Later changes (source URLs, two DataLoader wordings read from DataLoader.cpp)
    # came from the torch source, not from holdout results; it stayed 52/52.
    # With the platform families (signatures 2026.12.01, written on dev only): first look 70/77, the 52
    # older entries all right and 18 of the 25 new ones. Two rows added afterwards for messages the issue
    # names (cuDNN 9's loader, NCCL's unhandled CUDA error; written from dev threads) made it 71/77 (19/25).
    # The thresholds are the first look, not tuned to.
    assert accuracy >= 0.90
    families = [r for r in rows if "family" in r]
    assert _accuracy(sigs, families)[0] >= 0.72


def _ansi(text):
    return "\n".join(f"\x1b[31;1m{line}\x1b[0m" for line in text.split("\n"))


TRANSFORMS = {
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "ansi": _ansi,
    "osc-title": lambda t: "\x1b]0;job 42\x07" + t,
    "quoted": lambda t: "\n".join("> " + line for line in t.split("\n")),
    "fenced": lambda t: "```text\n" + t + "\n```",
    "html-escaped": lambda t: t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"),
    "chinese-around": lambda t: "运行训练脚本时报错：\n" + t + "\n请问怎么解决？谢谢",
    "utf8-bytes": lambda t: t.encode("utf-8"),
    "utf16-bytes": lambda t: t.encode("utf-16"),
    "buried-in-log": lambda t: "\n".join(f"[INFO] step {i} ok" for i in range(300)) + "\n" + t,
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_first_finding_survives_how_text_is_pasted(sigs, name):
    transform = TRANSFORMS[name]
    changed = []
    for row in _corpus("dev"):
        before = _first(sigs, row["text"])
        after = _first(sigs, transform(row["text"]))
        if before != after:
            changed.append((row["source"], before, after))
    assert not changed


# --- ranking and what a finding carries --------------------------------------------------------------


def test_exact_architecture_message_outranks_generic_cuda_error(sigs):
    text = (
        "UserWarning: NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current "
        "PyTorch installation.\n...\nRuntimeError: CUDA error: no kernel image is available for execution on "
        "the device\n"
    )
    result = explain_text(text, sigs)
    first = result.findings[0]
    assert (first.finding, first.signature, first.line) == (
        "gpu-arch-unsupported",
        "arch-sm-not-compatible",
        1,
    )
    assert first.groups == {"gpu": "NVIDIA GeForce RTX 5090", "sm": "120"}
    assert "arch-no-kernel-image" in first.also_matched
    assert first.occurrences == 2
    # the generic "CUDA error" fallback does not count on a line a specific signature explains
    assert [f.finding for f in result.findings] == ["gpu-arch-unsupported"]


def test_root_cause_ranks_above_its_consequences(sigs):
    log = (
        "torch/cuda/__init__.py:83: UserWarning: CUDA initialization: The NVIDIA driver on your system is "
        "too old "
        "(found version 11040). Please update your GPU driver\n"
        "Traceback (most recent call last):\n"
        "RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is "
        "False.\n"
        "RuntimeError: No CUDA GPUs are available\n"
    )
    findings = explain_text(log, sigs).findings
    assert [f.finding for f in findings] == [
        "driver-too-old",
        "cuda-visible-devices-hides-all",
        "checkpoint-needs-cuda",
    ]
    assert findings[0].groups == {"found_version": "11040"}
    assert findings[0].line == 1


def test_dedupes_by_finding_id_and_keeps_every_match(sigs):
    text = "\n".join(["RuntimeError: operator torchvision::nms does not exist"] * 3)
    result = explain_text(text, sigs)
    assert [f.finding for f in result.findings] == ["torchvision-mismatch"]
    assert result.findings[0].occurrences == 3
    assert [m.line for m in result.matches] == [1, 2, 3]


def test_finding_carries_meaning_fix_and_source(sigs):
    (finding,) = explain_text("ERROR: No matching distribution found for torch==2.5.1+cu124", sigs).findings
    assert finding.finding == "no-matching-wheel"
    assert finding.groups == {"pkg": "torch", "version": "2.5.1+cu124"}
    assert "--index-url" in finding.fix
    assert finding.meaning and finding.title and finding.torch_versions
    assert finding.source.startswith("https://")


def test_line_numbers_count_normalised_lines(sigs):
    text = "intro\r\n```\r\n> Traceback\r\n> AssertionError: Torch not compiled with CUDA enabled\r\n```\r\n"
    (finding,) = explain_text(text, sigs).findings
    assert (finding.finding, finding.line) == ("torch-cpu-build", 4)
    assert finding.text == "Torch not compiled with CUDA enabled"


def test_generic_cuda_error_only_where_nothing_specific_matched(sigs):
    text = ("RuntimeError: CUDA error: an illegal memory access was encountered\nRuntimeError: CUDA error: "
        "out of memory")
    result = explain_text(text, sigs)
    assert [(f.finding, f.line) for f in result.findings] == [
        ("cuda-out-of-memory", 2),
        ("cuda-runtime-error", 1),
    ]
    assert result.findings[1].groups == {"reason": "an illegal memory access was encountered"}


def test_no_signature_no_finding(sigs):
    result = explain_text("Traceback (most recent call last):\nKeyError: 'foo'\n", sigs)
    assert result.findings == () and result.matches == ()


# --- hostile input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        "",
        b"",
        " \n\t\n",
        bytes(range(256)) * 4000,
        b"\xff\xfe\x00\xd8" * 1000,  # a BOM, then lone surrogates
        "\x1b]8;;" + "x" * 5000,  # an OSC sequence that never ends
        "\x1b[" * 10000,
        "\ud800 lone surrogate \udfff",
    ],
    ids=["empty", "empty-bytes", "blank", "binary", "bad-utf16", "open-osc", "open-csi", "surrogates"],
)
def test_hostile_input_never_raises(sigs, data):
    result = explain_text(data, sigs)
    assert isinstance(result.findings, tuple)


def test_wrong_type_is_a_type_error(sigs):
    with pytest.raises(TypeError):
        explain_text(None, sigs)


def test_binary_with_a_message_inside(sigs):
    data = bytes(range(256)) * 50 + b"\nRuntimeError: No CUDA GPUs are available\n" + bytes(range(256)) * 50
    result = explain_text(data, sigs)
    assert result.findings[0].finding == "cuda-visible-devices-hides-all"
    assert any("UTF-8" in note for note in result.notes)


def test_utf16_without_bom_is_read_through_its_nuls(sigs):
    data = "ImportError: libcudnn.so.9: cannot open shared object file".encode("utf-16-le")
    assert _first(sigs, data) == "cudnn-library-missing"


def test_huge_input_is_searched_from_start_to_end(sigs):
    filler = "x" * 99 + "\n"
    text = (
        "RuntimeError: Found no NVIDIA driver on your system\n"
        + filler * 200_000  # 20 MB
        + "RuntimeError: Torch not compiled with CUDA enabled\n"
    )
    result = explain_text(text, sigs)
    assert sorted(f.finding for f in result.findings) == ["nvidia-driver-missing", "torch-cpu-build"]
    assert sorted(f.line for f in result.findings) == [1, 200_002]
    assert result.lines == 200_002 and result.notes == ()


def test_a_stream_of_pieces_is_the_same_as_the_whole(sigs):
    text = (b"intro\r\n" + b"RuntimeError: Torch not compiled with CUDA enabled\r\n" + "运行\r\n".encode()
            + b"RuntimeError: No CUDA GPUs are available\r\n")
    whole = explain_text(text, sigs)
    # split everywhere, including between CR and LF and inside a multi-byte character
    for size in (1, 2, 3, 7):
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        parts = em.explain_stream(pieces, sigs)
        assert [(f.finding, f.line) for f in parts.findings] == [(f.finding, f.line) for f in whole.findings]
        assert parts.lines == whole.lines == 4 and parts.notes == ()


def test_what_could_not_be_read_is_counted(sigs):
    long_line = "y" * (em.MAX_LINE_CHARS + 12_345)
    data = (b"ok \xfd\xfe\xff\n" + b"a\x00b\x01\n" + long_line.encode()
            + b" Torch not compiled with CUDA enabled\n" + b"RuntimeError: No CUDA GPUs are available\n")
    result = explain_text(data, sigs)
    assert [f.finding for f in result.findings] == ["cuda-visible-devices-hides-all"]
    assert result.lines == 4
    assert "3 byte(s) were not valid UTF-8 text and were replaced" in result.notes
    assert "1 NUL byte(s) were removed" in result.notes
    assert "1 other control character(s) were removed" in result.notes
    assert "1 line(s) longer than 4096 characters were searched in overlapping pieces" in result.notes
    cut = len(" Torch not compiled with CUDA enabled") + 12_345
    assert (f"1 line(s) longer than {em.MAX_LINE_CHARS} characters were searched up to there: {cut} "
            "character(s) after that were not searched") in result.notes


def test_pathological_line_does_not_hang(sigs):
    # 1 MB of "a" on one line: the classic probe for regex backtracking, which would run for minutes.
    start = time.perf_counter()
    result = explain_text("a" * 1_000_000, sigs)
    assert time.perf_counter() - start < 30  # a hang guard, not a speed target
    assert result.findings == ()
    assert any("overlapping pieces" in note for note in result.notes)


def test_message_in_a_long_minified_line_is_found(sigs):
    line = (
        '{"log": "' + "y" * 10_000 + " CUDA out of memory. Tried to allocate 2.00 GiB " + "z" * 10_000 + '"}'
    )
    (finding,) = explain_text(line, sigs).findings
    assert finding.finding == "cuda-out-of-memory"
    assert finding.groups == {"requested": "2.00 GiB"}
    assert finding.line == 1


def test_escape_sequences_and_entities_are_stripped(sigs):
    text = (
        "\x1b]0;runner\x07\x1b[1;31mRuntimeError\x1b[0m: ^[[32mFound no NVIDIA driver^[[0m on your system\r\n"
        "&gt; Failed to initialize NVML: Driver/library version mismatch&nbsp;\r\n"
    )
    findings = explain_text(text, sigs).findings
    assert [f.finding for f in findings] == ["driver-library-mismatch", "nvidia-driver-missing"]
    assert findings[1].text == "Found no NVIDIA driver on your system"
    lines, _ = em.normalize_text(text)
    assert lines[0] == "RuntimeError: Found no NVIDIA driver on your system"
    assert lines[1] == "Failed to initialize NVML: Driver/library version mismatch "


def test_chinese_around_the_message(sigs):
    text = "服务器更新驱动后运行报错：\nRuntimeError: CUDA error: out of memory\n显存不足，请问如何解决？"
    (finding,) = explain_text(text, sigs).findings
    assert (finding.finding, finding.line) == ("cuda-out-of-memory", 2)


def test_a_message_buried_in_a_ci_log_is_found():
    # A 5,000-line CI log with one message buried in it.
    sigs = load_signatures(SIGNATURES_PATH.read_text(encoding="utf-8"))
    lines = [
        f"2026-11-30T08:{i % 60:02d}:{i % 60:02d}.1234567Z [INFO] step {i} loss: 0.{i:04d} lr: 3e-4 "
        f"tokens/s {1000 + i} module.layers.{i % 24}.mlp grad_norm=0.{i:03d} ##[group]Run pytest -q tests/"
        for i in range(5000)
    ]
    lines.insert(3777, "E   RuntimeError: The NVIDIA driver on your system is too old (found version 12040).")
    result = explain_text("\n".join(lines), sigs)
    assert [f.finding for f in result.findings] == ["driver-too-old"]
    assert result.findings[0].line == 3778


# --- validation -------------------------------------------------------------------------------------


def _with_row(raw, index=0, **changes):
    data = copy.deepcopy(raw)
    for key, value in changes.items():
        if value is None:
            data["signatures"][index].pop(key, None)
        else:
            data["signatures"][index][key] = value
    return data


@pytest.mark.parametrize(
    ("changes", "field", "why"),
    [
        ({"pattern": "no kernel (image"}, "pattern", "does not compile"),
        ({"pattern": "(?:cuda error )+"}, "pattern", "unbounded quantifier on a group"),
        ({"pattern": "(a+)+ no kernel image"}, "pattern", "nested quantifier"),
        ({"pattern": "(?:x{1,9}y){2,5} no kernel image"}, "pattern", "nested quantifier"),
        ({"pattern": "(kernel) image \\1"}, "pattern", "back-references"),
        ({"pattern": "(?P<a>kernel) (?P=a) image"}, "pattern", "back-references"),
        ({"pattern": "no kernel image.{0,5000}"}, "pattern", "above"),
        ({"pattern": "sm_\\d+|abc"}, "pattern", "literal of at least"),
        ({"pattern": "(?i)no kernel image"}, "pattern", "group syntax"),
        ({"title": None}, "title", "missing"),
        ({"examples": []}, "examples", "non-empty list"),
        ({"finding": "GPU_Arch_Unsupported"}, "finding", "kebab-case"),
        ({"finding": "gpu-arch-unsupported-"}, "finding", "kebab-case"),
        ({"id": "arch sm"}, "id", "kebab-case"),
        ({"specificity": 101}, "specificity", "between 0 and 100"),
        ({"specificity": True}, "specificity", "must be a int"),
        ({"specificity": "95"}, "specificity", "must be a int"),
        ({"source": "http://example.com"}, "source", "https://"),
        ({"related": ["Not An Id"]}, "related", "kebab-case"),
        ({"colour": "red"}, "colour", "unknown field"),
        ({"meaning": "  "}, "meaning", "must not be empty"),
        ({"lines": 0}, "lines", "between 1 and"),
        ({"lines": 41}, "lines", "between 1 and"),
        ({"lines": True}, "lines", "between 1 and"),
        ({"judge": "astrology", "outcome": "x"}, "judge", "must be one of"),
        ({"judge": "capability-range"}, "outcome", "needs both"),
        ({"outcome": "below-min"}, "outcome", "needs both"),
    ],
)
def test_bad_row_is_one_line_naming_row_and_field(raw_signatures, changes, field, why):
    data = _with_row(raw_signatures, 3, **changes)
    with pytest.raises(ValueError) as excinfo:
        load_signatures(data)
    message = str(excinfo.value)
    assert "\n" not in message
    assert message.startswith("signatures: row 3")
    assert f"field '{field}'" in message
    assert why in message


def test_duplicate_id_is_rejected(raw_signatures):
    data = copy.deepcopy(raw_signatures)
    data["signatures"][5]["id"] = data["signatures"][4]["id"]
    with pytest.raises(ValueError, match=r"row 5 .*field 'id': duplicate id"):
        load_signatures(data)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "top level must be a JSON object"),
        ({"schema_version": 2, "signatures_version": "2026.11.30", "signatures": [{}]}, "schema_version"),
        ({"schema_version": 1, "signatures_version": "30/11/2026", "signatures": [{}]}, "YYYY.MM.DD"),
        ({"schema_version": 1, "signatures_version": "2026.11.30", "signatures": []}, "non-empty list"),
        (
            {"schema_version": 1, "signatures_version": "2026.11.30", "signatures": ["x"]},
            "row 0: must be an object",
        ),
    ],
)
def test_bad_file_is_one_line(data, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        load_signatures(data)


def test_loader_takes_text_bytes_or_dict(raw_signatures):
    text = SIGNATURES_PATH.read_text(encoding="utf-8")
    for data in (text, text.encode("utf-8"), raw_signatures):
        assert len(load_signatures(data).signatures) == len(raw_signatures["signatures"])


def test_optional_group_around_quantifiers_is_allowed():
    # an optional group cannot repeat, so quantifiers inside it cannot backtrack catastrophically
    assert sg._unsafe_pattern(r"too old(?: \(found version (?P<v>\d+)\))?") is None
    assert sg._unsafe_pattern(r"too old(?: \(found version (?P<v>\d+)\)){2}") is not None


# --- the smoke-test rule's rows ---------------------------------------------------------------------


def _with_smoke_row(raw, index=0, **changes):
    data = copy.deepcopy(raw)
    for key, value in changes.items():
        if value is None:
            data["smoke_test"][index].pop(key, None)
        else:
            data["smoke_test"][index][key] = value
    return data


def test_smoke_test_rows_load_beside_explains(raw_signatures, sigs):
    assert len(sigs.smoke_test) == len(raw_signatures["smoke_test"]) > 0
    # explain matches its own rows only: the smoke-test rule's words are not candidates of a pasted text
    matched = {m.signature for m in explain_text("out of memory", sigs).matches}
    assert not {w.id for w in sigs.smoke_test} & matched
    assert sigs.regex("no-nvidia-driver").search("Found no NVIDIA driver on your system")
    assert sigs.regex("smoke-busy").search("CUDA-capable device(s) is/are busy or unavailable")
    with pytest.raises(KeyError):
        sigs.regex("no-such-row")


@pytest.mark.parametrize(
    ("changes", "field", "why"),
    [
        ({"pattern": "busy (or"}, "pattern", "does not compile"),
        ({"pattern": "(?:busy )+"}, "pattern", "unbounded quantifier on a group"),
        ({"pattern": "sm|busy or unavailable"}, "pattern", "literal of at least"),
        ({"examples": ["the GPU is free"]}, "examples", "example 0 does not match the pattern"),
        ({"examples": []}, "examples", "non-empty list"),
        ({"source": "http://example.com"}, "source", "https://"),
        ({"finding": "Busy"}, "finding", "kebab-case"),
        ({"title": "a title"}, "title", "unknown field"),
        ({"source": None}, "source", "missing"),
        ({"id": "no-nvidia-driver"}, "id", "duplicate id"),
    ],
)
def test_bad_smoke_test_row_is_one_line_naming_row_and_field(raw_signatures, changes, field, why):
    index = next(i for i, row in enumerate(raw_signatures["smoke_test"]) if row["id"] == "smoke-busy")
    with pytest.raises(ValueError) as excinfo:
        load_signatures(_with_smoke_row(raw_signatures, index, **changes))
    message = str(excinfo.value)
    assert "\n" not in message and message.startswith(f"signatures: smoke_test row {index}")
    assert f"field '{field}'" in message and why in message


def test_smoke_test_must_be_a_list_of_objects(raw_signatures):
    for bad, why in (({"x": 1}, "'smoke_test' must be a list"),
                     (["x"], "smoke_test row 0: must be an object")):
        data = copy.deepcopy(raw_signatures)
        data["smoke_test"] = bad
        with pytest.raises(ValueError, match=re.escape(why)):
            load_signatures(data)


def test_the_smoke_test_rule_reads_rows_that_exist_and_uses_every_smoke_test_row(sigs):
    from doctor.rules import runtime

    source = Path(runtime.__file__).read_text(encoding="utf-8")
    named = {row for row, _ in runtime._MATCHERS} | set(re.findall(r'_words\("([a-z0-9-]+)"\)', source))
    for row in named:
        sigs.regex(row)  # a KeyError names a row the rule reads that the file does not have
    assert {w.id for w in sigs.smoke_test} <= named, "a smoke_test row no code reads"
    assert {w.finding for w in sigs.smoke_test} <= set(runtime.RULES[0].ids)


# --- multi-line and judged rows ----------------------------------------------------------------------------


def test_every_judge_the_loader_accepts_is_one_the_matcher_has():
    assert set(sg.JUDGES) == set(em.JUDGES)


@pytest.mark.parametrize(
    ("cc", "low", "high", "outcome"),
    [
        ("12.1", "8.0", "12.0", "above-max-same-major"),  # GB10 against a cu128/cu129 build
        ("8.9", "3.7", "8.6", "above-max-same-major"),
        ("12.0", "5.0", "9.0", "above-max-newer-major"),  # RTX 5090 against a cu124 build
        ("10.0", "5.0", "9.0", "above-max-newer-major"),
        ("3.7", "5.0", "9.0", "below-min"),
        ("8.6", "5.0", "9.0", "within"),
    ],
)
def test_capability_range_judge(cc, low, high, outcome):
    assert em.capability_range({"cc": cc, "min": low, "max": high}) == outcome


def test_capability_range_judge_needs_every_number():
    assert em.capability_range({"cc": "12.1", "min": "8.0"}) is None
    assert em.capability_range({"cc": "%d.%d", "min": "8.0", "max": "12.0"}) is None


RANGE_LINES = ("Found GPU0 {gpu} which is of cuda capability {cc}.{sep}Minimum and Maximum cuda capability "
               "supported by this version of PyTorch is{sep}({low}) - ({high})")


@pytest.mark.parametrize(
    ("gpu", "cc", "low", "high", "sep", "finding", "title_word"),
    [
        ("NVIDIA GB10", "12.1", "8.0", "12.0", "\n    ", "gpu-newer-than-build-range", "harmless"),
        ("NVIDIA GB10", "12.1", "8.0", "12.0", " ", "gpu-newer-than-build-range", "harmless"),
        ("NVIDIA GeForce RTX 5090", "12.0", "5.0", "9.0", "\n", "gpu-arch-unsupported", "newer"),
        ("Tesla K80", "3.7", "5.0", "9.0", "\n", "gpu-arch-unsupported", "older"),
    ],
)
def test_range_warning_is_judged_by_its_numbers(sigs, gpu, cc, low, high, sep, finding, title_word):
    text = RANGE_LINES.format(gpu=gpu, cc=cc, low=low, high=high, sep=sep)
    findings = explain_text(text, sigs).findings
    assert [f.finding for f in findings] == [finding]  # the general "Found GPU0" prefix adds no cause
    assert title_word in findings[0].title
    assert findings[0].line == 1


def test_a_multi_line_row_spans_a_block_boundary(sigs):
    # the range warning split over two blocks of the stream: the matcher holds the last lines back
    text = "Found GPU0 NVIDIA GB10 which is of cuda capability 12.1.\n"
    rest = "Minimum and Maximum cuda capability supported by this version of PyTorch is\n(8.0) - (12.0)\n"
    pieces = ["x\n" * 10, text, rest]
    result = em.explain_stream(pieces, sigs)
    assert [(f.finding, f.line) for f in result.findings] == [("gpu-newer-than-build-range", 11)]


def test_a_multi_line_row_whose_words_start_before_the_needle(sigs):
    text = "My GPU is an AMD Radeon RX 6700 XT.\n\nRuntimeError: Found no NVIDIA driver on your system.\n"
    first = explain_text(text, sigs).findings[0]
    assert (first.finding, first.line) == ("torch-wrong-vendor-build", 1)
