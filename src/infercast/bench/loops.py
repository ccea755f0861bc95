"""The event loops the bench client and the mock server run on.

Two measured reasons (``benchmarks/bench_client_error.py``, 64 streams against
the mock on two shared cores):

- uvloop where installed: its I/O path costs about half of asyncio's; the
  client stamped first chunks ~0.3 ms sooner after the server wrote them. Its
  timers are millisecond-grained and may fire early, so nothing here times
  with ``loop.time()``: the client stamps with ``time.perf_counter`` and the
  mock checks that clock before writing.
- Request bodies written at once. On Python 3.11 aiohttp writes each request
  body (and the headers it holds back to coalesce with it) in a new task
  (``ClientRequest.write_bytes``), which runs only after everything else
  already queued on the loop. When 64 streams end together and 64 workers
  issue their next requests, each request then left 1.9-3.6 ms after its
  clock started (mean TTFT error 2.6-4.3 ms). From 3.12 aiohttp starts that
  task eagerly (``eager_start=True``); :func:`_eager_body_writes` does the
  same on 3.11, for that coroutine only (error 0.5-0.7 ms).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine, Generator
from typing import Any

_AIOHTTP_BODY_WRITER = "ClientRequest.write_bytes"


def new_event_loop(eager_body_writes: bool = False) -> asyncio.AbstractEventLoop:
    """uvloop where installed, else asyncio's own loop; optionally with eager aiohttp body
    writes."""
    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
        loop = asyncio.new_event_loop()
    if eager_body_writes and sys.version_info < (3, 12):
        loop.set_task_factory(_eager_body_writes)
    return loop


def run(coro: Coroutine[Any, Any, Any], eager_body_writes: bool = False) -> Any:
    """``asyncio.run`` on :func:`new_event_loop`."""
    with asyncio.Runner(loop_factory=lambda: new_event_loop(eager_body_writes)) as runner:
        return runner.run(coro)


def _eager_body_writes(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Future:
    """Task factory: aiohttp's body writer runs its first step now, as Python 3.12's
    ``eager_start``.

    Every other coroutine becomes an ordinary task. The first step runs in the
    caller's task and context (the writer only writes to its transport); if it
    suspends, a task resumes the same coroutine where it stopped.
    """
    if getattr(coro, "__qualname__", "") != _AIOHTTP_BODY_WRITER:
        return asyncio.Task(coro, loop=loop, **kwargs)
    done = loop.create_future()
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        done.set_result(stop.value)
        return done
    except BaseException as exc:  # noqa: BLE001 - handed to whoever awaits the writer, as a task would
        done.set_exception(exc)
        return done
    return asyncio.Task(_resume(coro, yielded), loop=loop, **kwargs)


async def _resume(coro: Any, yielded: Any) -> Any:
    return await _Resumed(coro, yielded)


class _Resumed:
    """Awaitable that continues a coroutine suspended at ``yielded`` (what it awaits)."""

    def __init__(self, coro: Any, yielded: Any) -> None:
        self.coro, self.yielded = coro, yielded

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self.coro, self.yielded
        while True:
            try:
                sent = yield value
            except BaseException as exc:  # noqa: BLE001 - cancellation and errors go to the coroutine
                step = coro.throw, exc
            else:
                step = coro.send, sent
            try:
                value = step[0](step[1])
            except StopIteration as stop:
                return stop.value
