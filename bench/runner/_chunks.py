"""Answers and streamed chunks as JSON: the parse of one value, a chunk's fields, and one stream's chunks in order.

A stream's chunks mostly repeat one shape: the same bytes before and after the delta's text. `StreamChunks`
learns that shape from a chunk it parsed in full and then reads such chunks by their text alone (one C string
scan instead of a JSON parse), with the same result as a full parse: what lies outside the string is byte for
byte the learnt chunk, and the string is checked to close exactly where that chunk's did.
"""

from __future__ import annotations

import json
import math
import re
from _json import scanstring
from collections.abc import Callable, Iterable, Mapping

from bench._redact import one_line
from bench._types import JsonMapping, JsonObject, JsonValue
from bench.engines import chunk_token_evidence


class SampleFailure(Exception):
    """A turn failed: `kind` says how (connect, timeout, http_5xx, invalid_json, ...)."""

    def __init__(self, kind: str, message: str, retry_after: float = 1.0) -> None:
        """Record the error kind, the message (secrets redacted, one line) and how long the server asked us to wait."""
        super().__init__(one_line(message))
        self.kind = kind
        self.retry_after = retry_after


_SCAN: Callable[[str, int], tuple[JsonValue, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The decoder's value scanner (set by its `__init__`, which typeshed's `JSONDecoder` stub does not declare)."""
_SCAN_STRING = scanstring  # the C scanner, strict as json.loads is


def loads(text: str) -> JsonValue:
    """`json.loads(text)`, without its two whitespace searches and Python frames when the text is one JSON value
    from its first character to its last (what servers send); any other text goes to `json.loads` for its verdict.
    """
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:
        return json.loads(text)  # raises its JSONDecodeError
    return value if end == len(text) else json.loads(text)


def delta_text(chunk: JsonMapping) -> tuple[str, str, str | None]:
    """(content, reasoning, finish reason) of a chunk's first choice: the chat `delta` or the completions `text`."""
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not choices:
        return "", "", None
    choice = choices[0]
    if not isinstance(choice, dict):
        return "", "", None
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        delta = {}
    content = delta.get("content")
    if not isinstance(content, str):
        content = choice.get("text")
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    finish = choice.get("finish_reason")
    return (
        content if isinstance(content, str) else "",
        reasoning if isinstance(reasoning, str) else "",
        finish if isinstance(finish, str) else None,
    )


def logprob_entries(choice: JsonMapping) -> list[tuple[int, float | None]]:
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


def _margin(values: list[JsonValue]) -> float | None:
    """Top-1 minus top-2 log-probability (>= 0), or None with fewer than two finite values."""
    finite = sorted((float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)), reverse=True)
    return finite[0] - finite[1] if len(finite) >= 2 else None


def first_choice(data: JsonMapping) -> JsonMapping:
    """A response's first choice, or an empty mapping."""
    choices = data.get("choices")
    return choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) else {}


_VALUE_START = re.compile(r'[ \t\n\r]*:[ \t\n\r]*"')
_PROBE_BODY = "\\u0000"
"""A string body no server sends as a token's text: the learnt shape is checked by parsing it in the text's place."""
_MISSES_ALLOWED = 8
"""Chunks of the learnt kind that missed the shape before a stream stops learning shapes, unless they are under
a quarter of its chunks (a server whose every chunk differs outside its text, such as per-chunk timings, would
otherwise pay a second parse per chunk; one whose timestamp ticks each second keeps its shapes)."""


class StreamChunks:
    """One stream's chunks, parsed in order: texts, reasoning, arrival times, token evidence, merged fields.

    `merged` holds the last value of every top-level field but `choices`; `content`/`reasoning` the texts;
    `token_times`/`chunk_chars`/`evidence` one entry per chunk that carried text (its arrival, its characters,
    what it says of its own tokens, usage made per chunk); `chunks` counts chunks with a `choices` list;
    `parsed_in_full` and `shapes_learnt` count the chunks read by a full parse and the shapes learnt from them.
    """

    def __init__(self, logprobs: bool = False, shapes: bool = True) -> None:
        """Start empty; with `logprobs`, the per-token log-probabilities are collected too (and no shape learnt);
        without `shapes`, every chunk is parsed in full."""
        self.merged: JsonObject = {}
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.finish_reason: str | None = None
        self.token_times: list[float] = []
        self.chunk_chars: list[int] = []
        self.evidence: list[tuple[str, int] | None] = []
        self.logprob_entries: list[tuple[int, float | None]] = []
        self.chunks = 0
        self.thinking_chunks: list[int] = []
        """Indexes (in `token_times`) of the chunks that carried thinking and no answer text."""
        self.done_at: float | None = None
        self.parsed_in_full = 0
        self.shapes_learnt = 0
        self._cumulative = 0
        self._logprobs = logprobs
        self._prefix: str | None = None
        self._suffix = ""
        self._misses = 0
        self._shapes = shapes and not logprobs

    def feed(self, events: Iterable[tuple[str, float]]) -> bool:
        """Take (data, arrival time) events in order; True once `[DONE]` has come (what follows it is not read)."""
        prefix, suffix = self._prefix, self._suffix
        times, chars, evidence, content = self.token_times, self.chunk_chars, self.evidence, self.content
        for data, at in events:
            if prefix is not None and data.startswith(prefix) and data.endswith(suffix):
                close = len(data) - len(suffix)  # where the learnt chunk's string closed
                if close >= len(prefix):
                    try:
                        text, end = _SCAN_STRING(data, len(prefix))
                    except ValueError:
                        end = -1
                    if end == close + 1 and text:
                        self.chunks += 1
                        times.append(at)
                        chars.append(len(text))
                        evidence.append(None)
                        content.append(text)
                        continue
            if data == "[DONE]" or data.strip() == "[DONE]":
                self.done_at = at
                return True
            self._parse(data, at, prefix is not None)
            prefix, suffix = self._prefix, self._suffix
        return False

    def _parse(self, data: str, at: float, had_shape: bool) -> None:
        """Parse one chunk in full, take its fields, and learn its shape (or forget the last one)."""
        self.parsed_in_full += 1
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
            self.chunks += 1
        text, thought, finish = delta_text(chunk)
        if self._logprobs:
            self.logprob_entries.extend(logprob_entries(first_choice(chunk)))
        tokens = chunk_token_evidence(chunk) if text or thought or "usage" in chunk else None
        if text or thought:
            if thought and not text:
                self.thinking_chunks.append(len(self.token_times))
            self.token_times.append(at)
            self.chunk_chars.append(len(text) + len(thought))
            if tokens is not None and tokens[0] == "usage":
                tokens, self._cumulative = ("usage", tokens[1] - self._cumulative), tokens[1]
            self.evidence.append(tokens)
        elif tokens is not None and tokens[0] == "usage":
            self._cumulative = tokens[1]
        self.content.append(text)
        self.reasoning.append(thought)
        self.finish_reason = finish or self.finish_reason
        for key, value in chunk.items():
            if key != "choices":
                self.merged[key] = value
        plain = self._shapes and bool(text) and not thought and finish is None and tokens is None
        if plain and had_shape:
            self._misses += 1
        learn = plain and (self._misses <= _MISSES_ALLOWED or self._misses * 4 < self.chunks)
        shape = _shape(data, chunk, text) if learn else None
        self._prefix, self._suffix = shape if shape is not None else (None, "")
        self.shapes_learnt += shape is not None


    def segments(self) -> str:
        """One letter per token-carrying chunk: `t` (thinking) or `a` (answer); "" when no chunk carried thinking."""
        if not self.thinking_chunks:
            return ""
        letters = ["a"] * len(self.token_times)
        for index in self.thinking_chunks:
            letters[index] = "t"
        return "".join(letters)


def _shape(data: str, chunk: JsonObject, text: str) -> tuple[str, str] | None:
    """(what precedes the text's string body, what follows it from its closing quote) when a chunk with any other
    text there would parse to this chunk with only its text changed; None when that cannot be shown."""
    choices = chunk["choices"]
    choice = choices[0] if isinstance(choices, list) else None
    delta = choice.get("delta") if isinstance(choice, dict) else None
    key = '"content"' if isinstance(delta, dict) and isinstance(delta.get("content"), str) else '"text"'
    if data.count(key) != 1:
        return None
    opening = _VALUE_START.match(data, data.index(key) + len(key))
    if opening is None:
        return None
    try:
        value, end = _SCAN_STRING(data, opening.end())
    except ValueError:
        return None
    if value != text:
        return None
    prefix, suffix = data[:opening.end()], data[end - 1:]
    try:
        probe = loads(prefix + _PROBE_BODY + suffix)
    except ValueError:
        return None
    if type(probe) is not dict or delta_text(probe) != ("\x00", "", None):
        return None  # the string is not the one the text came from
    return prefix, suffix
