"""The repeat-aware interval: coverage with drift shared or not, power at two repeats, withheld when unsupported."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.analysis import log_mean, repeat_log_mean


def _draw(rng: np.random.Generator, n: int, repeats: int, drift: float, truth: float = 0.0) -> np.ndarray:
    """Logs of n samples x R repeats: sample effects, a per-repeat drift not shared by the arms, noise."""
    return (truth + rng.normal(0, 0.1, (n, 1)) + rng.normal(0, drift, (1, repeats))
            + rng.normal(0, 0.2, (n, repeats)))


@pytest.mark.parametrize("repeats", [3, 5])
@pytest.mark.parametrize("drift", [0.0, 0.1])
def test_coverage_holds_with_three_or_more_repeats(repeats: int, drift: float) -> None:
    rng = np.random.default_rng(repeats * 10 + int(drift * 100))
    trials = 400
    covered = 0
    for _ in range(trials):
        _, low, high = repeat_log_mean(_draw(rng, 40, repeats, drift)).interval(0.95)
        covered += low <= 1.0 <= high
    assert 0.91 <= covered / trials <= 0.99


def test_two_repeats_with_shared_drift_have_at_least_one_repeats_power() -> None:
    rng = np.random.default_rng(3)
    one = two = 0
    for _ in range(300):
        matrix = _draw(rng, 20, 2, 0.0, truth=0.1)
        one += log_mean(matrix[:, 0]).interval(0.95)[1] > 1.0
        estimate = repeat_log_mean(matrix)
        two += estimate.withheld is None and estimate.interval(0.95)[1] > 1.0
    assert two >= one


def test_two_repeats_that_drift_apart_withhold_the_interval() -> None:
    matrix = np.random.default_rng(4).normal(0, 0.05, (20, 2)) + np.array([[0.0, 0.3]])
    estimate = repeat_log_mean(matrix)
    assert estimate.withheld is not None and "3 or more repeats" in estimate.withheld
    three = np.random.default_rng(5).normal(0, 0.05, (20, 3)) + np.array([[0.0, 0.3, -0.1]])
    wide = repeat_log_mean(three)
    assert wide.withheld is None and wide.drift_se > 0
    assert math.log(wide.interval(0.95)[2]) - wide.mean > 0.3  # the drift's 2 df widen it


def test_two_repeats_with_shared_drift_cover_and_rarely_withhold() -> None:
    rng = np.random.default_rng(6)
    trials = 400
    given = covered = 0
    for _ in range(trials):
        estimate = repeat_log_mean(_draw(rng, 40, 2, 0.0))
        if estimate.withheld is None:
            given += 1
            _, low, high = estimate.interval(0.95)
            covered += low <= 1.0 <= high
    assert given >= 0.98 * trials
    assert 0.91 <= covered / given <= 0.99


def test_withholding_at_two_repeats_cannot_restore_coverage_under_unshared_drift() -> None:
    # The mean of two drifts is independent of their difference, so the intervals the pretest lets through cover
    # no better than all of them would: R = 2 with unshared drift is a documented miss, not a fixable one.
    rng = np.random.default_rng(7)
    trials = 600
    given = covered_given = covered_all = 0
    for _ in range(trials):
        matrix = _draw(rng, 40, 2, 0.1)
        per_sample = log_mean(matrix.mean(axis=1))
        _, low, high = per_sample.interval(0.95)
        hit = low <= 1.0 <= high
        covered_all += hit
        if repeat_log_mean(matrix).withheld is None:
            given += 1
            covered_given += hit
    assert 0.2 * trials <= given <= 0.9 * trials  # the pretest withholds some, not all
    assert covered_all / trials < 0.8
    assert abs(covered_given / given - covered_all / trials) < 0.1
