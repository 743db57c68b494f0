"""Streaming timing: per-chunk tokens, per-token ITL, TPOT, queue wait, socket-side times, loop lag."""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
import random
import shutil
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.analysis import stream_latency_stats
from bench.engines import chunk_token_evidence
from bench.records import Run, SampleResult, load_run, read_journal
from bench.render import STREAM_DEFINITIONS, stream_text
from bench.runner import (
    READ_BYTES,
    Arrivals,
    LagMonitor,
    Pacer,
    Response,
    RunConfig,
    SSEDecoder,
    StampedSocket,
    StreamEvent,
    Transport,
    TransportError,
    chunk_token_counts,
    per_token_itl,
    run_benchmark,
    stamped_socket,
)
from tests.conftest import make_prompts
from tests.fakeserver import FakeServer, RawServer, read_request

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
    assert per_token_itl([0.010, 0.002], [1, 1, 1]) == [0.010, 0.002]  # a token per chunk: the gaps themselves
    assert chunk_token_counts([None] * 3, [5, 1, 2], 3) == ([1, 1, 1], "spread")


def test_decoder_positions_map_events_to_the_read_that_completed_them() -> None:
    decoder = SSEDecoder()
    assert decoder.feed_positions(b"data: a\n\ndata: b") == [("a", 9)]  # dispatched by the blank line
    assert decoder.feed_positions(b"c\n\n") == [("bc", 19)]

    class Reader:
        total_bytes = 5

    arrivals = Arrivals(Reader(), 1.0, Pacer())  # type: ignore[arg-type]
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
    stats = stream_latency_stats(run)
    rows = [row.as_cells() for row in stats]
    assert rows[0]["itl_p50"] == pytest.approx(0.4) and rows[0]["itl_tok_p50"] == pytest.approx(0.1)
    assert rows[0]["tpot_p50"] == pytest.approx(0.2) and rows[0]["queue_p50"] == pytest.approx(0.5)
    assert stats[0].itl_tok.p50 == rows[0]["itl_tok_p50"]
    text = stream_text(stats)
    assert "itl_tok_p50" in text and "queue_p99" in text
    assert all(definition in text for definition in STREAM_DEFINITIONS.values())


def _silent_hook():
    class Hook:
        def message(self, text: str) -> None:
            raise AssertionError(f"no live message expected: {text}")

    return Hook()


def test_lag_monitor_counts_stalls_and_says_them_once_at_the_end() -> None:
    async def scenario() -> LagMonitor:
        monitor = LagMonitor(_silent_hook(), interval_s=0.001, warn_s=0.005)  # type: ignore[arg-type]
        monitor.start()
        for _ in range(3):
            await asyncio.sleep(0.01)
            time.sleep(0.03)  # the loop cannot run: a wake-up due in this window comes at least this late
        await asyncio.sleep(0.01)
        await monitor.stop()
        return monitor

    monitor = asyncio.run(scenario())  # nothing printed during the run (the hook would fail)
    summary = monitor.summary()
    assert summary is not None and summary["max_ms"] >= 20.0 and summary["over_threshold"] >= 3
    (note,) = monitor.notes([SampleResult(id="n", category="x", ok=True, turns=1, latency_s=1.0)])
    assert f"stalled {summary['over_threshold']} times over 5 ms during the run" in note  # the count
    assert "run the client on a less busy machine or lower --concurrency" in note  # the action
    assert "chunk" not in note and "stream" not in note  # worded for a run that did not stream


def test_stalls_are_said_only_where_they_can_move_a_latency() -> None:
    streamed = LagMonitor(_silent_hook(), streamed=True)  # type: ignore[arg-type]
    streamed.lags = [0.001] * 99 + [0.015]
    assert streamed.warning() is None  # kernel-timed reads: only merged chunks matter (merge_warning)
    rare = LagMonitor(_silent_hook())  # type: ignore[arg-type]
    rare.lags = [0.001] * 9_990 + [0.015] * 10  # 0.15 s of stalls in a 110 s run: 0.14%
    assert rare.warning() is None and rare.notes([]) == []
    busy = LagMonitor(_silent_hook())  # type: ignore[arg-type]
    busy.lags = [0.001] * 90 + [0.015] * 10  # 0.15 s of stalls in a 1.24 s run
    note = busy.warning() or ""
    assert "stalled 10 times over 10 ms" in note and "12.1% of the run's time" in note
    assert note.endswith("run the client on a less busy machine or lower --concurrency")
    quiet = LagMonitor(_silent_hook())  # type: ignore[arg-type]
    quiet.lags = [0.001] * 100
    assert quiet.warning() is None and quiet.notes([]) == []


def test_lag_later_than_the_chunk_gap_warns_that_chunks_may_merge() -> None:
    def streamed(gaps: tuple[float, ...], ok: bool = True) -> SampleResult:
        return SampleResult(id="s", category="x", ok=ok, turns=1, latency_s=1.0, itl_s=gaps)

    monitor = LagMonitor(_silent_hook(), streamed=True)  # type: ignore[arg-type]
    monitor.lags = [0.001] * 95 + [0.007] * 5  # p99 7 ms: under the 10 ms threshold of the stall count
    assert monitor.warning() is None
    assert monitor.notes([streamed((0.010, 0.012, 0.011))]) == []  # 11 ms between chunks: no read that late
    notes = monitor.notes([streamed((0.005, 0.005, 0.006)), streamed((0.001,), ok=False)])
    assert len(notes) == 1 and "median gap between streamed chunks (5.0 ms)" in notes[0]
    assert "in 5 of 100 samples (p99 7.0 ms)" in notes[0]
    assert monitor.notes([SampleResult(id="n", category="x", ok=True, turns=1, latency_s=1.0)]) == []  # not streamed
    monitor.lags = [0.001] * 95 + [0.020] * 5
    (merging,) = monitor.notes([streamed((0.005,))])  # streamed: what the stalls do to chunks, said once
    assert "median gap between streamed chunks" in merging


def test_compare_stats_prints_the_streaming_table(fake_server: FakeServer, tmp_path: Path, capsys) -> None:
    from bench.cli import main

    _, base = _streamed(fake_server, tmp_path, "b.json")
    _, spec = _streamed(fake_server, tmp_path, "s.json")
    assert main(["compare", "--baseline", str(base), "--speculative", str(spec), "--stats"]) == 0
    out = capsys.readouterr().out
    assert "itl_tok_p50" in out and "queue wait:" in out and "speculative: Streaming latencies" in out



def test_the_report_shows_the_streaming_tables_with_their_definitions(fake_server: FakeServer,
                                                                     tmp_path: Path) -> None:
    from bench.analysis import compare
    from bench.render import render_report

    _, base = _streamed(fake_server, tmp_path, "b.json")
    _, spec = _streamed(fake_server, tmp_path, "s.json")
    report = render_report(compare(load_run(base), load_run(spec)))
    for arm in ("baseline", "speculative"):
        assert f"## Streaming latencies ({arm})" in report
    assert "itl_tok_p50" in report and "tpot_p99" in report and "queue_p99" in report
    assert all(f"- {name}: {definition}" in report for name, definition in STREAM_DEFINITIONS.items())

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



def test_perf_busy_cores_load_the_machine_and_stop_after() -> None:
    import resource

    perf = _perf_module()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with perf.busy_cores(2):
        time.sleep(2.0)  # long enough for the two to get 0.3 s of CPU on a 2-core machine shared with others
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # counts only children that were waited for: all of them
    assert (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) >= 0.3
    with pytest.raises(RuntimeError), perf.busy_cores(1):
        time.sleep(1.5)  # 0.1 s of CPU even when the machine is shared
        raise RuntimeError("a failed measurement still stops (and waits for) the busy process")
    last = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert (last.ru_utime + last.ru_stime) - (after.ru_utime + after.ru_stime) >= 0.1
    with pytest.raises(SystemExit) as info:
        perf.main(["--busy", "-1"])
    assert info.value.code == 2

def test_journal_fsyncs_beside_the_event_loop(tmp_path: Path, monkeypatch) -> None:
    import os
    import threading

    from bench.records import Journal, journal_path

    callers: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (callers.append(threading.current_thread().name),
                                                                real_fsync(fd)))
    journal = Journal(journal_path(tmp_path / "r.json"), {"config": {}}, append=False)
    journal._syncing.join()  # the header's fsync, started beside the loop too
    assert callers and threading.main_thread().name not in callers
    callers.clear()
    journal._last_sync -= 2.0  # a second has passed since the last sync
    journal.append(SampleResult(id="a", category="x", ok=True, turns=1, latency_s=1.0))
    journal.close()
    assert callers[0] != threading.main_thread().name  # the periodic sync: not on the caller's thread
    assert callers[-1] == threading.main_thread().name  # close: synchronous
    assert read_journal(journal_path(tmp_path / "r.json"))[1][0].id == "a"


# ------------------------------------------------------------- socket-side times, batches and turns

needs_linux_stamps = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's")


def _connected_pair() -> tuple[socket.socket, socket.socket]:
    """(a stamped client socket, the server's end) over loopback TCP."""
    listener = socket.create_server(("127.0.0.1", 0))
    client = stamped_socket((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", 0)))
    client.connect(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return client, server


@needs_linux_stamps
@pytest.mark.parametrize("method", ["recv", "recv_into"])
def test_a_late_read_still_says_when_its_bytes_arrived(method: str) -> None:
    keeper = stamped_socket((socket.AF_INET, socket.SOCK_STREAM, 0, "", ("", 0)))
    time.sleep(0.05)  # the kernel turns stamping on a moment after a socket first asks (as Transport does)
    client, server = _connected_pair()
    keeper.close()
    try:
        assert isinstance(client, StampedSocket)
        sent = time.perf_counter()
        server.sendall(b"x" * 100)
        time.sleep(0.2)  # the reader is late
        if method == "recv":
            assert client.recv(262144) == b"x" * 100
        else:
            buffer = bytearray(262144)
            assert client.recv_into(buffer) == 100 and bytes(buffer[:100]) == b"x" * 100
        read = time.perf_counter()
        assert sent - 0.005 <= client.received_at <= sent + 0.1  # arrived at once, read 0.2 s later
        assert read - client.received_at >= 0.1
        server.sendall(b"y" * 200_000)
        time.sleep(0.05)
        assert len(client.recv(262144)) <= READ_BYTES  # reads are capped
    finally:
        client.close()
        server.close()


def _split_events() -> tuple[bytes, list[tuple[str, int]]]:
    """A stream of varied LF-only event blocks and the (data, end offset) the line rules give for each."""
    rng = random.Random(17)
    body = b""
    expected: list[tuple[str, int]] = []
    shapes = [
        (b"data: plain", "plain"), (b"data:nospace", "nospace"), (b"data: two\ndata: lines", "two\nlines"),
        (b": a comment", None), (b"event: e\ndata: typed", "typed"), (b"id: 7\nretry: 10", None),
        (b"data: \xc3\xa9t\xc3\xa9", "\u00e9t\u00e9"), (b"data", ""),
        (b"\ndata: after a blank line", "after a blank line"),
    ]
    for _ in range(300):
        block, data = rng.choice(shapes)
        body += block + b"\n\n"
        if data is not None:
            expected.append((data, len(body)))
    return body, expected


def test_the_lf_fast_path_gives_what_the_line_rules_give_at_any_split() -> None:
    body, expected = _split_events()
    crlf = SSEDecoder()  # CRLF input takes the line-by-line path
    crlf_data = [data for data, _ in crlf.feed_positions(body.replace(b"\n", b"\r\n"))]
    assert crlf_data == [data for data, _ in expected]
    rng = random.Random(3)
    for _ in range(20):
        decoder = SSEDecoder()
        got: list[tuple[str, int]] = []
        start = 0
        while start < len(body):
            end = start + rng.randint(1, 400)
            got += decoder.feed_positions(body[start:end])
            start = end
        assert got == expected


def test_the_pacer_lets_one_waiting_task_through_per_loop_iteration() -> None:
    async def main() -> tuple[list[tuple[int, int]], bool]:
        loop = asyncio.get_running_loop()
        ticks = [0]

        def tick() -> None:
            ticks[0] += 1
            loop.call_soon(tick)

        loop.call_soon(tick)
        pacer = Pacer()
        passed: list[tuple[int, int]] = []

        async def waiter(index: int) -> None:
            await pacer.turn()
            passed.append((index, ticks[0]))

        tasks = [asyncio.create_task(waiter(index)) for index in range(6)]
        await asyncio.sleep(0)
        tasks[2].cancel()  # a cancelled waiter is skipped, not waited for
        await asyncio.gather(*tasks, return_exceptions=True)
        return passed, tasks[2].cancelled()

    passed, cancelled = asyncio.run(main())
    assert cancelled and [index for index, _ in passed] == [0, 1, 3, 4, 5]
    assert all(later > earlier for (_, earlier), (_, later) in itertools.pairwise(passed))


def _sse_handler(events: list[bytes], pause_s: float, requests: list[int]):
    """A keep-alive server answering every POST with `events` (chunked SSE), `pause_s` before the last one."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            requests.append(1)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for index, event in enumerate(events):
                if index == len(events) - 1:
                    await asyncio.sleep(pause_s)
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    return handle


async def _collect(batches) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    async for batch in batches:
        assert not isinstance(batch, Response)
        events += batch
    return events


EVENTS = [b'data: {"n": 1}\n\n', b'data: {"n": 2}\n\n', b"data: [DONE]\n\n"]


def _blocked_stream(server: RawServer) -> list[StreamEvent]:
    """Stream from `server` while the client's loop is stuck from 0.05 s to 0.55 s (the last event is due at 0.2 s)."""

    async def main() -> list[StreamEvent]:
        async with Transport(timeout=10.0) as transport:
            asyncio.get_running_loop().call_later(0.05, time.sleep, 0.5)
            return await _collect(transport.stream_batches(server.url + "/v1/chat/completions", b"{}"))

    return asyncio.run(main())


def test_events_are_timed_by_arrival_while_the_loop_is_blocked() -> None:
    with RawServer(_sse_handler(EVENTS, 0.2, [])) as server:
        events = _blocked_stream(server)
    assert [event.data for event in events] == ['{"n": 1}', '{"n": 2}', "[DONE]"]
    if sys.platform.startswith("linux"):
        assert 0.15 <= events[2].at - events[1].at <= 0.4  # sent 0.2 s apart; read when the loop was free again


def test_a_finished_stream_never_silences_the_next_on_the_same_connection() -> None:
    requests: list[int] = []

    async def main(url: str) -> list[StreamEvent]:
        async with Transport(timeout=3.0, connections=1) as transport:
            first = transport.stream_batches(url, b"{}")
            async for batch in first:  # read up to [DONE], then leave the generator open
                if any(event.data == "[DONE]" for event in batch):
                    break
            second = transport.stream_batches(url, b"{}")
            head = await second.__anext__()  # the second stream is on the connection the first released
            await first.aclose()  # the first one's clean-up runs only now
            return [*head, *await _collect(second)]

    long = [b'data: {"n": %d, "pad": "%s"}\n\n' % (index, b"x" * 200) for index in range(60)]  # > 8 KiB
    with RawServer(_sse_handler([*long, b"data: [DONE]\n\n"], 0.3, requests)) as server:
        events = asyncio.run(main(server.url + "/v1/chat/completions"))
        connections = server.connections
    assert len(events) == 61 and events[-1].data == "[DONE]" and len(requests) == 2 and connections == 1



def test_a_connection_the_server_closed_after_a_stream_is_not_reused_for_the_next_request() -> None:
    """llama.cpp closes the connection after every streamed answer although its headers say keep-alive."""
    handled: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        handled.append(1)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                     b"Keep-Alive: timeout=5, max=100\r\n\r\n")
        for event in EVENTS:
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.2)  # the client's next request arrives meanwhile and is never read
        writer.close()

    async def main(url: str) -> tuple[list[list[StreamEvent]], float]:
        async with Transport(timeout=5.0, connections=1) as transport:
            first = await _collect(transport.stream_batches(url, b"{}"))
            sent = time.perf_counter()
            second = await _collect(transport.stream_batches(url, b"{}"))
            return [first, second], sent

    with RawServer(handle) as server:
        (first, second), sent = asyncio.run(main(server.url + "/v1/chat/completions"))
        connections = server.connections
    assert [event.data for event in first] == [event.data for event in second] == ['{"n": 1}', '{"n": 2}', "[DONE]"]
    assert len(handled) == 2 and connections == 2
    assert second[0].at - sent >= 0.15  # timed from the first attempt: the wait on the closing connection counts


def test_a_fresh_connection_closed_before_any_answer_is_a_disconnect_not_a_resend() -> None:
    seen: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        seen.append(1)
        writer.close()

    async def main(url: str) -> None:
        async with Transport(timeout=5.0, connections=1) as transport:
            await _collect(transport.stream_batches(url, b"{}"))

    with RawServer(handle) as server, pytest.raises(TransportError) as info:
        asyncio.run(main(server.url + "/v1/chat/completions"))
    assert info.value.kind == "disconnect" and seen == [1]

@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command for a test certificate")
def test_a_tls_stream_is_timed_by_arrival_too(tmp_path: Path, monkeypatch) -> None:
    import aiohttp.connector

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    monkeypatch.setattr(aiohttp.connector, "_SSL_CONTEXT_VERIFIED", ssl.create_default_context(cafile=str(cert)))
    serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.load_cert_chain(cert, key)
    with RawServer(_sse_handler(EVENTS, 0.2, []), tls=serving) as server:
        events = _blocked_stream(server)
    assert [event.data for event in events] == ['{"n": 1}', '{"n": 2}', "[DONE]"]
    if sys.platform.startswith("linux"):
        assert 0.15 <= events[2].at - events[1].at <= 0.4
