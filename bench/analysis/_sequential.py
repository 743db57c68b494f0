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
from typing import TYPE_CHECKING

from bench._constants import DEFAULT_THRESHOLD, MIN_SAMPLES_FOR_CI
from bench._errors import BenchError
from bench.analysis._family import FAMILY_ALPHA
from bench.analysis._intervals import LogMean, verdict
from bench.analysis._metrics import DECODE_SPEEDUP, Metric
from bench.analysis._paired import pair_runs, paired_log_mean
from bench.records import LOOK_DECISIONS, Look, Run, SequentialStop

if TYPE_CHECKING:
    import pandas as pd

SEQUENTIAL_METHOD = ("group-sequential t-tests on the overall decode speedup stratified by category, Lan-DeMets "
                     "Pocock-type alpha spending, union bound over looks")

FASTER, SLOWER, EQUIVALENT, CONTINUE, UNDECIDED = LOOK_DECISIONS


def spent_alpha(share: float, alpha: float = FAMILY_ALPHA) -> float:
    """Error budget spent once `share` (0..1) of the maximum sample count has been looked at."""
    share = min(max(share, 0.0), 1.0)
    return alpha * math.log1p((math.e - 1.0) * share)


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

    @classmethod
    def resumed(cls, stop: SequentialStop) -> SequentialTest:
        """The test as a record left it: its design, its looks and the budget they spent."""
        test = cls(max_samples=max(stop.max_samples, MIN_SAMPLES_FOR_CI), alpha=stop.alpha,
                   threshold=stop.threshold if math.isfinite(stop.threshold) else DEFAULT_THRESHOLD,
                   looks=list(stop.looks))
        test._spent = sum(look.level for look in stop.looks)
        return test

    @property
    def decided(self) -> bool:
        """Whether the last look stopped the run."""
        return bool(self.looks) and self.looks[-1].decision != CONTINUE

    def record(self, *, rounds: int, per_round: int) -> SequentialStop:
        """The test as a run file records it: the design and every look so far."""
        return SequentialStop(method=SEQUENTIAL_METHOD, metric=self.metric.key, alpha=self.alpha,
                              threshold=self.threshold, max_samples=self.max_samples, rounds=rounds,
                              per_round=per_round, looks=tuple(self.looks))

    def look(self, estimate: LogMean | None, *, final: bool = False) -> Look:
        """Look at the estimate after a round: spend this look's alpha and decide, continue, or stop at the limit.

        `final` (or reaching the maximum sample count) makes this the last look: it spends what is left."""
        if self.decided:
            raise BenchError("the sequential test already stopped")
        n = estimate.n if estimate is not None else 0
        final = final or n >= self.max_samples
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
    return paired_log_mean(paired, "decode_speedup", stratified=True) if len(paired) else None


@dataclass(frozen=True, slots=True)
class Decided:
    """How sampling until decided ended: the last runs (each carrying the record) and the test's record."""

    baseline: Run
    speculative: Run
    stop: SequentialStop

    @property
    def looks(self) -> tuple[Look, ...]:
        """Every look, in order."""
        return self.stop.looks

    @property
    def last(self) -> Look:
        """The look that ended the run."""
        return self.looks[-1]

    @property
    def message(self) -> str:
        """Why it stopped and after how many samples, with the method named."""
        return f"speedbench: {self.last.reason} ({SEQUENTIAL_METHOD}; {len(self.looks)} look(s))"


def with_record(run: Run, stop: SequentialStop) -> Run:
    """The run with the sequential record in its metadata (what its run file then carries)."""
    return dataclasses.replace(run, meta=dataclasses.replace(run.meta, sequential=stop))


def sample_until_decided(
    run_round: Callable[[int], tuple[Run, Run]],
    *,
    rounds: int,
    per_round: int,
    threshold: float = DEFAULT_THRESHOLD,
    on_look: Callable[[Look], object] | None = None,
    on_record: Callable[[Run, Run], object] | None = None,
) -> Decided:
    """Run rounds (`run_round(k)` runs round k and returns both arms' runs so far) until the overall decode verdict
    is decided or `rounds` rounds ran; `per_round` samples join each round (one per selected category).

    After each look both runs carry the record so far (`with_record`); `on_record` gets them to save."""
    if rounds < 1 or per_round < 1:
        raise BenchError(f"sampling until decided needs at least one round of one sample (got {rounds} x {per_round})")
    test = SequentialTest(max_samples=max(rounds * per_round, MIN_SAMPLES_FOR_CI), threshold=threshold)
    baseline = speculative = None
    for index in range(1, rounds + 1):
        baseline, speculative = run_round(index)
        look = test.look(overall_decode(baseline, speculative), final=index == rounds)  # the last look spends all
        stop = test.record(rounds=rounds, per_round=per_round)
        baseline, speculative = with_record(baseline, stop), with_record(speculative, stop)
        if on_look is not None:
            on_look(look)
        if on_record is not None:
            on_record(baseline, speculative)
        if test.decided:
            break
    assert baseline is not None and speculative is not None
    return Decided(baseline, speculative, test.record(rounds=rounds, per_round=per_round))


def recorded_stop(baseline: Run, speculative: Run) -> tuple[SequentialStop | None, tuple[str, ...]]:
    """The sequential record two runs carry (None: sampled at a fixed size), and a note when the arms disagree."""
    records = {"baseline": baseline.info.sequential, "speculative": speculative.info.sequential}
    stop = records["speculative"] or records["baseline"]
    if stop is None or records["baseline"] == records["speculative"]:
        return stop, ()
    alone = [name for name, record in records.items() if record is None]
    if alone:
        return stop, (f"only one run carries a sequential record (the {alone[0]} run has none): its stopping rule "
                      "is applied to the pair",)
    return stop, ("the two runs carry different sequential records: the speculative run's is applied",)


def stopping_look(stop: SequentialStop, estimate: LogMean | None,
                  threshold: float | None = None) -> tuple[SequentialStop, tuple[str, ...]]:
    """The record with the look a comparison reads last, and notes: a finished test's own last look; an interrupted
    one (its last look said continue) gets a final look on the samples kept, spending what is left of the budget.
    A `threshold` other than the test's is named: the look decided with its own."""
    n = estimate.n if estimate is not None else 0
    notes: tuple[str, ...] = ()
    if threshold is not None and math.isfinite(stop.threshold) and not math.isclose(threshold, stop.threshold):
        notes = (f"the sequential test decided with its own threshold ({stop.threshold:.0%}); the other rows use "
                 f"{threshold:.0%}",)
    if stop.finished:
        last = stop.last
        assert last is not None
        shown = f"the stopping look read {last.n} samples and these files hold {n}: its recorded interval is shown"
        return stop, notes + (() if last.n == n else (shown,))
    test = SequentialTest.resumed(stop)
    look = test.look(estimate, final=True)
    note = (f"sampling was interrupted after {len(stop.looks)} look(s) before the sequential test decided; a final "
            f"look on the {n} samples kept spends what was left of its error budget ({look.level:.2%})")
    return dataclasses.replace(stop, looks=(*stop.looks, look)), (*notes, note)


POINT_TOLERANCE = 1e-6
"""A recorded look's point may differ from the samples' by this much (relative) before the record is refused."""


def sample_rounds(run: Run) -> dict[str, int]:
    """Each sample id's round (1-based): its rank among its category's samples in the order the run file holds them
    (round k of sampling until decided adds the k-th sample of each category)."""
    seen: dict[str, int] = {}
    rounds: dict[str, int] = {}
    for result in run.results:
        if result.id in rounds:
            continue
        seen[result.category] = seen.get(result.category, 0) + 1
        rounds[result.id] = seen[result.category]
    return rounds


def _replay_looks(stop: SequentialStop, test: SequentialTest, known: pd.DataFrame, paired_rounds: pd.Series,
                  refuse: Callable[[str], BenchError]) -> None:
    """Each recorded look taken again on the samples of its rounds; a BenchError where the record disagrees."""
    for index, recorded in enumerate(stop.looks, start=1):
        members = known[paired_rounds <= index] if len(known) else known
        estimate = paired_log_mean(members, "decode_speedup", stratified=True) if len(members) else None
        n = estimate.n if estimate is not None else 0
        if recorded.n != n:
            raise refuse(f"look {index} claims {recorded.n} samples; rounds 1-{index} hold {n}")
        found = test.look(estimate, final=index == stop.rounds)
        if not math.isclose(found.level, recorded.level, rel_tol=1e-6, abs_tol=1e-12):
            raise refuse(f"look {index} spent {recorded.level:.4%}; the design spends {found.level:.4%} there")
        if (math.isfinite(recorded.point) != math.isfinite(found.point) or (
                math.isfinite(found.point) and not math.isclose(recorded.point, found.point, rel_tol=POINT_TOLERANCE))):
            raise refuse(f"look {index} reads {recorded.point:.4g}x; its samples give {found.point:.4g}x")
        if test.decided:
            break


def verified_stop(baseline: Run, speculative: Run, *, threshold: float | None = None,
                  paired: pd.DataFrame | None = None) -> tuple[SequentialStop | None, tuple[str, ...]]:
    """The sequential record two runs carry, re-derived from their samples: the record's design (limit, rounds,
    error budget, threshold) is an input; every look's interval and decision is recomputed from the samples of its
    rounds; the record is refused (BenchError naming the run file) where it disagrees with the samples it claims:
    look sizes, order of rounds, levels the design would not spend, points the samples do not give.

    Returns the re-derived record (with a final look on the samples kept when the re-derived test did not stop)
    and notes, as `stopping_look` does; (None, notes) for runs of a fixed size."""
    stop, notes = recorded_stop(baseline, speculative)
    if stop is None:
        return None, notes
    carrier = speculative if speculative.info.sequential is not None else baseline
    name = str(carrier.path or "the speculative run")

    def refuse(reason: str) -> BenchError:
        return BenchError(f"{name}: its sequential record disagrees with its samples ({reason}); "
                          "re-run, or remove the record to compare the samples at a fixed size")

    if paired is None:
        paired = pair_runs(baseline, speculative, min_pairs=0)
    limit = max(stop.rounds * stop.per_round, MIN_SAMPLES_FOR_CI)
    if stop.rounds < 1 or stop.per_round < 1 or stop.max_samples != limit:
        raise refuse(f"a limit of {stop.max_samples} samples is not {stop.rounds} rounds x {stop.per_round}")
    if len(stop.looks) > stop.rounds:
        raise refuse(f"{len(stop.looks)} looks in a design of {stop.rounds} rounds")
    if not 0 < stop.alpha < 1 or sum(look.level for look in stop.looks) > stop.alpha + 1e-9:
        raise refuse(f"its looks spend more than the error budget {stop.alpha:g}")
    rounds = sample_rounds(carrier)
    categories = {result.category for result in carrier.results}
    if len(categories) > stop.per_round:
        raise refuse(f"{len(categories)} categories in rounds of {stop.per_round}")
    known = paired[paired["id"].map(lambda sample: sample in rounds)] if len(paired) else paired
    if len(known) != len(paired):
        raise refuse("paired samples the run file's rounds do not hold")
    paired_rounds = known["id"].map(rounds) if len(known) else known.get("id")
    test = SequentialTest(max_samples=limit, alpha=stop.alpha,
                          threshold=stop.threshold if math.isfinite(stop.threshold) else DEFAULT_THRESHOLD)
    if paired_rounds is not None and len(known) and int(paired_rounds.max()) > stop.rounds:
        raise refuse(f"samples of round {int(paired_rounds.max())} in a design of {stop.rounds} rounds")
    _replay_looks(stop, test, known, paired_rounds, refuse)
    looks = tuple(test.looks)
    if len(looks) < len(stop.looks):
        notes += (f"re-derived from the samples, the sequential test stopped at look {len(looks)} of the "
                  f"{len(stop.looks)} recorded: that look is shown",)
    elif looks and stop.looks and looks[-1].decision != stop.looks[-1].decision:
        notes += (f"re-derived from the samples, the last look decides {looks[-1].decision} (the record said "
                  f"{stop.looks[-1].decision}): the samples' decision is shown",)
    rederived = dataclasses.replace(stop, max_samples=limit, looks=looks)
    overall = paired_log_mean(paired, "decode_speedup", stratified=True) if len(paired) else None
    if not rederived.finished:
        final, more = stopping_look(rederived, overall, threshold)
        return final, notes + more
    if overall is not None and looks[-1].n != overall.n:
        notes += (f"the stopping look read {looks[-1].n} samples and these files hold {overall.n}: the samples "
                  "after it are outside the sequential test",)
    if threshold is not None and math.isfinite(stop.threshold) and not math.isclose(threshold, stop.threshold):
        notes += (f"the sequential test decided with its own threshold ({stop.threshold:.0%}); the other rows use "
                  f"{threshold:.0%}",)
    return rederived, notes


def stopping_level(stop: SequentialStop) -> float:
    """The error budget the stopping look spends: a finished test's last look's, else what is left (`stopping_look`)."""
    if stop.finished:
        assert stop.last is not None
        return stop.last.level
    return max(stop.alpha - sum(look.level for look in stop.looks), 0.0)


LOOK_VERDICTS = {FASTER: "better", SLOWER: "worse", EQUIVALENT: EQUIVALENT, UNDECIDED: UNDECIDED}
"""The stopping look's decision as an estimate's verdict (`better`/`worse` read as faster/slower)."""
