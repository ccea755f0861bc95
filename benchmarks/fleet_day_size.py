"""Memory of a fleet day per request (issue 22 item 5), measured here, not in tests.

A fleet day should hold what its active requests need, per-minute aggregates and a bounded
store of per-request columns, not a few bytes for every request the day ever saw. This runs
the same fixed fleet for two day lengths under ``tracemalloc`` and reports what the finished
day still holds (its simulator object alive: ledger, accumulator, replicas) and the growth
between the two lengths divided by the extra requests, i.e. bytes per request, with:

- ``exact``: every per-request column kept whole (``FleetSpec(column_cap=None)``, the
  behaviour before the cap);
- ``capped``: per-request columns capped at ``--column-cap`` values each (the fleet's default
  is ``DEFAULT_COLUMN_CAP``; the benchmark uses a smaller cap so that both day lengths
  exceed it in a short run). Counts, tokens, SLO attainment, dollars and energy come from
  the per-minute ledger and stay exact; only percentiles past the cap come from a histogram.

Day: Llama-3.1-8B bf16 on H100 SXM replicas, a flat ``--rate`` req/s on ``--replicas`` fixed
replicas, 512-token prompts and 128-token outputs.

Run:
    python benchmarks/fleet_day_size.py                 # 0.5 h and 1.5 h at 20 req/s
    python benchmarks/fleet_day_size.py --hours 1 3 --rate 10
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import numpy as np
from fleet_shard import bench_config  # one replica for every fleet benchmark

from infercast.fleet.day import build_replica, make_policy
from infercast.fleet.load import DayLoad
from infercast.fleet.run import FleetSim, FleetSpec


def held_bytes(
    rep, hours: float, rate: float, replicas: int, cap: int | None
) -> tuple[int, int, int]:
    """(requests arrived, traced bytes the finished day still holds, peak traced bytes)."""
    load = DayLoad(np.full(round(hours * 60), rate), "flat", None, 512, 128)
    pol = make_policy("fixed", rep, load, 60.0, replicas=replicas)
    spec = FleetSpec(rep.start_s, replicas, column_cap=cap)
    cfg = rep.cfg
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        sim = FleetSim(
            load, spec, pol, rep.timer, rep.sched_cfg, cfg.slo_ttft_s, cfg.slo_tpot_s, 576
        )
        result = sim.run(cfg.scheduler.max_model_len)
        for m in sim.members:  # no request is active after the day: what the timelines still
            tl = m.replica.timeline  # hold is their amortized compaction slack, not growth
            tl.drop_before(tl.size)
        gc.collect()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return int(result.summary["num_arrived"]), held - base, peak - base


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, nargs=2, default=(0.5, 1.5), help="two day lengths")
    ap.add_argument("--rate", type=float, default=20.0, help="requests/s all day")
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--column-cap", type=int, default=8192, help="per-request values kept")
    a = ap.parse_args()
    cfg = bench_config()
    warm = DayLoad(np.full(2, a.rate), "flat", None, 512, 128)
    rep = build_replica(cfg, warm)
    held_bytes(rep, a.hours[0], a.rate, a.replicas, None)  # fill the cost model's caches
    for label, cap in (("exact", None), (f"capped at {a.column_cap:,}", a.column_cap)):
        t0 = time.perf_counter()
        (n1, b1, p1), (n2, b2, p2) = (held_bytes(rep, h, a.rate, a.replicas, cap) for h in a.hours)
        print(
            f"{label}: held {b1 / 1e6:.2f} MB after {n1:,} requests ({a.hours[0]:g} h), "
            f"{b2 / 1e6:.2f} MB after {n2:,} ({a.hours[1]:g} h): "
            f"{(b2 - b1) / (n2 - n1):.1f} bytes per request; peak {p1 / 1e6:.2f} -> "
            f"{p2 / 1e6:.2f} MB: {(p2 - p1) / (n2 - n1):.1f} bytes per request "
            f"[{time.perf_counter() - t0:.0f} s]"
        )


if __name__ == "__main__":
    main()
