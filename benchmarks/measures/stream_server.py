"""A loopback streaming server on a known schedule that logs when it sent each chunk (for `make perf`).

Run by perf.py as its own process: `python stream_server.py PORT_FILE LOG_FILE CHUNKS INTERVAL_US`.
It answers every POST with a pre-generated llama.cpp-shaped chat stream (HTTP/1.1, chunked, one SSE event
per HTTP chunk and per send()): the role chunk at once, then CHUNKS one-token content chunks, chunk k due
INTERVAL_US * (k + phase) after the request arrived (phase in [0, 1) spread by a golden-ratio sequence so
streams do not tick in lock step), then the finish, usage and [DONE] events. Keep-alive: a connection
serves request after request. For every stream it records the stream's key (the last user message of the
request) and `time.perf_counter_ns()` right after each content chunk's send() returned; perf_counter is
CLOCK_MONOTONIC on Linux, so the client process can compare its own timestamps. On SIGTERM (or SIGINT) it
writes one JSON line per stream to LOG_FILE and exits.
"""

from __future__ import annotations

import heapq
import json
import select
import signal
import socket
import sys
import time
from typing import Any

GOLDEN = 0.6180339887498949
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
)


def _chunk(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk carrying `payload`."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(data: dict[str, Any] | str) -> bytes:
    """One SSE event as an HTTP chunk."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return _chunk(b"data: " + text.encode() + b"\n\n")


def pregenerated(chunks: int) -> tuple[bytes, list[bytes], bytes]:
    """(head + role event, the content events, finish + usage + [DONE] + last chunk) of one stream."""
    base = {"created": 1767225600, "id": "chatcmpl-perfload", "model": "gemma", "object": "chat.completion.chunk"}
    role = {"choices": [{"finish_reason": None, "index": 0, "delta": {"role": "assistant", "content": None}}], **base}
    content = [
        _event({"choices": [{"finish_reason": None, "index": 0, "delta": {"content": f" tok{index}"}}], **base})
        for index in range(chunks)
    ]
    finish = {"choices": [{"finish_reason": "length", "index": 0, "delta": {}}], **base}
    usage = {
        "choices": [], **base,
        "usage": {"completion_tokens": chunks, "prompt_tokens": 24, "total_tokens": chunks + 24},
        "timings": {"prompt_n": 24, "prompt_ms": 9.5, "prompt_per_second": 2526.3, "predicted_n": chunks,
                    "predicted_ms": chunks * 8.0, "predicted_per_second": 125.0},
    }
    tail = _event(finish) + _event(usage) + _event("[DONE]") + b"0\r\n\r\n"
    return HEAD + _event(role), content, tail


class Stream:
    """One connection's state: request buffer and, while streaming, the schedule and send log."""

    __slots__ = ("buffer", "key", "next_index", "phase", "sent_ns", "sock", "start_ns")

    def __init__(self, sock: socket.socket) -> None:
        """A new connection waiting for its first request."""
        self.sock = sock
        self.buffer = b""
        self.key: str | None = None
        self.next_index = 0
        self.start_ns = 0
        self.phase = 0.0
        self.sent_ns: list[int] = []


def request_key(buffer: bytes) -> tuple[str | None, bytes]:
    """(the last user message of a complete request in `buffer` or None, the bytes after that request)."""
    head_end = buffer.find(b"\r\n\r\n")
    if head_end < 0:
        return None, buffer
    length = 0
    for line in buffer[:head_end].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    end = head_end + 4 + length
    if len(buffer) < end:
        return None, buffer
    try:
        body = json.loads(buffer[head_end + 4:end])
        key = str(body["messages"][-1]["content"])
    except (ValueError, KeyError, IndexError, TypeError):
        key = "?"
    return key, buffer[end:]


def serve(port_file: str, log_file: str, chunks: int, interval_ns: int) -> None:
    """Accept, stream on schedule, log; until SIGTERM."""
    head, content, tail = pregenerated(chunks)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    listener.setblocking(False)
    with open(port_file + ".tmp", "w", encoding="utf-8") as handle:
        handle.write(str(listener.getsockname()[1]))
    import os

    os.replace(port_file + ".tmp", port_file)
    poller = select.epoll()
    poller.register(listener.fileno(), select.EPOLLIN)
    streams: dict[int, Stream] = {}
    due: list[tuple[int, int, int]] = []  # (due ns, fileno, chunk index)
    finished: list[dict[str, Any]] = []
    serial = 0
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not stopping:
        now = time.perf_counter_ns()
        timeout = 0.05 if not due else max(0.0, (due[0][0] - now) / 1e9)
        try:
            events = poller.poll(timeout)
        except InterruptedError:
            continue
        for fileno, _mask in events:
            if fileno == listener.fileno():
                while True:
                    try:
                        conn, _ = listener.accept()
                    except BlockingIOError:
                        break
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    conn.setblocking(False)
                    streams[conn.fileno()] = Stream(conn)
                    poller.register(conn.fileno(), select.EPOLLIN)
                continue
            stream = streams.get(fileno)
            if stream is None:
                continue
            try:
                data = stream.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                poller.unregister(fileno)
                stream.sock.close()
                del streams[fileno]
                continue
            stream.buffer += data
            if stream.key is None and stream.buffer.startswith(b"GET "):
                end = stream.buffer.find(b"\r\n\r\n")
                if end >= 0:  # /metrics, /props, /models: this server has none
                    stream.buffer = stream.buffer[end + 4:]
                    stream.sock.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                continue
            if stream.key is None:
                key, stream.buffer = request_key(stream.buffer)
                if key is not None:
                    stream.key = key
                    stream.next_index = 0
                    stream.sent_ns = []
                    stream.phase = (serial * GOLDEN) % 1.0
                    serial += 1
                    stream.start_ns = time.perf_counter_ns()
                    stream.sock.setblocking(True)
                    stream.sock.sendall(head)
                    stream.sock.setblocking(False)
                    heapq.heappush(due, (stream.start_ns + int(interval_ns * stream.phase), fileno, 0))
        now = time.perf_counter_ns()
        while due and due[0][0] <= now:
            _, fileno, index = heapq.heappop(due)
            stream = streams.get(fileno)
            if stream is None or stream.next_index != index:
                continue
            stream.sock.setblocking(True)
            try:
                stream.sock.sendall(content[index])
                stream.sent_ns.append(time.perf_counter_ns())
                stream.next_index = index + 1
                if stream.next_index < chunks:
                    heapq.heappush(due, (stream.start_ns + int(interval_ns * (stream.next_index + stream.phase)),
                                         fileno, stream.next_index))
                else:
                    stream.sock.sendall(tail)
                    finished.append({"key": stream.key, "start_ns": stream.start_ns, "sent_ns": stream.sent_ns})
                    stream.key = None
            except OSError:
                finished.append({"key": stream.key, "start_ns": stream.start_ns, "sent_ns": stream.sent_ns,
                                 "broken": True})
                stream.key = None
            finally:
                with_fd = streams.get(fileno)
                if with_fd is not None:
                    with_fd.sock.setblocking(False)
            now = time.perf_counter_ns()
    with open(log_file, "w", encoding="utf-8") as handle:
        for entry in finished:
            handle.write(json.dumps(entry, separators=(",", ":")) + "\n")
        for stream in streams.values():
            if stream.key is not None:
                handle.write(json.dumps({"key": stream.key, "start_ns": stream.start_ns, "sent_ns": stream.sent_ns,
                                         "unfinished": True}) + "\n")


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) * 1000)
