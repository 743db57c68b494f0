"""Scheduling strategies: closed loop, open loop (arrival offsets, concurrency cap, no catch-up burst), lock step."""

from __future__ import annotations

import asyncio
import time

import pytest

from bench.runner import ClosedLoop, LockStep, OpenLoop, Stop, job_key, seeded_order
from tests.conftest import make_prompts


class Recorder:
    """A `send` that sleeps `duration` per job and records when each job was due, started and ended."""

    def __init__(self, duration: float = 0.0, stop_after: int | None = None, stop: Stop | None = None) -> None:
        self.duration = duration
        self.began = time.perf_counter()
        self.due: dict[int, float] = {}
        self.started: dict[int, float] = {}
        self.ended: dict[int, float] = {}
        self.active = 0
        self.peak = 0
        self.stop_after = stop_after
        self.stop = stop

    async def __call__(self, index: int, scheduled_at: float) -> float:
        self.due[index] = scheduled_at - self.began
        self.started[index] = time.perf_counter() - self.began
        self.active += 1
        self.peak = max(self.peak, self.active)
        await asyncio.sleep(self.duration)
        self.active -= 1
        self.ended[index] = time.perf_counter() - self.began
        if self.stop is not None and self.stop_after is not None and len(self.ended) >= self.stop_after:
            self.stop.signal()
        return time.perf_counter()


def _run(schedule, count: int, recorder_args: dict | None = None) -> Recorder:
    async def main() -> Recorder:
        stop = Stop()
        recorder = Recorder(**(recorder_args or {}), stop=stop)
        recorder.began = time.perf_counter()
        await schedule.run(count, recorder, stop)
        return recorder

    return asyncio.run(main())


def test_closed_loop_keeps_concurrency_workers_busy_and_schedules_on_the_freed_slot() -> None:
    recorder = _run(ClosedLoop(2), 6, {"duration": 0.02})
    assert sorted(recorder.started) == list(range(6))
    assert recorder.peak == 2
    assert recorder.due[0] == pytest.approx(0.0, abs=0.01) and recorder.due[1] == pytest.approx(0.0, abs=0.01)
    # a later job is due when its worker's previous job ended, not at the start
    assert min(recorder.due[index] for index in range(2, 6)) >= 0.015


def test_closed_loop_releases_nothing_after_a_stop() -> None:
    recorder = _run(ClosedLoop(1), 10, {"duration": 0.0, "stop_after": 3})
    assert sorted(recorder.started) == [0, 1, 2]


def test_each_strategy_sizes_the_connection_pool_for_what_it_keeps_in_flight() -> None:
    assert ClosedLoop(3).max_in_flight(10) == 3
    assert OpenLoop([0.0] * 10, max_concurrency=2).max_in_flight(10) == 2
    assert OpenLoop([0.0] * 10).max_in_flight(10) == 10  # uncapped: an arrival never waits for a connection


def test_closed_loop_refuses_zero_workers() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        ClosedLoop(0)


def test_open_loop_releases_each_job_at_its_offset_whatever_the_others_take() -> None:
    offsets = [0.0, 0.05, 0.10, 0.15]
    recorder = _run(OpenLoop(offsets), 4, {"duration": 0.2})  # jobs outlast the gaps: still released on time
    for index, offset in enumerate(offsets):
        assert recorder.due[index] == pytest.approx(offset, abs=0.005)
        assert offset - 0.001 <= recorder.started[index] <= offset + 0.04
    assert recorder.peak == 4


def test_open_loop_cap_holds_jobs_at_the_gate_and_later_arrivals_keep_their_gaps() -> None:
    offsets = [0.0, 0.01, 0.02, 0.30]
    recorder = _run(OpenLoop(offsets, max_concurrency=1), 4, {"duration": 0.1})
    assert recorder.peak == 1
    # job 1 waits at the gate for job 0 (ends ~0.1), job 2 for job 1 (~0.2): each start is after the previous end
    assert recorder.started[1] >= recorder.ended[0] - 0.001
    assert recorder.started[2] >= recorder.ended[1] - 0.001
    # the gate held jobs 1 and 2 for ~0.18 s in all: job 3 is postponed by that much, not released at 0.30
    assert recorder.started[3] >= 0.30 + 0.15
    # every job is recorded as due at its own offset, so the wait at the gate counts in its latency
    for index, offset in enumerate(offsets):
        assert recorder.due[index] == pytest.approx(offset, abs=0.005)


def test_open_loop_without_a_cap_does_not_burst_after_a_stop() -> None:
    recorder = _run(OpenLoop([0.0, 0.0, 0.5, 0.6]), 4, {"duration": 0.0, "stop_after": 2})
    assert sorted(recorder.started) == [0, 1]


def test_open_loop_refuses_bad_offsets_and_too_few_of_them() -> None:
    for offsets in ([0.0, -1.0], [0.2, 0.1], [float("nan")]):
        with pytest.raises(ValueError, match="offsets"):
            OpenLoop(offsets)
    with pytest.raises(ValueError, match="max_concurrency"):
        OpenLoop([0.0], max_concurrency=0)
    with pytest.raises(ValueError, match="arrival offsets"):
        _run(OpenLoop([0.0]), 2)


def test_lock_step_gives_every_arm_every_batch_in_a_seeded_order() -> None:
    prompts = make_prompts(3)
    jobs = [(sample, 0) for sample in prompts.samples]

    turns = LockStep(2, 7).turns(jobs, ("a", "b"))
    assert [turn.batch for turn in turns] == [0, 0, 1, 1, 2, 2]
    assert {turn.concurrency for turn in turns} == {2} and all(turn.offsets_s is None for turn in turns)
    for index in range(3):
        pair = [turn for turn in turns if turn.batch == index]
        assert sorted(turn.arm for turn in pair) == ["a", "b"]
        assert list(pair[0].jobs) == list(pair[1].jobs) == jobs[2 * index:2 * index + 2]
        assert [turn.arm for turn in pair] == seeded_order(7, [job_key(job) for job in pair[0].jobs], ("a", "b"))
    assert str(LockStep(2, 7)) == "lockstep@2"


def test_an_open_loop_run_records_each_sample_as_due_at_its_offset(fake_server, tmp_path) -> None:
    from bench.runner import RunConfig, run_benchmark

    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(f'{{"offset_s": {offset}}}\n' for offset in (0.0, 0.1, 0.2, 0.3)))
    run, interrupted = run_benchmark(
        make_prompts(), RunConfig(url=fake_server.url, osl=8, trace=str(trace), max_concurrency=4),
        output=tmp_path / "r.json", install_signal_handlers=False,
    )
    assert not interrupted and all(result.ok for result in run.results)
    due = sorted(result.scheduled_s for result in run.results)
    # counted from the run's start (before the server probes), so shifted by the same set-up time
    assert [round(later - due[0], 2) for later in due] == [0.0, 0.1, 0.2, 0.3]
