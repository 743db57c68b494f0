"""Offline throughput prompts: fixed input length, three entropy tiers, built from the shipped categories."""

from __future__ import annotations

import itertools
import json
import re
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from bench import BenchError
from bench.prompts import (
    MAX_COUNT_CALLS,
    THROUGHPUT_BENCHES,
    TIERS,
    build_throughput_prompts,
    categories_dir,
    estimate_tokens,
)

SCRIPTS = {
    "Latin": "A-Za-z",
    "Greek": "\u0370-\u03ff",
    "Cyrillic": "\u0400-\u04ff",
    "Hebrew": "\u0590-\u05ff",
    "Arabic": "\u0600-\u06ff",
    "Devanagari": "\u0900-\u097f",
    "Thai": "\u0e00-\u0e7f",
    "Kana": "\u3040-\u30ff",
    "Han": "\u4e00-\u9fff",
    "Hangul": "\uac00-\ud7af",
}
"""Unicode ranges of the scripts the tests look for."""


def _scripts(text: str, minimum: int = 10) -> set[str]:
    """Scripts with at least `minimum` characters in the text."""
    return {name for name, chars in SCRIPTS.items() if len(re.findall(f"[{chars}]", text)) >= minimum}


def _shared(a: str, b: str) -> int:
    """Length of the common prefix of two strings."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _unique_4grams(text: str) -> float:
    words = text.split()
    grams = [tuple(words[i : i + 4]) for i in range(len(words) - 3)]
    return len(set(grams)) / len(grams)


def _compression(text: str) -> float:
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data, 9))


@pytest.fixture(scope="module")
def sets() -> dict[str, object]:
    return {bench: build_throughput_prompts(bench) for bench in THROUGHPUT_BENCHES}


@pytest.fixture(scope="module")
def source_texts() -> dict[str, str]:
    """All user turns of each shipped category file, joined."""
    texts = {}
    for path in sorted(categories_dir().glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        texts[path.stem] = "\n\n".join(turn for row in rows for turn in row["turns"])
    return texts


@pytest.mark.parametrize("bench", list(THROUGHPUT_BENCHES))
def test_every_tier_has_per_tier_prompts_within_two_percent(sets: dict, bench: str) -> None:
    prompts = sets[bench]
    target = THROUGHPUT_BENCHES[bench]
    assert prompts.source == "generated" and prompts.bench == bench and prompts.categories == TIERS
    assert [s.category for s in prompts.samples] == [tier for tier in TIERS for _ in range(8)]
    label = bench.removeprefix("throughput_")
    assert [s.id for s in prompts.samples] == [f"{tier}-{label}-{i:03d}" for tier in TIERS for i in range(1, 9)]
    counts = estimate_tokens([s.turns[0] for s in prompts.samples])
    for sample, count in zip(prompts.samples, counts, strict=True):
        assert abs(count - target) <= 0.02 * target, (sample.id, count)
        assert len(sample.turns) == 1 and sample.sub_category
        last_line = sample.turns[0].rsplit("\n", 1)[-1]
        assert last_line.endswith(".") and len(last_line) < 160, last_line


def test_ids_are_unique_across_benches(sets: dict) -> None:
    ids = [s.id for prompts in sets.values() for s in prompts.samples]
    assert len(ids) == len(set(ids)) == 5 * 3 * 8


def test_prompts_share_no_long_prefix(sets: dict) -> None:
    texts = [s.turns[0] for prompts in sets.values() for s in prompts.samples]
    heads = sorted(text[:200] for text in texts)
    longest = max(_shared(a, b) for a, b in itertools.pairwise(heads))
    assert longest < 64


def test_deterministic_for_a_seed_and_different_across_seeds() -> None:
    first = build_throughput_prompts("throughput_2k", per_tier=3, seed=7)
    again = build_throughput_prompts("throughput_2k", per_tier=3, seed=7)
    other = build_throughput_prompts("throughput_2k", per_tier=3, seed=8)
    assert first == again
    assert all(a.turns != b.turns for a, b in zip(first.samples, other.samples, strict=True))
    more = build_throughput_prompts("throughput_2k", per_tier=5, seed=7)
    assert [s for s in more.samples if int(s.id[-3:]) <= 3] == list(first.samples)


def test_unknown_bench_lists_the_available_ones() -> None:
    with pytest.raises(BenchError) as error:
        build_throughput_prompts("throughput_4k")
    message = str(error.value)
    assert "\n" not in message and "'throughput_4k'" in message
    assert message.endswith("available benches: " + ", ".join(THROUGHPUT_BENCHES))


def test_estimate_tokens_rule() -> None:
    assert estimate_tokens(["", "abcd", "abcde", "你好世界", "Привет", "नमस्ते"]) == [0, 1, 2, 4, 3, 3]
    assert estimate_tokens(["x" * 4000]) == [1000]


@pytest.mark.parametrize("bench", ["throughput_1k", "throughput_8k"])
def test_a_custom_token_counter_is_honoured_with_few_calls(bench: str) -> None:
    calls: list[int] = []

    def words(texts: Sequence[str]) -> list[int]:
        calls.append(len(texts))
        return [len(text.split()) for text in texts]

    per_tier = 2
    prompts = build_throughput_prompts(bench, per_tier=per_tier, count_tokens=words)
    target = THROUGHPUT_BENCHES[bench]
    for sample in prompts.samples:
        assert abs(len(sample.turns[0].split()) - target) <= 0.02 * target, sample.id
    assert len(calls) <= 4 * 3 * per_tier
    assert max(calls) <= 12


def test_each_prompt_stays_within_the_call_budget() -> None:
    calls = 0

    def coarse(texts: Sequence[str]) -> list[int]:
        nonlocal calls
        calls += 1
        return [len(text) // 3 + len(text.encode("utf-8")) // 7 for text in texts]

    for tier_index in range(3):
        calls = 0
        build_throughput_prompts("throughput_16k", per_tier=1, count_tokens=coarse, seed=tier_index)
        assert calls <= 3 * MAX_COUNT_CALLS
        assert calls <= 3 * 4


def test_a_broken_counter_is_a_bench_error() -> None:
    with pytest.raises(BenchError, match="one integer per text"):
        build_throughput_prompts("throughput_1k", per_tier=1, count_tokens=lambda texts: [1])
    with pytest.raises(BenchError, match="returned 0"):
        build_throughput_prompts("throughput_1k", per_tier=1, count_tokens=lambda texts: [0] * len(texts))


@pytest.mark.parametrize("bench", list(THROUGHPUT_BENCHES))
def test_low_entropy_is_far_more_repetitive_than_high_entropy(sets: dict, bench: str) -> None:
    texts = {tier: [s.turns[0] for s in sets[bench].samples if s.category == tier] for tier in TIERS}
    low = [_unique_4grams(text) for text in texts["low_entropy"]]
    mixed = [_unique_4grams(text) for text in texts["mixed"]]
    high = [_unique_4grams(text) for text in texts["high_entropy"]]
    assert max(low) < min(high) - 0.3, (low, high)
    assert sum(low) / len(low) < sum(mixed) / len(mixed) < sum(high) / len(high)
    assert min(_compression(text) for text in texts["low_entropy"]) > 1.5 * max(
        _compression(text) for text in texts["high_entropy"]
    )


@pytest.mark.parametrize("bench", list(THROUGHPUT_BENCHES))
def test_high_entropy_mixes_categories_and_scripts(sets: dict, source_texts: dict[str, str], bench: str) -> None:
    for sample in sets[bench].samples:
        if sample.category != "high_entropy":
            continue
        text = sample.turns[0]
        scripts = _scripts(text)
        assert "Latin" in scripts and len(scripts) >= 3, (sample.id, scripts)
        paragraphs = [p.strip() for p in text.split("\n\n")[1:-1] if len(p.strip()) >= 30]
        found = set()
        for paragraph in paragraphs:
            owners = [name for name, source in source_texts.items() if paragraph in source]
            assert owners, (sample.id, paragraph[:80])
            found.update(owners)
        assert len(found) >= 4, (sample.id, found)


def test_text_comes_only_from_the_given_categories_folder(tmp_path: Path) -> None:
    rows = [
        {"question_id": f"tiny-{i:03d}", "category": "tiny", "sub_category": "only",
         "turns": [f"Paragraph {i} of tiny."], "difficulty": "easy", "multiturn": False}
        for i in range(3)
    ]
    (tmp_path / "tiny.jsonl").write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    prompts = build_throughput_prompts("throughput_1k", per_tier=1, categories=tmp_path)
    high = next(s for s in prompts.samples if s.category == "high_entropy").turns[0]
    body = high.split("\n\n")[1:-1]
    assert body and all(p.startswith("Paragraph ") and p.endswith(" of tiny.") for p in body[:-1])
    with pytest.raises(BenchError, match="no category files"):
        build_throughput_prompts("throughput_1k", categories=tmp_path / "missing")


def test_building_the_32k_set_is_fast() -> None:
    start = time.perf_counter()
    build_throughput_prompts("throughput_32k", per_tier=8)
    assert time.perf_counter() - start < 1.0
