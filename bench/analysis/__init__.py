"""Analysis of run records: the reference comparison, paired statistics, lossless checks and the CI gate."""

from bench.analysis._cache import ArmCache, CacheUse, CategoryCache, cache_use, served_from_cache
from bench.analysis._comparability import (
    ArmState,
    Comparability,
    Difference,
    check_comparable,
    check_regress_comparable,
    summary_only,
)
from bench.analysis._compare import Comparison, Estimate, ReferenceRow, StatsRow, compare
from bench.analysis._drafted import NOTHING_DRAFTED, Drafted, drafted_by_category
from bench.analysis._intervals import (
    ACCEPT_RATE,
    DECODE_RATE,
    DECODE_SPEEDUP,
    LATENCY,
    LATENCY_SPEEDUP,
    Metric,
    bootstrap_geomean_ci,
    bootstrap_ratio_of_sums,
    crossed_t_interval,
    geomean_t_intervals,
    t_quantile,
    verdict,
)
from bench.analysis._lossless import lossless_check
from bench.analysis._paired import first_difference, pair_runs, results_frame
from bench.analysis._reference import compare_runs, compare_summaries
from bench.analysis._regress import GateRow, GateSide, regress
from bench.analysis._stats import paired_stats
from bench.analysis._stream import stream_latency_stats
from bench.analysis._sweep import (
    THROUGHPUT_SPEEDUP,
    BestArm,
    Crossover,
    Sweep,
    SweepCell,
    batch_throughput,
    crossover,
    summarize_sweep,
    sweep_cell,
)
from bench.analysis._variation import repeat_cv

__all__ = [
    "ACCEPT_RATE",
    "DECODE_RATE",
    "DECODE_SPEEDUP",
    "LATENCY",
    "LATENCY_SPEEDUP",
    "NOTHING_DRAFTED",
    "THROUGHPUT_SPEEDUP",
    "ArmCache",
    "ArmState",
    "BestArm",
    "CacheUse",
    "CategoryCache",
    "Comparability",
    "Comparison",
    "Crossover",
    "Difference",
    "Drafted",
    "Estimate",
    "GateRow",
    "GateSide",
    "Metric",
    "ReferenceRow",
    "StatsRow",
    "Sweep",
    "SweepCell",
    "batch_throughput",
    "bootstrap_geomean_ci",
    "bootstrap_ratio_of_sums",
    "cache_use",
    "check_comparable",
    "check_regress_comparable",
    "compare",
    "compare_runs",
    "compare_summaries",
    "crossed_t_interval",
    "crossover",
    "drafted_by_category",
    "first_difference",
    "geomean_t_intervals",
    "lossless_check",
    "pair_runs",
    "paired_stats",
    "regress",
    "repeat_cv",
    "results_frame",
    "served_from_cache",
    "stream_latency_stats",
    "summarize_sweep",
    "summary_only",
    "sweep_cell",
    "t_quantile",
    "verdict",
]
