"""A fleet day end to end: the replica's cost model, its start time and capacity, each policy's
run, and the day's dollars and energy (``run_day`` / ``compare_policies``).

Start time of a replica = its weight bytes (all GPUs) / ``storage_bytes_per_s`` + ``warmup_s``:
reading the checkpoint from storage, then the engine's warm-up (CUDA graphs, KV allocation).
Both are stated inputs with defaults (2 GB/s, 60 s), not measurements: set them from your
storage and your engine's start-up log.

Capacity of a replica (for the scheduled and predictive policies) = the request rate one
replica sustains saturated: an offline run of the day's request lengths (every request at
t = 0, eight batch caps of them), as ``plan`` measures it.

A config with a ``[disaggregation]`` section makes every policy member a unit of prefill and
decode replicas (``fleet/members.py``): its GPUs, start time (all its GPUs' weights), capacity
(an offline run of one unit) and energy are the unit's; below, "replica" then means "unit".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from infercast.cost.energy import J_PER_KWH, token_energy, try_power_model
from infercast.errors import ConfigError
from infercast.fleet.ledger import replica_seconds_per_tick
from infercast.fleet.load import DayLoad
from infercast.fleet.members import UnitShape, unit_shape, unit_token_energy
from infercast.fleet.policies import Fixed, Predictive, Reactive, Scheduled, schedule_from_rates
from infercast.fleet.run import BasePool, FleetResult, FleetSim, FleetSpec

DEFAULT_STORAGE_BYTES_PER_S = 2e9
DEFAULT_WARMUP_S = 60.0


@dataclass(frozen=True)
class Replica:
    """One replica configuration: its SimConfig, cost model, scheduler limits and economics."""

    cfg: object  # SimConfig
    timer: object  # StepModel
    sched_cfg: object
    gpus: int
    price_per_gpu_hour: float | None
    price_source: str
    start_s: float
    capacity_rps: float
    unit: UnitShape | None = None  # a disaggregated unit's shape; None: one aggregated replica


def build_replica(
    cfg,
    load: DayLoad,
    price_per_gpu_hour: float | None = None,
    storage_bytes_per_s: float = DEFAULT_STORAGE_BYTES_PER_S,
    warmup_s: float = DEFAULT_WARMUP_S,
    profile=None,
    capacity_rps: float | None = None,
    pool_prices: tuple[float | None, float | None] = (None, None),
) -> Replica:
    """The replica of ``cfg`` (a SimConfig): cost model, start time, saturated capacity, price
    (``capacity_rps`` given: not measured again, e.g. in a shard's worker).

    A disaggregated unit's pools are priced each at its own part: ``pool_prices`` (prefill,
    decode), else ``price_per_gpu_hour``, else the shipped price table's for the pool's part;
    its ``price_per_gpu_hour`` is then the unit's dollars per hour over its GPUs (a GPU-weighted
    mean), so GPU-hours x that price is still the day's dollars."""
    from infercast.sim.build import step_model
    from infercast.sim.economics import price_for
    from infercast.sim.sched_config import scheduler_config

    if cfg.speculative is not None:
        raise ConfigError("fleet replicas are non-speculative: drop the speculative section")
    if not (storage_bytes_per_s > 0 and math.isfinite(storage_bytes_per_s)):
        raise ConfigError(f"`storage_bytes_per_s` must be > 0 bytes/s, got {storage_bytes_per_s}")
    if not (warmup_s >= 0 and math.isfinite(warmup_s)):
        raise ConfigError(f"`warmup_s` must be >= 0, got {warmup_s}")
    price, source = price_for(cfg.hardware, price_per_gpu_hour)
    timer = step_model(cfg, profile=profile)
    cap = capacity_rps if capacity_rps is not None else _capacity(cfg, timer, load)
    if cfg.disaggregation is not None:
        shape = unit_shape(cfg, timer)
        start_s = shape.weight_bytes / storage_bytes_per_s + warmup_s
        dec = shape.pools.decode_sm  # the step whose bound the fleet reports
        sched = shape.pools.prefill_sched
        price, source = _unit_price(shape, price_per_gpu_hour, pool_prices)
        return Replica(cfg, dec, sched, shape.gpus, price, source, start_s, cap, shape)
    gpus = timer.parallel.gpus_per_replica
    start_s = timer.memory.weight_bytes * gpus / storage_bytes_per_s + warmup_s
    sched_cfg = scheduler_config(cfg, timer.kv_capacity_tokens)
    return Replica(cfg, timer, sched_cfg, gpus, price, source, start_s, cap)


def _unit_price(
    shape: UnitShape, price: float | None, pool_prices: tuple[float | None, float | None]
) -> tuple[float | None, str]:
    """A unit's $/GPU-hour over all its GPUs and where each pool's price came from."""
    from infercast.sim.economics import price_for

    pre = price_for(shape.prefill_hardware, pool_prices[0] if pool_prices[0] is not None else price)
    dec = price_for(shape.decode_hardware, pool_prices[1] if pool_prices[1] is not None else price)
    if pre == dec and shape.prefill_hardware == shape.decode_hardware:
        return pre
    if pre[0] is None or dec[0] is None:
        usd = None
    else:
        usd = shape.usd_per_hour(pre[0], dec[0]) / shape.gpus
    source = (
        f"prefill {shape.prefill_hardware} {_money(pre[0])} ({pre[1]}), "
        f"decode {shape.decode_hardware} {_money(dec[0])} ({dec[1]}); GPU-weighted mean"
    )
    return usd, source


def _money(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _capacity(cfg, timer, load: DayLoad) -> float:
    from infercast.sim.config import build_config
    from infercast.sim.run import simulate

    k = cfg.disaggregation.decode.replicas if cfg.disaggregation is not None else 1
    n = k * min(4000, max(500, 8 * cfg.scheduler.max_num_seqs))  # a unit: per decode replica
    wl: dict = {"arrival": "offline", "num_requests": n}
    mean_in, mean_out = _mean_lengths(load)
    if load.lengths is not None and load.lengths.name in ("azure-conv", "azure-code"):
        wl.update(trace=load.lengths.name, input={"dist": "trace"}, output={"dist": "trace"})
    else:  # a user trace's or fixed lengths: their means
        wl.update(input={"mean": mean_in}, output={"mean": mean_out})
    c = build_config({**cfg.model_dump(exclude={"workload"}), "workload": wl, "replicas": 1})
    rps = simulate(c, timer).summary.request_throughput_rps
    if not rps > 0:
        raise ConfigError(
            f"one replica (or unit) of {cfg.model} on {cfg.hardware} completes no request saturated"
        )
    return float(rps)


def make_policy(
    name: str,
    rep: Replica,
    load: DayLoad,
    tick_s: float,
    replicas: int | None = None,
    min_replicas: int = 1,
    max_replicas: int | None = None,
    metric: str = "queue",
    up: float | None = None,
    down: float | None = None,
    schedule: tuple[int, ...] | None = None,
    headroom: float = 1.25,
    stabilization_s: float = 300.0,
    base_capacity_rps: float = 0.0,
):
    """A policy by name, its unstated bounds sized from the day's peak and the replica's capacity
    (less ``base_capacity_rps``, what a mixed fleet's always-on base pool serves)."""
    peak = float(load.rates_per_s.max()) * headroom - base_capacity_rps
    peak_need = max(1, math.ceil(max(0.0, peak) / rep.capacity_rps))
    hi = max_replicas if max_replicas is not None else max(min_replicas, 2 * peak_need)
    if name == "fixed":
        return Fixed(replicas if replicas is not None else peak_need)
    if name == "reactive":
        defaults = {"queue": (4.0, 0.5), "kv": (0.8, 0.3), "util": (0.85, 0.4)}.get(
            metric, (1.0, 0.0)
        )
        return Reactive(
            metric,
            defaults[0] if up is None else up,
            defaults[1] if down is None else down,
            min_replicas,
            hi,
            stabilization_s=stabilization_s,
        )
    if name == "scheduled":
        if schedule is not None:
            return Scheduled(schedule)
        hours = schedule_from_rates(
            load.rates_per_s.tolist(),
            rep.capacity_rps,
            headroom,
            min_replicas,
            hi,
            base_capacity_rps,
        )
        return Scheduled(hours, origin="sized per hour from the day's curve")
    if name == "predictive":
        return Predictive(
            rep.capacity_rps,
            rep.start_s + tick_s,
            min_replicas,
            hi,
            headroom,
            base_capacity_rps=base_capacity_rps,
        )
    raise ConfigError(f"`policy` {name!r}: choose fixed, reactive, scheduled, predictive or all")


def run_day(
    rep: Replica,
    load: DayLoad,
    policy,
    spec: FleetSpec,
    base: Replica | None = None,
    base_count: int = 0,
) -> dict:
    """One policy over the day: the per-tick table and the day's totals (JSON-ready). A mixed
    fleet adds ``base_count`` always-on replicas of ``base`` beside the policy's."""
    cfg = rep.cfg
    mean_in, mean_out = _mean_lengths(load)
    pool = None
    max_len = cfg.scheduler.max_model_len
    if base is not None:
        weight = base.capacity_rps / rep.capacity_rps
        pool = BasePool(base.timer, base.sched_cfg, base_count, weight)
        lens = [x for x in (max_len, base.cfg.scheduler.max_model_len) if x is not None]
        max_len = min(lens) if lens else None
    sim = FleetSim(
        load,
        spec,
        policy,
        rep.timer,
        rep.sched_cfg,
        cfg.slo_ttft_s,
        cfg.slo_tpot_s,
        max(1, round(mean_in + mean_out / 2)),
        pool,
        rep.unit,
    )
    result = sim.run(max_len)
    return report(result, rep, load, spec, policy, base)


def _mean_lengths(load: DayLoad) -> tuple[float, float]:
    if load.lengths is None:
        return float(load.input_tokens), float(load.output_tokens)
    return float(np.mean(load.lengths.prompt_tokens)), float(np.mean(load.lengths.output_tokens))


Arrays = tuple[np.ndarray, np.ndarray | None, np.ndarray | None]


def _pool_cost(
    rep: Replica,
    rep_s: np.ndarray,
    in_tok: np.ndarray,
    out_tok: np.ndarray,
    load: DayLoad,
    batch: int,
) -> Arrays:
    """GPU-hours, dollars and joules per tick of one configuration's replicas: billed seconds x
    GPUs x price; idle power over billed seconds plus each token's dynamic energy."""
    gpu_h = rep_s * rep.gpus / 3600.0
    usd = gpu_h * rep.price_per_gpu_hour if rep.price_per_gpu_hour is not None else None
    if rep.unit is not None:  # each pool at its own part's power
        power = try_power_model(rep.unit.pools.prefill_sm.hardware)
        dpower = try_power_model(rep.unit.pools.decode_sm.hardware)
    else:
        power = dpower = try_power_model(rep.timer.hardware)
    if power is None or dpower is None:
        return gpu_h, usd, None
    mean_in, mean_out = _mean_lengths(load)
    context = max(1, round(mean_in + mean_out / 2))
    if rep.unit is not None:
        te = unit_token_energy(rep.unit, power, max(1, round(mean_in)), batch, context, dpower)
    else:
        te = token_energy(rep.timer, power, max(1, round(mean_in)), batch, context)
    energy = (
        te.idle_w * rep_s
        + te.prefill_dynamic_j_per_token * in_tok
        + te.decode_dynamic_j_per_token * out_tok
    )
    return gpu_h, usd, energy


def _sum_or_none(*parts: np.ndarray | None) -> np.ndarray | None:
    return None if any(p is None for p in parts) else sum(parts[1:], parts[0])


def report(
    result: FleetResult,
    rep: Replica,
    load: DayLoad,
    spec: FleetSpec,
    policy,
    base: Replica | None = None,
) -> dict:
    """Per-tick rows and day totals: SLO attainment, goodput, replicas, $, kWh, bottlenecks
    (a mixed fleet's base pool billed and powered at its own part's figures)."""
    tick = spec.tick_s
    led = result.ledger
    end = float(result.summary["end_s"])
    n = max(len(led.rows), int(math.ceil(end / tick)) + 1, (max(led.bins) + 1) if led.bins else 0)
    cols = led.columns(n)
    running = [r.running / max(r.ready + r.draining, 1) for r in led.rows if r.running]
    batch = max(1, round(float(np.mean(running)))) if running else 1
    rep_s = replica_seconds_per_tick(result.intervals, tick, n)
    in_tok, out_tok = cols["input_tokens"], cols["output_tokens"]
    base_day = None
    if base is not None:
        bcols = result.extra["base_ledger"].columns(n)
        base_s = replica_seconds_per_tick(result.extra["base_intervals"], tick, n)
        in_tok, out_tok = in_tok - bcols["input_tokens"], out_tok - bcols["output_tokens"]
        b_gpu_h, b_usd, b_energy = _pool_cost(
            base, base_s, bcols["input_tokens"], bcols["output_tokens"], load, batch
        )
        base_day = {
            "hardware": base.timer.hardware.key,
            "replicas": len(result.extra["base_intervals"]),
            "replica_hours": float(base_s.sum()) / 3600.0,
            "gpu_hours": float(b_gpu_h.sum()),
            "usd": float(b_usd.sum()) if b_usd is not None else None,
            "energy_kwh": float(b_energy.sum()) / J_PER_KWH if b_energy is not None else None,
            "requests_completed": int(bcols["completed"].sum()),
            "price_per_gpu_hour": base.price_per_gpu_hour,
            "capacity_rps": base.capacity_rps,
        }
    gpu_h, usd, energy = _pool_cost(rep, rep_s, in_tok, out_tok, load, batch)
    if base is not None:
        gpu_h = gpu_h + b_gpu_h
        usd, energy = _sum_or_none(usd, b_usd), _sum_or_none(energy, b_energy)
        rep_s = rep_s + base_s
    tot = led.totals()
    rows = []
    for r in led.rows:
        i = min(int(round(r.t_s / tick)) - 1, n - 1)
        done = cols["completed"][i] + cols["rejected"][i]
        rows.append(
            {
                "t_s": r.t_s,
                "arrival_rate_per_s": r.arrival_rate,
                "replicas_ready": r.ready,
                "replicas_starting": r.starting,
                "replicas_draining": r.draining,
                "replica_seconds": rep_s[i],
                "gpu_seconds": float(gpu_h[i]) * 3600.0,
                "waiting": r.waiting,
                "router_queue": r.router_queue,
                "running": r.running,
                "kv_usage": r.kv_usage,
                "utilization": r.utilization,
                "completed": int(cols["completed"][i]),
                "rejected": int(cols["rejected"][i]),
                "slo_attainment": cols["slo_met"][i] / done if done else None,
                "goodput_per_s": cols["slo_met"][i] / tick,
                "usd": float(usd[i]) if usd is not None else None,
                "energy_j": float(energy[i]) if energy is not None else None,
                "bottleneck": r.bottleneck,
            }
        )
    day_usd = float(usd.sum()) if usd is not None else None
    day_j = float(energy.sum()) if energy is not None else None
    finished = tot["completed"] + tot["rejected"]
    tokens = tot["input_tokens"] + tot["output_tokens"]
    bottlenecks = _bottleneck_story([r.bottleneck for r in led.rows], [r.t_s for r in led.rows])
    day = {
        "policy": policy.name,
        "policy_detail": _members_named(policy.describe(), rep),
        "member": "unit" if rep.unit is not None else "replica",
        "gpus_per_member": rep.gpus,
        "requests_arrived": int(result.summary["num_arrived"]),
        "requests_completed": tot["completed"],
        "requests_rejected": tot["rejected"],
        "reject_reasons": dict(led.reject_reasons),
        "slo_attainment": tot["slo_met"] / finished if finished else None,
        "goodput_per_s": tot["slo_met"] / load.duration_s,
        "replica_hours": float(rep_s.sum()) / 3600.0,
        "gpu_hours": float(gpu_h.sum()),
        "peak_replicas": max((r.ready + r.starting + r.draining for r in led.rows), default=0),
        "mean_replicas": float(rep_s.sum()) / max(end, 1e-9),
        "mean_utilization": float(np.mean([r.utilization for r in led.rows])) if led.rows else None,
        "usd": day_usd,
        "usd_per_day": day_usd * 86400 / load.duration_s if day_usd is not None else None,
        "usd_per_million_tokens": day_usd / tokens * 1e6
        if day_usd is not None and tokens
        else None,
        "usd_per_million_output_tokens": day_usd / tot["output_tokens"] * 1e6
        if day_usd is not None and tot["output_tokens"]
        else None,
        "energy_kwh": day_j / J_PER_KWH if day_j is not None else None,
        "kwh_per_day": day_j / J_PER_KWH * 86400 / load.duration_s if day_j is not None else None,
        "joules_per_output_token": day_j / tot["output_tokens"]
        if day_j and tot["output_tokens"]
        else None,
        "ttft_p99_s": result.summary["ttft_s"]["p99"],
        "tpot_p99_s": result.summary["tpot_s"]["p99"],
        "input_tokens": tot["input_tokens"],
        "output_tokens": tot["output_tokens"],
        "bottleneck_minutes": dict(bottlenecks[0]),
        "bottleneck_changes": bottlenecks[1],
        "sim_cpu_s": result.summary["sim_cpu_s"],
        "sim_wall_s": result.summary["sim_wall_s"],
        "end_s": end,
    }
    if base_day is not None:
        day["base_pool"] = base_day
    return {"day": day, "ticks": rows, "intervals": result.intervals}


def _members_named(text: str, rep: Replica) -> str:
    """A policy's description with its members named: disaggregated units are not replicas."""
    return text.replace("replica", "unit") if rep.unit is not None else text


def _bottleneck_story(labels: list[str], times: list[float]) -> tuple[dict[str, int], list[dict]]:
    """Ticks per bottleneck, and each change (time, from, to) once it held two ticks."""
    counts: dict[str, int] = {}
    for b in labels:
        counts[b] = counts.get(b, 0) + 1
    changes, cur = [], None
    for i, b in enumerate(labels):
        if b != cur and (i + 1 < len(labels) and labels[i + 1] == b or i + 1 == len(labels)):
            changes.append({"t_s": times[i], "from": cur, "to": b})
            cur = b
    return counts, changes
