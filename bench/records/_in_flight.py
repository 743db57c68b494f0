"""The load a run achieved: how many of its requests were in flight on average while any of them was.

The achieved in-flight mean is the time-weighted mean count of the run's own requests in flight over the time at
least one was: the sum of the requests' spans (first send to last byte) over the length of their union. It is
recomputed from the samples every time (the run file's `load` object records it for other readers, and is never
read back as truth): gaps where the arm waited for its partner's turn do not count, the drain at the end of each
turn does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from bench._types import JsonObject
from bench.records._results import SampleResult

LONGER_TURNS = "longer turns"
"""The drain's handling in interleaved runs: each turn holds several batches of requests at the asked concurrency,
so the drain at its end is a small share (no request is dropped from the estimate)."""


def request_spans(results: Iterable[SampleResult]) -> list[tuple[float, float]]:
    """(start, end) of each sample with a send time and a positive, finite latency."""
    spans = []
    for result in results:
        start, length = result.sent_s, result.latency_s
        if start is None or not math.isfinite(start) or not math.isfinite(length) or length <= 0:
            continue
        spans.append((start, start + length))
    return spans


def in_flight_mean(spans: Iterable[tuple[float, float]]) -> float | None:
    """The time-weighted mean count in flight while any is: summed span lengths over the length of their union."""
    ordered = sorted(spans)
    if not ordered:
        return None
    busy = 0.0
    total = 0.0
    current_start, current_end = ordered[0]
    for start, end in ordered:
        total += end - start
        if start > current_end:
            busy += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    busy += current_end - current_start
    return total / busy if busy > 0 else None


@dataclass(frozen=True, slots=True)
class Load:
    """A run's asked concurrency, the in-flight mean it achieved, and how its turns' drains were handled."""

    asked: int | None
    achieved: float | None
    requests: int
    turn_jobs: int | None = None
    drain: str | None = None

    def to_dict(self) -> JsonObject:
        """The run file's `load` object (written for other readers; speedbench recomputes it from the samples)."""
        return {"asked_concurrency": self.asked, "in_flight_mean": self.achieved, "requests": self.requests,
                "turn_jobs": self.turn_jobs, "drain": self.drain}


def run_load(results: Iterable[SampleResult], asked: int | None, turn_jobs: int | None = None) -> Load:
    """A run's load, from its samples' send times and latencies."""
    spans = request_spans(results)
    return Load(asked, in_flight_mean(spans), len(spans), turn_jobs, LONGER_TURNS if turn_jobs else None)
