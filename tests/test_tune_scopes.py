"""Each scope's pick is proven only over configurations measured for it: its predicted best and grid neighbours."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench import OVERALL
from bench.analysis import (
    ConfigParts,
    Measured,
    Prediction,
    Tune,
    cover_scopes,
    decide,
    fit_prediction,
    predicted_best,
    prove,
    tune_rows,
)
from bench.render import tune_markdown, tune_text

GRID = (2, 4, 8, 16)


def _chain(k: int, alpha: float, a: float, b: float, drafts: float = 1000.0) -> ConfigParts:
    positions = tuple(drafts * alpha ** i for i in range(1, k + 1))
    return ConfigParts(k, drafts, positions, drafts * k, a + b * k, True, {"r": (drafts, positions)})


def _truth(alpha: float, a: float, b: float, k: int) -> float:
    return (1 - alpha ** (k + 1)) / (1 - alpha) / (a + b * k)


def _measured(k: int, truth: float, n: int = 30, sigma: float = 0.03) -> Measured:
    rng = np.random.default_rng(k)
    return Measured(k, {f"s{i}": math.log(truth) + float(rng.normal(0.0, sigma)) for i in range(n)})


QA = (0.75, 1.0, 0.1)
"""The issue's case: qa's true best on the grid is 4, the overall plan measured 2, 16 and 8."""


def test_a_category_whose_predicted_best_was_never_measured_is_not_proven() -> None:
    assert max(GRID, key=lambda k: _truth(*QA, k)) == 4
    prediction = fit_prediction([_chain(k, *QA) for k in (2, 8, 16)])
    assert predicted_best(GRID, prediction) == 4
    proof = prove(GRID, (2, 8, 16), prediction)
    assert not proof.proven and proof.missing == (4,)
    assert proof.wording == "best measured; predicted best K=4 not measured"
    assert cover_scopes(GRID, (2, 8, 16), {"qa": prediction, OVERALL: None}) == {"qa": (4,), OVERALL: (4,)}
    assert prove(GRID, (2, 4, 8, 16), prediction).proven


def test_where_the_model_does_not_predict_only_the_whole_grid_proves_a_pick() -> None:
    refused = Prediction("fewer than two configurations measured")
    proof = prove(GRID, (2, 16), refused)
    assert not proof.proven and proof.missing == (4, 8) and "K=4,8 not measured" in (proof.wording or "")
    assert prove(GRID, GRID, refused).proven


def test_an_unproven_pick_is_worded_alike_everywhere_and_kept_out_of_schedule_and_flags() -> None:
    scopes = {(OVERALL, 1): [_measured(k, _truth(0.8, 1.0, 0.05, k)) for k in (2, 8, 16)],
              (OVERALL, 8): [_measured(k, _truth(0.8, 1.0, 0.05, k)) for k in GRID],
              ("qa", 1): [_measured(k, _truth(*QA, k)) for k in (2, 8, 16)]}
    picks = decide(scopes)
    predictions = {(OVERALL, 1): fit_prediction([_chain(k, 0.8, 1.0, 0.05) for k in (2, 8, 16)]),
                   (OVERALL, 8): fit_prediction([_chain(k, 0.8, 1.0, 0.05) for k in GRID]),
                   ("qa", 1): fit_prediction([_chain(k, *QA) for k in (2, 8, 16)])}
    proofs = {key: prove(GRID, [item.draft_max for item in scopes[key]], predictions[key]) for key in picks}
    assert not proofs[("qa", 1)].proven and proofs[(OVERALL, 8)].proven
    assert picks[("qa", 1)].draft_max == 8  # the measured best, which is not the truth
    tune = Tune(grid=GRID, levels=(1, 8), categories=("qa",), picks=picks, predictions=predictions,
                rows=tune_rows(picks, predictions, GRID), proofs=proofs)
    assert tune.per_category == {"qa": None}
    worded = tune.reason(("qa", 1))
    assert worded.startswith("best measured; predicted best K=4 not measured")
    data = tune.to_json()
    qa = next(pick for pick in data["picks"] if pick["scope"] == "qa")
    assert qa == {"scope": "qa", "concurrency": 1, "draft_max": 8, "proven": False, "reason": worded}
    assert worded in tune_markdown(tune) and worded in tune_text(tune)
    line = next(line for line in tune_text(tune).splitlines() if line.startswith("category qa"))
    assert line.startswith("category qa (concurrency 1): draft_max 8 not proven: best measured; predicted best K=4 "
                           "not measured; among the configurations measured: ")
    # the overall row at concurrency 1 measured 2, 8 and 16; its predicted best is 8, whose neighbour 4 is missing
    assert proofs[(OVERALL, 1)].missing == (4,)
    assert tune.llamacpp_flags() == "(not proven: no flags)"
    assert tune.schedule() == [[8, 8, picks[(OVERALL, 8)].draft_max]]


def _saturating(k: int, a: float, rise: float, scale: float) -> float:
    """A mixture-of-experts step cost: each verified token touches more experts until every one is touched."""
    return a + rise * (1.0 - math.exp(-k / scale))


def test_a_bending_step_cost_is_named_and_not_fitted_while_a_linear_one_is() -> None:
    from bench.analysis import NOT_LINEAR, monotone_curve, not_linear_at, plan_next, step_cost_bend

    grid = tuple(range(1, 17))
    bent = [ConfigParts(k, 1000.0, tuple(1000.0 * 0.8 ** i for i in range(1, k + 1)), 1000.0 * k,
                        _saturating(k, 1.0, 1.2, 2.0), True) for k in (1, 4, 8, 16)]
    prediction = fit_prediction(bent)
    assert not prediction.holds and (prediction.why or "").startswith(NOT_LINEAR)
    assert prediction.residuals and max(abs(value) for _, value in prediction.residuals) > 0.03
    assert (not_linear_at(prediction.why, 1) or "").startswith("step cost not linear in K at concurrency 1: ")
    assert plan_next(grid, (1, 4, 8, 16), prediction) == tuple(k for k in grid if k not in (1, 4, 8, 16))
    # a line with noise under the tolerance holds, with its residuals recorded
    noisy = [_chain(k, 0.8, 1.0, 0.05) for k in (1, 4, 8, 16)]
    noisy[1] = ConfigParts(4, noisy[1].drafts, noisy[1].positions, noisy[1].draft_tokens, 1.2 * 1.01, True,
                           noisy[1].requests)
    linear = fit_prediction(noisy)
    assert linear.holds and len(linear.residuals) == 4 and max(abs(v) for _, v in linear.residuals) < 0.03
    assert not_linear_at(linear.why, 1) is None
    assert step_cost_bend([1, 16], [1.0, 5.0]).bends is False  # two points: any line fits, nothing to check
    assert monotone_curve([1.0, 1.3, 1.2, 1.5]) == pytest.approx((1.0, 1.25, 1.25, 1.5))


def test_the_tune_names_a_bending_step_cost_at_its_level_and_shows_each_levels_load() -> None:
    from bench.analysis import level_load
    from bench.records import Load

    bent = fit_prediction([ConfigParts(k, 1000.0, tuple(1000.0 * 0.8 ** i for i in range(1, k + 1)), 1000.0 * k,
                                       _saturating(k, 1.0, 1.2, 2.0), True) for k in (2, 4, 8, 16)])
    scopes = {(OVERALL, 4): [_measured(k, 1.5) for k in GRID]}
    picks = decide(scopes)
    tune = Tune(grid=GRID, levels=(4,), categories=(), picks=picks, predictions={(OVERALL, 4): bent},
                rows=tune_rows(picks, {(OVERALL, 4): bent}, GRID), proofs={(OVERALL, 4): prove(GRID, GRID, bent)},
                load={4: level_load(4, [{"baseline": Load(4, 3.9, 30), "draft_max-2": Load(4, 3.1, 30)}])})
    text = tune_text(tune)
    assert "model at concurrency 4: step cost not linear in K at concurrency 4: " in text
    assert "overall at concurrency 4 (in flight: baseline 3.9, draft_max-2 3.1): " in text
    assert "warning: concurrency 4: arms ran at different loads" in text
    assert tune.to_json()["load"]["4"]["flags"]


def test_the_schedule_rises_with_load_where_the_picks_do() -> None:
    scopes = {(OVERALL, 1): [_measured(2, 1.5), _measured(8, 1.2)],
              (OVERALL, 64): [_measured(2, 1.2), _measured(8, 1.5)]}
    picks = decide(scopes)
    proofs = {key: prove((2, 8), (2, 8), None) for key in picks}
    tune = Tune(grid=(2, 8), levels=(1, 64), categories=(), picks=picks, predictions={},
                rows=tune_rows(picks, {}, (2, 8)), proofs=proofs)
    assert tune.schedule() == [[1, 63, 2], [64, 64, 8]]
