"""The interval estimator: coverage on synthetic truth (the README table), t quantiles, the crossed interval."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.analysis import (
    DECODE_SPEEDUP,
    bootstrap_geomean_ci,
    crossed_t_interval,
    geomean_t_intervals,
    t_quantile,
    verdict,
)

_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "coverage.py"
_spec = importlib.util.spec_from_file_location("coverage_script", _SCRIPT)
assert _spec is not None and _spec.loader is not None
coverage_script = importlib.util.module_from_spec(_spec)
sys.modules["coverage_script"] = coverage_script
_spec.loader.exec_module(coverage_script)

TRIALS = 2000
MC_SLACK = 3 * math.sqrt(0.05 * 0.95 / TRIALS)
"""Three Monte-Carlo standard errors of a 95% rate over TRIALS trials (the nominal rate is exact for the t)."""


@pytest.mark.parametrize("n", [5, 8, 20, 80])
def test_coverage_table_holds_on_synthetic_truth(n: int) -> None:
    for cell in coverage_script.coverage_table(trials=TRIALS, sizes=(n,)):
        if cell.noise == "lognormal":
            assert cell.coverage >= 0.92 if n == 5 else 0.93 <= cell.coverage <= 0.97, cell
        elif n >= 12:
            assert cell.coverage >= 0.90, cell
        assert cell.aa_unchanged >= 0.95 - MC_SLACK, cell


def test_old_percentile_bootstrap_under_covers_at_small_n_where_the_t_holds() -> None:
    rng = np.random.default_rng(4)
    logs = coverage_script.draw_logs(rng, 600, 5, 1.05, 0.2, 0.0)
    boot = coverage_script.percentile_bootstrap_coverage(rng, logs, 1.05, 500)
    _, low, high = geomean_t_intervals(logs)
    assert boot < 0.88 < float(((low <= 1.05) & (1.05 <= high)).mean())


def test_shipped_estimator_is_the_measured_one() -> None:
    rng = np.random.default_rng(0)
    logs = rng.normal(0.1, 0.3, size=(20, 7))
    points, lows, highs = geomean_t_intervals(logs)
    for row, point, low, high in zip(logs, points, lows, highs, strict=True):
        assert bootstrap_geomean_ci(np.exp(row)) == pytest.approx((point, low, high), rel=1e-12)


def test_t_quantiles_match_tables() -> None:
    assert t_quantile(0.975, 4) == pytest.approx(2.7764, abs=1e-4)
    assert t_quantile(0.975, 1) == pytest.approx(12.7062, abs=1e-3)
    assert t_quantile(0.975, 1e6) == pytest.approx(1.95996, abs=1e-4)
    assert t_quantile(0.95, 10) == pytest.approx(1.8125, abs=1e-4)


def test_a_a_at_n_5_is_no_significant_change() -> None:
    rng = np.random.default_rng(8)
    calls = [verdict(*bootstrap_geomean_ci(np.exp(rng.normal(0, 0.2, 5))), DECODE_SPEEDUP, 0.02) for _ in range(400)]
    assert calls.count("no significant change") / 400 >= 0.93


def test_crossed_interval_accounts_for_a_shared_repeat_effect() -> None:
    rng = np.random.default_rng(2)
    crossed = flat = 0
    trials = 600
    for _ in range(trials):  # truth 1.0; each repeat shifts every sample alike (run-to-run drift)
        matrix = rng.normal(0, 0.2, (20, 1)) + rng.normal(0, 0.1, (1, 3)) + rng.normal(0, 0.05, (20, 3))
        _, low, high = crossed_t_interval(matrix)
        crossed += low <= 1 <= high
        _, low, high = bootstrap_geomean_ci(np.exp(matrix.mean(axis=1)))
        flat += low <= 1 <= high
    assert crossed / trials >= 0.92 and flat / trials < 0.85


def test_groups_select_the_crossed_interval_and_fall_back_with_one_repeat() -> None:
    rng = np.random.default_rng(3)
    matrix = rng.normal(0.1, 0.2, (10, 2))
    ids = np.repeat(np.arange(10), 2)
    groups = np.tile([0, 1], 10)
    values = np.exp(matrix.ravel())
    assert bootstrap_geomean_ci(values, groups=groups, ids=ids) == pytest.approx(crossed_t_interval(matrix))
    single = bootstrap_geomean_ci(values[::2], groups=groups[::2], ids=ids[::2])
    assert single == pytest.approx(bootstrap_geomean_ci(values[::2]))
