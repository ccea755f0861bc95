"""Bounded time series of a run: batch size, KV usage, queue and preemptions over time.

Sampled at step starts, at most one point per ``interval_s`` per replica; when
``max_points`` are held, every other point is dropped and the interval doubles,
so memory stays bounded however long the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from infercast.sim.replica import Replica

FIELDS = ("time_s", "replica", "batch_size", "kv_usage", "num_waiting", "num_preemptions")


class TimeSeries:
    """Decimating recorder of :data:`FIELDS` (see module doc)."""

    def __init__(self, max_points: int = 4096, interval_s: float = 0.0) -> None:
        self.max_points = max_points
        self.interval_s = interval_s
        self._rows: list[tuple[float, int, int, float, int, int]] = []
        self._last: dict[int, float] = {}

    def observe(
        self, now: float, replica: Replica, batch_size: int, kv_usage: float
    ) -> tuple[float, float]:
        """Sample at a step start unless this replica's last sample is under ``interval_s`` old
        (``kv_usage``: its ``BlockManager.usage`` now, which the replica has computed).

        Returns (that replica's last sample time, the interval now): a caller may skip calls
        while ``now - last < interval`` (the interval only grows, so the skip stays valid).
        """
        index = replica.index
        last = self._last.get(index)
        if last is not None and now - last < self.interval_s:
            return last, self.interval_s
        self._last[index] = now
        s, rows = replica.sched, self._rows
        rows.append((now, index, batch_size, kv_usage, len(s.waiting), s.num_preemptions))
        if len(rows) >= self.max_points:
            self._rows = self._rows[::2]
            span = self._rows[-1][0] - self._rows[0][0]
            self.interval_s = max(2 * self.interval_s, span / self.max_points)
        return now, self.interval_s

    def arrays(self) -> dict[str, np.ndarray]:
        """Column name -> array, in time order."""
        cols = list(zip(*self._rows, strict=True)) if self._rows else [()] * len(FIELDS)
        return {name: np.asarray(col) for name, col in zip(FIELDS, cols, strict=True)}
