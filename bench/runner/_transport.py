"""The one HTTP transport: aiohttp over a single pooled session.

Chosen by measurement on a 2-core machine against a static loopback server (FORMATS.md section 4):
one pooled `httpx.AsyncClient` reached ~1,085 req/s at concurrency 1 and ~310 req/s at 64 (pool
contention); one `aiohttp.ClientSession` reached ~7,100 req/s at 64. `make perf` re-measures this
harness end to end. Nothing else in speedbench opens HTTP connections to the server under test.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import datetime as dt
import email.utils
import functools
import random
import re
import socket
import ssl
import struct
import sys
import time
import zlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple

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


class StreamEvent(NamedTuple):
    """One server-sent event's data and the perf_counter time it arrived."""

    data: str
    at: float


WAKE_BYTES = (1024, 8192)
"""A streamed body is handed to its reader once a random amount in this range is buffered (or at its end).

Parsing is batched, and the amounts are drawn anew for every batch: streams that a server feeds in lock
step (as batching servers do) would otherwise all reach a fixed amount in the same loop iteration and
parse together, a stall of tens of milliseconds at 256 streams."""


class _Arrivals:
    """When each read from the socket brought a streamed body's bytes: (body bytes so far, perf_counter time).

    It also lets the stream's reader sleep until `WAKE_BYTES` are buffered, the body ended or failed, instead
    of being resumed for every read: the protocol records each read's time, so parsing later loses nothing.
    The reader is woken through the pacer, so batches are parsed one per event-loop iteration.
    """

    __slots__ = ("consumed", "ends", "pacer", "reader", "times", "waiter", "wake_at")

    def __init__(self, reader: aiohttp.StreamReader, first_at: float, pacer: _Pacer) -> None:
        """Start with the body bytes that came with the headers, read at `first_at`."""
        self.reader = reader
        self.pacer = pacer
        self.ends = [reader.total_bytes]
        self.times = [first_at]
        self.consumed = 0
        self.wake_at = random.randint(*WAKE_BYTES)
        self.waiter: asyncio.Future[None] | None = None

    def time_of(self, offset: int, start: int) -> tuple[float, int]:
        """(arrival time of body byte `offset` - 1, index to start the next search at); -1.0 when unknown."""
        index = bisect.bisect_left(self.ends, offset, start)
        if index < len(self.ends):
            return self.times[index], index
        return -1.0, start

    def ready(self) -> bool:
        """Whether the reader has enough to do: the batch's bytes buffered, the body ended, or it failed."""
        reader = self.reader
        return reader.total_bytes >= self.wake_at or reader.is_eof() or reader.exception() is not None

    def wake(self) -> None:
        """Resume the sleeping reader (if any) at its turn."""
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            self.pacer.admit(waiter)


_SO_TIMESTAMPNS = 35  # Linux: SO_TIMESTAMPNS_OLD = SCM_TIMESTAMPNS (the socket module does not name it)
_STAMP_SPACE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
_STAMP = struct.Struct("@qq")  # struct timespec on 64-bit Linux
_MAX_STAMP_AGE_NS = 10 * 1_000_000_000  # older than this means the realtime clock stepped: use the read time
READ_BYTES = 65536
"""Largest single read from a socket. asyncio asks for 256 KiB, and a buffer that size costs a fresh mapping
per read: 14-20 us against 2.5 us for 64 KiB on this 2-core VM (`make perf` shows the effect)."""


class _StampedSocket(socket.socket):
    """A client socket whose reads carry the kernel's receive time of the newest data they return.

    With SO_TIMESTAMPNS the kernel stamps each segment when it reaches the socket (software timestamp,
    CLOCK_REALTIME) and TCP keeps the newest stamp when it merges queued segments; `recv` (what asyncio calls
    in its read callback) reads with recvmsg and converts that stamp to the perf_counter clock in
    `received_at`. So a read that the event loop makes late still tells when its bytes arrived. Reads are
    capped at `READ_BYTES`.
    """

    __slots__ = ("received_at",)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        """Read like socket.recv and record in `received_at` when the newest byte read arrived."""
        data, ancillary, _flags, _address = self.recvmsg(min(bufsize, READ_BYTES), _STAMP_SPACE, flags)
        self._stamp(ancillary)
        return data

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        """Read like socket.recv_into (asyncio's path for TLS) and record `received_at` likewise."""
        view = memoryview(buffer).cast("B")
        size = min(nbytes or len(view), len(view), READ_BYTES)
        count, ancillary, _flags, _address = self.recvmsg_into([view[:size]], _STAMP_SPACE, flags)
        self._stamp(ancillary)
        return count

    def _stamp(self, ancillary: list[tuple[int, int, bytes]]) -> None:
        """Set `received_at` from a read's ancillary data (the read's own time when it carries no stamp)."""
        now = time.perf_counter()
        self.received_at = now
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(payload) >= _STAMP.size:
                seconds, nanoseconds = _STAMP.unpack_from(payload)
                age_ns = time.time_ns() - (seconds * 1_000_000_000 + nanoseconds)
                if 0 <= age_ns < _MAX_STAMP_AGE_NS:
                    self.received_at = now - age_ns / 1e9


def _stamped_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """aiohttp's socket factory: a socket with kernel receive timestamps where the platform has them."""
    family, type_, proto = addr_info[0], addr_info[1], addr_info[2]
    if not _STAMP_SPACE or not sys.platform.startswith("linux"):
        return socket.socket(family=family, type=type_, proto=proto)
    sock = _StampedSocket(family=family, type=type_, proto=proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        pass  # no stamps: `received_at` is then the time of the read
    sock.received_at = 0.0
    return sock


_NO_CAUSE: Any = object()


class _TimedProtocol(ResponseHandler):
    """aiohttp's connection protocol, timestamping each read with when its bytes reached the socket.

    asyncio calls `data_received` right after its recv() in the event loop's read callback. On a
    `_StampedSocket` the time of a read is the kernel's receive time of its newest byte, so it does not
    depend on how late the loop got to the read; elsewhere it is the time `data_received` runs, before any
    parsing. While a stream is read (`arrivals` set), the body size after each read is recorded with its time.
    """

    last_at = 0.0
    arrivals: _Arrivals | None = None
    stamped: _StampedSocket | None = None
    requests = 0
    """Requests sent on this connection so far (aiohttp sets the response parameters once per request)."""
    heard = False
    """Whether any byte came back since the current request was sent."""

    def set_response_params(self, **params: Any) -> None:
        """Count the request about to be sent; nothing of its answer has been heard yet."""
        self.requests += 1
        self.heard = False
        super().set_response_params(**params)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Remember the connection's socket when it carries kernel receive times."""
        super().connection_made(transport)
        wrapped = transport.get_extra_info("socket")
        raw = getattr(wrapped, "_sock", wrapped)  # asyncio hands out a TransportSocket wrapping the socket
        self.stamped = raw if isinstance(raw, _StampedSocket) else None

    def data_received(self, data: bytes) -> None:
        """Time the read, hand it to aiohttp, record how far the streamed body got."""
        stamped = self.stamped
        at = stamped.received_at if stamped is not None else time.perf_counter()
        self.last_at = at
        self.heard = True
        super().data_received(data)
        arrivals = self.arrivals
        if arrivals is not None:
            total = arrivals.reader.total_bytes
            if total != arrivals.ends[-1]:
                arrivals.ends.append(total)
                arrivals.times.append(at)
            if arrivals.waiter is not None and arrivals.ready():
                arrivals.wake()

    def connection_lost(self, exc: BaseException | None) -> None:
        """Let aiohttp end the body, then wake a sleeping stream reader."""
        super().connection_lost(exc)
        if self.arrivals is not None:
            self.arrivals.wake()

    def set_exception(self, exc: BaseException, exc_cause: BaseException = _NO_CAUSE) -> None:
        """Let aiohttp fail the body, then wake a sleeping stream reader.

        A connection closed under a request that was sent on it after an earlier one, before any byte of the
        answer came back, is marked stale: the server had closed it after its previous answer (llama.cpp does
        after every streamed one, though its headers say keep-alive), and `Transport._send` sends the request
        again on a fresh connection.
        """
        if isinstance(exc, aiohttp.ServerDisconnectedError) and self.requests > 1 and not self.heard:
            exc.stale_connection = True  # type: ignore[attr-defined]
        if exc_cause is _NO_CAUSE:
            super().set_exception(exc)
        else:
            super().set_exception(exc, exc_cause)
        if self.arrivals is not None:
            self.arrivals.wake()


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


class _Pacer:
    """Lets waiting tasks through one per event-loop iteration, so the loop reads its sockets in between.

    asyncio runs every task that became ready before it polls the sockets again. When many streams start,
    parse or end at once (256 streams finishing in the same 10 ms), their requests, parses and records would
    run back to back for up to a few hundred milliseconds while the other streams' chunks queue up unread; a
    late read merges chunks and loses their separate arrival times. Through the pacer the same work is
    spread over iterations, one task's step each, with a poll of the sockets between steps. Reads are never
    paced: a stream whose turn is late only has more to parse when it comes.
    """

    def __init__(self) -> None:
        """No task waiting."""
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._releasing = False

    async def turn(self) -> None:
        """Wait until it is this task's turn (the next iteration when nobody else waits)."""
        future = asyncio.get_running_loop().create_future()
        self.admit(future)
        await future

    def admit(self, future: asyncio.Future[None]) -> None:
        """Queue `future`: its result is set at its turn (skipped if it is done by then, e.g. cancelled)."""
        self._waiters.append(future)
        if not self._releasing:
            self._releasing = True
            future.get_loop().call_soon(self._release, future.get_loop())

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let the first task still waiting through; come back next iteration while others wait."""
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done():
                future.set_result(None)
                break
        if self._waiters:
            loop.call_soon(self._release, loop)
        else:
            self._releasing = False


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
        self._pacer = _Pacer()
        self._stamp_keeper: socket.socket | None = None

    async def __aenter__(self) -> Transport:
        """Open the session."""
        # Linux turns receive stamping on a moment after the first socket asks for it (deferred work), so
        # the first chunks of the first stream could go unstamped; a socket held open from now asks early.
        self._stamp_keeper = _stamped_socket((socket.AF_INET, socket.SOCK_STREAM, 0, "", ("", 0)))
        # Idle connections are dropped before servers drop them (llama.cpp's keep-alive timeout is 5 s).
        connector = aiohttp.TCPConnector(
            limit=self._connections, ttl_dns_cache=300, force_close=False, keepalive_timeout=KEEPALIVE_S,
            socket_factory=_stamped_socket,
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
        after a reused connection closed before any byte of the answer (`_TimedProtocol.set_exception`). Any
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
            except aiohttp.ServerDisconnectedError as exc:
                if attempt or not getattr(exc, "stale_connection", False):
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

    async def pace(self) -> None:
        """Wait for this task's turn to start a stream: one start per event-loop iteration (see `_Pacer`)."""
        await self._pacer.turn()

    async def stream(self, url: str, body: bytes) -> AsyncIterator[Response | StreamEvent]:
        """POST and yield server-sent events as they arrive; a non-200 answer is yielded as a Response."""
        async for batch in self.stream_batches(url, body):
            if isinstance(batch, Response):
                yield batch
                return
            for event in batch:
                yield event

    async def stream_batches(self, url: str, body: bytes) -> AsyncIterator[Response | list[StreamEvent]]:
        """POST and yield the server-sent events in lists, a batch at a time; a non-200 answer as a Response.

        Each event's `at` is when its last byte reached the socket (see `_TimedProtocol`), not when it was
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
                protocol = response.connection.protocol if response.connection is not None else None
                if isinstance(protocol, _TimedProtocol):
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
    reader: aiohttp.StreamReader, protocol: _TimedProtocol, limit: int, deadline: float | None, pacer: _Pacer
) -> AsyncIterator[list[StreamEvent]]:
    """The events of a streamed body, parsed in batches of a few KiB (`WAKE_BYTES`), each timed by its arrival.

    The reader sleeps until the protocol says the batch is ready; each event's `at` is when the read that
    completed it came off the socket (recorded by `_TimedProtocol`), not when it was parsed. Every batch,
    the last one included, is parsed at its turn at the pacer, like the start of a stream.
    """
    arrivals = _Arrivals(reader, protocol.last_at, pacer)
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


async def _events(reader: aiohttp.StreamReader, limit: int) -> AsyncIterator[list[StreamEvent]]:
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
        if not self._has_data and b"\r" not in buffer:
            return self._feed_lf(buffer, base)
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

    def _feed_lf(self, buffer: bytes, base: int) -> list[tuple[str, int]]:
        """`feed_positions` for a buffer with LF line ends only and no event pending: split at blank lines.

        Each complete block is one event; a block that is one `data: ` line (what servers send) is taken
        whole, any other block goes through the line rules. The incomplete last block stays buffered.
        """
        blocks = buffer.split(b"\n\n")
        self._buffer = blocks.pop()
        events: list[tuple[str, int]] = []
        position = base
        for block in blocks:
            position += len(block) + 2
            if block.startswith(b"data: ") and b"\n" not in block:
                events.append((block[6:].decode("utf-8", errors="replace"), position))
                continue
            for line in block.split(b"\n"):
                self._line(line)
            data = self._line(b"")
            if data is not None:
                events.append((data, position))
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
