"""Analysis of run records: the reference comparison, paired statistics, lossless checks and the CI gate.

Each name is imported from its module on first use, so a caller that needs only the request timings (`run`'s
summary) does not load pandas, which the comparison modules use.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES: dict[str, tuple[str, ...]] = {
    "_cache": ("CACHED_SHARE", "ArmCache", "CacheUse", "CategoryCache", "cache_use", "served_from_cache"),
    "_change_points": (
        "asv_change_points", "otava_change_points", "weighted_segmentation",
    ),
    "_comparability": (
        "ERROR", "NOTHING_CHECKED", "WARNING", "ArmState", "Comparability", "Difference", "check_comparable",
        "check_regress_comparable", "summary_only",
    ),
    "_compare": (
        "Comparison", "Estimate", "Family", "ReferenceRow", "StatsRow", "compare", "family_estimates",
        "family_size",
    ),
    "_grouping": ("ArmPair",),
    "_explain": (
        "RECONCILE_TOLERANCE", "RequestAcceptance", "SpeedupParts", "StepSplit", "explain_row", "explain_runs",
        "joint_and_conditional",
    ),
    "_step_cost": ("BEND_TOLERANCE", "NOT_LINEAR", "StepCostFit", "monotone_curve", "not_linear_at", "step_cost_bend"),
    "_achieved": ("ARMS_APART", "LevelLoad", "level_load"),
    "_tune_scopes": ("NOT_MEASURED", "ScopeProof", "cover_scopes", "predicted_best", "prove", "wanted_for_proof"),
    "_predict": ("ConfigParts", "Prediction", "default_budget", "fit_prediction", "plan_next", "pooled_plain_cost",
                 "with_plain_steps"),
    "_tune": (
        "LLAMACPP_DRAFT_MODEL_TYPES", "LLAMACPP_LENGTH_FLAGS", "NOT_SEPARABLE", "ConfigVerdict", "Measured", "Pick",
        "PredictionCheck", "Tune", "TuneRow", "decide", "comparison_scopes", "estimate_from_interval",
        "llamacpp_flags", "scope_prediction", "summarize_tune", "tune_rows",
    ),
    "_drafted": ("NOTHING_DRAFTED", "Drafted", "drafted_by_category"),
    "_drafter_state": ("DrafterState", "drafter_state", "first_repeat", "recorded_states", "state_warnings"),
    "_family": (
        "DEFAULT_TARGET_EFFECT", "FAMILY_ALPHA", "HOLM_METHOD", "OUTLIER_DISTANCE", "POWER", "Outlier",
        "detectable_log_effect", "family_weights", "flag_outliers", "holm_levels", "samples_needed",
        "weighted_holm_levels",
    ),
    "_goodput": (
        "ACHIEVED_RATE", "ATTAINMENT", "ATTAINMENT_DIFFERENCE", "GOODPUT", "GOODPUT_RATIO", "OUTPUT_THROUGHPUT",
        "REQUEST_THROUGHPUT", "AttainmentRow", "Goodput", "Interval", "RequestTiming", "Slo", "Throughput",
        "attainment_interval", "goodput", "parse_slo", "request_timing", "request_timings", "throughput",
        "wilson_interval",
    ),
    "_paired_goodput": ("PairedGoodput", "paired_goodput"),
    "_history": (
        "DEFAULT_TREND_WINDOW", "DRAFTED_SHARE", "HISTORY_METRIC", "IMPROVEMENT", "REGRESSION", "ChangePoint",
        "HistoryAnalysis", "Regression", "Series", "SeriesPoint", "Trend", "WindowReference", "analyse_history",
        "build_series", "history_gate", "history_rows", "open_regressions", "recent_trend", "window_references",
    ),
    "_history_intervals": ("checked_intervals", "expected_interval"),
    "_intervals": (
        "SPEED_VERDICT_WORDS", "LogMean",
        "accept_rate_log_mean", "bootstrap_geomean_ci", "bootstrap_ratio_of_sums", "crossed_log_mean",
        "crossed_t_interval", "geomean_t_intervals", "log_mean", "repeat_log_mean", "t_cdf", "t_quantile", "verdict",
        "yuen_log_mean",
    ),
    "_metrics": (
        "ACCEPTANCE_LENGTH", "ACCEPT_RATE", "CATEGORY", "DECODE_RATE", "DECODE_SPEEDUP", "DRAFTED", "FORMATS",
        "LATENCY", "LATENCY_SPEEDUP", "Metric", "REFERENCE_METRICS", "REPEATS", "REPEAT_CV_METRICS", "SAMPLES",
        "SPEEDUP_CV_METRICS", "STEP_COST", "STREAM_METRICS", "STREAM_PARTS", "STREAM_QUANTILES", "SUMMARY_METRICS",
        "metric_cells",
    ),
    "_lossless": (
        "NEAR_TIE_MARGIN", "NEAR_TIE_STEPS", "Divergence", "LosslessRow", "Resolution", "divergence",
        "estimate_resolution", "lossless_check",
        "run_margins",
    ),
    "_paired": ("first_difference", "pair_runs", "paired_log_mean", "results_frame"),
    "_reference": ("compare_runs", "compare_summaries"),
    "_regress": (
        "INCONCLUSIVE", "NON_INFERIOR", "REGRESSED", "Gate", "GateRow", "GateSide", "gate",
        "gate_frames", "lost_samples", "regress",
    ),
    "_sequential": (
        "SEQUENTIAL_METHOD", "Decided", "Look", "SequentialTest", "look_estimate", "overall_decode", "recorded_stop",
        "sample_rounds", "sample_until_decided", "spent_alpha", "stopping_look", "verified_stop", "with_record",
    ),
    "_stats": ("paired_stats",),
    "_stratified": ("BLOCKED_METHOD", "DF_RULES", "ONE_SAMPLE_RULE", "ONE_SAMPLE_RULES", "STRATIFIED_METHOD",
                    "stratified_block_mean", "stratified_block_ratio", "stratified_log_mean"),
    "_stream": ("Percentiles", "StreamRow", "stream_latency_stats"),
    "_sweep": (
        "THROUGHPUT_SPEEDUP", "BestArm", "Crossover", "Sweep", "SweepCell", "batch_throughput", "best_arms",
        "cell_family", "crossover", "summarize_sweep", "sweep_cell",
    ),
    "_thinking": (
        "EMPTY_ANSWER_FLAG", "Budget", "ThinkingRow", "budget_exhausted", "budget_line", "fitting_osl",
        "segment_steps", "step_starts", "thinking_rows", "thinking_tokens", "tokens_per_step",
    ),
    "_traffic": (
        "DECODE_SPEEDUP_PAIRED", "DEFAULT_SLO_TARGET", "LATENCY_SPEEDUP_SCHEDULED", "TTFT_SPEEDUP_SCHEDULED",
        "PairedSpeedup", "RateLevel", "RateSweep", "SloCapacity", "TrafficComparison", "compare_traffic",
        "paired_speedups", "rate_sweep", "slo_capacity",
    ),
    "_variation": ("RepeatCv", "SpeedupCv", "repeat_cv", "speedup_repeat_cv"),
}
"""The names each module of the package exports."""

_HOME = {name: f"bench.analysis.{module}" for module, names in _MODULES.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    """Import the module that defines `name` on first use."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'bench.analysis' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    """The package's public names."""
    return __all__
