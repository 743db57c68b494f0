"""The one HTTP transport: aiohttp over a single pooled session.

Chosen by measurement on a 2-core machine against a static loopback server (FORMATS.md section 4):
one pooled `httpx.AsyncClient` reached ~1,085 req/s at concurrency 1 and ~310 req/s at 64 (pool
contention); one `aiohttp.ClientSession` reached ~7,100 req/s at 64. `make perf` re-measures this
harness end to end. Nothing else in speedbench opens HTTP connections to the server under test.
"""

from __future__ import annotations

import asyncio
import bisect
import datetime as dt
import email.utils
import functools
import re
import ssl
import time
import zlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

from bench._redact import one_line, redact_url

KEEPALIVE_S = 4.0
_UNSENT = "Can not write request body"  # aiohttp's message when writing to a closed connection fails


class TransportError(Exception):
    """A request failed below HTTP: `kind` is connect, tls, timeout, disconnect, bad_encoding or too_large."""

    def __init__(self, kind: str, message: str) -> None:
        """Record the error kind and message (redacted, on one line)."""
        super().__init__(one_line(message))
        self.kind = kind


NOT_RETRIED = frozenset({"too_large", "tls", "bad_encoding"})
"""Transport error kinds that the same request would meet again: `--retries` does not resend them."""


@dataclass(frozen=True, slots=True)
class Response:
    """A complete HTTP response: status, body, headers and the client-side time to the last byte."""

    status: int
    body: bytes
    headers: Mapping[str, str]
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One server-sent event's data and the perf_counter time it arrived."""

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


def _classify(exc: BaseException, url: str = "") -> TransportError:
    if isinstance(exc, TransportError):
        return exc
    if isinstance(exc, aiohttp.ClientConnectorSSLError | aiohttp.ClientSSLError | ssl.SSLError) or (
        isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, ssl.SSLError)
    ):
        hint = " (is the server plain HTTP? try http:// instead of https://)" if url.startswith("https:") else ""
        return TransportError("tls", f"TLS handshake with {redact_url(url) or 'the server'} failed{hint}: {exc}")
    if isinstance(exc, aiohttp.ConnectionTimeoutError) and url.startswith("https:"):
        # connecting includes the TLS handshake: a plain-HTTP server never answers the TLS hello
        return TransportError(
            "tls", f"no TLS handshake with {redact_url(url)} (is the server plain HTTP? try http:// instead): {exc}"
        )
    if isinstance(exc, aiohttp.ClientPayloadError) and _is_encoding_error(exc):
        return TransportError("bad_encoding", f"response body cannot be decoded (Content-Encoding): {exc}")
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return TransportError("timeout", f"timed out ({exc.__class__.__name__})")
    if isinstance(exc, aiohttp.ClientConnectorError | ConnectionRefusedError):
        return TransportError("connect", f"cannot connect: {exc}")
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | ConnectionResetError):
        return TransportError("disconnect", f"server disconnected: {exc}")
    return TransportError("disconnect", f"{exc.__class__.__name__}: {exc}")


def _is_encoding_error(exc: BaseException) -> bool:
    """Whether a payload error comes from a body that cannot be decompressed (bad gzip/deflate/br)."""
    seen: BaseException | None = exc
    while seen is not None:
        text = str(seen).lower()
        if isinstance(seen, zlib.error) or type(seen).__name__ == "ContentEncodingError" or "content-encoding" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest response body read per request unless configured otherwise."""
CONNECT_TIMEOUT_S = 10.0
"""Connecting (TCP and TLS handshake) takes at most this long."""


class Transport:
    """A pooled aiohttp session with per-request timeouts, bounded bodies and SSE reading."""

    def __init__(
        self, *, timeout: float = 600.0, connections: int = 1, headers: Mapping[str, str] | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        """Configure the pool size, default headers, per-request total timeout and the largest body read."""
        self._timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=min(timeout, CONNECT_TIMEOUT_S))
        self.max_body_bytes = max_body_bytes
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

    async def _read(self, response: aiohttp.ClientResponse) -> bytes:
        """The body, read in chunks and never beyond `max_body_bytes` (then TransportError too_large)."""
        limit = self.max_body_bytes if response.status == 200 else min(self.max_body_bytes, ERROR_BODY_BYTES)
        if response.status == 200 and (response.content_length or 0) > limit:
            raise _too_large(limit)
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.content.iter_chunked(65536):
            size += len(chunk)
            if size > limit:
                if response.status != 200:  # an error body only needs its beginning
                    chunks.append(chunk[: len(chunk) - (size - limit)])
                    break
                raise _too_large(limit)
            chunks.append(chunk)
        return b"".join(chunks)

    async def post(self, url: str, body: bytes) -> Response:
        """POST a JSON body and read the response (at most `max_body_bytes`)."""
        try:
            response, start = await self._send("POST", url, body)
            async with response:
                payload = await self._read(response)
                return Response(response.status, payload, _headers(response), time.perf_counter() - start)
        except (TimeoutError, aiohttp.ClientError, OSError, TransportError) as exc:
            raise _classify(exc, url) from exc

    async def get(self, url: str, timeout: float = 10.0) -> Response:
        """GET a URL (metrics, props) with a short timeout (connecting included)."""
        try:
            response, start = await self._send(
                "GET", url, None, aiohttp.ClientTimeout(total=timeout, sock_connect=timeout)
            )
            async with response:
                payload = await self._read(response)
                return Response(response.status, payload, _headers(response), time.perf_counter() - start)
        except (TimeoutError, aiohttp.ClientError, OSError, TransportError) as exc:
            raise _classify(exc, url) from exc

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
        a busy loop small. The body is never read beyond `max_body_bytes` (then TransportError too_large).
        """
        try:
            response, start = await self._send("POST", url, body)
            async with response:
                if response.status != 200:
                    payload = await self._read(response)
                    yield Response(response.status, payload, _headers(response), time.perf_counter() - start)
                    return
                protocol = response.connection.protocol if response.connection is not None else None
                timed = isinstance(protocol, _TimedProtocol)
                arrivals = _Arrivals(response.content, protocol.last_at) if timed else None
                if timed:
                    protocol.arrivals = arrivals
                try:
                    async for batch in _events(response.content, arrivals, self.max_body_bytes):
                        yield batch
                finally:
                    if timed:
                        protocol.arrivals = None
        except (TimeoutError, aiohttp.ClientError, OSError, TransportError) as exc:
            raise _classify(exc, url) from exc


async def _events(
    reader: aiohttp.StreamReader, arrivals: _Arrivals | None, limit: int
) -> AsyncIterator[list[StreamEvent]]:
    """The events of a streamed body, a list per read, each timed by when its last byte arrived."""
    decoder = SSEDecoder()
    search = 0
    received = 0
    async for chunk in reader.iter_any():
        consumed = time.perf_counter()
        received += len(chunk)
        if received > limit:
            raise _too_large(limit)
        events = []
        for data, end in decoder.feed_positions(chunk):
            at = -1.0
            if arrivals is not None:
                at, search = arrivals.time_of(end, search)
            events.append(StreamEvent(data, at if at >= 0.0 else consumed))
        if events:
            yield events
    decoder.close()


ERROR_BODY_BYTES = 64 * 1024
"""Of a non-200 answer only this much is read (its first 500 characters are recorded)."""


def _too_large(limit: int) -> TransportError:
    return TransportError(
        "too_large", f"response larger than {limit} bytes: not read further (raise --max-response-bytes to allow it)"
    )


def _headers(response: aiohttp.ClientResponse) -> Mapping[str, str]:
    """Response headers, copied only when someone may read them (a non-200 answer: Retry-After)."""
    return {} if response.status == 200 else dict(response.headers)


class SSEDecoder:
    """Incremental server-sent-events decoder following the WHATWG event-stream rules; bytes in, event data out.

    Lines end with CRLF, LF or CR (a CR at the end of a chunk may be the first half of a CRLF);
    `data:` lines append to the event's data (joined with LF); a blank line dispatches the event
    (nothing when it has no data); lines starting with `:` are comments; other fields (event, id,
    retry) are read and ignored; a field without a colon has an empty value. At the end of the
    stream an event without its closing blank line is discarded, as the rules say.
    """

    def __init__(self) -> None:
        """Start with an empty buffer and no pending event."""
        self._buffer = b""
        self._data: list[str] = []
        self._has_data = False
        self._after_cr = False
        self._total = 0

    def feed(self, chunk: bytes) -> list[str]:
        """Add bytes; return the data of the events completed by them."""
        return [data for data, _ in self.feed_positions(chunk)]

    def feed_positions(self, chunk: bytes) -> list[tuple[str, int]]:
        """Add bytes; return (event data, body offset just past the blank line that dispatched it) per event."""
        start = self._total
        self._total += len(chunk)
        if self._after_cr and chunk.startswith(b"\n"):
            chunk, start = chunk[1:], start + 1  # the LF of a CRLF split across chunks
        self._after_cr = False
        if not chunk:
            return []
        base = start - len(self._buffer)
        buffer = self._buffer + chunk if self._buffer else chunk
        events: list[tuple[str, int]] = []
        position = 0
        for match in _LINE_BREAK.finditer(buffer):
            data = self._line(buffer[position:match.start()])
            position = match.end()
            if data is not None:
                events.append((data, base + position))
        self._buffer = buffer[position:]
        self._after_cr = chunk.endswith(b"\r")
        return events

    def _line(self, line: bytes) -> str | None:
        """Take one line; return the event's data when the line (a blank one) dispatches an event."""
        if not line:
            data = "\n".join(self._data) if self._has_data else None
            self._data, self._has_data = [], False
            return data
        if line.startswith(b":"):
            return None
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value.decode("utf-8", errors="replace"))
            self._has_data = True
        return None

    def close(self) -> list[str]:
        """End of stream: an unterminated event is discarded (WHATWG); nothing is returned."""
        self._buffer, self._data, self._has_data, self._after_cr = b"", [], False, False
        return []


_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def retry_after_seconds(headers: Mapping[str, Any], default: float = 1.0) -> float:
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date), bounded to [0, 60]."""
    value = headers.get("Retry-After") or headers.get("retry-after")
    if value is None:
        return default
    try:
        return min(60.0, max(0.0, float(value)))
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError):
        return default
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return min(60.0, max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds()))
