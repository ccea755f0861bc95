"""A timing mock of an OpenAI-compatible streaming server, whose truth is known exactly.

Each request is answered on an absolute schedule from its receipt time ``t0``:
with k = ``tokens_per_chunk``, token j is ready at ``t0 + ttft_s + (j - k + 1)
itl_s`` and each chunk of k tokens (the last one the remainder) leaves when its
last token is ready. So the truth for n >= k tokens is TTFT = ``ttft_s``, E2E =
``ttft_s + (n - k) itl_s``, TPOT = (n - k) itl_s / (n - 1), per-token ITL =
``itl_s`` and per-chunk ITL = ``k itl_s`` (the last gap: the remainder times
``itl_s``). The server also records when it actually wrote each chunk (``GET
/mock/truth``), since event-loop timers fire up to ~1 ms off.

``t0`` is stamped with ``time.perf_counter()`` (CLOCK_MONOTONIC, the same clock
as a client's ``perf_counter`` on this host) the moment the request's first
bytes are read from the socket, before any HTTP parsing: the server's own
parsing and routing cost is inside its TTFT, not added to it.

The HTTP layer (:mod:`infercast.bench.mock_http`) is a small asyncio protocol
on uvloop with httptools' C parser, not a web framework: under a burst of 64
simultaneous requests on two shared cores the mock must not be the bottleneck
of the measurement it is used to check (FastAPI on uvicorn took ~2 ms on
average, up to 11 ms, from a request's send to its routing).

Modes reproduce what breaks real clients (issue 6): an empty role chunk before
the first token, no ``usage``, early stop short of ``max_tokens``, a connection
closed after every stream while keep-alive is advertised, HTTP 500s, a close
mid-stream, and a hang (for client timeouts). Failure modes hit every N-th
request (N = 1: all).
"""

from __future__ import annotations

import json
import time
from collections import deque
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

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
    close_after_stream: bool = (
        False  # close the connection after each response (keep-alive advertised)
    )
    http_error_every: int = Field(0, ge=0)
    midstream_close_every: int = Field(0, ge=0)
    midstream_close_after_chunks: int = Field(2, ge=0)
    hang_every: int = Field(0, ge=0)
    hang_s: float = Field(3600.0, ge=0.0)
    model_name: str = "mock"


def hits(every: int, index: int) -> bool:
    """True when a failure mode set to every ``every``-th request hits request ``index``
    (1-based)."""
    return every > 0 and index % every == 0


class Chunks:
    """SSE payloads of one streamed response, OpenAI's shapes.

    The constant part of every event (id, object, created, model) is encoded
    once per response; each chunk only encodes its text (a JSON encode per
    chunk was a measurable share of the mock's time at 64 streams).
    """

    def __init__(self, chat: bool, model: str, rid: str) -> None:
        kind = "chat.completion.chunk" if chat else "text_completion"
        head = json.dumps(
            {"id": rid, "object": kind, "created": int(time.time()), "model": model},
            separators=(",", ":"),
        ).encode()
        self.chat, self._head = chat, b"data: " + head[:-1] + b',"choices":['

    def role(self) -> bytes:
        delta = b'"delta":{"role":"assistant","content":""}' if self.chat else b'"text":""'
        return self._head + b'{"index":0,' + delta + b',"finish_reason":null}]}\n\n'

    def content(self, text: str, finish: str | None, reasoning: bool = False) -> bytes:
        body = json.dumps(text).encode()
        if self.chat:
            key = b"reasoning_content" if reasoning else b"content"
            body = b'"delta":{"' + key + b'":' + body + b"}"
        else:
            body = b'"text":' + body + b',"logprobs":null'
        end = b"null" if finish is None else json.dumps(finish).encode()
        return self._head + b'{"index":0,' + body + b',"finish_reason":' + end + b"}]}\n\n"

    def usage(self, prompt: int, completion: int) -> bytes:
        return (
            self._head
            + b'],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}\n\n'
            % (prompt, completion, prompt + completion)
        )


def prompt_tokens(body: dict[str, Any]) -> int:
    """Whitespace words of the prompt: the mock's stand-in for a tokenizer."""
    if "messages" in body:
        return sum(len(str(m.get("content", "")).split()) for m in body["messages"])
    prompt = body.get("prompt", "")
    return len(prompt) if isinstance(prompt, list) else len(str(prompt).split())


class MockServer:
    """The mock's state: its config, a request counter and the truth it recorded; no globals."""

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self.truth: deque[dict[str, Any]] = deque(maxlen=TRUTH_KEEP)
        self.connections_opened = 0  # TCP connections accepted (a client's pool reuse shows here)
        self._count = 0

    def next_index(self) -> int:
        """1-based index of the next generation request (failure modes count these)."""
        self._count += 1
        return self._count

    def models(self) -> dict[str, Any]:
        """The ``GET /v1/models`` answer."""
        return {"object": "list", "data": [{"id": self.config.model_name, "object": "model"}]}

    def truth_doc(self) -> dict[str, Any]:
        """The ``GET /mock/truth`` answer: the config and one row per completed stream."""
        return {"config": self.config.model_dump(), "requests": list(self.truth)}

    def record(
        self, index: int, request_id: str | None, t0: float, sent: list[float], num_tokens: int
    ) -> None:
        """Store what a completed stream really did (times on the host's monotonic clock, s)."""
        if not sent:
            return
        ttft, e2e = sent[0] - t0, sent[-1] - t0
        tpot = (e2e - ttft) / (num_tokens - 1) if num_tokens > 1 else None
        self.truth.append(
            {
                "index": index,
                "request_id": request_id,
                "receipt_s": t0,
                "first_write_s": sent[0],
                "ttft_s": ttft,
                "e2e_s": e2e,
                "tpot_s": tpot,
                "output_tokens": num_tokens,
                "chunks": len(sent),
            }
        )
