"""One sample's outcome: the immutable record every stage after the runner reads."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Final, TypeAlias, TypeGuard

from bench._errors import BenchError
from bench._redact import redact
from bench._types import JsonMapping, JsonObject, JsonValue


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
    spec: Mapping[str, float | None] = field(default_factory=dict)
    """Engine figures of the sample by name: acceptance counter deltas (`drafts`, `accepted_pos_0`...), step counts."""
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
    replaced_chars: int = 0
    """Lone surrogates in the server's text (invalid Unicode) that `outputs` and `reasoning` hold as U+FFFD."""
    server_state: str | None = None
    """How the server's drafter and prompt-cache state was set for this sample: "restart" (an embedded server
    restarted for this repeat or level), "kept" (the server ran on from earlier requests), None (not known)."""
    # reasoning models (schema 7, bench.records._thinking): thinking and answer apart
    thinking_tokens: int | None = None
    """Output tokens spent thinking (None: not known, a file before schema 7 or no count available)."""
    answer_tokens: int | None = None
    """Output tokens of the answer (completion tokens minus thinking tokens)."""
    thinking_source: str | None = None
    """How the thinking count was known: usage, stream, tokenize or none (no thinking text)."""
    answer_ttft_s: float | None = None
    """Streamed: seconds from the request to the first answer chunk (the first turn's)."""
    thinking_decode_t_s: float | None = None
    """Streamed: the thinking segment's decode rate (tokens after its first chunk over its span)."""
    answer_decode_t_s: float | None = None
    """Streamed: the answer segment's decode rate (tokens after its first chunk over its span)."""
    chunk_segments: str | None = None
    """Streamed: per token-carrying chunk over all turns, `t` (thinking) or `a` (answer)."""

    @property
    def queue_wait_s(self) -> float | None:
        """Seconds the sample waited in the client between being due and its first request going out."""
        if self.scheduled_s is None or self.sent_s is None:
            return None
        return max(0.0, self.sent_s - self.scheduled_s)

    def to_dict(self) -> JsonObject:
        """The result as a JSON-ready dict (tuples serialise as JSON arrays)."""
        out: JsonObject = {name: getattr(self, name) for name in _RESULT_FIELD_NAMES}
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
    "server_decode_t_s": float, "server_prompt_t_s": float, "batch": int, "server_state": str,
    "replaced_chars": int,
    "thinking_tokens": int, "answer_tokens": int, "thinking_source": str, "answer_ttft_s": float,
    "thinking_decode_t_s": float, "answer_decode_t_s": float, "chunk_segments": str,
}


_JSON_TYPES: dict[type, frozenset[type]] = {
    float: frozenset({int, float}), int: frozenset({int}), str: frozenset({str}),
}
"""The types json.loads gives that stand for each wanted type (an int is a float; a bool is no number)."""
_NUMBER_TYPES: Final = (int, float)
"""The types of a JSON number, as a tuple (an `isinstance` check of a union is slower, in the loading loop)."""
_TYPE_NAMES = {float: "a number", int: "an integer", str: "a string"}
_NUMBER_FIELDS = ("latency_s", "prompt_ms", "predicted_ms", "prompt_per_second", "predicted_per_second")
_COUNT_FIELDS = frozenset({"prompt_tokens", "completion_tokens", "total_tokens", "draft_n", "draft_n_accepted",
                           "turns"})
_CHECKS: dict[str, tuple[bool, frozenset[type], str]] = {
    **{name: (True, _JSON_TYPES[wanted], _TYPE_NAMES[wanted]) for name, wanted in _TUPLE_FIELDS.items()},
    **{name: (False, _JSON_TYPES[wanted], _TYPE_NAMES[wanted]) for name, wanted in _SCALAR_FIELDS.items()},
    **{name: (False, _JSON_TYPES[float], "a number") for name in _NUMBER_FIELDS},
}
"""Per typed field: (whether it is a list, the JSON types allowed for it or its items, the type's name)."""
_UNCHECKED = frozenset(_RESULT_FIELD_NAMES) - _CHECKS.keys()  # id, category, ok, spec: converted below
_SETTERS = tuple(
    (item.name, getattr(SampleResult, item.name).__set__, item.default) for item in fields(SampleResult)
)
"""Per field: its name, its slot's setter and its default (MISSING for required fields, spec's factory apart)."""


FieldValues: TypeAlias = "dict[str, object]"
"""A result's checked field values by name, each of its field's type (JSON lists held as tuples): `_build` sets
them on the record as they are."""

MAX_NUMBER = 1e15
"""Numbers a record holds are within +-this (a count, a time, a rate); anything beyond is a corrupt file."""
_NULL_AS = {
    **{item.name: item.default for item in fields(SampleResult) if item.default is not MISSING},
    **{name: 0 for name in _COUNT_FIELDS},
}
"""What a JSON null stands for in a field: its default (a null repeat is repeat 0, never None)."""
_SURROGATE = re.compile("[\ud800-\udfff]")


def _short(value: object) -> str:
    """A number as shown in an error: at most 40 characters (an integer of 400 digits is not printed)."""
    if isinstance(value, int) and abs(value) >= 10**30:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    return str(value)[:40]


def _numbers_in_range(values: list[float]) -> bool:
    """Whether every number of a list is finite and within +-MAX_NUMBER (min/max/fsum: no Python loop)."""
    if not -MAX_NUMBER < min(values) or not max(values) < MAX_NUMBER:
        return False
    return math.isfinite(math.fsum(values))  # a NaN escapes min and max, never the sum


def valid_text(text: str) -> tuple[str, int]:
    """`text` as valid Unicode: surrogate pairs split over pieces joined, each lone surrogate replaced by U+FFFD;
    (the text, how many were replaced)."""
    if text.isascii() or not _SURROGATE.search(text):
        return text, 0
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    lone = len(_SURROGATE.findall(text)) - 2 * (len(text) - len(joined))
    return _SURROGATE.sub("\ufffd", joined), lone


def valid_texts(texts: Iterable[str]) -> tuple[tuple[str, ...], int]:
    """Each of `texts` as valid Unicode (`valid_text`); (the texts, the lone surrogates replaced in all)."""
    cleaned = [valid_text(text) for text in texts]
    return tuple(text for text, _ in cleaned), sum(count for _, count in cleaned)


def checked_text(value: object, where: str) -> str:
    """A record's name (id, category) as a string; one that is not valid Unicode (a lone surrogate) is refused."""
    text = value if isinstance(value, str) else str(value)
    if not text.isascii() and _SURROGATE.search(text):
        raise BenchError(f"{where} {text.encode('utf-8', 'backslashreplace').decode('ascii', 'replace')[:80]!s} "
                         "holds a lone surrogate: not valid Unicode")
    return text


def checked_spec(spec: JsonMapping, where: str) -> dict[str, float | None]:
    """A result's `spec` (counter deltas, step counts): numbers within range only."""
    checked: dict[str, float | None] = {}
    for key, value in spec.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not -MAX_NUMBER < value < MAX_NUMBER):
            raise BenchError(f"{where} spec.{key} is {_short(value)!s}, not a number within +-{MAX_NUMBER:g}")
        checked[key] = value
    return checked


def _is_a(value: object, allowed: frozenset[type]) -> bool:
    """Whether a value not of an exact JSON type is still of an allowed one (a subclass; a bool is no number)."""
    return not isinstance(value, bool) and isinstance(value, tuple(allowed))


def _all_numbers(items: list[JsonValue], allowed: frozenset[type]) -> TypeGuard[list[float]]:
    """Whether every item of a JSON list is a number of an `allowed` type (an integer for a count; no bool)."""
    return {type(item) for item in items} <= allowed or all(_is_a(item, allowed) for item in items)


def result_from_dict(data: JsonValue | JsonMapping, source: str = "result") -> SampleResult:
    """Build a SampleResult from a dict, ignoring unknown keys; raise BenchError when it is malformed.

    Every field is checked against the type it must have, in one pass over the dict: loading 100,000
    records is in `make perf`'s analysis figure.
    """
    if type(data) is not dict and not isinstance(data, Mapping):
        raise BenchError(f"{source}: a result is not a JSON object")
    for key in ("id", "category", "ok"):
        if key not in data:
            raise BenchError(f"{source}: a result lacks {key!r}")
    values: FieldValues = {}
    checks = _CHECKS
    for name, value in data.items():
        check = checks.get(name)
        if check is None:
            if name in _UNCHECKED:
                values[name] = value
            continue
        is_list, allowed, label = check
        if value is None:
            if not is_list:
                values[name] = _NULL_AS.get(name)
        elif is_list:
            if type(value) is not list:
                raise BenchError(f"{source}: result {data['id']!r} field {name!r} is not a list")
            if value and label == "a string":
                if not {type(item) for item in value} <= allowed and not all(_is_a(item, allowed) for item in value):
                    raise BenchError(f"{source}: result {data['id']!r} field {name!r} holds an item that is not "
                                     f"{label}")
            elif value:
                if not _all_numbers(value, allowed):
                    raise BenchError(f"{source}: result {data['id']!r} field {name!r} holds an item that is not "
                                     f"{label}")
                if not _numbers_in_range(value):
                    raise BenchError(f"{source}: result {data['id']!r} field {name!r} holds a number out of range "
                                     f"(beyond +-{MAX_NUMBER:g}, or not finite)")
            values[name] = tuple(value)
        elif type(value) not in allowed and not _is_a(value, allowed):
            raise BenchError(f"{source}: result {data['id']!r} field {name!r} is {value!r}, not {label}")
        elif label == "a string" or (isinstance(value, _NUMBER_TYPES) and -MAX_NUMBER < value < MAX_NUMBER):
            values[name] = value
        elif value != value or value in (math.inf, -math.inf):  # NaN or infinity: unknown, as the writer stores it
            values[name] = _NULL_AS.get(name)
        else:
            raise BenchError(f"{source}: result {data['id']!r} field {name!r} is out of range "
                             f"({_short(value)}; beyond +-{MAX_NUMBER:g})")
    return _build(_settled(values, data, source))


def _settled(values: FieldValues, data: JsonMapping, source: str) -> FieldValues:
    """A result's checked values with its texts, spec and identity checked and its unknowns settled."""
    spec = data.get("spec")
    values["spec"] = checked_spec(spec, f"{source}: result {data['id']!r}") if isinstance(spec, Mapping) else {}
    values["id"] = checked_text(values["id"], f"{source}: a result's id")
    values["category"] = checked_text(values["category"], f"{source}: result {data['id']!r} category")
    if values.get("sub_category") is not None:
        checked_text(values["sub_category"], f"{source}: result {data['id']!r} sub_category")
    values["ok"] = bool(values["ok"])
    if values.get("latency_s") is None and "latency_s" in data:  # null or NaN: unknown, so no usable measurement
        values.update(latency_s=0.0, ok=False, error_kind=values.get("error_kind") or "unknown_latency",
                      error=values.get("error") or "the run file records no latency for it (null or NaN)")
    replaced = 0
    for name in ("outputs", "reasoning"):  # a run file written before text was made valid
        texts = values.get(name)
        if isinstance(texts, tuple):
            values[name], count = valid_texts(texts)
            replaced += count
    if replaced:
        values["replaced_chars"] = _count(values, "replaced_chars") + replaced
    values.setdefault("turns", 1)
    values.setdefault("latency_s", 0.0)
    _check_counts(values, data, source)
    return values


_COUNTS = ("turns", "prompt_tokens", "completion_tokens", "total_tokens", "draft_n", "draft_n_accepted", "cache_n",
           "retries", "replaced_chars")
"""A result's counts: none is negative, as the live path refuses a server's negative token counts."""


def _check_counts(values: FieldValues, data: JsonMapping, source: str) -> None:
    """Refuse a result no server run could have written: a negative count, more tokens accepted than drafted."""
    for name in _COUNTS:
        value = values.get(name)
        if isinstance(value, int) and value < 0:
            raise BenchError(f"{source}: result {data['id']!r} field {name!r} is negative ({_short(value)})")
    accepted, drafted = _count(values, "draft_n_accepted"), _count(values, "draft_n")
    if accepted > drafted:
        raise BenchError(f"{source}: result {data['id']!r} has {_short(accepted)} draft tokens accepted of "
                         f"{_short(drafted)} drafted")


def _count(values: FieldValues, name: str) -> int:
    """A checked count of a result (0 when absent or null)."""
    value = values.get(name)
    return value if isinstance(value, int) else 0


def _build(values: FieldValues) -> SampleResult:
    """A SampleResult from checked field values (absent ones take their defaults).

    It fills the slots directly: the frozen dataclass's own __init__ goes through object.__setattr__ for
    each of its fields, which halves the speed of loading a run file; the result is the same object.
    """
    result = object.__new__(SampleResult)
    get = values.get
    for name, setter, default in _SETTERS:
        setter(result, get(name, default))
    return result


def redacted_result(result: SampleResult) -> JsonObject:
    """A result as a JSON-ready dict with its error message redacted (the one field a server writes freely)."""
    data = result.to_dict()
    if result.error:
        data["error"] = redact(result.error)
    return data


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
