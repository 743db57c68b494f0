"""Shards: deterministic, disjoint slices of a run's schedule that together are the schedule."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from bench import BenchError
from bench.prompts import PromptSet, Sample, Shard, shard_schedule


def _prompts(count: int) -> PromptSet:
    samples = tuple(Sample(id=f"s{index}", category=("qa", "math", "coding")[index % 3], turns=(f"q{index}",))
                    for index in range(count))
    return PromptSet(samples=samples, source="test", bench="qualitative", categories=("qa", "math", "coding"))


def test_parse_reads_i_of_n_from_zero_and_refuses_the_rest() -> None:
    assert Shard.parse("0/4") == Shard(0, 4)
    assert Shard.parse(" 3 / 4 ") == Shard(3, 4)
    assert str(Shard.parse("2/5")) == "2/5"
    for bad in ("4/4", "-1/4", "1/0", "1", "a/b", "1/4/2", ""):
        with pytest.raises(BenchError) as info:
            Shard.parse(bad)
        assert "\n" not in str(info.value) and "--shard" in str(info.value)


@given(total=st.integers(min_value=1, max_value=200), count=st.integers(min_value=1, max_value=12))
def test_the_slices_are_disjoint_cover_the_schedule_and_keep_its_order(total: int, count: int) -> None:
    items = list(range(total))
    slices = [Shard(index, count).select(items) for index in range(count)]
    assert sorted(item for part in slices for item in part) == items
    for index, part in enumerate(slices):
        assert part == sorted(part)
        assert all(Shard(index, count).position(local) == item for local, item in enumerate(part))
    sizes = [len(part) for part in slices]
    assert max(sizes) - min(sizes) <= 1


def test_the_same_inputs_give_the_same_slice_and_categories_mix() -> None:
    prompts = _prompts(12)
    first = Shard(1, 4).prompts(prompts)
    again = Shard(1, 4).prompts(_prompts(12))
    assert first == again
    assert [sample.id for sample in first.samples] == ["s1", "s5", "s9"]
    assert {sample.category for sample in first.samples} == {"qa", "math", "coding"}
    assert first.categories == prompts.categories and first.source == prompts.source


def test_a_shard_that_would_be_empty_is_refused() -> None:
    with pytest.raises(BenchError, match="3 samples cannot fill 4 shards"):
        Shard(3, 4).prompts(_prompts(3))


@given(samples=st.integers(min_value=1, max_value=40), repeats=st.integers(min_value=1, max_value=3),
       count=st.integers(min_value=1, max_value=6))
def test_arrival_offsets_are_the_full_schedules_and_the_jobs_partition_it(samples: int, repeats: int,
                                                                         count: int) -> None:
    prompts = _prompts(samples).samples
    offsets = [0.25 * job for job in range(samples * repeats)]
    full = {(sample.id, repeat): offsets[repeat * samples + position]
            for repeat in range(repeats) for position, sample in enumerate(prompts)}
    seen: dict[tuple[str, int], float | None] = {}
    for index in range(count):
        jobs = shard_schedule(prompts, repeats, Shard(index, count), offsets)
        for sample, repeat, offset in jobs:
            assert (sample.id, repeat) not in seen
            seen[(sample.id, repeat)] = offset
        times = [offset for _, _, offset in jobs]
        assert times == sorted(times)  # a shard sends its jobs in the order the full schedule does
    assert seen == full


def test_a_schedule_without_offsets_has_none_and_a_wrong_length_is_refused() -> None:
    prompts = _prompts(5).samples
    assert [(s.id, r, o) for s, r, o in shard_schedule(prompts, 2, Shard(0, 2))] == [
        ("s0", 0, None), ("s2", 0, None), ("s4", 0, None), ("s0", 1, None), ("s2", 1, None), ("s4", 1, None)]
    with pytest.raises(ValueError, match="9 arrival offsets for 5 samples x 2 repeats"):
        Shard(0, 2).arrivals([0.0] * 9, 5, 2)


def test_an_interleaved_shard_sends_its_slice_to_both_arms_and_marks_both_run_files(tmp_path) -> None:
    from bench.records import ShardMarker
    from bench.runner import Arm, LockStep, RunConfig, RunOptions, run_arms
    from tests.conftest import make_prompts
    from tests.fakeserver import FakeServer, FakeState

    prompts = make_prompts(per_category=3)
    servers = [FakeServer(FakeState()), FakeServer(FakeState(drafting=True))]
    for server in servers:
        server.start()
    try:
        arms = [Arm(name, RunConfig(url=server.url, osl=8, concurrency=2), tmp_path / f"{name}.json")
                for name, server in zip(("baseline", "speculative"), servers, strict=True)]
        runs, interrupted = run_arms(prompts, arms, LockStep(2), RunOptions(shard=Shard(1, 2)))
    finally:
        for server in servers:
            server.stop()
    own = [sample.id for sample in Shard(1, 2).select(prompts.samples)]
    assert not interrupted
    for name, run in runs.items():
        assert sorted(result.id for result in run.results) == sorted(own), name  # both halves of every pair
        marker = ShardMarker.from_run(run)
        assert (marker.index, marker.count, list(marker.sample_ids)) == (1, 2, own)
        assert marker.selected_samples == len(prompts.samples)


def test_an_open_loop_shard_keeps_the_full_schedules_arrival_gaps(fake_server, tmp_path) -> None:
    from bench.runner import RunConfig, run_benchmark
    from tests.conftest import make_prompts

    prompts = make_prompts(per_category=2)  # 4 samples: the full schedule sends them 0.15 s apart
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(f'{{"offset_s": {offset}}}\n' for offset in (0.0, 0.15, 0.3, 0.45)))
    run, _ = run_benchmark(prompts, RunConfig(url=fake_server.url, osl=4, trace=str(trace)), shard=Shard(1, 2))
    sent = {result.id: result.sent_s for result in run.results}
    assert sorted(sent) == ["coding-001", "math-001"]  # positions 1 and 3
    assert 0.25 <= sent["math-001"] - sent["coding-001"] <= 0.4  # offsets 0.15 and 0.45 of the full schedule


def test_a_shared_start_time_holds_the_first_request_until_then(fake_server, fake_state) -> None:
    import time

    from bench.runner import RunConfig, run_benchmark
    from tests.conftest import make_prompts

    arrived: list[float] = []
    fake_state.fault = lambda index, body: arrived.append(time.time())  # the server's clock of each request
    start_at = time.time() + 0.6
    run, _ = run_benchmark(make_prompts(), RunConfig(url=fake_server.url, osl=4), start_at=start_at)
    assert run.meta["start_at"] == start_at
    assert arrived and min(arrived) >= start_at  # set-up first, then the wait for the start
