"""Streaming latency percentiles per category."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.analysis._grouping import each_category_of
from bench.records import Run


def _percentiles(values: Sequence[float], prefix: str) -> dict[str, float | None]:
    array = np.asarray([value for value in values if value is not None and math.isfinite(value)], dtype=float)
    if array.size == 0:
        return {f"{prefix}_p{q}": None for q in (50, 90, 99)}
    p50, p90, p99 = np.percentile(array, [50, 90, 99])
    return {f"{prefix}_p50": float(p50), f"{prefix}_p90": float(p90), f"{prefix}_p99": float(p99)}


def stream_latency_stats(run: Run) -> list[dict[str, Any]]:
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
        tpot = [
            result.tpot_s if result.tpot_s is not None else
            (result.latency_s - result.ttft_s) / (result.completion_tokens - 1)
            for result in group
            if result.tpot_s is not None
            or (result.turns == 1 and result.completion_tokens > 1 and result.ttft_s is not None)
        ]
        decode = [result.client_decode_t_s for result in group if result.client_decode_t_s is not None]
        row: dict[str, Any] = {"category": category, "n": len(group)}
        row.update(_percentiles([result.ttft_s for result in group], "ttft"))
        row.update(_percentiles([gap for result in group for gap in result.itl_s], "itl"))
        row.update(_percentiles([gap for result in group for gap in result.itl_token_s], "itl_tok"))
        row.update(_percentiles(tpot, "tpot"))
        row.update(_percentiles([result.queue_wait_s for result in group if result.queue_wait_s is not None], "queue"))
        row.update(_percentiles([result.latency_s for result in group], "e2e"))
        row["client_decode_t_s"] = statistics.mean(decode) if decode else None
        rows.append(row)
    return rows
