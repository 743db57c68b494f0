"""The one HTTP transport: aiohttp over a single pooled session.

aiohttp rather than httpx: one pooled session keeps its request rate as concurrency grows, where a pooled
httpx client contends for its pool; `make perf` measures this harness end to end. Nothing else in
speedbench opens HTTP connections to the server under test. What it needs of aiohttp's
internals (socket-side receive times) is in `_aiohttp_timing`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import email.utils
import random
import socket
import ssl
import time
import zlib
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import NamedTuple

import aiohttp

from bench._redact import one_line, redact_url
from bench.records import DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT_S
from bench.runner._aiohttp_timing import (
    WAKE_BYTES,
    Arrivals,
    TimedProtocol,
    install_timed_protocol,
    stamped_socket,
    timed_protocol,
)
from bench.runner._pacer import Pacer
from bench.runner._sse import SSEDecoder

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


class StreamEvent(NamedTuple):
    """One server-sent event's data and the perf_counter time it arrived."""

    data: str
    at: float


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


CONNECT_TIMEOUT_S = 10.0
"""Connecting (TCP and TLS handshake) takes at most this long."""


class Transport:
    """A pooled aiohttp session with per-request timeouts, bounded bodies and SSE reading."""

    def __init__(
        self, *, timeout: float = DEFAULT_TIMEOUT_S, connections: int = 1, headers: Mapping[str, str] | None = None,
        max_body_bytes: int = DEFAULT_MAX_RESPONSE_BYTES, stamped: bool = True,
    ) -> None:
        """Configure the pool size, default headers, per-request total timeout and the largest body read.

        `stamped`: connect on sockets that carry the kernel's receive time of each read (what streamed chunks
        are timed by); a transport of whole answers (latency to the last byte, timed by the client) reads
        plainly, one `recv` per read instead of a `recvmsg` and a clock conversion.
        """
        self._timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=min(timeout, CONNECT_TIMEOUT_S))
        self.max_body_bytes = max_body_bytes
        self._connections = max(1, connections)
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._session: aiohttp.ClientSession | None = None
        self._pacer = Pacer()
        self._stamp_keeper: socket.socket | None = None
        self._stamped = stamped

    async def __aenter__(self) -> Transport:
        """Open the session."""
        # Linux turns receive stamping on a moment after the first socket asks for it (deferred work), so
        # the first chunks of the first stream could go unstamped; a socket held open from now asks early.
        if self._stamped:
            self._stamp_keeper = stamped_socket((socket.AF_INET, socket.SOCK_STREAM, 0, "", ("", 0)))
        # Idle connections are dropped before servers drop them (llama.cpp's keep-alive timeout is 5 s).
        connector = aiohttp.TCPConnector(
            limit=self._connections, ttl_dns_cache=300, force_close=False, keepalive_timeout=KEEPALIVE_S,
            socket_factory=stamped_socket if self._stamped else None,
        )
        # A protocol that timestamps reads at the socket; without it, streamed events are timed when consumed.
        install_timed_protocol(connector)
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
        if self._stamp_keeper is not None:
            self._stamp_keeper.close()
            self._stamp_keeper = None

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
        the server has it (aiohttp: "Can not write request body"), so one fresh attempt is safe; so is one
        after a reused connection closed before any byte of the answer (`TimedProtocol.set_exception`). Any
        other failure, a reset after the request was sent included, is not resent here: it is a
        fault to record (and `--retries` to retry, counted). Returns the response (headers read) and
        the perf_counter time of the first attempt, so a reconnect counts in the measured latency.
        """
        start = time.perf_counter()
        for attempt in (0, 1):
            try:
                # never a redirect: it would take the request, its key and headers included, to another origin
                response = await self.session.request(method, url, data=body, timeout=timeout or self._timeout,
                                                      allow_redirects=False)
                return response, start
            except aiohttp.ClientOSError as exc:
                if attempt or _UNSENT not in str(exc):
                    raise
            except aiohttp.ServerDisconnectedError as exc:
                if attempt or not getattr(exc, "stale_connection", False):
                    raise
        raise AssertionError("unreachable")

    async def _read(self, response: aiohttp.ClientResponse) -> bytes:
        """The body, read in chunks and never beyond `max_body_bytes` (then TransportError too_large)."""
        limit = self.max_body_bytes if response.status == 200 else min(self.max_body_bytes, ERROR_BODY_BYTES)
        if response.status == 200 and (response.content_length or 0) > limit:
            raise _too_large(limit)
        if response.status == 200 and response.content_length is not None and _IDENTITY.get(
            response.headers.get("Content-Encoding", ""), False
        ):
            return await response.content.read()  # Content-Length bounds an uncompressed body: one read, no loop
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

    async def pace(self) -> None:
        """Wait for this task's turn to start a stream: one start per event-loop iteration (see `Pacer`)."""
        await self._pacer.turn()

    async def stream(self, url: str, body: bytes) -> AsyncGenerator[Response | StreamEvent, None]:
        """POST and yield server-sent events as they arrive; a non-200 answer is yielded as a Response."""
        async for batch in self.stream_batches(url, body):
            if isinstance(batch, Response):
                yield batch
                return
            for event in batch:
                yield event

    async def stream_batches(self, url: str, body: bytes) -> AsyncGenerator[Response | list[StreamEvent], None]:
        """POST and yield the server-sent events in lists, a batch at a time; a non-200 answer as a Response.

        Each event's `at` is when its last byte reached the socket (see `TimedProtocol`), not when it was
        parsed: the body is parsed in batches of a few KiB (`WAKE_BYTES`), so a busy loop resumes the reader once per
        batch rather than once per chunk. The body is never read beyond `max_body_bytes` (then TransportError
        too_large).
        """
        try:
            response, start = await self._send("POST", url, body)
            async with response:
                if response.status != 200:
                    payload = await self._read(response)
                    yield Response(response.status, payload, _headers(response), time.perf_counter() - start)
                    return
                protocol = timed_protocol(response)
                if protocol is not None:
                    deadline = start + self._timeout.total if self._timeout.total else None
                    batches = _batched_events(response.content, protocol, self.max_body_bytes, deadline, self._pacer)
                else:
                    batches = _events(response.content, self.max_body_bytes)
                async with contextlib.aclosing(batches):
                    async for batch in batches:
                        yield batch
        except (TimeoutError, aiohttp.ClientError, OSError, TransportError) as exc:
            raise _classify(exc, url) from exc


async def _batched_events(
    reader: aiohttp.StreamReader, protocol: TimedProtocol, limit: int, deadline: float | None, pacer: Pacer
) -> AsyncGenerator[list[StreamEvent], None]:
    """The events of a streamed body, parsed in batches of a few KiB (`WAKE_BYTES`), each timed by its arrival.

    The reader sleeps until the protocol says the batch is ready; each event's `at` is when the read that
    completed it came off the socket (recorded by `TimedProtocol`), not when it was parsed. Every batch,
    the last one included, is parsed at its turn at the pacer, like the start of a stream.
    """
    arrivals = Arrivals(reader, protocol.last_at, pacer)
    protocol.arrivals = arrivals
    decoder = SSEDecoder()
    search = 0
    try:
        while True:
            if arrivals.ready():
                await pacer.turn()
            else:  # the protocol wakes the reader through the pacer
                waiter = arrivals.waiter = asyncio.get_running_loop().create_future()
                remaining = None if deadline is None else deadline - time.perf_counter()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError("stream exceeded its total timeout")
                await asyncio.wait_for(waiter, remaining)
            chunk = reader.read_nowait(-1)
            if not chunk:
                if reader.at_eof():
                    break
                continue
            arrivals.consumed += len(chunk)
            arrivals.wake_at = arrivals.consumed + random.randint(*WAKE_BYTES)
            if arrivals.consumed > limit:
                raise _too_large(limit)
            events = []
            for data, end in decoder.feed_positions(chunk):
                at, search = arrivals.time_of(end, search)
                events.append(StreamEvent(data, at if at >= 0.0 else time.perf_counter()))
            if events:
                yield events
    finally:
        if protocol.arrivals is arrivals:  # the connection may already serve the next stream (released at EOF)
            protocol.arrivals = None
        arrivals.waiter = None
    decoder.close()


async def _events(reader: aiohttp.StreamReader, limit: int) -> AsyncGenerator[list[StreamEvent], None]:
    """The events of a streamed body, a list per read, each timed when it is parsed (no socket-side times)."""
    decoder = SSEDecoder()
    received = 0
    async for chunk in reader.iter_any():
        consumed = time.perf_counter()
        received += len(chunk)
        if received > limit:
            raise _too_large(limit)
        events = [StreamEvent(data, consumed) for data in decoder.feed(chunk)]
        if events:
            yield events
    decoder.close()


_IDENTITY = {"": True, "identity": True}
"""Content-Encoding values whose body is as long as its Content-Length says."""
ERROR_BODY_BYTES = 64 * 1024
"""Of a non-200 answer only this much is read (its first 500 characters are recorded)."""


def _too_large(limit: int) -> TransportError:
    return TransportError(
        "too_large", f"response larger than {limit} bytes: not read further (raise --max-response-bytes to allow it)"
    )


def _headers(response: aiohttp.ClientResponse) -> Mapping[str, str]:
    """Response headers, copied only when someone may read them (a non-200 answer: Retry-After)."""
    return {} if response.status == 200 else dict(response.headers)


def retry_after_seconds(headers: Mapping[str, str], default: float = 1.0) -> float:
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
