"""The adapter interface and the plain OpenAI-compatible adapter every engine builds on."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, TypedDict

from bench._types import JsonMapping, JsonObject, JsonValue
from bench.engines._json import first_object, object_at, text_at
from bench.engines._prometheus import by_label, parse_prometheus, value_of
from bench.records import (
    AcceptanceSummary,
    CounterSnapshot,
    ServerDescription,
    ServerStart,
    counter_acceptance,
    counter_deltas,
)


@dataclass(frozen=True, slots=True)
class TurnStats:
    """What one response says about itself: tokens, server timings, acceptance and the text."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    draft_n: int | None = None
    draft_n_accepted: int | None = None
    spec_steps: int | None = None
    prompt_ms: float | None = None
    predicted_ms: float | None = None
    prompt_per_second: float | None = None
    predicted_per_second: float | None = None
    cache_n: int | None = None
    content: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    model: str | None = None
    """The model the response says answered it (`model`), None when it names none."""
    reasoning_tokens: int | None = None
    """Output tokens the server says were thinking (`usage.completion_tokens_details.reasoning_tokens`)."""


class ResponseError(Exception):
    """A response that parsed but cannot be trusted: `kind` is missing_fields or bad_timings."""

    def __init__(self, kind: str, message: str) -> None:
        """Record the error kind and message."""
        super().__init__(message)
        self.kind = kind


MAX_TOKENS_PER_SECOND = 1e7
"""Server rates above this are treated as corrupt timings, not as speed."""


def checked(timings: JsonMapping, key: str) -> float | None:
    """A timing value, None when absent; NaN, infinite, negative or absurd values are refused."""
    value = timings.get(key)
    if value is None:
        return None
    number = _number(value)
    if number is None:
        raise ResponseError("bad_timings", f"timings.{key} is {value!r}")
    if key.endswith("per_second") and number > MAX_TOKENS_PER_SECOND:
        raise ResponseError("bad_timings", f"timings.{key} is {value!r}, beyond any real server")
    return number


def _number(value: JsonValue) -> float | None:
    """A finite, non-negative number or None (rejects bools, NaN, infinities, negatives)."""
    # exact types: bool is not a number here, and this is on every request's path
    if (type(value) is float or type(value) is int) and 0 <= value < math.inf:  # NaN fails the comparison
        return float(value)
    return None


def count(value: JsonValue) -> int | None:
    """A whole count from a number that `_number` accepts (a fraction truncated), None otherwise."""
    number = _number(value)
    return int(number) if number is not None else None


def drafts(container: JsonMapping, drafted_key: str, accepted_key: str, where: str) -> dict[str, int | None]:
    """Validated draft counts {draft_n, draft_n_accepted}: absent or whole numbers >= 0, accepted <= drafted.

    Anything else (negative, fractional, a string, accepted above drafted) makes the response's
    acceptance untrustworthy: ResponseError bad_timings, never a silent 0 or an accept rate above 1.
    """
    counts: dict[str, int | None] = {}
    for name, key in (("draft_n", drafted_key), ("draft_n_accepted", accepted_key)):
        value = container.get(key)
        if value is None:
            counts[name] = None
            continue
        number = _number(value)
        if number is None or number != int(number):
            raise ResponseError("bad_timings", f"{where}.{key} is {value!r}, not a non-negative whole number")
        counts[name] = int(number)
    drafted, accepted = counts["draft_n"], counts["draft_n_accepted"]
    if accepted and (drafted is None or accepted > drafted):
        raise ResponseError(
            "bad_timings", f"{where}.{accepted_key} ({accepted}) exceeds {where}.{drafted_key} ({drafted})"
        )
    return counts


def usage_count(usage: JsonMapping, key: str) -> int | None:
    """A `usage` token count: None when absent; a negative, fractional or non-number count is refused."""
    value = usage.get(key)
    if value is None:
        return None
    number = _number(value)
    if number is None or number != int(number):
        raise ResponseError("bad_timings", f"usage.{key} is {str(value)[:40]}, not a non-negative whole number")
    return int(number)


class ResponseFields(TypedDict):
    """What every OpenAI-compatible response says of itself, as `TurnStats` takes it (an adapter may mend a count)."""

    model: str | None
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    content: str
    reasoning: str
    finish_reason: str | None
    reasoning_tokens: int | None


def openai_fields(data: JsonMapping) -> ResponseFields:
    """Fields every OpenAI-compatible response has: usage, text, reasoning, finish reason, the model named."""
    usage = object_at(data, "usage")
    content = ""
    reasoning = ""
    choice = first_object(data.get("choices"))
    if choice is None:
        raise ResponseError("missing_fields", "response has no choices")
    finish_reason = text_at(choice, "finish_reason")
    message = choice.get("message")
    if isinstance(message, dict):
        content = text_at(message, "content") or content
        for key in ("reasoning_content", "reasoning"):
            said = text_at(message, key)
            if said is not None:
                reasoning = said
                break
    else:
        content = text_at(choice, "text") or content
    prompt_tokens = usage_count(usage, "prompt_tokens") or 0
    completion_tokens = usage_count(usage, "completion_tokens") or 0
    total_tokens = usage_count(usage, "total_tokens") or prompt_tokens + completion_tokens
    model = data.get("model")
    details = usage.get("completion_tokens_details")
    reasoning_tokens = usage_count(details, "reasoning_tokens") if isinstance(details, dict) else None
    if reasoning_tokens is not None and completion_tokens and reasoning_tokens > completion_tokens:
        raise ResponseError("bad_timings", f"usage.completion_tokens_details.reasoning_tokens ({reasoning_tokens}) "
                            f"exceeds usage.completion_tokens ({completion_tokens})")
    return {
        "model": model[:200] if isinstance(model, str) and model else None,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": total_tokens,
        "content": content,
        "reasoning": reasoning,
        "finish_reason": finish_reason,
        "reasoning_tokens": reasoning_tokens,
    }


def _file_name(model: str | None) -> str | None:
    """A model name as a reader may see it: the last path component, so no local path is recorded."""
    if not model:
        return None
    return model.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] if model.startswith(("/", ".", "~")) or (
        len(model) > 2 and model[1] == ":") else model


class Engine:
    """Base adapter: a plain OpenAI-compatible server (client timing only, acceptance n/a)."""

    name: ClassVar[str] = "openai"
    metric_prefix: ClassVar[str | None] = None
    generated_counters: ClassVar[tuple[str, ...]] = ("generation_tokens", "tokens_predicted")
    """/metrics counters (after `<prefix>:`) of the tokens the server generated, the first present counts."""

    def __init__(self) -> None:
        """Start with no notes and no model seen."""
        self.notes: set[str] = set()
        self.models: set[str] = set()
        """Every model name the responses gave (`model`), for the run file and the check against the request."""
        self.requested_model: str | None = None
        """The model the requests named (--model), when one was given: responses naming another are a warning."""
        self.counters_contradicted = False
        """Whether the server's counters contradicted themselves once: then no acceptance from them at all."""

    def request_fields(self) -> JsonObject:
        """Extra request body fields this engine needs to report acceptance."""
        return {}

    def reasoning_fields(self, setting: str) -> JsonObject:
        """Request fields that switch a reasoning model's thinking `on` or `off` (`auto`: none): the chat template's
        `enable_thinking`, which Qwen3-style templates read (vLLM, TensorRT-LLM and plain OpenAI-compatible servers
        pass `chat_template_kwargs` to it)."""
        if setting == "auto":
            return {}
        return {"chat_template_kwargs": {"enable_thinking": setting == "on"}}

    def warnings(self) -> list[str]:
        """What responses lacked or contradicted, once each, sorted."""
        return sorted(self.notes)

    def seen(self, stats: TurnStats) -> TurnStats:
        """Note the model a parsed response names (and a mismatch with the requested one); return the stats."""
        if stats.model is not None and stats.model not in self.models and len(self.models) < 16:
            self.models.add(stats.model)
            if self.requested_model and _file_name(stats.model) != _file_name(self.requested_model):
                self.notes.add(f"responses name model {stats.model!r}, not the requested {self.requested_model!r}: "
                               "the server may have answered with another model")
        return stats

    def checked_counter_deltas(self, before: CounterSnapshot, after: CounterSnapshot) -> dict[str, float]:
        """The acceptance counters' movement between two /metrics snapshots, or {} when it contradicts itself.

        A counter that went backwards (a restarted server, a load balancer switching backends) or more tokens
        accepted than drafted makes every figure from the pair untrustworthy: withheld, with a warning.
        """
        deltas = counter_deltas(before, after)
        problem = _counter_problem(deltas)
        if problem:
            self.counters_contradicted = True
            self.notes.add(f"server /metrics counters contradict themselves ({problem}): "
                           "acceptance from them is withheld")
            return {}
        return deltas

    def checked_counter_acceptance(
        self, before: CounterSnapshot, after: CounterSnapshot, *, server_wide: bool
    ) -> AcceptanceSummary | None:
        """Acceptance over a run from counter snapshots (see `counter_acceptance`), None when they (or any pair
        read during the run) contradict themselves."""
        if not self.checked_counter_deltas(before, after) or self.counters_contradicted:
            return None
        return counter_acceptance(before, after, server_wide=server_wide)

    def parse(self, data: JsonMapping) -> TurnStats:
        """Read one response (or a stream's merged final state)."""
        return self.seen(TurnStats(**openai_fields(data)))

    def acceptance_counters(self, metrics_text: str) -> CounterSnapshot | None:
        """Cumulative acceptance counters {drafts, draft_tokens, accepted, per_position} from /metrics."""
        return None

    def info_paths(self) -> dict[str, str]:
        """Server-root paths whose JSON describes the server (build, model, slots), read once before a run."""
        return {}

    def late_info_paths(self) -> dict[str, str]:
        """Info documents read again after the run (what the server says only once it served), by name."""
        return {}

    def trim_info(self, name: str, data: JsonValue) -> JsonValue:
        """What of one info document is worth keeping in the run file (large templates dropped)."""
        return data

    def describe(self, info: JsonMapping) -> ServerDescription:
        """Engine, build, model (a file or model name, never a local path) and slots from the info documents."""
        first = first_object(object_at(info, "models").get("data"))
        model = text_at(first, "id") if first is not None else None
        return ServerDescription(engine=self.name, model=_file_name(model))

    def tokenize_request(self, text: str) -> tuple[str, JsonObject] | None:
        """(server-root path, JSON body) of a request that counts the tokens of `text`, or None."""
        return None

    def token_count(self, response: JsonValue) -> int | None:
        """The token count in a tokenize response, or None when it has none."""
        return None

    def start_state(self, metrics_text: str, now_s: float) -> ServerStart | None:
        """What /metrics says about the server's state (tokens served and drafted so far, uptime), None without
        metrics; `now_s` (epoch seconds) dates the uptime."""
        if not metrics_text:
            return None
        series = parse_prometheus(metrics_text)
        prefix = self.metric_prefix
        counters: CounterSnapshot = self.acceptance_counters(metrics_text) or {}
        started = value_of(series, "process_start_time_seconds")
        start = ServerStart(
            generated_tokens=value_of(series, *(f"{prefix}:{name}" for name in self.generated_counters))
            if prefix else None,
            prompt_tokens=value_of(series, f"{prefix}:prompt_tokens") if prefix else None,
            cached_prompt_tokens=value_of(series, f"{prefix}:prompt_tokens_cached") if prefix else None,
            drafts=counters.get("drafts"), draft_tokens=counters.get("draft_tokens"), accepted=counters.get("accepted"),
            process_started=started, uptime_s=max(0.0, now_s - started) if started else None,
        )
        problem = start.problem()
        if problem:  # withheld like a contradiction read during the run: neither the state nor the counters hold
            self.counters_contradicted = True
            self.notes.add(f"server /metrics counters at the run's start contradict themselves ({problem}): its "
                           "starting state and acceptance from its counters are withheld")
            return None
        return start if any(getattr(start, name) is not None for name in ServerStart.__slots__) else None

    def acceptance_gauges(self, metrics_text: str) -> dict[str, float | None] | None:
        """Time-averaged acceptance gauges {acceptance_length, accept_rate} from /metrics, if the engine has them."""
        return None

    @classmethod
    def claims(cls, response: JsonMapping | None, metrics_text: str) -> bool:
        """Whether a first response or the /metrics text identify this engine."""
        return bool(cls.metric_prefix and f"{cls.metric_prefix}:" in metrics_text)


def _counter_problem(deltas: Mapping[str, float]) -> str | None:
    """What is impossible about counter deltas (a negative one, accepted above drafted), or None."""
    backwards = [key for key, value in deltas.items() if value < 0]
    if backwards:
        return f"{', '.join(backwards)} went backwards"
    drafted, accepted = deltas.get("draft_tokens"), deltas.get("accepted")
    if drafted is not None and accepted is not None and accepted > drafted:
        return f"{accepted:g} tokens accepted of {drafted:g} drafted"
    return None


def spec_decode_counters(metrics_text: str, prefix: str) -> CounterSnapshot | None:
    """The `<prefix>:spec_decode_num_*` counters that llama.cpp and vLLM share."""
    series = parse_prometheus(metrics_text)
    drafts = value_of(series, f"{prefix}:spec_decode_num_drafts")
    if drafts is None:
        return None
    return {
        "drafts": drafts,
        "draft_tokens": value_of(series, f"{prefix}:spec_decode_num_draft_tokens"),
        "accepted": value_of(series, f"{prefix}:spec_decode_num_accepted_tokens"),
        "per_position": by_label(series, "position", f"{prefix}:spec_decode_num_accepted_tokens_per_pos"),
    }


def acceptance_gauges_of(metrics_text: str, prefix: str) -> dict[str, float | None] | None:
    """The `<prefix>:spec_accept_length` and `<prefix>:spec_accept_rate` gauges (either may be absent), None
    when neither is exported."""
    series = parse_prometheus(metrics_text)
    length = value_of(series, f"{prefix}:spec_accept_length")
    rate = value_of(series, f"{prefix}:spec_accept_rate")
    if length is None and rate is None:
        return None
    return {"acceptance_length": length, "accept_rate": rate}


def chunk_token_evidence(chunk: JsonMapping) -> tuple[str, int] | None:
    """What a streamed chunk says about its own tokens, or None: ("usage", cumulative completion tokens)
    (vLLM's `continuous_usage_stats`, any server that reports usage per chunk), ("token_ids", count) (vLLM's
    `return_token_ids`, SGLang), or ("logprobs", count) (OpenAI `logprobs.content`, one entry per token)."""
    choice = first_object(chunk.get("choices"))
    if choice is not None:
        ids = choice.get("token_ids")
        if isinstance(ids, list):
            return ("token_ids", len(ids))
        entries = object_at(choice, "logprobs").get("content")
        if isinstance(entries, list):
            return ("logprobs", len(entries))
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        tokens = usage.get("completion_tokens")
        if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
            return ("usage", tokens)
    return None
