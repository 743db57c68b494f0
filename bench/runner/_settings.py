"""The run settings: what a request and a prompt set are, whatever server they go to.

One typed object holds them (`RunSettings`); a run's config (`RunConfig`) extends it with its endpoint and
run-only fields, and every comparison job (bench, sweep, tune, the pairs of `bench --config`) holds it plus only
its own fields. The command line builds it in one place (`bench.commands._options.run_settings`), a config file
in one place (`bench.commands._bench_file`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Self

from bench._types import JsonMapping, JsonValue
from bench.records import SettingValue, default


@dataclass(frozen=True)
class RunSettings:
    """Every URL-independent setting of a run's requests and prompt set; defaults from `bench.records.setting`."""

    model: str | None = default("model")
    """The `model` field each request sends (None: the server picks)."""
    bench: str = default("bench")
    category: str = default("category")
    osl: int = default("osl")
    extra_inputs: JsonMapping = field(default_factory=lambda: default("extra_inputs"))
    """Request fields every request sends as given (`--extra-inputs`)."""
    concurrency: int = default("concurrency")
    limit: int | None = default("limit")
    timeout: float = default("timeout")
    dataset: str = default("dataset")
    revision: str | None = default("revision")
    repeat: int = default("repeat")
    warmup: int = default("warmup")
    stream: bool = default("stream")
    engine: str = default("engine")
    """The server's engine (auto: detected from its answers)."""
    api: str = default("api")
    retries: int = default("retries")
    chat_template_kwargs: Mapping[str, JsonValue] | None = default("chat_template_kwargs")  # JSON as given
    reasoning: str = default("reasoning")
    """The thinking switch of reasoning models (`--reasoning on|off|auto`), sent as each engine reads it."""
    max_response_bytes: int = default("max_response_bytes")
    logprobs: bool = default("logprobs")
    request_rate: float | None = default("request_rate")
    arrival: str = default("arrival")
    burstiness: float = default("burstiness")
    max_concurrency: int | None = default("max_concurrency")
    arrival_seed: int = default("arrival_seed")
    api_key: str | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_values(cls, values: Mapping[str, SettingValue], **fixed: SettingValue) -> Self:
        """Settings from named values (parsed options, a config file's keys): each one's value where given, then
        `fixed`; names that are no setting are ignored."""
        known = {item.name for item in fields(cls)} - set(fixed)
        # each value is of its setting's declared kind (the option parser and the config-file reader give it so),
        # which a type checker cannot see by name: the constructor checks the names, not the kinds
        chosen: dict[str, Any] = {**{key: value for key, value in values.items() if key in known}, **fixed}
        return cls(**chosen)

    def values(self) -> dict[str, SettingValue]:
        """The settings by name (to build a `RunConfig` or a changed copy)."""
        return {item.name: getattr(self, item.name) for item in fields(RunSettings)}


RUN_SETTING_NAMES: tuple[str, ...] = tuple(item.name for item in fields(RunSettings))
"""The names of the run settings, in declaration order."""
