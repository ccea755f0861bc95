"""Autoscaling policies: how many replicas a fleet wants at each decision tick.

Every policy sees only what a real autoscaler sees at time t (an :class:`Observation`:
the fleet's state and the arrivals counted so far, never the future) and returns the
replica count it wants, within its bounds. The fleet starts replicas (which serve only
after their start time) or drains them (no new requests; billed until empty).

- ``fixed``: always ``replicas``.
- ``reactive``: one metric against two thresholds (``queue``: requests waiting per ready
  replica; ``kv``: mean KV-cache use of ready replicas; ``util``: busy fraction of ready
  replicas over the last tick): above ``up`` add ``step`` replicas; below ``down`` for a whole
  ``stabilization_s`` window remove one (Kubernetes' HorizontalPodAutoscaler waits 300 s by
  default before scaling down, ``--horizontal-pod-autoscaler-downscale-stabilization``: without
  it a queue that empties for a minute drains a replica the next peak must start again), and
  only when the others could absorb its work: busy fraction x n / (n - 1) below ``absorb``
  (0.85; an empty queue alone does not mean spare capacity).
- ``scheduled``: a replica count per hour of the day (an operator's calendar).
- ``predictive``: Holt's linear exponential smoothing (Holt 1957; level alpha, trend beta)
  of the per-minute arrival rate, forecast ``lead_s`` ahead (the start time plus one tick),
  sized as ceil(forecast x headroom / one replica's capacity).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from infercast.errors import ConfigError

POLICIES = ("fixed", "reactive", "scheduled", "predictive")
METRICS = ("queue", "kv", "util")


@dataclass(frozen=True)
class Observation:
    """The fleet at a decision tick."""

    t_s: float
    ready: int
    starting: int
    queue_per_replica: (
        float  # router queue + replicas' waiting, per ready replica (inf: none ready)
    )
    kv_usage: float  # mean over ready replicas
    utilization: float  # busy fraction of ready replicas since the last tick
    arrival_rates: Sequence[float] = field(default=())  # observed req/s per past minute

    @property
    def current(self) -> int:
        return self.ready + self.starting


def _bounds(lo: int, hi: int) -> None:
    if lo < 1:
        raise ConfigError(f"`min_replicas` must be >= 1, got {lo}")
    if hi < lo:
        raise ConfigError(f"`max_replicas` {hi} is below `min_replicas` {lo}: give max >= min")


@dataclass(frozen=True)
class Fixed:
    replicas: int
    name: str = "fixed"

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ConfigError(f"`replicas` must be >= 1 for the fixed policy, got {self.replicas}")

    def desired(self, obs: Observation) -> int:
        return self.replicas

    def describe(self) -> str:
        return f"fixed {self.replicas} replica{'' if self.replicas == 1 else 's'}"


@dataclass
class Reactive:
    metric: str
    up: float
    down: float
    min_replicas: int
    max_replicas: int
    step: int = 1
    stabilization_s: float = 300.0
    absorb: float = 0.85
    name: str = "reactive"
    _low_since: float | None = None  # when the metric last went below ``down`` (state of one run)

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ConfigError(f"`metric` {self.metric!r}: choose one of {', '.join(METRICS)}")
        _bounds(self.min_replicas, self.max_replicas)
        if not (0 <= self.down < self.up):
            raise ConfigError(f"thresholds need 0 <= `down` ({self.down}) < `up` ({self.up})")
        if self.metric in ("kv", "util") and self.up > 1:
            raise ConfigError(f"`up` {self.up} for {self.metric}: a fraction in (0, 1]")
        if self.step < 1:
            raise ConfigError(f"`step` must be >= 1, got {self.step}")
        if self.stabilization_s < 0:
            raise ConfigError(f"`stabilization_s` must be >= 0, got {self.stabilization_s}")

    def value(self, obs: Observation) -> float:
        return {"queue": obs.queue_per_replica, "kv": obs.kv_usage, "util": obs.utilization}[
            self.metric
        ]

    def desired(self, obs: Observation) -> int:
        v, now = self.value(obs), obs.current
        if v >= self.down:
            self._low_since = None
        elif self._low_since is None:
            self._low_since = obs.t_s
        if v > self.up:
            now += self.step
        elif (
            self._low_since is not None
            and obs.t_s - self._low_since >= self.stabilization_s
            and obs.starting == 0
            and now > 1
            and obs.utilization * now / (now - 1) < self.absorb
        ):  # low a whole window, nothing starting,
            # and the others can take this replica's work
            now -= 1
            self._low_since = obs.t_s  # one replica per window
        return min(max(now, self.min_replicas), self.max_replicas)

    def describe(self) -> str:
        return (
            f"reactive on {self.metric}: +{self.step} above {self.up:g}, -1 after "
            f"{self.stabilization_s:g} s below {self.down:g}, "
            f"{self.min_replicas}-{self.max_replicas} replicas"
        )


@dataclass(frozen=True)
class Scheduled:
    by_hour: tuple[int, ...]  # replicas for each hour of the day (24 values)
    name: str = "scheduled"
    origin: str = "given"

    def __post_init__(self) -> None:
        if len(self.by_hour) != 24 or min(self.by_hour) < 1:
            raise ConfigError("a schedule needs 24 hourly replica counts, each >= 1")

    def desired(self, obs: Observation) -> int:
        return self.by_hour[int(obs.t_s // 3600) % 24]

    def describe(self) -> str:
        return f"scheduled ({self.origin}): {','.join(map(str, self.by_hour))} by hour"


@dataclass(frozen=True)
class Predictive:
    capacity_rps: float  # one replica's sustainable request rate
    lead_s: float  # forecast horizon: the start time plus one tick
    min_replicas: int
    max_replicas: int
    headroom: float = 1.25
    alpha: float = 0.5
    beta: float = 0.2
    base_capacity_rps: float = 0.0  # served by an always-on base pool (a mixed fleet)
    name: str = "predictive"

    def __post_init__(self) -> None:
        _bounds(self.min_replicas, self.max_replicas)
        if not self.capacity_rps > 0:
            raise ConfigError(f"a replica's capacity must be > 0 req/s, got {self.capacity_rps}")
        if self.headroom < 1:
            raise ConfigError(f"`headroom` must be >= 1, got {self.headroom}")

    def forecast(self, rates: Sequence[float]) -> float:
        """Holt's forecast of the per-minute rate ``lead_s`` ahead (0 with no history)."""
        if not rates:
            return 0.0
        level, trend = rates[0], 0.0
        for r in rates[1:]:
            prev = level
            level = self.alpha * r + (1 - self.alpha) * (level + trend)
            trend = self.beta * (level - prev) + (1 - self.beta) * trend
        return max(0.0, level + trend * self.lead_s / 60.0)

    def desired(self, obs: Observation) -> int:
        need = self.forecast(obs.arrival_rates) * self.headroom - self.base_capacity_rps
        want = math.ceil(max(0.0, need) / self.capacity_rps)
        return min(max(want, self.min_replicas), self.max_replicas)

    def describe(self) -> str:
        return (
            f"predictive (Holt, {self.lead_s:.0f} s ahead, headroom {self.headroom:g}, "
            f"{self.capacity_rps:.2f} req/s per replica), {self.min_replicas}-{self.max_replicas} "
            "replicas"
        )


def schedule_from_rates(
    rates_per_minute: Sequence[float],
    capacity_rps: float,
    headroom: float,
    lo: int,
    hi: int,
    base_capacity_rps: float = 0.0,
) -> tuple[int, ...]:
    """24 hourly counts sized to each hour's busiest minute of a typical day (the operator's
    calendar): ceil((max rate x headroom - an always-on base pool's capacity) / capacity), within
    [lo, hi]; hours beyond the day repeat."""
    _bounds(lo, hi)
    out = []
    n = len(rates_per_minute)
    for h in range(24):
        window = [rates_per_minute[m] for m in range(h * 60, min((h + 1) * 60, n))] or [0.0]
        need = max(0.0, max(window) * headroom - base_capacity_rps)
        out.append(min(max(math.ceil(need / capacity_rps), lo), hi))
    return tuple(out)


def parse_schedule(text: str) -> tuple[int, ...]:
    """``"0:2,8:6,20:3"`` (hour:replicas, each until the next) -> 24 hourly counts."""
    points: dict[int, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            h, n = (int(x) for x in part.split(":"))
        except ValueError:
            raise ConfigError(
                f"`schedule` expects hour:replicas pairs like 0:2,8:6, got {part!r}"
            ) from None
        if not 0 <= h < 24 or n < 1:
            raise ConfigError(f"`schedule` {part!r}: hour in 0-23 and replicas >= 1")
        points[h] = n
    if 0 not in points:
        raise ConfigError("`schedule` must start at hour 0 (e.g. 0:2,8:6,20:3)")
    out, cur = [], points[0]
    for h in range(24):
        cur = points.get(h, cur)
        out.append(cur)
    return tuple(out)
