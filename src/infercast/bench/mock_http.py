"""The mock server's HTTP/1.1 layer: an asyncio protocol with httptools' C parser, no framework.

Why not FastAPI on uvicorn: under a burst of 64 simultaneous requests on two
shared cores, routing, request objects and per-message ASGI calls made the mock
take ~2 ms on average (up to 11 ms) from a request's send to its receipt stamp
(``benchmarks/bench_client_error.py``), which the bench client's error budget
then had to carry. Here each connection is one protocol object: the receipt is
stamped when bytes are read, a parsed request is answered by a handful of
``transport.write`` calls driven by loop timers (no task or coroutine per
request, no per-chunk ``await``).

HTTP subset: keep-alive (HTTP/1.1 default; ``Connection: close`` honoured),
requests on one connection answered in order, chunked responses for streams,
``Content-Length`` otherwise. Routes: ``GET /v1/models``, ``GET /mock/truth``,
``POST /v1/completions``, ``POST /v1/chat/completions``; anything else 404.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

import httptools

from infercast.bench import loops
from infercast.bench.mock import Chunks, MockConfig, MockServer, hits, prompt_tokens

_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 500: b"Internal Server Error"}
_EARLY_S = 0.0002  # a timer that fires earlier than this before its chunk's time is re-armed
_GENERATE = {b"/v1/completions": False, b"/v1/chat/completions": True}


def _head(status: int, content_type: bytes, length: int | None) -> bytes:
    framing = b"transfer-encoding: chunked" if length is None else b"content-length: %d" % length
    return b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\n%s\r\n\r\n" % (
        status,
        _REASONS[status],
        content_type,
        framing,
    )


def _json_response(status: int, doc: Any) -> bytes:
    body = json.dumps(doc, separators=(",", ":")).encode()
    return _head(status, b"application/json", len(body)) + body


def _chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk (RFC 9112 section 7.1)."""
    return b"%x\r\n%s\r\n" % (len(data), data)


class _Request:
    __slots__ = ("body", "keep_alive", "method", "request_id", "t0", "url")

    def __init__(self, t0: float) -> None:
        self.t0, self.url, self.body, self.request_id = t0, b"", [], None
        self.method, self.keep_alive = b"", True


class _Connection(asyncio.Protocol):
    """One client connection: parse requests, answer them one at a time, in order."""

    def __init__(self, mock: MockServer, loop: asyncio.AbstractEventLoop, registry: set) -> None:
        self.mock, self.loop, self.registry = mock, loop, registry
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.t_read = 0.0
        self.request: _Request | None = None
        self.queue: deque[_Request] = deque()
        self.active: _Answer | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.registry.add(self)
        self.mock.connections_opened += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.registry.discard(self)
        if self.active is not None:
            self.active.cancel()

    def data_received(self, data: bytes) -> None:
        self.t_read = time.perf_counter()  # the receipt stamp: before any parsing
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.write(_json_response(400, {"error": {"message": "mock: malformed HTTP request"}}))
            self.close()

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.request = _Request(self.t_read)

    def on_url(self, url: bytes) -> None:
        self.request.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"x-request-id":
            self.request.request_id = value.decode("latin-1")
        elif name == b"expect" and value.lower() == b"100-continue":
            self.write(
                b"HTTP/1.1 100 Continue\r\n\r\n"
            )  # curl waits 1 s for it before a large body

    def on_body(self, body: bytes) -> None:
        self.request.body.append(body)

    def on_message_complete(self) -> None:
        req, self.request = self.request, None
        req.method, req.keep_alive = self.parser.get_method(), self.parser.should_keep_alive()
        self.queue.append(req)
        if self.active is None:
            self._next()

    def _next(self) -> None:
        while self.active is None and self.queue and not self.closed:
            req = self.queue.popleft()
            answer = _route(self, req)
            if answer is None:  # answered at once
                self.done(req.keep_alive)
            else:
                self.active = answer
                answer.start()

    def done(self, keep_alive: bool) -> None:
        """The current response ended: close, or answer the next queued request."""
        self.active = None
        if not keep_alive or self.mock.config.close_after_stream:
            # close-after-stream: keep-alive stays advertised (no "Connection: close"), as
            # llama.cpp's server
            self.close()
        elif self.queue:
            self._next()

    def write(self, data: bytes) -> None:
        if not self.closed:
            self.transport.write(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.transport.close()


def _route(conn: _Connection, req: _Request) -> _Answer | None:
    """Answer simple routes at once (None); a generation request returns its :class:`_Answer`."""
    path = req.url.split(b"?", 1)[0]
    chat = _GENERATE.get(path)
    if req.method == b"GET" and path == b"/v1/models":
        conn.write(_json_response(200, conn.mock.models()))
    elif req.method == b"GET" and path == b"/mock/truth":
        conn.write(_json_response(200, conn.mock.truth_doc()))
    elif req.method != b"POST" or chat is None:
        conn.write(_json_response(404, {"detail": "Not Found"}))
    else:
        try:
            body = json.loads(b"".join(req.body))
            if not isinstance(body, dict):
                raise ValueError(body)
        except ValueError:
            conn.write(
                _json_response(
                    400, {"error": {"message": "mock: request body is not a JSON object"}}
                )
            )
            return None
        index = conn.mock.next_index()
        if hits(conn.mock.config.http_error_every, index):
            conn.write(_json_response(500, {"error": {"message": "mock: injected error"}}))
            return None
        return _Answer(conn, req, body, chat, index)
    return None


class _Answer:
    """One generation response on its absolute schedule, driven by loop timers."""

    def __init__(
        self, conn: _Connection, req: _Request, body: dict[str, Any], chat: bool, index: int
    ) -> None:
        cfg = conn.mock.config
        self.conn, self.req, self.body, self.chat, self.index, self.cfg = (
            conn,
            req,
            body,
            chat,
            index,
            cfg,
        )
        asked = int(
            body.get("max_tokens") or body.get("max_completion_tokens") or cfg.default_max_tokens
        )
        self.num_tokens = min(asked, cfg.stop_after_tokens or asked)
        self.finish = "stop" if self.num_tokens < asked else "length"
        self.num_chunks = -(-self.num_tokens // cfg.tokens_per_chunk)
        self.stream = bool(body.get("stream"))
        self.chunks = Chunks(chat, cfg.model_name, f"mock-{index}")
        close_every = hits(cfg.midstream_close_every, index)
        self.close_at = cfg.midstream_close_after_chunks if close_every and self.stream else None
        self.next_chunk, self.produced, self.sent = 0, 0, []
        self.timer: asyncio.TimerHandle | None = None

    def chunk_time(self, i: int) -> float:
        """Chunk i leaves when its last token is ready; token j is ready at ttft + (j - k + 1)
        itl."""
        k = self.cfg.tokens_per_chunk
        last_token = min((i + 1) * k, self.num_tokens) - 1
        return self.req.t0 + self.cfg.ttft_s + max(last_token - (k - 1), 0) * self.cfg.itl_s

    def start(self) -> None:
        if hits(
            self.cfg.hang_every, self.index
        ):  # never answered; the connection closes after hang_s
            self.timer = self.conn.loop.call_later(self.cfg.hang_s, self.conn.close)
            return
        if not self.stream:
            self._arm(self.chunk_time(self.num_chunks - 1))
            return
        self.conn.write(
            _head(200, b"text/event-stream", None)
            + (_chunk(self.chunks.role()) if self.cfg.role_chunk else b"")
        )
        self._arm(self.chunk_time(0))

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()

    def _arm(self, when: float) -> None:
        """Call :meth:`_tick` at ``when`` (perf_counter s); loop timers are ms-grained, hence the
        check."""
        self.timer = self.conn.loop.call_later(
            max(when - time.perf_counter(), 0.0), self._tick, when
        )

    def _tick(self, when: float) -> None:
        if self.conn.closed:
            return
        if time.perf_counter() < when - _EARLY_S:  # uvloop's timers can fire up to ~1 ms early
            self._arm(when)
        elif not self.stream:
            self._write_full()
        else:
            self._stream_due()

    def _stream_due(self) -> None:
        """Write every chunk whose time has come (several when the loop was late), then re-arm."""
        while (
            self.next_chunk < self.num_chunks
            and self.chunk_time(self.next_chunk) <= time.perf_counter() + _EARLY_S
        ):
            if self.close_at is not None and self.next_chunk >= self.close_at:
                self.conn.close()  # no terminating chunk: the client sees the body cut short
                return
            self._write_chunk()
        if self.next_chunk < self.num_chunks:
            self._arm(self.chunk_time(self.next_chunk))
            return
        opts = self.body.get("stream_options") or {}
        tail = b""
        if self.cfg.usage and opts.get("include_usage"):
            tail = _chunk(self.chunks.usage(prompt_tokens(self.body), self.num_tokens))
        self.conn.write(tail + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        self.conn.mock.record(
            self.index, self.req.request_id, self.req.t0, self.sent, self.num_tokens
        )
        self.conn.done(self.req.keep_alive)

    def _write_chunk(self) -> None:
        n = min(self.cfg.tokens_per_chunk, self.num_tokens - self.produced)
        reasoning = self.chat and self.produced < self.cfg.reasoning_tokens
        text = "".join(f" t{self.produced + j}" for j in range(n))
        self.produced += n
        self.next_chunk += 1
        finish = self.finish if self.produced == self.num_tokens else None
        self.conn.write(_chunk(self.chunks.content(text, finish, reasoning)))
        self.sent.append(time.perf_counter())

    def _write_full(self) -> None:
        text = "".join(f" t{j}" for j in range(self.num_tokens))
        choice: dict[str, Any] = {"index": 0, "finish_reason": self.finish}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        prompt = prompt_tokens(self.body)
        self.conn.write(
            _json_response(
                200,
                {
                    "id": f"mock-{self.index}",
                    "object": "chat.completion" if self.chat else "text_completion",
                    "model": self.cfg.model_name,
                    "choices": [choice],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": self.num_tokens,
                        "total_tokens": prompt + self.num_tokens,
                    },
                },
            )
        )
        self.conn.done(self.req.keep_alive)


class MockHTTP:
    """The listening mock on one event loop; :meth:`close` also drops open connections."""

    def __init__(self, mock: MockServer, server: asyncio.AbstractServer, registry: set) -> None:
        self.mock, self.server, self._registry = mock, server, registry

    def close(self) -> None:
        self.server.close()
        for conn in list(self._registry):
            conn.close()


async def start_server(mock: MockServer, sock: socket.socket) -> MockHTTP:
    """Listen on ``sock`` (bound, listening) with the running loop; returns the handle to close
    it."""
    loop = asyncio.get_running_loop()
    registry: set[_Connection] = set()
    server = await loop.create_server(lambda: _Connection(mock, loop, registry), sock=sock)
    return MockHTTP(mock, server, registry)


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket with TCP_NODELAY, so each chunk leaves at once (no Nagle delay).

    Without it a chunk written right after the headers can wait ~40 ms for the
    client's delayed ACK (measured: the role chunk arrived 40 ms late).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def serve(config: MockConfig, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve the mock until interrupted (the ``infercast mock-server`` command)."""
    sock = _listen(host, port)

    async def main() -> None:
        http = await start_server(MockServer(config), sock)
        await http.server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        loops.run(main())


@contextlib.contextmanager
def run_in_thread(config: MockConfig) -> Iterator[tuple[str, MockServer]]:
    """Serve the mock on 127.0.0.1 (free port) in a thread; yields (base URL ending /v1, server)."""
    mock = MockServer(config)
    sock = _listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    loop = loops.new_event_loop()
    http = loop.run_until_complete(start_server(mock, sock))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/v1", mock
    finally:
        loop.call_soon_threadsafe(http.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5.0)
        if not thread.is_alive():
            loop.run_until_complete(asyncio.sleep(0))  # let closed transports finish
            loop.close()
        sock.close()
