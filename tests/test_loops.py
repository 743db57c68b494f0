"""The client's event loop: chosen by name, and kernel receive times of streamed reads on asyncio and uvloop alike."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from bench import BenchError
from bench.runner import LOOP_ENV, LOOPS, Transport, choose_loop, loop_factory, loop_name
from tests.fakeserver import RawServer, read_request

uvloop = pytest.importorskip("uvloop")
needs_linux_stamps = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's")

EVENTS = [b'data: {"n": 1}\n\n', b'data: {"n": 2}\n\n', b'data: {"n": 3}\n\n', b"data: [DONE]\n\n"]
GAP_S = 0.15


def _paced_sse():
    """A keep-alive server answering every POST with EVENTS, GAP_S apart."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for index, event in enumerate(EVENTS):
                if index:
                    await asyncio.sleep(GAP_S)
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    return handle


def _stream_with_a_stuck_loop(server: RawServer, factory) -> tuple[str, list[float]]:
    """(loop kind, arrival time of each event from the request) while the loop is stuck from 0.1 s to 0.7 s."""

    async def main() -> tuple[str, list[float]]:
        loop = asyncio.get_running_loop()
        async with Transport(timeout=10.0) as transport:
            started = time.perf_counter()
            loop.call_later(0.1, time.sleep, 0.6)
            events = []
            async for batch in transport.stream_batches(server.url + "/v1/chat/completions", b"{}"):
                events += batch
        return loop_name(loop), [event.at - started for event in events]

    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main())


@needs_linux_stamps
@pytest.mark.parametrize("name", LOOPS)
def test_streamed_reads_keep_the_kernels_receive_time_on_every_loop(name: str) -> None:
    with RawServer(_paced_sse()) as server:
        kind, times = _stream_with_a_stuck_loop(server, loop_factory(name))
    assert kind == name and len(times) == len(EVENTS)
    # the last event left the server at ~3 x 0.15 s, while the loop was stuck until 0.7 s: its time is the
    # kernel's receive time, not the time of the late read
    assert 3 * GAP_S - 0.03 <= times[-1] <= 3 * GAP_S + 0.15
    assert times[0] < 0.1


@needs_linux_stamps
def test_uvloops_own_transport_would_time_the_late_read_which_is_why_it_is_not_used() -> None:
    with RawServer(_paced_sse()) as server:
        kind, times = _stream_with_a_stuck_loop(server, uvloop.new_event_loop)
    assert kind == "uvloop" and times[-1] >= 0.65


def test_requests_on_one_keep_alive_connection_work_on_uvloop(fake_server) -> None:
    body = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}'

    async def main() -> list[int]:
        async with Transport(timeout=10.0) as transport:
            return [(await transport.post(fake_server.url + "/v1/chat/completions", body)).status for _ in range(5)]

    with asyncio.Runner(loop_factory=loop_factory("uvloop")) as runner:
        assert runner.run(main()) == [200] * 5


def test_the_loop_is_chosen_by_flag_then_environment_then_default(monkeypatch) -> None:
    monkeypatch.delenv(LOOP_ENV, raising=False)
    assert choose_loop() == "asyncio"
    assert choose_loop("uvloop") == "uvloop"
    monkeypatch.setenv(LOOP_ENV, "uvloop")
    assert choose_loop() == "uvloop" and choose_loop("asyncio") == "asyncio"
    monkeypatch.setenv(LOOP_ENV, "tokio")
    with pytest.raises(BenchError, match=r"\$SPEEDBENCH_LOOP: unknown event loop 'tokio'; available: asyncio, uvloop"):
        choose_loop()
    with pytest.raises(BenchError, match="--loop: unknown event loop 'trio'"):
        choose_loop("trio")


@pytest.mark.parametrize("name", LOOPS)
def test_a_streamed_run_on_either_loop_records_its_loop_and_its_chunk_gaps(name: str, fake_server, tmp_path) -> None:
    from bench.records import load_run
    from bench.runner import RunConfig, run_benchmark
    from tests.conftest import make_prompts

    config = RunConfig(url=fake_server.url, osl=8, stream=True, concurrency=2, loop=name)
    _, interrupted = run_benchmark(make_prompts(), config, output=tmp_path / "run.json")
    loaded = load_run(tmp_path / "run.json")
    assert not interrupted and loaded.completed_samples == len(loaded.results) == 4
    assert loaded.info.event_loop == name and "loop" not in loaded.config
    assert all(result.ttft_s is not None and result.itl_s for result in loaded.results)


def test_an_unknown_loop_in_the_config_is_refused_before_anything_runs(tmp_path) -> None:
    from bench.runner import RunConfig

    with pytest.raises(BenchError, match="--loop: unknown event loop 'tokio'"):
        RunConfig(url="http://127.0.0.1:9/v1", loop="tokio").validate()
