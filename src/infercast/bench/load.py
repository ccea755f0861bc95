"""Load shapes: open loop at a rate (Poisson, gamma, ramp, trace replay), closed loop at a
concurrency.

Open loop: request i is *scheduled* at ``start + offset_i`` and that scheduled
time is its clock zero, so a client that falls behind shows the lag in TTFT
(and in ``send_lag_s``) instead of hiding it (the "coordinated omission" of
closed-loop tools). Closed loop: C workers each send the next request when
their previous one ends; clock zero is the moment the worker issues it.

While a run goes, a monitor task measures how late the event loop wakes (a
late loop stamps chunks late), and the process CPU time is read, so the run
can say when the client, not the server, was the bottleneck.
"""

from __future__ import annotations

import asyncio
import gc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from infercast.bench.client import BenchClient
from infercast.bench.datasets import RequestSpec
from infercast.errors import ConfigError
from infercast.metrics.records import RequestRecord

CLIENT_ERROR_BUDGET_S = 0.002  # issue 6: the client's own timing error must stay under 2 ms
_MONITOR_PERIOD_S = 0.005


def arrival_offsets(
    num: int, rate: float, rng: np.random.Generator, burstiness: float = 1.0
) -> np.ndarray:
    """Send offsets (s) of ``num`` requests at ``rate`` req/s; the first at 0.

    Gaps are gamma(shape=burstiness, scale=1/(rate*burstiness)): mean 1/rate,
    coefficient of variation 1/sqrt(burstiness); burstiness 1 is Poisson
    (exponential gaps). Same parameterisation as vLLM ``bench serve``.
    ``rate = inf`` sends everything at once.
    """
    if rate <= 0 or burstiness <= 0:
        raise ConfigError(f"--request-rate {rate} and --burstiness {burstiness} must be > 0")
    if math.isinf(rate):
        return np.zeros(num)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=max(num - 1, 0))
    return np.concatenate([[0.0], np.cumsum(gaps)])


def ramp_offsets(
    num: int, rate_start: float, rate_end: float, rng: np.random.Generator
) -> np.ndarray:
    """Poisson arrivals whose rate moves linearly from ``rate_start`` to ``rate_end`` over the
    requests."""
    if rate_start <= 0 or rate_end <= 0:
        raise ConfigError(f"ramp rates {rate_start} -> {rate_end} must be > 0")
    rates = np.linspace(rate_start, rate_end, max(num - 1, 1))[: max(num - 1, 0)]
    return np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rates))])


@dataclass(frozen=True)
class LoadPlan:
    """How to send: a rate (open loop) or a concurrency (closed loop), and limits."""

    request_rate: float | None = None  # open loop (inf: all at once); None: closed loop
    concurrency: int | None = None  # closed loop workers, or a cap on open-loop in-flight requests
    burstiness: float = 1.0
    ramp_to_rate: float | None = None
    replay_arrivals: bool = False  # use the specs' arrival_s (traces)
    max_duration_s: float | None = None  # stop issuing after this long
    warmup_requests: int = 0
    lead_s: float = 0.02  # schedule starts this far in the future, so request 0 is not late


@dataclass
class LoadResult:
    """Records of the measured requests plus what the client saw of itself."""

    records: list[RequestRecord]
    window_s: float
    achieved_concurrency: float
    max_in_flight: int
    loop_lag_s: np.ndarray
    cpu_fraction: float
    reconnects: int
    warmup_records: list[RequestRecord] = field(default_factory=list)


def plan_offsets(
    plan: LoadPlan, specs: list[RequestSpec], rng: np.random.Generator
) -> np.ndarray | None:
    """Scheduled offsets of an open-loop plan; None for a closed loop."""
    if plan.replay_arrivals:
        return np.array([s.arrival_s or 0.0 for s in specs])
    if plan.request_rate is None:
        return None
    if plan.ramp_to_rate is not None:
        return ramp_offsets(len(specs), plan.request_rate, plan.ramp_to_rate, rng)
    return arrival_offsets(len(specs), plan.request_rate, rng, plan.burstiness)


async def run_load(
    client: BenchClient,
    specs: list[RequestSpec],
    plan: LoadPlan,
    rng: np.random.Generator,
    on_done: Callable[[RequestRecord], None] | None = None,
) -> LoadResult:
    """Warm up, then run the plan and return the measured records and client diagnostics."""
    if plan.request_rate is None and not plan.replay_arrivals and not plan.concurrency:
        raise ConfigError("give --request-rate R or --max-concurrency C")
    warm, specs = specs[: plan.warmup_requests], specs[plan.warmup_requests :]
    warm_recs = (
        await asyncio.gather(*(client.send(s, client.clock()) for s in warm)) if warm else []
    )
    # open the connections the run will need now, so TCP set-up is not inside the first round's TTFT
    await client.warm_pool(plan.concurrency or 0)
    offsets = plan_offsets(plan, specs, rng)
    # what is alive now (modules, specs) leaves the collector's view for the timed run: a full
    # collection over it stalled the loop for 15-30 ms (every stream's chunks stamped late) at 128
    # streams
    gc.collect()
    gc.freeze()
    lags: list[float] = []
    stop = asyncio.Event()
    monitor = asyncio.create_task(_monitor(client.clock, stop, lags))
    cpu0, wall0 = time.process_time(), client.clock()
    start = client.clock() + plan.lead_s
    done: list[RequestRecord] = []

    def finish(rec: RequestRecord) -> None:
        done.append(rec)
        if on_done is not None:
            on_done(rec)

    client.max_in_flight, reconnects0 = 0, client.reconnects
    try:
        if offsets is None:
            await _closed_loop(client, specs, plan, start, finish)
        else:
            await _open_loop(client, specs, offsets, plan, start, finish)
    finally:
        gc.unfreeze()
    stop.set()
    await monitor
    cpu = (time.process_time() - cpu0) / max(client.clock() - wall0, 1e-9)
    return _result(done, start, lags, cpu, client, client.reconnects - reconnects0, list(warm_recs))


def _result(
    done: list[RequestRecord],
    start: float,
    lags: list[float],
    cpu: float,
    client: BenchClient,
    reconnects: int,
    warm: list[RequestRecord],
) -> LoadResult:
    end = max([r.finish_s or r.arrival_s for r in done], default=start)
    window = max(end - start, 1e-9)
    return LoadResult(
        done,
        window,
        achieved_concurrency(done, start),
        client.max_in_flight,
        np.array(lags),
        cpu,
        reconnects,
        warm,
    )


def achieved_concurrency(records: list[RequestRecord], start: float) -> float:
    """Time-average of requests in flight from ``start`` to the last send.

    Measured only while requests were still being issued, so the drain at the
    end of a closed-loop run (fewer than C left) does not count against it.
    """
    sends = [r.send_s for r in records if r.send_s is not None]
    if not sends:
        return 0.0
    stop = max(sends)
    if stop <= start:
        return float(len(sends))
    busy = sum(
        max(0.0, min(r.finish_s or stop, stop) - max(r.send_s, start))
        for r in records
        if r.send_s is not None
    )
    return busy / (stop - start)


async def _monitor(clock: Callable[[], float], stop: asyncio.Event, lags: list[float]) -> None:
    """How late the loop wakes from a short sleep: a lower bound on chunk stamping delay."""
    while not stop.is_set():
        t = clock()
        await asyncio.sleep(_MONITOR_PERIOD_S)
        lags.append(clock() - t - _MONITOR_PERIOD_S)


async def _open_loop(
    client: BenchClient,
    specs: list[RequestSpec],
    offsets: np.ndarray,
    plan: LoadPlan,
    start: float,
    finish: Callable[[RequestRecord], None],
) -> None:
    cap = asyncio.Semaphore(plan.concurrency) if plan.concurrency else None

    async def one(spec: RequestSpec, scheduled: float, body: bytes) -> None:
        if cap is None:
            finish(await client.send(spec, scheduled, body))
            return
        async with cap:  # waiting for a slot counts: clock zero stays the scheduled time
            finish(await client.send(spec, scheduled, body))

    tasks = []
    for spec, off in zip(specs, offsets, strict=True):
        if plan.max_duration_s is not None and off > plan.max_duration_s:
            break
        scheduled = start + float(off)
        body = client.encode(
            spec
        )  # before the scheduled time: encoding is not the server's latency
        await _wait_until(client.clock, scheduled)
        tasks.append(asyncio.create_task(one(spec, scheduled, body)))
    await asyncio.gather(*tasks)


async def _wait_until(clock: Callable[[], float], t: float) -> None:
    """Sleep until clock() >= t without asyncio's up-to-1-ms late wake-up.

    asyncio timers wake up to 1 ms late (epoll's millisecond timeout), so sleep
    to 1 ms before and yield to the loop (still serving I/O) for the rest.
    """
    delay = t - clock() - 0.001
    if delay > 0:
        await asyncio.sleep(delay)
    while clock() < t:
        await asyncio.sleep(0)


async def _closed_loop(
    client: BenchClient,
    specs: list[RequestSpec],
    plan: LoadPlan,
    start: float,
    finish: Callable[[RequestRecord], None],
) -> None:
    it = iter(specs)
    await asyncio.sleep(max(start - client.clock(), 0.0))

    async def worker() -> None:
        for spec in it:  # shared iterator: each spec goes to exactly one worker
            if plan.max_duration_s is not None and client.clock() - start > plan.max_duration_s:
                return
            body = client.encode(spec)  # clock zero: issued, body ready, right before the HTTP call
            finish(await client.send(spec, client.clock(), body))

    await asyncio.gather(*(worker() for _ in range(plan.concurrency or 1)))


def client_warnings(plan: LoadPlan, result: LoadResult, send_lag_p90_s: float) -> list[str]:
    """Loud, specific reasons to distrust the numbers because the client was the bottleneck.

    p90, not p99: on a shared machine a few late wake-ups come from other
    processes; a late tenth of the requests is the client's own doing.
    """
    out = []
    budget_ms = CLIENT_ERROR_BUDGET_S * 1e3
    if plan.request_rate is not None and send_lag_p90_s > CLIENT_ERROR_BUDGET_S:
        why = "waiting for a --max-concurrency slot or " if plan.concurrency else ""
        out.append(
            f"requests left the client late ({why}client busy): p90 send lag "
            f"{send_lag_p90_s * 1e3:.1f} ms > {budget_ms:.0f} ms; TTFT includes it"
        )
    if len(result.loop_lag_s):
        lag90 = float(np.percentile(result.loop_lag_s, 90))
        # asyncio timers wake up to 1 ms late by design (epoll's ms resolution); more is load
        if lag90 > CLIENT_ERROR_BUDGET_S + 0.001:
            out.append(
                f"client event loop woke late: p90 {lag90 * 1e3:.1f} ms (the client, the server or "
                "other processes keep this machine's cores busy); chunk time stamps can be late "
                f"by as much (budget {budget_ms:.0f} ms)"
            )
    if result.cpu_fraction > 0.8:
        out.append(
            f"client process used {result.cpu_fraction:.0%} of a core: it is likely the bottleneck"
        )
    ok = sum(1 for r in result.records if r.ok)
    if ok * 2 < len(result.records):  # mostly failures: fast errors, not a slow client
        return out
    if (
        plan.request_rate is None
        and plan.concurrency
        and result.achieved_concurrency < 0.9 * plan.concurrency
    ):
        out.append(
            f"achieved concurrency {result.achieved_concurrency:.1f} < 90% of the "
            f"{plan.concurrency} asked: the server saw fewer streams than requested"
        )
    return out
