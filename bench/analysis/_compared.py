"""The compared metrics of two runs, declared once: each one's metric, its per-pair ratio and the columns it reads.

The paired frame (`pair_runs`), the paired rows and their estimates (`paired_rows`), the Holm family, the outliers,
the direction check against the reference, the paired table and its JSON all loop over `paired_metrics()`, so a new
compared metric is its `Metric` in `_metrics.py` and its `PairedMetric` here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.analysis._metrics import DECODE_SPEEDUP, LATENCY_SPEEDUP, Metric

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, slots=True)
class PairedMetric:
    """A metric compared pair by pair: the speculative sample's value over its baseline twin's, as a speedup.

    `ratio` computes each pair's speedup from the paired frame (each arm's columns suffixed `_base` and `_spec`);
    `arm_column` is the per-arm column an outlying ratio is attributed by, `arm_sign` +1 when that column grows with
    the speedup (a rate) and -1 when it shrinks (a time); `reference` names the `ReferenceRow` field holding the
    reference's ratio of means of the same metric (None: the reference has none)."""

    metric: Metric
    name: str
    """The short name of its verdict, notes and outliers (`decode`: `decode_verdict`, `decode_mde`)."""
    ratio: Callable[[pd.DataFrame], pd.Series]
    arm_column: str
    arm_sign: float
    reference: str | None = None

    @property
    def key(self) -> str:
        """The metric's key: the paired frame's column and the prefix of its cells (`decode_speedup_low`)."""
        return self.metric.key

    @property
    def label(self) -> str:
        """The metric as a reader says it."""
        return self.metric.label


def decode_speedups(merged: pd.DataFrame) -> pd.Series:
    """Per pair: the ratio of llama.cpp's own per-turn decode rates ((n-1)/t_gen, `server_decode_t_s`) where both
    sides have it, else the ratio of the reference's per-sample rates (`pred_t_s`: server t/s or client decode)."""
    reference = merged["pred_t_s_spec"] / merged["pred_t_s_base"]
    if "server_decode_t_s_base" not in merged:
        return reference
    server = merged["server_decode_t_s_spec"].astype(float) / merged["server_decode_t_s_base"].astype(float)
    return server.where(server.notna() & (server > 0), reference)


def latency_speedups(merged: pd.DataFrame) -> pd.Series:
    """Per pair: the baseline's end-to-end latency over the speculative one's."""
    return merged["latency_s_base"] / merged["latency_s_spec"]


PAIRED_METRICS: tuple[PairedMetric, ...] = (
    PairedMetric(DECODE_SPEEDUP, "decode", decode_speedups, "pred_t_s", 1.0, "decode_speedup"),
    PairedMetric(LATENCY_SPEEDUP, "latency", latency_speedups, "latency_s", -1.0, "latency_speedup"),
)
"""Every compared metric, in the order the tables, JSON and notes show them; the first is the primary one."""


def paired_metrics() -> tuple[PairedMetric, ...]:
    """The compared metrics, looked up when called (a test appends one to `PAIRED_METRICS` for a whole run)."""
    return PAIRED_METRICS
