"""Send one sample (all its turns) to an OpenAI-compatible endpoint and record what happened."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bench._redact import one_line
from bench.engines import Engine, ResponseError, TurnStats, chunk_token_evidence
from bench.prompts import Sample
from bench.records import SampleResult, encode_margins
from bench.runner._transport import NOT_RETRIED, Response, Transport, TransportError, retry_after_seconds

TOP_LOGPROBS = 2
"""With `--logprobs` each request asks for the top-2 log-probabilities per token (the near-tie margin)."""

@dataclass(frozen=True)
class RequestSettings:
    """How each request is built: endpoint, model, output length, extra fields, streaming, retries."""

    endpoint: str
    model: str | None = None
    osl: int = 4096
    extra_inputs: Mapping[str, Any] = field(default_factory=lambda: {"temperature": 0})
    stream: bool = False
    retries: int = 0
    api: str = "chat"
    logprobs: bool = False


class SampleFailure(Exception):
    """A turn failed: `kind` says how (connect, timeout, http_5xx, invalid_json, ...)."""

    def __init__(self, kind: str, message: str, retry_after: float = 1.0) -> None:
        """Record the error kind, the message (secrets redacted, one line) and how long the server asked us to wait."""
        super().__init__(one_line(message))
        self.kind = kind
        self.retry_after = retry_after


@dataclass
class _Turn:
    stats: TurnStats
    latency_s: float
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    decode_span_s: float | None = None
    retries: int = 0
    chunk_tokens: list[int] = field(default_factory=list)
    chunk_tokens_source: str | None = None
    itl_token_s: list[float] = field(default_factory=list)
    sent_at: float | None = None
    margins: str | None = None


def build_payload(
    settings: RequestSettings, engine: Engine, messages: list[dict[str, str]]
) -> dict[str, Any]:
    """The request body, built as the reference builds it (extra inputs cannot override max_tokens)."""
    payload: dict[str, Any] = {"max_tokens": settings.osl, "stream": settings.stream}
    if settings.api == "completions":
        payload["prompt"] = "\n\n".join(message["content"] for message in messages)
    else:
        payload["messages"] = messages
    if settings.model:
        payload["model"] = settings.model
    if settings.stream:
        payload["stream_options"] = {"include_usage": True}
    payload.update(engine.request_fields())
    if settings.logprobs:
        payload.update({"logprobs": TOP_LOGPROBS} if settings.api == "completions" else
                       {"logprobs": True, "top_logprobs": TOP_LOGPROBS})
    payload.update(settings.extra_inputs)
    payload["max_tokens"] = settings.osl
    return payload


def _http_failure(response: Response) -> SampleFailure:
    body = response.body[:500].decode("utf-8", errors="replace")
    if response.status == 429:
        kind = "http_429"
    elif 400 <= response.status < 500:
        kind = "http_4xx"
    else:
        kind = "http_5xx"
    return SampleFailure(kind, f"HTTP {response.status}: {body}", retry_after_seconds(response.headers))


def _parse_json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, huge integers
        raise SampleFailure("invalid_json", f"response is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise SampleFailure("invalid_json", "response is not a JSON object")
    return data


def _delta_text(chunk: Mapping[str, Any]) -> tuple[str, str, str | None]:
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return "", "", None
    choice = choices[0]
    delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
    content = delta.get("content") if isinstance(delta.get("content"), str) else choice.get("text")
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    finish = choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None
    return (
        content if isinstance(content, str) else "",
        reasoning if isinstance(reasoning, str) else "",
        finish,
    )


def _logprob_entries(choice: Mapping[str, Any]) -> list[tuple[int, float | None]]:
    """(byte length, margin) per token from a choice's `logprobs` (OpenAI chat shape or legacy completions shape)."""
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, Mapping):
        return []
    entries: list[tuple[int, float | None]] = []
    content = logprobs.get("content")
    if isinstance(content, list):
        for item in content:
            if not isinstance(item, Mapping):
                continue
            tops = item.get("top_logprobs")
            values = [top.get("logprob") for top in tops if isinstance(top, Mapping)] if isinstance(tops, list) else []
            raw = item.get("bytes")
            token = item.get("token")
            size = len(raw) if isinstance(raw, list) else len(token.encode("utf-8")) if isinstance(token, str) else 0
            entries.append((size, _margin(values)))
        return entries
    tokens, tops = logprobs.get("tokens"), logprobs.get("top_logprobs")
    if isinstance(tokens, list) and isinstance(tops, list):
        for token, top in zip(tokens, tops, strict=False):
            values = list(top.values()) if isinstance(top, Mapping) else []
            entries.append((len(token.encode("utf-8")) if isinstance(token, str) else 0, _margin(values)))
    return entries


def _margin(values: list[Any]) -> float | None:
    """Top-1 minus top-2 log-probability (>= 0), or None with fewer than two finite values."""
    finite = sorted((float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)), reverse=True)
    return finite[0] - finite[1] if len(finite) >= 2 else None


def _first_choice(data: Mapping[str, Any]) -> Mapping[str, Any]:
    choices = data.get("choices")
    return choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) else {}


async def _stream_turn(
    transport: Transport, settings: RequestSettings, engine: Engine, body: bytes
) -> _Turn:
    await transport.pace()  # many streams starting at once take turns; the wait counts as queue wait
    start = time.perf_counter()
    merged: dict[str, Any] = {}
    content: list[str] = []
    reasoning: list[str] = []
    finish_reason = None
    token_times: list[float] = []
    chunk_chars: list[int] = []
    evidence: list[tuple[str, int] | None] = []
    cumulative = 0
    logprob_entries: list[tuple[int, float | None]] = []
    done = False
    done_at = 0.0
    chunks = 0
    loads = json.loads
    # closed at once on [DONE]: the connection then serves the next request with nothing left of this one
    async with contextlib.aclosing(transport.stream_batches(settings.endpoint, body)) as batches:
        async for batch in batches:
            if isinstance(batch, Response):
                raise _http_failure(batch)
            for event in batch:
                data = event.data
                if data == "[DONE]" or data.strip() == "[DONE]":
                    done, done_at = True, event.at
                    break
                try:
                    chunk = loads(data)
                except ValueError:
                    raise SampleFailure("invalid_json", f"stream chunk is not valid JSON: {data[:120]!r}") from None
                if type(chunk) is not dict:
                    raise SampleFailure("invalid_json", "stream chunk is not a JSON object")
                if isinstance(chunk.get("error"), Mapping | str):
                    raise SampleFailure("http_5xx", f"stream error: {str(chunk['error'])[:300]}")
                if isinstance(chunk.get("choices"), list):
                    chunks += 1
                text, thought, finish = _delta_text(chunk)
                if settings.logprobs:
                    logprob_entries.extend(_logprob_entries(_first_choice(chunk)))
                tokens = chunk_token_evidence(chunk) if text or thought or "usage" in chunk else None
                if text or thought:
                    token_times.append(event.at)
                    chunk_chars.append(len(text) + len(thought))
                    if tokens is not None and tokens[0] == "usage":
                        tokens, cumulative = ("usage", tokens[1] - cumulative), tokens[1]
                    evidence.append(tokens)
                elif tokens is not None and tokens[0] == "usage":
                    cumulative = tokens[1]
                content.append(text)
                reasoning.append(thought)
                finish_reason = finish or finish_reason
                for key, value in chunk.items():
                    if key != "choices":
                        merged[key] = value
            if done:
                break
    # the end is when [DONE] arrived (the transport times arrivals at the socket), not when it was parsed
    end = done_at if done and done_at >= start else time.perf_counter()
    if not done:
        raise SampleFailure("stream_incomplete", "stream ended without [DONE]")
    if not chunks:
        raise SampleFailure("missing_fields", "stream ended ([DONE]) without a single chunk carrying choices")
    message = {"role": "assistant", "content": "".join(content), "reasoning_content": "".join(reasoning)}
    merged["choices"] = [{"message": message, "finish_reason": finish_reason}]
    stats = engine.parse(merged)
    ttft = token_times[0] - start if token_times else None
    itl = [later - earlier for earlier, later in itertools.pairwise(token_times)]
    span = token_times[-1] - token_times[0] if len(token_times) >= 2 else None
    counts, source = chunk_token_counts(evidence, chunk_chars, stats.completion_tokens)
    turn = _Turn(
        stats=stats, latency_s=end - start, ttft_s=ttft, itl_s=itl, decode_span_s=span, chunk_tokens=counts,
        chunk_tokens_source=source, itl_token_s=per_token_itl(itl, counts), sent_at=start,
    )
    if settings.logprobs:
        turn.margins = encode_margins(logprob_entries)
    return turn


def chunk_token_counts(
    evidence: list[tuple[str, int] | None], chars: list[int], total: int
) -> tuple[list[int], str | None]:
    """Tokens each content chunk carried and how that was known.

    From the chunks themselves when every content chunk says (per-chunk `usage` deltas, `token_ids` or
    `logprobs` entries: the source is that name); otherwise the response's final token count
    (usage/timings) spread over the chunks in proportion to their characters, at least one each while
    there are enough tokens ("spread"); with no count at all, one token per chunk ("assumed").
    """
    if not chars:
        return [], None
    if all(item is not None for item in evidence):
        kinds = {item[0] for item in evidence if item is not None}
        counts = [max(0, item[1]) for item in evidence if item is not None]
        return counts, "+".join(sorted(kinds))
    if total <= 0:
        return [1] * len(chars), "assumed"
    return _spread(total, chars), "spread"


def _spread(total: int, chars: list[int]) -> list[int]:
    """`total` tokens over chunks in proportion to their characters (largest remainder; >= 1 each if possible)."""
    floor_each = 1 if total >= len(chars) else 0
    rest = total - floor_each * len(chars)
    weight = sum(chars)
    shares = [rest * size / weight for size in chars] if weight else [rest / len(chars)] * len(chars)
    counts = [floor_each + int(share) for share in shares]
    missing = total - sum(counts)
    order = sorted(range(len(chars)), key=lambda index: int(shares[index]) - shares[index])
    for index in order[:missing]:
        counts[index] += 1
    return counts


def per_token_itl(itl: list[float], counts: list[int]) -> list[float]:
    """Each chunk's gap (from the previous token-carrying chunk) spread evenly over the tokens it carried.

    The first chunk's tokens are not in it (they are the time to first token); a chunk that carried no
    token adds its gap to the next one's.
    """
    if len(counts) != len(itl) + 1:
        return []
    out: list[float] = []
    carried = 0.0
    for gap, tokens in zip(itl, counts[1:], strict=True):
        carried += gap
        if tokens > 0:
            share = carried / tokens
            out.extend([share] * tokens)
            carried = 0.0
    return out


async def _plain_turn(
    transport: Transport, settings: RequestSettings, engine: Engine, body: bytes
) -> _Turn:
    sent_at = time.perf_counter()
    response = await transport.post(settings.endpoint, body)
    if response.status != 200:
        raise _http_failure(response)
    data = _parse_json(response.body)
    turn = _Turn(stats=engine.parse(data), latency_s=response.elapsed_s, sent_at=sent_at)
    if settings.logprobs:
        turn.margins = encode_margins(_logprob_entries(_first_choice(data)))
    return turn


async def send_turn(
    transport: Transport, settings: RequestSettings, engine: Engine, payload: Mapping[str, Any]
) -> _Turn:
    """Send one request, retrying transport errors and 429s up to `settings.retries` times."""
    body = json.dumps(payload).encode("utf-8")
    attempt = 0
    first_at = time.perf_counter()
    while True:
        try:
            turn = await (_stream_turn if settings.stream else _plain_turn)(transport, settings, engine, body)
            turn.retries = attempt
            turn.sent_at = first_at
            return turn
        except TransportError as exc:
            if attempt >= settings.retries or exc.kind in NOT_RETRIED:
                raise SampleFailure(exc.kind, str(exc)) from None
            delay = min(8.0, 0.25 * 2**attempt)
        except ResponseError as exc:
            raise SampleFailure(exc.kind, str(exc)) from None
        except SampleFailure as exc:
            if exc.kind != "http_429" or attempt >= settings.retries:
                raise
            delay = exc.retry_after
        attempt += 1
        await asyncio.sleep(delay)


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
    turns: list[_Turn] = []
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
    timing = {"scheduled_s": _since(scheduled_at, origin), "sent_s": _since(turns[0].sent_at or began, origin)}
    return _aggregate(sample, turns, total_latency, repeat, timing)


def _since(at: float | None, origin: float) -> float | None:
    """A perf_counter time as seconds since `origin`, to the microsecond."""
    return None if at is None else round(at - origin, 6)


def server_rates(stats: list[TurnStats]) -> tuple[float | None, float | None]:
    """llama.cpp's own definitions over a sample's turns: (decode t/s, prompt t/s).

    Decode: sum over turns of (n - 1) generated tokens over the summed generation time (the first token of each
    turn comes with its prompt evaluation, as in llama.cpp's per-turn `predicted_per_second`). Prompt: the
    uncached prompt tokens (prompt tokens minus `cache_n`) over the summed prompt time. None when a turn lacks
    the server's timings.
    """
    decode = prompt = None
    if all(s.predicted_ms for s in stats):
        decoded = sum(max(0, s.completion_tokens - 1) for s in stats)
        decode = decoded * 1000.0 / sum(s.predicted_ms or 0.0 for s in stats) if decoded else None
    if all(s.prompt_ms for s in stats):
        evaluated = sum(max(0, s.prompt_tokens - (s.cache_n or 0)) for s in stats)
        prompt = evaluated * 1000.0 / sum(s.prompt_ms or 0.0 for s in stats) if evaluated else None
    return decode, prompt


def _logprob_fields(turns: list[_Turn]) -> dict[str, Any]:
    """The per-turn margin strings, when the turns asked for log-probabilities."""
    if any(turn.margins is None for turn in turns):
        return {}
    return {"token_margins": tuple(turn.margins or "" for turn in turns)}


def _single_turn(sample: Sample, turn: _Turn, repeat: int, timing: Mapping[str, float | None]) -> SampleResult:
    """The common case (one non-streamed turn) without the multi-turn bookkeeping."""
    stats = turn.stats
    server_decode, server_prompt = server_rates([stats])
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
        outputs=(stats.content,),
        reasoning=(stats.reasoning,) if stats.reasoning else (),
        cache_n=stats.cache_n,
        retries=turn.retries,
        **timing,
        server_decode_t_s=server_decode,
        server_prompt_t_s=server_prompt,
        **(_logprob_fields([turn]) if turn.margins is not None else {}),
    )


def _aggregate(
    sample: Sample, turns: list[_Turn], total_latency: float, repeat: int, timing: Mapping[str, float | None]
) -> SampleResult:
    if len(turns) == 1 and turns[0].ttft_s is None and turns[0].stats.spec_steps is None:
        return _single_turn(sample, turns[0], repeat, timing)
    stats = [turn.stats for turn in turns]
    prompt_tokens = sum(s.prompt_tokens for s in stats)
    completion_tokens = sum(s.completion_tokens for s in stats)
    total_tokens = sum(s.total_tokens for s in stats) or prompt_tokens + completion_tokens
    prompt_ms = sum(s.prompt_ms or 0.0 for s in stats)
    predicted_ms = sum(s.predicted_ms or 0.0 for s in stats)
    if len(stats) == 1:
        prompt_per_second = stats[0].prompt_per_second
        predicted_per_second = stats[0].predicted_per_second
    else:
        prompt_per_second = prompt_tokens / (prompt_ms / 1000) if prompt_ms > 0 else None
        predicted_per_second = completion_tokens / (predicted_ms / 1000) if predicted_ms > 0 else None
    spans = [turn.decode_span_s for turn in turns]
    client_decode = None
    if all(span for span in spans):
        decoded = sum(max(0, s.completion_tokens - 1) for s in stats)
        client_decode = decoded / sum(span for span in spans if span) if decoded else None
    steps = [s.spec_steps for s in stats]
    spec: dict[str, Any] = {}
    if all(step is not None for step in steps):
        spec["steps"] = sum(step for step in steps if step is not None)
    cache = [s.cache_n for s in stats]
    ttft = turns[0].ttft_s
    server_decode, server_prompt = server_rates(stats)
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
        outputs=tuple(s.content for s in stats),
        reasoning=tuple(s.reasoning for s in stats) if any(s.reasoning for s in stats) else (),
        cache_n=sum(c for c in cache if c is not None) if any(c is not None for c in cache) else None,
        ttft_s=ttft,
        itl_s=tuple(round(x, 6) for turn in turns for x in turn.itl_s),
        e2e_s=total_latency if ttft is not None else None,
        client_decode_t_s=client_decode if client_decode and math.isfinite(client_decode) else None,
        retries=sum(turn.retries for turn in turns),
        spec=spec,
        chunk_tokens=tuple(count for turn in turns for count in turn.chunk_tokens),
        chunk_tokens_source=_sources(turns),
        itl_token_s=tuple(round(x, 6) for turn in turns for x in turn.itl_token_s),
        tpot_s=_tpot(turns),
        **timing,
        server_decode_t_s=server_decode,
        server_prompt_t_s=server_prompt,
        **_logprob_fields(turns),
    )


def _sources(turns: list[_Turn]) -> str | None:
    """How the chunks' token counts were obtained, over all turns (e.g. `usage`, `spread`, `logprobs+spread`)."""
    names = {part for turn in turns if turn.chunk_tokens_source for part in turn.chunk_tokens_source.split("+")}
    return "+".join(sorted(names)) or None


def _tpot(turns: list[_Turn]) -> float | None:
    """Time per output token after the first: sum of (latency - TTFT) over sum of (tokens - 1), streamed turns."""
    decode = sum(turn.latency_s - turn.ttft_s for turn in turns if turn.ttft_s is not None)
    tokens = sum(turn.stats.completion_tokens - 1 for turn in turns if turn.ttft_s is not None)
    if tokens <= 0 or any(turn.ttft_s is None for turn in turns):
        return None
    return round(decode / tokens, 9)
