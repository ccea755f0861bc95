"""The fleet's router at width: the heap (``fleet/router.py``) against a scan of every replica.

Before the heap, each arrival scanned every serving replica for the least outstanding tokens,
O(replicas) per request; the heap picks the same replica in O(log replicas). This runs the
same fixed-fleet day with both, alternated (old, new, old, new, ...) in one process so machine
load hits both alike, and reports each one's requests per CPU-second (the least CPU time of
its repeats) and whether the two days came out identical (they must: same rule, same ties).

Day: Llama-3.1-8B bf16 on ``--replicas`` H100 SXM replicas (fixed), a flat ``--rate-per-replica``
x replicas req/s for ``--minutes``, 512-token prompts and 128-token outputs.

Run:
    python benchmarks/fleet_router.py                         # 193 replicas, 1 minute
    python benchmarks/fleet_router.py --replicas 16 --minutes 5
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from fleet_shard import bench_config  # one replica for every fleet benchmark

from infercast.fleet.day import build_replica, make_policy
from infercast.fleet.load import DayLoad
from infercast.fleet.run import READY, FleetSim, FleetSpec


class ScanRouterSim(FleetSim):
    """The fleet with the router it had before the heap: a scan of every member per arrival."""

    def _route(self, req) -> None:
        serving = [m for m in self.members if m.state == READY]
        if not serving:
            self.queue.append(req)
            return
        min(serving, key=lambda m: m.replica.outstanding_tokens / m.weight).replica.submit(req)


def one_day(cls, rep, load: DayLoad, replicas: int) -> tuple[float, dict]:
    """(process CPU seconds, the day's summary) of one run with simulator class ``cls``."""
    cfg = rep.cfg
    pol = make_policy("fixed", rep, load, 60.0, replicas=replicas)
    spec = FleetSpec(rep.start_s, replicas)
    sim = cls(load, spec, pol, rep.timer, rep.sched_cfg, cfg.slo_ttft_s, cfg.slo_tpot_s, 576)
    t0 = time.process_time()
    result = sim.run(cfg.scheduler.max_model_len)
    cpu = time.process_time() - t0
    summary = {k: v for k, v in result.summary.items() if not k.startswith("sim_")}
    return cpu, {"summary": summary, "totals": result.ledger.totals()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=193)
    ap.add_argument("--rate-per-replica", type=float, default=5.0, help="req/s per replica")
    ap.add_argument("--minutes", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=2, help="alternated runs of each router")
    a = ap.parse_args()
    cfg = bench_config()
    load = DayLoad(np.full(a.minutes, a.rate_per_replica * a.replicas), "flat", None, 512, 128)
    rep = build_replica(cfg, load)
    one_day(FleetSim, rep, DayLoad(np.full(1, 4.0), "warm", None, 512, 128), 2)  # warm caches
    best = {"scan": float("inf"), "heap": float("inf")}
    days: dict[str, dict] = {}
    for _ in range(a.repeats):
        for name, cls in (("scan", ScanRouterSim), ("heap", FleetSim)):
            cpu, days[name] = one_day(cls, rep, load, a.replicas)
            best[name] = min(best[name], cpu)
    n = days["heap"]["summary"]["num_arrived"]
    print(
        f"{a.replicas} replicas, {n:,} requests over {a.minutes} min "
        f"({a.rate_per_replica:g} req/s per replica), least CPU of {a.repeats} alternated runs:"
    )
    for name in ("scan", "heap"):
        print(f"  {name}: {best[name]:.2f} CPU-s, {n / best[name]:,.0f} requests/CPU-s")
    print(
        f"heap / scan speed: {best['scan'] / best['heap']:.2f}x; "
        f"identical days: {'yes' if days['scan'] == days['heap'] else 'NO'}"
    )


if __name__ == "__main__":
    main()
