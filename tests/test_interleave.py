"""Interleaved A/B: drift lands on both arms alike; seeded order, lock-step batches, ordinary resumable run files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import BenchError
from bench.analysis import paired_stats
from bench.cli import main
from bench.prompts import load_prompts
from bench.records import journal_path, load_run
from bench.runner import Arm, LockStep, RunConfig, RunOptions, run_arms, run_benchmark, seeded_order
from tests.conftest import make_prompts
from tests.fakeserver import DriftSchedule, FakeServer, FakeState

LIMIT = 2


def _requests_per_arm() -> int:
    return sum(len(sample.turns) for sample in load_prompts(limit=LIMIT).samples)


def _pair(schedule: DriftSchedule, spec_speed: float = 1.0, log: list | None = None) -> Iterator[tuple[str, str]]:
    states = [FakeState(schedule=schedule), FakeState(schedule=schedule, speed=spec_speed, drafting=True)]
    if log is not None:
        for name, state in zip(("A", "B"), states, strict=True):
            state.fault = lambda index, body, name=name: log.append((name, body["messages"][0]["content"]))
    servers = [FakeServer(state) for state in states]
    for server in servers:
        server.start()
    try:
        yield servers[0].url, servers[1].url
    finally:
        for server in servers:
            server.stop()


def _overall(folder: Path) -> dict:
    rows = paired_stats(load_run(folder / "baseline.json"), load_run(folder / "speculative.json"))
    return rows[-1]


def _bench(tmp_path: Path, base: str, spec: str, *extra: str) -> Path:
    assert main(["bench", "--base-url", base, "--spec-url", spec, "--limit", str(LIMIT), "--osl", "16",
                 "--results-dir", str(tmp_path), "--quiet", *extra]) == 0
    (folder,) = tmp_path.iterdir()
    return folder


def _drift() -> DriftSchedule:
    """Speed drops 60% (delay x1.6) half-way through the requests of both arms."""
    return DriftSchedule(token_delay_s=0.003, switch_after=_requests_per_arm(), factor=1.6, jitter=0.03, seed=1)


def test_interleaved_bench_sees_no_change_under_drift_where_sequential_runs_call_one(tmp_path: Path, capsys) -> None:
    for base, spec in _pair(_drift()):
        folder = _bench(tmp_path / "interleaved", base, spec)
    capsys.readouterr()
    overall = _overall(folder)
    assert overall["decode_speedup_verdict"] == "no significant change", overall
    assert overall["latency_speedup_verdict"] == "no significant change", overall
    meta = load_run(folder / "baseline.json").meta
    assert meta["interleaved"] == {"order_seed": 0, "partner": "speculative", "batch": 1}
    assert load_run(folder / "speculative.json").meta["interleaved"]["partner"] == "baseline"

    for base, spec in _pair(_drift()):
        folder = _bench(tmp_path / "sequential", base, spec, "--sequential")
    overall = _overall(folder)
    assert overall["decode_speedup_verdict"] == "worse" and overall["latency_speedup_verdict"] == "worse", overall
    assert "interleaved" not in load_run(folder / "baseline.json").meta


def test_interleaved_bench_calls_a_true_1_3x_faster_arm_faster_under_drift(tmp_path: Path, capsys) -> None:
    for base, spec in _pair(_drift(), spec_speed=1.3):
        folder = _bench(tmp_path, base, spec)
    overall = _overall(folder)
    assert overall["decode_speedup_verdict"] == "better" and overall["latency_speedup_verdict"] == "better", overall
    assert overall["decode_speedup"] == pytest.approx(1.3, rel=0.05)



def test_bench_stream_streams_both_arms_and_shows_the_streaming_tables(tmp_path: Path, capsys) -> None:
    for base, spec in _pair(DriftSchedule(token_delay_s=0.001)):
        folder = _bench(tmp_path, base, spec, "--stream")
    out = capsys.readouterr().out
    text = (folder / "comparison.txt").read_text()  # the console shows a screen's worth; the tables are here
    for name in ("baseline", "speculative"):
        run = load_run(folder / f"{name}.json")
        assert run.config["stream"] is True and run.completed_samples == run.selected_samples
        assert all(result.ttft_s is not None and result.itl_s for result in run.results)
        assert f"{name}: Streaming latencies" in text
    assert "itl_tok_p50" in text and "queue wait:" in (folder / "comparison.md").read_text()
    assert "comparison.txt" in out

def arm_order(seed: int, jobs: list, names: tuple[str, ...]) -> list[str]:
    return seeded_order(seed, [f"{sample.id}#{repeat}" for sample, repeat in jobs], names)


def run_interleaved(prompts, arms, *, seed: int = 0, **options):
    return run_arms(prompts, arms, LockStep(arms[0].config.concurrency, seed), RunOptions(**options))


def test_arm_order_is_seeded_per_sample_and_both_orders_occur() -> None:
    samples = make_prompts(per_category=10).samples
    orders = [arm_order(0, [(sample, 0)], ("baseline", "speculative")) for sample in samples]
    assert orders == [arm_order(0, [(sample, 0)], ("baseline", "speculative")) for sample in samples]
    assert {tuple(order) for order in orders} == {("baseline", "speculative"), ("speculative", "baseline")}
    assert orders != [arm_order(1, [(sample, 0)], ("baseline", "speculative")) for sample in samples]
    assert [arm_order(0, [(sample, 1)], ("a", "b")) for sample in samples] != [
        arm_order(0, [(sample, 0)], ("a", "b")) for sample in samples]


@pytest.mark.parametrize("concurrency", [1, 2])
def test_each_batch_goes_to_both_arms_back_to_back_in_lock_step(tmp_path: Path, concurrency: int) -> None:
    prompts = make_prompts(per_category=4)
    log: list[tuple[str, str]] = []
    for base, spec in _pair(DriftSchedule(token_delay_s=0.001), log=log):
        arms = [Arm(name, RunConfig(url=url, osl=8, concurrency=concurrency), tmp_path / f"{name}.json")
                for name, url in (("baseline", base), ("speculative", spec))]
        runs, interrupted = run_interleaved(prompts, arms, seed=3, install_signal_handlers=False)
    assert not interrupted and all(len(run.results) == len(prompts.samples) for run in runs.values())
    first_turns = [sample.turns[0] for sample in prompts.samples]
    position = 0
    for start in range(0, len(first_turns), concurrency):
        batch = set(first_turns[start:start + concurrency])
        size = sum(len(sample.turns) for sample in prompts.samples[start:start + concurrency]) * 2
        block = log[position:position + size]
        position += size
        assert {text for _, text in block} == batch  # the batch's requests, and nothing else, to both arms
        arms_seen = [name for name, _ in block]
        assert arms_seen == sorted(arms_seen, key=arms_seen[0].__ne__)  # one arm's batch, then the other's
    assert position == len(log)
    assert load_run(tmp_path / "baseline.json").meta["interleaved"]["batch"] == concurrency


def test_interleaved_runs_resume_from_their_journals(tmp_path: Path) -> None:
    prompts = make_prompts(per_category=3)
    log: list[tuple[str, str]] = []
    for base, spec in _pair(DriftSchedule(token_delay_s=0.001), log=log):
        arms = [Arm(name, RunConfig(url=url, osl=8), tmp_path / f"{name}.json")
                for name, url in (("baseline", base), ("speculative", spec))]
        run_interleaved(prompts, arms, install_signal_handlers=False)
        for arm in arms:  # as if interrupted: two samples journalled, no run file
            lines = journal_path(arm.output).read_text().splitlines()
            journal_path(arm.output).write_text("\n".join(lines[:3]) + "\n")
            Path(arm.output).unlink()
        with pytest.raises(BenchError, match="--resume"):
            run_interleaved(prompts, arms, install_signal_handlers=False)
        log.clear()
        runs, _ = run_interleaved(prompts, arms, install_signal_handlers=False, resume=True)
    for run in runs.values():
        assert sorted(result.id for result in run.results) == sorted(sample.id for sample in prompts.samples)
        assert run.meta["interleaved"]["order_seed"] == 0
    sent = {text for _, text in log}
    assert sent == {sample.turns[0] for sample in prompts.samples[2:]}  # only what was missing
    assert json.loads((tmp_path / "baseline.json").read_text())["results"]


def test_sequential_run_results_still_pair_with_run_files(tmp_path: Path) -> None:
    prompts = make_prompts(per_category=3)
    for base, spec in _pair(DriftSchedule(token_delay_s=0.001)):
        baseline, _ = run_benchmark(prompts, RunConfig(url=base, osl=8), output=tmp_path / "b.json",
                                    install_signal_handlers=False)
        speculative, _ = run_benchmark(prompts, RunConfig(url=spec, osl=8), output=tmp_path / "s.json",
                                       install_signal_handlers=False)
    assert paired_stats(baseline, speculative)[-1]["n"] == len(prompts.samples)
