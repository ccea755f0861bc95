"""Per-replica times of decode steps, so a request's token times are one slice.

Every step in which decoding requests run includes *all* of them (continuous
and chunked policies schedule every running decode; ``max_num_batched_tokens
>= max_num_seqs`` is enforced). So a request that started decoding when the
timeline held ``i`` entries got its next tokens at entries ``i, i+1, ...``; its
token times are a slice, and the simulator never stores per-token times per
request. Entries no active request still needs are dropped, so memory follows
the active requests, not the run length.

Entries are held in a Python list: the simulator appends one per step and a
few per closed-form segment, and a list takes those ~7x faster than writes into
a numpy array (reads, a slice per finishing or preempted request, are rarer).
"""

from __future__ import annotations

import numpy as np


class Timeline:
    """Append-only float times with a moving base (absolute indices)."""

    __slots__ = ("data", "base")

    def __init__(self, capacity: int = 0) -> None:
        del capacity  # a list grows by itself; kept for callers that pass a size hint
        # The held entries, oldest first (read-only for callers; ``drop_before`` removes entries).
        self.data: list[float] = []
        self.base = (
            0  # absolute index of data[0] (read-only for callers: ``size`` is base + len(data))
        )

    @property
    def size(self) -> int:
        """Absolute index the next appended entry gets."""
        return self.base + len(self.data)

    def append(self, t: float) -> None:
        self.data.append(t)

    def extend(self, times: list[float] | np.ndarray) -> None:
        self.data.extend(times.tolist() if isinstance(times, np.ndarray) else times)

    def slice(self, start: int, count: int) -> np.ndarray:
        """Entries ``start .. start+count-1`` (absolute indices), as a new array."""
        lo = start - self.base
        if lo < 0 or lo + count > len(self.data):
            raise IndexError(f"timeline slice [{start}, {start + count}) outside held range")
        return np.array(self.data[lo : lo + count], dtype=np.float64)

    def drop_before(self, start: int) -> None:
        """Forget entries before absolute index ``start`` (no active request needs them)."""
        k = min(max(0, start - self.base), len(self.data))
        if k:
            del self.data[:k]
            self.base += k

    @property
    def held(self) -> int:
        return len(self.data)
