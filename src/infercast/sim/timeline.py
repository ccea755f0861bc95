"""Per-replica times of decode steps, so a request's token times are one slice.

Every step in which decoding requests run includes *all* of them (continuous
and chunked policies schedule every running decode; ``max_num_batched_tokens
>= max_num_seqs`` is enforced). So a request that started decoding when the
timeline held ``i`` entries got its next tokens at entries ``i, i+1, ...``; its
token times are a slice, and the simulator never stores per-token times per
request. Entries no active request still needs are dropped, so memory follows
the active requests, not the run length.
"""

from __future__ import annotations

import numpy as np


class Timeline:
    """Append-only float64 times with a moving base (absolute indices)."""

    __slots__ = ("_data", "_n", "_base")

    def __init__(self, capacity: int = 4096) -> None:
        self._data = np.empty(capacity, dtype=np.float64)
        self._n = 0  # entries stored
        self._base = 0  # absolute index of _data[0]

    @property
    def size(self) -> int:
        """Absolute index the next appended entry gets."""
        return self._base + self._n

    def append(self, t: float) -> None:
        if self._n == self._data.size:
            self._grow(1)
        self._data[self._n] = t
        self._n += 1

    def extend(self, times: list[float] | np.ndarray) -> None:
        k = len(times)
        if self._n + k > self._data.size:
            self._grow(k)
        self._data[self._n : self._n + k] = times
        self._n += k

    def slice(self, start: int, count: int) -> np.ndarray:
        """Entries ``start .. start+count-1`` (absolute indices), as a view."""
        lo = start - self._base
        if lo < 0 or lo + count > self._n:
            raise IndexError(f"timeline slice [{start}, {start + count}) outside held range")
        return self._data[lo : lo + count]

    def drop_before(self, start: int) -> None:
        """Forget entries before absolute index ``start`` (no active request needs them)."""
        k = min(max(0, start - self._base), self._n)
        if k:
            self._data[: self._n - k] = self._data[k : self._n]
            self._n -= k
            self._base += k

    @property
    def held(self) -> int:
        return self._n

    def _grow(self, extra: int) -> None:
        new = np.empty(max(2 * self._data.size, self._n + extra), dtype=np.float64)
        new[: self._n] = self._data[: self._n]
        self._data = new
