"""The fleet's router: the serving replica with the least load, found in a heap.

The rule is ``sim/router.py``'s least-tokens (fewest outstanding tokens, ties to the lowest
index), with each replica's outstanding tokens divided by its relative capacity (a mixed
fleet's replicas differ in speed). A fleet's serving set changes all day (replicas start,
drain, come back), and a scan of every replica per arrival costs O(replicas): at 200
replicas the scan dominates the day. Here the keys live in a binary heap (``heapq``), updated
lazily: every change pushes the replica's new key; a popped entry whose key is no longer the
replica's (or whose replica no longer serves) is dropped; when stale entries outnumber the
live ones the heap is rebuilt. A pick is O(log n) amortized, and picks the same replica as
the scan (``tests/fleet/test_router.py``).
"""

from __future__ import annotations

import heapq


class LeastLoaded:
    """Serving replicas by index and key (load); :meth:`best` is the least key, lowest index."""

    __slots__ = ("_heap", "_keys")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._keys: dict[int, float] = {}  # the serving replicas' current keys

    def __len__(self) -> int:
        return len(self._keys)

    def update(self, index: int, key: float) -> None:
        """Replica ``index`` serves with load ``key`` (added, or its load changed)."""
        if self._keys.get(index) == key:
            return
        self._keys[index] = key
        heap = self._heap
        heapq.heappush(heap, (key, index))
        if len(heap) > 2 * len(self._keys) + 64:  # mostly stale: rebuild (amortized O(1))
            self._heap = [(k, i) for i, k in self._keys.items()]
            heapq.heapify(self._heap)

    def remove(self, index: int) -> None:
        """Replica ``index`` no longer serves (draining or stopped)."""
        self._keys.pop(index, None)

    def best(self) -> int | None:
        """The serving replica with the least key (ties: the lowest index); None if none serves."""
        heap, keys = self._heap, self._keys
        while heap:
            key, index = heap[0]
            if keys.get(index) == key:
                return index
            heapq.heappop(heap)
        return None
