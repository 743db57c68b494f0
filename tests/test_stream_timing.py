"""Streaming timing (issue 17): per-chunk tokens, per-token ITL, TPOT, queue wait, socket-side times, loop lag."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

from bench.analysis import stream_latency_stats
from bench.engines import chunk_token_evidence
from bench.records import Run, SampleResult, load_run, read_journal
from bench.render import STREAM_DEFINITIONS, stream_text
from bench.runner import RunConfig, run_benchmark
from bench.runner._client import chunk_token_counts, per_token_itl
from bench.runner._lag import LagMonitor
from bench.runner._transport import SSEDecoder, _Arrivals
from tests.conftest import make_prompts
from tests.fakeserver import FakeServer

ROOT = Path(__file__).resolve().parent.parent


def test_chunk_evidence_reads_token_ids_logprobs_and_usage() -> None:
    assert chunk_token_evidence({"choices": [{"delta": {"content": "ab"}, "token_ids": [1, 2, 3]}]}) == ("token_ids", 3)
    logprobs = {"content": [{"token": "a"}, {"token": "b"}]}
    assert chunk_token_evidence({"choices": [{"delta": {"content": "ab"}, "logprobs": logprobs}]}) == ("logprobs", 2)
    assert chunk_token_evidence({"choices": [{"delta": {}}], "usage": {"completion_tokens": 7}}) == ("usage", 7)
    assert chunk_token_evidence({"choices": [{"delta": {"content": "a"}}]}) is None


def test_chunk_counts_prefer_the_chunks_and_spread_the_final_count_by_characters() -> None:
    assert chunk_token_counts([("token_ids", 3), ("token_ids", 1)], [9, 2], 99) == ([3, 1], "token_ids")
    counts, source = chunk_token_counts([None, None, None], [4, 1, 1], 8)
    assert source == "spread" and sum(counts) == 8 and counts[0] > counts[1] and min(counts) >= 1
    assert chunk_token_counts([None, None], [1, 1], 0) == ([1, 1], "assumed")


def test_per_token_itl_spreads_a_burst_over_its_tokens() -> None:
    # chunks at 0, 10 ms (carrying 4 tokens), 12 ms (1 token): the burst is 4 gaps of 2.5 ms, not one of 10 ms
    assert per_token_itl([0.010, 0.002], [1, 4, 1]) == pytest.approx([0.0025] * 4 + [0.002])
    assert per_token_itl([0.010, 0.002], [1, 0, 2]) == pytest.approx([0.006, 0.006])  # empty chunk: gap carried on


def test_decoder_positions_map_events_to_the_read_that_completed_them() -> None:
    decoder = SSEDecoder()
    assert decoder.feed_positions(b"data: a\n\ndata: b") == [("a", 9)]  # dispatched by the blank line
    assert decoder.feed_positions(b"c\n\n") == [("bc", 19)]

    class Reader:
        total_bytes = 5

    arrivals = _Arrivals(Reader(), 1.0)  # type: ignore[arg-type]
    arrivals.ends += [12, 20]
    arrivals.times += [2.0, 3.0]
    assert arrivals.time_of(4, 0) == (1.0, 0)
    assert arrivals.time_of(8, 0) == (2.0, 1)
    assert arrivals.time_of(18, 1) == (3.0, 2)
    assert arrivals.time_of(21, 2)[0] == -1.0


def _streamed(fake_server: FakeServer, tmp_path: Path, name: str = "r.json", **overrides) -> tuple[Run, Path]:
    config = RunConfig(url=fake_server.url, osl=32, timeout=10.0, stream=True, **overrides)
    output = tmp_path / name
    run, _ = run_benchmark(make_prompts(4), config, output=output, install_signal_handlers=False)
    return run, output


def test_streamed_samples_record_tokens_per_chunk_tpot_and_queue_wait(fake_server: FakeServer, tmp_path: Path) -> None:
    run, output = _streamed(fake_server, tmp_path, concurrency=2)
    for result in run.results:
        assert result.ok, result.error
        assert len(result.chunk_tokens) == len(result.itl_s) + result.turns  # each turn's first chunk has no gap
        assert sum(result.chunk_tokens) == result.completion_tokens and result.chunk_tokens_source == "spread"
        assert sum(result.itl_token_s) == pytest.approx(sum(result.itl_s), abs=1e-4)
        if result.turns == 1:
            assert len(result.itl_token_s) == result.completion_tokens - result.chunk_tokens[0]
            assert result.tpot_s == pytest.approx((result.latency_s - result.ttft_s) / (result.completion_tokens - 1))
        assert 0.0 <= result.scheduled_s <= result.sent_s and result.queue_wait_s >= 0.0
    # a closed loop of 2 slots: the third sample is scheduled when a slot freed, not at the run's start
    assert sorted(result.scheduled_s for result in run.results)[2] > 0.0
    loaded = load_run(output)
    _, journalled = read_journal(output.with_name(output.name + ".journal")) if output.with_name(
        output.name + ".journal").exists() else (None, list(loaded.results))
    for copy in (loaded.results, journalled):
        assert {r.id: (r.chunk_tokens, r.chunk_tokens_source, r.itl_token_s, r.tpot_s, r.scheduled_s, r.sent_s)
                for r in copy} == {r.id: (r.chunk_tokens, r.chunk_tokens_source, r.itl_token_s, r.tpot_s,
                                          r.scheduled_s, r.sent_s) for r in run.results}
    assert run.meta["client_lag"]["samples"] >= 1 and "p99_ms" in run.meta["client_lag"]


def test_journal_lines_carry_the_new_fields(tmp_path: Path) -> None:
    from bench.records import Journal, journal_path

    result = SampleResult(id="a", category="x", ok=True, turns=1, latency_s=1.0, chunk_tokens=(1, 3),
                          chunk_tokens_source="usage", itl_token_s=(0.1, 0.1, 0.1), tpot_s=0.05, scheduled_s=0.5,
                          sent_s=0.75)
    path = journal_path(tmp_path / "r.json")
    journal = Journal(path, {"config": {}}, append=False)
    journal.append(result)
    journal.close()
    _, results = read_journal(path)
    assert results == [result] and results[0].queue_wait_s == pytest.approx(0.25)


def test_stream_stats_and_table_show_per_token_itl_tpot_and_queue_wait() -> None:
    results = [
        SampleResult(id=f"s{i}", category="x", ok=True, turns=1, latency_s=1.0, completion_tokens=5, ttft_s=0.2,
                     itl_s=(0.4,), chunk_tokens=(1, 4), itl_token_s=(0.1,) * 4, tpot_s=0.2, scheduled_s=1.0,
                     sent_s=1.5)
        for i in range(3)
    ]
    run = Run(config={"stream": True}, selected_samples=3, results=tuple(results), summary=(), meta={})
    rows = stream_latency_stats(run)
    assert rows[0]["itl_p50"] == pytest.approx(0.4) and rows[0]["itl_tok_p50"] == pytest.approx(0.1)
    assert rows[0]["tpot_p50"] == pytest.approx(0.2) and rows[0]["queue_p50"] == pytest.approx(0.5)
    text = stream_text(rows)
    assert "itl_tok_p50" in text and "queue_p99" in text
    assert all(definition in text for definition in STREAM_DEFINITIONS.values())


def test_lag_monitor_reports_a_blocked_loop_through_the_progress_hook() -> None:
    messages: list[str] = []

    class Hook:
        def message(self, text: str) -> None:
            messages.append(text)

    async def scenario() -> LagMonitor:
        monitor = LagMonitor(Hook(), interval_s=0.001, warn_s=0.005)  # type: ignore[arg-type]
        monitor.start()
        await asyncio.sleep(0.01)
        time.sleep(0.05)  # the loop cannot run: every wake-up due in this window comes at least this late
        await asyncio.sleep(0.01)
        await monitor.stop()
        return monitor

    monitor = asyncio.run(scenario())
    summary = monitor.summary()
    assert summary is not None and summary["max_ms"] >= 40.0 and summary["over_threshold"] >= 1
    assert messages and "event loop stalled" in messages[0]


def test_compare_stats_prints_the_streaming_table(fake_server: FakeServer, tmp_path: Path, capsys) -> None:
    from bench.cli import main

    _, base = _streamed(fake_server, tmp_path, "b.json")
    _, spec = _streamed(fake_server, tmp_path, "s.json")
    assert main(["compare", "--baseline", str(base), "--speculative", str(spec), "--stats"]) == 0
    out = capsys.readouterr().out
    assert "itl_tok_p50" in out and "queue wait:" in out and "speculative: Streaming latencies" in out


def _perf_module():
    spec = importlib.util.spec_from_file_location("perf_under_test", ROOT / "benchmarks" / "perf.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["perf_under_test"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_perf_counts_a_missed_target_and_judges_streaming_against_the_floor() -> None:
    perf = _perf_module()
    rows = [perf.Row("a", "1", ">= 2", "FAIL"), perf.Row("b", "3", ">= 2", "PASS"), perf.Row("c", "1")]
    assert perf.missed_targets(rows, []) == ["a"]
    load = perf.Load(64, 200, 10, 1)
    floor = perf.Outcome(errors_ms=[0.01] * 98 + [2.0, 2.0], chunks=100, wall_s=1.0, cpu_s=0.1)
    within = perf.Outcome(errors_ms=[0.02] * 98 + [3.0, 3.0], chunks=100, wall_s=1.0, cpu_s=0.2)
    beyond = perf.Outcome(errors_ms=[0.02] * 98 + [5.0, 5.0], chunks=100, wall_s=1.0, cpu_s=0.2)
    text, _, missed = perf.stream_table([(load, floor, within)])
    assert missed == [] and "PASS" in text and "cannot stream" not in text
    _, notes, missed = perf.stream_table([(load, floor, beyond)])
    assert missed == ["streaming 64x200/s"] and any("cannot stream" in note for note in notes)
    json.dumps(notes)


def test_journal_fsyncs_beside_the_event_loop(tmp_path: Path, monkeypatch) -> None:
    import threading

    import bench.records._journal as journal_module
    from bench.records import Journal, journal_path

    callers: list[str] = []
    real_fsync = journal_module.os.fsync
    monkeypatch.setattr(journal_module.os, "fsync", lambda fd: (callers.append(threading.current_thread().name),
                                                                real_fsync(fd)))
    journal = Journal(journal_path(tmp_path / "r.json"), {"config": {}}, append=False)
    callers.clear()
    journal._last_sync -= 2.0  # a second has passed since the last sync
    journal.append(SampleResult(id="a", category="x", ok=True, turns=1, latency_s=1.0))
    journal.close()
    assert callers[0] != threading.main_thread().name  # the periodic sync: not on the caller's thread
    assert callers[-1] == threading.main_thread().name  # close: synchronous
    assert read_journal(journal_path(tmp_path / "r.json"))[1][0].id == "a"
