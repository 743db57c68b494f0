"""The tune's pure parts: the proven pick, the prediction model, the plan that spends the budget, the outputs."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from bench import OVERALL
from bench.analysis import (
    NOT_SEPARABLE,
    ConfigParts,
    Measured,
    Tune,
    decide,
    default_budget,
    estimate_from_interval,
    fit_prediction,
    llamacpp_flags,
    plan_next,
    pooled_plain_cost,
    tune_rows,
    with_plain_steps,
)


def _measured(k: int, truth: float, n: int = 30, sigma: float = 0.03, seed: int = 0) -> Measured:
    rng = np.random.default_rng(seed + k)
    return Measured(k, {f"s{i}": math.log(truth) + float(rng.normal(0.0, sigma)) for i in range(n)})


def _pick(configs: list[Measured], tie_margin: float = 0.02):
    return decide({(OVERALL, 1): configs}, tie_margin=tie_margin)[(OVERALL, 1)]


def test_a_clear_best_is_picked_when_shown_better_than_each_other() -> None:
    pick = _pick([_measured(2, 1.2), _measured(4, 1.5), _measured(8, 1.3)])
    assert pick.draft_max == 4 and pick.leader == 4 and "shown better" in pick.reason
    assert [row.verdict for row in pick.rows] == ["faster", "faster", "faster"]


def test_leaders_that_cannot_be_told_apart_give_the_smaller_draft_length() -> None:
    pick = _pick([_measured(2, 1.1, sigma=0.2), _measured(4, 1.5, sigma=0.2), _measured(8, 1.52, sigma=0.2)])
    assert pick.draft_max == 4 and pick.leader == 8
    assert NOT_SEPARABLE in pick.reason and pick.margin is None
    assert "leaders (8)" in pick.reason and pick.tied == (4, 8)  # only leaders shown faster than the baseline


def test_a_lone_faster_leader_among_unseparated_ones_is_picked_and_said_so() -> None:
    pick = _pick([_measured(2, 1.2, n=6, sigma=1.0), _measured(4, 1.5, n=60, sigma=0.05)])
    assert pick.draft_max == 4 and "not shown faster than the baseline" in pick.reason


def test_a_tie_shown_within_the_margin_says_the_margin() -> None:
    base = np.random.default_rng(1).normal(0.0, 0.05, 200)
    first = Measured(4, {f"s{i}": math.log(1.5) + value for i, value in enumerate(base)})
    second = Measured(8, {f"s{i}": math.log(1.5) + value + 0.001 * ((-1) ** i) for i, value in enumerate(base)})
    pick = _pick([first, second])
    assert pick.draft_max == 4 and pick.margin is not None and pick.margin < 0.02
    assert "shown within" in pick.reason


def test_zero_when_no_configuration_is_shown_faster_than_the_baseline() -> None:
    pick = _pick([_measured(2, 0.97), _measured(4, 0.9), _measured(8, 1.0)])
    assert pick.draft_max == 0 and "do not speculate" in pick.reason


def test_undecided_when_nothing_has_enough_samples() -> None:
    pick = _pick([_measured(2, 1.5, n=3), _measured(4, 1.6, n=3)])
    assert pick.draft_max is None


def test_every_scope_given_is_one_family() -> None:
    # one scope alone decides at 5%; among many scopes its test meets a stricter Holm level
    one = decide({("a", 1): [_measured(4, 1.03, n=12, sigma=0.03, seed=3)]})[("a", 1)]
    many = decide({(f"c{i}", 1): [_measured(4, 1.03, n=12, sigma=0.03, seed=3)] for i in range(10)})
    assert one.rows[0].high - one.rows[0].low < many[("c0", 1)].rows[0].high - many[("c0", 1)].rows[0].low


def test_an_analysis_interval_reads_back_as_the_same_test() -> None:
    estimate = _measured(4, 1.4).against_baseline()
    assert estimate is not None
    point, low, high = estimate.interval(0.95)
    again = estimate_from_interval(point, low, high, 0.95, estimate.df, estimate.n)
    assert again is not None
    assert again.interval(0.99) == pytest.approx(estimate.interval(0.99))


def _chain(k: int, alpha: float, a: float, b: float, drafts: float = 1000.0) -> ConfigParts:
    positions = tuple(drafts * alpha ** i for i in range(1, k + 1))
    return ConfigParts(k, drafts, positions, drafts * k, a + b * k, True, {"r": (drafts, positions)})


def test_the_chain_model_predicts_every_k_up_to_the_largest_measured() -> None:
    prediction = fit_prediction([_chain(1, 0.8, 1.1, 0.05), _chain(16, 0.8, 1.1, 0.05)])
    assert prediction.holds and prediction.a == pytest.approx(1.1) and prediction.b == pytest.approx(0.05)
    for k in (3, 5, 9):
        truth = (1 - 0.8 ** (k + 1)) / (1 - 0.8) / (1.1 + 0.05 * k)
        assert prediction.speedup(k) == pytest.approx(truth)
    assert prediction.speedup(17) is None
    assert "cost(K) = 1.100 + 0.0500 K" in prediction.text


@pytest.mark.parametrize(("parts", "why"), [
    ([ConfigParts(2, 100.0, (80.0, 60.0), 150.0, 1.2, True), _chain(8, 0.8, 1.1, 0.05)], "variable-length"),
    ([ConfigParts(2, 1e3, (800.0, 640.0), 2e3, 1.2, True), ConfigParts(8, 1e3, (500.0,) * 8, 8e3, 1.5, True)],
     "no per-request counters"),
    ([_chain(2, 0.8, 1.1, 0.05), ConfigParts(8, 100.0, (80.0, 64.0), 800.0, 1.5, True)], "per-position"),
    ([_chain(2, 0.8, 1.1, 0.05), _chain(8, 0.5, 1.1, 0.05)], "moves with the draft length"),
    ([_chain(2, 0.8, 1.1, 0.05)], "fewer than two"),
    ([_chain(2, 0.8, 1.1, 0.05), ConfigParts(8, 1000.0, _chain(8, 0.8, 1, 0).positions, 8000.0, 1.5, False)],
     "does not reconcile"),
])
def test_where_the_model_does_not_hold_it_says_why(parts: list[ConfigParts], why: str) -> None:
    prediction = fit_prediction(parts)
    if why == "no per-request counters":  # pooled counters alone: predicted, and said to be a ratio of means
        assert prediction.holds and why in prediction.text
        return
    assert not prediction.holds and why in (prediction.why or "")
    assert prediction.speedup(2) is None and prediction.text.startswith("no prediction")


def test_the_plan_measures_extremes_then_the_predicted_best_and_its_neighbours() -> None:
    grid = list(range(1, 17))
    assert plan_next(grid, [], None) == (1, 16)
    prediction = fit_prediction([_chain(1, 0.8, 1.1, 0.05), _chain(16, 0.8, 1.1, 0.05)])
    best = max(grid, key=lambda k: prediction.speedup(k) or 0)
    assert plan_next(grid, [1, 16], prediction) == (best, best - 1, best + 1)
    assert plan_next(grid, [1, 16, best - 1, best, best + 1], prediction) == ()
    assert plan_next(grid, [1, 16], None) == tuple(range(2, 16))  # no model: the rest of the grid
    assert plan_next(grid, [1, 16], prediction, budget=3) == (best,)
    assert default_budget(grid) == 8 and default_budget([2, 4, 8, 16]) == 3


def test_tune_json_has_exactly_the_issue_shape_and_the_schedule_merges_levels() -> None:
    configs = {level: [_measured(2, 1.2), _measured(4, 1.5 if level < 8 else 1.21)] for level in (1, 4, 8)}
    configs[16] = [_measured(2, 0.95), _measured(4, 0.9)]
    picks = decide({(OVERALL, level): items for level, items in configs.items()})
    tune = Tune(grid=(2, 4), levels=(1, 4, 8, 16), categories=(), picks=picks, predictions={},
                rows=tune_rows(picks, {}, (2, 4)), mode="ngram-mod")
    data = tune.to_json()
    assert set(data) == {"recommendation", "picks", "configs"}
    assert set(data["recommendation"]) == {"overall", "per_category", "per_concurrency"}
    assert data["recommendation"]["per_concurrency"] == {"1": 4, "4": 4, "8": 2, "16": 0}
    assert set(data["configs"][0]) == {"draft_max", "category", "concurrency", "measured", "low", "high",
                                       "predicted", "verdict"}
    assert tune.schedule() == [[1, 7, 4], [8, 15, 2], [16, 16, 0]]
    assert tune.llamacpp_flags() == "--spec-type ngram-mod --spec-ngram-mod-n-max 4"


def test_drafts_cut_short_only_by_the_end_of_each_request_are_still_fixed_length() -> None:
    positions = {2: (36.0, 36.0), 16: tuple([36.0] * 16)}
    requests = {k: {f"r{i}": (4.0, tuple(value / 9 for value in own)) for i in range(9)}
                for k, own in positions.items()}
    short = ConfigParts(2, 36.0, positions[2], 72.0, 1.1, True, requests[2])
    last_cut = ConfigParts(16, 36.0, positions[16], 36 * 16 - 9 * 15, 1.9, True, requests[16])  # 9 last drafts cut
    assert fit_prediction([short, last_cut]).holds
    shorter = ConfigParts(16, 36.0, positions[16], 36 * 16 - 9 * 15 - 60, 1.9, True, requests[16])
    prediction = fit_prediction([short, shorter])
    assert not prediction.holds and "variable-length" in (prediction.why or "")


@pytest.mark.parametrize(("mode", "flags"), [
    ("ngram-mod", "--spec-type ngram-mod --spec-ngram-mod-n-max 8"),
    ("ngram-simple", "--spec-type ngram-simple --spec-ngram-simple-size-m 8"),
    ("ngram-map-k4v", "--spec-type ngram-map-k4v --spec-ngram-map-k4v-size-m 8"),
    ("draft", "--spec-type draft-simple --spec-draft-model DRAFT.gguf --spec-draft-n-max 8"),
    ("draft-dspark", "--spec-type draft-dspark --spec-draft-model DRAFT.gguf --spec-draft-n-max 8"),
])
def test_llamacpp_flags_name_the_drafters_own_length_flag(mode: str, flags: str) -> None:
    assert llamacpp_flags(mode, 8) == flags
    assert "--draft-max" not in flags  # removed from llama-server: it exits on it


def test_llamacpp_flags_of_an_unknown_mode_name_no_flag() -> None:
    assert llamacpp_flags("eagle", 8) == "(no llama.cpp flags known for mode 'eagle': give your server draft length 8)"


def _mixed(k: int, alpha: float, share: float, plain: float, a: float, b: float, *, split: bool) -> ConfigParts:
    """A drafter that drafts on `share` of 1000 decode steps: its measured parts, the split known or not."""
    chain = _chain(k, alpha, a, b, drafts=1000.0 * share)
    drafted = a + b * k
    cost = (1 - share) * plain + share * drafted
    return replace(chain, step_cost=cost, steps=1000.0, drafted_cost=drafted if split else None,
                   plain_cost=plain if split else None)


def test_steps_without_a_draft_are_predicted_with_the_plain_share_and_cost() -> None:
    # known truth: drafts on 20% of steps, a plain step costs 1.02 baseline tokens, a drafted one 1.1 + 0.05 K
    configs = [_mixed(2, 0.8, 0.2, 1.02, 1.1, 0.05, split=True), _mixed(16, 0.8, 0.2, 1.02, 1.1, 0.05, split=False)]
    assert pooled_plain_cost(configs) == pytest.approx(1.02)
    assert configs[0].plain_steps == pytest.approx(800.0)
    prediction = with_plain_steps(configs)
    assert prediction.holds and prediction.plain_share == pytest.approx(0.8)
    assert prediction.a == pytest.approx(1.1) and prediction.b == pytest.approx(0.05)
    for k in (3, 8):
        length = (1 - 0.8 ** (k + 1)) / (1 - 0.8)
        truth = (1 + 0.2 * (length - 1)) / (0.8 * 1.02 + 0.2 * (1.1 + 0.05 * k))
        assert prediction.speedup(k) == pytest.approx(truth)
    assert "drafted share s = 0.200" in prediction.text
    # where every step drafts, the plain steps change nothing
    chains = [_chain(1, 0.8, 1.1, 0.05), _chain(16, 0.8, 1.1, 0.05)]
    assert with_plain_steps(chains).speedup(5) == pytest.approx(fit_prediction(chains).speedup(5))


def test_without_a_split_the_cost_per_decode_step_is_fitted_where_the_drafted_share_holds_still() -> None:
    configs = [_mixed(2, 0.8, 0.2, 1.02, 1.1, 0.05, split=False), _mixed(16, 0.8, 0.2, 1.02, 1.1, 0.05, split=False)]
    prediction = with_plain_steps(configs)
    assert prediction.holds and math.isnan(prediction.plain_cost) and "a decode step, drafted or not" in prediction.text
    for k in (3, 8):  # the per-step cost is linear in K at a fixed share, so the prediction is exact
        length = (1 - 0.8 ** (k + 1)) / (1 - 0.8)
        truth = (1 + 0.2 * (length - 1)) / (0.8 * 1.02 + 0.2 * (1.1 + 0.05 * k))
        assert prediction.speedup(k) == pytest.approx(truth)
    moving = [configs[0], _mixed(16, 0.8, 0.5, 1.02, 1.1, 0.05, split=False)]
    prediction = with_plain_steps(moving)
    assert not prediction.holds and "the drafted share moves with the draft length" in (prediction.why or "")
