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

Run:
    python benchmarks/fleet_shard.py                       # ~45k requests, a few minutes on 2 cores
    python benchmarks/fleet_shard.py --peak-rate 200 --replicas 16 --groups 4 --hours 2
"""

from __future__ import annotations

import argparse
import os
import time

from infercast.fleet.day import build_replica, make_policy, run_day
from infercast.fleet.load import day_load
from infercast.fleet.run import FleetSpec
from infercast.fleet.shard import run_sharded
from infercast.sim.config import build_config

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
    a = ap.parse_args()
    cfg = build_config(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "weights": "bf16",
            "slo_ttft_s": 2.0,
            "slo_tpot_s": 0.1,
        }
    )
    load = day_load(
        a.peak_rate,
        a.hours,
        input_tokens=512,
        output_tokens=128,
        peak_hour=a.hours / 2,
        trough_fraction=0.3,
    )
    rep = build_replica(cfg, load)
    spec = FleetSpec(rep.start_s, a.replicas)
    print(
        f"day: {load.source}; ~{load.expected_requests:,.0f} requests over {a.hours:g} h; "
        f"{a.replicas} fixed replicas; replica capacity {rep.capacity_rps:.1f} req/s"
    )
    t0 = time.perf_counter()
    base = run_day(rep, load, make_policy("fixed", rep, load, 60.0, replicas=a.replicas), spec)[
        "day"
    ]
    rows = [("unsharded", 1, base, time.perf_counter() - t0)]
    cores = [1, 2] + ([os.cpu_count()] if (os.cpu_count() or 1) > 2 else [])
    for n in cores:
        t0 = time.perf_counter()
        day = run_sharded(
            rep,
            load,
            "fixed",
            {"replicas": a.replicas},
            spec,
            a.groups,
            "serial" if n == 1 else "local",
            n,
        )["day"]
        rows.append((f"{a.groups} groups", n, day, time.perf_counter() - t0))
    print(
        f"{'run':<12} {'cores':>5} {'requests':>9} {'CPU s':>7} {'req/CPU-s':>10} {'wall s':>7}  "
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
            f"{name:<12} {n:>5} {d['requests_arrived']:>9,} {d['sim_cpu_s']:>7.2f} "
            f"{d['requests_arrived'] / d['sim_cpu_s']:>10,.0f} {wall:>7.2f}  " + "  ".join(diffs)
        )
    print(
        f"agreement within {a.tolerance:.0%} (relative) on {', '.join(KEYS)}: "
        f"{'yes' if ok else 'NO'}"
    )


if __name__ == "__main__":
    main()
