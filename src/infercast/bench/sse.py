"""Server-sent events split from raw bytes, each stamped with its bytes' arrival time.

The caller reads the clock the moment a block of bytes arrives and passes it in
with the bytes; parsing happens later. An event completed by a block gets that
block's time, so time stamps never include JSON parsing (W3C/WHATWG
"Server-sent events": events end at a blank line; ``data:`` lines join with
newlines; lines starting with ``:`` are comments).

Parsing is linear in the bytes received: the buffer is scanned once from where
the last scan stopped and consumed lines are dropped in one slice per block. A
line (or an event) longer than ``max_line_bytes`` raises :class:`SSEError`: a
broken server sending megabytes without a newline fails the request instead of
growing the client without bound.
"""

from __future__ import annotations

MAX_LINE_BYTES = 8 * 2**20  # one chunk of OpenAI JSON is ~200 bytes; 8 MiB is far beyond it


class SSEError(Exception):
    """The stream breaks the limits of :class:`SSEDecoder` (a line or event too long)."""


class SSEDecoder:
    """Incremental SSE splitter: ``feed(bytes, t)`` returns the ``(t, data)`` events completed."""

    __slots__ = ("_buf", "_scan", "_data", "_data_bytes", "max_line_bytes")

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._buf = bytearray()
        self._scan = 0  # bytes of _buf already searched for a newline
        self._data: list[bytes] = []
        self._data_bytes = 0
        self.max_line_bytes = max_line_bytes

    def feed(self, block: bytes, t: float) -> list[tuple[float, bytes]]:
        """Add one received block; return the events it completed, stamped ``t``."""
        buf = self._buf
        buf += block
        events: list[tuple[float, bytes]] = []
        start = 0
        while True:
            nl = buf.find(b"\n", max(start, self._scan))
            if nl < 0:
                break
            line = bytes(buf[start:nl]).rstrip(b"\r")
            start = self._scan = nl + 1
            self._line(line, t, events)
        del buf[:start]
        self._scan = len(buf)
        if len(buf) > self.max_line_bytes:
            raise SSEError(f"a line of more than {self.max_line_bytes} bytes without a newline")
        return events

    def _line(self, line: bytes, t: float, events: list[tuple[float, bytes]]) -> None:
        if not line:  # blank line: dispatch
            if self._data:
                events.append((t, b"\n".join(self._data)))
                self._data, self._data_bytes = [], 0
        elif line.startswith(b"data:"):
            value = line[5:]
            value = value[1:] if value.startswith(b" ") else value
            self._data_bytes += len(value)
            if self._data_bytes > self.max_line_bytes:
                raise SSEError(f"an event of more than {self.max_line_bytes} bytes")
            self._data.append(value)
        # other fields (event:, id:, retry:) and comments are ignored

    def close(self, t: float) -> list[tuple[float, bytes]]:
        """End of stream: an unterminated final event still counts."""
        events = self.feed(b"\n\n", t) if (bytes(self._buf).strip() or self._data) else []
        self._buf = bytearray()
        self._scan = 0
        return events
