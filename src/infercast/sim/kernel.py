"""A tiny discrete-event kernel: a heap of events ordered by (time, priority, seq).

SimPy's ordering without SimPy: ``seq`` is a per-kernel counter, so events at
the same time and priority run in the order they were scheduled and two
kernels never share state. No global clock: ``now`` lives on the kernel.

An open-loop run's arrivals need not pass through the heap: :meth:`Kernel.run`
takes them as a time-ordered stream and merges it with the heap, an arrival
first at equal times (``PRIO_ARRIVAL`` is the lowest priority), so a run of
millions of requests keeps a heap of a few entries (the replicas' step ends).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import Any

# Priorities at equal times: arrivals are queued before a replica that finishes a
# step at that instant schedules its next one (so both simulation modes see them).
PRIO_ARRIVAL = 0
PRIO_STEP_END = 1
PRIO_KICK = 2

_INF = float("inf")
_heappush = heapq.heappush


def _no_arrival(item: Any) -> None:
    raise ValueError("Kernel.run got arrivals but no on_arrival to hand them to")


class Kernel:
    """Event heap with cancellation; ``run()`` drains it."""

    def __init__(self) -> None:
        self.now = 0.0
        # Entries [time, priority, seq, fn, args]; fn None: cancelled.
        self.heap: list[list[Any]] = []
        self._seqs = itertools.count(1)  # the entries' ``seq``: 1, 2, ... (a C iterator)
        self.num_events = 0
        # Time of the next arrival of the stream given to ``run`` (inf when none is waiting).
        self.arrival_s = _INF

    def at(self, time_s: float, priority: int, fn: Callable[..., None], *args: Any) -> list[Any]:
        """Run ``fn(*args)`` at ``time_s``; returns a handle for :meth:`cancel`."""
        if time_s < self.now:
            raise ValueError(f"event at {time_s} s scheduled in the past (now {self.now} s)")
        entry = [time_s, priority, next(self._seqs), fn, args]
        _heappush(self.heap, entry)
        return entry

    def after_arrivals(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` once every arrival of this instant has run: now when none is still to
        come (streamed or queued), else as a ``PRIO_KICK`` event at this instant, after them."""
        now, heap = self.now, self.heap
        if self.arrival_s == now or (heap and heap[0][0] == now and heap[0][1] <= PRIO_ARRIVAL):
            self.at(now, PRIO_KICK, fn)
        else:
            fn()

    @staticmethod
    def cancel(handle: list[Any]) -> None:
        """Cancel a pending event (it is skipped when popped)."""
        handle[3] = None

    def run(
        self, arrivals: Iterator[Any] | None = None, on_arrival: Callable[[Any], None] | None = None
    ) -> None:
        """Process events until none are left.

        ``arrivals`` (optional) yields objects with an ``arrival_s`` in time order;
        ``on_arrival(item)`` runs at that time, before any heap event of the same instant.
        While an event runs, :attr:`arrival_s` is the next arrival's time (see
        :meth:`after_arrivals`).
        """
        heap, pop = self.heap, heapq.heappop
        stream = arrivals if arrivals is not None else iter(())
        deliver = on_arrival if on_arrival is not None else _no_arrival
        item = next(stream, None)
        ta = self.arrival_s = _INF if item is None else item.arrival_s
        count = 0  # events run, added to num_events at the end (one store per run, not per event)
        try:
            while True:
                if heap and heap[0][0] < ta:
                    time_s, _, _, fn, args = pop(heap)
                    if fn is None:
                        continue
                    self.now = time_s
                    count += 1
                    if args:
                        fn(*args)
                    else:  # most events (step ends) take none: a plain call beats ``fn(*())``
                        fn()
                elif ta != _INF:  # the arrival (ties too: it sorts first)
                    cur = item
                    item = next(stream, None)
                    nxt = self.arrival_s = _INF if item is None else item.arrival_s
                    if nxt < ta:
                        raise ValueError(
                            f"arrival at {nxt} s after one at {ta} s: "
                            "the stream must be in time order"
                        )
                    self.now = ta
                    count += 1
                    deliver(cur)
                    ta = nxt
                else:
                    break
        finally:
            self.num_events += count
            self.arrival_s = _INF
