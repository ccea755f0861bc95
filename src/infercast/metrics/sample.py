"""A bounded-memory sample of non-negative latencies: exact, then a log histogram.

Per-token ITL values are the one quantity whose count grows with the output
length (a million requests of 200 tokens are 2e8 values), so they cannot all be
kept. :class:`BoundedSample` keeps every value exactly up to ``exact_cap``
values (8 bytes each); past that it folds them, and every later value, into a
fixed histogram whose bin edges grow by a factor ``HIST_RATIO`` = 1.01.

Error bound once folded (documented in ``docs/metrics.md``): a percentile is
reported as the geometric centre of the bin that holds its rank, so for values
in [``HIST_MIN_S``, ``HIST_MAX_S``] its relative error is at most
``sqrt(1.01) - 1`` = 0.499 % (plus the rank step of one value). Values below
``HIST_MIN_S`` (0.1 us) share one bin reported as 0, an absolute error
under 0.1 us; values above ``HIST_MAX_S`` are reported as the largest value
seen. The mean, standard deviation, minimum and maximum stay exact (running
sums), whichever mode the sample is in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

HIST_RATIO = 1.01
HIST_MIN_S = 1e-7
HIST_MAX_S = 1e4
# Bin i >= 1 covers [MIN * RATIO**(i-1), MIN * RATIO**i); bin 0 is [0, MIN); the last is overflow.
_NUM_LOG_BINS = math.ceil(math.log(HIST_MAX_S / HIST_MIN_S) / math.log(HIST_RATIO))
_LOG_RATIO = math.log(HIST_RATIO)
# Relative error of a folded percentile inside [HIST_MIN_S, HIST_MAX_S].
HIST_REL_ERROR = math.sqrt(HIST_RATIO) - 1.0
DEFAULT_EXACT_CAP = 1_000_000  # 8 MB of float64 per sample before folding
FLUSH_BLOCK = (
    65_536  # values per flush: 512 KB temporaries fit in L2; 1M-value ones are page-faulted
)


class BoundedSample:
    """Weighted non-negative values with exact moments and bounded-memory percentiles.

    ``add(values, weights)`` appends ``values[i]`` ``weights[i]`` times. Adds are
    buffered and flushed in blocks so that millions of tiny adds (one per
    request) stay cheap.
    """

    __slots__ = (
        "_cap",
        "_exact",
        "_num_exact",
        "_hist",
        "_pending",
        "_num_pending",
        "_count",
        "_mean",
        "_m2",
        "_min",
        "_max",
    )

    def __init__(self, exact_cap: int = DEFAULT_EXACT_CAP) -> None:
        if exact_cap < 0:
            raise ValueError(f"exact_cap={exact_cap} must be >= 0")
        self._cap = exact_cap
        self._exact = np.empty(0, dtype=np.float64)
        self._num_exact = 0
        self._hist: np.ndarray | None = None  # int64 counts once folded
        self._pending: list[tuple[np.ndarray, np.ndarray | None]] = []
        self._num_pending = 0
        self._count = 0
        self._mean = 0.0  # running mean and sum of squared deviations (Chan et al. 1979 merge)
        self._m2 = 0.0
        self._min = math.inf
        self._max = -math.inf

    @property
    def count(self) -> int:
        """Number of values added (weights included)."""
        self._flush()
        return self._count

    @property
    def is_exact(self) -> bool:
        """True while every value is kept (percentiles exact, no histogram error)."""
        self._flush()
        return self._hist is None

    def add(
        self,
        values: Sequence[float] | np.ndarray,
        weights: Sequence[int] | np.ndarray | None = None,
    ) -> None:
        """Add each of ``values`` (seconds, >= 0) ``weights[i]`` times (default once)."""
        v = np.asarray(values, dtype=np.float64)
        if v.size == 0:
            return
        w = None if weights is None else np.asarray(weights, dtype=np.int64)
        if (
            v.size > FLUSH_BLOCK and w is None
        ):  # flush blocks whose temporaries stay in cache (8x faster)
            for i in range(0, v.size, FLUSH_BLOCK):
                self.add(v[i : i + FLUSH_BLOCK])
            return
        self._pending.append((v, w))
        self._num_pending += v.size if w is None else int(w.sum())
        if self._num_pending >= FLUSH_BLOCK:
            self._flush()

    def add_weighted(
        self, values: Sequence[float] | np.ndarray, weights: Sequence[int] | np.ndarray
    ) -> None:
        """``add(values, weights)`` without expanding the weights once the sample is folded.

        For many repeats of few values (the simulator's per-step ITL times the
        number of requests in the step): moments from weighted sums (equal to
        :meth:`add`'s up to rounding), histogram counts by weighted bincount.
        """
        v = np.asarray(values, dtype=np.float64)
        w = np.asarray(weights, dtype=np.int64)
        keep = w > 0
        v, w = v[keep], w[keep]
        if not v.size:
            return
        self._flush()
        n_b = int(w.sum())
        if self._hist is None and self._num_exact + n_b <= self._cap:
            self.add(v, w)  # still exact: store every value
            self._flush()
            return
        wf = w.astype(np.float64)
        mean_b = float((v * wf).sum()) / n_b
        dev = v - mean_b
        self._merge_moments(
            n_b, mean_b, float((dev * dev * wf).sum()), float(v.min()), float(v.max())
        )
        self._fold()
        self._bin(v, wf)

    def _flush(self) -> None:
        if not self._pending:
            return
        vals = np.concatenate([v if w is None else np.repeat(v, w) for v, w in self._pending])
        self._pending.clear()
        self._num_pending = 0
        mean_b = float(vals.mean())
        dev = vals - mean_b
        m2_b = float(
            (dev * dev).sum()
        )  # not np.dot: BLAS threads spin on shared cores (20 ms here)
        self._merge_moments(vals.size, mean_b, m2_b, float(vals.min()), float(vals.max()))
        if self._hist is None and self._num_exact + vals.size <= self._cap:
            self._append_exact(vals)
            return
        self._fold()
        self._bin(vals)

    def _merge_moments(self, n_b: int, mean_b: float, m2_b: float, lo: float, hi: float) -> None:
        n_a = self._count
        delta = mean_b - self._mean
        self._count = n_a + n_b
        self._mean += delta * n_b / self._count
        self._m2 += m2_b + delta * delta * n_a * n_b / self._count
        self._min = min(self._min, lo)
        self._max = max(self._max, hi)

    def _fold(self) -> None:
        """Switch to the histogram (once): everything kept exactly so far is binned."""
        if self._hist is None:
            self._hist = np.zeros(_NUM_LOG_BINS + 2, dtype=np.int64)
            self._bin(self._exact[: self._num_exact])
            self._exact = np.empty(0, dtype=np.float64)
            self._num_exact = 0

    def _append_exact(self, vals: np.ndarray) -> None:
        need = self._num_exact + vals.size
        if need > self._exact.size:
            grown = np.empty(
                min(self._cap, max(need, 2 * self._exact.size, 1024)), dtype=np.float64
            )
            grown[: self._num_exact] = self._exact[: self._num_exact]
            self._exact = grown
        self._exact[self._num_exact : need] = vals
        self._num_exact = need

    def _bin(self, vals: np.ndarray, weights: np.ndarray | None = None) -> None:
        idx = np.zeros(vals.size, dtype=np.int64)
        pos = vals >= HIST_MIN_S
        idx[pos] = 1 + np.floor(np.log(vals[pos] / HIST_MIN_S) / _LOG_RATIO).astype(np.int64)
        np.minimum(idx, _NUM_LOG_BINS + 1, out=idx)
        if weights is None:
            self._hist += np.bincount(idx, minlength=self._hist.size)
        else:  # float64 sums of integer weights are exact below 2**53
            self._hist += np.rint(
                np.bincount(idx, weights=weights, minlength=self._hist.size)
            ).astype(np.int64)

    @property
    def min(self) -> float:
        """Smallest value (inf when empty)."""
        self._flush()
        return self._min

    @property
    def max(self) -> float:
        """Largest value (-inf when empty)."""
        self._flush()
        return self._max

    @property
    def mean(self) -> float:
        """Exact mean, NaN when empty."""
        self._flush()
        return self._mean if self._count else math.nan

    @property
    def std(self) -> float:
        """Exact population standard deviation (numpy's default, as vLLM reports), NaN when
        empty."""
        self._flush()
        if not self._count:
            return math.nan
        return math.sqrt(self._m2 / self._count)

    def percentile(self, q: float) -> float:
        """The q-th percentile (0..100): exact (numpy 'linear') or within HIST_REL_ERROR."""
        self._flush()
        if not self._count:
            return math.nan
        if self._hist is None:
            return float(np.percentile(self._exact[: self._num_exact], q))
        rank = q / 100.0 * (self._count - 1)  # numpy's linear-method rank, 0-based
        b = int(np.searchsorted(np.cumsum(self._hist), math.floor(rank) + 1))
        if b == 0:
            return 0.0
        if b > _NUM_LOG_BINS:
            return self._max
        centre = HIST_MIN_S * HIST_RATIO ** (b - 0.5)
        return min(max(centre, self._min), self._max)

    def merged(self, other: BoundedSample) -> BoundedSample:
        """A new sample holding both (exact if the union fits under this one's cap)."""
        self._flush()
        other._flush()
        if not other._count:
            return self
        if not self._count:
            return other
        out = BoundedSample(self._cap)
        for s in (self, other):
            if s._hist is None:
                out.add(s._exact[: s._num_exact])
        out._flush()
        hists = [s._hist for s in (self, other) if s._hist is not None]
        if hists:
            if out._hist is None:  # fold what is exact so far, then add the histograms
                out._hist = np.zeros(_NUM_LOG_BINS + 2, dtype=np.int64)
                out._bin(out._exact[: out._num_exact])
                out._exact, out._num_exact = np.empty(0, dtype=np.float64), 0
            for h in hists:
                out._hist += h
        # exact moments of the union (Chan et al. merge), whatever the mode
        n = self._count + other._count
        delta = other._mean - self._mean
        out._count = n
        out._mean = self._mean + delta * other._count / n
        out._m2 = self._m2 + other._m2 + delta * delta * self._count * other._count / n
        out._min, out._max = min(self._min, other._min), max(self._max, other._max)
        return out

    def values(self) -> np.ndarray:
        """The exact values (for plots); raises once the sample has been folded."""
        self._flush()
        if self._hist is not None:
            raise ValueError("sample folded into a histogram; raise exact_cap to keep values")
        return self._exact[: self._num_exact].copy()
