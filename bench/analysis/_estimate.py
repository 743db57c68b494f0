"""A compared metric's estimate: its geometric-mean speedup, interval, verdict and the evidence behind them."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from bench._types import JsonObject
from bench.analysis._intervals import SPEED_VERDICT_WORDS
from bench.analysis._metrics import Metric
from bench.analysis._sequential import EQUIVALENT, LOOK_VERDICTS, UNDECIDED
from bench.records import Look


@dataclass(frozen=True, slots=True)
class Estimate:
    """A geometric-mean speedup with its interval and the verdict of both gates (interval and threshold).

    `confidence` is the level the interval is drawn at: 0.95 for a primary row, Holm's step level for a category
    row (the verdict reads this interval). `mde` is the smallest true change (relative) the row detects with 80%
    power at that family's level; `needed` the samples the target effect would need, where the row cannot detect
    it. `robust` is Yuen's 20%-trimmed interval at the same level, with its verdict.
    """

    metric: Metric
    point: float
    low: float
    high: float
    verdict: str
    confidence: float = 0.95
    p_value: float = math.nan
    mde: float = math.nan
    needed: int | None = None
    robust: tuple[float, float, float] | None = None
    robust_verdict: str | None = None
    note: str | None = None
    df: float = math.nan
    estimator: str | None = None
    """How the interval was estimated (the overall rows name their stratified estimator and its rule)."""

    @property
    def has_interval(self) -> bool:
        """Whether an interval was given (enough samples)."""
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def word(self) -> str:
        """The verdict as a reader says it: faster, slower, no significant change, not enough data."""
        return SPEED_VERDICT_WORDS.get(self.verdict, self.verdict)

    @property
    def adjusted(self) -> bool:
        """Whether the interval is drawn wider than 95% for a family of verdicts."""
        return self.has_interval and self.confidence > 0.95 + 1e-9

    @property
    def robust_disagrees(self) -> bool:
        """Whether the robust interval's verdict differs from the t-interval's."""
        return self.robust_verdict is not None and self.robust_verdict != self.verdict

    def as_cells(self) -> JsonObject:
        """The estimate's JSON keys, each prefixed with its metric's key (`decode_speedup_low`, ...)."""
        key = self.metric.key
        robust, robust_low, robust_high = self.robust or (math.nan, math.nan, math.nan)
        return {
            key: self.point, f"{key}_low": self.low, f"{key}_high": self.high, f"{key}_verdict": self.verdict,
            f"{key}_confidence": self.confidence, f"{key}_p": self.p_value, f"{key}_mde": self.mde,
            f"{key}_needed_n": self.needed, f"{key}_robust": robust, f"{key}_robust_low": robust_low,
            f"{key}_robust_high": robust_high, f"{key}_robust_verdict": self.robust_verdict,
            f"{key}_note": self.note, f"{key}_estimator": self.estimator,
        }


def look_estimate(estimate: Estimate, look: Look) -> Estimate:
    """An estimate that shows the stopping look: its interval, level and decision, not a fixed 95%."""
    decided = LOOK_VERDICTS.get(look.decision, UNDECIDED)
    robust = estimate.robust_verdict
    if robust == "no significant change" and decided in (EQUIVALENT, UNDECIDED):
        robust = decided  # neither interval decides: no disagreement to report
    if not look.has_interval:
        return replace(estimate, low=math.nan, high=math.nan, verdict=decided, robust_verdict=None,
                                   confidence=look.confidence)
    return replace(estimate, point=look.point, low=look.low, high=look.high, verdict=decided,
                               confidence=look.confidence, robust_verdict=robust)
