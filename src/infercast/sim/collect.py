"""Finished requests on their way to the metrics, batched into numpy columns.

Building one :class:`~infercast.metrics.records.RequestRecord` per request and
accounting it alone costs ~11 us; a simulation of a million requests would
spend more time there than in its scheduler. The replica hands each completed
request's numbers to :class:`CompletionBuffer`, which appends them to a list
and, every ``flush_every`` requests, passes them to
:meth:`MetricsAccumulator.add_many` as arrays (same values, same order, so the
per-request columns are those of the record-by-record path). Per-token ITL
values do not pass here: the replica gives them to
:meth:`MetricsAccumulator.add_itl` per step, weighted by the number of
requests that saw each gap (see ``Replica``). A record is built only when a
sink (``--records``) wants one; then the replica passes the token times too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import numpy as np

from infercast.metrics.records import RequestRecord
from infercast.metrics.summary import MetricsAccumulator
from infercast.sched.request import Request
from infercast.sim.timeline import Timeline

FLUSH_EVERY = 4096
FLUSH_GAPS = 65_536  # gaps counted alone held before they go to the sink
ROW_WIDTH = 8  # arrival, prompt, output, first token, finish, first scheduled, last token, cached


def finished_record(
    req,
    first_scheduled_s: float | None,
    finish_s: float,
    times,
    chunk_tokens: list[int] | None = None,
) -> RequestRecord:
    """The one record of a simulated request that finished at ``finish_s``: ``times`` its token
    times (None when no sink wants them), ``chunk_tokens`` tokens per emission (speculative
    steps emit several; None: one each)."""
    return RequestRecord(
        req.request_id,
        req.arrival_s,
        req.prompt_tokens,
        req.num_output_tokens,
        times,
        chunk_tokens=chunk_tokens,
        finish_s=finish_s,
        first_scheduled_s=first_scheduled_s,
        finish_reason=req.finish_reason,
        num_preemptions=req.num_preemptions,
        cached_prompt_tokens=req.num_cached_prompt_tokens,
    )


def rejected_record(req, now: float, error: str | None) -> RequestRecord:
    """The record of a request turned away at ``now`` (never scheduled), with the reason."""
    return RequestRecord(
        req.request_id,
        req.arrival_s,
        req.prompt_tokens,
        0,
        [],
        finish_s=now,
        first_scheduled_s=req.first_scheduled_s,  # set: a disaggregated move
        finish_reason="rejected",
        error=error,
    )


class Completions(Protocol):
    """Where a replica sends completed requests (:class:`CompletionBuffer` behind the driver).

    ``add(req, finish_s, times)``: ``req`` completed with its last token at ``finish_s``; the
    request is the record (its ``first_scheduled_s``, its first token time ``token_times[0]``);
    ``times`` every token time when :attr:`wants_times`, else None. ``posts_events``: whether
    ``add`` may post an event on the kernel at this instant (a closed loop's next request, a
    prefill's KV transfer, a fleet serving its queue); when it may not, the replica starts its
    next step at once after its finishes (no arrival of this instant is still to come).
    """

    wants_times: bool
    posts_events: bool

    def add(self, req: Request, finish_s: float, times: np.ndarray | None = None) -> None: ...


class CompletionBuffer:
    """Per-request scalars of completed requests, flushed in blocks."""

    __slots__ = (
        "acc",
        "sink",
        "flush_every",
        "_flush_len",
        "_rows",
        "_reasons",
        "_plain",
        "num_done",
        "progress",
    )
    posts_events = False  # it only buffers

    def __init__(
        self,
        acc: MetricsAccumulator,
        sink: Callable[[RequestRecord], None] | None = None,
        flush_every: int = FLUSH_EVERY,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.acc, self.sink, self.flush_every = acc, sink, flush_every
        self._flush_len = flush_every * ROW_WIDTH  # ``_rows`` flushes at this length
        # Requests done (the driver counts its rejections here too); ``progress(num_done)`` every
        # 1,000.
        self.num_done = 0
        self.progress = progress
        self._rows: list[float] = []  # ROW_WIDTH numbers per request, flat (one array at flush)
        self._reasons: list[str] = []
        self._plain = True  # every finish reason so far is "length"

    @property
    def wants_times(self) -> bool:
        """True when every token time is needed (a sink builds records)."""
        return self.sink is not None

    def add(self, req, finish_s: float, times: np.ndarray | None = None) -> None:
        """A completed request whose last token came at ``finish_s``; ``times`` if
        :attr:`wants_times`."""
        reason = req.finish_reason
        first_scheduled_s = req.first_scheduled_s
        if self.sink is not None:
            self.sink(finished_record(req, first_scheduled_s, finish_s, times))
        rows = self._rows
        rows += (
            req.arrival_s,
            req.prompt_tokens,
            req.num_output_tokens,
            req.token_times[0],
            finish_s,
            math.nan if first_scheduled_s is None else first_scheduled_s,
            finish_s,
            req.num_cached_prompt_tokens,
        )
        self._reasons.append(reason)
        if reason != "length":
            self._plain = False
        if len(rows) >= self._flush_len:
            self.flush()
        self.num_done += 1
        if self.progress is not None and self.num_done % 1000 == 0:
            self.progress(self.num_done)

    def flush(self) -> None:
        """Hand everything buffered to the accumulator."""
        if not self._rows:
            return
        c = np.array(self._rows, dtype=np.float64).reshape(-1, ROW_WIDTH)
        self.acc.add_many(
            c[:, 0],
            c[:, 1].astype(np.int64),
            c[:, 2].astype(np.int64),
            c[:, 3],
            c[:, 4],
            c[:, 6],
            c[:, 5],
            None if self._plain else self._reasons,
            c[:, 7].astype(np.int64),
        )
        self._rows, self._reasons, self._plain = [], [], True


class BufferedDriver:
    """A run's driver whose completed requests go through ``completions`` (a CompletionBuffer)."""

    completions: CompletionBuffer  # set by simulate() before the kernel runs
    posts_events = True  # a closed loop: a completion sends the client's next request

    @property
    def num_done(self) -> int:
        """Finished or rejected requests (counted by the completion buffer)."""
        return self.completions.num_done

    @property
    def wants_times(self) -> bool:
        return self.completions.wants_times

    def add(self, req, finish_s: float, times: np.ndarray | None = None) -> None:
        """A completed request of a closed loop: batched for the metrics, then
        :meth:`completed`. Open loops hand completions to ``completions`` directly (one call
        less per request)."""
        self.completions.add(req, finish_s, times)
        self.completed(req)

    def completed(self, req) -> None:
        """What a closed loop does when ``req`` completes (a client sends its next)."""
        raise NotImplementedError


class GapTally:
    """Per-token ITL values of one replica, counted per step instead of per request.

    Every step that runs decodes runs all of them, so the gap between two
    consecutive decode steps (timeline entries) is the ITL of every request
    that had a token at both: the step's decoding requests minus those whose
    previous token was not on the timeline (a first token from a step without
    decodes: :meth:`off`; their gap to that entry is counted alone). Other gaps
    (a first token after a recompute) come through :meth:`explicit`. Same
    multiset of values as each request's own token-time differences, in (value,
    count) pairs: a step's gap is handled once, not once per request.

    The replica appends each timeline entry's number of decoding requests to
    :attr:`counts` (a list's own ``append``: no Python frame per step); the
    gaps themselves are taken from the timeline with numpy at :meth:`flush`,
    which must run before the timeline drops entries and at the end of a run.
    """

    __slots__ = ("sink", "timeline", "counts", "start", "last", "pending", "vals")

    def __init__(self, sink: Callable[[np.ndarray, np.ndarray], None], timeline: Timeline) -> None:
        self.sink = sink
        self.timeline = timeline
        # Decoding requests in each timeline entry from absolute index ``start`` on; the same list
        # object for the whole run (the replica holds it), emptied by ``flush``.
        self.counts: list[int] = []
        self.start = timeline.size()
        self.last = math.nan  # time of the entry before ``start``
        # (previous token's time, absolute index of the entry of the next token, request id) of
        # requests whose previous token is not on the timeline, in the order they came.
        self.pending: list[tuple[float, int, str]] = []
        self.vals: list[float] = []  # gaps counted alone, since the last flush

    def explicit(self, gap_s: float) -> None:
        """A gap seen by one request, known now."""
        self.vals.append(gap_s)
        if len(self.vals) >= FLUSH_GAPS:
            self.flush()

    def off(self, request_id: str, t: float) -> None:
        """A request got a token at ``t``, not on the timeline; its next is the next entry."""
        self.pending.append((t, self.timeline.size(), request_id))

    def drop(self, request_id: str) -> None:
        """The request stops decoding (preempted): its gap to an entry still to come is none."""
        pending, size = self.pending, self.timeline.size()
        i = len(pending) - 1
        while i >= 0 and pending[i][1] >= size:  # those still to come are the last ones
            if pending[i][2] == request_id:
                del pending[i]
                return
            i -= 1

    def flush(self) -> None:
        """Hand every gap up to the timeline's last entry to the sink."""
        counts, vals = self.counts, self.vals
        n = len(counts)
        if n:
            lo = self.start - self.timeline.base
            times = np.array(self.timeline[lo : lo + n], dtype=np.float64)
            weights = np.array(counts, dtype=np.int64)
            end = self.start + n
            later = []
            for prev, idx, rid in self.pending:
                if idx < end:
                    vals.append(float(times[idx - self.start]) - prev)
                    weights[idx - self.start] -= 1
                else:
                    later.append((prev, idx, rid))
            self.pending = later
            gaps = np.diff(times, prepend=self.last)
            keep = weights > 0
            self.sink(gaps[keep], weights[keep])
            self.last = float(times[-1])
            self.start = end
            counts.clear()
        if vals:
            self.sink(np.array(vals, dtype=np.float64), np.ones(len(vals), dtype=np.int64))
            vals.clear()
