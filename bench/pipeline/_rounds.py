"""Sampling until decided, round by round: what one round carries to the next, and each arm's run so far."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from bench.analysis import with_record
from bench.records import Run, SampleResult, SequentialStop, ServerStart, summarize


@dataclass
class Rounds:
    """Each arm's results over the rounds so far, the sequential test's record, each arm's first server state."""

    done: dict[str, list[SampleResult]] = field(default_factory=dict)
    stop: SequentialStop | None = None
    """The sequential test's record so far (None before its first look)."""
    first_start: dict[str, ServerStart | None] = field(default_factory=dict)
    """Per arm, the server state its first round started from."""

    def seen(self, arm: str) -> set[str]:
        """The sample ids the rounds so far sent to `arm`."""
        return {result.id for result in self.done.get(arm, ())}

    def so_far(self, arm: str, last: Run, rounds: int, *, first_start: bool = False) -> Run:
        """The arm's run over the rounds so far, `last` (round `rounds`) added: the last round's settings and meta,
        every result, the sequential test's record when there is one (an interrupted run keeps it too), and with
        `first_start` the server state of its first round (rounds on servers that stay up are one run)."""
        done = self.done.setdefault(arm, [])
        done += list(last.results)
        results = tuple(done)
        meta = last.meta
        if first_start:
            meta = dataclasses.replace(last.info, server_start=self.first_start.setdefault(arm, last.info.server_start))
        whole = Run(config={**last.config, "limit": rounds}, selected_samples=len(results), results=results,
                    summary=tuple(summarize(results)), meta=meta)
        return with_record(whole, self.stop) if self.stop else whole
