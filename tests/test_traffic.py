"""Two arms at one schedule and a sweep of rates, on synthetic requests whose truth is known."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from bench import BenchError
from bench.analysis import Slo, compare_traffic, rate_sweep, request_timing
from bench.records import SampleResult


def _arm(rng, n, *, block_size, service, speedup=1.0, drift=0.0, tokens=32):
    """Requests due every 0.1 s; each block's service time shares a drift; the candidate is `speedup` faster."""
    out = []
    block_factor = {}
    for index in range(n):
        block = index // block_size
        block_factor.setdefault(block, math.exp(rng.normal(0, drift)) if drift else 1.0)
        latency = service * block_factor[block] * math.exp(rng.normal(0, 0.2)) / speedup
        out.append(request_timing(SampleResult(
            id=f"s{index}", category="qa", ok=True, turns=1, latency_s=latency, ttft_s=latency / 4,
            tpot_s=latency / tokens, completion_tokens=tokens, scheduled_s=index * 0.1, sent_s=index * 0.1,
            batch=block, predicted_per_second=tokens / latency)))
    return out


@pytest.mark.parametrize("blocks", [6, 12, 24])
def test_paired_speedup_by_block_covers_truth(blocks):
    rng = np.random.default_rng(blocks)
    covered = 0
    for _ in range(150):
        seed = int(rng.integers(1 << 30))
        base = _arm(np.random.default_rng(seed), blocks * 8, block_size=8, service=1.0, drift=0.3)
        spec = _arm(np.random.default_rng(seed), blocks * 8, block_size=8, service=1.0, drift=0.3, speedup=1.0)
        spec = [request_timing(SampleResult(
            id=r.id, category="qa", ok=True, turns=1, latency_s=r.e2e_s / 1.25 * math.exp(rng.normal(0, 0.1)),
            ttft_s=r.ttft_s, completion_tokens=32, scheduled_s=r.scheduled_s, sent_s=r.sent_s, batch=r.block,
            predicted_per_second=r.decode_t_s * 1.25)) for r in spec]
        comparison = compare_traffic(base, spec, names=("baseline", "ngram"))
        assert comparison.speedup("decode_speedup").estimate.point == pytest.approx(1.25)
        interval = comparison.speedup("latency_speedup").by_block
        covered += interval.low <= 1.25 <= interval.high
    assert covered / 150 >= 0.92


def test_compare_traffic_verdicts_and_goodput():
    rng = np.random.default_rng(3)
    seed = 9
    base = _arm(np.random.default_rng(seed), 120, block_size=10, service=1.0)
    spec = _arm(np.random.default_rng(seed), 120, block_size=10, service=1.0, speedup=1.6)
    del rng
    comparison = compare_traffic(base, spec, names=("baseline", "ngram"), slo=Slo(e2e_s=1.0), rate=10.0)
    latency = comparison.speedup("latency_speedup")
    assert latency.estimate.verdict == "better" and latency.estimate.point == pytest.approx(1.6, rel=0.02)
    assert comparison.blocks == 12 and comparison.pairs == 120
    assert comparison.goodput.verdict == "better"
    assert comparison.goodput_candidate.overall.attainment.point > comparison.goodput_baseline.overall.attainment.point
    assert comparison.warnings() == []


def _comparison_at(rate, speedup, seed):
    base = _arm(np.random.default_rng(seed), 120, block_size=10, service=0.5 * rate)
    spec = _arm(np.random.default_rng(seed), 120, block_size=10, service=0.5 * rate, speedup=speedup)
    return compare_traffic(base, spec, names=("baseline", "ngram"), slo=Slo(e2e_s=2.0), rate=rate)


def test_rate_sweep_places_the_known_break_even():
    # speculation's latency gain shrinks with load: 1.5x at 1 req/s, 1.3x at 2, none at 4, slower at 8
    truth = {1.0: 1.5, 2.0: 1.3, 4.0: 1.0, 8.0: 0.8}
    sweep = rate_sweep([_comparison_at(rate, speedup, seed=int(rate)) for rate, speedup in truth.items()])
    (arm, crossing), = sweep.break_even
    assert arm == "ngram" and sweep.rates == (1.0, 2.0, 4.0, 8.0)
    assert "4" in crossing.text and "2" in crossing.text
    # service 0.5 s x rate against e2e 2 s: baseline meets it up to 2 req/s (1 s median), not at 4 (2 s median)
    capacity = {item.arm: item for item in sweep.capacity}
    assert capacity["baseline"].rate == 2.0
    assert capacity["ngram"].rate is not None and capacity["ngram"].rate >= 2.0
    assert {level.arm for level in sweep.levels} == {"baseline", "ngram"} and len(sweep.levels) == 8


def test_rate_sweep_needs_rates():
    base = _arm(np.random.default_rng(1), 20, block_size=5, service=1.0)
    with pytest.raises(BenchError, match="rate"):
        rate_sweep([compare_traffic(base, base, names=("a", "b"))])
    with pytest.raises(BenchError, match="pairs up"):
        compare_traffic(base, [], names=("a", "b"))


def test_renderings_say_every_part(tmp_path):
    import json

    from bench.render import goodput_text, rate_sweep_text, throughput_line, traffic_json, traffic_text

    truth = {1.0: 1.5, 2.0: 1.3, 4.0: 1.0}
    comparisons = [_comparison_at(rate, speedup, seed=int(rate)) for rate, speedup in truth.items()]
    text = traffic_text(comparisons[0])
    assert "ngram vs baseline at 1 req/s: 120 paired requests in 12 alternating blocks" in text
    assert "latency speedup (from schedule)" in text and "attainment change (points)" in text
    assert "achieved rate" in throughput_line(comparisons[0].throughput_baseline)
    assert "SLO e2e=2" in goodput_text(comparisons[0].goodput_baseline)
    markdown = traffic_text(comparisons[0], markdown=True)
    assert "| metric |" in markdown
    sweep = rate_sweep(comparisons)
    rendered = rate_sweep_text(sweep)
    assert "break-even (ngram, latency from the schedule)" in rendered and "baseline: meets the SLOs" in rendered
    data = json.loads(traffic_json(sweep))
    assert data["rates"] == [1.0, 2.0, 4.0] and data["break_even"][0][0] == "ngram"


def _categorised(requests, names):
    """The same requests spread round-robin over `names` categories."""
    return [dataclasses.replace(r, category=names[index % len(names)]) for index, r in enumerate(requests)]


def test_category_rows_are_one_holm_family_and_overall_is_primary():
    names = ("code", "math", "qa", "chat")
    base = _categorised(_arm(np.random.default_rng(4), 480, block_size=10, service=1.0), names)
    spec = _categorised(_arm(np.random.default_rng(4), 480, block_size=10, service=1.0, speedup=1.3), names)
    comparison = compare_traffic(base, spec, names=("baseline", "ngram"), rate=10.0)
    overall = [item for item in comparison.speedups if item.primary]
    rows = [item for item in comparison.speedups if not item.primary]
    assert {item.category for item in rows} == set(names) and len(rows) == 12
    assert all(item.estimate.confidence == pytest.approx(0.95) for item in overall)
    tested = [item for item in rows if item.estimate.has_interval]
    levels = sorted(item.estimate.confidence for item in tested)
    assert len(tested) == 12 and levels[0] == pytest.approx(0.95) and levels[-1] == pytest.approx(1 - 0.05 / 12)
    assert comparison.speedup("latency_speedup").primary
    assert comparison.speedup("latency_speedup", "qa").estimate.verdict == "better"
    from bench.render import traffic_text

    text = traffic_text(comparison)
    assert "Holm" in text and "qa: latency speedup (from schedule)" in text and "(at " in text


def test_category_family_keeps_false_alarms_near_five_percent():
    names = ("a", "b", "c", "d")
    rng = np.random.default_rng(11)
    alarms = 0
    trials = 200
    for _ in range(trials):
        seed = int(rng.integers(1 << 30))
        base = _categorised(_arm(np.random.default_rng(seed), 240, block_size=6, service=1.0), names)
        noise = np.random.default_rng(seed + 1)
        spec = [dataclasses.replace(r, e2e_s=r.e2e_s * math.exp(noise.normal(0, 0.2)),
                                    ttft_s=r.ttft_s * math.exp(noise.normal(0, 0.2)),
                                    decode_t_s=r.decode_t_s * math.exp(noise.normal(0, 0.2)))
                for r in base]
        found = compare_traffic(base, spec, names=("baseline", "same"), threshold=0.0).speedups
        p_values = [item.estimate.p_value for item in found if not item.primary and item.estimate.has_interval]
        assert len(p_values) == 12
        alarms += any(item.estimate.verdict in ("better", "worse") for item in found if not item.primary)
    assert alarms / trials <= 0.09


_TRUTHS = {"coding": 2.5, "math": 1.8, "rag": 1.4, "qa": 1.1}


def _strata_arms(seed, blocks, *, per_block=8, drift=0.05):
    """Two arms of an ABBA run over four categories whose true decode and latency speedups differ (`_TRUTHS`),
    categories shuffled over the blocks so a block's mix varies; a block drift shared by the block."""
    rng = np.random.default_rng(seed)
    names = list(_TRUTHS)
    categories = rng.permutation(np.arange(blocks * per_block) % len(names))
    shift = rng.normal(0.0, drift, blocks)
    base, spec = [], []
    for index, which in enumerate(categories):
        block = index // per_block
        category = names[which]
        latency = math.exp(rng.normal(0.0, 0.1))
        gain = _TRUTHS[category] * math.exp(shift[block] + rng.normal(0.0, 0.15))
        for arm, seconds in ((base, latency), (spec, latency / gain)):
            arm.append(request_timing(SampleResult(
                id=f"s{index}", category=category, ok=True, turns=1, latency_s=seconds, ttft_s=seconds / 4,
                tpot_s=seconds / 32, completion_tokens=32, scheduled_s=index * 0.1, sent_s=index * 0.1,
                batch=block, predicted_per_second=32 / seconds)))
    return base, spec


def test_overall_by_block_rows_are_stratified_narrower_and_named():
    from bench.analysis import BLOCKED_METHOD, geomean_t_intervals
    from bench.render import traffic_json, traffic_text

    base, spec = _strata_arms(4, 12)
    comparison = compare_traffic(base, spec, names=("baseline", "ngram"), slo=Slo(e2e_s=0.8), rate=5.0)
    decode = comparison.speedup("decode_speedup")
    assert decode.estimate.estimator.startswith(BLOCKED_METHOD) and decode.estimate.low == decode.by_block.low
    logs = np.log([b.decode_t_s / a.decode_t_s for a, b in zip(base, spec, strict=True)])
    assert decode.estimate.point == pytest.approx(math.exp(logs.mean()))
    _, low, high = geomean_t_intervals(logs.reshape(12, 8).mean(axis=1)[None, :])  # blocks as units, unstratified
    assert math.log(decode.by_block.high / decode.by_block.low) < 0.75 * math.log(high[0] / low[0])
    assert comparison.speedup("decode_speedup", "coding").estimate.estimator is None  # category rows: plain t
    assert comparison.goodput.overall_estimator.startswith(BLOCKED_METHOD)
    assert f"overall rows: {decode.estimate.estimator}" in traffic_text(comparison)
    assert f'"overall_estimator": "{comparison.goodput.overall_estimator}"' in traffic_json(comparison)


def test_sweep_break_even_reads_the_stratified_overall_row():
    from bench.analysis import BLOCKED_METHOD
    from bench.render import rate_sweep_text, traffic_json

    comparisons = []
    for rate in (1.0, 2.0):
        base, spec = _strata_arms(int(rate), 8)
        comparisons.append(compare_traffic(base, spec, names=("baseline", "ngram"), slo=Slo(e2e_s=0.8), rate=rate))
    sweep = rate_sweep(comparisons)
    for item in sweep.comparisons:
        assert item.speedup("latency_speedup").estimate.estimator.startswith(BLOCKED_METHOD)
    text = rate_sweep_text(sweep)
    assert f"overall intervals and break-even: {BLOCKED_METHOD}" in text
    assert BLOCKED_METHOD in traffic_json(sweep)
