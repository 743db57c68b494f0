"""Engine adapters: how each server family reports timings and speculative acceptance, behind one interface.

Every adapter turns one chat or completion response (or a stream's merged final state) into
`TurnStats`, adds any request fields the engine needs to report acceptance, and reads
acceptance counters or gauges from the engine's Prometheus `/metrics` text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from bench.engines._prometheus import by_label, parse_prometheus, value_of


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


class ResponseError(Exception):
    """A response that parsed but cannot be trusted: `kind` is missing_fields or bad_timings."""

    def __init__(self, kind: str, message: str) -> None:
        """Record the error kind and message."""
        super().__init__(message)
        self.kind = kind


MAX_TOKENS_PER_SECOND = 1e7
"""Server rates above this are treated as corrupt timings, not as speed."""


def _checked(timings: Mapping[str, Any], key: str) -> float | None:
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


def _number(value: Any) -> float | None:
    """A finite, non-negative number or None (rejects bools, NaN, infinities, negatives)."""
    kind = type(value)  # exact types: bool is not a number here, and this is on every request's path
    if (kind is float or kind is int) and 0 <= value < math.inf:  # NaN fails the comparison
        return float(value)
    return None


def _count(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None else None


def _drafts(container: Mapping[str, Any], drafted_key: str, accepted_key: str, where: str) -> dict[str, int | None]:
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


def _openai_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """Fields every OpenAI-compatible response has: usage, text, reasoning, finish reason."""
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    content = ""
    reasoning = ""
    finish_reason = None
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ResponseError("missing_fields", "response has no choices")
    choice = choices[0]
    finish_reason = choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None
    message = choice.get("message")
    if isinstance(message, dict):
        if isinstance(message.get("content"), str):
            content = message["content"]
        for key in ("reasoning_content", "reasoning"):
            if isinstance(message.get(key), str):
                reasoning = message[key]
                break
    elif isinstance(choice.get("text"), str):
        content = choice["text"]
    prompt_tokens = _count(usage.get("prompt_tokens")) or 0
    completion_tokens = _count(usage.get("completion_tokens")) or 0
    total_tokens = _count(usage.get("total_tokens")) or prompt_tokens + completion_tokens
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": total_tokens,
        "content": content,
        "reasoning": reasoning,
        "finish_reason": finish_reason,
    }


class Engine:
    """Base adapter: a plain OpenAI-compatible server (client timing only, acceptance n/a)."""

    name: ClassVar[str] = "openai"
    metric_prefix: ClassVar[str | None] = None

    def __init__(self) -> None:
        """Start with no notes."""
        self.notes: set[str] = set()

    def request_fields(self) -> dict[str, Any]:
        """Extra request body fields this engine needs to report acceptance."""
        return {}

    def warnings(self) -> list[str]:
        """What responses lacked that this adapter needs, once each, sorted."""
        return sorted(self.notes)

    def parse(self, data: Mapping[str, Any]) -> TurnStats:
        """Read one response (or a stream's merged final state)."""
        return TurnStats(**_openai_fields(data))

    def acceptance_counters(self, metrics_text: str) -> dict[str, Any] | None:
        """Cumulative acceptance counters {drafts, draft_tokens, accepted, per_position} from /metrics."""
        return None

    def acceptance_gauges(self, metrics_text: str) -> dict[str, float] | None:
        """Time-averaged acceptance gauges {acceptance_length, accept_rate} from /metrics, if the engine has them."""
        return None

    @classmethod
    def claims(cls, response: Mapping[str, Any] | None, metrics_text: str) -> bool:
        """Whether a first response or the /metrics text identify this engine."""
        return bool(cls.metric_prefix and f"{cls.metric_prefix}:" in metrics_text)


class LlamaCpp(Engine):
    """llama.cpp server: per-request `timings` (with draft counts) and `llamacpp:spec_decode_*` counters."""

    name = "llamacpp"
    metric_prefix = "llamacpp"

    def parse(self, data: Mapping[str, Any]) -> TurnStats:
        """Read usage, text and the `timings` object."""
        fields = _openai_fields(data)
        timings = data.get("timings") if isinstance(data.get("timings"), dict) else {}
        if not timings:
            self.notes.add("llama.cpp responses carry no 'timings': server t/s and acceptance are n/a")
        prompt_n = _count(_checked(timings, "prompt_n"))
        predicted_n = _count(_checked(timings, "predicted_n"))
        if not fields["prompt_tokens"] and prompt_n:
            fields["prompt_tokens"] = prompt_n
        if not fields["completion_tokens"] and predicted_n:
            fields["completion_tokens"] = predicted_n
        if not fields["total_tokens"]:
            fields["total_tokens"] = fields["prompt_tokens"] + fields["completion_tokens"]
        return TurnStats(
            **fields,
            **_drafts(timings, "draft_n", "draft_n_accepted", "timings"),
            prompt_ms=_checked(timings, "prompt_ms"),
            predicted_ms=_checked(timings, "predicted_ms"),
            prompt_per_second=_checked(timings, "prompt_per_second"),
            predicted_per_second=_checked(timings, "predicted_per_second"),
            cache_n=_count(timings.get("cache_n")),
        )

    def acceptance_counters(self, metrics_text: str) -> dict[str, Any] | None:
        """Read the `llamacpp:spec_decode_*` counters."""
        return _spec_decode_counters(metrics_text, "llamacpp")

    @classmethod
    def claims(cls, response: Mapping[str, Any] | None, metrics_text: str) -> bool:
        """llama.cpp answers with a `timings` object."""
        return super().claims(response, metrics_text) or bool(response and isinstance(response.get("timings"), dict))


class VLLM(Engine):
    """vLLM: per-request `metrics.speculative_decoding` and `vllm:spec_decode_*` counters."""

    name = "vllm"
    metric_prefix = "vllm"

    def parse(self, data: Mapping[str, Any]) -> TurnStats:
        """Read usage, text and `metrics.speculative_decoding` when the server sends it."""
        fields = _openai_fields(data)
        metrics = data.get("metrics") if isinstance(data.get("metrics"), dict) else {}
        spec = metrics.get("speculative_decoding") if isinstance(metrics.get("speculative_decoding"), dict) else {}
        if not spec:
            self.notes.add(
                "vLLM responses carry no metrics.speculative_decoding (start vLLM with "
                "--per-request-spec-decode-metrics): per-request acceptance is n/a"
            )
        return TurnStats(
            **fields,
            **_drafts(spec, "num_draft_tokens", "num_accepted_draft_tokens", "metrics.speculative_decoding"),
            spec_steps=_count(spec.get("num_spec_steps")),
        )

    def acceptance_counters(self, metrics_text: str) -> dict[str, Any] | None:
        """Read the `vllm:spec_decode_*` counters."""
        return _spec_decode_counters(metrics_text, "vllm")

    @classmethod
    def claims(cls, response: Mapping[str, Any] | None, metrics_text: str) -> bool:
        """vLLM exposes `vllm:` metrics or per-request `metrics.speculative_decoding`."""
        metrics = response.get("metrics") if response else None
        return super().claims(response, metrics_text) or (
            isinstance(metrics, dict) and "speculative_decoding" in metrics
        )


class SGLang(Engine):
    """SGLang: asks for `return_spec_tokens_details`, reads `sglext.spec_tokens_details` and its gauges."""

    name = "sglang"
    metric_prefix = "sglang"

    def request_fields(self) -> dict[str, Any]:
        """Ask SGLang for per-request speculative details."""
        return {"return_spec_tokens_details": True}

    def parse(self, data: Mapping[str, Any]) -> TurnStats:
        """Read usage, text and `sglext.spec_tokens_details`."""
        fields = _openai_fields(data)
        ext = data.get("sglext") if isinstance(data.get("sglext"), dict) else {}
        spec = ext.get("spec_tokens_details") if isinstance(ext.get("spec_tokens_details"), dict) else {}
        if not spec:
            self.notes.add("SGLang responses carry no sglext.spec_tokens_details: per-request acceptance is n/a")
        return TurnStats(
            **fields,
            **_drafts(spec, "spec_num_proposed_drafts", "spec_num_correct_drafts", "sglext.spec_tokens_details"),
            spec_steps=_count(spec.get("spec_verify_ct")),
        )

    def acceptance_gauges(self, metrics_text: str) -> dict[str, float] | None:
        """Read `sglang:spec_accept_length` and `sglang:spec_accept_rate` (time-averaged)."""
        return _gauges(metrics_text, "sglang")

    @classmethod
    def claims(cls, response: Mapping[str, Any] | None, metrics_text: str) -> bool:
        """SGLang exposes `sglang:` metrics or answers with `sglext`."""
        return super().claims(response, metrics_text) or bool(response and "sglext" in response)


class TensorRTLLM(Engine):
    """TensorRT-LLM: client timing per request, acceptance from its `trtllm:spec_*` gauges."""

    name = "trtllm"
    metric_prefix = "trtllm"

    def acceptance_gauges(self, metrics_text: str) -> dict[str, float] | None:
        """Read `trtllm:spec_accept_length` and `trtllm:spec_accept_rate`."""
        return _gauges(metrics_text, "trtllm")


def _spec_decode_counters(metrics_text: str, prefix: str) -> dict[str, Any] | None:
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


def _gauges(metrics_text: str, prefix: str) -> dict[str, float] | None:
    series = parse_prometheus(metrics_text)
    length = value_of(series, f"{prefix}:spec_accept_length")
    rate = value_of(series, f"{prefix}:spec_accept_rate")
    if length is None and rate is None:
        return None
    return {"acceptance_length": length, "accept_rate": rate}


ENGINES: dict[str, type[Engine]] = {
    engine.name: engine for engine in (LlamaCpp, VLLM, SGLang, TensorRTLLM, Engine)
}
"""Known adapters by name; `auto` picks one with `detect_engine`."""
ENGINE_NAMES = ("auto", *ENGINES)


def detect_engine(response: Mapping[str, Any] | None, metrics_text: str) -> Engine:
    """Pick the adapter that claims a first response or the /metrics text; plain OpenAI otherwise."""
    for engine in (LlamaCpp, SGLang, VLLM, TensorRTLLM):
        if engine.claims(None, metrics_text):
            return engine()
    for engine in (LlamaCpp, SGLang, VLLM, TensorRTLLM):
        if engine.claims(response, ""):
            return engine()
    return Engine()


class AutoEngine(Engine):
    """Detects the engine from /metrics, else from the first response, then behaves as that adapter."""

    def __init__(self, metrics_text: str = "") -> None:
        """Decide from the /metrics text if it identifies an engine."""
        super().__init__()
        chosen = detect_engine(None, metrics_text)
        self._chosen: Engine | None = chosen if type(chosen) is not Engine else None

    @property
    def chosen(self) -> Engine:
        """The adapter in use (plain OpenAI until something identifies the engine)."""
        return self._chosen or Engine()

    @property
    def name(self) -> str:  # type: ignore[override]
        """The detected engine's name."""
        return self.chosen.name

    def request_fields(self) -> dict[str, Any]:
        """The detected adapter's request fields."""
        return self.chosen.request_fields()

    def parse(self, data: Mapping[str, Any]) -> TurnStats:
        """Detect from the first response if still undecided, then parse with that adapter."""
        if self._chosen is None:
            self._chosen = detect_engine(data, "")
        return self._chosen.parse(data)

    def warnings(self) -> list[str]:
        """The detected adapter's warnings."""
        return self.chosen.warnings()

    def acceptance_counters(self, metrics_text: str) -> dict[str, Any] | None:
        """The detected adapter's counters."""
        return self.chosen.acceptance_counters(metrics_text)

    def acceptance_gauges(self, metrics_text: str) -> dict[str, float] | None:
        """The detected adapter's gauges."""
        return self.chosen.acceptance_gauges(metrics_text)


def engine_by_name(name: str) -> Engine:
    """The adapter called `name` (not `auto`)."""
    return ENGINES[name]()
