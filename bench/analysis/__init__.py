"""Analysis of run records: the reference comparison, paired statistics, lossless checks and the CI gate.

Each name is imported from its module on first use, so a caller that needs only the request timings (`run`'s
summary) does not load pandas, which the comparison modules use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_MODULES: dict[str, tuple[str, ...]] = {
    "_cache": ("CACHED_SHARE", "ArmCache", "CacheUse", "CategoryCache", "cache_use", "served_from_cache"),
    "_change_points": ("asv_change_points", "otava_change_points", "weighted_segmentation"),
    "_comparability": (
        "ERROR", "NOTHING_CHECKED", "WARNING", "ArmState", "Comparability", "Difference", "check_comparable",
        "check_regress_comparable", "summary_only",
    ),
    "_compare": ("Comparison", "Family", "ReferenceRow", "StatsRow", "compare", "family_estimates", "family_size"),
    "_estimate": ("Estimate", "look_estimate"),
    "_compared": ("PAIRED_METRICS", "PairedMetric", "paired_metrics"),
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
        "AttainmentRow", "Goodput", "Interval", "RequestTiming", "Slo", "Throughput", "attainment_interval",
        "goodput", "parse_slo", "request_timing", "request_timings", "throughput", "wilson_interval",
    ),
    "_paired_goodput": ("PairedGoodput", "paired_goodput"),
    "_history": (
        "DEFAULT_TREND_WINDOW", "HISTORY_METRIC", "IMPROVEMENT", "REGRESSION", "ChangePoint",
        "HistoryAnalysis", "Regression", "Series", "SeriesPoint", "Trend", "WindowReference", "analyse_history",
        "build_series", "history_gate", "history_rows", "open_regressions", "recent_trend", "window_references",
    ),
    "_history_intervals": ("checked_intervals", "expected_interval"),
    "_intervals": (
        "SPEED_VERDICT_WORDS", "LogMean", "accept_rate_log_mean", "bootstrap_geomean_ci", "bootstrap_ratio_of_sums",
        "crossed_log_mean", "crossed_t_interval", "geomean_t_intervals", "log_mean", "repeat_log_mean", "t_cdf",
        "t_quantile", "verdict", "yuen_log_mean",
    ),
    "_metrics": (
        "ACCEPTANCE_LENGTH", "ACCEPT_RATE", "ACHIEVED_RATE", "ATTAINMENT", "ATTAINMENT_DIFFERENCE", "CATEGORY",
        "DECODE_RATE", "DECODE_SPEEDUP", "DRAFTED", "FORMATS", "GOODPUT", "GOODPUT_RATIO", "LATENCY",
        "LATENCY_SPEEDUP", "LATENCY_SPEEDUP_SCHEDULED", "Metric", "OUTPUT_THROUGHPUT", "REFERENCE_METRICS", "REPEATS",
        "REPEAT_CV_METRICS", "REQUEST_THROUGHPUT", "SAMPLES", "SPEEDUP_CV_METRICS", "STEP_COST", "STREAM_METRICS",
        "STREAM_PARTS", "STREAM_QUANTILES", "SUMMARY_METRICS", "THROUGHPUT_SPEEDUP", "TTFT_SPEEDUP_SCHEDULED",
        "metric_cells",
    ),
    "_lossless": (
        "NEAR_TIE_MARGIN", "NEAR_TIE_STEPS", "Divergence", "LosslessRow", "Resolution", "divergence",
        "estimate_resolution", "lossless_check", "run_margins",
    ),
    "_paired": ("first_difference", "pair_runs", "paired_log_mean", "results_frame"),
    "_reference": ("compare_runs", "compare_summaries"),
    "_regress": ("INCONCLUSIVE", "NON_INFERIOR", "REGRESSED", "Gate", "GateRow", "GateSide", "gate", "gate_frames",
                 "lost_samples", "regress"),
    "_sequential": (
        "SEQUENTIAL_METHOD", "Decided", "Look", "SequentialTest", "overall_decode", "recorded_stop",
        "sample_rounds", "sample_until_decided", "spent_alpha", "stopping_look", "verified_stop", "with_record",
    ),
    "_stats": ("paired_stats",),
    "_stratified": ("BLOCKED_METHOD", "DF_RULES", "ONE_SAMPLE_RULE", "ONE_SAMPLE_RULES", "STRATIFIED_METHOD",
                    "stratified_block_mean", "stratified_block_ratio", "stratified_log_mean"),
    "_stream": ("Percentiles", "StreamRow", "stream_latency_stats"),
    "_sweep": ("BestArm", "Crossover", "Sweep", "SweepCell", "batch_throughput", "best_arms", "cell_family",
               "crossover", "summarize_sweep", "sweep_cell"),
    "_thinking": (
        "EMPTY_ANSWER_FLAG", "Budget", "ThinkingRow", "budget_exhausted", "budget_line", "fitting_osl",
        "segment_steps", "step_starts", "thinking_rows", "thinking_tokens", "tokens_per_step",
    ),
    "_traffic": (
        "DEFAULT_SLO_TARGET", "PairedSpeedup", "RateLevel", "RateSweep", "SloCapacity", "TrafficComparison",
        "compare_traffic", "paired_speedups", "rate_sweep", "slo_capacity",
    ),
    "_variation": ("RepeatCv", "SpeedupCv", "repeat_cv", "speedup_repeat_cv"),
}
"""The names each module of the package exports."""

_HOME = {name: f"bench.analysis.{module}" for module, names in _MODULES.items() for name in names}
__all__ = sorted(_HOME)


# The same names for a type checker, which cannot follow the lazy import below.
if TYPE_CHECKING:
    from bench.analysis._achieved import (
        ARMS_APART as ARMS_APART,
        LevelLoad as LevelLoad,
        level_load as level_load,
    )
    from bench.analysis._cache import (
        CACHED_SHARE as CACHED_SHARE,
        ArmCache as ArmCache,
        CacheUse as CacheUse,
        CategoryCache as CategoryCache,
        cache_use as cache_use,
        served_from_cache as served_from_cache,
    )
    from bench.analysis._change_points import (
        asv_change_points as asv_change_points,
        otava_change_points as otava_change_points,
        weighted_segmentation as weighted_segmentation,
    )
    from bench.analysis._comparability import (
        ERROR as ERROR,
        NOTHING_CHECKED as NOTHING_CHECKED,
        WARNING as WARNING,
        ArmState as ArmState,
        Comparability as Comparability,
        Difference as Difference,
        check_comparable as check_comparable,
        check_regress_comparable as check_regress_comparable,
        summary_only as summary_only,
    )
    from bench.analysis._compare import (
        Comparison as Comparison,
        Family as Family,
        ReferenceRow as ReferenceRow,
        StatsRow as StatsRow,
        compare as compare,
        family_estimates as family_estimates,
        family_size as family_size,
    )
    from bench.analysis._compared import (
        PAIRED_METRICS as PAIRED_METRICS,
        PairedMetric as PairedMetric,
        paired_metrics as paired_metrics,
    )
    from bench.analysis._drafted import (
        NOTHING_DRAFTED as NOTHING_DRAFTED,
        Drafted as Drafted,
        drafted_by_category as drafted_by_category,
    )
    from bench.analysis._drafter_state import (
        DrafterState as DrafterState,
        drafter_state as drafter_state,
        first_repeat as first_repeat,
        recorded_states as recorded_states,
        state_warnings as state_warnings,
    )
    from bench.analysis._estimate import (
        Estimate as Estimate,
        look_estimate as look_estimate,
    )
    from bench.analysis._explain import (
        RECONCILE_TOLERANCE as RECONCILE_TOLERANCE,
        RequestAcceptance as RequestAcceptance,
        SpeedupParts as SpeedupParts,
        StepSplit as StepSplit,
        explain_row as explain_row,
        explain_runs as explain_runs,
        joint_and_conditional as joint_and_conditional,
    )
    from bench.analysis._family import (
        DEFAULT_TARGET_EFFECT as DEFAULT_TARGET_EFFECT,
        FAMILY_ALPHA as FAMILY_ALPHA,
        HOLM_METHOD as HOLM_METHOD,
        OUTLIER_DISTANCE as OUTLIER_DISTANCE,
        POWER as POWER,
        Outlier as Outlier,
        detectable_log_effect as detectable_log_effect,
        family_weights as family_weights,
        flag_outliers as flag_outliers,
        holm_levels as holm_levels,
        samples_needed as samples_needed,
        weighted_holm_levels as weighted_holm_levels,
    )
    from bench.analysis._goodput import (
        AttainmentRow as AttainmentRow,
        Goodput as Goodput,
        Interval as Interval,
        RequestTiming as RequestTiming,
        Slo as Slo,
        Throughput as Throughput,
        attainment_interval as attainment_interval,
        goodput as goodput,
        parse_slo as parse_slo,
        request_timing as request_timing,
        request_timings as request_timings,
        throughput as throughput,
        wilson_interval as wilson_interval,
    )
    from bench.analysis._grouping import (
        ArmPair as ArmPair,
    )
    from bench.analysis._history import (
        DEFAULT_TREND_WINDOW as DEFAULT_TREND_WINDOW,
        HISTORY_METRIC as HISTORY_METRIC,
        IMPROVEMENT as IMPROVEMENT,
        REGRESSION as REGRESSION,
        ChangePoint as ChangePoint,
        HistoryAnalysis as HistoryAnalysis,
        Regression as Regression,
        Series as Series,
        SeriesPoint as SeriesPoint,
        Trend as Trend,
        WindowReference as WindowReference,
        analyse_history as analyse_history,
        build_series as build_series,
        history_gate as history_gate,
        history_rows as history_rows,
        open_regressions as open_regressions,
        recent_trend as recent_trend,
        window_references as window_references,
    )
    from bench.analysis._history_intervals import (
        checked_intervals as checked_intervals,
        expected_interval as expected_interval,
    )
    from bench.analysis._intervals import (
        SPEED_VERDICT_WORDS as SPEED_VERDICT_WORDS,
        LogMean as LogMean,
        accept_rate_log_mean as accept_rate_log_mean,
        bootstrap_geomean_ci as bootstrap_geomean_ci,
        bootstrap_ratio_of_sums as bootstrap_ratio_of_sums,
        crossed_log_mean as crossed_log_mean,
        crossed_t_interval as crossed_t_interval,
        geomean_t_intervals as geomean_t_intervals,
        log_mean as log_mean,
        repeat_log_mean as repeat_log_mean,
        t_cdf as t_cdf,
        t_quantile as t_quantile,
        verdict as verdict,
        yuen_log_mean as yuen_log_mean,
    )
    from bench.analysis._lossless import (
        NEAR_TIE_MARGIN as NEAR_TIE_MARGIN,
        NEAR_TIE_STEPS as NEAR_TIE_STEPS,
        Divergence as Divergence,
        LosslessRow as LosslessRow,
        Resolution as Resolution,
        divergence as divergence,
        estimate_resolution as estimate_resolution,
        lossless_check as lossless_check,
        run_margins as run_margins,
    )
    from bench.analysis._metrics import (
        ACCEPT_RATE as ACCEPT_RATE,
        ACCEPTANCE_LENGTH as ACCEPTANCE_LENGTH,
        ACHIEVED_RATE as ACHIEVED_RATE,
        ATTAINMENT as ATTAINMENT,
        ATTAINMENT_DIFFERENCE as ATTAINMENT_DIFFERENCE,
        CATEGORY as CATEGORY,
        DECODE_RATE as DECODE_RATE,
        DECODE_SPEEDUP as DECODE_SPEEDUP,
        DRAFTED as DRAFTED,
        FORMATS as FORMATS,
        GOODPUT as GOODPUT,
        GOODPUT_RATIO as GOODPUT_RATIO,
        LATENCY as LATENCY,
        LATENCY_SPEEDUP as LATENCY_SPEEDUP,
        LATENCY_SPEEDUP_SCHEDULED as LATENCY_SPEEDUP_SCHEDULED,
        OUTPUT_THROUGHPUT as OUTPUT_THROUGHPUT,
        REFERENCE_METRICS as REFERENCE_METRICS,
        REPEAT_CV_METRICS as REPEAT_CV_METRICS,
        REPEATS as REPEATS,
        REQUEST_THROUGHPUT as REQUEST_THROUGHPUT,
        SAMPLES as SAMPLES,
        SPEEDUP_CV_METRICS as SPEEDUP_CV_METRICS,
        STEP_COST as STEP_COST,
        STREAM_METRICS as STREAM_METRICS,
        STREAM_PARTS as STREAM_PARTS,
        STREAM_QUANTILES as STREAM_QUANTILES,
        SUMMARY_METRICS as SUMMARY_METRICS,
        THROUGHPUT_SPEEDUP as THROUGHPUT_SPEEDUP,
        TTFT_SPEEDUP_SCHEDULED as TTFT_SPEEDUP_SCHEDULED,
        Metric as Metric,
        metric_cells as metric_cells,
    )
    from bench.analysis._paired import (
        first_difference as first_difference,
        pair_runs as pair_runs,
        paired_log_mean as paired_log_mean,
        results_frame as results_frame,
    )
    from bench.analysis._paired_goodput import (
        PairedGoodput as PairedGoodput,
        paired_goodput as paired_goodput,
    )
    from bench.analysis._predict import (
        ConfigParts as ConfigParts,
        Prediction as Prediction,
        default_budget as default_budget,
        fit_prediction as fit_prediction,
        plan_next as plan_next,
        pooled_plain_cost as pooled_plain_cost,
        with_plain_steps as with_plain_steps,
    )
    from bench.analysis._reference import (
        compare_runs as compare_runs,
        compare_summaries as compare_summaries,
    )
    from bench.analysis._regress import (
        INCONCLUSIVE as INCONCLUSIVE,
        NON_INFERIOR as NON_INFERIOR,
        REGRESSED as REGRESSED,
        Gate as Gate,
        GateRow as GateRow,
        GateSide as GateSide,
        gate as gate,
        gate_frames as gate_frames,
        lost_samples as lost_samples,
        regress as regress,
    )
    from bench.analysis._sequential import (
        SEQUENTIAL_METHOD as SEQUENTIAL_METHOD,
        Decided as Decided,
        Look as Look,
        SequentialTest as SequentialTest,
        overall_decode as overall_decode,
        recorded_stop as recorded_stop,
        sample_rounds as sample_rounds,
        sample_until_decided as sample_until_decided,
        spent_alpha as spent_alpha,
        stopping_look as stopping_look,
        verified_stop as verified_stop,
        with_record as with_record,
    )
    from bench.analysis._stats import (
        paired_stats as paired_stats,
    )
    from bench.analysis._step_cost import (
        BEND_TOLERANCE as BEND_TOLERANCE,
        NOT_LINEAR as NOT_LINEAR,
        StepCostFit as StepCostFit,
        monotone_curve as monotone_curve,
        not_linear_at as not_linear_at,
        step_cost_bend as step_cost_bend,
    )
    from bench.analysis._stratified import (
        BLOCKED_METHOD as BLOCKED_METHOD,
        DF_RULES as DF_RULES,
        ONE_SAMPLE_RULE as ONE_SAMPLE_RULE,
        ONE_SAMPLE_RULES as ONE_SAMPLE_RULES,
        STRATIFIED_METHOD as STRATIFIED_METHOD,
        stratified_block_mean as stratified_block_mean,
        stratified_block_ratio as stratified_block_ratio,
        stratified_log_mean as stratified_log_mean,
    )
    from bench.analysis._stream import (
        Percentiles as Percentiles,
        StreamRow as StreamRow,
        stream_latency_stats as stream_latency_stats,
    )
    from bench.analysis._sweep import (
        BestArm as BestArm,
        Crossover as Crossover,
        Sweep as Sweep,
        SweepCell as SweepCell,
        batch_throughput as batch_throughput,
        best_arms as best_arms,
        cell_family as cell_family,
        crossover as crossover,
        summarize_sweep as summarize_sweep,
        sweep_cell as sweep_cell,
    )
    from bench.analysis._thinking import (
        EMPTY_ANSWER_FLAG as EMPTY_ANSWER_FLAG,
        Budget as Budget,
        ThinkingRow as ThinkingRow,
        budget_exhausted as budget_exhausted,
        budget_line as budget_line,
        fitting_osl as fitting_osl,
        segment_steps as segment_steps,
        step_starts as step_starts,
        thinking_rows as thinking_rows,
        thinking_tokens as thinking_tokens,
        tokens_per_step as tokens_per_step,
    )
    from bench.analysis._traffic import (
        DEFAULT_SLO_TARGET as DEFAULT_SLO_TARGET,
        PairedSpeedup as PairedSpeedup,
        RateLevel as RateLevel,
        RateSweep as RateSweep,
        SloCapacity as SloCapacity,
        TrafficComparison as TrafficComparison,
        compare_traffic as compare_traffic,
        paired_speedups as paired_speedups,
        rate_sweep as rate_sweep,
        slo_capacity as slo_capacity,
    )
    from bench.analysis._tune import (
        LLAMACPP_DRAFT_MODEL_TYPES as LLAMACPP_DRAFT_MODEL_TYPES,
        LLAMACPP_LENGTH_FLAGS as LLAMACPP_LENGTH_FLAGS,
        NOT_SEPARABLE as NOT_SEPARABLE,
        ConfigVerdict as ConfigVerdict,
        Measured as Measured,
        Pick as Pick,
        PredictionCheck as PredictionCheck,
        Tune as Tune,
        TuneRow as TuneRow,
        comparison_scopes as comparison_scopes,
        decide as decide,
        estimate_from_interval as estimate_from_interval,
        llamacpp_flags as llamacpp_flags,
        scope_prediction as scope_prediction,
        summarize_tune as summarize_tune,
        tune_rows as tune_rows,
    )
    from bench.analysis._tune_scopes import (
        NOT_MEASURED as NOT_MEASURED,
        ScopeProof as ScopeProof,
        cover_scopes as cover_scopes,
        predicted_best as predicted_best,
        prove as prove,
        wanted_for_proof as wanted_for_proof,
    )
    from bench.analysis._variation import (
        RepeatCv as RepeatCv,
        SpeedupCv as SpeedupCv,
        repeat_cv as repeat_cv,
        speedup_repeat_cv as speedup_repeat_cv,
    )


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
