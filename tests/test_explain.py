"""The speedup explained: acceptance length per step and per request, per-position acceptance, step cost, reconciled."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from bench import OVERALL
from bench.analysis import RequestAcceptance, explain_runs, joint_and_conditional
from bench.records import Run, SampleResult, position_deltas, sample_positions, summarize


def _result(sample: str, category: str, *, tokens: int, ms: float, spec: dict | None = None) -> SampleResult:
    return SampleResult(id=sample, category=category, ok=True, turns=1, latency_s=ms / 1000, completion_tokens=tokens,
                        predicted_ms=ms, predicted_per_second=tokens * 1000 / ms, spec=spec or {})


def _run(results: list[SampleResult]) -> Run:
    return Run(config={}, selected_samples=len(results), results=tuple(results), summary=tuple(summarize(results)))


def _spec(drafts: int, accepted: int, positions: tuple[int, ...], draft_max: int = 4) -> dict:
    return {"drafts": drafts, "accepted": accepted, "draft_tokens": drafts * draft_max,
            **{f"accepted_pos_{i}": count for i, count in enumerate(positions)}}


def test_joint_is_counts_over_drafts_and_conditional_its_running_ratio() -> None:
    joint, conditional = joint_and_conditional((8.0, 4.0, 2.0, 0.0), 10.0)
    assert joint == pytest.approx((0.8, 0.4, 0.2, 0.0))
    assert conditional == pytest.approx((0.8, 0.5, 0.5, 0.0))
    assert joint_and_conditional((1.0,), 0.0) == ((), ())


def test_position_deltas_round_trip_through_a_sample_spec() -> None:
    before = {"per_position": {"0": 3.0, "1": 1.0}}
    after = {"per_position": {"0": 10.0, "1": 5.0, "2": 2.0}}
    spec = position_deltas(before, after)
    assert spec == {"accepted_pos_0": 7.0, "accepted_pos_1": 4.0, "accepted_pos_2": 2.0}
    assert sample_positions(spec) == (7.0, 4.0, 2.0)
    assert sample_positions({"drafts": 3}) == ()


def test_al_over_step_cost_reconciles_with_the_pooled_decode_speedup() -> None:
    # baseline: 10 ms a token; speculative: 40 drafted steps of 20 ms made 40 + 60 = 100 tokens
    base = _run([_result(f"s{i}", "code", tokens=100, ms=1000.0) for i in range(4)])
    spec = _run([_result(f"s{i}", "code", tokens=100, ms=800.0, spec=_spec(40, 60, (30, 20, 10, 0)))
                 for i in range(4)])
    parts = explain_runs(base, spec, draft_max=4)
    row = parts[OVERALL]
    assert row.acceptance_length == pytest.approx(2.5)
    assert row.step_cost == pytest.approx(2.0)
    assert row.explained == pytest.approx(1.25)
    assert row.measured == pytest.approx(1.25)
    assert row.reconciles is True and row.flag is None
    assert row.joint == pytest.approx((0.75, 0.5, 0.25, 0.0))
    assert row.conditional[1] == pytest.approx(0.5 / 0.75)
    assert row.per_request is not None and row.per_request.median == pytest.approx(2.5)
    assert set(parts) == {"code", OVERALL}
    assert row.as_cells()["step_cost"] == pytest.approx(2.0)


def test_steps_without_a_draft_count_in_tokens_per_step_and_the_parts_reconcile() -> None:
    base = _run([_result("a", "code", tokens=100, ms=1000.0)])
    # 30 drafts accepted 40 tokens: 60 decode steps made 100 tokens, half of them drafted
    spec = _run([_result("a", "code", tokens=100, ms=900.0, spec={"drafts": 30, "accepted": 40, "draft_tokens": 45})])
    row = explain_runs(base, spec, draft_max=4)[OVERALL]
    assert row.steps == pytest.approx(60.0)
    assert row.drafted_share == pytest.approx(0.5)
    assert row.accepted_per_draft == pytest.approx(4 / 3)
    assert row.tokens_per_step == pytest.approx(100 / 60)
    assert row.step_cost == pytest.approx(15.0 / 10.0)  # 900 ms / 60 steps over 10 ms a baseline token
    assert row.explained == pytest.approx(row.measured) and row.measured == pytest.approx(1000 / 900)
    assert row.reconciles is True and row.flag is None
    assert row.split is not None and row.split.plain is None and "1 request" in row.split.how


def test_step_cost_split_recovers_known_drafted_and_plain_costs() -> None:
    # known truth: a plain step costs 1.05 baseline tokens, a drafted one 1.6; requests draft on 10%..70% of steps
    rng = np.random.default_rng(7)
    base, spec = [], []
    for index, share in enumerate(np.linspace(0.1, 0.7, 12)):
        steps = 200
        drafts = round(share * steps)
        accepted = 2 * drafts
        ms = (drafts * 1.6 + (steps - drafts) * 1.05) * 10.0 * float(np.exp(rng.normal(0, 0.01)))
        base.append(_result(f"s{index}", "code", tokens=steps + accepted, ms=(steps + accepted) * 10.0))
        spec.append(_result(f"s{index}", "code", tokens=steps + accepted, ms=ms,
                            spec={"drafts": drafts, "accepted": accepted}))
    row = explain_runs(_run(base), _run(spec))[OVERALL]
    assert row.split is not None and row.split.drafted is not None and row.split.plain is not None
    assert row.split.drafted == pytest.approx(1.6, rel=0.03) and row.split.plain == pytest.approx(1.05, rel=0.03)
    share = row.drafted_share
    assert share is not None and row.step_cost is not None
    assert (1 - share) * row.split.plain + share * row.split.drafted == pytest.approx(row.step_cost)
    assert row.explained == pytest.approx(row.measured, rel=1e-9) and row.reconciles is True
    assert row.as_cells()["plain_step_cost"] == pytest.approx(row.split.plain)


def test_split_is_withheld_when_every_request_drafts_alike_or_every_step_drafts() -> None:
    base = _run([_result(f"s{i}", "code", tokens=100, ms=1000.0) for i in range(5)])
    alike = _run([_result(f"s{i}", "code", tokens=100, ms=900.0, spec={"drafts": 20, "accepted": 20})
                  for i in range(5)])
    row = explain_runs(base, alike)[OVERALL]
    assert row.split is not None and row.split.drafted is None and "barely differ" in row.split.how
    every = _run([_result(f"s{i}", "code", tokens=100, ms=900.0, spec={"drafts": 50, "accepted": 50})
                  for i in range(5)])
    row = explain_runs(base, every)[OVERALL]
    assert row.split is not None and row.split.drafted == pytest.approx(row.step_cost) and row.split.plain is None


def test_more_drafts_than_decode_steps_is_flagged() -> None:
    base = _run([_result("a", "code", tokens=100, ms=1000.0)])
    spec = _run([_result("a", "code", tokens=100, ms=800.0, spec={"drafts": 80, "accepted": 40})])
    row = explain_runs(base, spec)[OVERALL]
    assert row.reconciles is False
    assert row.flag is not None and "80 drafts in 60 decode steps: more drafts" in row.flag
    over = _run([_result("a", "code", tokens=100, ms=800.0, spec={"drafts": 30, "accepted": 120})])
    row = explain_runs(base, over)[OVERALL]
    assert row.step_cost is None and row.reconciles is False
    assert row.flag is not None and "120 accepted draft tokens for 100 output tokens" in row.flag


def test_server_wide_run_counters_are_flagged_as_not_covering_the_row() -> None:
    base = _run([_result("a", "code", tokens=100, ms=1000.0)])
    results = (replace(_result("a", "code", tokens=100, ms=800.0), draft_n=20, draft_n_accepted=4),)
    spec = Run(config={}, selected_samples=1, results=results, summary=tuple(summarize(list(results))),
               meta={"acceptance": {"source": "metrics", "drafts": 10, "accepted": 10, "draft_tokens": 40,
                                    "acceptance_length": 2.0, "server_wide": True, "per_position": [0.6, 0.4]}})
    row = explain_runs(base, spec)[OVERALL]
    assert row.source == "run counters"
    assert row.joint == pytest.approx((0.6, 0.4))
    assert row.flag is not None and "server-wide" in row.flag


def test_request_distribution_quantiles_and_histogram() -> None:
    spread = RequestAcceptance.of([1.0, 1.2, 1.6, 2.0, 2.4, 3.9, math.nan])
    assert spread is not None and spread.n == 6
    assert spread.median == pytest.approx(1.8)
    assert dict(spread.histogram) == {1.0: 2, 1.5: 1, 2.0: 2, 3.5: 1}
    assert RequestAcceptance.of([]) is None


def test_compare_stats_shows_acceptance_length_and_step_cost_on_every_row_with_counters() -> None:
    import json

    from bench.analysis import compare
    from bench.render import render_json, render_markdown, render_text

    base = _run([_result(f"{cat}{i}", cat, tokens=100, ms=1000.0 * (1 + 0.01 * i)) for cat in ("code", "chat")
                 for i in range(6)])
    spec = _run([_result(f"{cat}{i}", cat, tokens=100, ms=(800.0 if cat == "code" else 1000.0) * (1 + 0.01 * i),
                         spec=_spec(40, 60, (30, 20, 10, 0)) if cat == "code" else _spec(50, 50, (30, 15, 5, 0)))
                 for cat in ("code", "chat") for i in range(6)])
    comparison = compare(base, spec)
    assert all(row.parts is not None and row.parts.step_cost is not None and row.acceptance_length is not None
               for row in comparison.stats)
    text = render_text(comparison)
    assert "Speedup explained" in text and "step cost (x base token)" in text and "tokens/step" in text
    markdown = render_markdown(comparison)
    assert "explained" in markdown and "accepted/draft (tokens)" in markdown and "steps drafted" in markdown
    rows = json.loads(render_json(comparison))["stats"]
    assert {row["category"]: round(row["step_cost"], 3) for row in rows} == {"code": 2.0, "chat": 2.0,
                                                                              "overall": 2.0}
    assert all(row["reconciles"] is True for row in rows)
    assert rows[0]["acceptance_joint"] == [0.75, 0.5, 0.25, 0.0]
