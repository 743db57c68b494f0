"""The tune's calibration truths: a dense step cost whose optimum falls with load, a mixture-of-experts one that bends
with K and whose optimum rises with load; the scoped tune proves every reported pick on them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

from bench.analysis import NOT_LINEAR, fit_prediction

_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "tune_calibration.py"
_spec = importlib.util.spec_from_file_location("tune_calibration_script", _SCRIPT)
assert _spec is not None and _spec.loader is not None
calibration = importlib.util.module_from_spec(_spec)
sys.modules["tune_calibration_script"] = calibration
_spec.loader.exec_module(calibration)


def _moe() -> object:
    alphas = np.full(40, 0.8)
    return calibration.Truth(alphas, 1.0, 0.01, False, (1.6, 8.0))


def test_the_moe_truth_bends_at_batch_one_and_its_optimum_rises_with_load() -> None:
    truth = _moe()
    best = {level: max(calibration.GRID, key=lambda k, level=level: truth.speedup(k, level))
            for level in calibration.LEVELS}
    assert best[1] < best[16] <= best[64]
    rng = np.random.default_rng(0)
    measured = [calibration.measure(truth, k, rng, 1)[1] for k in (1, 4, 8, 16)]
    prediction = fit_prediction(measured)
    assert not prediction.holds and (prediction.why or "").startswith(NOT_LINEAR)
    dense = calibration.Truth(alphas=np.full(40, 0.8), a=1.1, b=0.08, variable=False)
    dense_best = {level: max(calibration.GRID, key=lambda k, level=level: dense.speedup(k, level))
                  for level in calibration.LEVELS}
    assert dense_best[1] > dense_best[64]
    assert fit_prediction(calibration.measure(dense, k, rng, 1)[1] for k in (1, 4, 8, 16)).holds


def test_the_scoped_tune_proves_every_reported_pick_and_names_the_bend() -> None:
    outcomes, measured, bends = calibration.scoped_tune(_moe(), np.random.default_rng(3), 10)
    assert {outcome.scope for outcome in outcomes} == {"overall at concurrency 1", "overall at concurrency 16",
                                                       "overall at concurrency 64", "categories at concurrency 1"}
    assert all(outcome.proven for outcome in outcomes)
    assert bends >= 1 and measured > len(calibration.GRID)  # the bending level measured its whole grid
    unchecked, fewer, _ = calibration.scoped_tune(_moe(), np.random.default_rng(3), 10, checks=False)
    assert fewer < measured and all(outcome.shown_proven for outcome in unchecked)
