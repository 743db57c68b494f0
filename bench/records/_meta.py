"""Typed run metadata: what the runner records about a run besides its results, read back one way.

The run file keeps these as top-level JSON keys (a superset of the reference's format); `RunMeta`
is how every stage after the runner reads them, so no reader guesses keys through `.get()` chains.
Keys it does not know are kept in `extra` and written back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_META_NUMBER = 1e15
"""Metadata numbers beyond +-this (or not finite) are read as unknown: no file overflows a reader."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not -MAX_META_NUMBER < value < MAX_META_NUMBER:
        return None  # NaN fails the comparison too
    return float(value)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


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

    @classmethod
    def from_mapping(cls, data: Any) -> Acceptance | None:
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
        )


@dataclass(frozen=True, slots=True)
class ServerDescription:
    """What a server is, described by its adapter: engine, build, model (file name only) and parallel slots."""

    engine: str | None = None
    build: str | None = None
    model: str | None = None
    slots: int | None = None

    @classmethod
    def from_mapping(cls, data: Any) -> ServerDescription:
        """Read a run file's `server_description` object (empty when absent)."""
        if not isinstance(data, Mapping):
            return cls()
        slots = _number(data.get("slots"))
        return cls(engine=_text(data.get("engine")), build=_text(data.get("build")), model=_text(data.get("model")),
                   slots=int(slots) if slots is not None else None)

    def to_dict(self) -> dict[str, Any]:
        """The description as a JSON object."""
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class RunMeta:
    """Everything a run file records about its run besides config, summary and results."""

    schema_version: int = 0
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
    machine: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def harness(self) -> str:
        """`name version` of the tool that wrote the run."""
        return " ".join(part for part in (self.harness_name, self.harness_version) if part)

    @property
    def event_loop(self) -> str | None:
        """The client's event loop (`asyncio`, `uvloop`) as the run's environment records it; None in older files."""
        return _text(self.machine.get("event_loop"))

    @classmethod
    def from_mapping(cls, meta: Mapping[str, Any]) -> RunMeta:
        """Read the metadata keys of a run file (any version); unknown keys land in `extra`."""
        harness = meta.get("harness") if isinstance(meta.get("harness"), Mapping) else {}
        warnings = meta.get("warnings")
        version = meta.get("schema_version")
        known = {"schema_version", "harness", "started_at", "finished_at", "elapsed_s", "engine",
                 "server_description", "acceptance", "interrupted", "warnings", "machine"}
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
            warnings=tuple(str(item) for item in warnings) if isinstance(warnings, list) else (),
            machine=dict(meta["machine"]) if isinstance(meta.get("machine"), Mapping) else {},
            extra={key: value for key, value in meta.items() if key not in known},
        )



@dataclass(frozen=True, slots=True)
class RunSettings:
    """What a run was asked to do: the reference's `config` keys plus speedbench's, read one way."""

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
    extra_inputs: Mapping[str, Any] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> RunSettings:
        """Read a run file's `config` object (any version)."""

        def integer(key: str) -> int | None:
            value = _number(config.get(key))
            return int(value) if value is not None else None

        extra = config.get("extra_inputs")
        tags = config.get("tags")
        return cls(
            url=_text(config.get("url")),
            model=_text(config.get("model")),
            bench=_text(config.get("bench")),
            category=_text(config.get("category")),
            osl=integer("osl"),
            concurrency=integer("concurrency"),
            limit=integer("limit"),
            dataset=_text(config.get("dataset")),
            repeat=integer("repeat") or 1,
            stream=config.get("stream") is True,
            extra_inputs=dict(extra) if isinstance(extra, Mapping) else {},
            tags={str(key): str(value) for key, value in tags.items()} if isinstance(tags, Mapping) else {},
        )
