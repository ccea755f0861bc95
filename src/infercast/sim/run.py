"""Run a simulation: workload -> router -> replicas -> record stream -> metrics.

``simulate(cfg, timer)`` is the library entry point; the CLI builds ``timer``
(a :class:`~infercast.cost.step.StepModel`) from the config. Every finished or
rejected request becomes one :class:`~infercast.metrics.records.RequestRecord`
that goes to the metrics accumulator and optionally to ``sink`` (e.g. a JSONL
writer) and is then dropped, so memory follows the active requests.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from infercast.metrics.records import RequestRecord
from infercast.metrics.summary import MetricsAccumulator, Summary
from infercast.sched import Request, Scheduler, synthetic_block_hashes
from infercast.sim.collect import BufferedDriver, CompletionBuffer
from infercast.sim.config import SimConfig
from infercast.sim.conversations import ConversationDriver, conversation_spec
from infercast.sim.kernel import PRIO_ARRIVAL, Kernel
from infercast.sim.replica import Replica
from infercast.sim.router import make_router
from infercast.sim.sched_config import scheduler_config
from infercast.sim.series import TimeSeries
from infercast.sim.timer import affine_everywhere, host_blocks, request_admit_s
from infercast.sim.workload import Trace, WorkloadSpec, load_trace, request_columns


@dataclass
class SimResult:
    """What a run produced: the metrics summary plus simulator-side facts."""

    summary: Summary
    num_blocks: int
    num_preemptions: int
    num_steps: int
    num_segments: int
    num_events: int
    mean_batch_size: float
    mean_kv_usage: float
    peak_kv_usage: float
    wall_s: float
    cpu_s: float
    series: TimeSeries
    blocks_in_use_at_end: int = 0  # KV blocks still referenced after the run (a leak if > 0)
    busy_replica_s: float = 0.0  # replicas' busy time, summed (economics: prefill's share of it)
    extra: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object: the summary plus the simulator's own numbers."""
        out = self.summary.to_dict()
        out.update(
            num_requests=self.summary.total,
            num_completed=self.summary.completed,
            num_rejected=self.summary.rejected,
            request_throughput_per_s=out["request_throughput_rps"],
            output_throughput_tokens_per_s=out["output_throughput_tps"],
            input_throughput_tokens_per_s=out["input_throughput_tps"],
            goodput_per_s=out["goodput_rps"],
            num_kv_blocks=self.num_blocks,
            num_preemptions=self.num_preemptions,
            num_steps=self.num_steps,
            mean_batch_size=self.mean_batch_size,
            mean_kv_usage=self.mean_kv_usage,
            peak_kv_usage=self.peak_kv_usage,
            busy_replica_s=self.busy_replica_s,
            sim_events=self.num_events,
            sim_wall_s=self.wall_s,
            sim_cpu_s=self.cpu_s,
        )
        out.update(self.extra)
        return out


def workload_spec(cfg: SimConfig, trace: Trace | None) -> WorkloadSpec:
    """The request-stream spec of a config: trace lengths by default when a trace is given."""
    w = cfg.workload
    default = "trace" if trace is not None else "fixed"
    max_len = cfg.scheduler.max_model_len
    return WorkloadSpec(
        arrival=w.resolved_arrival,
        num_requests=w.num_requests,
        rate=w.rate,
        cv=w.cv,
        input_dist=w.input.dist or (default if w.input.mean is None else "fixed"),
        input_mean=w.input.mean or 1024,
        input_std=w.input.std,
        output_dist=w.output.dist or (default if w.output.mean is None else "fixed"),
        output_mean=w.output.mean or 256,
        output_std=w.output.std,
        max_input_tokens=w.input.max or max_len,
        max_output_tokens=w.output.max,
        prefix_groups=w.prefix_groups,
        prefix_tokens=w.prefix_tokens,
    )


class _Arrival(NamedTuple):
    """One open-loop arrival of several replicas' run: ``request_stream``'s tuple, named."""

    arrival_s: float
    prompt: int
    output: int
    group: int


class _Driver(BufferedDriver):
    """Feeds arrivals (open or closed loop) to the router and collects records."""

    def __init__(
        self,
        cfg: SimConfig,
        columns: Iterator,
        replicas: list[Replica],
        kernel: Kernel,
        on_record: Callable[[RequestRecord], None],
    ):
        # ``request_columns`` chunks; ``stream`` yields them as ``request_stream``'s tuples (lazily:
        # the one-replica open loop reads the columns as Requests instead, see ``run``).
        self.columns, self.replicas, self.kernel = columns, replicas, kernel
        self.unrouted: list[Replica] = []  # replicas behind the routed ones (a decode pool)
        self.stream = itertools.chain.from_iterable(zip(*c, strict=True) for c in columns)
        self.router = make_router(cfg.router)
        self.on_record = on_record
        self.itl: Callable[[np.ndarray, np.ndarray], None] | None = None  # set by simulate()
        self.closed = cfg.workload.resolved_arrival == "closed"
        self.block_size = cfg.scheduler.block_size
        self.prefix_tokens = cfg.workload.prefix_tokens
        self.concurrency = cfg.workload.concurrency or 0
        self._hashes: dict[int, tuple[int, ...]] = {}
        self._count = 0
        # A closed loop's requests reach the engine after the front end admits them, one at a
        # time (EfficiencyProfile.request_admit_s; set by simulate(); 0: at once).
        self.admit_s = 0.0
        self._admit_free = 0.0

    def start(self) -> None:
        """A closed loop's first requests: one per client, sent at time 0, reaching the engine
        together once the front end has admitted them all.

        The engine has been idle: its thread is parked and runs again only after the front end's
        event loop has handled the burst, so its first step takes every one (``serve``, 4 clients:
        in 28 of 41 runs, 2026-12-05, docs/history/engine-weight-formats.md). Later requests reach
        an engine that has just finished a step and looks for work at once: :meth:`_next_at`.
        """
        self._admit_free = self.concurrency * self.admit_s
        for _ in range(self.concurrency):
            self._send(0.0, self._admit_free)

    def _next_at(self, t: float) -> None:
        """A closed loop's next request, sent at ``t``, behind the requests the front end is still
        admitting."""
        at = t
        if self.admit_s:
            at = self._admit_free = max(t, self._admit_free) + self.admit_s
        self._send(t, at)

    def _send(self, t: float, at: float) -> None:
        """The stream's next request, sent at ``t``, reaching the engine at ``at``."""
        item = next(self.stream, None)
        if item is not None:
            _, prompt, output, group = item
            self.kernel.at(at, PRIO_ARRIVAL, self._arrive, t, prompt, output, group)

    def _prefix_hashes(self, group: int) -> tuple[int, ...]:
        hashes = self._hashes.get(group)
        if hashes is None:
            hashes = self._hashes[group] = synthetic_block_hashes(
                group, self.prefix_tokens, self.block_size
            )
        return hashes

    def run(self) -> None:
        """Feed the stream and run the kernel until every request is done."""
        if self.closed:
            self.start()
            self.kernel.run()
        elif len(self.replicas) == 1:  # the usual run: requests straight to the one replica
            reqs = itertools.chain.from_iterable(self._request_chunks())
            self.kernel.run(reqs, self.replicas[0].submit)
        else:
            self.kernel.run(self._arrivals(), self._route)

    def _arrivals(self) -> Iterator[_Arrival]:
        """The open loop's arrivals (the columns' tuples), each with its ``arrival_s``."""
        return map(_Arrival._make, self.stream)

    def _request_chunks(self) -> Iterator[Iterator[Request]]:
        """The open loop's requests, as ``_arrive`` would build them, a ``map`` per chunk of
        columns: built in C, no Python frame per request (the kernel hands each to
        ``Replica.submit``)."""
        start = 0
        for arrivals, prompts, outputs, groups in self.columns:
            ids = map(str, range(start, start + len(arrivals)))
            if groups and groups[0] >= 0:  # shared prefixes: every request has a group
                yield map(
                    Request, ids, prompts, outputs, arrivals, map(self._prefix_hashes, groups)
                )
            else:  # none has one (-1)
                yield map(Request, ids, prompts, outputs, arrivals)
            start += len(arrivals)

    def _route(self, item: _Arrival) -> None:
        self._arrive(*item)

    def _arrive(self, at: float, prompt: int, output: int, group: int) -> None:
        req = Request(
            str(self._count), prompt, output, at, self._prefix_hashes(group) if group >= 0 else ()
        )
        self._count += 1
        replicas = self.replicas
        target = replicas[0] if len(replicas) == 1 else replicas[self.router.route(group, replicas)]
        target.submit(req)

    def emit(self, rec: RequestRecord, replica: int) -> None:
        self.on_record(rec)
        if self.closed:  # a finished (or rejected) request frees a client slot
            self._next_at(self.kernel.now)

    def completed(self, req: Request) -> None:
        """A closed loop's client sends its next request."""
        self._next_at(self.kernel.now)


def simulate(
    cfg: SimConfig,
    timer,
    accumulator: MetricsAccumulator | None = None,
    sink: Callable[[RequestRecord], None] | None = None,
    progress: Callable[[int], None] | None = None,
    trace: Trace | None = None,
) -> SimResult:
    """Run one simulation of ``cfg`` with ``timer`` as the per-step cost model."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    if trace is None and cfg.workload.trace is not None:
        trace = load_trace(cfg.workload.trace)
    acc = accumulator or MetricsAccumulator(slo_ttft_s=cfg.slo_ttft_s, slo_tpot_s=cfg.slo_tpot_s)
    rng = np.random.default_rng(cfg.seed)
    columns = request_columns(workload_spec(cfg, trace), rng, trace)
    kernel = Kernel()
    series = TimeSeries()

    def on_record(rec: RequestRecord) -> None:
        acc.add(rec)
        if sink is not None:
            sink(rec)
        done = driver.completions
        done.num_done += 1
        if progress is not None and done.num_done % 1000 == 0:
            progress(done.num_done)

    replicas: list[Replica] = []
    conv = conversation_spec(cfg)
    driver: Any  # either feeds the replicas and collects what they finish
    if conv is not None:  # multi-turn sessions (sim/conversations.py) instead of the request stream
        driver = ConversationDriver(cfg, conv, replicas, kernel, on_record, rng)
    else:
        driver = _Driver(cfg, columns, replicas, kernel, on_record)
        driver.admit_s = request_admit_s(timer)
    driver.completions = CompletionBuffer(acc, sink, progress=progress)
    driver.itl = acc.add_itl
    if cfg.disaggregation is not None:
        from infercast.sim.disagg import build_disagg

        sched_cfg, extra = build_disagg(cfg, timer, kernel, driver, series)
    else:
        sched_cfg, extra = _build_replicas(cfg, timer, kernel, driver, series)
    driver.run()
    driver.completions.flush()
    for rep in replicas + getattr(driver, "unrouted", []):  # a decode pool behind the routed
        if rep.gaps is not None:
            rep.gaps.flush()
    if progress is not None:
        progress(driver.num_done)
    result = _result(acc, replicas, kernel, series, sched_cfg, wall0, cpu0)
    result.extra.update(extra() if callable(extra) else extra)
    if conv is not None:
        result.extra.update(driver.extra())
    return result


def _build_replicas(cfg: SimConfig, timer, kernel: Kernel, driver: _Driver, series: TimeSeries):
    """``cfg.replicas`` aggregated replicas on the driver's list (speculative ones if asked)."""
    complete = (
        driver if driver.closed else driver.completions
    )  # closed loops send on each completion
    cls: type[Replica] = Replica
    kwargs: dict[str, Any] = {
        "fast": cfg.mode == "fast",
        "complete": complete,
        "itl": driver.itl,
        "recv_interval": cfg.scheduler.recv_interval,
        "async_scheduling": cfg.scheduler.async_scheduling,
    }
    if cfg.speculative is not None:
        from infercast.sim.build import spec_timer
        from infercast.sim.speculative import SpecReplica, SpecTimer

        timer = timer if isinstance(timer, SpecTimer) else spec_timer(cfg, timer)
        cls, kwargs = SpecReplica, {"rng": np.random.default_rng([cfg.seed, 7])}
        compact = False  # every request listed: each draws its own token count per step
    else:  # windowed attention makes decode cost depend on each context, not just their sum
        compact = affine_everywhere(timer)
    sched_cfg = scheduler_config(cfg, timer.kv_capacity_tokens, compact, host_blocks(timer))
    for i in range(cfg.replicas):
        driver.replicas.append(
            cls(
                i,
                Scheduler(sched_cfg),
                timer,
                kernel,
                driver.emit,
                observe=series.observe,
                **kwargs,
            )
        )
    extra = {}
    if cfg.speculative is not None:
        extra = {
            "speculative_tokens_per_step_expected": timer.config.tokens_per_step,
            "speculative_mode_note": "speculative runs are exact (one event per step)",
        }
    if host_blocks(timer):
        from infercast.sim.levers import tier_extra

        extra = tier_extra(driver.replicas, timer)  # a callable: read after the run
    return sched_cfg, extra


def _result(acc, replicas, kernel, series, sched_cfg, wall0, cpu0) -> SimResult:
    busy = sum(r.stats.busy_s for r in replicas)
    return SimResult(
        summary=acc.summary(),
        num_blocks=sched_cfg.num_blocks,
        num_preemptions=sum(r.sched.num_preemptions for r in replicas),
        num_steps=sum(r.stats.num_steps for r in replicas),
        num_segments=sum(r.stats.num_segments for r in replicas),
        num_events=kernel.num_events,
        mean_batch_size=sum(r.stats.seq_time_s for r in replicas) / busy if busy else math.nan,
        mean_kv_usage=sum(r.stats.kv_time_s for r in replicas) / busy if busy else math.nan,
        peak_kv_usage=max(r.stats.peak_kv_usage for r in replicas),
        wall_s=time.perf_counter() - wall0,
        cpu_s=time.process_time() - cpu0,
        series=series,
        blocks_in_use_at_end=sum(r.sched.kv.num_used_blocks for r in replicas),
        busy_replica_s=busy,
    )
