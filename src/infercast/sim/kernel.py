"""A tiny discrete-event kernel: a heap of events ordered by (time, priority, seq).

SimPy's ordering without SimPy: ``seq`` is a per-kernel counter, so events at
the same time and priority run in the order they were scheduled and two
kernels never share state. No global clock: ``now`` lives on the kernel.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

# Priorities at equal times: arrivals are queued before a replica that finishes a
# step at that instant schedules its next one (so both simulation modes see them).
PRIO_ARRIVAL = 0
PRIO_STEP_END = 1
PRIO_KICK = 2

_heappush = heapq.heappush  # a module global: one lookup per event instead of two


class Kernel:
    """Event heap with cancellation; ``run()`` drains it."""

    def __init__(self) -> None:
        self.now = 0.0
        # Entries [time, priority, seq, fn, args]; read-only for callers (the replica peeks at the top).
        self.heap: list[list[Any]] = []
        self._seq = 0
        self.num_events = 0

    def at(self, time_s: float, priority: int, fn: Callable[..., None], *args: Any) -> list[Any]:
        """Run ``fn(*args)`` at ``time_s``; returns a handle for :meth:`cancel`."""
        if time_s < self.now:
            raise ValueError(f"event at {time_s} s scheduled in the past (now {self.now} s)")
        self._seq += 1
        entry = [time_s, priority, self._seq, fn, args]
        _heappush(self.heap, entry)
        return entry

    def has_pending(self, time_s: float, max_priority: int) -> bool:
        """True if an event at ``time_s`` with priority <= ``max_priority`` is queued."""
        heap = self.heap
        return bool(heap) and heap[0][0] == time_s and heap[0][1] <= max_priority

    @staticmethod
    def cancel(handle: list[Any]) -> None:
        """Cancel a pending event (it is skipped when popped)."""
        handle[3] = None

    def run(self) -> None:
        """Process events until none are left."""
        heap = self.heap
        pop = heapq.heappop
        count = 0  # events run, added to num_events at the end (one store per run, not per event)
        try:
            while heap:
                time_s, _, _, fn, args = pop(heap)
                if fn is None:
                    continue
                self.now = time_s
                count += 1
                if args:
                    fn(*args)
                else:  # most events (step ends) take none: a plain call is cheaper than ``fn(*())``
                    fn()
        finally:
            self.num_events += count
