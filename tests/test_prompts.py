"""Prompt sources: the shipped categories, local files in three shapes, placeholders and bad input."""

from __future__ import annotations

import json
import re
import socket
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from bench import BenchError
from bench.prompts import GROUNDED, PLACEHOLDER_PREFIX, categories_dir, load_prompts, rows_to_samples
from tests.conftest import SPEC_BENCH, SPEC_BENCH_MISSING

QUALITATIVE = ["coding", "humanities", "math", "multilingual", "qa", "rag", "reasoning", "roleplay", "stem",
               "summarization", "writing"]
ROW_KEYS = {"question_id", "category", "sub_category", "turns", "difficulty", "multiturn"}


def _shipped_rows() -> dict[str, list[dict]]:
    return {
        path.stem: [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        for path in sorted(categories_dir().glob("*.jsonl"))
    }


def test_every_qualitative_category_ships_with_24_or_more_samples() -> None:
    rows = _shipped_rows()
    assert sorted(rows) == QUALITATIVE
    for category, items in rows.items():
        assert len(items) >= 24, category
        for row in items:
            assert set(row) == ROW_KEYS, row["question_id"]
            assert row["category"] == category
            assert row["multiturn"] == (len(row["turns"]) > 1)
            assert row["difficulty"] in {"easy", "medium", "hard"}
            assert all(isinstance(turn, str) and turn.strip() for turn in row["turns"])
    ids = Counter(row["question_id"] for items in rows.values() for row in items)
    assert max(ids.values()) == 1


def test_shipped_categories_are_shaped_like_speed_bench() -> None:
    rows = _shipped_rows()
    for category in ("coding", "math", "reasoning", "roleplay", "writing", "rag"):
        assert sum(row["multiturn"] for row in rows[category]) >= 4, category

    def words(row: dict) -> int:
        return len(row["turns"][0].split())

    def median(items: list[int]) -> int:
        return sorted(items)[len(items) // 2]

    for category in ("rag", "summarization"):
        lengths = [words(row) for row in rows[category]]
        assert min(lengths) >= 250 and max(lengths) <= 2200 and median(lengths) >= 400, category
    assert median([words(row) for row in rows["qa"]]) <= 60
    languages = {row["sub_category"].split("_")[0] for row in rows["multilingual"]}
    assert len(languages) >= 6


def test_load_shipped_with_category_and_limit() -> None:
    prompts = load_prompts(category="math,qa", limit=3)
    assert prompts.categories == ("math", "qa")
    assert [s.category for s in prompts.samples] == ["math"] * 3 + ["qa"] * 3


def test_unknown_category_lists_what_exists() -> None:
    with pytest.raises(BenchError, match="available categories: all, coding, humanities"):
        load_prompts(category="cooking")


def test_unknown_bench_lists_what_exists() -> None:
    with pytest.raises(BenchError, match="available benches: qualitative, grounded, throughput_1k"):
        load_prompts(bench="nonsense")


def test_speed_bench_parquet_and_placeholders(tmp_path: Path) -> None:
    rows = [
        {"question_id": "a" * 32, "category": "coding", "sub_category": "x", "turns": ["Write a sort."],
         "source": "s", "src_id": "1", "difficulty": "easy", "multiturn": False},
        {"question_id": "b" * 32, "category": "qa", "sub_category": "x", "turns": ["Why?", "Really?"],
         "source": "s", "src_id": "2", "difficulty": "easy", "multiturn": True},
    ]
    path = tmp_path / "speed.parquet"
    pd.DataFrame(rows).to_parquet(path)
    prompts = load_prompts(str(path))
    assert [s.turns for s in prompts.samples] == [("Write a sort.",), ("Why?", "Really?")]
    rows.append({**rows[0], "question_id": "c" * 32, "turns": [PLACEHOLDER_PREFIX + " USING SPECDEC_BENCH"]})
    pd.DataFrame(rows).to_parquet(path)
    with pytest.raises(BenchError, match="1 rows are SPEED-Bench placeholders"):
        load_prompts(str(path))


def test_prepared_messages_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "prepared.jsonl"
    path.write_text(json.dumps({"question_id": "q1", "category": "rag", "messages": [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ignored"}, {"role": "user", "content": "second"}]}) + "\n")
    (sample,) = load_prompts(str(path)).samples
    assert sample.turns == ("first", "second") and sample.category == "rag"


def test_rows_without_usable_turns_are_counted(tmp_path: Path) -> None:
    samples, skipped, placeholders = rows_to_samples([
        {"question_id": "1", "category": "qa", "turns": []},
        {"question_id": "2", "category": "qa", "turns": ["  "]},
        {"question_id": "3", "category": "", "turns": ["x"]},
        {"question_id": "4", "category": "qa", "turns": "not a list"},
        {"question_id": "5", "category": "qa", "turns": ["ok"]},
        "not a row",
    ])
    assert [s.id for s in samples] == ["5"] and skipped == 5 and placeholders == 0


def test_dataset_with_no_usable_rows_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text('{"question_id": "1", "category": "qa", "turns": []}\n')
    with pytest.raises(BenchError, match="no usable rows"):
        load_prompts(str(path))


@pytest.mark.parametrize(("name", "content", "message"), [
    ("bad.jsonl", "{oops\n", "not valid JSON"),
    ("bad.json", '{"x": 1}', "expected a JSON list"),
    ("bad.csv", "a,b\n", "unsupported file type"),
])
def test_bad_dataset_files(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(BenchError, match=message):
        load_prompts(str(path))


def test_missing_dataset_file(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="no such file"):
        load_prompts(str(tmp_path / "nope.jsonl"))


@pytest.mark.skipif(not SPEC_BENCH.exists(), reason=SPEC_BENCH_MISSING)
def test_spec_bench_question_jsonl_loads_with_category_mapping() -> None:
    prompts = load_prompts(str(SPEC_BENCH))
    assert len(prompts.samples) == 480
    assert set(prompts.categories) <= set(QUALITATIVE)
    by_category = Counter(s.category for s in prompts.samples)
    assert by_category["multilingual"] == 80  # translation
    assert by_category["math"] == 90  # math (10) + math_reasoning (80)
    two_turn = [s for s in prompts.samples if len(s.turns) == 2]
    assert len(two_turn) == 80
    assert {s.sub_category for s in prompts.samples if s.category == "rag"} == {"rag", "extraction"}
    limited = load_prompts(str(SPEC_BENCH), category="writing", limit=2)
    assert len(limited.samples) == 2


def test_hub_loader_uses_the_pinned_revision_on_local_files_of_the_same_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    from bench.prompts import HUB_DATASET, HUB_REVISION

    rows = [
        {"question_id": f"{i:032x}", "category": "low_entropy" if i % 2 else "high_entropy", "sub_category": "x",
         "turns": [f"prompt {i}"], "source": "s", "src_id": str(i), "difficulty": "n/a", "multiturn": False}
        for i in range(6)
    ]
    local = tmp_path / "throughput_1k.parquet"
    pd.DataFrame(rows).to_parquet(local)
    calls = []

    def fake_load_dataset(path: str, name: str, split: str, revision: str):
        calls.append((path, name, split, revision))
        return datasets.Dataset.from_parquet(str(local))

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the fake stands in for the cache: no reachability probe
    prompts = load_prompts("speed-bench", bench="throughput_1k", category="low_entropy", limit=2)
    assert calls == [(HUB_DATASET, "throughput_1k", "test", HUB_REVISION)]
    assert [s.id for s in prompts.samples] == [f"{1:032x}", f"{3:032x}"]
    load_prompts("speed-bench", bench="throughput_1k", revision="abc123")
    assert calls[-1][3] == "abc123"
    with pytest.raises(BenchError, match="available benches: qualitative, throughput_1k"):
        load_prompts("speed-bench", bench="throughput_3k")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def hub_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Record hub loads instead of making them; no offline variable set."""
    import datasets

    calls: list[tuple] = []
    monkeypatch.setattr(datasets, "load_dataset", lambda *args, **kwargs: calls.append((args, kwargs)) or [])
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    return calls


def test_unreachable_hub_fails_at_once_without_calling_the_hub_client(
    hub_calls: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = _closed_port()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(BenchError) as caught:
        load_prompts("speed-bench", bench="qualitative")
    message = str(caught.value)
    assert message.startswith(f"cannot load nvidia/SPEED-Bench (qualitative): 127.0.0.1:{port} is unreachable")
    assert "HF_HUB_OFFLINE=1" in message and "\n" not in message
    assert hub_calls == []


@pytest.mark.parametrize(
    ("error", "expected"),
    [(TimeoutError(), "huggingface.co:443 did not answer within 3s"),
     (socket.gaierror(-3, "Temporary failure in name resolution"),
      "huggingface.co:443 is unreachable (Temporary failure in name resolution)")],
)
def test_no_network_and_no_dns_are_named(hub_calls: list, monkeypatch: pytest.MonkeyPatch, error: OSError,
                                         expected: str) -> None:
    import bench.prompts as sets

    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    probed = []

    def refuse(address: tuple[str, int], timeout: float) -> None:
        probed.append((address, timeout))
        raise error

    monkeypatch.setattr(socket, "create_connection", refuse)
    with pytest.raises(BenchError, match=re.escape(expected)):
        load_prompts("speed-bench", bench="qualitative")
    assert probed == [(("huggingface.co", 443), sets.HUB_PROBE_TIMEOUT_S)] and hub_calls == []


def test_offline_mode_skips_the_probe_and_explains_a_missing_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    import bench.prompts as sets

    def no_cache(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'nvidia/SPEED-Bench' on the Hub (LocalEntryNotFoundError)\nmore")

    monkeypatch.setattr(datasets, "load_dataset", no_cache)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("probed in offline mode"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BenchError) as caught:
        load_prompts("speed-bench", bench="qualitative")
    assert str(caught.value) == (
        f"cannot load nvidia/SPEED-Bench (qualitative, revision {sets.HUB_REVISION}) (offline mode: no cached copy "
        "of this revision?): Couldn't reach 'nvidia/SPEED-Bench' on the Hub (LocalEntryNotFoundError)"
    )


def test_reachable_hub_is_loaded(hub_calls: list, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        with pytest.raises(BenchError, match="no usable rows"):
            load_prompts("speed-bench", bench="qualitative")
    assert len(hub_calls) == 1


def test_offline_hub_is_one_line_and_exit_2_from_the_cli(
    hub_calls: list, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from bench.cli import main

    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    output = str(tmp_path / "r.json")
    assert main(["run", "--dataset", "speed-bench", "--url", "127.0.0.1:9", "--quiet", "--output", output]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("speedbench: error: cannot load nvidia/SPEED-Bench (qualitative)")


FENCED_BLOCK = re.compile(r"```[^\n]*\n(.*?)\n```", re.S)
REUSE_WORDS = re.compile(
    r"exact|word for word|unchanged|as written|as it is|the same|verbatim|original|identical|nothing else|in full|"
    r"full text|do not change|change no|keeping the rest|line by line",
    re.I,
)
"""How a grounded instruction says that the answer keeps the given text."""


def _grounded_rows() -> dict[str, list[dict]]:
    return {
        path.stem: [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        for path in sorted((categories_dir() / GROUNDED).glob("*.jsonl"))
    }


def test_grounded_set_loads_offline_with_every_qualitative_category() -> None:
    prompts = load_prompts(bench=GROUNDED)
    assert prompts.bench == "grounded" and sorted(prompts.categories) == QUALITATIVE
    counts = Counter(sample.category for sample in prompts.samples)
    assert min(counts.values()) >= 12, counts
    ids = [sample.id for sample in prompts.samples]
    assert len(ids) == len(set(ids))
    assert all(sample.id.startswith(f"grounded-{sample.category}-") for sample in prompts.samples)
    qualitative_ids = {sample.id for sample in load_prompts().samples}
    assert not qualitative_ids & set(ids)  # the qualitative glob does not pick up the grounded folder
    limited = load_prompts(bench=GROUNDED, category="coding,rag", limit=2)
    assert [s.category for s in limited.samples] == ["coding"] * 2 + ["rag"] * 2


def test_grounded_rows_follow_the_shipped_schema() -> None:
    rows = _grounded_rows()
    assert sorted(rows) == QUALITATIVE
    for category, items in rows.items():
        for number, row in enumerate(items, start=1):
            assert set(row) == ROW_KEYS, row["question_id"]
            assert row["question_id"] == f"grounded-{category}-{number:03d}"
            assert row["category"] == category
            assert row["multiturn"] == (len(row["turns"]) > 1)
            assert row["difficulty"] in {"easy", "medium", "hard"}
            assert all(isinstance(turn, str) and turn.strip() for turn in row["turns"])


def test_every_grounded_prompt_carries_the_text_its_answer_reuses() -> None:
    lengths = []
    for items in _grounded_rows().values():
        for row in items:
            first = row["turns"][0]
            blocks = FENCED_BLOCK.findall(first)
            assert len(blocks) == 1, row["question_id"]
            block = blocks[0].strip()
            instruction = FENCED_BLOCK.sub("", first)
            assert 120 <= len(block) <= 2500, (row["question_id"], len(block))
            assert len(instruction.split()) >= 8, row["question_id"]  # an instruction, not a bare block
            assert block not in instruction
            lengths.append(len(block))
    assert sorted(lengths)[len(lengths) // 2] >= 400


def test_grounded_instructions_ask_to_reuse_the_given_text() -> None:
    missing = [
        row["question_id"]
        for items in _grounded_rows().values()
        for row in items
        if not REUSE_WORDS.search(FENCED_BLOCK.sub("", row["turns"][0]))
    ]
    assert not missing


@pytest.mark.skipif(not SPEC_BENCH.exists(), reason=SPEC_BENCH_MISSING)
def test_grounded_texts_share_no_long_passage_with_spec_bench() -> None:
    def shingles(text: str, size: int = 10) -> set[tuple[str, ...]]:
        words = re.findall(r"\w+", text.lower())
        return {tuple(words[i:i + size]) for i in range(len(words) - size + 1)}

    dataset: set[tuple[str, ...]] = set()
    for line in SPEC_BENCH.read_text(encoding="utf-8").splitlines():
        for turn in json.loads(line).get("turns", []):
            dataset |= shingles(turn)
    shared = {
        row["question_id"]
        for items in _grounded_rows().values()
        for row in items
        if shingles(" ".join(row["turns"])) & dataset
    }
    assert not shared
