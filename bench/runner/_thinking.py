"""Reasoning models: a sample's output split into thinking and answer tokens, with the stream's timing of each."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from bench.engines import Engine
from bench.records import SOURCE_NONE, SOURCE_STREAM, SOURCE_TOKENIZE, SOURCE_USAGE, THINKING_CHUNK, SampleResult
from bench.runner._transport import Transport, TransportError
from bench.runner._turns import Turn

_STRENGTH = {SOURCE_USAGE: 0, SOURCE_STREAM: 1, SOURCE_TOKENIZE: 2, SOURCE_NONE: -1}
"""How a sample's source is named when its turns were counted differently: the least direct one."""


def turn_thinking(turn: Turn) -> tuple[int | None, str]:
    """(thinking tokens, how known) of one turn; None tokens when only the server's tokenizer can say."""
    stats = turn.stats
    if not stats.reasoning:
        return 0, SOURCE_NONE
    if stats.reasoning_tokens is not None:
        return stats.reasoning_tokens, SOURCE_USAGE
    if turn.segments and turn.chunk_tokens_source not in (None, "assumed") and len(turn.chunk_tokens) == len(
            turn.segments):
        return sum(count for count, kind in zip(turn.chunk_tokens, turn.segments, strict=True)
                   if kind == THINKING_CHUNK), SOURCE_STREAM
    return None, SOURCE_TOKENIZE


async def tokenized_count(transport: Transport, engine: Engine, root: str, text: str) -> int | None:
    """The tokens of `text` by the server's tokenize endpoint, None when the engine or the server has none."""
    request = engine.tokenize_request(text)
    if request is None:
        return None
    path, body = request
    try:
        response = await transport.post(root + path, json.dumps(body).encode())
        return engine.token_count(json.loads(response.body)) if response.status == 200 else None
    except (TransportError, ValueError):
        return None


async def with_thinking(
    result: SampleResult, turns: Sequence[Turn], transport: Transport, engine: Engine, endpoint: str
) -> SampleResult:
    """The sample with its thinking/answer split (tokens, source) and, when streamed, each segment's timing.

    A turn whose server gave no reasoning count and whose stream did not tell the thinking chunks apart is
    tokenized through the server's tokenize endpoint (at the root of the request's `endpoint`) after the sample:
    the timing is not touched."""
    if not result.ok or not turns:
        return result
    root = endpoint.rsplit("/v1/", 1)[0] if "/v1/" in endpoint else None
    counts: list[int] = []
    sources: list[str] = []
    for turn in turns:
        tokens, source = turn_thinking(turn)
        if tokens is None and root is not None:
            tokens = await tokenized_count(transport, engine, root, turn.stats.reasoning)
        if tokens is None:
            return timed(result, stream_timing(turns))
        counts.append(min(tokens, turn.stats.completion_tokens) if turn.stats.completion_tokens else tokens)
        sources.append(source)
    thinking = sum(counts)
    counted = replace(
        result, thinking_tokens=thinking, answer_tokens=max(0, result.completion_tokens - thinking),
        thinking_source=max(sources, key=_STRENGTH.__getitem__),
    )
    return timed(counted, stream_timing(turns))


class StreamTiming(NamedTuple):
    """The timing of a sample's thinking and answer segments, as its streamed chunks tell it."""

    answer_ttft_s: float | None
    """The time to the first answer chunk (the first turn's)."""
    thinking_decode_t_s: float | None
    answer_decode_t_s: float | None
    """Each segment's decode rate: tokens after the segment's first chunk over its span, summed over turns."""
    chunk_segments: str
    """One letter per token-carrying chunk of every turn (`t` thinking, `a` answer)."""


def timed(result: SampleResult, timing: StreamTiming | None) -> SampleResult:
    """The sample with its segments' timing, when its stream told one."""
    if timing is None:
        return result
    return replace(
        result, answer_ttft_s=timing.answer_ttft_s, thinking_decode_t_s=timing.thinking_decode_t_s,
        answer_decode_t_s=timing.answer_decode_t_s, chunk_segments=timing.chunk_segments,
    )


def stream_timing(turns: Sequence[Turn]) -> StreamTiming | None:
    """Streamed turns that carried thinking: the time to the first answer chunk (the first turn's), each
    segment's decode rate (tokens after the segment's first chunk over its span, summed over turns) and the
    chunks' segment letters; None when no streamed turn carried thinking."""
    if not any(turn.segments for turn in turns) or any(not turn.token_times for turn in turns):
        return None
    first = turns[0]
    answer_ttft = None
    letters = first.segments or "a" * len(first.token_times)
    if first.ttft_s is not None and "a" in letters:
        start = first.token_times[0] - first.ttft_s
        answer_ttft = round(first.token_times[letters.index("a")] - start, 6)
    rates: list[float | None] = []
    for kind in (THINKING_CHUNK, "a"):
        tokens, span = 0, 0.0
        for turn in turns:
            kinds = turn.segments or "a" * len(turn.token_times)
            picked = [(at, count) for at, count, letter in zip(turn.token_times, turn.chunk_tokens or [1] * len(
                kinds), kinds, strict=False) if letter == kind]
            if len(picked) >= 2:
                tokens += sum(count for _, count in picked[1:])
                span += picked[-1][0] - picked[0][0]
        rates.append(tokens / span if tokens and span > 0 else None)
    thinking_rate, answer_rate = rates
    return StreamTiming(answer_ttft, thinking_rate, answer_rate,
                        "".join(turn.segments or "a" * len(turn.token_times) for turn in turns))
