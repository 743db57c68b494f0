"""Streaming latency percentiles per category."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench._types import JsonObject
from bench.analysis._grouping import each_category_of
from bench.analysis._metrics import STREAM_PARTS, STREAM_QUANTILES
from bench.records import Run, SampleResult


@dataclass(frozen=True, slots=True)
class Percentiles:
    """The p50, p90 and p99 of one latency (seconds; None when no value was recorded)."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Percentiles:
        """The percentiles of the finite values given."""
        array = np.asarray([value for value in values if value is not None and math.isfinite(value)], dtype=float)
        if array.size == 0:
            return cls()
        p50, p90, p99 = np.percentile(array, [50, 90, 99])
        return cls(float(p50), float(p90), float(p99))


@dataclass(frozen=True, slots=True)
class StreamRow:
    """One category's streaming latencies (each at p50/p90/p99) and its mean client-side decode rate."""

    category: str
    n: int
    ttft: Percentiles
    itl: Percentiles
    itl_tok: Percentiles
    tpot: Percentiles
    queue: Percentiles
    e2e: Percentiles
    client_decode_t_s: float | None

    def as_cells(self) -> JsonObject:
        """The row's cells, keyed by `STREAM_METRICS` (`ttft_p50`, ..., `client_decode_t_s`)."""
        cells: JsonObject = {"category": self.category, "n": self.n}
        for name, *_ in STREAM_PARTS:
            part = getattr(self, name)
            cells.update({f"{name}_{quantile}": getattr(part, quantile) for quantile in STREAM_QUANTILES})
        cells["client_decode_t_s"] = self.client_decode_t_s
        return cells


def _tpot(group: Sequence[SampleResult]) -> list[float]:
    """Each sample's recorded time per output token (older run files: computed over single-turn samples)."""
    times = []
    for result in group:
        if result.tpot_s is not None:
            times.append(result.tpot_s)
        elif result.turns == 1 and result.completion_tokens > 1 and result.ttft_s is not None:
            times.append((result.latency_s - result.ttft_s) / (result.completion_tokens - 1))
    return times


def stream_latency_stats(run: Run) -> list[StreamRow]:
    """Streaming latencies per category: TTFT, inter-token latency, TPOT and end-to-end, each p50/p90/p99.

    TTFT is the first turn's; ITL pools every gap between content chunks; per-token ITL (`itl_tok`) pools
    each chunk's gap spread over the tokens it carried; TPOT is the recorded per-sample (end-to-end - TTFT) /
    (tokens - 1) (older run files: computed so over single-turn samples); queue wait is sent - scheduled;
    client decode t/s is averaged. Empty when the run was not streamed. Definitions: bench.render STREAM_DEFINITIONS.
    """
    ok = [result for result in run.latest if result.ok and result.ttft_s is not None]
    if not ok:
        return []
    rows = []
    for category, group in each_category_of(ok, lambda result: result.category):
        decode = [result.client_decode_t_s for result in group if result.client_decode_t_s is not None]
        rows.append(StreamRow(
            category, len(group),
            ttft=Percentiles.of([result.ttft_s for result in group]),
            itl=Percentiles.of([gap for result in group for gap in result.itl_s]),
            itl_tok=Percentiles.of([gap for result in group for gap in result.itl_token_s]),
            tpot=Percentiles.of(_tpot(group)),
            queue=Percentiles.of([result.queue_wait_s for result in group if result.queue_wait_s is not None]),
            e2e=Percentiles.of([result.latency_s for result in group]),
            client_decode_t_s=statistics.mean(decode) if decode else None,
        ))
    return rows
