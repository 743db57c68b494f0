"""Which draft length to ship: the proven pick per scope and concurrency, tune.json rows and the schedules.

The pick (per scope: a category or overall, at one concurrency) is one family of tests at 5% (Holm): each
configuration against the baseline, and the leader (highest measured speedup) against each other configuration.
The leader is picked when it is shown better than every other; when some cannot be told apart from it, the
smallest draft length among them, with the margin the tie was shown within, or "not separable at this n"; 0 (do
not speculate) when no configuration is shown faster than the baseline. The prediction model: `_predict`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeGuard

import numpy as np

from bench._constants import DEFAULT_THRESHOLD, MIN_SAMPLES_FOR_CI, OVERALL
from bench._types import JsonObject
from bench.analysis._achieved import LevelLoad, level_load
from bench.analysis._compare import Comparison
from bench.analysis._family import FAMILY_ALPHA, holm_levels
from bench.analysis._grouping import each_category
from bench.analysis._intervals import LogMean, log_mean, t_quantile, verdict
from bench.analysis._metrics import DECODE_SPEEDUP
from bench.analysis._paired import pair_runs
from bench.analysis._predict import ConfigParts, Prediction, with_plain_steps
from bench.analysis._tune_scopes import ScopeProof, prove

NOT_SEPARABLE = "not separable at this n"


@dataclass(frozen=True, slots=True)
class Measured:
    """One configuration measured in one scope: per-sample log decode speedups over its interleaved baseline.

    `estimate`, when given, is the analysis's own estimate against the baseline for the scope (the comparison's
    row, e.g. a stratified overall); otherwise Student's t over `logs`.
    """

    draft_max: int
    logs: Mapping[str, float]
    estimate: LogMean | None = None

    def against_baseline(self) -> LogMean | None:
        """The estimate of the configuration's log speedup over the baseline."""
        return self.estimate if self.estimate is not None else log_mean(list(self.logs.values()))


@dataclass(frozen=True, slots=True)
class ConfigVerdict:
    """One configuration in one scope: measured speedup, its interval at its family level, and the verdict."""

    draft_max: int
    measured: float
    low: float
    high: float
    verdict: str
    n: int


@dataclass(frozen=True, slots=True)
class Pick:
    """The configuration to ship in one scope at one concurrency (0: do not speculate; None: undecided)."""

    scope: str
    concurrency: int
    draft_max: int | None
    reason: str
    rows: tuple[ConfigVerdict, ...]
    leader: int | None = None
    margin: float | None = None
    """The tie's shown margin (relative): the picked configuration is within it of the leader."""
    tied: tuple[int, ...] = ()
    """The leaders the test cannot tell apart (the leader among them), when it picked the smallest of them."""


def estimate_from_interval(
    point: float, low: float, high: float, confidence: float, df: float, n: int
) -> LogMean | None:
    """The log-scale estimate behind a symmetric (on logs) interval: how an analysis row is read back as a test."""
    if not all(math.isfinite(value) and value > 0 for value in (point, low, high)) or n < 2:
        return None
    dof = df if math.isfinite(df) and df > 0 else n - 1.0
    half = (math.log(high) - math.log(low)) / 2.0
    quantile = t_quantile(1.0 - (1.0 - confidence) / 2.0, dof)
    return LogMean(math.log(point), half / quantile if quantile > 0 else math.nan, dof, n)


def _differences(first: Measured, second: Measured) -> LogMean | None:
    """log(first / second) per shared sample, as one paired estimate."""
    shared = [key for key in first.logs if key in second.logs]
    return log_mean([first.logs[key] - second.logs[key] for key in shared])


def _testable(value: LogMean | None) -> TypeGuard[LogMean]:
    return value is not None and value.n >= MIN_SAMPLES_FOR_CI and math.isfinite(value.se) and value.se > 0


def decide(
    scopes: Mapping[tuple[str, int], Sequence[Measured]],
    *,
    alpha: float = FAMILY_ALPHA,
    threshold: float = DEFAULT_THRESHOLD,
    tie_margin: float = DEFAULT_THRESHOLD,
) -> dict[tuple[str, int], Pick]:
    """One pick per (scope, concurrency); every test of every scope given is one Holm family at `alpha`."""
    tests: list[tuple[tuple[str, int], str, int, LogMean]] = []
    leaders: dict[tuple[str, int], Measured | None] = {}
    for key, configs in scopes.items():
        points = {config.draft_max: config.against_baseline() for config in configs}
        means = {draft_max: point.mean for draft_max, point in points.items() if point is not None}
        leader = max((config for config in configs if config.draft_max in means),
                     key=lambda config: (means[config.draft_max], -config.draft_max), default=None)
        leaders[key] = leader
        for config in configs:
            estimate = points[config.draft_max]
            if _testable(estimate):
                tests.append((key, "baseline", config.draft_max, estimate))
            if leader is not None and config is not leader:
                difference = _differences(leader, config)
                if _testable(difference):
                    tests.append((key, "leader", config.draft_max, difference))
    levels = holm_levels([test[3].p_value() for test in tests], alpha)
    level_of = {(test[0], test[1], test[2]): level for test, level in zip(tests, levels, strict=True)}
    estimate_of = {(test[0], test[1], test[2]): test[3] for test in tests}
    return {key: _pick(key, configs, leaders[key], level_of, estimate_of, threshold=threshold,
                       tie_margin=tie_margin)
            for key, configs in scopes.items()}


def _pick(
    key: tuple[str, int], configs: Sequence[Measured], leader: Measured | None,
    level_of: Mapping[tuple[tuple[str, int], str, int], float],
    estimate_of: Mapping[tuple[tuple[str, int], str, int], LogMean], *, threshold: float, tie_margin: float,
) -> Pick:
    scope, concurrency = key
    rows, faster = [], []
    for config in sorted(configs, key=lambda item: item.draft_max):
        test = (key, "baseline", config.draft_max)
        estimate = config.against_baseline()
        if test in level_of and estimate is not None:
            point, low, high = estimate.interval(1.0 - level_of[test])
            word = verdict(point, low, high, DECODE_SPEEDUP, threshold)
            word = {"better": "faster", "worse": "slower"}.get(word, word)
        else:
            point = math.exp(estimate.mean) if estimate is not None else math.nan
            low = high = math.nan
            word = "not enough data"
        rows.append(ConfigVerdict(config.draft_max, point, low, high, word, estimate.n if estimate else 0))
        if word == "faster":
            faster.append(config.draft_max)
    done = tuple(rows)
    if not any(row.verdict != "not enough data" for row in rows):
        return Pick(scope, concurrency, None, "not enough data to test any configuration", done)
    if not faster:
        return Pick(scope, concurrency, 0, "no configuration is shown faster than the baseline: do not speculate",
                    done)
    assert leader is not None
    tied: list[int] = [leader.draft_max]
    shown: list[int] = []
    for config in configs:
        test = (key, "leader", config.draft_max)
        if config is leader:
            continue
        if test in level_of:
            _, low, _ = estimate_of[test].interval(1.0 - level_of[test])
            (shown if low > 1.0 else tied).append(config.draft_max)
        else:
            tied.append(config.draft_max)
    candidates = sorted(k for k in tied if k in faster)
    if not candidates:
        return Pick(scope, concurrency, leader.draft_max, f"draft_max={leader.draft_max} is shown better than the "
                    "other configurations", done, leader=leader.draft_max)
    chosen = candidates[0]
    if len(candidates) == 1 and len(tied) > 1:
        slower = ", ".join(str(k) for k in sorted(tied) if k != chosen)
        return Pick(scope, concurrency, chosen, f"draft_max={chosen}: the leaders it cannot be told from ({slower}) "
                    "are not shown faster than the baseline", done, leader=leader.draft_max, tied=(chosen,))
    if len(tied) == 1:
        return Pick(scope, concurrency, chosen, f"draft_max={chosen} is shown better than each other "
                    "configuration", done, leader=leader.draft_max)
    margin = _tie_margin(key, leader.draft_max, chosen, tied, level_of, estimate_of)
    others = ", ".join(str(k) for k in candidates if k != chosen) or str(leader.draft_max)
    if margin is not None and margin <= tie_margin:
        reason = (f"draft_max={chosen}, the smallest of the leaders it cannot be told from ({others}), shown within "
                  f"{margin:.1%} of draft_max={leader.draft_max}")
    else:
        reason = f"draft_max={chosen}, the smallest of the leaders ({others}): {NOT_SEPARABLE}"
        margin = None
    return Pick(scope, concurrency, chosen, reason, done, leader=leader.draft_max, margin=margin,
                tied=tuple(sorted(k for k in tied if k in faster)))


def _tie_margin(
    key: tuple[str, int], leader: int, chosen: int, tied: Sequence[int],
    level_of: Mapping[tuple[tuple[str, int], str, int], float],
    estimate_of: Mapping[tuple[tuple[str, int], str, int], LogMean],
) -> float | None:
    """How far (relative) the chosen configuration is shown from the leader at worst: the ratio interval's far end."""
    against = [chosen] if chosen != leader else [k for k in tied if k != leader]
    worst = 0.0
    for other in against:
        test = (key, "leader", other)
        if test not in level_of:
            return None
        _, low, high = estimate_of[test].interval(1.0 - level_of[test])
        worst = max(worst, high - 1.0, 1.0 - low)
    return worst


@dataclass(frozen=True, slots=True)
class TuneRow:
    """One row of tune.json's `configs`: a configuration in one scope at one concurrency."""

    draft_max: int
    category: str
    concurrency: int
    measured: float | None
    low: float | None
    high: float | None
    predicted: float | None
    verdict: str

    def as_cells(self) -> JsonObject:
        """The row exactly as tune.json holds it."""
        return {"draft_max": self.draft_max, "category": self.category, "concurrency": self.concurrency,
                "measured": self.measured, "low": self.low, "high": self.high, "predicted": self.predicted,
                "verdict": self.verdict}


@dataclass(frozen=True, slots=True)
class PredictionCheck:
    """A configuration predicted before it was measured: the prediction, the measurement, the relative error."""

    draft_max: int
    concurrency: int
    predicted: float
    measured: float

    @property
    def error(self) -> float:
        """|predicted - measured| / measured."""
        return abs(self.predicted - self.measured) / self.measured


@dataclass(frozen=True, slots=True)
class Tune:
    """A tune's outcome, computed once: picks, rows, the predictions and their checks; every output renders it."""

    grid: tuple[int, ...]
    levels: tuple[int, ...]
    categories: tuple[str, ...]
    picks: Mapping[tuple[str, int], Pick]
    predictions: Mapping[tuple[str, int], Prediction]
    rows: tuple[TuneRow, ...]
    checks: tuple[PredictionCheck, ...] = ()
    mode: str = "ngram-mod"
    notes: tuple[str, ...] = field(default_factory=tuple)
    proofs: Mapping[tuple[str, int], ScopeProof] = field(default_factory=dict)
    """Per scope: whether its pick is proven over configurations measured for it (absent: proven)."""
    load: Mapping[int, LevelLoad] = field(default_factory=dict)
    """Per concurrency level: the in-flight mean each arm achieved, and the level's flags."""

    def proof(self, key: tuple[str, int]) -> ScopeProof:
        """Whether the scope's pick is proven (a scope without a record is)."""
        return self.proofs.get(key, ScopeProof(True))

    def shipped(self, key: tuple[str, int]) -> int | None:
        """The scope's pick when proven; None (not shipped: not in the schedule or flags) otherwise."""
        return self.picks[key].draft_max if self.proof(key).proven else None

    def reason(self, key: tuple[str, int]) -> str:
        """The scope's reason, led by "best measured; predicted best K=... not measured" when not proven."""
        wording = self.proof(key).wording
        pick = self.picks[key]
        if wording is None:
            return pick.reason
        return f"{wording}; among the configurations measured: {pick.reason}"

    @property
    def overall(self) -> int | None:
        """The overall pick at the lowest concurrency (one user at a time unless only higher levels ran)."""
        return self.shipped((OVERALL, self.levels[0]))

    @property
    def per_category(self) -> dict[str, int | None]:
        """Each category's proven pick at the lowest concurrency (None when not proven)."""
        return {category: self.shipped((category, self.levels[0])) for category in self.categories
                if (category, self.levels[0]) in self.picks}

    @property
    def per_concurrency(self) -> dict[int, int | None]:
        """The overall proven pick at each concurrency level (None when not proven)."""
        return {level: self.shipped((OVERALL, level)) for level in self.levels}

    @property
    def median_error(self) -> float | None:
        """The median relative error of the predictions checked by a later measurement."""
        return float(np.median([check.error for check in self.checks])) if self.checks else None

    def schedule(self) -> list[list[int]]:
        """vLLM's `[[lo, hi, K], ...]` from the per-concurrency picks: each level's K up to the next level, the
        last level alone (no extrapolation past it); undecided levels are left out, equal neighbours merged."""
        spans: list[list[int]] = []
        for index, level in enumerate(self.levels):
            pick = self.per_concurrency[level]
            if pick is None:
                continue
            high = self.levels[index + 1] - 1 if index + 1 < len(self.levels) else level
            low = 1 if index == 0 else level
            if spans and spans[-1][2] == pick and spans[-1][1] == low - 1:
                spans[-1][1] = high
            else:
                spans.append([low, high, pick])
        return spans

    def llamacpp_flags(self) -> str:
        """The overall pick as llama.cpp server flags (one draft length: llama.cpp has no per-load schedule)."""
        pick = self.overall
        if pick is None:
            proven = self.proof((OVERALL, self.levels[0])).proven
            return "(undecided: no flags)" if proven else "(not proven: no flags)"
        if pick == 0:
            return "(no speculative flags: do not speculate)"
        return llamacpp_flags(self.mode, pick)

    def to_json(self) -> dict[str, object]:
        """tune.json, exactly: the recommendation and every configuration's row."""
        return {
            "recommendation": {
                "overall": self.overall,
                "per_category": self.per_category,
                "per_concurrency": {str(level): pick for level, pick in self.per_concurrency.items()},
            },
            "picks": [{"scope": scope, "concurrency": level, "draft_max": pick.draft_max,
                       "proven": self.proof((scope, level)).proven, "reason": self.reason((scope, level))}
                      for (scope, level), pick in self.picks.items()],
            "configs": [row.as_cells() for row in self.rows],
            **({"load": {str(level): load.to_json() for level, load in self.load.items()}} if self.load else {}),
        }


LLAMACPP_LENGTH_FLAGS = {
    "ngram-mod": "--spec-ngram-mod-n-max",
    "ngram-simple": "--spec-ngram-simple-size-m",
    "ngram-map-k": "--spec-ngram-map-k-size-m",
    "ngram-map-k4v": "--spec-ngram-map-k4v-size-m",
}
"""The current llama-server flag that sets each n-gram drafter's draft length (as the embedded server sets it)."""
LLAMACPP_DRAFT_MODEL_TYPES = ("draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark")
"""llama-server's `--spec-type`s that draft with a model: their length is `--spec-draft-n-max`."""


def llamacpp_flags(mode: str, draft_max: int) -> str:
    """The llama-server flags that speculate with `mode` at draft length `draft_max` (current flag names)."""
    if mode in LLAMACPP_LENGTH_FLAGS:
        return f"--spec-type {mode} {LLAMACPP_LENGTH_FLAGS[mode]} {draft_max}"
    spec_type = "draft-simple" if mode == "draft" else mode
    if spec_type in LLAMACPP_DRAFT_MODEL_TYPES:
        return f"--spec-type {spec_type} --spec-draft-model DRAFT.gguf --spec-draft-n-max {draft_max}"
    return f"(no llama.cpp flags known for mode {mode!r}: give your server draft length {draft_max})"


def tune_rows(
    picks: Mapping[tuple[str, int], Pick], predictions: Mapping[tuple[str, int], Prediction], grid: Sequence[int]
) -> tuple[TuneRow, ...]:
    """Every grid configuration in every scope: measured with its interval and verdict, or predicted only."""
    rows = []
    for (scope, level), pick in picks.items():
        prediction = predictions.get((scope, level))
        by_k = {row.draft_max: row for row in pick.rows}
        for k in sorted(set(grid) | set(by_k)):
            predicted = prediction.speedup(k) if prediction is not None else None
            row = by_k.get(k)
            if row is None:
                if predicted is None:
                    continue
                rows.append(TuneRow(k, scope, level, None, None, None, predicted, "predicted, not measured"))
                continue
            rows.append(TuneRow(k, scope, level, _finite(row.measured), _finite(row.low), _finite(row.high),
                                predicted, row.verdict))
    return tuple(rows)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def comparison_scopes(comparison: Comparison, draft_max: int) -> dict[str, tuple[Measured, ConfigParts | None]]:
    """Per category and overall of one configuration's comparison: its measured speedups and its parts.

    The estimate against the baseline is the comparison's own row (whatever estimator the analysis uses for it,
    read back from its interval); the per-sample logs serve the tests between configurations."""
    paired = pair_runs(comparison.baseline, comparison.speculative, min_pairs=0)
    logs: dict[str, dict[str, float]] = {}
    for category, group in each_category(paired):
        values = group[group["decode_speedup"] > 0]
        means = np.log(values["decode_speedup"].astype(float)).groupby(values["id"], sort=False).mean()
        logs[category] = {str(key): float(value) for key, value in means.items()}
    scopes = {}
    for row in comparison.stats:
        decode = row.decode
        estimate = (estimate_from_interval(decode.point, decode.low, decode.high, decode.confidence, decode.df, row.n)
                    if decode.has_interval else None)
        parts = ConfigParts.of(draft_max, row.parts) if row.parts is not None else None
        scopes[row.category] = (Measured(draft_max, logs.get(row.category, {}), estimate), parts)
    return scopes


def scope_prediction(configs: Mapping[int, tuple[Measured, ConfigParts | None]]) -> Prediction:
    """The prediction model of one scope from its measured configurations (none without every one's counters)."""
    missing = [k for k, (_, parts) in sorted(configs.items()) if parts is None]
    if missing:
        return Prediction(f"no acceptance counters for draft_max={missing[0]}", measured=tuple(sorted(configs)))
    return with_plain_steps(parts for _, parts in configs.values() if parts is not None)


def summarize_tune(
    comparisons: Mapping[int, Mapping[int, Comparison]], grid: Sequence[int], *, mode: str,
    checks: Sequence[PredictionCheck] = (), threshold: float = DEFAULT_THRESHOLD, tie_margin: float = DEFAULT_THRESHOLD,
    notes: Sequence[str] = (),
) -> Tune:
    """A tune from its comparisons (concurrency -> draft_max -> comparison): the overall picks at every level as one
    family, the category picks at the lowest level as another, every scope's prediction and the rows."""
    levels = tuple(sorted(comparisons))
    by_scope: dict[tuple[str, int], dict[int, tuple[Measured, ConfigParts | None]]] = {}
    categories: list[str] = []
    for level in levels:
        for k, comparison in sorted(comparisons[level].items()):
            for scope, measured in comparison_scopes(comparison, k).items():
                if scope != OVERALL and level != levels[0]:
                    continue
                if scope != OVERALL and scope not in categories:
                    categories.append(scope)
                by_scope.setdefault((scope, level), {})[k] = measured
    overall = {key: [item[0] for item in configs.values()] for key, configs in by_scope.items() if key[0] == OVERALL}
    per_category = {key: [item[0] for item in configs.values()] for key, configs in by_scope.items()
                    if key[0] != OVERALL}
    picks = {**decide(overall, threshold=threshold, tie_margin=tie_margin),
             **decide(per_category, threshold=threshold, tie_margin=tie_margin)}
    predictions = {key: scope_prediction(configs) for key, configs in by_scope.items()}
    proofs = {key: prove(grid, by_scope[key], predictions[key]) for key in picks}
    load = {level: level_load(level, [{comparison.baseline_label: comparison.baseline.load,
                                       comparison.speculative_label: comparison.speculative.load}
                                      for _, comparison in sorted(comparisons[level].items())]) for level in levels}
    return Tune(grid=tuple(sorted(set(grid))), levels=levels, categories=tuple(categories), picks=picks,
                predictions=predictions, rows=tune_rows(picks, predictions, grid), checks=tuple(checks), mode=mode,
                notes=tuple(notes), proofs=proofs, load=load)
