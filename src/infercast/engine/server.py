"""The OpenAI-compatible HTTP server (FastAPI on uvicorn) in front of the engine.

Endpoints: ``POST /v1/completions``, ``POST /v1/chat/completions`` (SSE
streaming or one JSON body), ``GET /v1/models``, ``GET /health``, ``GET
/metrics`` (Prometheus text). Errors use OpenAI's ``{"error": {...}}`` body:
400 for invalid requests (malformed JSON too), 401 for a wrong API key, 429
when the waiting queue is full. A streaming client that disconnects has its
request aborted, which frees its KV blocks.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse

from infercast.engine import protocol as p
from infercast.engine.async_engine import AsyncEngine, EngineStoppedError, QueueFullError
from infercast.engine.chat import render_chat, token_text
from infercast.engine.prom import ServerMetrics
from infercast.engine.sequence import TokenEvent
from infercast.errors import ConfigError


@dataclass
class ServerState:
    """What the handlers share: the engine driver, tokenizer, names and limits."""

    engine: AsyncEngine
    metrics: ServerMetrics
    model_name: str
    api_key: str | None
    default_max_tokens: int
    clock: Callable[[], float]


def _error(status: int, message: str, kind: str = "invalid_request_error",
           param: str | None = None, code: str | None = None) -> JSONResponse:
    return JSONResponse(p.error_body(message, kind, param, code), status_code=status)


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    err = exc.errors()[0] if exc.errors() else {"msg": "invalid request", "loc": ()}
    loc = [str(x) for x in err.get("loc", ()) if x != "body"]
    if err.get("type") == "json_invalid":
        return "request body is not valid JSON", None
    if not loc:  # the body itself is the wrong type (not an object, or not JSON at all)
        return f"request body must be a JSON object ({err['msg']})", None
    param = ".".join(loc) or None
    return (f"{param}: {err['msg']}" if param else str(err["msg"])), param


def create_app(engine, model_name: str, api_key: str | None = None, max_waiting: int = 64,
               clock: Callable[[], float] = time.monotonic) -> FastAPI:
    """The FastAPI app serving ``engine`` (an :class:`~infercast.engine.engine.Engine`)."""
    metrics = ServerMetrics(engine)
    driver = AsyncEngine(engine, max_waiting,
                         on_step=lambda: metrics.observe(engine.pop_finished()))
    state = ServerState(driver, metrics, model_name, api_key, 256, clock)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        driver.start()
        yield
        await asyncio.to_thread(driver.stop)

    app = FastAPI(title="infercast", lifespan=lifespan)
    app.state.infercast = state

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(exc)
        return _error(400, message, param=param)

    @app.middleware("http")
    async def _auth(request: Request, call_next):
        if api_key and request.url.path.startswith("/v1/"):
            if request.headers.get("authorization") != f"Bearer {api_key}":
                return _error(401, "invalid or missing API key (Authorization: Bearer KEY)",
                              "authentication_error", code="invalid_api_key")
        return await call_next(request)

    _add_info_routes(app, state)
    _add_generation_routes(app, state)
    return app


def _add_info_routes(app: FastAPI, st: ServerState) -> None:
    eng = st.engine.engine

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok" if st.engine.error is None else "error",
                "model": st.model_name, "running": eng.num_running, "waiting": eng.num_waiting,
                "kv_cache_usage": eng.kv_usage, "kv_blocks_used": eng.scheduler.kv.num_used_blocks}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{
            "id": st.model_name, "object": "model", "created": 0, "owned_by": "infercast",
            "max_model_len": eng.max_model_len}]}

    @app.get("/metrics")
    async def prometheus() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(st.metrics.render(), media_type=CONTENT_TYPE_LATEST)


def _add_generation_routes(app: FastAPI, st: ServerState) -> None:
    tok = st.engine.engine.loaded.tokenizer

    @app.post("/v1/completions")
    async def completions(body: p.CompletionRequest, request: Request) -> Response:
        if isinstance(body.prompt, list):
            ids = list(body.prompt)
        else:
            ids = tok.encode(body.prompt, add_bos=True)
        return await _generate(st, body, ids, request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat(body: p.ChatRequest, request: Request) -> Response:
        msgs = [{"role": m.role, "content": m.text()} for m in body.messages]
        try:
            text = render_chat(msgs, tok.chat_template, token_text(tok, tok.bos_id),
                               token_text(tok, (tok.eos_ids or (None,))[0]))
        except ConfigError as exc:
            return _error(400, str(exc), param="messages")
        return await _generate(st, body, tok.encode(text), request, chat=True)


async def _generate(st: ServerState, body, ids: list[int], request: Request,
                    chat: bool) -> Response:
    if body.model != st.model_name:
        return _error(400, f"model {body.model!r} is not served here; use {st.model_name!r}",
                      param="model", code="model_not_found")
    eng = st.engine.engine
    try:
        params = body.sampling(st.default_max_tokens)
        eng.check_prompt(len(ids), params.max_tokens)
        if any(not 0 <= i < eng.loaded.cfg.vocab_size for i in ids):
            raise ConfigError(f"prompt token ids must be in [0, {eng.loaded.cfg.vocab_size})")
    except ConfigError as exc:
        return _error(400, str(exc), param="prompt" if "prompt" in str(exc) else None)
    rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
    try:
        q = st.engine.submit(rid, ids, params, st.clock())
    except QueueFullError as exc:
        return _error(429, f"{exc}; retry later", "rate_limit_error", code="queue_full")
    except EngineStoppedError as exc:
        return _error(503, str(exc), "server_error", code="engine_stopped")
    stream = _Stream(st, rid, q, len(ids), chat, body.include_usage)
    if body.stream:
        return StreamingResponse(stream.sse(), media_type="text/event-stream")
    return await stream.collect(request)


class _Stream:
    """One request's events turned into SSE chunks or a single body."""

    def __init__(self, st: ServerState, rid: str, q: asyncio.Queue, prompt_tokens: int,
                 chat: bool, include_usage: bool) -> None:
        self.st, self.rid, self.q = st, rid, q
        self.prompt_tokens, self.chat, self.include_usage = prompt_tokens, chat, include_usage
        self.created = int(time.time())
        self.completion_tokens = 0
        self.done = False

    def _take(self, ev: TokenEvent) -> TokenEvent:
        self.completion_tokens += ev.token_id is not None
        self.done = ev.finished
        return ev

    async def next(self) -> TokenEvent:
        return self._take(await self.q.get())

    def _chunk(self, text: str, reason: str | None) -> dict:
        name = self.st.model_name
        if self.chat:
            delta = {"content": text} if text else {}
            return p.chat_chunk(self.rid, self.created, name, delta, reason)
        return p.completion_body(self.rid, self.created, name, text, reason, None, chunk=True)

    async def sse(self) -> AsyncIterator[str]:
        try:
            if self.chat:  # OpenAI sends the role first, in an empty-content chunk
                role = p.chat_chunk(self.rid, self.created, self.st.model_name,
                                    {"role": "assistant", "content": ""})
                yield _sse(role)
            while not self.done:
                ev = await self.next()
                if ev.text or ev.finished:
                    yield _sse(self._chunk(ev.text, ev.finish_reason))
            if self.include_usage:
                use = p.usage(self.prompt_tokens, self.completion_tokens)
                obj = "chat.completion.chunk" if self.chat else "text_completion"
                yield _sse(p.usage_chunk(self.rid, self.created, self.st.model_name, obj, use))
            yield "data: [DONE]\n\n"
        finally:
            if not self.done:  # client went away (or shutdown): free the KV blocks
                self.st.engine.abort(self.rid)

    async def collect(self, request: Request) -> Response:
        text, reason, getter = "", None, None
        try:
            while not self.done:
                getter = getter or asyncio.ensure_future(self.q.get())
                ready, _ = await asyncio.wait({getter}, timeout=0.5)
                if not ready:  # nothing yet: is the client still there?
                    if await request.is_disconnected():
                        break
                    continue
                ev = self._take(getter.result())
                getter = None
                text += ev.text
                reason = ev.finish_reason
        finally:
            if getter is not None:
                getter.cancel()
            if not self.done:
                self.st.engine.abort(self.rid)
        use = p.usage(self.prompt_tokens, self.completion_tokens)
        name = self.st.model_name
        body = (p.chat_body(self.rid, self.created, name, text, reason, use) if self.chat
                else p.completion_body(self.rid, self.created, name, text, reason, use))
        return JSONResponse(body)


def _sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"
