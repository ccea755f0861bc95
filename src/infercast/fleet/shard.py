"""A fleet day sharded over independent router groups, one process (or Ray task) per group.

Production fleets shard ingress: each router group owns its replicas and sees only its own
traffic. ``run_sharded`` does the same: the day's rate curve is split evenly over ``groups``
groups (a Poisson stream thinned at random is G independent Poisson streams of rate/G), each
group gets its own seed, ``1/G`` of the policy's bounds (at least one replica) and runs as a
plain :func:`~infercast.fleet.day.run_day` on its executor (``plan``'s: serial, a local process
pool, or Ray); the groups' results are merged.

What sharding changes (``docs/fleet.md``): each group rounds its replica count up on its own
(up to G - 1 more replicas than one fleet), routes over fewer replicas (less smoothing), and
draws its own arrivals (another sample of the same process). Counts, dollars and energy add
up exactly; SLO attainment and goodput are recomputed from the summed counts; the day's p99
TTFT/TPOT is the worst group's (an upper bound of the fleet's p99).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from infercast.errors import ConfigError
from infercast.fleet.day import build_replica, make_policy, run_day
from infercast.fleet.load import DayLoad
from infercast.fleet.run import FleetSpec

_SUMS = (
    "requests_arrived",
    "requests_completed",
    "requests_rejected",
    "replica_hours",
    "gpu_hours",
    "input_tokens",
    "output_tokens",
    "sim_cpu_s",
)


@dataclass(frozen=True)
class GroupJob:
    """Everything one group's worker needs (picklable: the config as a dict, no cost model)."""

    cfg: dict
    load: DayLoad
    policy: str
    policy_kw: dict
    spec: FleetSpec
    price: float | None
    storage_bytes_per_s: float
    warmup_s: float
    capacity_rps: float
    profile: object = None  # the EfficiencyProfile the replica's steps are timed with


def _group_day(job: GroupJob) -> dict:
    from infercast.sim.config import build_config

    cfg = build_config(job.cfg)
    rep = build_replica(
        cfg,
        job.load,
        job.price,
        job.storage_bytes_per_s,
        job.warmup_s,
        profile=job.profile,
        capacity_rps=job.capacity_rps,
    )
    pol = make_policy(job.policy, rep, job.load, job.spec.tick_s, **job.policy_kw)
    first = pol.replicas if pol.name == "fixed" else job.spec.initial_replicas
    out = run_day(rep, job.load, pol, replace(job.spec, initial_replicas=first))
    out.pop("intervals")
    return out


def split_bounds(kw: dict, groups: int) -> dict:
    """A policy's replica bounds per group: ``ceil(n / groups)``, at least one."""
    out = dict(kw)
    for key in ("replicas", "max_replicas"):
        if out.get(key) is not None:
            out[key] = max(1, math.ceil(out[key] / groups))
    if out.get("min_replicas") is not None:
        out["min_replicas"] = max(1, out["min_replicas"] // groups)
    if out.get("schedule") is not None:
        out["schedule"] = tuple(max(1, math.ceil(n / groups)) for n in out["schedule"])
    return out


def run_sharded(
    rep,
    load: DayLoad,
    policy: str,
    policy_kw: dict,
    spec: FleetSpec,
    groups: int,
    executor: str = "local",
    workers: int | None = None,
    storage_bytes_per_s: float = 2e9,
    warmup_s: float = 60.0,
    profile=None,
) -> dict:
    """The day over ``groups`` independent router groups, merged (module doc)."""
    from infercast.plan.executors import run_map

    if groups < 1:
        raise ConfigError(f"`groups` must be >= 1, got {groups}")
    cfg = rep.cfg.model_dump()
    share = DayLoad(
        load.rates_per_s / groups,
        load.source + f" / {groups} groups",
        load.lengths,
        load.input_tokens,
        load.output_tokens,
    )
    kw = split_bounds(policy_kw, groups)
    jobs = [
        GroupJob(
            cfg,
            share,
            policy,
            kw,
            replace(spec, seed=spec.seed * 1000 + g),
            rep.price_per_gpu_hour,
            storage_bytes_per_s,
            warmup_s,
            rep.capacity_rps,
            profile,
        )
        for g in range(groups)
    ]
    return merge(run_map(_group_day, jobs, executor, workers), load.duration_s)


def merge(outs: list[dict], duration_s: float) -> dict:
    """One day from the groups' days: sums, SLO and goodput from the summed counts, worst p99."""
    days = [o["day"] for o in outs]
    day = {k: sum(d[k] for d in days) for k in _SUMS}
    met = sum(
        (d["slo_attainment"] or 0.0) * (d["requests_completed"] + d["requests_rejected"])
        for d in days
    )
    finished = day["requests_completed"] + day["requests_rejected"]
    day["slo_attainment"] = met / finished if finished else None
    day["goodput_per_s"] = met / duration_s
    for k in ("usd", "energy_kwh"):
        day[k] = sum(d[k] for d in days) if all(d[k] is not None for d in days) else None
    scale = 86400 / duration_s
    day["usd_per_day"] = day["usd"] * scale if day["usd"] is not None else None
    day["kwh_per_day"] = day["energy_kwh"] * scale if day["energy_kwh"] is not None else None
    tokens = day["input_tokens"] + day["output_tokens"]
    day["joules_per_output_token"] = (
        day["energy_kwh"] * 3.6e6 / day["output_tokens"]
        if day["energy_kwh"] is not None and day["output_tokens"]
        else None
    )
    day["usd_per_million_tokens"] = (
        day["usd"] / tokens * 1e6 if day["usd"] is not None and tokens else None
    )
    day["ttft_p99_s"] = max(
        (d["ttft_p99_s"] for d in days if d["ttft_p99_s"] is not None), default=None
    )
    day["tpot_p99_s"] = max(
        (d["tpot_p99_s"] for d in days if d["tpot_p99_s"] is not None), default=None
    )
    day["peak_replicas"] = sum(d["peak_replicas"] for d in days)
    reasons: dict[str, int] = {}
    for d in days:
        for r, n in d["reject_reasons"].items():
            reasons[r] = reasons.get(r, 0) + n
    day["reject_reasons"] = reasons
    day["groups"] = len(days)
    day["policy"] = days[0]["policy"]
    return {"day": day, "groups": days}
