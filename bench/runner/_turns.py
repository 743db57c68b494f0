"""HTTP turns: build a request, send it (streamed or not, with retries) and parse its answer or its chunks."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from dataclasses import dataclass, field

from bench._types import JsonMapping, JsonObject
from bench.engines import Engine, ResponseError, TurnStats
from bench.records import encode_margins
from bench.runner._chunks import SampleFailure, StreamChunks, first_choice, loads, logprob_entries
from bench.runner._metrics import chunk_token_counts, per_token_itl
from bench.runner._transport import NOT_RETRIED, Response, Transport, TransportError, retry_after_seconds

TOP_LOGPROBS = 2
"""With `--logprobs` each request asks for the top-2 log-probabilities per token (the near-tie margin)."""

@dataclass(frozen=True)
class RequestSettings:
    """How each request is built: endpoint, model, output length, extra fields, streaming, retries."""

    endpoint: str
    model: str | None = None
    osl: int = 4096
    extra_inputs: JsonMapping = field(default_factory=lambda: {"temperature": 0})
    stream: bool = False
    retries: int = 0
    api: str = "chat"
    logprobs: bool = False
    reasoning: str = "auto"
    """The thinking switch (`on`, `off`, `auto`: nothing sent), as the engine's `reasoning_fields` sends it."""


@dataclass
class Turn:
    """One request's parsed answer and its client-side timing."""

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
    segments: str = ""
    """Per token-carrying chunk of a stream, `t` (thinking) or `a` (answer)."""
    token_times: list[float] = field(default_factory=list)
    """Arrival times (perf_counter) of the stream's token-carrying chunks."""


def build_payload(
    settings: RequestSettings, engine: Engine, messages: list[dict[str, str]]
) -> JsonObject:
    """The request body, built as the reference builds it (extra inputs cannot override max_tokens)."""
    payload: JsonObject = {"max_tokens": settings.osl, "stream": settings.stream}
    if settings.api == "completions":
        payload["prompt"] = "\n\n".join(message["content"] for message in messages)
    else:
        payload["messages"] = [dict(message) for message in messages]
    if settings.model:
        payload["model"] = settings.model
    if settings.stream:
        payload["stream_options"] = {"include_usage": True}
    payload.update(engine.request_fields())
    if settings.logprobs:
        payload.update({"logprobs": TOP_LOGPROBS} if settings.api == "completions" else
                       {"logprobs": True, "top_logprobs": TOP_LOGPROBS})
    switch = engine.reasoning_fields(settings.reasoning)
    kwargs = settings.extra_inputs.get("chat_template_kwargs")
    payload.update(settings.extra_inputs)
    payload.update(switch)
    template = switch.get("chat_template_kwargs")
    if isinstance(kwargs, dict) and isinstance(template, dict):  # the template's other kwargs kept
        payload["chat_template_kwargs"] = {**kwargs, **template}
    payload["max_tokens"] = settings.osl
    return payload


def _http_failure(response: Response) -> SampleFailure:
    """A non-200 answer as a failed turn; the whole (bounded) body goes to the message, redacted before any cut.

    A redirect is never followed (it would carry the request's secrets to whatever origin it names): it is a
    failure of its own kind that names where it pointed.
    """
    body = response.body.decode("utf-8", errors="replace")
    if 300 <= response.status < 400:
        location = response.headers.get("Location") or response.headers.get("location") or "nowhere"
        return SampleFailure("redirect", f"HTTP {response.status}: the server redirects to {location}; speedbench "
                             "follows no redirect (give the final URL with --url)")
    if response.status == 429:
        kind = "http_429"
    elif 400 <= response.status < 500:
        kind = "http_4xx"
    else:
        kind = "http_5xx"
    return SampleFailure(kind, f"HTTP {response.status}: {body}", retry_after_seconds(response.headers))


def _parse_json(body: bytes) -> JsonObject:
    """A response body as the JSON object it must be; SampleFailure invalid_json otherwise."""
    try:
        data = loads(body.decode(json.detect_encoding(body), "surrogatepass"))
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, huge integers
        raise SampleFailure("invalid_json", f"response is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise SampleFailure("invalid_json", "response is not a JSON object")
    return data


async def _stream_turn(
    transport: Transport, settings: RequestSettings, engine: Engine, body: bytes
) -> Turn:
    await transport.pace()  # many streams starting at once take turns; the wait counts as queue wait
    start = time.perf_counter()
    parsed = StreamChunks(settings.logprobs)
    # closed at once on [DONE]: the connection then serves the next request with nothing left of this one
    async with contextlib.aclosing(transport.stream_batches(settings.endpoint, body)) as batches:
        async for batch in batches:
            if isinstance(batch, Response):
                raise _http_failure(batch)
            if parsed.feed(batch):
                break
    done_at = parsed.done_at
    if done_at is None:
        raise SampleFailure("stream_incomplete", "stream ended without [DONE]")
    # the end is when [DONE] arrived (the transport times arrivals at the socket), not when it was parsed
    end = done_at if done_at >= start else time.perf_counter()
    if not parsed.chunks:
        raise SampleFailure("missing_fields", "stream ended ([DONE]) without a single chunk carrying choices")
    merged = parsed.merged
    message: JsonObject = {
        "role": "assistant", "content": "".join(parsed.content), "reasoning_content": "".join(parsed.reasoning),
    }
    merged["choices"] = [{"message": message, "finish_reason": parsed.finish_reason}]
    stats = engine.parse(merged)
    token_times = parsed.token_times
    ttft = token_times[0] - start if token_times else None
    itl = [later - earlier for earlier, later in itertools.pairwise(token_times)]
    span = token_times[-1] - token_times[0] if len(token_times) >= 2 else None
    counts, source = chunk_token_counts(parsed.evidence, parsed.chunk_chars, stats.completion_tokens)
    turn = Turn(
        stats=stats, latency_s=end - start, ttft_s=ttft, itl_s=itl, decode_span_s=span, chunk_tokens=counts,
        chunk_tokens_source=source, itl_token_s=per_token_itl(itl, counts), sent_at=start,
        segments=parsed.segments(), token_times=token_times,
    )
    if settings.logprobs:
        turn.margins = encode_margins(parsed.logprob_entries)
    return turn


async def _plain_turn(
    transport: Transport, settings: RequestSettings, engine: Engine, body: bytes
) -> Turn:
    sent_at = time.perf_counter()
    response = await transport.post(settings.endpoint, body)
    if response.status != 200:
        raise _http_failure(response)
    data = _parse_json(response.body)
    turn = Turn(stats=engine.parse(data), latency_s=response.elapsed_s, sent_at=sent_at)
    if settings.logprobs:
        turn.margins = encode_margins(logprob_entries(first_choice(data)))
    return turn


async def send_turn(
    transport: Transport, settings: RequestSettings, engine: Engine, payload: JsonMapping
) -> Turn:
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
