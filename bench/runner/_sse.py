"""A pure server-sent-events decoder (WHATWG event-stream rules): bytes in, event data out."""

from __future__ import annotations

import re


class SSEDecoder:
    """Incremental server-sent-events decoder following the WHATWG event-stream rules; bytes in, event data out.

    Lines end with CRLF, LF or CR (a CR at the end of a chunk may be the first half of a CRLF);
    `data:` lines append to the event's data (joined with LF); a blank line dispatches the event
    (nothing when it has no data); lines starting with `:` are comments; other fields (event, id,
    retry) are read and ignored; a field without a colon has an empty value. At the end of the
    stream an event without its closing blank line is discarded, as the rules say. The stream is
    decoded from its first byte: a leading UTF-8 byte-order mark is stripped (even split across reads).
    """

    def __init__(self) -> None:
        """Start with an empty buffer and no pending event."""
        self._buffer = b""
        self._data: list[str] = []
        self._has_data = False
        self._after_cr = False
        self._total = 0
        self._head: bytes | None = b""
        """The stream's first bytes while they may still be a byte-order mark; None once decided."""

    def feed(self, chunk: bytes) -> list[str]:
        """Add bytes; return the data of the events completed by them."""
        return [data for data, _ in self.feed_positions(chunk)]

    def feed_positions(self, chunk: bytes) -> list[tuple[str, int]]:
        """Add bytes; return (event data, body offset just past the blank line that dispatched it) per event."""
        start = self._total
        self._total += len(chunk)
        if self._head is not None:
            head = self._head + chunk
            start -= len(self._head)
            if len(head) < len(_BOM) and _BOM.startswith(head):
                self._head = head
                return []
            self._head = None
            chunk, start = (head[len(_BOM):], start + len(_BOM)) if head.startswith(_BOM) else (head, start)
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
_BOM = b"\xef\xbb\xbf"
