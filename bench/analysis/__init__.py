"""Analysis of run records: the reference comparison, paired statistics, lossless checks and the CI gate."""

from bench.analysis._intervals import (
    ACCEPT_RATE,
    DECODE_RATE,
    DECODE_SPEEDUP,
    LATENCY,
    LATENCY_SPEEDUP,
    Metric,
    bootstrap_geomean_ci,
    crossed_t_interval,
    geomean_t_intervals,
    t_quantile,
    verdict,
)
from bench.analysis._lossless import lossless_check
from bench.analysis._paired import first_difference, pair_runs, results_frame
from bench.analysis._reference import compare_runs, compare_summaries
from bench.analysis._regress import regress, regress_markdown, regress_text
from bench.analysis._stats import config_differences, paired_stats
from bench.analysis._stream import stream_latency_stats
from bench.analysis._variation import repeat_cv

__all__ = [
    "ACCEPT_RATE",
    "DECODE_RATE",
    "DECODE_SPEEDUP",
    "LATENCY",
    "LATENCY_SPEEDUP",
    "Metric",
    "bootstrap_geomean_ci",
    "compare_runs",
    "compare_summaries",
    "config_differences",
    "crossed_t_interval",
    "first_difference",
    "geomean_t_intervals",
    "lossless_check",
    "pair_runs",
    "paired_stats",
    "regress",
    "regress_markdown",
    "regress_text",
    "repeat_cv",
    "results_frame",
    "stream_latency_stats",
    "t_quantile",
    "verdict",
]
