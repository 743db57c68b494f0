"""One sample: its turns in order (each reply appended to the history), aggregated into one SampleResult."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from bench.engines import Engine, TurnStats
from bench.prompts import Sample
from bench.records import SampleResult, valid_texts
from bench.runner._metrics import server_rates
from bench.runner._thinking import with_thinking
from bench.runner._transport import Transport
from bench.runner._turns import RequestSettings, SampleFailure, Turn, build_payload, send_turn


def _positive(value: float) -> float | None:
    return value if value > 0 else None


async def run_sample(
    transport: Transport,
    engine: Engine,
    sample: Sample,
    settings: RequestSettings,
    *,
    repeat: int = 0,
    scheduled_at: float | None = None,
    origin: float = 0.0,
) -> SampleResult:
    """Send a sample's turns in order (each reply appended to the history) and aggregate as the reference does.

    `scheduled_at` is the perf_counter time the sample became due (a concurrency slot freed); it and the
    time the first request went out are recorded as seconds since `origin` (the run's start).
    """
    messages: list[dict[str, str]] = []
    turns: list[Turn] = []
    total_latency = 0.0
    began = time.perf_counter()
    try:
        for text in sample.turns:
            messages.append({"role": "user", "content": text})
            turn = await send_turn(transport, settings, engine, build_payload(settings, engine, messages))
            turns.append(turn)
            total_latency += turn.latency_s
            messages.append({"role": "assistant", "content": turn.stats.content})
    except SampleFailure as exc:
        return SampleResult(
            id=sample.id,
            category=sample.category,
            ok=False,
            turns=len(sample.turns),
            latency_s=total_latency,
            error=str(exc),
            error_kind=exc.kind,
            repeat=repeat,
            sub_category=sample.sub_category,
            retries=sum(turn.retries for turn in turns),
            scheduled_s=_since(scheduled_at, origin),
            sent_s=_since(turns[0].sent_at if turns and turns[0].sent_at else began, origin),
        )
    timing = _Sent(_since(scheduled_at, origin), _since(turns[0].sent_at or began, origin))
    result = _aggregate(sample, turns, total_latency, repeat, timing)
    if not result.reasoning:
        return result
    return await with_thinking(result, turns, transport, engine, settings.endpoint)


class _Sent(NamedTuple):
    """When a sample became due and when its first request went out, in seconds since the run's start."""

    scheduled_s: float | None
    sent_s: float | None


def _since(at: float | None, origin: float) -> float | None:
    """A perf_counter time as seconds since `origin`, to the microsecond."""
    return None if at is None else round(at - origin, 6)

def _margins(turns: list[Turn]) -> tuple[str, ...]:
    """The per-turn margin strings, when the turns asked for log-probabilities (else none)."""
    if any(turn.margins is None for turn in turns):
        return ()
    return tuple(turn.margins or "" for turn in turns)


def _single_turn(sample: Sample, turn: Turn, repeat: int, timing: _Sent) -> SampleResult:
    """The common case (one non-streamed turn) without the multi-turn bookkeeping."""
    stats = turn.stats
    server_decode, server_prompt = server_rates([stats])
    outputs, replaced_out = valid_texts((stats.content,))
    reasoning, replaced_reasoning = valid_texts((stats.reasoning,) if stats.reasoning else ())
    return SampleResult(
        id=sample.id,
        category=sample.category,
        ok=True,
        turns=1,
        latency_s=turn.latency_s,
        prompt_tokens=stats.prompt_tokens,
        completion_tokens=stats.completion_tokens,
        total_tokens=stats.total_tokens or stats.prompt_tokens + stats.completion_tokens,
        finish_reason=stats.finish_reason,
        draft_n=stats.draft_n or 0,
        draft_n_accepted=stats.draft_n_accepted or 0,
        prompt_ms=stats.prompt_ms or None,
        predicted_ms=stats.predicted_ms or None,
        prompt_per_second=stats.prompt_per_second,
        predicted_per_second=stats.predicted_per_second,
        repeat=repeat,
        sub_category=sample.sub_category,
        outputs=outputs,
        reasoning=reasoning,
        replaced_chars=replaced_out + replaced_reasoning,
        cache_n=stats.cache_n,
        retries=turn.retries,
        scheduled_s=timing.scheduled_s,
        sent_s=timing.sent_s,
        server_decode_t_s=server_decode,
        server_prompt_t_s=server_prompt,
        token_margins=(turn.margins,) if turn.margins is not None else (),
    )


def _aggregate(
    sample: Sample, turns: list[Turn], total_latency: float, repeat: int, timing: _Sent
) -> SampleResult:
    if len(turns) == 1 and turns[0].ttft_s is None and turns[0].stats.spec_steps is None:
        return _single_turn(sample, turns[0], repeat, timing)
    stats = [turn.stats for turn in turns]
    prompt_tokens = sum(s.prompt_tokens for s in stats)
    completion_tokens = sum(s.completion_tokens for s in stats)
    total_tokens = sum(s.total_tokens for s in stats) or prompt_tokens + completion_tokens
    prompt_ms, predicted_ms, prompt_per_second, predicted_per_second = _server_times(stats)
    client_decode = _client_decode(turns)
    steps = [s.spec_steps for s in stats]
    spec: dict[str, float] = {}  # engine figures by name: here the draft steps, later the counter deltas
    if all(step is not None for step in steps):
        spec["steps"] = sum(step for step in steps if step is not None)
    cache = [s.cache_n for s in stats]
    ttft = turns[0].ttft_s
    server_decode, server_prompt = server_rates(stats)
    outputs, replaced_out = valid_texts(s.content for s in stats)
    reasoning, replaced_reasoning = valid_texts(s.reasoning for s in stats) if any(s.reasoning for s in stats) else (
        (), 0)
    return SampleResult(
        id=sample.id,
        category=sample.category,
        ok=True,
        turns=len(turns),
        latency_s=total_latency,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=total_tokens,
        finish_reason=stats[-1].finish_reason,
        draft_n=sum(s.draft_n or 0 for s in stats),
        draft_n_accepted=sum(s.draft_n_accepted or 0 for s in stats),
        prompt_ms=_positive(prompt_ms),
        predicted_ms=_positive(predicted_ms),
        prompt_per_second=prompt_per_second,
        predicted_per_second=predicted_per_second,
        error=None,
        repeat=repeat,
        sub_category=sample.sub_category,
        outputs=outputs,
        reasoning=reasoning,
        replaced_chars=replaced_out + replaced_reasoning,
        cache_n=sum(c for c in cache if c is not None) if any(c is not None for c in cache) else None,
        ttft_s=ttft,
        itl_s=_rounded(turn.itl_s for turn in turns),
        e2e_s=total_latency if ttft is not None else None,
        client_decode_t_s=client_decode if client_decode and math.isfinite(client_decode) else None,
        retries=sum(turn.retries for turn in turns),
        spec=spec,
        chunk_tokens=tuple(count for turn in turns for count in turn.chunk_tokens),
        chunk_tokens_source=_sources(turns),
        itl_token_s=_rounded(turn.itl_token_s for turn in turns),
        tpot_s=_tpot(turns),
        scheduled_s=timing.scheduled_s,
        sent_s=timing.sent_s,
        server_decode_t_s=server_decode,
        server_prompt_t_s=server_prompt,
        token_margins=_margins(turns),
    )


def _server_times(stats: Sequence[TurnStats]) -> tuple[float, float, float | None, float | None]:
    """(prompt ms, predicted ms, prompt t/s, predicted t/s) of a sample's turns as the server timed them."""
    prompt_ms = sum(s.prompt_ms or 0.0 for s in stats)
    predicted_ms = sum(s.predicted_ms or 0.0 for s in stats)
    if len(stats) == 1:
        return prompt_ms, predicted_ms, stats[0].prompt_per_second, stats[0].predicted_per_second
    prompt_tokens = sum(s.prompt_tokens for s in stats)
    completion_tokens = sum(s.completion_tokens for s in stats)
    return (prompt_ms, predicted_ms, prompt_tokens / (prompt_ms / 1000) if prompt_ms > 0 else None,
            completion_tokens / (predicted_ms / 1000) if predicted_ms > 0 else None)


def _client_decode(turns: Sequence[Turn]) -> float | None:
    """Tokens after the first over the client's decode spans, when every turn has one (None otherwise)."""
    spans = [turn.decode_span_s for turn in turns]
    if not all(span for span in spans):
        return None
    decoded = sum(max(0, turn.stats.completion_tokens - 1) for turn in turns)
    return decoded / sum(span for span in spans if span) if decoded else None


def _rounded(lists: Iterable[list[float]]) -> tuple[float, ...]:
    """The values of the lists, in order, each rounded to the microsecond."""
    return tuple(map(round, itertools.chain.from_iterable(lists), itertools.repeat(6)))


def _sources(turns: list[Turn]) -> str | None:
    """How the chunks' token counts were obtained, over all turns (e.g. `usage`, `spread`, `logprobs+spread`)."""
    names = {part for turn in turns if turn.chunk_tokens_source for part in turn.chunk_tokens_source.split("+")}
    return "+".join(sorted(names)) or None


def _tpot(turns: list[Turn]) -> float | None:
    """Time per output token after the first: sum of (latency - TTFT) over sum of (tokens - 1), streamed turns."""
    decode = sum(turn.latency_s - turn.ttft_s for turn in turns if turn.ttft_s is not None)
    tokens = sum(turn.stats.completion_tokens - 1 for turn in turns if turn.ttft_s is not None)
    if tokens <= 0 or any(turn.ttft_s is None for turn in turns):
        return None
    return round(decode / tokens, 9)
