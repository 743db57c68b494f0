"""The one HTTP transport: aiohttp over a single pooled session.

Chosen by measurement on a 2-core machine against a static loopback server (FORMATS.md section 4):
one pooled `httpx.AsyncClient` reached ~1,085 req/s at concurrency 1 and ~310 req/s at 64 (pool
contention); one `aiohttp.ClientSession` reached ~7,100 req/s at 64. `make perf` re-measures this
harness end to end. Nothing else in speedbench opens HTTP connections to the server under test.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

KEEPALIVE_S = 4.0
_UNSENT = "Can not write request body"  # aiohttp's message when writing to a closed connection fails


class TransportError(Exception):
    """A request failed below HTTP: `kind` is connect, timeout or disconnect."""

    def __init__(self, kind: str, message: str) -> None:
        """Record the error kind and message."""
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Response:
    """A complete HTTP response: status, body, headers and the client-side time to the last byte."""

    status: int
    body: bytes
    headers: Mapping[str, str]
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One server-sent event's data and the perf_counter time its last byte came off the socket."""

    data: str
    at: float


class _Arrivals:
    """When each read from the socket brought a streamed body's bytes: (body bytes so far, perf_counter time)."""

    __slots__ = ("ends", "reader", "times")

    def __init__(self, reader: aiohttp.StreamReader, first_at: float) -> None:
        """Start with the body bytes that came with the headers, read at `first_at`."""
        self.reader = reader
        self.ends = [reader.total_bytes]
        self.times = [first_at]

    def time_of(self, offset: int, start: int) -> tuple[float, int]:
        """(arrival time of body byte `offset` - 1, index to start the next search at); -1.0 when unknown."""
        index = bisect.bisect_left(self.ends, offset, start)
        if index < len(self.ends):
            return self.times[index], index
        return -1.0, start


class _TimedProtocol(ResponseHandler):
    """aiohttp's connection protocol, timestamping each read as it comes off the socket (before any parsing).

    asyncio calls `data_received` right after its recv() in the event loop's read callback, so the time taken
    here does not wait for the coroutine that consumes the stream to be resumed. While a stream is read
    (`arrivals` set), the body size after each read is recorded with the time of that read.
    """

    last_at = 0.0
    arrivals: _Arrivals | None = None

    def data_received(self, data: bytes) -> None:
        """Time the read, hand it to aiohttp, record how far the streamed body got."""
        at = time.perf_counter()
        self.last_at = at
        super().data_received(data)
        arrivals = self.arrivals
        if arrivals is not None:
            total = arrivals.reader.total_bytes
            if total != arrivals.ends[-1]:
                arrivals.ends.append(total)
                arrivals.times.append(at)


def _classify(exc: BaseException) -> TransportError:
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return TransportError("timeout", f"timed out ({exc.__class__.__name__})")
    if isinstance(exc, aiohttp.ClientConnectorError | ConnectionRefusedError):
        return TransportError("connect", f"cannot connect: {exc}")
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | ConnectionResetError):
        return TransportError("disconnect", f"server disconnected: {exc}")
    return TransportError("disconnect", f"{exc.__class__.__name__}: {exc}")


class Transport:
    """A pooled aiohttp session with per-request timeouts and SSE reading."""

    def __init__(
        self, *, timeout: float = 600.0, connections: int = 1, headers: Mapping[str, str] | None = None
    ) -> None:
        """Configure the pool size, default headers and per-request total timeout."""
        self._timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=min(timeout, 30.0))
        self._connections = max(1, connections)
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Transport:
        """Open the session."""
        # Idle connections are dropped before servers drop them (llama.cpp's keep-alive timeout is 5 s).
        connector = aiohttp.TCPConnector(
            limit=self._connections, ttl_dns_cache=300, force_close=False, keepalive_timeout=KEEPALIVE_S
        )
        # Private hook (aiohttp 3.x builds each connection's protocol from `_factory`): a protocol that
        # timestamps reads at the socket. Without it, streamed events are timed when they are consumed.
        if hasattr(connector, "_factory"):
            connector._factory = functools.partial(_TimedProtocol, loop=asyncio.get_running_loop())
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=self._timeout, headers=self._headers, auto_decompress=True
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close the session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The open session."""
        if self._session is None:
            raise RuntimeError("Transport used outside 'async with'")
        return self._session

    async def _send(
        self, method: str, url: str, body: bytes | None, timeout: aiohttp.ClientTimeout | None = None
    ) -> tuple[aiohttp.ClientResponse, float]:
        """Send a request; reconnect once if a pooled connection turns out closed before any response.

        Servers close idle or used-up keep-alive connections; writing the request then fails before
        the server has it (aiohttp: "Can not write request body"), so one fresh attempt is safe. Any
        other failure, a reset after the request was sent included, is not resent here: it is a
        fault to record (and `--retries` to retry, counted). Returns the response (headers read) and
        the perf_counter time of the first attempt, so a reconnect counts in the measured latency.
        """
        start = time.perf_counter()
        for attempt in (0, 1):
            try:
                response = await self.session.request(method, url, data=body, timeout=timeout or self._timeout)
                return response, start
            except aiohttp.ClientOSError as exc:
                if attempt or _UNSENT not in str(exc):
                    raise
        raise AssertionError("unreachable")

    async def post(self, url: str, body: bytes) -> Response:
        """POST a JSON body and read the whole response."""
        try:
            response, start = await self._send("POST", url, body)
            async with response:
                payload = await response.read()
                return Response(response.status, payload, _headers(response), time.perf_counter() - start)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _classify(exc) from exc

    async def get(self, url: str, timeout: float = 10.0) -> Response:
        """GET a URL (metrics, props) with a short timeout."""
        try:
            response, start = await self._send("GET", url, None, aiohttp.ClientTimeout(total=timeout))
            async with response:
                payload = await response.read()
                return Response(response.status, payload, _headers(response), time.perf_counter() - start)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _classify(exc) from exc

    async def stream(self, url: str, body: bytes) -> AsyncIterator[Response | StreamEvent]:
        """POST and yield server-sent events as they arrive; a non-200 answer is yielded as a Response."""
        async for batch in self.stream_batches(url, body):
            if isinstance(batch, Response):
                yield batch
                return
            for event in batch:
                yield event

    async def stream_batches(self, url: str, body: bytes) -> AsyncIterator[Response | list[StreamEvent]]:
        """POST and yield the server-sent events of each read as a list; a non-200 answer as a Response.

        Each event's `at` is when its last byte came off the socket (read callback of the event loop, see
        `_TimedProtocol`), not when this generator was resumed; a batch per read keeps the per-event work of
        a busy loop small.
        """
        try:
            response, start = await self._send("POST", url, body)
            async with response:
                if response.status != 200:
                    payload = await response.read()
                    yield Response(response.status, payload, _headers(response), time.perf_counter() - start)
                    return
                protocol = response.connection.protocol if response.connection is not None else None
                timed = isinstance(protocol, _TimedProtocol)
                arrivals = _Arrivals(response.content, protocol.last_at) if timed else None
                if timed:
                    protocol.arrivals = arrivals
                try:
                    async for batch in _events(response.content, arrivals):
                        yield batch
                finally:
                    if timed:
                        protocol.arrivals = None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _classify(exc) from exc


async def _events(reader: aiohttp.StreamReader, arrivals: _Arrivals | None) -> AsyncIterator[list[StreamEvent]]:
    """The events of a streamed body, a list per read, each timed by when its last byte arrived."""
    decoder = SSEDecoder()
    search = 0
    async for chunk in reader.iter_any():
        consumed = time.perf_counter()
        events = []
        for data, end in decoder.feed_positions(chunk):
            at = -1.0
            if arrivals is not None:
                at, search = arrivals.time_of(end, search)
            events.append(StreamEvent(data, at if at >= 0.0 else consumed))
        if events:
            yield events
    tail = [StreamEvent(data, time.perf_counter()) for data in decoder.close()]
    if tail:
        yield tail


def _headers(response: aiohttp.ClientResponse) -> Mapping[str, str]:
    """Response headers, copied only when someone may read them (a non-200 answer: Retry-After)."""
    return {} if response.status == 200 else dict(response.headers)


class SSEDecoder:
    """Incremental server-sent-events decoder: bytes in (any chunking), `data:` payloads out."""

    def __init__(self) -> None:
        """Start with an empty buffer."""
        self._buffer = b""
        self._offset = 0

    def feed_positions(self, chunk: bytes) -> list[tuple[str, int]]:
        """Add bytes; return (data payload, body offset just past its line's newline) of each completed line."""
        base = self._offset - len(self._buffer)
        self._offset += len(chunk)
        buffer = self._buffer + chunk if self._buffer else chunk
        out = []
        position = 0
        while True:
            newline = buffer.find(b"\n", position)
            if newline < 0:
                break
            if buffer.startswith(b"data:", position):
                out.append((_data(buffer[position:newline]), base + newline + 1))
            position = newline + 1
        self._buffer = buffer[position:]
        return out

    def feed(self, chunk: bytes) -> list[str]:
        """Add bytes; return the data payloads of the lines completed by them."""
        self._offset += len(chunk)
        self._buffer += chunk
        if b"\n" not in self._buffer:
            return []
        *lines, self._buffer = self._buffer.split(b"\n")
        return [_data(line) for line in lines if line.startswith(b"data:")]

    def close(self) -> list[str]:
        """The payload of an unterminated last line, if any."""
        line, self._buffer = self._buffer, b""
        return [_data(line)] if line.startswith(b"data:") else []


def _data(line: bytes) -> str:
    """The value of a `data:` line: one leading space and the line ending removed, as the SSE spec says."""
    value = line[5:].rstrip(b"\r")
    if value.startswith(b" "):
        value = value[1:]
    return value.decode("utf-8", errors="replace")


def retry_after_seconds(headers: Mapping[str, Any], default: float = 1.0) -> float:
    """Seconds to wait from a Retry-After header (delta seconds), bounded to [0, 60]."""
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return min(60.0, max(0.0, float(value))) if value is not None else default
    except (TypeError, ValueError):
        return default
