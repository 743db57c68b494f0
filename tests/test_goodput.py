"""Throughput, SLO attainment and goodput, with their intervals checked on synthetic truth."""

from __future__ import annotations

import dataclasses
import math
import statistics

import numpy as np
import pytest

from bench import OVERALL, BenchError
from bench.analysis import (
    ATTAINMENT,
    GOODPUT,
    Slo,
    attainment_interval,
    goodput,
    paired_goodput,
    parse_slo,
    request_timing,
    throughput,
    wilson_interval,
)
from bench.records import SampleResult


def _result(index, *, ok=True, latency=1.0, ttft=0.1, tpot=0.01, scheduled=None, sent=None, tokens=10,
            category="qa", block=None, repeat=0):
    return SampleResult(
        id=f"s{index}", category=category, ok=ok, turns=1, latency_s=latency, completion_tokens=tokens,
        ttft_s=ttft, tpot_s=tpot, scheduled_s=scheduled, sent_s=sent, batch=block, repeat=repeat,
    )


def test_parse_slo_any_subset():
    assert parse_slo("ttft=0.5,tpot=0.05,e2e=20") == Slo(ttft_s=0.5, tpot_s=0.05, e2e_s=20.0)
    assert parse_slo("e2e=3") == Slo(e2e_s=3.0)
    assert parse_slo(" TTFT = 1 ").ttft_s == 1.0
    assert parse_slo("ttft=0.5,e2e=20").text() == "ttft=0.5,e2e=20"
    assert not parse_slo("e2e=3").needs_stream


@pytest.mark.parametrize(("text", "message"), [
    ("", "expected name=seconds"), ("ttft", "expected name=seconds"), ("itl=1", "expected name=seconds"),
    ("ttft=x", "must be a number"), ("ttft=-1", "positive"), ("e2e=inf", "positive"), ("e2e=1,e2e=2", "twice"),
])
def test_bad_slo_is_a_one_line_error(text, message):
    with pytest.raises(BenchError, match=message) as caught:
        parse_slo(text)
    assert "\n" not in str(caught.value)


def test_latencies_count_from_the_scheduled_arrival():
    timing = request_timing(_result(0, latency=1.0, ttft=0.2, tpot=0.05, scheduled=2.0, sent=3.5))
    assert timing.queue_wait_s == pytest.approx(1.5)
    assert timing.ttft_s == pytest.approx(1.7)
    assert timing.e2e_s == pytest.approx(2.5)
    assert timing.tpot_s == pytest.approx(0.05)  # no queue inside a token gap
    assert timing.end_s == pytest.approx(4.5) and timing.first_token_s == pytest.approx(3.7)
    assert not timing.meets(Slo(e2e_s=2.0)) and timing.meets(Slo(e2e_s=2.5, tpot_s=0.05))
    # a closed-loop record without schedule times: sent when due
    assert request_timing(_result(1, latency=1.0)).e2e_s == pytest.approx(1.0)


def test_failed_request_meets_no_slo_and_missing_timing_misses():
    assert not request_timing(_result(0, ok=False, latency=0.1)).meets(Slo(e2e_s=10))
    assert not request_timing(_result(0, ttft=None)).meets(Slo(ttft_s=10))


def test_throughput_by_hand():
    # 4 requests due every 0.5 s from 0.5; the client sent the last one 1 s late
    results = [_result(i, latency=1.0, scheduled=0.5 * (i + 1), sent=0.5 * (i + 1), tokens=20) for i in range(3)]
    results.append(_result(3, ok=False, latency=0.5, scheduled=2.0, sent=3.0, tokens=0))
    measured = throughput([request_timing(r) for r in results])
    assert measured.duration_s == pytest.approx(3.0)  # from the first arrival (0.5) to the last end (3.5)
    assert measured.request_throughput == pytest.approx(3 / 3.0)
    assert measured.output_throughput == pytest.approx(60 / 3.0)
    assert measured.offered_rate == pytest.approx(3 / 1.5)
    assert measured.achieved_rate == pytest.approx(3 / 2.5)
    assert measured.max_queue_wait_s == pytest.approx(1.0)
    assert measured.fell_behind
    assert "fell behind" in measured.warning()


def test_goodput_per_category_by_hand():
    results = [_result(i, latency=0.5 if i % 4 else 3.0, scheduled=i * 0.1, sent=i * 0.1,
                       category="a" if i < 40 else "b") for i in range(80)]
    table = goodput([request_timing(r) for r in results], Slo(e2e_s=1.0))
    overall = table.overall
    assert overall.requests == 80 and overall.good == 60
    assert overall.attainment.point == pytest.approx(0.75)
    duration = 7.6 + 3.0  # request 76 ends last; the first arrives at 0
    assert table.throughput.duration_s == pytest.approx(duration)
    assert overall.goodput.point == pytest.approx(60 / duration)
    assert overall.attainment.low < 0.75 < overall.attainment.high
    assert overall.goodput.low == pytest.approx(overall.attainment.low * 80 / duration)
    assert [row.category for row in table.rows] == ["a", "b", OVERALL]
    assert ATTAINMENT.higher_is_better and GOODPUT.higher_is_better


def test_goodput_withholds_intervals_below_the_minimum():
    results = [_result(i, scheduled=i * 0.1, sent=i * 0.1) for i in range(10)]
    row = goodput([request_timing(r) for r in results], Slo(e2e_s=5.0)).overall
    assert row.attainment.point == 1.0 and not row.attainment.has_interval
    assert "fewer than 20" in row.attainment.withheld


def test_ttft_slo_on_a_non_streamed_run_is_refused():
    results = [_result(i, ttft=None, tpot=None) for i in range(3)]
    with pytest.raises(BenchError, match="e2e alone"):
        goodput([request_timing(r) for r in results], Slo(ttft_s=1.0))


@pytest.mark.parametrize("share", [0.5, 0.9, 0.97])
@pytest.mark.parametrize("n", [20, 50, 300])
def test_attainment_interval_covers_independent_truth(share, n):
    rng = np.random.default_rng(n * 100 + int(share * 100))
    intervals = [attainment_interval(list(rng.random(n) < share)) for _ in range(400)]
    printed = [interval for interval in intervals if interval.has_interval]
    assert len(printed) >= 0.9 * len(intervals)  # withheld only when neighbours look alike by chance
    assert sum(_covers(interval, share) for interval in printed) / len(printed) >= 0.93


def _correlated_flags(rng, n, phi, share):
    """Flags below a threshold of an AR(1) Gaussian series: neighbouring requests share a queue."""
    latent = np.empty(n)
    latent[0] = rng.normal()
    noise = rng.normal(size=n) * math.sqrt(1 - phi * phi)
    for index in range(1, n):
        latent[index] = phi * latent[index - 1] + noise[index]
    return list(latent < statistics.NormalDist().inv_cdf(share))


def test_attainment_interval_covers_serially_correlated_truth_where_wilson_does_not():
    rng = np.random.default_rng(5)
    ours = wilson = 0
    for _ in range(400):
        flags = _correlated_flags(rng, 300, 0.5, 0.8)
        ours += _covers(attainment_interval(flags), 0.8)
        low, high = wilson_interval(sum(flags), len(flags))
        wilson += low <= 0.8 <= high
    assert ours / 400 >= 0.92
    assert wilson / 400 < 0.88


def test_attainment_interval_withheld_when_neighbours_are_too_alike():
    flags = [True] * 15 + [False] * 10 + [True] * 15  # three runs: about 4 independent outcomes
    interval = attainment_interval(flags)
    assert not interval.has_interval and "too alike" in interval.withheld


def _covers(interval, truth):
    return interval.low <= truth <= interval.high


def _paired_arms(rng, blocks, per_block, base, gain):
    """Two arms on one schedule: block drift shifts both arms' chance of meeting the SLO alike."""
    arm_a, arm_b = [], []
    for block in range(blocks):
        drift = rng.uniform(-0.15, 0.15)
        for slot in range(per_block):
            index = block * per_block + slot
            due = index * 0.1
            for arm, share in ((arm_a, base + drift), (arm_b, base + gain + drift)):
                latency = 0.5 if rng.random() < share else 5.0
                arm.append(request_timing(_result(index, latency=latency, scheduled=due, sent=due, block=block)))
    return arm_a, arm_b


@pytest.mark.parametrize("blocks", [6, 12, 24])
def test_paired_difference_by_block_covers_truth(blocks):
    rng = np.random.default_rng(blocks)
    by_block = by_request = ratio = 0
    for _ in range(300):
        arm_a, arm_b = _paired_arms(rng, blocks, 8, 0.7, 0.1)
        paired = paired_goodput(arm_a, arm_b, Slo(e2e_s=1.0))
        by_block += _covers(paired.difference_by_block, 0.1)
        by_request += _covers(paired.difference_by_request, 0.1)
        ratio += _covers(paired.goodput_ratio, 0.8 / 0.7)
    assert by_block / 300 >= 0.93
    assert by_request / 300 >= 0.92
    assert ratio / 300 >= 0.92


def test_paired_goodput_finds_a_real_gain_and_not_a_null_one():
    rng = np.random.default_rng(11)
    arm_a, arm_b = _paired_arms(rng, 30, 10, 0.6, 0.3)
    gain = paired_goodput(arm_a, arm_b, Slo(e2e_s=1.0), names=("base", "spec"))
    assert gain.verdict == "better" and gain.pairs == 300 and gain.blocks == 30
    assert gain.goodput_ratio.point == pytest.approx(gain.attainment_candidate / gain.attainment_baseline, rel=1e-9)
    assert gain.goodput_ratio.low > 1.0
    false_alarms = 0
    for _ in range(200):
        arm_a, arm_b = _paired_arms(rng, 12, 8, 0.7, 0.0)
        false_alarms += paired_goodput(arm_a, arm_b, Slo(e2e_s=1.0)).verdict != "no significant change"
    assert false_alarms / 200 <= 0.06


def test_paired_goodput_withholds_without_blocks_and_refuses_unpaired():
    arm_a = [request_timing(_result(i, scheduled=i, sent=i)) for i in range(30)]
    paired = paired_goodput(arm_a, arm_a, Slo(e2e_s=5.0))
    assert paired.blocks == 0 and not paired.goodput_ratio.has_interval
    assert paired.goodput_ratio.withheld == "no blocks recorded"
    other = [request_timing(_result(i + 100)) for i in range(3)]
    with pytest.raises(BenchError, match="pairs up"):
        paired_goodput(arm_a, other, Slo(e2e_s=5.0))


_SHARES = {"coding": (0.1, 0.9), "math": (0.5, 0.9), "rag": (0.9, 0.9), "qa": (0.95, 0.6)}
"""Per-category chance of meeting the SLO, baseline and candidate: the categories differ."""


def _strata_arms(rng, blocks, per_block=8):
    """Two arms over four categories (`_SHARES`) shuffled over the blocks; with the true attainment change and goodput
    ratio at this draw's category mix."""
    names = list(_SHARES)
    categories = [names[i] for i in rng.permutation(np.arange(blocks * per_block) % len(names))]
    arm_a, arm_b = [], []
    for index, category in enumerate(categories):
        due = index * 0.1
        for arm, share in zip((arm_a, arm_b), _SHARES[category], strict=True):
            latency = 0.5 if rng.random() < share else 5.0
            arm.append(request_timing(_result(index, latency=latency, scheduled=due, sent=due,
                                              block=index // per_block, category=category)))
    p = np.array([_SHARES[c][0] for c in categories])
    q = np.array([_SHARES[c][1] for c in categories])
    return arm_a, arm_b, float((q - p).mean()), float(q.sum() / p.sum())


@pytest.mark.parametrize("blocks", [6, 12])
def test_stratified_paired_goodput_covers_truth_and_is_narrower_when_categories_differ(blocks):
    from bench.analysis import BLOCKED_METHOD

    rng = np.random.default_rng(blocks)
    by_block = ratio = 0
    widths = []
    for _ in range(300):
        arm_a, arm_b, difference, gain = _strata_arms(rng, blocks)
        paired = paired_goodput(arm_a, arm_b, Slo(e2e_s=1.0))
        assert paired.overall_estimator.startswith(BLOCKED_METHOD)
        by_block += _covers(paired.difference_by_block, difference)
        ratio += _covers(paired.goodput_ratio, gain)
        unstratified = paired_goodput([dataclasses.replace(r, category="qa") for r in arm_a],
                                      [dataclasses.replace(r, category="qa") for r in arm_b], Slo(e2e_s=1.0))
        assert unstratified.overall_estimator is None
        widths.append((paired.difference_by_block.high - paired.difference_by_block.low,
                       unstratified.difference_by_block.high - unstratified.difference_by_block.low))
    assert by_block / 300 >= 0.92 and ratio / 300 >= 0.92
    shipped, before = np.mean(widths, axis=0)
    assert shipped < 0.85 * before
