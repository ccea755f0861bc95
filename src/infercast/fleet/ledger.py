"""Per-tick accounting of a fleet day: what arrived, finished, met the SLO; the fleet's state.

Tick k covers ``[k * tick_s, (k + 1) * tick_s)``: arrivals count in the tick they arrive,
finished and rejected requests (and their tokens) in the tick they finish. A request meets
the SLO when it completed with TTFT <= ``slo_ttft_s`` and TPOT <= ``slo_tpot_s`` (a limit
not given always holds; a one-token output has no TPOT); a rejected request never does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from infercast.metrics.records import RequestRecord


@dataclass(frozen=True)
class MinuteRow:
    """The fleet as observed at the end of one tick."""

    t_s: float
    ready: int
    starting: int
    draining: int
    waiting: int  # router queue + replicas' queues
    router_queue: int
    running: int
    kv_usage: float
    utilization: float
    arrival_rate: float
    bottleneck: str


@dataclass
class _Bin:
    arrived: int = 0
    completed: int = 0
    rejected: int = 0
    slo_met: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class Ledger:
    tick_s: float
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    bins: dict[int, _Bin] = field(default_factory=dict)
    rows: list[MinuteRow] = field(default_factory=list)
    reject_reasons: Counter = field(default_factory=Counter)

    def _bin(self, t: float) -> _Bin:
        k = int(t // self.tick_s)
        b = self.bins.get(k)
        if b is None:
            b = self.bins[k] = _Bin()
        return b

    def arrival(self, t: float) -> None:
        self._bin(t).arrived += 1

    def meets(self, rec: RequestRecord) -> bool:
        if not rec.ok:
            return False
        ttft, tpot = rec.ttft_s, rec.tpot_s
        if self.slo_ttft_s is not None and (ttft is None or ttft > self.slo_ttft_s):
            return False
        return self.slo_tpot_s is None or tpot is None or tpot <= self.slo_tpot_s

    def completed(
        self, finish_s: float, prompt: int, output: int, ttft_s: float, tpot_s: float | None
    ) -> None:
        """A completed request, from its scalars (no record built): what :meth:`record` counts."""
        b = self._bin(finish_s)
        b.completed += 1
        b.input_tokens += prompt
        b.output_tokens += output
        lim_ttft, lim_tpot = self.slo_ttft_s, self.slo_tpot_s
        b.slo_met += (lim_ttft is None or ttft_s <= lim_ttft) and (
            lim_tpot is None or tpot_s is None or tpot_s <= lim_tpot
        )

    def record(self, rec: RequestRecord) -> None:
        b = self._bin(rec.finish_s if rec.finish_s is not None else rec.arrival_s)
        if rec.ok:
            b.completed += 1
            b.input_tokens += rec.prompt_tokens
            b.output_tokens += rec.output_tokens
            b.slo_met += self.meets(rec)
        else:
            b.rejected += 1
            reason = (rec.error or rec.finish_reason or "unknown").split(" (")[0]
            self.reject_reasons[reason] += 1

    def add_row(self, row: MinuteRow) -> None:
        self.rows.append(row)

    def columns(self, n: int) -> dict[str, np.ndarray]:
        """Per-tick counters as arrays of length ``n`` (ticks 0..n-1)."""
        names = ("arrived", "completed", "rejected", "slo_met", "input_tokens", "output_tokens")
        out = {k: np.zeros(n) for k in names}
        for k, b in self.bins.items():
            if 0 <= k < n:
                for name in names:
                    out[name][k] = getattr(b, name)
        return out

    def totals(self) -> dict[str, int]:
        t = _Bin()
        for b in self.bins.values():
            for name in (
                "arrived",
                "completed",
                "rejected",
                "slo_met",
                "input_tokens",
                "output_tokens",
            ):
                setattr(t, name, getattr(t, name) + getattr(b, name))
        return {
            "arrived": t.arrived,
            "completed": t.completed,
            "rejected": t.rejected,
            "slo_met": t.slo_met,
            "input_tokens": t.input_tokens,
            "output_tokens": t.output_tokens,
        }


def replica_seconds_per_tick(
    intervals: list[tuple[float, float]], tick_s: float, n: int
) -> np.ndarray:
    """Billed replica-seconds in each tick: every interval's exact overlap with each tick."""
    out = np.zeros(n)
    for a, b in intervals:
        if b <= a:
            continue
        k0, k1 = int(a // tick_s), min(int(b // tick_s), n - 1)
        for k in range(k0, k1 + 1):
            lo, hi = max(a, k * tick_s), min(b, (k + 1) * tick_s)
            if hi > lo:
                out[k] += hi - lo
    return out
