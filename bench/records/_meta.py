"""Typed run metadata: what the runner records about a run besides its results, read back one way.

The run file keeps these as top-level JSON keys (a superset of the reference's format). The runner
builds a `RunMeta` and the run file writes it as is; loading reads it back once, and every stage after
the runner reads its fields, so no reader guesses keys through `.get()` chains. Keys it does not know
are kept in `extra` and written back unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from bench._types import JsonMapping, JsonObject, JsonValue
from bench.records._acceptance import AcceptanceSummary
from bench.records._schema import SCHEMA_VERSION
from bench.records._sections import (
    ClientLag,
    DatasetSource,
    Interleaving,
    MachineInfo,
    json_section,
    read_client_lag,
    read_dataset,
    read_interleaving,
    read_machine,
    section_object,
)
from bench.records._sequential import SequentialStop
from bench.records._settings import SettingValue, setting

MAX_META_NUMBER = 1e15
"""Metadata numbers beyond +-this (or not finite) are read as unknown: no file overflows a reader."""


def _number(value: object) -> float | None:
    """A number in range as written (an int stays an int, so a file rewrites byte for byte), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not -MAX_META_NUMBER < value < MAX_META_NUMBER:
        return None  # NaN fails the comparison too
    return value


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


GAUGES = "gauges"
"""The acceptance source of engines that publish only time-averaged gauges (length and rate, no counts)."""


@dataclass(frozen=True, slots=True)
class Acceptance:
    """Run-wide speculative acceptance, engine-neutral: from counter deltas, per-sample deltas or gauges."""

    source: str
    server_wide: bool = False
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted: float | None = None
    acceptance_length: float | None = None
    accept_rate: float | None = None
    per_position: tuple[float, ...] = ()
    partial: str | None = None  # why the counters cover only part of the run (a resumed run)

    @classmethod
    def from_mapping(cls, data: JsonValue | AcceptanceSummary) -> Acceptance | None:
        """Read a run file's `acceptance` object; None when absent or not an object."""
        if not isinstance(data, Mapping):
            return None
        positions = data.get("per_position")
        return cls(
            source=str(data.get("source") or "unknown"),
            server_wide=bool(data.get("server_wide")),
            drafts=_number(data.get("drafts")),
            draft_tokens=_number(data.get("draft_tokens")),
            accepted=_number(data.get("accepted")),
            acceptance_length=_number(data.get("acceptance_length")),
            accept_rate=_number(data.get("accept_rate")),
            per_position=tuple(value for value in (_number(item) for item in positions) if value is not None)
            if isinstance(positions, list) else (),
            partial=_text(data.get("partial")),
        )

    def to_dict(self) -> JsonObject:
        """The run file's `acceptance` object (per-position rates and the partial note only when present)."""
        data: JsonObject = {"source": self.source, "acceptance_length": self.acceptance_length,
                                "accept_rate": self.accept_rate, "server_wide": self.server_wide}
        if self.source != GAUGES:  # time-averaged gauges count nothing
            data.update(drafts=self.drafts, draft_tokens=self.draft_tokens, accepted=self.accepted)
        if self.per_position:
            data["per_position"] = list(self.per_position)
        if self.partial is not None:
            data["partial"] = self.partial
        return data


@dataclass(frozen=True, slots=True)
class ServerDescription:
    """What a server is, described by its adapter: engine, build, model (file name only) and parallel slots."""

    engine: str | None = None
    build: str | None = None
    model: str | None = None
    slots: int | None = None
    speculative: str | None = None
    """The speculation the server reports (llama.cpp's /slots `speculative.types`: `ngram-mod`, `draft`...), `none`
    when it reports speculation off, None when it says nothing."""
    draft_settings: JsonMapping = field(default_factory=dict)
    """The draft settings the server reports (`speculative.n_max`, ...), as it names them."""

    @classmethod
    def from_mapping(cls, data: JsonValue) -> ServerDescription:
        """Read a run file's `server_description` object (empty when absent)."""
        if not isinstance(data, Mapping):
            return cls()
        slots = _number(data.get("slots"))
        settings = data.get("draft_settings")
        return cls(engine=_text(data.get("engine")), build=_text(data.get("build")), model=_text(data.get("model")),
                   slots=int(slots) if slots is not None else None, speculative=_text(data.get("speculative")),
                   draft_settings=dict(settings) if isinstance(settings, Mapping) else {})

    def to_dict(self) -> JsonObject:
        """The description as a JSON object (speculation only when the server reported it)."""
        data: JsonObject = {name: getattr(self, name) for name in ("engine", "build", "model", "slots")}
        if self.speculative is not None:
            data["speculative"] = self.speculative
        if self.draft_settings:
            data["draft_settings"] = dict(self.draft_settings)
        return data


FRESH = "fresh"
"""A server that had generated nothing before the run: no drafter memory, no prompt cache of earlier requests."""
SERVED = "served before"
"""A server that had generated tokens before the run (a warm prompt cache) but never drafted."""
DRAFTED = "drafter warm"
"""A server whose drafter had drafted before the run: n-gram memory or a warm draft cache carried into it."""
UNKNOWN = "unknown"
"""The server exported nothing about its state (no /metrics), or the file predates the record."""


@dataclass(frozen=True, slots=True)
class ServerStart:
    """What the server said about its own state when the run began, before the run's first request (/metrics).

    Counters are the server's totals at that moment: non-zero ones mean earlier requests, whose prompt cache and
    drafter memory (llama.cpp's ngram-mod keeps n-grams until a restart) carry into the run.
    """

    generated_tokens: float | None = None
    prompt_tokens: float | None = None
    cached_prompt_tokens: float | None = None
    """Prompt tokens the server had already reused from its cache."""
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted: float | None = None
    process_started: float | None = None
    """The server process's start (epoch seconds), where it exports `process_start_time_seconds`."""
    uptime_s: float | None = None
    """Seconds the server process had been up when the run began."""

    @property
    def state(self) -> str:
        """`fresh`, `served before`, `drafter warm` or `unknown`: the class of state two compared runs must share."""
        if self.drafts or self.draft_tokens:
            return DRAFTED
        if self.generated_tokens or self.prompt_tokens:
            return SERVED
        if self.generated_tokens is None and self.prompt_tokens is None and self.drafts is None:
            return UNKNOWN
        return FRESH

    def describe(self) -> str:
        """One phrase: `fresh`, `drafter warm: 1,234 tokens drafted, 5,678 generated before the run`, ..."""
        state = self.state
        if state in (FRESH, UNKNOWN):
            return state + (f" (up {self.uptime_s:.0f} s)" if self.uptime_s is not None and state == FRESH else "")
        parts = []
        if self.draft_tokens:
            parts.append(f"{self.draft_tokens:,.0f} tokens drafted")
        if self.generated_tokens:
            parts.append(f"{self.generated_tokens:,.0f} generated")
        if self.cached_prompt_tokens:
            parts.append(f"{self.cached_prompt_tokens:,.0f} prompt tokens reused from its cache")
        uptime = f", up {self.uptime_s:.0f} s" if self.uptime_s is not None else ""
        return f"{state}: {', '.join(parts) or 'prompts processed'} before the run{uptime}"

    def problem(self) -> str | None:
        """What is impossible about the snapshot (a negative counter, more tokens accepted than drafted), or None:
        the same contradictions that withhold the counters read during a run."""
        negative = [name for name in ("generated_tokens", "prompt_tokens", "cached_prompt_tokens", "drafts",
                                      "draft_tokens", "accepted") if (getattr(self, name) or 0) < 0]
        if negative:
            return f"{', '.join(negative)} negative"
        if self.accepted is not None and self.draft_tokens is not None and self.accepted > self.draft_tokens:
            return f"{self.accepted:g} tokens accepted of {self.draft_tokens:g} drafted"
        return None

    @classmethod
    def from_mapping(cls, data: JsonValue) -> ServerStart | None:
        """Read a run file's `server_start` object; None when absent (an older file: the state is unknown)."""
        if not isinstance(data, Mapping):
            return None
        return cls(**{name: _number(data.get(name)) for name in cls.__slots__})

    def to_dict(self) -> JsonObject:
        """The run file's `server_start` object, with its state spelled out for a reader of the JSON."""
        return {"state": self.state, **{name: getattr(self, name) for name in self.__slots__}}


def start_state(start: ServerStart | None) -> str:
    """The state class of a run's recorded start (`unknown` when the file records none)."""
    return start.state if start is not None else UNKNOWN


_KNOWN_KEYS = frozenset({
    "schema_version", "harness", "started_at", "finished_at", "elapsed_s", "engine", "server", "server_description",
    "acceptance", "interrupted", "warnings", "machine", "prompts_sha256", "client_lag", "dataset", "interleaved",
    "served_models", "sequential", "server_start",
})


@dataclass(frozen=True, slots=True, eq=False)
class RunMeta(Mapping[str, JsonValue]):
    """Everything a run file records about its run besides config, summary and results.

    The runner builds it and the run file writes it as is (`to_dict`); loading reads it back once
    (`from_mapping`). As a read-only mapping it is the run file's JSON object of these keys, for tools
    that carry keys speedbench does not know (they are kept in `extra`).
    """

    schema_version: int = SCHEMA_VERSION
    harness_name: str | None = None
    harness_version: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    elapsed_s: float | None = None
    engine: str | None = None
    server: ServerDescription = field(default_factory=ServerDescription)
    acceptance: Acceptance | None = None
    interrupted: bool = False
    warnings: tuple[str, ...] = ()
    machine: MachineInfo = field(default_factory=MachineInfo)
    prompts_sha256: str | None = None  # over every sample's id, category and turns: resuming sends the same prompts
    server_info: JsonMapping | None = None  # the server's own info documents (/props, /v1/models, ...), as served
    client_lag: ClientLag | None = None  # the client's event-loop lag (p50/p99/max ms, samples, threshold)
    dataset: DatasetSource | None = None  # where the prompts came from: source, bench, skipped rows
    interleaved: Interleaving | None = None  # an interleaved arm's seed, partner(s) and lock-step batch
    served_models: tuple[str, ...] = ()  # the models that answered, as the responses named them
    sequential: SequentialStop | None = None  # sampled until decided: the stopping rule and its looks
    server_start: ServerStart | None = None  # the server's own state when the run began (None: not recorded)
    extra: JsonMapping = field(default_factory=dict)  # keys of other tools, written back as read
    written: frozenset[str] = _KNOWN_KEYS  # the known keys `to_dict` writes: all, or those a file read back had

    @property
    def harness(self) -> str:
        """`name version` of the tool that wrote the run."""
        return " ".join(part for part in (self.harness_name, self.harness_version) if part)

    @property
    def event_loop(self) -> str | None:
        """The client's event loop (`asyncio`, `uvloop`) as the run's environment records it; None in older files."""
        return _text(self.machine.get("event_loop"))

    @classmethod
    def from_mapping(cls, meta: JsonMapping) -> RunMeta:
        """Read the metadata keys of a run file or journal header (any version); unknown keys land in `extra`."""
        if isinstance(meta, RunMeta):
            return meta
        harness_value = meta.get("harness")
        harness: JsonMapping = harness_value if isinstance(harness_value, Mapping) else {}
        warnings = meta.get("warnings")
        served = meta.get("served_models")
        version = meta.get("schema_version", SCHEMA_VERSION)
        return cls(
            schema_version=version if isinstance(version, int) else 0,
            harness_name=_text(harness.get("name")),
            harness_version=_text(harness.get("version")),
            started_at=_text(meta.get("started_at")),
            finished_at=_text(meta.get("finished_at")),
            elapsed_s=_number(meta.get("elapsed_s")),
            engine=_text(meta.get("engine")),
            server=ServerDescription.from_mapping(meta.get("server_description")),
            acceptance=Acceptance.from_mapping(meta.get("acceptance")),
            interrupted=meta.get("interrupted") is True,
            warnings=tuple(str(item) for item in warnings) if isinstance(warnings, list | tuple) else (),
            machine=read_machine(meta.get("machine")),
            prompts_sha256=_text(meta.get("prompts_sha256")),
            server_info=json_section(meta.get("server")),
            client_lag=read_client_lag(meta.get("client_lag")),
            dataset=read_dataset(meta.get("dataset")),
            interleaved=read_interleaving(meta.get("interleaved")),
            served_models=tuple(str(item) for item in served) if isinstance(served, list | tuple) else (),
            sequential=SequentialStop.from_mapping(meta.get("sequential")),
            server_start=ServerStart.from_mapping(meta.get("server_start")),
            extra={key: value for key, value in meta.items() if key not in _KNOWN_KEYS},
            written=_KNOWN_KEYS.intersection(meta),
        )

    def to_dict(self) -> JsonObject:
        """The run file's metadata keys as written: every key of `written` (`interleaved` only when set), and
        `sequential` and `server_start` whenever set."""
        known: JsonObject = {
            "harness": {"name": self.harness_name, "version": self.harness_version},
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "elapsed_s": self.elapsed_s,
            "engine": self.engine,
            "server": json_section(self.server_info),
            "server_description": self.server.to_dict(),
            "acceptance": self.acceptance.to_dict() if self.acceptance is not None else None,
            "interrupted": self.interrupted,
            "warnings": list(self.warnings),
            "machine": section_object(self.machine),
            "prompts_sha256": self.prompts_sha256,
            "client_lag": section_object(self.client_lag),
            "dataset": section_object(self.dataset),
            "interleaved": section_object(self.interleaved),
            "served_models": list(self.served_models),
        }
        if self.interleaved is None:
            del known["interleaved"]
        sequential = {"sequential": self.sequential.to_dict()} if self.sequential is not None else {}
        start = {"server_start": self.server_start.to_dict()} if self.server_start is not None else {}
        return {**self.extra, "schema_version": self.schema_version,
                **{key: value for key, value in known.items() if key in self.written}, **sequential, **start}

    def __getitem__(self, key: str) -> JsonValue:
        """The value of one metadata key as the run file writes it."""
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        """The metadata keys the run file writes."""
        return iter(self.to_dict())

    def __len__(self) -> int:
        """How many metadata keys the run file writes."""
        return len(self.to_dict())


@dataclass(frozen=True, slots=True)
class RecordedSettings:
    """What a run was asked to do: the reference's `config` keys plus speedbench's, read one way (`_settings`)."""

    url: str | None = None
    model: str | None = None
    bench: str | None = None
    category: str | None = None
    osl: int | None = None
    concurrency: int | None = None
    limit: int | None = None
    dataset: str | None = None
    repeat: int = 1
    stream: bool = False
    request_rate: float | None = None
    trace: str | None = None
    extra_inputs: JsonMapping = field(default_factory=dict)  # request fields sent as given
    tags: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, config: JsonMapping) -> RecordedSettings:
        """Read a run file's `config` object (any version), each key as its declared kind (absent: unset)."""

        def read(key: str) -> SettingValue:
            return setting(key).read(config.get(key))

        repeat, rate, extra_inputs, tags = read("repeat"), read("request_rate"), read("extra_inputs"), read("tags")
        return cls(
            url=_text(read("url")), model=_text(read("model")), bench=_text(read("bench")),
            category=_text(read("category")), osl=_integer(read("osl")), concurrency=_integer(read("concurrency")),
            limit=_integer(read("limit")), dataset=_text(read("dataset")), repeat=_integer(repeat) or 1,
            stream=read("stream") is True, request_rate=rate if isinstance(rate, float) else None,
            trace=_text(read("trace")), extra_inputs=dict(extra_inputs) if isinstance(extra_inputs, Mapping) else {},
            tags={str(key): str(value) for key, value in tags.items()} if isinstance(tags, Mapping) else {},
        )
