"""Server-sent events split from raw bytes, each stamped with its bytes' arrival time.

The caller reads the clock the moment a block of bytes arrives and passes it in
with the bytes; parsing happens later. An event completed by a block gets that
block's time, so time stamps never include JSON parsing (W3C/WHATWG
"Server-sent events": events end at a blank line; ``data:`` lines join with
newlines; lines starting with ``:`` are comments).
"""

from __future__ import annotations


class SSEDecoder:
    """Incremental SSE splitter: ``feed(bytes, t)`` returns the ``(t, data)`` events completed."""

    __slots__ = ("_buf", "_data")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []

    def feed(self, block: bytes, t: float) -> list[tuple[float, bytes]]:
        """Add one received block; return the events it completed, stamped ``t``."""
        self._buf += block
        events: list[tuple[float, bytes]] = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                return events
            line, self._buf = self._buf[:nl].rstrip(b"\r"), self._buf[nl + 1 :]
            if not line:  # blank line: dispatch
                if self._data:
                    events.append((t, b"\n".join(self._data)))
                    self._data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(b" ") else value)
            # other fields (event:, id:, retry:) and comments are ignored

    def close(self, t: float) -> list[tuple[float, bytes]]:
        """End of stream: an unterminated final event still counts."""
        events = self.feed(b"\n\n", t) if (self._buf.strip() or self._data) else []
        self._buf = b""
        return events
