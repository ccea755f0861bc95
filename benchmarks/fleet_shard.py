"""Sharded fleet day: requests per CPU-second and wall time on 1, 2 (and more) cores, and
agreement with the unsharded day (issue 22's goal, measured here, not in tests).

Day: Llama-3.1-8B bf16 on H100 SXM replicas (TP1), a diurnal curve peaking at
``--peak-rate`` req/s over ``--hours``, 512-token prompts and 128-token outputs, a fixed
fleet of ``--replicas`` (split over the groups). Runs:

- unsharded: one router group, in this process;
- sharded into ``--groups`` router groups (``fleet/shard.py``) on 1 worker (serial) and on
  2 workers (a local process pool), and on every core when the machine has more than 2.

Reports each run's simulated requests, the groups' summed process CPU seconds, requests per
CPU-second, wall seconds, and the sharded runs' relative difference from the unsharded one
in SLO attainment, dollars, energy and replica-hours (tolerance: ``--tolerance``, relative).

Then the production day's cost, extrapolated: ``--day-requests`` (24M) over ``--day-replicas``
(200) is a mean of day-requests / 86,400 / day-replicas req/s per replica. One router group of
``--group-replicas`` fixed replicas runs ``--sample-minutes`` at that per-replica rate (the
same lengths), and its requests per CPU-second price the whole day: CPU-s = day-requests /
(requests per CPU-s); wall = that / cores, groups being independent. An extrapolation, not
a run: the day's peak hours batch more per step (cheaper per request) and its troughs less.

Run:
    python benchmarks/fleet_shard.py                       # ~45k requests, a few minutes on 2 cores
    python benchmarks/fleet_shard.py --peak-rate 200 --replicas 16 --groups 4 --hours 2
    python benchmarks/fleet_shard.py --ray-workers 2     # also on Ray (the ray extra installed)

The Ray row's wall time includes starting the local cluster (its first tasks import infercast
in fresh worker processes); its CPU seconds are the groups' own.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from infercast.fleet.day import build_replica, make_policy, run_day
from infercast.fleet.load import DayLoad, day_load
from infercast.fleet.run import FleetSpec
from infercast.fleet.shard import run_sharded
from infercast.sim.config import build_config


def bench_config():
    """The replica every fleet benchmark simulates (this one, fleet_router.py and
    fleet_day_size.py): Llama-3.1-8B in bf16 on one H100 SXM, SLOs of 2 s TTFT and 0.1 s TPOT."""
    return build_config(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "weights": "bf16",
            "slo_ttft_s": 2.0,
            "slo_tpot_s": 0.1,
        }
    )


KEYS = ("slo_attainment", "usd", "energy_kwh", "replica_hours")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--peak-rate", type=float, default=30.0)
    ap.add_argument("--hours", type=float, default=0.5)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--groups", type=int, default=2)
    ap.add_argument("--tolerance", type=float, default=0.02)
    ap.add_argument(
        "--policy", default="fixed", help="fixed (--replicas) or an autoscaler, e.g. predictive"
    )
    ap.add_argument("--day-requests", type=float, default=24e6, help="0: no extrapolation")
    ap.add_argument("--day-replicas", type=int, default=200)
    ap.add_argument("--group-replicas", type=int, default=25)
    ap.add_argument("--sample-minutes", type=int, default=10)
    ap.add_argument(
        "--ray-workers",
        type=int,
        default=0,
        help="also run the sharded day on a local Ray cluster of this many CPUs (needs ray)",
    )
    a = ap.parse_args()
    cfg = bench_config()
    load = day_load(
        a.peak_rate,
        a.hours,
        input_tokens=512,
        output_tokens=128,
        peak_hour=a.hours / 2,
        trough_fraction=0.3,
    )
    rep = build_replica(cfg, load)
    kw = {"replicas": a.replicas} if a.policy == "fixed" else {}
    pol = make_policy(a.policy, rep, load, 60.0, **kw)
    spec = FleetSpec(rep.start_s, a.replicas)
    print(
        f"day: {load.source}; ~{load.expected_requests:,.0f} requests over {a.hours:g} h; "
        f"{pol.describe()}, starting from {a.replicas}; replica capacity "
        f"{rep.capacity_rps:.1f} req/s"
    )
    t0 = time.perf_counter()
    base = run_day(rep, load, pol, spec)["day"]
    rows = [("unsharded", 1, base, time.perf_counter() - t0)]
    cores = [1, 2] + ([os.cpu_count()] if (os.cpu_count() or 1) > 2 else [])
    runs = [(n, "serial" if n == 1 else "local") for n in cores]
    if a.ray_workers:
        import ray  # the optional extra: a local cluster of --ray-workers CPUs

        ray.init(num_cpus=a.ray_workers, include_dashboard=False, log_to_driver=False)
        runs.append((a.ray_workers, "ray"))
    for n, executor in runs:
        t0 = time.perf_counter()
        day = run_sharded(rep, load, a.policy, kw, spec, a.groups, executor, n)["day"]
        label = f"{a.groups} groups" + (" ray" if executor == "ray" else "")
        rows.append((label, n, day, time.perf_counter() - t0))
    print(
        f"{'run':<16} {'cores':>5} {'requests':>9} {'CPU s':>7} {'req/CPU-s':>10} {'wall s':>7}  "
        + "  ".join(f"d{k}" for k in KEYS)
    )
    ok = True
    for name, n, d, wall in rows:
        diffs = []
        for k in KEYS:
            b, x = base[k], d[k]
            rel = abs(x - b) / abs(b) if b else abs(x - b)
            ok &= rel <= a.tolerance
            diffs.append(f"{rel:+.4f}" if name != "unsharded" else "      -")
        print(
            f"{name:<16} {n:>5} {d['requests_arrived']:>9,} {d['sim_cpu_s']:>7.2f} "
            f"{d['requests_arrived'] / d['sim_cpu_s']:>10,.0f} {wall:>7.2f}  " + "  ".join(diffs)
        )
    print(
        f"agreement within {a.tolerance:.0%} (relative) on {', '.join(KEYS)}: "
        f"{'yes' if ok else 'NO'}"
    )
    if a.day_requests > 0:
        extrapolate(rep, a)


def extrapolate(rep, a) -> None:
    """The production day's CPU time from one group's sample at its per-replica rate."""
    per_replica = a.day_requests / 86400 / a.day_replicas
    rate = per_replica * a.group_replicas
    load = DayLoad(np.full(a.sample_minutes, rate), "flat", None, 512, 128)
    pol = make_policy("fixed", rep, load, 60.0, replicas=a.group_replicas)
    d = run_day(rep, load, pol, FleetSpec(rep.start_s, a.group_replicas))["day"]
    rps = d["requests_arrived"] / d["sim_cpu_s"]
    cpu = a.day_requests / rps
    cores = os.cpu_count() or 1
    print(
        f"sample: {a.group_replicas} replicas at {per_replica:.2f} req/s each "
        f"({a.sample_minutes} min, {d['requests_arrived']:,} requests): {rps:,.0f} requests/CPU-s"
    )
    print(
        f"extrapolated: {a.day_requests:,.0f} requests over {a.day_replicas} replicas "
        f"~ {cpu:,.0f} CPU-s ({cpu / 3600:.2f} CPU-hours); wall ~ {cpu / cores / 60:,.1f} min "
        f"on this machine's {cores} cores, {cpu / 64 / 60:,.1f} min on 64"
    )


if __name__ == "__main__":
    main()
