"""Async OpenAI-compatible streaming client that turns one request into a RequestRecord.

- aiohttp, not httpx: on this 2-core machine httpx/httpcore used 81 % of a core
  at 64 streams and delayed request starts by up to 1.5 s (many event-loop
  yields per request under load); aiohttp used 15 % and stayed within 5 ms
  (benchmarks/bench_client_error.py).
- One keep-alive pool; when a pooled connection turns out closed before any
  response byte arrives (llama.cpp's server closes after each stream while
  advertising keep-alive), the request is retried once on a fresh connection.
- Each block of bytes is stamped with the clock when it arrives, before parsing
  (:mod:`infercast.bench.sse`); JSON is parsed after the stream ends.
- HTTP errors, closes mid-stream, timeouts and malformed streams become failed
  records with a short reason; nothing is dropped (total = ok + failed).
- Output tokens: ``usage`` > tokenizer > content chunks (``docs/metrics.md``),
  with the source recorded and disagreements flagged.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from infercast.bench.datasets import RequestSpec, count_tokens
from infercast.bench.sse import SSEDecoder, SSEError
from infercast.metrics.records import RequestRecord


@dataclass(frozen=True)
class ClientConfig:
    """Where and how to send requests."""

    base_url: str
    model: str
    endpoint: str = "completions"  # completions | chat
    timeout_s: float = 600.0  # longest silence (no bytes) before a request fails
    max_connections: int = 1024
    ignore_eos: bool = True  # ask servers that support it to produce exactly max_tokens
    api_key: str | None = None
    extra_body: tuple[tuple[str, Any], ...] = ()


class _Failed(Exception):
    """A request failed; ``args[0]`` is the short reason kept in the record."""


@dataclass
class _Stream:
    """What one streamed response delivered, before parsing."""

    events: list[tuple[float, bytes]]
    finish_s: float


class BenchClient:
    """Sends :class:`RequestSpec` s and returns :class:`RequestRecord` s; use as an async
    context."""

    def __init__(
        self,
        config: ClientConfig,
        tokenizer: Any | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.config, self.tokenizer, self.clock = config, tokenizer, clock
        path = "/chat/completions" if config.endpoint == "chat" else "/completions"
        self.url = config.base_url.rstrip("/") + path
        self.in_flight = self.max_in_flight = self.reconnects = 0
        self._pool: aiohttp.ClientSession | None = None
        self._fresh: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> BenchClient:
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        # sock_read: the longest silence allowed; no total limit (long generations are fine)
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.config.timeout_s, sock_read=self.config.timeout_s
        )
        pool = aiohttp.TCPConnector(limit=self.config.max_connections, enable_cleanup_closed=True)
        traced = [self._trace_config()]
        self._pool = aiohttp.ClientSession(
            connector=pool, timeout=timeout, headers=headers, trace_configs=traced
        )
        # the one-shot retry goes through a session that never reuses a connection
        fresh = aiohttp.TCPConnector(limit=self.config.max_connections, force_close=True)
        self._fresh = aiohttp.ClientSession(
            connector=fresh, timeout=timeout, headers=headers, trace_configs=traced
        )
        return self

    def _trace_config(self) -> aiohttp.TraceConfig:
        """Stamp ``send_s`` when the request headers were written: when it really left."""
        clock = self.clock

        async def sent(session: object, ctx: Any, params: object) -> None:
            if ctx.trace_request_ctx is not None:
                ctx.trace_request_ctx.send_s = clock()

        tc = aiohttp.TraceConfig()
        tc.on_request_headers_sent.append(sent)
        return tc

    async def __aexit__(self, *exc: object) -> None:
        for session in (self._pool, self._fresh):
            if session is not None:
                await session.close()

    def payload(self, spec: RequestSpec) -> dict[str, Any]:
        """The JSON body: streaming, usage requested, ``max_tokens`` = the spec's output tokens."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": spec.output_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0.0,
        }
        if self.config.ignore_eos:
            body["ignore_eos"] = True
        if spec.messages is not None:
            body["messages"] = list(spec.messages)
        elif self.config.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": spec.prompt}]
        else:
            body["prompt"] = spec.prompt
        body.update(dict(self.config.extra_body))
        return body

    def encode(self, spec: RequestSpec) -> bytes:
        """The request body as bytes; callers encode before the request's clock starts."""
        return json.dumps(self.payload(spec), separators=(",", ":")).encode()

    async def warm_pool(self, connections: int) -> int:
        """Open up to ``connections`` pooled connections before a timed run; returns how many
        answered.

        Sends that many concurrent ``GET {base_url}/models`` (cheap on every
        OpenAI-compatible server; any status will do): the pool keeps each
        connection, so the timed requests do not pay TCP set-up, which in a
        burst of 64 added ~10 ms to the first round's TTFT.
        """
        if connections <= 0 or self._pool is None:
            return 0
        url = self.config.base_url.rstrip("/") + "/models"

        async def one() -> bool:
            try:
                async with self._pool.get(url) as resp:
                    await resp.read()
                return True
            except (aiohttp.ClientError, OSError, TimeoutError):
                return False

        return sum(await asyncio.gather(*(one() for _ in range(connections))))

    async def send(
        self,
        spec: RequestSpec,
        scheduled_s: float,
        body: bytes | None = None,
        answer: list[str] | None = None,
    ) -> RequestRecord:
        """Send one request; its clock zero is ``scheduled_s`` (the scheduled send time).

        ``body`` (from :meth:`encode`) lets the caller encode before the clock starts; ``answer``
        receives the streamed answer text (a conversation's next turn repeats it).
        """
        send_s = self.clock()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        rec = RequestRecord(spec.request_id, scheduled_s, spec.prompt_tokens, send_s=send_s)
        try:
            stream = await self._stream_once(self.encode(spec) if body is None else body, rec)
            _fill(rec, stream, self.config.endpoint == "chat", self.tokenizer, answer)
        except _Failed as exc:
            rec.error, rec.finish_reason, rec.finish_s = str(exc), "error", self.clock()
        finally:
            self.in_flight -= 1
        return rec

    async def _stream_once(self, body: bytes, rec: RequestRecord) -> _Stream:
        try:
            return await self._stream(self._pool, body, rec)
        except _RetryBeforeResponse:
            self.reconnects += 1
        try:
            return await self._stream(self._fresh, body, rec)
        except _RetryBeforeResponse as exc:
            raise _Failed(f"connection failed: {exc.args[0]}") from None

    async def _stream(
        self, session: aiohttp.ClientSession | None, body: bytes, rec: RequestRecord
    ) -> _Stream:
        if session is None:
            raise RuntimeError("use BenchClient as 'async with BenchClient(...) as client'")
        decoder, events = SSEDecoder(), []
        got_response = False
        try:
            headers = {"content-type": "application/json", "x-request-id": rec.request_id}
            async with session.post(
                self.url, data=body, headers=headers, trace_request_ctx=rec
            ) as resp:
                got_response = True
                if resp.status >= 400:
                    await resp.read()
                    raise _Failed(f"HTTP {resp.status}")
                async for block in resp.content.iter_any():
                    t = self.clock()  # stamp first: parsing comes after the stream ends
                    events.extend(decoder.feed(block, t))
                t = self.clock()
                events.extend(decoder.close(t))
                return _Stream(events, t)
        except (TimeoutError, aiohttp.ServerTimeoutError):
            raise _Failed("timeout") from None
        except SSEError as exc:
            raise _Failed(f"malformed stream: {exc}") from None
        except aiohttp.ClientPayloadError:
            raise _Failed("connection closed mid-stream") from None
        except (aiohttp.ClientConnectionError, OSError) as exc:
            if not got_response:
                raise _RetryBeforeResponse(type(exc).__name__) from None
            raise _Failed("connection closed mid-stream") from None
        except aiohttp.ClientError as exc:
            raise _Failed(f"http error: {type(exc).__name__}") from None


class _RetryBeforeResponse(Exception):
    """The connection failed before any response arrived: safe to retry once."""


def _fill(
    rec: RequestRecord,
    stream: _Stream,
    chat: bool,
    tokenizer: Any | None,
    answer: list[str] | None = None,
) -> None:
    """Parse the stamped events into the record (times, texts, usage, finish; text: ``answer``)."""
    times, texts, usage, finish, done = [], [], None, None, False
    reasoning_seen = choices_seen = False
    for t, data in stream.events:
        if data == b"[DONE]":
            done = True
            continue
        try:
            obj = json.loads(data)
        except ValueError:
            raise _Failed("malformed chunk JSON") from None
        if not isinstance(obj, dict):
            raise _Failed("malformed chunk: not a JSON object")
        if obj.get("error"):
            raise _Failed("server error event")
        usage = obj.get("usage") or usage
        choices = obj.get("choices") or []
        if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
            raise _Failed("malformed chunk: choices is not a list of objects")
        choices_seen = choices_seen or bool(choices)
        for choice in choices:
            content, reasoning = _texts(choice, chat)
            if content or reasoning:  # an empty role chunk is not a token
                times.append(t)
                texts.append(content + reasoning)
                reasoning_seen = reasoning_seen or bool(reasoning)
                if content and reasoning_seen and rec.first_answer_s is None:
                    rec.first_answer_s = t
            finish = choice.get("finish_reason") or finish
    if not done and finish is None:
        raise _Failed("incomplete stream")
    if not choices_seen:  # [DONE] (or usage) alone is not a completion
        raise _Failed("no choices in the stream")
    if usage is not None and not isinstance(usage, dict):
        usage = None
    rec.chunk_times_s, rec.finish_s, rec.finish_reason = times, stream.finish_s, finish or "stop"
    prompt = usage.get("prompt_tokens") if usage else None
    if isinstance(prompt, int) and not isinstance(prompt, bool) and prompt > 0:
        rec.prompt_tokens = prompt
    rec.cached_prompt_tokens = _cached_tokens(usage, rec.prompt_tokens)
    _count_tokens(rec, texts, usage, tokenizer)
    if answer is not None:
        answer.append("".join(texts))


def _cached_tokens(usage: dict | None, prompt_tokens: int) -> int | None:
    """``usage.prompt_tokens_details.cached_tokens`` (OpenAI's, vLLM's), None if not reported."""
    details = usage.get("prompt_tokens_details") if usage else None
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if isinstance(cached, int) and not isinstance(cached, bool) and 0 <= cached <= prompt_tokens:
        return cached
    return None


def _texts(choice: dict[str, Any], chat: bool) -> tuple[str, str]:
    if not chat:
        return choice.get("text") or "", ""
    delta = choice.get("delta") or {}
    reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
    return delta.get("content") or "", reasoning


def _count_tokens(
    rec: RequestRecord, texts: list[str], usage: dict | None, tokenizer: Any | None
) -> None:
    """usage > tokenizer > chunks; spread the count over chunks; flag disagreements."""
    n_chunks = len(texts)
    n_usage = _usage_tokens(usage)
    # usage is the server's claim; what was streamed bounds it: every token decodes to at
    # least one byte of text except a final stop token (byte-fallback tokens carry 1 byte).
    streamed_bytes = sum(len(x.encode("utf-8", "replace")) for x in texts)
    implausible = n_usage is not None and n_usage > streamed_bytes + 1
    per_chunk = [count_tokens(tokenizer, x) for x in texts] if tokenizer is not None else None
    n_tok = count_tokens(tokenizer, "".join(texts)) if tokenizer is not None else None
    if n_usage is not None and not implausible:
        n, rec.token_count_source = n_usage, "usage"
    elif n_tok is not None:
        n, rec.token_count_source = n_tok, "tokenizer"
    else:
        n, rec.token_count_source = n_chunks, "chunks"
    notes = []
    if implausible:
        notes.append(f"usage={n_usage} > {streamed_bytes} bytes streamed (not used)")
    if n_usage is not None and n_tok is not None and abs(n_usage - n_tok) > max(1, 0.02 * n_usage):
        notes.append(f"usage={n_usage} tokenizer={n_tok}")
    if n < n_chunks:
        notes.append(f"{n} tokens < {n_chunks} content chunks")
    rec.token_count_mismatch = "; ".join(notes) or None
    rec.output_tokens = max(n, n_chunks) if n < n_chunks else n
    rec.chunk_tokens = _spread(rec.output_tokens, n_chunks, per_chunk)


def _usage_tokens(usage: Any) -> int | None:
    """``usage.completion_tokens`` if it is a non-negative integer, else None (not trusted)."""
    value = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _spread(n: int, chunks: int, weights: list[int] | None) -> list[int]:
    """Split n tokens over chunks (each >= 1): by tokenizer weights if given, else evenly."""
    if chunks == 0:
        return []
    w = [max(1, x) for x in weights] if weights else [1] * chunks
    total = sum(w)
    extra = n - chunks  # every chunk carries at least one token
    if total > chunks:  # extra tokens in proportion to each chunk's tokens beyond its first
        share = [(wi - 1) * extra / (total - chunks) for wi in w]
    else:
        share = [extra / chunks] * chunks
    counts = [1 + int(s) for s in share]
    rest = n - sum(counts)
    for i in sorted(range(chunks), key=lambda i: int(share[i]) - share[i])[:rest]:
        counts[i] += 1
    return counts
