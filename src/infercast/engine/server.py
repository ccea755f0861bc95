"""The OpenAI-compatible HTTP server (FastAPI on uvicorn) in front of the engine.

Endpoints: ``POST /v1/completions``, ``POST /v1/chat/completions`` (SSE
streaming or one JSON body), ``GET /v1/models``, ``GET /health``, ``GET
/metrics`` (Prometheus text). Every error uses OpenAI's ``{"error": {...}}``
body: 400 for invalid requests (malformed JSON, wrong types, a prompt over the
limits), 401 for a wrong API key, 404/405 for unknown routes, 408/413 for a
body too slow or too large (:mod:`infercast.engine.http_limits`), 429 when
the waiting queue is full, 500 for a request that failed in the engine (it
fails alone; the engine goes on), 503 when the engine is not running.

A client that disconnects, streaming or not, has its request aborted, which
frees its KV blocks. Tokenization runs in a worker thread, never on the event
loop. ``/health`` answers 503 once the engine thread has stopped.
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
from starlette.exceptions import HTTPException as StarletteHTTPException

from infercast.engine import protocol as p
from infercast.engine.async_engine import AsyncEngine, EngineStoppedError, QueueFullError
from infercast.engine.chat import render_chat, token_text
from infercast.engine.http_limits import RequestGuard, ServerLimits, error_response
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
    limits: ServerLimits


_error = error_response
_HTTP_KINDS = {404: "not_found_error", 405: "invalid_request_error"}


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    err = exc.errors()[0] if exc.errors() else {"msg": "invalid request", "loc": ()}
    loc = [str(x) for x in err.get("loc", ()) if x != "body"]
    if err.get("type") == "json_invalid":
        return "request body is not valid JSON", None
    msg = str(err["msg"]).removeprefix("Value error, ")
    if not loc:  # the body itself is wrong: not an object, or a check on the whole body
        if err.get("type") == "value_error":
            return msg, None
        return f"request body must be a JSON object ({msg})", None
    # loc may hold the union member tried (e.g. "str", "list[int]"): keep the field path
    param = ".".join(x for x in loc if "[" not in x and x not in ("str", "int", "float"))
    return (f"{param}: {msg}" if param else msg), (param or None)


def create_app(
    engine,
    model_name: str,
    api_key: str | None = None,
    max_waiting: int = 64,
    clock: Callable[[], float] = time.monotonic,
    limits: ServerLimits | None = None,
) -> FastAPI:
    """The FastAPI app serving ``engine`` (an :class:`~infercast.engine.engine.Engine`)."""
    metrics = ServerMetrics(engine)
    driver = AsyncEngine(
        engine, max_waiting, on_step=lambda: metrics.observe(engine.pop_finished())
    )
    state = ServerState(driver, metrics, model_name, api_key, 256, clock, limits or ServerLimits())

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

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = _HTTP_KINDS.get(exc.status_code, "invalid_request_error")
        message = f"{request.method} {request.url.path}: {exc.detail}"
        if exc.status_code == 404:
            message += " (routes: /v1/completions, /v1/chat/completions, /v1/models, /health)"
        return _error(exc.status_code, message, kind)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        return _error(
            500, f"internal error ({type(exc).__name__}); the server keeps running", "server_error"
        )

    app.add_middleware(RequestGuard, limits=state.limits, api_key=api_key)
    _add_info_routes(app, state)
    _add_generation_routes(app, state)
    return app


def _add_info_routes(app: FastAPI, st: ServerState) -> None:
    eng = st.engine.engine

    @app.get("/health")
    async def health() -> JSONResponse:
        alive = st.engine.alive
        body = {
            "status": "ok" if alive else "error",
            "model": st.model_name,
            "running": eng.num_running,
            "waiting": eng.num_waiting,
            "kv_cache_usage": eng.kv_usage,
            "kv_blocks_used": eng.scheduler.kv.num_used_blocks,
            "step_failures": st.engine.step_failures,
        }
        if not alive:
            body["error"] = (
                "the engine thread has stopped"
                if st.engine.error is None
                else f"the engine thread failed: {type(st.engine.error).__name__}"
            )
        return JSONResponse(body, status_code=200 if alive else 503)

    @app.get("/v1/models")
    async def models() -> dict:
        return {
            "object": "list",
            "data": [
                {
                    "id": st.model_name,
                    "object": "model",
                    "created": 0,
                    "owned_by": "infercast",
                    "max_model_len": eng.max_model_len,
                }
            ],
        }

    @app.get("/metrics")
    async def prometheus() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(st.metrics.render(), media_type=CONTENT_TYPE_LATEST)


def _add_generation_routes(app: FastAPI, st: ServerState) -> None:
    tok = st.engine.engine.loaded.tokenizer

    def too_long(chars: int, param: str) -> JSONResponse | None:
        if chars <= st.limits.max_prompt_chars:
            return None
        return _error(
            400,
            f"{param} has {chars} characters, more than this server takes "
            f"({st.limits.max_prompt_chars}, its --max-prompt-chars); shorten it",
            param=param,
            code="prompt_too_long",
        )

    @app.post("/v1/completions")
    async def completions(body: p.CompletionRequest, request: Request) -> Response:
        if isinstance(body.prompt, list):
            ids = list(body.prompt)
        else:
            if (bad := too_long(len(body.prompt), "prompt")) is not None:
                return bad
            ids = await asyncio.to_thread(tok.encode, body.prompt, add_bos=True)
        return await _generate(st, body, ids, request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat(body: p.ChatRequest, request: Request) -> Response:
        msgs = [{"role": m.role, "content": m.text()} for m in body.messages]
        if (bad := too_long(sum(len(m["content"]) for m in msgs), "messages")) is not None:
            return bad

        def render_and_encode() -> list[int]:
            text = render_chat(
                msgs,
                tok.chat_template,
                token_text(tok, tok.bos_id),
                token_text(tok, (tok.eos_ids or (None,))[0]),
            )
            return tok.encode(text)

        try:
            ids = await asyncio.to_thread(render_and_encode)
        except ConfigError as exc:
            return _error(400, str(exc), param="messages")
        return await _generate(st, body, ids, request, chat=True)


async def _generate(
    st: ServerState, body, ids: list[int], request: Request, chat: bool
) -> Response:
    if body.model != st.model_name:
        return _error(
            400,
            f"model {body.model!r} is not served here; use {st.model_name!r}",
            param="model",
            code="model_not_found",
        )
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
        return _error(503, f"{exc}; see /health", "server_error", code="engine_stopped")
    stream = _Stream(st, rid, q, len(ids), chat, body.include_usage)
    if body.stream:
        return StreamingResponse(stream.sse(), media_type="text/event-stream")
    return await stream.collect(request)


class _Stream:
    """One request's events turned into SSE chunks or a single body."""

    def __init__(
        self,
        st: ServerState,
        rid: str,
        q: asyncio.Queue,
        prompt_tokens: int,
        chat: bool,
        include_usage: bool,
    ) -> None:
        self.st, self.rid, self.q = st, rid, q
        self.prompt_tokens, self.chat, self.include_usage = prompt_tokens, chat, include_usage
        self.created = int(time.time())
        self.completion_tokens = 0
        self.cached_tokens = 0  # from the finishing event
        self.done = False
        self.error: str | None = None  # why the engine failed this request

    def _take(self, ev: TokenEvent) -> TokenEvent:
        self.completion_tokens += ev.token_id is not None
        self.done = ev.finished
        if ev.finished:
            self.cached_tokens = ev.cached_prompt_tokens
        if ev.finish_reason == "error":
            self.error = ev.error or "the request failed in the engine"
        return ev

    def _failure(self) -> tuple[int, dict]:
        """HTTP status and OpenAI error body of a request the engine failed."""
        status = 500 if self.st.engine.alive else 503
        return status, p.error_body(
            f"{self.error}; other requests are not affected"
            if status == 500
            else f"{self.error}; see /health",
            "server_error",
            code="request_failed",
        )

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
                role = p.chat_chunk(
                    self.rid, self.created, self.st.model_name, {"role": "assistant", "content": ""}
                )
                yield _sse(role)
            while not self.done:
                ev = await self.next()
                if self.error is not None:  # OpenAI streams an error as an {"error"} event
                    yield _sse(self._failure()[1])
                    break
                if ev.text or ev.finished:
                    yield _sse(self._chunk(ev.text, ev.finish_reason))
            if self.include_usage and self.error is None:
                use = p.usage(self.prompt_tokens, self.completion_tokens, self.cached_tokens)
                obj = "chat.completion.chunk" if self.chat else "text_completion"
                yield _sse(p.usage_chunk(self.rid, self.created, self.st.model_name, obj, use))
            yield "data: [DONE]\n\n"
        finally:
            if not self.done:  # client went away (or shutdown): free the KV blocks
                self.st.engine.abort(self.rid)

    async def collect(self, request: Request) -> Response:
        text, reason, getter = "", None, None
        # Wait on the tokens and on the client at once: polling for a disconnect only
        # when no token came for a while never fires while the engine is producing.
        gone = asyncio.ensure_future(_client_gone(request))
        try:
            while not self.done:
                getter = getter or asyncio.ensure_future(self.q.get())
                await asyncio.wait({getter, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():  # the client went away
                    break
                ev = self._take(getter.result())
                getter = None
                text += ev.text
                reason = ev.finish_reason
        finally:
            gone.cancel()
            if getter is not None:
                getter.cancel()
            if not self.done:
                self.st.engine.abort(self.rid)
        if self.error is not None:
            status, err = self._failure()
            return JSONResponse(err, status_code=status)
        use = p.usage(self.prompt_tokens, self.completion_tokens, self.cached_tokens)
        name = self.st.model_name
        body = (
            p.chat_body(self.rid, self.created, name, text, reason, use)
            if self.chat
            else p.completion_body(self.rid, self.created, name, text, reason, use)
        )
        return JSONResponse(body)


async def _client_gone(request: Request) -> None:
    """Return once the client disconnects (the body was already read by then)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"
