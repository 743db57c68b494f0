"""The one place that reaches into aiohttp's internals: socket receive timestamps and a timed connection protocol.

aiohttp builds each connection's protocol from the connector's private `_factory`, and its protocol class
`aiohttp.client_proto.ResponseHandler` is internal; asyncio wraps the socket in a TransportSocket whose raw
socket is `_sock`. Everything that depends on them is here, checked by `check_internals()` (and a test), so an
aiohttp upgrade that changes them fails loudly instead of silently losing socket-side times. The supported
aiohttp range is pinned in pyproject.toml.
"""

from __future__ import annotations

import asyncio
import asyncio.trsock as trsock
import bisect
import functools
import random
import socket
import struct
import sys
import time
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

from bench.runner._pacer import Pacer

WAKE_BYTES = (1024, 8192)
"""A streamed body is handed to its reader once a random amount in this range is buffered (or at its end).

Parsing is batched, and the amounts are drawn anew for every batch: streams that a server feeds in lock
step (as batching servers do) would otherwise all reach a fixed amount in the same loop iteration and
parse together, a stall of tens of milliseconds at 256 streams."""


class Arrivals:
    """When each read from the socket brought a streamed body's bytes: (body bytes so far, perf_counter time).

    It also lets the stream's reader sleep until `WAKE_BYTES` are buffered, the body ended or failed, instead
    of being resumed for every read: the protocol records each read's time, so parsing later loses nothing.
    The reader is woken through the pacer, so batches are parsed one per event-loop iteration.
    """

    __slots__ = ("consumed", "ends", "pacer", "reader", "times", "waiter", "wake_at")

    def __init__(self, reader: aiohttp.StreamReader, first_at: float, pacer: Pacer) -> None:
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
per read, several times the cost of a 64 KiB one (`make perf` shows the effect)."""


class StampedSocket(socket.socket):
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

    def recv_into(self, buffer: WriteableBuffer, nbytes: int = 0, flags: int = 0) -> int:
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


def stamped_socket(addr_info: aiohttp.AddrInfoType) -> socket.socket:
    """aiohttp's socket factory: a socket with kernel receive timestamps where the platform has them."""
    family, type_, proto = addr_info[0], addr_info[1], addr_info[2]
    if not _STAMP_SPACE or not sys.platform.startswith("linux"):
        return socket.socket(family=family, type=type_, proto=proto)
    sock = StampedSocket(family=family, type=type_, proto=proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        pass  # no stamps: `received_at` is then the time of the read
    sock.received_at = 0.0
    return sock


_NO_CAUSE = BaseException()
"""`set_exception` called without a cause (aiohttp's own default is such a sentinel too)."""


class TimedProtocol(ResponseHandler):
    """aiohttp's connection protocol, timestamping each read with when its bytes reached the socket.

    asyncio calls `data_received` right after its recv() in the event loop's read callback. On a
    `StampedSocket` the time of a read is the kernel's receive time of its newest byte, so it does not
    depend on how late the loop got to the read; elsewhere it is the time `data_received` runs, before any
    parsing. While a stream is read (`arrivals` set), the body size after each read is recorded with its time.
    """

    last_at = 0.0
    arrivals: Arrivals | None = None
    stamped: StampedSocket | None = None
    requests = 0
    """Requests sent on this connection so far (aiohttp sets the response parameters once per request)."""
    heard = False
    """Whether any byte came back since the current request was sent."""

    def set_response_params(self, **params: Any) -> None:  # Any: aiohttp's own keywords, passed on as given
        """Count the request about to be sent; nothing of its answer has been heard yet."""
        self.requests += 1
        self.heard = False
        super().set_response_params(**params)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Remember the connection's socket when it carries kernel receive times."""
        super().connection_made(transport)
        wrapped = transport.get_extra_info("socket")
        raw = getattr(wrapped, "_sock", wrapped)  # asyncio hands out a TransportSocket wrapping the socket
        self.stamped = raw if isinstance(raw, StampedSocket) else None

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

    def resume_reading(self, resume_parser: bool = True) -> None:
        """Resume reading when it was paused; otherwise do nothing.

        aiohttp's body reader calls this after every piece it hands out, and the base class then feeds the
        parser an empty read to resume it: per streamed chunk, a parser call with nothing to do. Reading is
        paused only with `_reading_paused` (flow control) or `_buffer_paused` (set and cleared by aiohttp's own
        `_pause_reading_for_buffer` and `_resume_reading_for_buffer`), so when neither is set nothing waits.
        """
        if self._reading_paused or self._buffer_paused:
            super().resume_reading(resume_parser)

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
            exc.stale_connection = True  # type: ignore[attr-defined]  # our mark, read by Transport._send
        if exc_cause is _NO_CAUSE:
            super().set_exception(exc)
        else:
            super().set_exception(exc, exc_cause)
        if self.arrivals is not None:
            self.arrivals.wake()


def install_timed_protocol(connector: aiohttp.TCPConnector) -> bool:
    """Make `connector` build `TimedProtocol` connections; False when this aiohttp has no such hook."""
    if not hasattr(connector, "_factory"):
        return False
    handler: type[ResponseHandler] = TimedProtocol  # the factory's type names aiohttp's class, of which this is one
    connector._factory = functools.partial(handler, loop=asyncio.get_running_loop())
    return True


def timed_protocol(response: aiohttp.ClientResponse) -> TimedProtocol | None:
    """The timed protocol serving `response`, or None (then events are timed when parsed)."""
    protocol = response.connection.protocol if response.connection is not None else None
    return protocol if isinstance(protocol, TimedProtocol) else None


INTERNALS = (
    "aiohttp.client_proto.ResponseHandler", "BaseProtocol._reading_paused/_buffer_paused", "TCPConnector._factory",
    "asyncio TransportSocket._sock",
)
"""The internals this module relies on, as `check_internals` reports them."""


def _base_slots() -> set[str]:
    """Every slot of ResponseHandler's classes (aiohttp's flow-control flags live in BaseProtocol's)."""
    return {slot for cls in ResponseHandler.__mro__ for slot in getattr(cls, "__slots__", ())}


def check_internals() -> list[str]:
    """The internals this module relies on that the installed aiohttp/asyncio lacks (empty when all are there)."""
    missing = []
    for name in ("set_response_params", "connection_made", "data_received", "resume_reading", "connection_lost",
                 "set_exception"):
        if not callable(getattr(ResponseHandler, name, None)):
            missing.append(f"aiohttp.client_proto.ResponseHandler.{name}")
    for flag in ("_reading_paused", "_buffer_paused"):
        if flag not in _base_slots():
            missing.append(f"aiohttp BaseProtocol.{flag}")

    async def probe() -> None:
        connector = aiohttp.TCPConnector()
        try:
            factory = getattr(connector, "_factory", None)
            if not callable(factory):
                missing.append("aiohttp.TCPConnector._factory")
            elif not isinstance(factory(), ResponseHandler):
                missing.append("aiohttp.TCPConnector._factory builds a ResponseHandler")
        finally:
            await connector.close()

    asyncio.run(probe())

    raw = socket.socket()
    try:
        if getattr(trsock.TransportSocket(raw), "_sock", None) is not raw:
            missing.append("asyncio TransportSocket._sock")
    finally:
        raw.close()
    return missing
