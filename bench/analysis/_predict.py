"""The speedup predicted for every draft length, and the plan that spends a tune's budget with it.

The model:

    E(K) = 1 + sum_{i <= K} m_i                 (m_i: the joint per-position acceptance, pooled over configs; with
                                                 per-request counters, the geometric mean of each request's E(K))
    cost(K) = a + b K                           (step cost: time per verification step / baseline time per token,
                                                 least squares over the measured configurations; a draft model's
                                                 own K steps are part of b; checked against a monotone curve
                                                 through them, `bench.analysis._step_cost`: a bend refuses)
    speedup(K) = E(K) / cost(K)

It holds for chain drafters whose first K positions do not depend on K and that draft K tokens every step;
adaptive, tree or variable-length drafters are detected (short drafts, steps without drafts, curves that move
with K) and get no prediction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from bench.analysis._explain import FIXED_LENGTH_SHARE, SpeedupParts
from bench.analysis._step_cost import step_cost_bend

CURVE_TOLERANCE = 0.05
"""Joint rates of two configurations at a shared position may differ by this much (plus 3 standard errors)."""


@dataclass(frozen=True, slots=True)
class ConfigParts:
    """What the prediction model reads of one measured configuration in one scope (from its `SpeedupParts`)."""

    draft_max: int
    drafts: float
    positions: tuple[float, ...]
    """Per position (0-based), the count of drafts with at least position + 1 tokens accepted."""
    draft_tokens: float | None
    step_cost: float | None
    reconciles: bool | None
    requests: Mapping[str, tuple[float, tuple[float, ...]]] = field(default_factory=dict)
    """Per request: (drafts, per-position counts); with them the model predicts the geometric mean over requests."""

    @classmethod
    def of(cls, draft_max: int, parts: SpeedupParts) -> ConfigParts:
        """The model's view of a row's parts."""
        return cls(draft_max, parts.drafts, tuple(rate * parts.drafts for rate in parts.joint), parts.draft_tokens,
                   parts.step_cost, parts.reconciles, parts.requests)


@dataclass(frozen=True, slots=True)
class Prediction:
    """The fitted speedup curve of one scope, or why there is none (`why`)."""

    why: str | None = None
    curve: tuple[float, ...] = ()
    a: float = math.nan
    b: float = math.nan
    measured: tuple[int, ...] = ()
    request_curves: tuple[tuple[float, ...], ...] = ()
    """Each request's joint curve (pooled over the configurations that measured it); () to use the pooled curve."""
    residuals: tuple[tuple[int, float], ...] = ()
    """Per measured K: how far (relative) the step-cost line is from the monotone curve through the measured costs."""

    @property
    def holds(self) -> bool:
        """Whether the model holds here (a chain drafter with fixed-length drafts, two or more step costs)."""
        return self.why is None

    @property
    def largest(self) -> int:
        """The largest draft length the curve covers (the largest measured)."""
        return len(self.curve)

    def expected_length(self, draft_max: int) -> float | None:
        """E(K) = 1 + sum of the joint rates of positions 1..K; over requests, their geometric mean."""
        if not self.holds or draft_max < 0 or draft_max > self.largest:
            return None
        if self.request_curves:
            return float(np.exp(np.mean([math.log(1.0 + sum(curve[:draft_max])) for curve in self.request_curves])))
        return 1.0 + float(sum(self.curve[:draft_max]))

    def step_cost(self, draft_max: int) -> float | None:
        """cost(K) = a + b K."""
        return self.a + self.b * draft_max if self.holds else None

    def speedup(self, draft_max: int) -> float | None:
        """E(K) / cost(K); None beyond the largest measured K or where the model does not hold."""
        length, cost = self.expected_length(draft_max), self.step_cost(draft_max)
        if length is None or cost is None or cost <= 0:
            return None
        return length / cost

    @property
    def text(self) -> str:
        """The model as a reader checks it, or why there is no prediction."""
        if not self.holds:
            return f"no prediction: {self.why}"
        over = ("the geometric mean over requests of 1 + the sum of each one's joint per-position acceptance to K"
                if self.request_curves else "1 + the sum of the pooled joint per-position acceptance to K (no "
                "per-request counters: a ratio of means, and a chain cannot be told from a mix of requests)")
        return (f"speedup(K) = E(K) / cost(K), E(K) = {over}, cost(K) = {self.a:.3f} + {self.b:.4f} K (fitted to "
                f"draft_max {', '.join(map(str, self.measured))})")


def fit_prediction(parts: Iterable[ConfigParts]) -> Prediction:
    """The prediction model fitted to the measured configurations of one scope, or why it does not hold."""
    configs = sorted(parts, key=lambda item: item.draft_max)
    measured = tuple(config.draft_max for config in configs)
    if len(configs) < 2:
        return Prediction("fewer than two configurations measured (the step-cost model has two parameters)",
                          measured=measured)
    for config in configs:
        if config.step_cost is None:
            return Prediction(f"draft_max={config.draft_max} has no step cost (no generation times or counters)",
                              measured=measured)
        if len(config.positions) < config.draft_max:
            return Prediction(f"draft_max={config.draft_max}: the server reports no per-position acceptance up to "
                              f"position {config.draft_max}", measured=measured)
        cut = (config.draft_max - 1) * len(config.requests)  # each request's last draft may stop at its end
        if config.draft_tokens is not None and config.draft_tokens < FIXED_LENGTH_SHARE * config.draft_max \
                * config.drafts - cut:
            return Prediction(f"draft_max={config.draft_max}: drafts average "
                              f"{config.draft_tokens / config.drafts:.1f} tokens, not {config.draft_max} "
                              "(variable-length drafts: the chain model does not hold)", measured=measured)
        if config.reconciles is False:
            return Prediction(f"draft_max={config.draft_max}: AL / step cost does not reconcile with the measured "
                              "speedup (steps without a draft, or counters that do not cover the run)",
                              measured=measured)
    largest = configs[-1].draft_max
    counts, drafts = np.zeros(largest), np.zeros(largest)
    for config in configs:
        width = config.draft_max
        counts[:width] += np.asarray(config.positions[:width], dtype=float)
        drafts[:width] += config.drafts
    curve = counts / np.where(drafts > 0, drafts, 1.0)
    requests = _request_curves(configs, largest)
    keys = sorted(set.intersection(*(set(config.requests) for config in configs))) if requests else []
    for config in configs:
        own = np.asarray(config.positions[:config.draft_max], dtype=float) / config.drafts
        if requests:  # each request's curve, weighted by this configuration's drafts of it (the mix moves with K)
            weights = np.asarray([config.requests[key][0] for key in keys], dtype=float)
            expected = (weights[:, None] * np.asarray(requests)[:, :config.draft_max]).sum(axis=0) / weights.sum()
        else:
            continue  # pooled counters alone cannot tell a chain from a mix of requests whose drafts move with K
        spread = 3.0 * np.sqrt(np.maximum(expected * (1 - expected), 1e-12) / config.drafts)
        moved = np.abs(own - expected) > CURVE_TOLERANCE + spread
        if moved.any():
            position = int(np.argmax(moved)) + 1
            return Prediction(f"the acceptance at position {position} moves with the draft length "
                              f"({own[position - 1]:.2f} at draft_max={config.draft_max} against "
                              f"{expected[position - 1]:.2f} from the other configurations): not a chain drafter",
                              measured=measured)
    fit = step_cost_bend(measured, [float(config.step_cost or 0.0) for config in configs])
    if fit.bends:
        return Prediction(fit.why, measured=measured, residuals=fit.residuals)
    return Prediction(None, tuple(float(value) for value in curve), fit.a, fit.b, measured, requests, fit.residuals)


def _request_curves(configs: Sequence[ConfigParts], largest: int) -> tuple[tuple[float, ...], ...]:
    """Per request measured by every configuration: its joint curve pooled over them (else ())."""
    shared = set.intersection(*(set(config.requests) for config in configs)) if configs else set()
    if not shared or any(not config.requests for config in configs):
        return ()
    curves = []
    for key in sorted(shared):
        counts, drafts = np.zeros(largest), np.zeros(largest)
        for config in configs:
            own_drafts, positions = config.requests[key]
            width = min(config.draft_max, len(positions))
            counts[:width] += np.asarray(positions[:width], dtype=float)
            drafts[:config.draft_max] += own_drafts
        curves.append(tuple(float(value) for value in counts / np.where(drafts > 0, drafts, 1.0)))
    return tuple(curves)


def plan_next(
    grid: Sequence[int], measured: Iterable[int], prediction: Prediction | None, *, budget: int | None = None
) -> tuple[int, ...]:
    """The configurations to measure next: the grid's extremes first; then, where the model holds, the predicted
    best and its grid neighbours; where it does not, the rest of the grid. () when done or out of budget."""
    ordered = sorted(set(grid))
    done = set(measured)
    cap = len(ordered) if budget is None else budget
    left = cap - len(done)
    if left <= 0:
        return ()
    if not done:
        return tuple(dict.fromkeys((ordered[0], ordered[-1])))[:left]
    if prediction is None or not prediction.holds:
        return tuple(k for k in ordered if k not in done)
    predicted = {k: prediction.speedup(k) for k in ordered}
    scored = [k for k in ordered if predicted[k] is not None]
    if not scored:
        return ()
    best = max(scored, key=lambda k: (predicted[k], -k))
    index = ordered.index(best)
    wanted = [best, *(ordered[i] for i in (index - 1, index + 1) if 0 <= i < len(ordered))]
    return tuple(k for k in wanted if k not in done)[:left]


def default_budget(grid: Sequence[int]) -> int:
    """Configurations a model-guided tune measures at most: half the grid, and at least three."""
    return max(3, len(set(grid)) // 2)
