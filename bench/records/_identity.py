"""A run's identity: every recorded setting that changes what a run measures, as `_settings` declares them.

`run --resume`, `sweep --resume` and `tune --resume` refuse to continue a run whose identity differs in any setting;
comparing two runs (compare, report, the gate) treats a difference in an `ERROR` setting as making the
comparison meaningless and one in a `WARNING` setting as worth showing. Settings that differ on purpose
between a baseline and a speculative arm (server URL, model tags, engine) are checked on resume only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from bench._errors import BenchError
from bench._types import JsonMapping, JsonValue
from bench.records._settings import COMPARED_AS_ERROR, COMPARED_AS_WARNING, IDENTITY

STARTED_HERE = ("embedded", "command")
"""How the `server` tag of a server the harness started begins: `embedded llama.cpp ...`, `command <template>`."""
SELECTION_KEYS = ("category", "limit", "repeat", "dataset", "bench", "revision")
"""Settings that change which samples are selected (and so the prompt digest) without changing any one prompt."""


@dataclass(frozen=True)
class Mismatch:
    """One identity setting that differs: its key and both values as recorded."""

    key: str
    was: JsonValue
    now: JsonValue

    def message(self) -> str:
        """`osl was 16, now 32`."""
        return f"{self.key} was {self.was!r}, now {self.now!r}"


@dataclass(frozen=True)
class RunIdentity:
    """The identity settings of one run, read from its recorded `config` (run file or journal header)."""

    values: tuple[tuple[str, JsonValue], ...]

    @classmethod
    def of(cls, config: JsonMapping) -> RunIdentity:
        """The identity of a recorded config (a setting it does not record reads as None)."""
        return cls(tuple((setting.key, config.get(setting.key)) for setting in IDENTITY))

    def get(self, key: str) -> JsonValue:
        """The recorded value of `key` (None when not recorded)."""
        return dict(self.values).get(key)

    @property
    def started_here(self) -> bool:
        """Whether the run was against a server the harness started (an embedded one, or a server command; its
        tags name it): a new port on every start, so the tags identify it, not the URL."""
        tags = self.get("tags")
        return isinstance(tags, Mapping) and str(tags.get("server", "")).startswith(STARTED_HERE)

    def resume_mismatches(self, new: RunIdentity) -> list[Mismatch]:
        """Every setting in which `new` (the run asked for now) differs from this (the interrupted) run.

        A server the harness started is identified by its tags (model, mode, command), not its URL; an external
        one by its URL. A setting the interrupted run did not record counts as a difference: it cannot be shown to
        match.
        """
        embedded = new.started_here
        old, now = dict(self.values), dict(new.values)
        mismatches = []
        for setting in IDENTITY:
            if (setting.key == "url" and embedded) or (setting.key == "tags" and not embedded):
                continue
            if _canonical(old.get(setting.key)) != _canonical(now.get(setting.key)):
                mismatches.append(Mismatch(setting.key, old.get(setting.key), now.get(setting.key)))
        return mismatches


def refuse_resume(source: str, recorded: JsonMapping, asked: JsonMapping) -> None:
    """A one-line BenchError when the run recorded in `source` (its `config`) is not the run asked for now."""
    mismatches = RunIdentity.of(recorded).resume_mismatches(RunIdentity.of(asked))
    if mismatches:
        raise BenchError(f"{source}: cannot resume: " + "; ".join(mismatch.message() for mismatch in mismatches))


def _canonical(value: JsonValue) -> str:
    """A value compared as JSON would write it (dict order and tuple/list differences ignored)."""
    return json.dumps(value, sort_keys=True, default=str)


__all__ = ["COMPARED_AS_ERROR", "COMPARED_AS_WARNING", "SELECTION_KEYS", "STARTED_HERE", "Mismatch", "RunIdentity",
           "refuse_resume"]
