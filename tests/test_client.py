"""The client: request bodies, one turn with retries, one sample's turns aggregated, metric derivation."""

from __future__ import annotations

import asyncio

import pytest

from bench.engines import Engine, TurnStats
from bench.prompts import Sample
from bench.runner import (
    RequestSettings,
    Transport,
    build_payload,
    chunk_token_counts,
    per_token_itl,
    run_sample,
    send_turn,
    server_rates,
)
from tests.fakeserver import FakeServer, FakeState


def test_the_payload_keeps_max_tokens_and_adds_stream_options_and_logprobs() -> None:
    settings = RequestSettings(endpoint="http://x/v1/chat/completions", model="m", osl=7, stream=True,
                               logprobs=True, extra_inputs={"temperature": 0, "max_tokens": 99})
    payload = build_payload(settings, Engine(), [{"role": "user", "content": "hi"}])
    assert payload["max_tokens"] == 7 and payload["model"] == "m" and payload["stream"] is True
    assert payload["stream_options"] == {"include_usage": True}
    assert payload["logprobs"] is True and payload["top_logprobs"] == 2
    completions = build_payload(RequestSettings(endpoint="e", api="completions"), Engine(),
                                [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    assert completions["prompt"] == "a\n\nb" and "messages" not in completions


def test_a_429_is_retried_as_often_as_allowed(fake_state: FakeState, fake_server: FakeServer) -> None:
    fake_state.fault = lambda index, body: "http_429" if index == 0 else None
    settings = RequestSettings(endpoint=fake_server.url + "/v1/chat/completions", osl=4, retries=1)

    async def main():
        async with Transport(timeout=10.0) as transport:
            return await send_turn(transport, settings, Engine(), build_payload(
                settings, Engine(), [{"role": "user", "content": "hi"}]))

    turn = asyncio.run(main())
    assert turn.retries == 1 and turn.stats.completion_tokens > 0


def test_a_sample_is_sent_turn_by_turn_and_a_failure_is_recorded(fake_state: FakeState,
                                                                 fake_server: FakeServer) -> None:
    sample = Sample(id="s-1", category="c", turns=("first", "second"))
    settings = RequestSettings(endpoint=fake_server.url + "/v1/chat/completions", osl=4, stream=True)

    async def main():
        async with Transport(timeout=10.0) as transport:
            good = await run_sample(transport, Engine(), sample, settings, repeat=2)
            fake_state.fault = lambda index, body: "http_500"
            bad = await run_sample(transport, Engine(), sample, settings)
        return good, bad

    good, bad = asyncio.run(main())
    assert good.ok and good.turns == 2 and len(good.outputs) == 2 and good.repeat == 2 and good.ttft_s is not None
    assert not bad.ok and bad.error_kind == "http_5xx" and "HTTP 500" in bad.error


def test_chunk_token_counts_prefer_the_chunks_own_evidence_then_spread_then_assume() -> None:
    assert chunk_token_counts([("usage", 2), ("usage", 3)], [4, 6], 99) == ([2, 3], "usage")
    assert chunk_token_counts([None, ("usage", 3)], [1, 3], 8) == ([3, 5], "spread")
    assert chunk_token_counts([None, None], [1, 1], 0) == ([1, 1], "assumed")
    assert chunk_token_counts([], [], 5) == ([], None)


def test_per_token_itl_spreads_each_gap_over_the_tokens_it_carried() -> None:
    assert per_token_itl([0.2, 0.3], [1, 2, 0]) == pytest.approx([0.1, 0.1])
    assert per_token_itl([0.2], [1, 1, 1]) == []


def test_server_rates_follow_llama_cpp_definitions() -> None:
    stats = [TurnStats(content="", completion_tokens=11, prompt_tokens=20, predicted_ms=100.0, prompt_ms=50.0,
                       cache_n=10)]
    assert server_rates(stats) == (pytest.approx(100.0), pytest.approx(200.0))
    assert server_rates([TurnStats(content="", completion_tokens=3)]) == (None, None)
