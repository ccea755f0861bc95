"""Drive the synchronous engine from a background thread for an asyncio server.

The event loop never runs a forward step: requests and aborts go into a
thread-safe inbox, one thread loops ``step()`` while there is work, and each
request's :class:`~infercast.engine.sequence.TokenEvent` s come back to its own
``asyncio.Queue`` through ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from infercast.engine.sampling import SamplingParams
from infercast.engine.sequence import TokenEvent
from infercast.errors import InfercastError

log = logging.getLogger(__name__)

# A step that raises fails the requests in flight and the engine goes on; this many
# failures in a row mean the engine itself is broken: the thread stops and /health says so.
MAX_CONSECUTIVE_STEP_FAILURES = 3


class QueueFullError(Exception):
    """The bounded waiting queue is full (the server answers 429)."""


class EngineStoppedError(Exception):
    """The engine thread is not running (shutting down, or it failed): the server answers 503."""


@dataclass(frozen=True)
class _Add:
    request_id: str
    prompt_ids: list[int]
    params: SamplingParams
    arrival_s: float


class AsyncEngine:
    """Thread owner of an :class:`~infercast.engine.engine.Engine`.

    ``max_waiting`` bounds requests admitted but not yet running; one more is
    refused with :class:`QueueFullError` instead of queueing without limit.
    """

    def __init__(self, engine, max_waiting: int, on_step: Callable[[], None] | None = None):
        self.engine = engine
        self.max_waiting = max_waiting
        self.on_step = on_step
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._streams: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self._thread = threading.Thread(target=self._run, name="infercast-engine", daemon=True)
        self.error: BaseException | None = None
        self.rejected: list[str] = []  # requests the engine refused after the server accepted
        self.step_failures = 0  # steps that raised (their requests failed; the engine went on)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Abort whatever is left and join the thread (clean shutdown)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        """True while the engine thread runs and has not given up."""
        return self._thread.is_alive() and self.error is None and not self._stop.is_set()

    @property
    def num_queued(self) -> int:
        """Requests submitted and not yet running (inbox + scheduler's waiting queue)."""
        return self._inbox.qsize() + self.engine.num_waiting

    def submit(
        self, request_id: str, prompt_ids: list[int], params: SamplingParams, arrival_s: float
    ) -> asyncio.Queue:
        """Queue a request; returns the asyncio.Queue its TokenEvents arrive on."""
        with self._lock:
            if not self.alive:
                raise EngineStoppedError("the engine is not running (shutting down or failed)")
            if self.num_queued >= self.max_waiting:
                raise QueueFullError(f"waiting queue is full ({self.max_waiting} requests)")
            q: asyncio.Queue = asyncio.Queue()
            self._streams[request_id] = (asyncio.get_running_loop(), q)
            self._inbox.put(_Add(request_id, prompt_ids, params, arrival_s))
        self._wake.set()
        return q

    def abort(self, request_id: str) -> None:
        """Abort a request (client gone); its KV blocks are freed on the engine thread."""
        self._inbox.put(request_id)
        self._wake.set()

    def _run(self) -> None:
        failures = 0
        try:
            while not self._stop.is_set():
                self._drain_inbox()
                if self.engine.has_unfinished:
                    try:
                        events = self.engine.step()
                        failures = 0
                    except Exception as exc:  # noqa: BLE001 - supervised: fail its requests
                        failures += 1
                        events = self._step_failed(exc, failures)
                    self._deliver(events)
                else:
                    self._wake.wait(0.5)
                    self._wake.clear()
                self._observe()
        except BaseException as exc:  # the engine is broken: end every open stream, say so
            self.error = exc
            log.exception("infercast engine thread stopped")
        finally:
            self._shutdown()

    def _step_failed(self, exc: Exception, failures: int) -> list[TokenEvent]:
        """A step raised: fail the requests in flight (their KV freed), or give up."""
        self.step_failures += 1
        log.exception("engine step failed (%d in a row)", failures)
        if failures >= MAX_CONSECUTIVE_STEP_FAILURES:
            raise RuntimeError(f"{failures} engine steps failed in a row") from exc
        return self.engine.abort_all(error=f"engine step failed ({type(exc).__name__})")

    def _observe(self) -> None:
        if self.on_step is None:
            return
        try:
            self.on_step()
        except Exception:  # noqa: BLE001 - metrics must never stop the engine
            log.exception("server metrics update failed")

    def _shutdown(self) -> None:
        try:
            self._drain_inbox()
            self._deliver(self.engine.abort_all())
        finally:
            with self._lock:
                left = list(self._streams)
            why = "the engine stopped" if self.error is None else "the engine failed"
            self._deliver([TokenEvent(rid, None, "", "error", why) for rid in left])
            self._observe()

    def _drain_inbox(self) -> None:
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, _Add):
                try:
                    self.engine.add(item.request_id, item.prompt_ids, item.params, item.arrival_s)
                except Exception as exc:  # noqa: BLE001 - validated by the server; fail it alone
                    why = str(exc) if isinstance(exc, InfercastError) else type(exc).__name__
                    self._deliver([TokenEvent(item.request_id, None, "", "error", why)])
                    self.rejected.append(f"{item.request_id}: {why}")
            else:
                ev = self.engine.abort(item)
                if ev is not None:
                    self._deliver([ev])

    def _deliver(self, events: list[TokenEvent]) -> None:
        for ev in events:
            with self._lock:
                target = (
                    self._streams.pop(ev.request_id, None)
                    if ev.finished
                    else self._streams.get(ev.request_id)
                )
            if target is not None:
                loop, q = target
                try:
                    loop.call_soon_threadsafe(q.put_nowait, ev)
                except RuntimeError:  # event loop already closed at shutdown
                    pass
