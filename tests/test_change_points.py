"""Change points in a series of estimates: speedbench's weighted segmentation and the peers' methods beside it."""

from __future__ import annotations

import numpy as np

from bench.analysis import asv_change_points, otava_change_points, weighted_segmentation


def _stepped(seed: int, n: int = 60, at: int = 35, size: float = -0.15, se: float = 0.03) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.normal(0.3, se, n)
    values[at:] += size
    return values


def test_weighted_segmentation_finds_a_step_where_it_is_and_its_size() -> None:
    values = _stepped(1)
    found = weighted_segmentation(values, np.full(60, 0.03), np.full(60, 4), level=1e-4)
    assert [split.index for split in found] == [35]
    assert abs(found[0].log_change + 0.15) < 0.03


def test_weighted_segmentation_reads_each_points_precision() -> None:
    rng = np.random.default_rng(2)
    n = np.where(np.arange(60) % 2 == 0, 64, 4)  # every other commit ran 16 times the samples
    se = 0.08 / np.sqrt(n)
    values = 0.3 + rng.normal(0.0, se)
    values[30:] -= 0.04
    weighted = weighted_segmentation(values, se, n, level=1e-4)
    assert len(weighted) == 1 and abs(weighted[0].index - 30) <= 3
    noise_only = weighted_segmentation(0.3 + rng.normal(0.0, se), se, n, level=1e-4)
    assert noise_only == ()
    unweighted = weighted_segmentation(values, np.full(60, 0.04), np.full(60, 4), level=1e-4)
    assert abs(unweighted[0].z) < abs(weighted[0].z) if unweighted else True  # precision is evidence


def test_a_single_outlying_point_at_the_end_is_no_change_point() -> None:
    values = np.full(40, 0.3) + np.random.default_rng(3).normal(0, 0.02, 40)
    values[-1] -= 0.1  # five standard errors: an outlier, not a new level
    assert weighted_segmentation(values, np.full(40, 0.02), np.full(40, 4), level=1e-4) == ()


def test_asv_and_otava_find_a_clear_step() -> None:
    values = _stepped(4, size=-0.3)
    assert any(abs(index - 35) <= 1 for index in asv_change_points(values, np.full(60, 0.03)))
    assert any(abs(index - 35) <= 1 for index in otava_change_points(values))


def test_otava_reads_p_per_test_so_many_series_of_noise_raise_alarms() -> None:
    rng = np.random.default_rng(5)
    alarms = sum(bool(otava_change_points(rng.normal(0.0, 0.03, 100))) for _ in range(30))
    assert alarms >= 3  # one series of 100 points already alarms often; a history of 36 series nearly always
