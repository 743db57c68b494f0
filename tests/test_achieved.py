"""The load each level achieved: long lock-step turns keep it near the level asked for, and a level whose arms ran
apart, or that its prompts cannot fill, is flagged."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from bench.analysis import ARMS_APART, level_load
from bench.prompts import Sample
from bench.records import LONGER_TURNS, Load, in_flight_mean
from bench.runner import LockStep, long_turns


def _arm(lengths: np.ndarray, concurrency: int, per_step: float, cost: Callable[[int], float],
         start: float) -> tuple[dict[int, tuple[float, float]], float]:
    """A closed loop of `concurrency` on a server that steps every request in flight at once, each step costing
    `cost(batch)` and producing `per_step` tokens per request: (each request's span, the time the turn ended)."""
    queue = list(enumerate(lengths))
    active: dict[int, list[float]] = {}
    spans: dict[int, tuple[float, float]] = {}
    now = start
    while queue or active:
        while queue and len(active) < concurrency:
            index, length = queue.pop(0)
            active[index] = [float(length), now]
        now += cost(len(active))
        for index in list(active):
            active[index][0] -= per_step
            if active[index][0] <= 0:
                spans[index] = (active[index][1], now)
                del active[index]
    return spans, now


def _lockstep(strategy: LockStep, count: int) -> tuple[float, dict[str, float]]:
    """Interleaved turns on a GPU-like truth (the step cost grows with the batch, more for the speculative server):
    the measured geometric-mean speedup's bias against the steady-state truth at the asked batch, and each arm's
    achieved in-flight mean."""
    lengths = np.round(np.random.default_rng(0).uniform(64, 256, count))
    arms = {"baseline": (1.0, lambda batch: 1.0 + 0.02 * batch), "spec": (2.5, lambda batch: 1.3 + 0.06 * batch)}
    spans: dict[str, dict[int, tuple[float, float]]] = {name: {} for name in arms}
    now = 0.0
    for first in range(0, count, strategy.turn_jobs):
        for name, (per_step, cost) in arms.items():
            turn, now = _arm(lengths[first:first + strategy.turn_jobs], strategy.batch, per_step, cost, now)
            spans[name].update({first + index: span for index, span in turn.items()})
    ratios = [(spans["baseline"][i][1] - spans["baseline"][i][0]) / (spans["spec"][i][1] - spans["spec"][i][0])
              for i in range(count)]
    truth = 2.5 * (1.0 + 0.02 * strategy.batch) / (1.3 + 0.06 * strategy.batch)
    bias = math.exp(float(np.mean(np.log(ratios)))) / truth - 1.0
    return bias, {name: in_flight_mean(list(own.values())) or 0.0 for name, own in spans.items()}


def test_long_turns_keep_the_load_near_the_level_and_the_speedup_near_its_steady_state() -> None:
    short_bias, short_load = _lockstep(LockStep(64), 512)
    long_bias, long_load = _lockstep(long_turns(64, 0), 512)
    assert long_turns(64, 0).turn_jobs == 256 and long_turns(1, 0).turn_jobs == 1
    # one batch a turn: the drain runs a quarter of the turn below the level and the speedup reads 2-3% high
    assert short_bias > 0.02 and min(short_load.values()) < 0.75 * 64
    assert abs(long_bias) < 0.01 and min(long_load.values()) > 0.85 * 64


def test_long_turns_run_several_batches_at_the_asked_concurrency_and_say_so() -> None:
    jobs = [(Sample(str(index), "qa", ("hi",)), 0) for index in range(20)]
    turns = long_turns(4, 3).turns(jobs, ["a", "b"])
    assert [len(turn.jobs) for turn in turns] == [16, 16, 4, 4]
    assert {turn.concurrency for turn in turns} == {4}
    assert LONGER_TURNS == "longer turns"


def test_arms_more_than_ten_percent_apart_and_a_level_its_prompts_cannot_fill_are_flagged() -> None:
    steady = level_load(8, [{"baseline": Load(8, 7.8, 40), "draft_max-4": Load(8, 7.4, 40)}])
    assert steady.flags == () and steady.text == "in flight: baseline 7.8, draft_max-4 7.4"
    apart = level_load(64, [{"baseline": Load(64, 63.0, 512), "draft_max-4": Load(64, 43.0, 512)}])
    assert 63.0 / 43.0 - 1 > ARMS_APART
    assert apart.flags == ("concurrency 64: arms ran at different loads, baseline 63.0 against draft_max-4 43.0 "
                           "in flight (more than 10% apart)",)
    short = level_load(64, [{"baseline": Load(64, 20.0, 20), "draft_max-4": Load(64, 20.0, 20)}])
    assert short.flags == ("concurrency 64: 20 requests cannot fill 64 slots; the level asked for was never reached",)
    mean = level_load(8, [{"baseline": Load(8, 8.0, 40), "a": Load(8, 7.5, 40)},
                          {"baseline": Load(8, 6.0, 40), "b": Load(8, 6.0, 40)}])
    assert dict(mean.arms) == {"baseline": 7.0, "a": 7.5, "b": 6.0}
    assert mean.to_json()["in_flight_mean"] == {"baseline": 7.0, "a": 7.5, "b": 6.0}
