"""A tiny discrete-event kernel: a heap of events ordered by (time, priority, seq).

SimPy's ordering without SimPy: ``seq`` is a per-kernel counter, so events at
the same time and priority run in the order they were scheduled and two
kernels never share state. No global clock: ``now`` lives on the kernel.

:meth:`Kernel.run_one` is the same ordering without the heap for the usual run
(one replica, an open-loop arrival stream): then at most two events are ever
pending, the next arrival and the replica's one step end (or kick), and a
comparison orders them.
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
_INF = float("inf")


class Kernel:
    """Event heap with cancellation; ``run()`` drains it."""

    def __init__(self) -> None:
        self.now = 0.0
        # Entries [time, priority, seq, fn, args]; read-only for callers (the replica peeks at the top).
        self.heap: list[list[Any]] = []
        self._seq = 0
        self.num_events = 0
        # Time of the next arrival waiting outside the heap (only under ``run_one``; inf otherwise).
        self.arrival_s = _INF

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

    def run_one(self, owner, stream, on_arrival: Callable[[Any], None]) -> None:
        """Run ``owner``'s events and an arrival stream in the order :meth:`run` would, without the heap.

        ``owner`` (a replica) keeps its one pending event itself: ``next_s`` (inf when none) and
        ``next_fn``, a step end (``PRIO_STEP_END``) or a kick (``PRIO_KICK``): it posts there instead
        of calling :meth:`at`, and moves ``next_s`` to reschedule. ``stream`` yields arrivals (objects
        with an ``arrival_s``, e.g. requests) in time order; ``on_arrival(item)`` runs at that time. An
        arrival at the same instant as the owner's event runs first (``PRIO_ARRIVAL`` is lowest), and
        :attr:`arrival_s` holds the next arrival's time while an event runs (the owner's check for a
        same-instant arrival, as :meth:`has_pending` would answer). Nothing may use :meth:`at` meanwhile.
        """
        inf = _INF
        item = next(stream, None)
        ta = inf if item is None else item.arrival_s
        self.arrival_s = ta
        count = 0
        try:
            while True:
                te = owner.next_s
                if ta <= te:  # the arrival (ties too: it sorts first)
                    if ta == inf:
                        break  # nothing pending
                    cur = item
                    item = next(stream, None)
                    self.arrival_s = nxt = inf if item is None else item.arrival_s
                    if nxt < ta:
                        raise ValueError(f"arrival at {nxt} s after one at {ta} s: the stream must be in time order")
                    self.now = ta
                    count += 1
                    on_arrival(cur)
                    ta = nxt
                else:
                    self.now = te
                    owner.next_s = inf
                    count += 1
                    owner.next_fn()
        finally:
            self.num_events += count
            self.arrival_s = inf
        if self.heap:
            raise RuntimeError("an event was scheduled with at() during run_one(); use run()")
