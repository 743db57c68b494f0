"""One sample's outcome: the immutable record every stage after the runner reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from bench._errors import BenchError


@dataclass(frozen=True, slots=True)
class SampleResult:
    """One sample's outcome (all its turns), as the reference records it plus speedbench's extras."""

    id: str
    category: str
    ok: bool
    turns: int
    latency_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    finish_reason: str | None = None
    draft_n: int = 0
    draft_n_accepted: int = 0
    prompt_ms: float | None = None
    predicted_ms: float | None = None
    prompt_per_second: float | None = None
    predicted_per_second: float | None = None
    error: str | None = None
    repeat: int = 0
    sub_category: str | None = None
    outputs: tuple[str, ...] = ()
    reasoning: tuple[str, ...] = ()
    cache_n: int | None = None
    ttft_s: float | None = None
    itl_s: tuple[float, ...] = ()
    e2e_s: float | None = None
    client_decode_t_s: float | None = None
    error_kind: str | None = None
    retries: int = 0
    spec: Mapping[str, Any] = field(default_factory=dict)
    chunk_tokens: tuple[int, ...] = ()
    chunk_tokens_source: str | None = None
    itl_token_s: tuple[float, ...] = ()
    tpot_s: float | None = None
    scheduled_s: float | None = None
    sent_s: float | None = None
    batch: int | None = None
    """With interleaved arms: the lock-step batch the sample ran in (the same index in every arm's run file)."""
    server_decode_t_s: float | None = None
    """llama.cpp's own decode rate: sum of (n - 1) per turn over the summed generation time (None without timings)."""
    server_prompt_t_s: float | None = None
    """Prompt t/s over uncached tokens only (prompt tokens minus cache_n), over the summed prompt time."""
    token_margins: tuple[str, ...] = ()
    """Per turn, with --logprobs: "<bytes>:<margin>" per token, space-separated (see `encode_margins`)."""

    @property
    def queue_wait_s(self) -> float | None:
        """Seconds the sample waited in the client between being due and its first request going out."""
        if self.scheduled_s is None or self.sent_s is None:
            return None
        return max(0.0, self.sent_s - self.scheduled_s)

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dict (tuples serialise as JSON arrays)."""
        out = {name: getattr(self, name) for name in _RESULT_FIELD_NAMES}
        if type(self.spec) is not dict:
            out["spec"] = dict(self.spec)
        return out

    def verify_steps(self) -> tuple[float, float] | None:
        """(tokens produced, verification steps) of this sample, from counter deltas or the engine's step count."""
        drafts = self.spec.get("drafts")
        if drafts:
            return float(drafts) + float(self.spec.get("accepted") or 0.0), float(drafts)
        steps = self.spec.get("steps")
        if steps:
            return float(self.draft_n_accepted) + float(steps), float(steps)
        return None

    @property
    def key(self) -> tuple[str, int]:
        """The pairing key: sample id and repeat index."""
        return (self.id, self.repeat)


_RESULT_FIELD_NAMES = tuple(f.name for f in fields(SampleResult))
_TUPLE_FIELDS: dict[str, type] = {
    "outputs": str, "reasoning": str, "itl_s": float, "chunk_tokens": int, "itl_token_s": float,
    "token_margins": str,
}
_SCALAR_FIELDS: dict[str, type] = {
    "prompt_tokens": int, "completion_tokens": int, "total_tokens": int, "draft_n": int, "draft_n_accepted": int,
    "turns": int, "repeat": int, "retries": int, "cache_n": int, "ttft_s": float, "e2e_s": float,
    "client_decode_t_s": float, "error": str, "error_kind": str, "finish_reason": str, "sub_category": str,
    "tpot_s": float, "scheduled_s": float, "sent_s": float, "chunk_tokens_source": str,
    "server_decode_t_s": float, "server_prompt_t_s": float, "batch": int,
}


def _is_a(value: Any, wanted: type) -> bool:
    """Whether a loaded JSON value has the expected type (bools are not numbers; an int is a float)."""
    if isinstance(value, bool):
        return False
    if wanted is float:
        return isinstance(value, int | float)
    return isinstance(value, wanted)


def result_from_dict(data: Mapping[str, Any], source: str = "result") -> SampleResult:
    """Build a SampleResult from a dict, ignoring unknown keys; raise BenchError when it is malformed."""
    if not isinstance(data, Mapping):
        raise BenchError(f"{source}: a result is not a JSON object")
    for key in ("id", "category", "ok"):
        if key not in data:
            raise BenchError(f"{source}: a result lacks {key!r}")
    kwargs: dict[str, Any] = {name: data[name] for name in _RESULT_FIELD_NAMES if name in data}
    for name in set(_TUPLE_FIELDS).intersection(kwargs):
        value = kwargs[name]
        if value is None:
            del kwargs[name]
        elif not isinstance(value, list):
            raise BenchError(f"{source}: result {data['id']!r} field {name!r} is not a list")
        else:
            wanted = _TUPLE_FIELDS[name]
            if not all(_is_a(item, wanted) for item in value):
                raise BenchError(f"{source}: result {data['id']!r} field {name!r} holds a non-{wanted.__name__} item")
            kwargs[name] = tuple(value)
    for name, wanted in _SCALAR_FIELDS.items():
        value = kwargs.get(name)
        if value is not None and not _is_a(value, wanted):
            raise BenchError(f"{source}: result {data['id']!r} field {name!r} is {value!r}, not a {wanted.__name__}")
    if "spec" in kwargs:
        kwargs["spec"] = dict(kwargs["spec"]) if isinstance(kwargs["spec"], Mapping) else {}
    kwargs["id"] = str(kwargs["id"])
    kwargs["category"] = str(kwargs["category"])
    kwargs["ok"] = bool(kwargs["ok"])
    kwargs.setdefault("turns", 1)
    kwargs.setdefault("latency_s", 0.0)
    for name in ("prompt_tokens", "completion_tokens", "total_tokens", "draft_n", "draft_n_accepted", "turns"):
        if kwargs.get(name) is None:
            kwargs[name] = 0
    for name in ("latency_s", "prompt_ms", "predicted_ms", "prompt_per_second", "predicted_per_second",
                 "server_decode_t_s", "server_prompt_t_s"):
        value = kwargs.get(name)
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
            raise BenchError(f"{source}: result {kwargs['id']!r} field {name!r} is not a number")
    return SampleResult(**kwargs)


def latest_by_key(results: Iterable[SampleResult]) -> list[SampleResult]:
    """Keep the last result per (id, repeat), in first-seen order of keys."""
    chosen: dict[tuple[str, int], SampleResult] = {}
    for result in results:
        chosen[result.key] = result
    return list(chosen.values())


def encode_margins(entries: Iterable[tuple[int, float | None]]) -> str:
    """One turn's tokens as "<utf-8 bytes>:<top-1 minus top-2 log-probability>" ("-" when unknown), space-separated.

    A compact string (about 8 characters a token) keeps run files small; margins keep 3 significant digits.
    """
    return " ".join(f"{size}:{'-' if margin is None else format(margin, '.3g')}" for size, margin in entries)


def decode_margins(text: str) -> list[tuple[int, float | None]]:
    """The (byte length, margin) of each token of one turn, from `encode_margins`' string; [] when malformed."""
    entries: list[tuple[int, float | None]] = []
    for item in text.split():
        size, _, margin = item.partition(":")
        try:
            entries.append((int(size), None if margin in ("", "-") else float(margin)))
        except ValueError:
            return []
    return entries
