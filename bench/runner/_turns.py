"""HTTP turns: build a request, send it (streamed or not, with retries) and parse its answer or its chunks."""

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
from bench.records import encode_margins
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


_SCAN = json.JSONDecoder().scan_once


def loads(text: str) -> Any:
    """`json.loads(text)`, without its two whitespace searches and Python frames when the text is one JSON value
    from its first character to its last (what servers send); any other text goes to `json.loads` for its verdict.
    """
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:
        return json.loads(text)  # raises its JSONDecodeError
    return value if end == len(text) else json.loads(text)


def _parse_json(body: bytes) -> dict[str, Any]:
    try:
        data = loads(body.decode(json.detect_encoding(body), "surrogatepass"))
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
) -> Turn:
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
                    raise SampleFailure("invalid_json", f"stream chunk is not valid JSON: {data!r}") from None
                if type(chunk) is not dict:
                    raise SampleFailure("invalid_json", "stream chunk is not a JSON object")
                error = chunk.get("error")
                if error is not None and isinstance(error, Mapping | str):  # None skips the ABC check
                    raise SampleFailure("http_5xx", f"stream error: {error}")
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
    turn = Turn(
        stats=stats, latency_s=end - start, ttft_s=ttft, itl_s=itl, decode_span_s=span, chunk_tokens=counts,
        chunk_tokens_source=source, itl_token_s=per_token_itl(itl, counts), sent_at=start,
    )
    if settings.logprobs:
        turn.margins = encode_margins(logprob_entries)
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
        turn.margins = encode_margins(_logprob_entries(_first_choice(data)))
    return turn


async def send_turn(
    transport: Transport, settings: RequestSettings, engine: Engine, payload: Mapping[str, Any]
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
