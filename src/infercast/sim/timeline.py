"""Per-replica times of decode steps, so a request's token times are one slice.

Every step in which decoding requests run includes *all* of them (continuous
and chunked policies schedule every running decode; ``max_num_batched_tokens
>= max_num_seqs`` is enforced). So a request that started decoding when the
timeline held ``i`` entries got its next tokens at entries ``i, i+1, ...``; its
token times are a slice, and the simulator never stores per-token times per
request. Entries no active request still needs are dropped, so memory follows
the active requests, not the run length.

The timeline *is* a Python list of the held entries (a subclass with a moving
base): the simulator appends one per step and a few per closed-form segment
with the list's own ``append``/``extend`` (no Python frame per step; a list
also takes them ~7x faster than writes into a numpy array), and reads
``len(timeline)`` for the entries held. Reads, a slice per finishing or
preempted request, are rarer.
"""

from __future__ import annotations

import numpy as np


class Timeline(list[float]):
    """Append-only float times, oldest first, with a moving base (absolute indices).

    ``len(timeline)`` is the number of entries held; the entry with absolute
    index ``i`` is ``timeline[i - timeline.base]``. Only :meth:`drop_before`
    removes entries.
    """

    __slots__ = ("base",)

    def __init__(self) -> None:
        super().__init__()
        self.base = 0  # absolute index of the oldest held entry (read-only for callers)

    def size(self) -> int:
        """Absolute index the next appended entry gets (a method, not a property: a property read
        is a C-level call into Python, ~5x the instructions of a Python-to-Python call in 3.11)."""
        return self.base + len(self)

    def slice(self, start: int, count: int) -> np.ndarray:
        """Entries ``start .. start+count-1`` (absolute indices), as a new array."""
        lo = start - self.base
        if lo < 0 or lo + count > len(self):
            raise IndexError(f"timeline slice [{start}, {start + count}) outside held range")
        return np.array(self[lo : lo + count], dtype=np.float64)

    def drop_before(self, start: int) -> None:
        """Forget entries before absolute index ``start`` (no active request needs them)."""
        k = min(max(0, start - self.base), len(self))
        if k:
            del self[:k]
            self.base += k
