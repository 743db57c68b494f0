"""The JSON sections a run file keeps as objects, with their keys declared: machine, client lag, prompts, interleaving.

Each is written and read back as the JSON object it is (a file of another tool or version may hold other keys,
and they are kept), so each is a `TypedDict`: the keys the runner writes, named once for every reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias, TypedDict, cast, overload

from bench._types import JsonMapping, JsonObject, JsonValue


class MachineInfo(TypedDict, total=False):
    """The `machine` section: where the client ran (Python's `platform` facts) and its event loop."""

    platform: str
    machine: str
    processor: str | None
    cpu_count: int | None
    python: str
    event_loop: str


class ClientLag(TypedDict, total=False):
    """The `client_lag` section: the client's own event-loop lag over the run, sampled every `interval_ms`."""

    interval_ms: float
    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    threshold_ms: float
    over_threshold: int
    """How many samples lagged more than `threshold_ms`."""


class DatasetSource(TypedDict, total=False):
    """The `dataset` section: where the prompts came from and how many rows had no usable turns."""

    source: str
    bench: str | None
    skipped_rows: int


class Interleaving(TypedDict, total=False):
    """The `interleaved` section of a compared arm: its order seed, partner arm(s) and lock-step batch or blocks."""

    order_seed: int
    batch: int | None
    turn_jobs: int
    block_size: int
    blocks: int
    schedule: str
    partner: str | list[str]


Section: TypeAlias = "MachineInfo | ClientLag | DatasetSource | Interleaving"
"""A JSON section with its keys declared."""


def json_section(value: JsonValue | JsonMapping) -> JsonObject | None:
    """A copy of a JSON object section as read (None when absent or not an object)."""
    return dict(value) if isinstance(value, Mapping) else None


@overload
def section_object(section: Section) -> JsonObject: ...


@overload
def section_object(section: Section | None) -> JsonObject | None: ...


def section_object(section: Section | None) -> JsonObject | None:
    """A copy of a declared section as the JSON object the run file writes (None when absent).

    Every key a section declares holds a JSON value, but a type checker does not see a `TypedDict` as a mapping
    of JSON values, hence the cast.
    """
    return cast(JsonObject, dict(section)) if section is not None else None


def read_machine(value: JsonValue) -> MachineInfo:
    """A run file's `machine` object as read (a copy; empty when absent or not an object)."""
    return cast(MachineInfo, json_section(value) or {})


def read_client_lag(value: JsonValue) -> ClientLag | None:
    """A run file's `client_lag` object as read (a copy; None when absent or not an object)."""
    return cast("ClientLag | None", json_section(value))


def read_dataset(value: JsonValue) -> DatasetSource | None:
    """A run file's `dataset` object as read (a copy; None when absent or not an object)."""
    return cast("DatasetSource | None", json_section(value))


def read_interleaving(value: JsonValue) -> Interleaving | None:
    """A run file's `interleaved` object as read (a copy; None when absent or not an object)."""
    return cast("Interleaving | None", json_section(value))
