"""A timing mock of an OpenAI-compatible streaming server, whose truth is known exactly.

Each request is answered on an absolute schedule from its receipt time ``t0``
(stamped before routing): with k = ``tokens_per_chunk``, token j is ready at
``t0 + ttft_s + (j - k + 1) itl_s`` and each chunk of k tokens (the last one
the remainder) leaves when its last token is ready. So the truth for n >= k
tokens is TTFT = ``ttft_s``, E2E = ``ttft_s + (n - k) itl_s``,
TPOT = (n - k) itl_s / (n - 1), per-token ITL = ``itl_s`` and per-chunk
ITL = ``k itl_s`` (the last gap: the remainder times ``itl_s``). The server also records when it actually wrote each chunk
(``GET /mock/truth``), since ``asyncio.sleep`` overshoots by up to ~1 ms.

Modes reproduce what breaks real clients (issue 6): an empty role chunk before
the first token, no ``usage``, early stop short of ``max_tokens``, a connection
closed after every stream while keep-alive is advertised, HTTP 500s, a close
mid-stream, and a hang (for client timeouts). Failure modes hit every N-th
request (N = 1: all).
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

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

TRUTH_KEEP = 100_000  # per-request truth rows kept (bounded memory)


class MockConfig(BaseModel):
    """Behaviour of the mock server (frozen; validated)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ttft_s: float = Field(0.05, ge=0.0)
    itl_s: float = Field(0.01, ge=0.0)
    tokens_per_chunk: int = Field(1, ge=1)
    default_max_tokens: int = Field(16, ge=1)
    stop_after_tokens: int | None = Field(None, ge=1, description="early stop (finish 'stop')")
    role_chunk: bool = True  # empty role/text chunk sent at once, before the first token
    usage: bool = True  # honour stream_options.include_usage
    reasoning_tokens: int = Field(0, ge=0, description="chat: first tokens as reasoning_content")
    close_after_stream: bool = False  # close the connection after each response (keep-alive advertised)
    http_error_every: int = Field(0, ge=0)
    midstream_close_every: int = Field(0, ge=0)
    midstream_close_after_chunks: int = Field(2, ge=0)
    hang_every: int = Field(0, ge=0)
    hang_s: float = Field(3600.0, ge=0.0)
    model_name: str = "mock"


def _hits(every: int, index: int) -> bool:
    return every > 0 and index % every == 0


class _Chunks:
    """SSE payloads of one streamed response, OpenAI's shapes."""

    def __init__(self, chat: bool, model: str, rid: str) -> None:
        self.chat, self.model, self.rid, self.created = chat, model, rid, int(time.time())

    def event(self, body: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"

    def _base(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return {"id": self.rid, "object": kind, "created": self.created, "model": self.model,
                "choices": choices}

    def role(self) -> bytes:
        delta = {"delta": {"role": "assistant", "content": ""}} if self.chat else {"text": ""}
        return self.event(self._base([{"index": 0, **delta, "finish_reason": None}]))

    def content(self, text: str, finish: str | None, reasoning: bool = False) -> bytes:
        if self.chat:
            key = "reasoning_content" if reasoning else "content"
            choice: dict[str, Any] = {"index": 0, "delta": {key: text}, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        return self.event(self._base([choice]))

    def usage(self, prompt: int, completion: int) -> bytes:
        body = self._base([])
        body["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                         "total_tokens": prompt + completion}
        return self.event(body)


def _prompt_tokens(body: dict[str, Any]) -> int:
    """Whitespace words of the prompt: the mock's stand-in for a tokenizer."""
    if "messages" in body:
        return sum(len(str(m.get("content", "")).split()) for m in body["messages"])
    prompt = body.get("prompt", "")
    return len(prompt) if isinstance(prompt, list) else len(str(prompt).split())


class MockServer:
    """The ASGI app plus the truth it recorded; one instance per server, no globals."""

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self.truth: deque[dict[str, float]] = deque(maxlen=TRUTH_KEEP)
        self._count = 0

    def app(self) -> Any:
        """The ASGI app (FastAPI inside a receipt-stamping layer)."""
        api = FastAPI(title="infercast mock server")

        @api.get("/v1/models")
        async def models() -> dict[str, Any]:
            return {"object": "list", "data": [{"id": self.config.model_name, "object": "model"}]}

        @api.get("/mock/truth")
        async def truth() -> dict[str, Any]:
            return {"config": self.config.model_dump(), "requests": list(self.truth)}

        async def handle(request: Request, chat: bool):
            body = await request.json()
            t0 = request.scope.get("infercast.t0") or asyncio.get_running_loop().time()
            self._count += 1
            index = self._count
            if _hits(self.config.http_error_every, index):
                return JSONResponse({"error": {"message": "mock: injected error"}}, status_code=500)
            return _Responder(self, body, chat, index, t0, request.headers.get("x-request-id"))

        @api.post("/v1/completions")
        async def completions(request: Request):  # noqa: ANN202
            return await handle(request, chat=False)

        @api.post("/v1/chat/completions")
        async def chat_completions(request: Request):  # noqa: ANN202
            return await handle(request, chat=True)
        return _stamp_receipt(api)


def _stamp_receipt(app: Any) -> Any:
    """Outermost ASGI layer: stamp each request's receipt before routing and body parsing."""

    async def stamped(scope, receive, send) -> None:
        if scope["type"] == "http":
            scope["infercast.t0"] = asyncio.get_running_loop().time()
        await app(scope, receive, send)

    return stamped


class _Responder(Response):
    """A raw ASGI response: it may stop without finishing the body (a mid-stream close)."""

    def __init__(self, server: MockServer, body: dict[str, Any], chat: bool, index: int, t0: float,
                 request_id: str | None = None) -> None:
        self.background = None  # Starlette/FastAPI attach background tasks here
        self.request_id = request_id
        self.server, self.body, self.chat, self.index, self.t0 = server, body, chat, index, t0
        cfg = server.config
        asked = int(body.get("max_tokens") or body.get("max_completion_tokens") or cfg.default_max_tokens)
        self.num_tokens = min(asked, cfg.stop_after_tokens or asked)
        self.finish = "stop" if self.num_tokens < asked else "length"

    async def __call__(self, scope, receive, send) -> None:
        cfg = self.server.config
        loop = asyncio.get_running_loop()
        if _hits(cfg.hang_every, self.index):
            await _sleep_or_disconnect(receive, cfg.hang_s)
            return  # never answered: the connection closes with no response
        headers = [(b"content-type", b"text/event-stream" if self.body.get("stream") else b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if not self.body.get("stream"):
            await asyncio.sleep(max(0.0, self._chunk_time(self._num_chunks() - 1) - loop.time()))
            await send({"type": "http.response.body", "body": json.dumps(self._full()).encode()})
            return
        ok = await self._stream(send, loop)
        if ok:
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
        # a mid-stream close returns without the final body message: uvicorn drops the connection

    def _num_chunks(self) -> int:
        return -(-self.num_tokens // self.server.config.tokens_per_chunk)

    def _chunk_time(self, i: int) -> float:
        """Chunk i leaves when its last token is ready; token j is ready at ttft + (j - k + 1) itl."""
        cfg = self.server.config
        k = cfg.tokens_per_chunk
        last_token = min((i + 1) * k, self.num_tokens) - 1
        return self.t0 + cfg.ttft_s + max(last_token - (k - 1), 0) * cfg.itl_s

    async def _stream(self, send, loop) -> bool:
        cfg = self.server.config
        chunks = _Chunks(self.chat, cfg.model_name, f"mock-{self.index}")
        if cfg.role_chunk:
            await _body(send, chunks.role())
        close_at = cfg.midstream_close_after_chunks if _hits(cfg.midstream_close_every, self.index) else None
        sent: list[float] = []
        k, produced = cfg.tokens_per_chunk, 0
        for i in range(self._num_chunks()):
            if close_at is not None and i >= close_at:
                return False
            await asyncio.sleep(max(0.0, self._chunk_time(i) - loop.time()))
            n = min(k, self.num_tokens - produced)
            reasoning = self.chat and produced < cfg.reasoning_tokens
            text = "".join(f" t{produced + j}" for j in range(n))
            produced += n
            last = produced == self.num_tokens
            await _body(send, chunks.content(text, self.finish if last else None, reasoning))
            sent.append(loop.time())
        opts = self.body.get("stream_options") or {}
        if cfg.usage and opts.get("include_usage"):
            await _body(send, chunks.usage(_prompt_tokens(self.body), self.num_tokens))
        self._record(sent)
        return True

    def _record(self, sent: list[float]) -> None:
        if not sent:
            return
        ttft, e2e = sent[0] - self.t0, sent[-1] - self.t0
        tpot = (e2e - ttft) / (self.num_tokens - 1) if self.num_tokens > 1 else None
        # receipt_s/first_write_s: the server's monotonic clock (the same clock as a client's
        # time.perf_counter on this host), so a benchmark can split delays per request
        self.server.truth.append({"index": self.index, "request_id": self.request_id,
                                  "receipt_s": self.t0, "first_write_s": sent[0], "ttft_s": ttft, "e2e_s": e2e, "tpot_s": tpot,
                                  "output_tokens": self.num_tokens, "chunks": len(sent)})

    def _full(self) -> dict[str, Any]:
        text = "".join(f" t{j}" for j in range(self.num_tokens))
        choice: dict[str, Any] = {"index": 0, "finish_reason": self.finish}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        prompt = _prompt_tokens(self.body)
        return {"id": f"mock-{self.index}", "object": "chat.completion" if self.chat else "text_completion",
                "model": self.server.config.model_name, "choices": [choice],
                "usage": {"prompt_tokens": prompt, "completion_tokens": self.num_tokens,
                          "total_tokens": prompt + self.num_tokens}}


async def _body(send, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def _sleep_or_disconnect(receive, seconds: float) -> None:
    """Sleep, but return early when the client goes away (so shutdown is not held up)."""

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(disconnected(), seconds)


def uvicorn_config(server: MockServer, **kwargs: Any):  # noqa: ANN201
    """A uvicorn Config for the mock (close-after-stream: zero keep-alive timeout)."""
    import uvicorn

    # close-after-stream: keep-alive stays advertised (no "Connection: close") but the server
    # closes each connection as soon as a response ends, as llama.cpp's server does.
    keep_alive = 0 if server.config.close_after_stream else 5
    return uvicorn.Config(server.app(), log_level="warning", timeout_keep_alive=keep_alive,
                          lifespan="off", **kwargs)


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket with TCP_NODELAY, so each chunk leaves at once (no Nagle delay).

    Without it a chunk written right after the headers can wait ~40 ms for the
    client's delayed ACK (measured: the role chunk arrived 40 ms late).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    return sock


def serve(config: MockConfig, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve the mock until interrupted (the ``infercast mock-server`` command)."""
    import uvicorn

    sock = _listen(host, port)
    uvicorn.Server(uvicorn_config(MockServer(config))).run(sockets=[sock])


@contextlib.contextmanager
def run_in_thread(config: MockConfig) -> Iterator[tuple[str, MockServer]]:
    """Serve the mock on 127.0.0.1 (free port) in a thread; yields (base URL ending /v1, server)."""
    import uvicorn

    mock = MockServer(config)
    sock = _listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(mock))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10.0
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/v1", mock
    finally:
        server.should_exit = True
        thread.join(timeout=5.0)
        sock.close()
