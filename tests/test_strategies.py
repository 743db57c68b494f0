"""Run strategies: their names, JSON round trip, split over workers and the turns they plan."""

from __future__ import annotations

import json

import pytest

from bench import BenchError
from bench.runner import (
    Blocks,
    Concurrent,
    LockStep,
    OpenArrivals,
    RunConfig,
    Strategy,
    Work,
    arrival_schedule,
    strategy_for,
)
from tests.conftest import make_prompts


def _work(names: tuple[str, ...], repeat: int = 1, **extra) -> Work:
    prompts = make_prompts()
    jobs = [(sample, r) for r in range(repeat) for sample in prompts.samples]
    return Work(names, prompts, prompts, repeat, {name: jobs for name in names}, **extra)


@pytest.mark.parametrize("strategy, text", [
    (Concurrent(8), "concurrent@8"),
    (OpenArrivals(2.5), "poisson@2.5/s"),
    (OpenArrivals(4.0, process="gamma", burstiness=0.5, max_concurrency=8), "gamma@4/s,max8"),
    (OpenArrivals(trace="/some/where/trace.jsonl"), "trace@trace.jsonl"),
    (LockStep(4, order_seed=3), "lockstep@4"),
    (Blocks(OpenArrivals(2.0), block_size=6, order_seed=1), "abba:poisson@2/s"),
])
def test_every_strategy_names_itself_and_survives_json(strategy: Strategy, text: str) -> None:
    assert str(strategy) == text
    assert Strategy.from_dict(json.loads(json.dumps(strategy.to_dict()))) == strategy


def test_an_unknown_kind_is_a_one_line_error() -> None:
    with pytest.raises(BenchError, match="unknown run strategy 'burst'"):
        Strategy.from_dict({"kind": "burst"})


def test_splitting_over_workers_shares_the_concurrency_or_the_cap() -> None:
    assert Concurrent(5).split(2) == [Concurrent(3), Concurrent(2)]
    assert OpenArrivals(2.0).split(3) == [OpenArrivals(2.0)] * 3  # uncapped: the whole schedule in each
    assert [part.max_concurrency for part in OpenArrivals(2.0, max_concurrency=5).split(2)] == [3, 2]
    assert LockStep(4).split(2) == [LockStep(4)] * 2  # the whole run's batches in each
    assert [part.arrivals.max_concurrency for part in Blocks(OpenArrivals(1.0, max_concurrency=4)).split(2)] == [2, 2]
    with pytest.raises(BenchError, match="exceeds --concurrency"):
        Concurrent(2).split(3)


def test_the_settings_choose_the_strategy() -> None:
    assert strategy_for(RunConfig(concurrency=3)) == Concurrent(3)
    assert strategy_for(RunConfig(request_rate=2.0, arrival_seed=4)) == OpenArrivals(2.0, arrival_seed=4)
    assert strategy_for(RunConfig(concurrency=2), arms=2, order_seed=7) == LockStep(2, 7)
    assert strategy_for(RunConfig(request_rate=2.0, arrival_seed=4), arms=2, block_size=5, order_seed=1) == Blocks(
        OpenArrivals(2.0, arrival_seed=4), 5, 1)


def test_a_closed_loop_is_one_turn_of_every_job_left() -> None:
    plan = Concurrent(3).plan(_work(("run",), repeat=2))
    assert len(plan.turns) == 1 and plan.turns[0].concurrency == 3 and plan.connections == 3
    assert len(plan.turns[0].jobs) == 2 * len(make_prompts().samples) and plan.marker is None


def test_an_open_loop_turn_releases_each_job_at_the_seeded_offset() -> None:
    plan = OpenArrivals(10.0, arrival_seed=2).plan(_work(("run",)))
    count = len(make_prompts().samples)
    assert plan.turns[0].offsets_s == arrival_schedule(count, 10.0, seed=2).offsets_s
    assert plan.connections == count  # uncapped: every arrival has its connection


def test_abba_blocks_alternate_the_arms_on_one_schedule_and_record_it() -> None:
    plan = Blocks(OpenArrivals(10.0), block_size=2, order_seed=0).plan(_work(("a", "b")))
    count = len(make_prompts().samples)
    firsts = [plan.turns[index].arm for index in range(0, len(plan.turns), 2)]
    assert firsts == [firsts[0], firsts[1]] * (len(firsts) // 2) + firsts[:len(firsts) % 2]
    assert firsts[0] != firsts[1]  # forward, then reversed
    assert all(plan.turns[i].jobs == plan.turns[i + 1].jobs for i in range(0, len(plan.turns), 2))
    assert plan.own_clock and plan.connections == 2
    assert plan.marker == {"order_seed": 0, "block_size": 2, "blocks": (count + 1) // 2, "schedule": "open loop"}
