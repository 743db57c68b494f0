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
adaptive, tree or variable-length drafters are detected (short drafts, curves that move with K) and get no
prediction. Drafters that draft on a share s of the decode steps only (ngram drafters) are predicted with the
steps without a draft (`with_plain_steps`): cost(K) above is a drafted step's, a plain step costs c (pooled over
the configurations whose split identifies it) and

    speedup(K) = (1 + s (E(K) - 1)) / ((1 - s) c + s cost(K))
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from bench.analysis._explain import ALL_DRAFTED, FIXED_LENGTH_SHARE, SpeedupParts
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
    steps: float | None = None
    """Decode steps (drafted or not); None: every step drafted."""
    drafted_cost: float | None = None
    plain_cost: float | None = None
    """A drafted and a plain step's cost (x baseline token), where the row's split identifies them."""

    @classmethod
    def of(cls, draft_max: int, parts: SpeedupParts) -> ConfigParts:
        """The model's view of a row's parts."""
        split = parts.split
        return cls(draft_max, parts.drafts, tuple(rate * parts.drafts for rate in parts.joint), parts.draft_tokens,
                   parts.step_cost, parts.reconciles, parts.requests, parts.steps,
                   split.drafted if split else None, split.plain if split else None)

    @property
    def plain_steps(self) -> float:
        """Decode steps without a draft."""
        return max(0.0, self.steps - self.drafts) if self.steps is not None else 0.0


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
    plain_share: float = 0.0
    """The share of decode steps without a draft (pooled over the configurations); 0: every step drafts."""
    plain_cost: float = math.nan
    """A step without a draft's cost (x baseline token), where `plain_share` > 0."""
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
        """E(K) / cost(K), with the steps without a draft mixed in; None beyond the largest measured K or where the
        model does not hold."""
        if self.plain_share > 0:
            return self.mixed_speedup(draft_max)
        length, cost = self.expected_length(draft_max), self.step_cost(draft_max)
        if length is None or cost is None or cost <= 0:
            return None
        return length / cost

    def mixed_speedup(self, draft_max: int) -> float | None:
        """(1 + s (E(K) - 1)) / ((1 - s) c + s cost(K)), s the drafted share and c a plain step's cost."""
        length, cost = self.expected_length(draft_max), self.step_cost(draft_max)
        if length is None or cost is None:
            return None
        share = 1.0 - self.plain_share
        mixed = cost if math.isnan(self.plain_cost) else self.plain_share * self.plain_cost + share * cost
        return (1.0 + share * (length - 1.0)) / mixed if mixed > 0 else None

    @property
    def text(self) -> str:
        """The model as a reader checks it, or why there is no prediction."""
        if not self.holds:
            return f"no prediction: {self.why}"
        if self.plain_share > 0 and math.isnan(self.plain_cost):
            return (f"speedup(K) = (1 + s (E(K) - 1)) / cost(K), drafted share s = {1 - self.plain_share:.3f} (the "
                    f"same at every measured K), cost(K) = {self.a:.3f} + {self.b:.4f} K a decode step, drafted or "
                    f"not (fitted to draft_max {', '.join(map(str, self.measured))})")
        if self.plain_share > 0:
            return (f"speedup(K) = (1 + s (E(K) - 1)) / ((1 - s) c + s cost(K)), drafted share s = "
                    f"{1 - self.plain_share:.3f}, a plain step c = {self.plain_cost:.3f} baseline tokens, cost(K) = "
                    f"{self.a:.3f} + {self.b:.4f} K a drafted step (fitted to draft_max "
                    f"{', '.join(map(str, self.measured))})")
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
            return Prediction(f"draft_max={config.draft_max}: the speedup explained does not reconcile with the "
                              "measured speedup (counters that do not cover the run)", measured=measured)
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
    return Prediction(None, tuple(float(value) for value in curve), fit.a, fit.b, measured, requests,
                      residuals=fit.residuals)


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


def pooled_plain_cost(configs: Sequence[ConfigParts]) -> float | None:
    """A plain step's cost pooled over the configurations whose split identifies it, weighted by their plain steps."""
    known = [(config.plain_steps, config.plain_cost) for config in configs
             if config.plain_cost is not None and config.plain_steps > 0]
    weight = sum(steps for steps, _ in known)
    return sum(steps * cost for steps, cost in known) / weight if weight > 0 else None


def with_plain_steps(parts: Iterable[ConfigParts]) -> Prediction:
    """The prediction of configurations whose drafter skips steps: each one's drafted step cost (its split's, or
    its step cost less the pooled plain steps' share) fitted as usual, then the pooled plain share and cost mixed
    in. Configurations that draft on every step fit as `fit_prediction` does."""
    configs = list(parts)
    plain = sum(config.plain_steps for config in configs)
    steps = sum(config.steps or config.drafts for config in configs)
    share = plain / steps if steps > 0 else 0.0
    if share < 1.0 - ALL_DRAFTED:
        return fit_prediction(configs)
    measured = tuple(sorted(config.draft_max for config in configs))
    cost = pooled_plain_cost(configs)
    if cost is None:  # no split: the cost per decode step fitted as is, where the drafted share does not move with K
        for config in configs:
            own = 1.0 - config.plain_steps / config.steps if config.steps else 1.0
            spread = 3.0 * math.sqrt(max(share * (1.0 - share), 1e-12) / (config.steps or 1.0))
            if abs(own - (1.0 - share)) > CURVE_TOLERANCE + spread:
                return Prediction(f"{share:.0%} of the decode steps drafted nothing, no configuration's requests "
                                  f"identify a plain step's cost, and the drafted share moves with the draft length "
                                  f"({own:.2f} at draft_max={config.draft_max} against {1.0 - share:.2f} pooled)",
                                  measured=measured)
        fitted = fit_prediction(configs)
        return replace(fitted, plain_share=share) if fitted.holds else fitted
    drafted = []
    for config in configs:
        own = 1.0 - config.plain_steps / config.steps if config.steps else 1.0
        if config.drafted_cost is not None:
            drafted_cost = config.drafted_cost
        elif config.step_cost is not None and own > 0:
            drafted_cost = (config.step_cost - (1.0 - own) * cost) / own
        else:
            drafted_cost = None
        drafted.append(replace(config, step_cost=drafted_cost))
    fitted = fit_prediction(drafted)
    return replace(fitted, plain_share=share, plain_cost=cost) if fitted.holds else fitted
