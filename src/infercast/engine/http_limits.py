"""Limits that keep one client from holding the server: body size, read timeouts, the API key.

- :class:`RequestGuard` is a pure ASGI middleware (not Starlette's
  ``BaseHTTPMiddleware``, which hides a client's disconnect from the
  handlers): it checks the API key, then reads a request body whole, within a
  byte limit (413) and a time limit (408), before any handler runs, and hands
  it on; after the body, the client's own ``http.disconnect`` passes through.
- :func:`guarded_protocol` gives uvicorn's HTTP protocol a header-read
  timeout: a connection whose request headers are not complete in time is
  closed (a slowloris client sends them a byte at a time, forever).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi.responses import JSONResponse

from infercast.errors import ConfigError

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class ServerLimits:
    """What one request may cost the server before the engine sees it.

    ``max_prompt_chars`` bounds the text tokenized for one request (prompt or
    all chat messages): tokenizing is linear, but a 10 MB prompt still takes
    seconds of CPU for a request the context length refuses anyway.
    """

    max_body_bytes: int = 4 * 2**20  # MiB = 2**20 bytes
    max_prompt_chars: int = 2**20
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_prompt_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}={value!r}: use a positive integer")
        for name in ("header_timeout_s", "body_timeout_s"):
            value = getattr(self, name)
            if not 0 < value < float("inf"):
                raise ConfigError(f"{name}={value!r}: use a positive, finite number of seconds")


def error_response(
    status: int,
    message: str,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> JSONResponse:
    """An OpenAI-style ``{"error": {...}}`` response."""
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status)


class _BodyError(Exception):
    def __init__(self, response: JSONResponse) -> None:
        self.response = response


class RequestGuard:
    """ASGI middleware: API key on ``/v1/``, then a bounded, timed body read (see module doc)."""

    def __init__(self, app: Any, limits: ServerLimits, api_key: str | None) -> None:
        self.app, self.limits, self.api_key = app, limits, api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if self.api_key and scope["path"].startswith("/v1/"):
            if headers.get(b"authorization") != f"Bearer {self.api_key}".encode():
                await error_response(
                    401,
                    "invalid or missing API key (Authorization: Bearer KEY)",
                    "authentication_error",
                    code="invalid_api_key",
                )(scope, receive, send)
                return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        try:
            body = await self._read_body(headers, receive)
        except _BodyError as exc:
            await exc.response(scope, receive, send)
            return
        if body is None:  # the client left while sending
            return
        await self.app(scope, _replay(body, receive), send)

    def _too_large(self) -> _BodyError:
        return _BodyError(
            error_response(
                413,
                f"request body is larger than {self.limits.max_body_bytes} bytes; "
                "send a shorter prompt (the server's --max-body-bytes)",
                code="body_too_large",
            )
        )

    async def _read_body(self, headers: dict[bytes, bytes], receive: Receive) -> bytes | None:
        declared = headers.get(b"content-length", b"").strip()
        if declared.isdigit() and int(declared) > self.limits.max_body_bytes:
            raise self._too_large()
        parts, size = [], 0
        try:
            async with asyncio.timeout(self.limits.body_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.limits.max_body_bytes:
                        raise self._too_large()
                    parts.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(parts)
        except TimeoutError:
            raise _BodyError(
                error_response(
                    408,
                    f"request body not received within {self.limits.body_timeout_s:g} s",
                    code="body_timeout",
                )
            ) from None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive() that gives the body read already, then the client's own messages."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def guarded_protocol(header_timeout_s: float) -> type:
    """uvicorn's httptools protocol, closing connections whose headers come too slowly."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._header_timer is None:  # the next request on a kept-alive connection
                self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._header_timer = self.loop.call_later(header_timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _expire(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    return HeaderTimeoutProtocol


def bind_socket(host: str, port: int):
    """A listening TCP socket on host:port, or ConfigError (one line) if it cannot be had.

    Bound here, before uvicorn starts, so a busy port is a clean user error
    (exit 2) rather than uvicorn's log line and exit status 1 or 3.
    """
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ConfigError(
            f"`host` {host!r} cannot be resolved ({exc}); use an address such as 127.0.0.1"
        ) from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        why = "is already in use" if exc.errno == 98 else f"cannot be bound ({exc.strerror})"
        raise ConfigError(
            f"{host}:{port} {why}; pick another `port` or stop the process holding it"
        ) from None
    sock.set_inheritable(True)
    return sock


def uvicorn_config(app: Any, host: str, port: int, limits: ServerLimits, **kw: Any):
    """A uvicorn.Config for ``app`` with the header-read timeout of ``limits``."""
    import uvicorn

    return uvicorn.Config(
        app, host=host, port=port, http=guarded_protocol(limits.header_timeout_s), **kw
    )
