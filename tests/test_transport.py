"""The transport: aiohttp internals it relies on, status and error classification, bounded bodies, Retry-After."""

from __future__ import annotations

import asyncio
import json
import socket

import aiohttp
import pytest
from aiohttp.client_proto import ResponseHandler

from bench.runner import (
    Response,
    StreamEvent,
    Transport,
    TransportError,
    aiohttp_internals_missing,
    retry_after_seconds,
)
from tests.fakeserver import FakeServer, FakeState


def test_the_aiohttp_internals_used_for_socket_times_are_all_there() -> None:
    missing = aiohttp_internals_missing()
    assert missing == [], (
        f"aiohttp {aiohttp.__version__} changed internals that bench/runner/_aiohttp_timing.py relies on: "
        f"{missing}; socket-side stream timing would be silently lost. Adapt the adapter, then widen the "
        "aiohttp pin in pyproject.toml."
    )


def test_the_aiohttp_pin_covers_the_installed_version() -> None:
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    (spec,) = [line for line in project["project"]["dependencies"] if line.startswith("aiohttp")]
    lower, upper = spec.removeprefix("aiohttp").split(",")
    major_minor = tuple(int(part) for part in aiohttp.__version__.split(".")[:2])
    assert lower.startswith(">=") and upper.startswith("<")
    assert tuple(int(part) for part in lower[2:].split(".")[:2]) <= major_minor
    assert major_minor < tuple(int(part) for part in upper[1:].split(".")[:2])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_refused_connection_is_a_connect_error() -> None:
    async def main() -> None:
        async with Transport(timeout=5.0) as transport:
            await transport.post(f"http://127.0.0.1:{_free_port()}/v1/chat/completions", b"{}")

    with pytest.raises(TransportError) as caught:
        asyncio.run(main())
    assert caught.value.kind == "connect"


def test_post_get_and_stream_against_a_live_server(fake_state: FakeState, fake_server: FakeServer) -> None:
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}).encode()

    async def main() -> tuple[Response, Response, list[StreamEvent]]:
        async with Transport(timeout=10.0) as transport:
            plain = await transport.post(fake_server.url + "/v1/chat/completions", body.replace(b"true", b"false"))
            metrics = await transport.get(fake_server.url + "/metrics")
            events = [event async for event in transport.stream(fake_server.url + "/v1/chat/completions", body)]
        return plain, metrics, events

    plain, metrics, events = asyncio.run(main())
    assert plain.status == 200 and json.loads(plain.body)["choices"] and plain.elapsed_s > 0
    assert metrics.status in (200, 404)
    assert events[-1].data == "[DONE]" and all(isinstance(event, StreamEvent) for event in events)
    assert [event.at for event in events] == sorted(event.at for event in events)


def test_a_body_over_the_limit_is_not_read(fake_state: FakeState, fake_server: FakeServer) -> None:
    fake_state.fault = lambda index, body: "bigbody_5000"

    async def main() -> None:
        async with Transport(timeout=10.0, max_body_bytes=2048) as transport:
            await transport.post(fake_server.url + "/v1/chat/completions", b'{"messages": []}')

    with pytest.raises(TransportError) as caught:
        asyncio.run(main())
    assert caught.value.kind == "too_large"


def test_a_transport_used_outside_its_block_says_so() -> None:
    with pytest.raises(RuntimeError, match="outside"):
        _ = Transport().session


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({}, 1.0), ({"Retry-After": "3"}, 3.0), ({"retry-after": "999"}, 60.0), ({"Retry-After": "-4"}, 0.0),
     ({"Retry-After": "soon"}, 1.0), ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0)],
)
def test_retry_after_is_bounded(headers: dict[str, str], expected: float) -> None:
    assert retry_after_seconds(headers) == expected


def test_a_stream_flooding_past_the_read_buffer_pauses_reading_and_resumes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    events_sent = 8_000
    event = b'data: {"choices":[{"delta":{"content":"' + b"x" * 200 + b'"}}]}\n\n'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    pauses: list[bool] = []
    pause_reading = ResponseHandler.pause_reading

    def counted_pause(self: ResponseHandler) -> None:
        pauses.append(True)
        pause_reading(self)

    monkeypatch.setattr(ResponseHandler, "pause_reading", counted_pause)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(2)
        writer.write(head)
        for _ in range(events_sent):
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        writer.write(b"f\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def main() -> int:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions"
        count = 0
        async with server, Transport(timeout=30.0) as transport:
            async for batch in transport.stream_batches(url, b"{}"):
                assert isinstance(batch, list)
                count += len(batch)
                if count < 3_000:
                    await asyncio.sleep(0.2)  # a slow reader: the body piles up past aiohttp's high-water mark
        return count

    assert asyncio.run(asyncio.wait_for(main(), 60)) == events_sent + 1
    assert pauses, "the flood never paused reading: the test did not exercise flow control"
