"""Streamed chunks: chunks read by their learnt shape give what a full parse of every chunk gives."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from bench.runner import SampleFailure, StreamChunks


def _llama(text: str, created: int = 1767225600, **extra: Any) -> str:
    """A llama.cpp-shaped chat chunk (compact separators, the text in the middle)."""
    chunk = {"choices": [{"finish_reason": None, "index": 0, "delta": {"content": text}}], "created": created,
             "id": "chatcmpl-x", "model": "m", "object": "chat.completion.chunk", **extra}
    return json.dumps(chunk, separators=(",", ":"), ensure_ascii=False)


def _vllm(text: str, **extra: Any) -> str:
    """A vLLM-shaped chat chunk (Python's default separators, ASCII escapes, the text before the end)."""
    chunk = {"id": "chatcmpl-y", "object": "chat.completion.chunk", "created": 5, "model": "m",
             "choices": [{"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}], **extra}
    return json.dumps(chunk)


def _fields(parsed: StreamChunks) -> tuple[Any, ...]:
    return (parsed.merged, "".join(parsed.content), "".join(parsed.reasoning), parsed.finish_reason,
            parsed.token_times, parsed.chunk_chars, parsed.evidence, parsed.chunks, parsed.done_at)


def _both(datas: list[str]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The fields from a stream read with shapes and from one parsed chunk by chunk, fed in batches of three."""
    events = [(data, float(index)) for index, data in enumerate(datas)]
    results = []
    for shapes in (True, False):
        parsed = StreamChunks(shapes=shapes)
        for start in range(0, len(events), 3):
            if parsed.feed(events[start:start + 3]):
                break
        results.append(_fields(parsed))
    return results[0], results[1]


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)
chunk_kinds = st.one_of(
    texts.map(_llama),
    texts.map(_vllm),
    st.tuples(texts, st.integers(0, 3)).map(lambda pair: _llama(pair[0], created=pair[1])),
    st.tuples(texts, st.integers(0, 50)).map(lambda pair: _vllm(pair[0], usage={"completion_tokens": pair[1]})),
    texts.map(lambda text: _llama(text, timings={"predicted_n": len(text)})),
    st.just('{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"id":"chatcmpl-x"}'),
    st.just('{"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}'),
    st.just('{"choices":[],"usage":{"completion_tokens":7},"timings":{"predicted_n":7}}'),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(chunk_kinds, max_size=20))
def test_shapes_give_what_parsing_every_chunk_gives(datas: list[str]) -> None:
    with_shapes, chunk_by_chunk = _both([*datas, "[DONE]"])
    assert with_shapes == chunk_by_chunk


def test_a_repeated_shape_is_read_by_its_text_alone() -> None:
    parsed = StreamChunks()
    parsed.feed([(_llama(f" tok{index}"), float(index)) for index in range(100)])
    assert parsed.parsed_in_full == parsed.shapes_learnt == 1  # learnt from the first chunk, never missed
    assert "".join(parsed.content) == "".join(f" tok{index}" for index in range(100))
    assert parsed.token_times == [float(index) for index in range(100)] and parsed.chunk_chars == [5] * 10 + [6] * 90


def test_a_string_that_closes_early_is_parsed_in_full() -> None:
    learnt = '{"choices":[{"delta":{"content":"a"}}],"id":"x"}'
    trick = '{"choices":[{"delta":{"content":"a","extra":"b"}}],"id":"x"}'  # same prefix and suffix
    with_shapes, chunk_by_chunk = _both([learnt, trick, "[DONE]"])
    assert with_shapes == chunk_by_chunk and with_shapes[1] == "aa"


@pytest.mark.parametrize("body", ["\\x", "a\u0001b", "\\ud800\\"], ids=["bad escape", "control", "open escape"])
def test_a_bad_string_in_a_learnt_shape_fails_as_a_full_parse_does(body: str) -> None:
    parsed = StreamChunks()
    parsed.feed([(_llama("a"), 0.0)])
    with pytest.raises(SampleFailure) as failure:
        parsed.feed([(_llama("a").replace('"a"', f'"{body}"'), 1.0)])
    assert failure.value.kind == "invalid_json"


def test_a_decoy_content_field_outside_the_delta_is_not_learnt() -> None:
    first = '{"content":"hi","choices":[{"delta":{"cont\\u0065nt":"hi"}}]}'
    second = '{"content":"yo","choices":[{"delta":{"cont\\u0065nt":"hi"}}]}'
    parsed = StreamChunks()
    parsed.feed([(first, 0.0), (second, 1.0)])
    assert parsed.shapes_learnt == 0 and "".join(parsed.content) == "hihi" and parsed.merged["content"] == "yo"


def test_every_chunk_different_outside_its_text_stops_learning() -> None:
    parsed = StreamChunks()
    parsed.feed([(_llama("t", timings={"n": index}), float(index)) for index in range(400)])
    assert parsed.parsed_in_full == parsed.chunks == 400
    assert 9 <= parsed.shapes_learnt <= 100  # the first and 8 misses, then while misses stay under a quarter


def test_a_timestamp_ticking_each_second_keeps_learning() -> None:
    datas = [_llama(f"w{index}", created=index // 20) for index in range(400)]
    parsed = StreamChunks()
    parsed.feed([(data, 0.0) for data in datas])
    assert parsed.parsed_in_full == parsed.shapes_learnt == 20 and parsed.chunks == 400  # one per tick


def test_with_logprobs_no_shape_is_learnt() -> None:
    parsed = StreamChunks(logprobs=True)
    parsed.feed([(_llama("a"), 0.0), (_llama("b"), 1.0)])
    assert parsed.parsed_in_full == 2 and parsed.shapes_learnt == 0 and "".join(parsed.content) == "ab"
