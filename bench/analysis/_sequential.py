"""Sampling until decided: group-sequential looks at the overall decode speedup with Lan-DeMets alpha spending.

Method: before a run, the maximum sample count N is fixed (the per-category limit x the categories). After every
round (one more sample per category), the overall estimate is looked at; look k may spend
alpha(t_k) - alpha(t_{k-1}) of the error budget, where t = n / N is the share of the maximum sampled so far and
alpha(t) = alpha x ln(1 + (e - 1) t) is the Pocock-type spending function of Lan & DeMets (1983). Each look reads a
two-sided t-interval at its spent level; by the union bound over looks, the chance of any false verdict in the
whole run stays at or below alpha whatever the number and timing of looks (conservative: looks are correlated).
A look decides:

- `faster` / `slower`: the interval excludes 1.00x and the point is past the threshold (the usual two gates);
- `equivalent`: the interval lies inside [1/(1 + threshold), 1 + threshold];
- otherwise sampling continues, until the maximum, where the run stops `undecided` with what it could detect.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from bench._constants import DEFAULT_THRESHOLD, MIN_SAMPLES_FOR_CI
from bench._errors import BenchError
from bench.analysis._family import FAMILY_ALPHA
from bench.analysis._intervals import DECODE_SPEEDUP, LogMean, Metric, verdict
from bench.analysis._paired import pair_runs, paired_log_mean
from bench.records import Run

SEQUENTIAL_METHOD = "group-sequential t-tests, Lan-DeMets Pocock-type alpha spending, union bound over looks"

FASTER, SLOWER, EQUIVALENT, CONTINUE, UNDECIDED = "faster", "slower", "equivalent", "continue", "undecided"


def spent_alpha(share: float, alpha: float = FAMILY_ALPHA) -> float:
    """Error budget spent once `share` (0..1) of the maximum sample count has been looked at."""
    share = min(max(share, 0.0), 1.0)
    return alpha * math.log1p((math.e - 1.0) * share)


@dataclass(frozen=True, slots=True)
class Look:
    """One look: samples so far, the level spent on it, the interval it read and what it decided."""

    n: int
    level: float
    point: float
    low: float
    high: float
    decision: str

    @property
    def reason(self) -> str:
        """Why sampling stopped or goes on, in one sentence."""
        interval = f"{self.point:.2f}x [{self.low:.2f}, {self.high:.2f}] at {1 - self.level:.4%}"
        if self.decision in (FASTER, SLOWER):
            return f"decided {self.decision} after {self.n} samples: {interval} excludes 1.00x"
        if self.decision == EQUIVALENT:
            return f"decided equivalent after {self.n} samples: {interval} lies inside the threshold"
        if self.decision == UNDECIDED:
            return f"undecided at the limit of {self.n} samples: {interval}"
        return f"continuing after {self.n} samples: {interval}"


@dataclass
class SequentialTest:
    """The stopping rule of one run: feed it the overall estimate after each round; it says whether to stop."""

    max_samples: int
    threshold: float = DEFAULT_THRESHOLD
    alpha: float = FAMILY_ALPHA
    metric: Metric = DECODE_SPEEDUP
    looks: list[Look] = field(default_factory=list)
    _spent: float = 0.0

    def __post_init__(self) -> None:
        if self.max_samples < MIN_SAMPLES_FOR_CI:
            raise BenchError(f"sampling until decided needs a limit of at least {MIN_SAMPLES_FOR_CI} samples overall "
                             f"(got {self.max_samples})")

    @property
    def decided(self) -> bool:
        """Whether the last look stopped the run."""
        return bool(self.looks) and self.looks[-1].decision != CONTINUE

    def look(self, estimate: LogMean | None) -> Look:
        """Look at the estimate after a round: spend this look's alpha and decide, continue, or stop at the limit."""
        if self.decided:
            raise BenchError("the sequential test already stopped")
        n = estimate.n if estimate is not None else 0
        final = n >= self.max_samples
        if estimate is None or n < MIN_SAMPLES_FOR_CI:
            found = Look(n, 0.0, math.nan, math.nan, math.nan, UNDECIDED if final else CONTINUE)
            self.looks.append(found)
            return found
        budget = self.alpha if final else spent_alpha(n / self.max_samples, self.alpha)
        level = max(budget - self._spent, 0.0)
        self._spent = max(self._spent, budget)
        if level <= 0.0:
            point = math.exp(estimate.mean)
            found = Look(n, 0.0, point, 0.0, math.inf, UNDECIDED if final else CONTINUE)
            self.looks.append(found)
            return found
        point, low, high = estimate.interval(1.0 - level)
        called = verdict(point, low, high, self.metric, self.threshold)
        if called == "better":
            decision = FASTER
        elif called == "worse":
            decision = SLOWER
        elif low >= 1.0 / (1.0 + self.threshold) and high <= 1.0 + self.threshold:
            decision = EQUIVALENT
        else:
            decision = UNDECIDED if final else CONTINUE
        found = Look(n, level, point, low, high, decision)
        self.looks.append(found)
        return found


def overall_decode(baseline: Run, speculative: Run) -> LogMean | None:
    """The overall decode-speedup estimate a sequential look reads (the paired statistics' overall row)."""
    paired = pair_runs(baseline, speculative, min_pairs=0)
    return paired_log_mean(paired, "decode_speedup") if len(paired) else None


@dataclass(frozen=True, slots=True)
class Decided:
    """How sampling until decided ended: the last runs, every look and the one that stopped it."""

    baseline: Run
    speculative: Run
    looks: tuple[Look, ...]

    @property
    def last(self) -> Look:
        """The look that ended the run."""
        return self.looks[-1]

    @property
    def message(self) -> str:
        """Why it stopped and after how many samples, with the method named."""
        return f"speedbench: {self.last.reason} ({SEQUENTIAL_METHOD}; {len(self.looks)} look(s))"


def sample_until_decided(
    run_round: Callable[[int], tuple[Run, Run]],
    *,
    rounds: int,
    per_round: int,
    threshold: float = DEFAULT_THRESHOLD,
    on_look: Callable[[Look], object] | None = None,
) -> Decided:
    """Run rounds (`run_round(k)` runs round k and returns both arms' runs so far) until the overall decode verdict
    is decided or `rounds` rounds ran; `per_round` samples join each round (one per selected category)."""
    if rounds < 1 or per_round < 1:
        raise BenchError(f"sampling until decided needs at least one round of one sample (got {rounds} x {per_round})")
    test = SequentialTest(max_samples=max(rounds * per_round, MIN_SAMPLES_FOR_CI), threshold=threshold)
    baseline = speculative = None
    for index in range(1, rounds + 1):
        baseline, speculative = run_round(index)
        estimate = overall_decode(baseline, speculative)
        if index == rounds and estimate is not None:
            estimate = dataclasses.replace(estimate, n=max(estimate.n, test.max_samples))  # the last look spends all
        look = test.look(estimate)
        if on_look is not None:
            on_look(look)
        if test.decided:
            break
    assert baseline is not None and speculative is not None
    return Decided(baseline, speculative, tuple(test.looks))
