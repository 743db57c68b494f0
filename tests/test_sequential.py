"""Sampling until decided: alpha spending keeps A/A false verdicts at 5% under optional stopping."""

from __future__ import annotations

import numpy as np
import pytest

from bench import DEFAULT_THRESHOLD, MIN_SAMPLES_FOR_CI, BenchError
from bench.analysis import (
    DECODE_SPEEDUP,
    LATENCY_SPEEDUP,
    LogMean,
    SequentialTest,
    holm_levels,
    log_mean,
    spent_alpha,
    verdict,
)
from bench.records import level_text


def _simulate(truth: float, trials: int, *, categories: int = 11, limit: int = 10, seed: int = 0):
    """Rounds of one sample per category until the test stops: (decisions, mean samples at the stop)."""
    rng = np.random.default_rng(seed)
    decisions, stops = [], []
    for _ in range(trials):
        test = SequentialTest(max_samples=categories * limit)
        logs: list[float] = []
        for _ in range(limit):
            logs += list(np.log(truth) + rng.normal(0.0, 0.2, categories))
            look = test.look(log_mean(np.array(logs)))
            if test.decided:
                break
        decisions.append(look.decision)
        stops.append(look.n)
    return decisions, float(np.mean(stops))


def test_spending_reaches_alpha_at_the_limit() -> None:
    assert spent_alpha(0.0) == 0.0 and spent_alpha(1.0) == pytest.approx(0.05)
    assert spent_alpha(0.5) < spent_alpha(0.8) < 0.05


def test_a_a_false_verdicts_stay_under_5_percent_with_a_look_every_round() -> None:
    decisions, _ = _simulate(1.0, 600)
    assert sum(d in ("faster", "slower") for d in decisions) / len(decisions) <= 0.05


def test_a_clear_1_5x_stops_at_the_first_round() -> None:
    decisions, mean_stop = _simulate(1.5, 100, seed=1)
    assert decisions.count("faster") == 100 and mean_stop <= 22


def test_each_look_says_why() -> None:
    test = SequentialTest(max_samples=20)
    rng = np.random.default_rng(2)
    look = test.look(log_mean(np.log(1.0) + rng.normal(0, 0.2, 10)))
    assert look.decision == "continue" and look.reason.startswith("continuing after 10 samples")
    look = test.look(log_mean(np.log(1.0) + rng.normal(0, 0.2, 20)))
    assert look.decision == "undecided" and "limit of 20 samples" in look.reason
    with pytest.raises(BenchError):
        test.look(None)
    with pytest.raises(BenchError):
        SequentialTest(max_samples=2)


def _rounds(truth: float, seed: int):
    """A run_round callback: round k holds the first k samples of each of 11 categories of one synthetic pair."""
    from bench.records import Run, summarize
    from tests.test_family import synthetic_runs

    full = synthetic_runs(np.random.default_rng(seed), 10, truth)

    def run_round(k: int):
        keep = {f"{category}-{index:03d}" for category in {r.category for r in full[0].results} for index in range(k)}
        return tuple(Run(config={}, selected_samples=len(kept), results=kept, summary=tuple(summarize(kept)))
                     for kept in (tuple(r for r in run.results if r.id in keep) for run in full))
    return run_round


def test_sample_until_decided_stops_early_on_a_clear_1_5x_and_says_why() -> None:
    from bench.analysis import sample_until_decided

    seen = []
    decided = sample_until_decided(_rounds(1.5, 1), rounds=10, per_round=11, on_look=seen.append)
    assert decided.last.decision == "faster" and decided.last.n <= 22 and len(seen) == len(decided.looks)
    assert decided.message.startswith("speedbench: decided faster after ")
    assert "alpha spending" in decided.message


def test_sample_until_decided_runs_to_the_limit_when_nothing_changed() -> None:
    from bench.analysis import sample_until_decided

    decided = sample_until_decided(_rounds(1.0, 2), rounds=10, per_round=11)
    assert decided.last.decision in ("undecided", "equivalent") and decided.last.n == 110
    assert len(decided.baseline.results) == 110


def _stopped_a_a(rng: np.random.Generator, *, categories: int = 11, limit: int = 10):
    """One A/A run sampled until decided, latency tied to decode: (stopping look, per-category decode and latency
    logs); each round adds one sample per category, as `bench --until-decided` does."""
    test = SequentialTest(max_samples=categories * limit)
    decode = np.empty((categories, 0))
    for k in range(1, limit + 1):
        decode = np.hstack([decode, rng.normal(0.0, 0.2, (categories, 1))])
        look = test.look(log_mean(decode.ravel()), final=k == limit)
        if test.decided:
            break
    return look, decode, decode + rng.normal(0.0, 0.05, decode.shape)


def _false(estimate: LogMean, level: float, metric) -> bool:
    return verdict(*estimate.interval(1.0 - level), metric, DEFAULT_THRESHOLD) in ("better", "worse")


def test_after_optional_stopping_rows_at_the_stopping_looks_level_keep_5_percent_and_fixed_95_do_not() -> None:
    """The levels a comparison of a sequentially stopped run uses, on synthetic truth (1.00x, latency following
    decode): the overall latency row and the category family at the stopping look's level stay under 5% false
    verdicts; the same rows at a fixed 95% (what a table of a fixed-size run prints) exceed it for overall rows."""
    rng = np.random.default_rng(7)
    trials = 1000
    counts = {"latency at look": 0, "latency at 95%": 0, "decode at 95%": 0, "categories at look": 0}
    for _ in range(trials):
        look, decode, latency = _stopped_a_a(rng)
        overall = log_mean(latency.ravel())
        counts["latency at look"] += look.level > 0 and _false(overall, look.level, LATENCY_SPEEDUP)
        counts["latency at 95%"] += _false(overall, 0.05, LATENCY_SPEEDUP)
        counts["decode at 95%"] += _false(log_mean(decode.ravel()), 0.05, DECODE_SPEEDUP)
        if look.level > 0 and decode.shape[1] >= MIN_SAMPLES_FOR_CI:
            rows = [log_mean(values) for values in (*decode, *latency)]
            levels = holm_levels([row.p_value() for row in rows], look.level)
            counts["categories at look"] += any(_false(row, level, DECODE_SPEEDUP)
                                                for row, level in zip(rows, levels, strict=True))
    rates = {name: count / trials for name, count in counts.items()}
    assert rates["latency at look"] <= 0.05 and rates["categories at look"] <= 0.05, rates
    assert rates["latency at 95%"] > 0.05 and rates["decode at 95%"] > 0.05, rates  # what the fixed row would claim



def test_levels_read_with_one_decimal_unless_that_rounds_to_certainty() -> None:
    assert level_text(0.968994) == "96.9%"
    assert level_text(0.95) == "95%"
    assert level_text(0.9995) == "99.95%"
    assert level_text(1.0) == "100%"
