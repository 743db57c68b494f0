"""The client's event loop: asyncio's own or uvloop's, chosen by name, with kernel receive times on both.

Streamed chunks are timed by the kernel's receive time of the read that brought them (`SO_TIMESTAMPNS`, read
with `recvmsg` by the socket object of `_transport`). asyncio's loop reads through that socket object; uvloop
reads the file descriptor itself (libuv calls `read()`), so the stamp would never reach speedbench. The uvloop
loop made here therefore carries plain TCP connections on stamped sockets over `SocketTransport`, a small
transport that reads through the socket object on uvloop's readiness callbacks; everything else (timers,
callbacks, polling, TLS connections) is uvloop's own.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import os
import socket
import ssl as tls
from collections.abc import Callable
from typing import Any

from bench._errors import BenchError

LOOPS = ("asyncio", "uvloop")
"""The event loops a run can use."""
LOOP_ENV = "SPEEDBENCH_LOOP"
"""The environment variable naming the loop when `--loop` is not given."""
DEFAULT_LOOP = "asyncio"
"""The loop of a run that names none."""
_READ_BYTES = 65536
_HIGH_WATER = 64 * 1024
_LOW_WATER = 16 * 1024


def choose_loop(requested: str | None = None) -> str:
    """The loop to run on: `requested`, else $SPEEDBENCH_LOOP, else the default; refused when unknown or absent."""
    name = requested or os.environ.get(LOOP_ENV) or DEFAULT_LOOP
    origin = "--loop" if requested else f"${LOOP_ENV}" if os.environ.get(LOOP_ENV) else "the default loop"
    if name not in LOOPS:
        raise BenchError(f"{origin}: unknown event loop {name!r}; available: {', '.join(LOOPS)}")
    if name == "uvloop" and importlib.util.find_spec("uvloop") is None:
        raise BenchError(f"{origin}: uvloop is not installed (pip install uvloop), or use --loop asyncio")
    return name


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """A factory of new event loops of the named kind (for asyncio.Runner)."""
    if name == "asyncio":
        return asyncio.DefaultEventLoopPolicy().new_event_loop  # not the global policy's, which may be replaced
    if name == "uvloop":
        return _stamped_uvloop_class()
    raise BenchError(f"unknown event loop {name!r}; available: {', '.join(LOOPS)}")


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """`uvloop` or `asyncio`: the kind of a loop."""
    return "uvloop" if any(kind.__module__.startswith("uvloop") for kind in type(loop).__mro__) else "asyncio"


class SocketTransport(asyncio.Transport):
    """A plain TCP transport over the loop's reader/writer callbacks that reads with the socket object's recv."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: asyncio.Protocol) -> None:
        """Take over a connected socket; `start` makes the connection and begins reading."""
        super().__init__({"socket": sock, "peername": sock.getpeername(), "sockname": sock.getsockname()})
        self._loop = loop
        self._sock = sock
        self._protocol = protocol
        self._fd = sock.fileno()
        self._buffer = bytearray()
        self._closing = False
        self._reading = False
        self._writing_paused = False
        self._lost = False
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def start(self) -> None:
        """Tell the protocol the connection is made, then read."""
        self._protocol.connection_made(self)
        self.resume_reading()

    def _read_ready(self) -> None:
        try:
            data = self._sock.recv(_READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._fail(exc)
            return
        if data:
            self._protocol.data_received(data)
            return
        self.pause_reading()
        if not self._protocol.eof_received():
            self.close()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Send now what the socket takes; buffer the rest until it is writable."""
        if self._closing or self._lost or not data:
            return
        if not self._buffer:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._fail(exc)
                return
            data = memoryview(data)[sent:]
            if not data:
                return
            self._loop.add_writer(self._fd, self._write_ready)
        self._buffer.extend(data)
        if not self._writing_paused and len(self._buffer) > _HIGH_WATER:
            self._writing_paused = True
            self._protocol.pause_writing()

    def _write_ready(self) -> None:
        try:
            sent = self._sock.send(self._buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._loop.remove_writer(self._fd)
            self._buffer.clear()
            self._fail(exc)
            return
        del self._buffer[:sent]
        if self._writing_paused and len(self._buffer) <= _LOW_WATER:
            self._writing_paused = False
            self._protocol.resume_writing()
        if not self._buffer:
            self._loop.remove_writer(self._fd)
            if self._closing:
                self._loop.call_soon(self._lose, None)

    def get_write_buffer_size(self) -> int:
        """Bytes written but not yet sent."""
        return len(self._buffer)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        """(low, high) water marks of the write buffer."""
        return _LOW_WATER, _HIGH_WATER

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        """Kept fixed (64 KiB / 16 KiB): a client sends small requests."""

    def pause_reading(self) -> None:
        """Stop reading until resume_reading."""
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def resume_reading(self) -> None:
        """Read again."""
        if not self._reading and not self._closing:
            self._reading = True
            self._loop.add_reader(self._fd, self._read_ready)

    def is_reading(self) -> bool:
        """Whether the transport reads."""
        return self._reading

    def is_closing(self) -> bool:
        """Whether the transport is closing or closed."""
        return self._closing

    def can_write_eof(self) -> bool:
        """A TCP socket can half-close."""
        return True

    def write_eof(self) -> None:
        """Half-close the socket (after the buffered bytes are sent)."""
        if not self._buffer and not self._lost:
            self._sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Stop reading, send what is buffered, then close and tell the protocol."""
        if self._closing:
            return
        self._closing = True
        self.pause_reading()
        if not self._buffer:
            self._loop.call_soon(self._lose, None)

    def abort(self) -> None:
        """Close at once, dropping what is buffered."""
        self._closing = True
        self.pause_reading()
        self._loop.remove_writer(self._fd)
        self._buffer.clear()
        self._loop.call_soon(self._lose, None)

    def _fail(self, exc: Exception) -> None:
        self._closing = True
        self.pause_reading()
        self._loop.call_soon(self._lose, exc)

    def _lose(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._lost = True
        try:
            self._protocol.connection_lost(exc)
        finally:
            self._sock.close()


_STAMPED_UVLOOP: type[asyncio.AbstractEventLoop] | None = None


def _stamped_uvloop_class() -> type[asyncio.AbstractEventLoop]:
    """uvloop's Loop, carrying plain TCP connections on stamped sockets over SocketTransport (made once)."""
    global _STAMPED_UVLOOP
    if _STAMPED_UVLOOP is None:
        # uvloop is optional: imported by name, its loop class is the same unknown base to a type checker whether or
        # not uvloop is installed (where it is, its stub's create_connection names the transport a protocol)
        uvloop_loop: Any = importlib.import_module("uvloop").Loop

        class StampedUvloop(uvloop_loop):
            """uvloop, whose connections on sockets with kernel receive times read through the socket object."""

            async def create_connection(
                self, protocol_factory: Callable[[], asyncio.Protocol], host: str | None = None,
                port: int | None = None, *, sock: socket.socket | None = None,
                ssl: bool | tls.SSLContext | None = None, **kwargs: object,
            ) -> tuple[asyncio.Transport, asyncio.Protocol]:
                """A SocketTransport for a given stamped plain-TCP socket; uvloop's own connection otherwise."""
                if sock is not None and not ssl and hasattr(sock, "received_at"):
                    protocol = protocol_factory()
                    transport = SocketTransport(self, sock, protocol)
                    transport.start()
                    return transport, protocol
                return await super().create_connection(protocol_factory, host, port, sock=sock, ssl=ssl, **kwargs)

        _STAMPED_UVLOOP = StampedUvloop
    return _STAMPED_UVLOOP
