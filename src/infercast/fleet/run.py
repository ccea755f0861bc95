"""A fleet day: the simulator's replicas behind one router, scaled by a policy over a day of load.

Nothing here times a step: each replica is a :class:`~infercast.sim.replica.Replica` (the
scheduler and the cost model's step times, fast mode) on one shared event kernel. The fleet
adds what a single-replica run lacks:

- **lifecycle**: a replica asked for at t serves from ``t + start_s`` (weights read from
  storage, then the engine's warm-up) and is billed and powered from t; a replica scaled
  down is *drained* (no new requests) and stops, unbilled, when its last request finishes.
- **router**: least outstanding tokens among serving replicas; with none serving, requests
  wait at the router, and one waiting longer than ``max_queue_s`` is rejected with that reason.
- **ticks**: every ``tick_s`` the fleet is observed (one row of the per-minute report) and
  the policy sets the replica count (``fleet/policies.py``).

Every arrival ends as exactly one record, completed or rejected with a reason (tested).

Memory follows the active requests, not the day's length: counts, tokens and SLO attainment
are per-tick aggregates (``fleet/ledger.py``, exact), and the per-request columns behind the
day's percentiles keep at most ``FleetSpec.column_cap`` values each before they fold into a
fixed histogram (``metrics/sample.py``); ``benchmarks/fleet_day_size.py`` measures it.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from infercast.errors import ConfigError
from infercast.fleet.ledger import Ledger, MinuteRow
from infercast.fleet.load import DayLoad, request_chunks
from infercast.fleet.members import DisaggUnit
from infercast.fleet.router import LeastLoaded
from infercast.metrics.records import RequestRecord
from infercast.metrics.summary import MetricsAccumulator
from infercast.sched import Request, Scheduler
from infercast.sim.collect import CompletionBuffer, rejected_record
from infercast.sim.kernel import PRIO_ARRIVAL, Kernel
from infercast.sim.replica import Replica

DEFAULT_COLUMN_CAP = 100_000  # per-request values per column: 0.8 MB of float64 each
PRIO_TICK = 3  # after arrivals, step ends and kicks at the same instant
STARTING, READY, DRAINING, STOPPED = "starting", "ready", "draining", "stopped"


@dataclass(frozen=True)
class FleetSpec:
    """How the fleet runs (the replica's own settings live in its SimConfig and timer)."""

    start_s: float  # request -> serving
    initial_replicas: int
    tick_s: float = 60.0
    max_queue_s: float = 300.0  # router wait before a request is rejected
    seed: int = 0
    # per-request values kept for percentiles (None: all); counts and sums stay exact
    column_cap: int | None = DEFAULT_COLUMN_CAP

    def __post_init__(self) -> None:
        if not (self.start_s >= 0 and math.isfinite(self.start_s)):
            raise ConfigError(f"replica start time must be >= 0 s, got {self.start_s}")
        if self.initial_replicas < 1:
            raise ConfigError(
                f"the fleet must start with >= 1 replica, got {self.initial_replicas}"
            )
        if not self.tick_s > 0:
            raise ConfigError(f"`tick_s` must be > 0, got {self.tick_s}")
        if not self.max_queue_s > 0:
            raise ConfigError(f"`max_queue_s` must be > 0, got {self.max_queue_s}")
        if self.column_cap is not None and self.column_cap < 1:
            raise ConfigError(
                f"`column_cap` must be >= 1 value (or None: all), got {self.column_cap}"
            )


@dataclass(frozen=True)
class BasePool:
    """A mixed fleet's second configuration: ``count`` replicas serving all day beside the
    policy's pool (reserved capacity), with their own step model and scheduler limits."""

    timer: object
    sched_cfg: object
    count: int
    weight: float  # its saturated capacity over a policy replica's: the router divides load by it

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ConfigError(f"`base_count` must be >= 1, got {self.count}")
        if not self.weight > 0:
            raise ConfigError(f"the base pool's relative capacity must be > 0, got {self.weight}")


class _Finished:
    """A policy or base replica's completion sink (``sim/collect.Completions``): a completed
    request reaches the fleet as scalars, with no token times and no record (a record and its
    token-time array cost about a fifth of a fleet day's CPU; the fleet reports no ITL)."""

    __slots__ = ("fleet", "index")
    wants_times = False
    posts_events = True  # the fleet may serve its queue (a submit at this instant)

    def __init__(self, fleet: FleetSim, index: int) -> None:
        self.fleet, self.index = fleet, index

    def add(self, req, finish_s, times=None) -> None:
        self.fleet._complete(req, finish_s, self.index)


@dataclass
class Member:
    """One replica's life in the fleet."""

    replica: Replica
    state: str
    asked_s: float  # billed from here
    ready_s: float
    stopped_s: float | None = None
    busy_mark: float = 0.0  # replica busy seconds at the last tick
    ready_event: list | None = None
    base: bool = False  # in the always-on base pool (never scaled)
    weight: float = 1.0  # capacity relative to a policy replica (the router's divisor)


@dataclass
class FleetResult:
    """What a fleet day produced: per-minute rows, the day's summary, the members' lifetimes."""

    policy: str
    ledger: Ledger
    summary: dict
    intervals: list[tuple[float, float]]  # (billed from, billed to) per policy replica
    extra: dict = field(default_factory=dict)  # base_intervals, base_ledger: the base pool's


class FleetSim:
    """One fleet, one day, one policy (see module doc)."""

    def __init__(
        self,
        load: DayLoad,
        spec: FleetSpec,
        policy,
        timer,
        sched_cfg,
        slo_ttft_s: float | None,
        slo_tpot_s: float | None,
        decode_context: int,
        base: BasePool | None = None,
        unit=None,
    ):
        """``unit`` (a ``fleet/members.UnitShape``): every policy member is a disaggregated unit
        of prefill and decode replicas; None: one aggregated replica of ``timer``."""
        self.load, self.spec, self.policy, self.timer, self.sched_cfg = (
            load,
            spec,
            policy,
            timer,
            sched_cfg,
        )
        self.base, self.unit = base, unit
        self.base_ledger = Ledger(spec.tick_s, slo_ttft_s, slo_tpot_s)  # the base pool's finishes
        self.kernel = Kernel()
        self.members: list[Member] = []
        self.router = LeastLoaded()  # the READY members by index, keyed by relative load
        self.queue: deque[Request] = deque()  # waiting at the router
        cap = spec.column_cap  # per-request and per-token values alike (ITL: 1M by default)
        self.acc = MetricsAccumulator(
            slo_ttft_s=slo_ttft_s,
            slo_tpot_s=slo_tpot_s,
            column_cap=cap,
            **({} if cap is None else {"itl_exact_cap": cap}),
        )
        self.ledger = Ledger(spec.tick_s, slo_ttft_s, slo_tpot_s)
        # completed requests' scalars, to the accumulator in blocks (as ``simulate`` does)
        self._done = CompletionBuffer(self.acc)
        self.decode_context = decode_context
        self.day_end_s = load.duration_s
        self._count = 0
        self._arrived = 0
        self._arrivals_in_tick = 0
        self._rates: list[float] = []  # observed arrival rate per past tick (req/s)
        self._stream = None
        self._preempt_mark = 0
        self._bound_cache: dict[tuple[int, int], str] = {}

    # ---- replicas ------------------------------------------------------------------
    def _start(self, now: float) -> None:
        for m in self.members:  # a draining replica is still up: take it back first
            if m.state == DRAINING and not m.base:
                m.state = READY
                self._serve(m)
                return
        m = Member(self._new_replica(), STARTING, now, now + self.spec.start_s)
        self.members.append(m)
        m.ready_event = self.kernel.at(m.ready_s, PRIO_ARRIVAL, self._ready, m)

    def _new_replica(self):
        """A policy member's replica (or disaggregated unit), indexed by its place in members."""
        index = len(self.members)
        if self.unit is not None:
            return DisaggUnit(index, self.unit, self.kernel, self._emit, self._complete)
        return self._replica(index, self.sched_cfg, self.timer)

    def _replica(self, index: int, sched_cfg, timer) -> Replica:
        """A simulator replica whose completions come back through ``_complete``."""
        sink = _Finished(self, index)
        return Replica(index, Scheduler(sched_cfg), timer, self.kernel, self._emit, complete=sink)

    def _serve(self, m: Member) -> None:
        """``m`` is READY: the router may pick it, at its current load."""
        self.router.update(m.replica.index, m.replica.outstanding_tokens / m.weight)

    def _drain(self, m: Member, now: float) -> None:
        self.router.remove(m.replica.index)
        m.state = DRAINING
        self._maybe_stop(m, now)

    def _ready(self, m: Member) -> None:
        m.state, m.ready_event = READY, None
        self._serve(m)
        m.busy_mark = m.replica.stats.busy_s
        while self.queue and m.state == READY:
            self._route(self.queue.popleft())

    def _stop_one(self, now: float) -> None:
        """Cancel the newest starting replica, else drain the least loaded serving one."""
        starting = [m for m in self.members if m.state == STARTING and not m.base]
        if starting:
            m = starting[-1]
            self.kernel.cancel(m.ready_event)
            m.state, m.stopped_s = STOPPED, now
            return
        ready = [m for m in self.members if m.state == READY and not m.base]
        if len(ready) <= 1 and not starting:
            return  # keep one serving policy replica
        self._drain(min(ready, key=lambda x: x.replica.outstanding_tokens), now)

    def _maybe_stop(self, m: Member, now: float) -> None:
        if (
            m.state == DRAINING
            and m.replica.outstanding_tokens == 0
            and not m.replica.sched.has_unfinished
        ):
            m.state, m.stopped_s = STOPPED, now

    def _serving(self) -> list[Member]:
        return [m for m in self.members if m.state == READY]

    # ---- requests ------------------------------------------------------------------
    def _next_arrival(self) -> None:
        item = next(self._stream, None)
        if item is not None:
            self.kernel.at(item[0], PRIO_ARRIVAL, self._arrive, *item)

    def _arrive(self, at: float, prompt: int, output: int) -> None:
        req = Request(str(self._count), int(prompt), int(output), at)
        self._count += 1
        self._arrivals_in_tick += 1
        self.ledger.arrival(at)
        self._next_arrival()
        self._route(req)

    def _route(self, req: Request) -> None:
        """To the least loaded serving replica (``fleet/router.py``), else the router's queue."""
        index = self.router.best()
        if index is None:
            self.queue.append(req)
            return
        m = self.members[index]
        m.replica.submit(req)
        self._serve(m)

    def _emit(self, rec: RequestRecord, index: int) -> None:
        """A record (a rejection, or any finish of a disaggregated unit) from member ``index``."""
        self.acc.add(rec)
        self.ledger.record(rec)
        m = self.members[index]
        if m.base:
            self.base_ledger.record(rec)
        self._finished(m)

    def _complete(self, req, finish_s, index: int) -> None:
        """A replica completed ``req`` (its last token at ``finish_s``): counted as its record
        would be (``RequestRecord``'s TTFT and TPOT, the same float operations)."""
        self._done.add(req, finish_s)
        n = req.num_output_tokens
        first_token_s = req.token_times[0]
        ttft = first_token_s - req.arrival_s
        tpot = (finish_s - first_token_s) / (n - 1) if n >= 2 else None
        self.ledger.completed(finish_s, req.prompt_tokens, n, ttft, tpot)
        m = self.members[index]
        if m.base:
            self.base_ledger.completed(finish_s, req.prompt_tokens, n, ttft, tpot)
        self._finished(m)

    def _finished(self, m: Member) -> None:
        if m.state == READY:
            self._serve(m)  # its load fell
        elif m.state == DRAINING:
            self._maybe_stop(m, self.kernel.now)

    def _reject_stale(self, now: float) -> None:
        limit = self.spec.max_queue_s
        while self.queue and now - self.queue[0].arrival_s > limit:
            req = self.queue.popleft()
            rec = rejected_record(req, now, f"no replica serving within {limit:g} s (router queue)")
            self.acc.add(rec)
            self.ledger.record(rec)

    # ---- ticks ---------------------------------------------------------------------
    def _tick(self) -> None:
        now = self.kernel.now
        self._reject_stale(now)
        for m in self.members:
            self._maybe_stop(m, now)
        obs, row = self._observe(now)
        self.ledger.add_row(row)
        if now < self.day_end_s:
            want = self.policy.desired(obs)
            cur = obs.current
            for _ in range(max(0, want - cur)):
                self._start(now)
            for _ in range(max(0, cur - want)):
                self._stop_one(now)
        else:  # the day is over: drain everything still up
            for m in self.members:
                if m.state == STARTING:
                    self.kernel.cancel(m.ready_event)
                    m.state, m.stopped_s = STOPPED, now
                elif m.state == READY:
                    self._drain(m, now)
        busy = any(m.state != STOPPED for m in self.members) or self.queue
        if now < self.day_end_s or busy:
            self.kernel.at(now + self.spec.tick_s, PRIO_TICK, self._tick)

    def _observe(self, now: float):
        from infercast.fleet.policies import Observation

        tick = self.spec.tick_s
        ready = self._serving()
        up = [m for m in self.members if m.state in (READY, DRAINING)]
        starting = sum(1 for m in self.members if m.state == STARTING)
        waiting = len(self.queue) + sum(m.replica.sched.num_waiting for m in up)
        running = sum(m.replica.sched.num_running for m in up)
        kv = float(np.mean([m.replica.sched.kv.usage for m in up])) if up else 0.0
        busy = 0.0
        for m in up:
            b = m.replica.stats.busy_s
            busy += min(b - m.busy_mark, tick)
            m.busy_mark = b
        util = busy / (tick * len(up)) if up else 0.0
        preempt = sum(m.replica.sched.num_preemptions for m in self.members)
        preempted, self._preempt_mark = preempt - self._preempt_mark, preempt
        rate = self._arrivals_in_tick / tick
        self._arrivals_in_tick = 0
        self._rates.append(rate)
        qpr = waiting / len(ready) if ready else (math.inf if waiting else 0.0)
        scaled = sum(1 for m in ready if not m.base)  # the policy counts its own replicas
        obs = Observation(now, scaled, starting, qpr, kv, util, tuple(self._rates[-180:]))
        loads = [m.replica.sched.num_waiting + m.replica.sched.num_running for m in ready]
        bottleneck = self._bottleneck(obs, waiting, running, len(up), preempted, loads)
        row = MinuteRow(
            now,
            len(ready),
            starting,
            sum(1 for m in self.members if m.state == DRAINING),
            waiting,
            len(self.queue),
            running,
            kv,
            util,
            rate,
            bottleneck,
        )
        return obs, row

    def _bottleneck(
        self, obs, waiting: int, running: int, up: int, preempted: int, loads: list[int]
    ) -> str:
        """What limits the fleet this tick: start-up, KV capacity, the router, idle, or the
        step's bound."""
        if (obs.ready == 0 and waiting) or (obs.starting and obs.queue_per_replica > 1):
            return "start-up"
        if obs.kv_usage > 0.9 or preempted:
            return "KV capacity"
        if len(loads) > 1 and waiting and min(loads) == 0:
            return "router"
        if obs.utilization < 0.5:
            return "idle capacity"
        batch = max(1, round(running / max(up, 1)))
        key = (batch, self.decode_context)
        if key not in self._bound_cache:
            bound = self.timer.decode_cost(batch, self.decode_context).bound
            self._bound_cache[key] = {"memory": "bandwidth"}.get(bound, bound)
        return self._bound_cache[key]

    # ---- the day -------------------------------------------------------------------
    def run(self, max_prompt: int | None = None) -> FleetResult:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        rng = np.random.default_rng(self.spec.seed)
        chunks = request_chunks(self.load, rng, max_prompt)
        self._stream = itertools.chain.from_iterable(
            zip(*(c.tolist() for c in ch), strict=True) for ch in chunks
        )
        for _ in range(self.spec.initial_replicas):  # warm at the start of the day (the night
            # before paid their start)
            self.members.append(Member(self._new_replica(), READY, 0.0, 0.0))
        for _ in range(self.base.count if self.base else 0):
            rep = self._replica(len(self.members), self.base.sched_cfg, self.base.timer)
            self.members.append(Member(rep, READY, 0.0, 0.0, base=True, weight=self.base.weight))
        for m in self.members:
            self._serve(m)
        self._next_arrival()
        self.kernel.at(self.spec.tick_s, PRIO_TICK, self._tick)
        self.kernel.run()
        end = self.kernel.now
        life = [
            (m.base, (m.asked_s, end if m.stopped_s is None else m.stopped_s)) for m in self.members
        ]
        intervals = [span for base, span in life if not base]
        extra = {
            "base_intervals": [span for base, span in life if base],
            "base_ledger": self.base_ledger,
        }
        self._done.flush()
        summary = self.acc.summary().to_dict()
        summary.update(
            sim_wall_s=time.perf_counter() - wall0,
            sim_cpu_s=time.process_time() - cpu0,
            sim_events=self.kernel.num_events,
            num_arrived=self._count,
            end_s=end,
        )
        return FleetResult(self.policy.name, self.ledger, summary, intervals, extra)
