"""Finished requests on their way to the metrics, batched into numpy columns.

Building one :class:`~infercast.metrics.records.RequestRecord` per request and
accounting it alone costs ~11 us; a simulation of a million requests spends
more time there than in its scheduler. The replica hands each completed
request's numbers to :class:`CompletionBuffer`, which appends them to plain
lists and, every ``flush_every`` requests, passes them to
:meth:`MetricsAccumulator.add_many` as arrays (same values, same order, so the
summary is the same as record by record). A record is built only when a sink
(``--records``) wants one.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from infercast.metrics.records import RequestRecord
from infercast.metrics.summary import MetricsAccumulator

FLUSH_EVERY = 4096


class CompletionBuffer:
    """Per-request scalars and token times of completed requests, flushed in blocks."""

    __slots__ = ("acc", "sink", "flush_every", "_rows", "_times", "_reasons", "_plain")

    def __init__(self, acc: MetricsAccumulator, sink: Callable[[RequestRecord], None] | None = None,
                 flush_every: int = FLUSH_EVERY) -> None:
        self.acc, self.sink, self.flush_every = acc, sink, flush_every
        self._rows: list[tuple[float, int, float, float, int]] = []
        self._times: list[np.ndarray] = []
        self._reasons: list[str] = []
        self._plain = True  # every finish reason so far is "length"

    def add(self, req, first_scheduled_s: float | None, times: np.ndarray, finish_s: float) -> None:
        """A completed request: ``times`` holds its token times (at least one)."""
        reason = req.finish_reason
        if self.sink is not None:
            self.sink(RequestRecord(
                req.request_id, req.arrival_s, req.prompt_tokens, req.num_output_tokens, times,
                finish_s=finish_s, first_scheduled_s=first_scheduled_s, finish_reason=reason,
                num_preemptions=req.num_preemptions, cached_prompt_tokens=req.num_cached_prompt_tokens))
        self._rows.append((req.arrival_s, req.prompt_tokens, finish_s,
                           math.nan if first_scheduled_s is None else first_scheduled_s, times.size))
        self._times.append(times)
        self._reasons.append(reason)
        if reason != "length":
            self._plain = False
        if len(self._rows) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Hand everything buffered to the accumulator."""
        if not self._rows:
            return
        cols = np.array(self._rows, dtype=np.float64)
        times = np.concatenate(self._times)
        self.acc.add_many(cols[:, 0], cols[:, 1].astype(np.int64), cols[:, 2], cols[:, 3], times,
                          cols[:, 4].astype(np.int64), None if self._plain else self._reasons)
        self._rows, self._times, self._reasons, self._plain = [], [], [], True
