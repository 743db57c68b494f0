"""Open-loop plots: the request timeline by arm and goodput/attainment against rate with interval bands."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from bench.analysis import RateLevel, Slo, goodput, request_timing, slo_capacity
from bench.records import SampleResult
from bench.render import goodput_rate_figure, plot_goodput_rate, plot_timeline, timeline_figure


def _requests(n, *, wait=0.0, latency=0.5, block_size=None, slow_every=0):
    out = []
    for index in range(n):
        slow = slow_every and index % slow_every == 0
        out.append(request_timing(SampleResult(
            id=f"s{index}", category="qa", ok=True, turns=1, latency_s=3.0 if slow else latency, ttft_s=0.1,
            tpot_s=0.01, scheduled_s=index * 0.2, sent_s=index * 0.2 + wait, completion_tokens=16,
            batch=None if block_size is None else index // block_size)))
    return out


def test_timeline_draws_each_request_per_arm(tmp_path):
    arms = {"baseline": _requests(12, wait=0.3, block_size=4), "ngram-mod": _requests(12, block_size=4)}
    figure = timeline_figure(arms)
    top, bottom = figure.axes[:2]
    assert "baseline" in top.get_ylabel() and "ngram-mod" in bottom.get_ylabel()
    # queue segments only where there was a wait: 12 in the first arm, none in the second
    assert len(top.lines) == 12 * 3 and len(bottom.lines) == 12 * 2
    assert "A/B blocks" in top.get_title()
    plt.close(figure)
    paths = plot_timeline(arms, tmp_path, formats=("png",))
    assert paths[0].stat().st_size > 1000


def test_timeline_needs_an_arm():
    with pytest.raises(ValueError):
        timeline_figure({})


def _levels(arm, slow_every_by_rate):
    return [RateLevel(arm, rate, goodput(_requests(40, slow_every=slow), Slo(e2e_s=1.0)))
            for rate, slow in slow_every_by_rate.items()]


def test_goodput_rate_plot_has_bands_and_target(tmp_path):
    levels = _levels("baseline", {1.0: 0, 2.0: 10, 4.0: 2}) + _levels("ngram-mod", {1.0: 0, 2.0: 0, 4.0: 3})
    figure = goodput_rate_figure(levels, target=0.9)
    top, bottom = figure.axes
    assert len(top.collections) == 2 and len(bottom.collections) == 2  # one band per arm per panel
    assert any("target 90%" in text.get_text() for text in bottom.get_legend().get_texts())
    plt.close(figure)
    assert plot_goodput_rate(levels, tmp_path, formats=("svg",))[0].suffix == ".svg"


def test_slo_capacity_by_interval():
    # attainment 100% at 1 and 2 req/s, 90% at 4 (point at the target, interval below it), 50% at 8
    levels = _levels("a", {1.0: 0, 2.0: 0, 4.0: 10, 8.0: 2})
    capacity = slo_capacity(levels, 0.9)
    assert capacity.rate == 2.0 and capacity.possible_rate == 4.0
    assert "up to 2 req/s" in capacity.text()
    none = slo_capacity(_levels("b", {1.0: 2}), 0.9)
    assert none.rate is None and none.possible_rate is None and "no tested rate" in none.text()
