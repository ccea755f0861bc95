"""The simulator's costs that a fleet day multiplies (issue 22 item 5), measured here, not in tests.

Three numbers, each at two run lengths (a cost that rises with the length shows as a change):

- CPU-s per 1k requests of a plain run, a disaggregated run (1 prefill + 1 decode replica)
  and a run with prefix caching on but nothing to share; the last two as multiples of the first.
- Memory per request: what a finished run still holds (``tracemalloc``'s current traced memory
  after the run, the metrics accumulator alive, everything else freed), its growth between the
  two lengths divided by the extra requests, with the default accumulator (exact per-request
  columns: 4 float64 columns that double when full) and with ``MetricsAccumulator(column_cap=...)``
  (bounded columns, for fleet days; skipped on trees that do not have it). Within a run
  nothing else grows with the requests: ``tracemalloc`` snapshots 15k and 45k requests into a run
  differ by these columns alone (~52 bytes per request at those points; buffers flush and the
  step timeline is compacted).

Beside each CPU figure: the kernel's events per request (arrivals, step ends, KV transfers,
start kicks: the simulator's unit of work) and the CPU microseconds per event, so a ratio splits
into structure (more events: a disaggregated request steps on two replicas and crosses a link)
and overhead (dearer events).

Workload: Llama-3.1-8B on one H100 SXM, Azure 2023 conversation lengths, Poisson at 12 req/s.

Run:
    python benchmarks/sim_fleet_costs.py                    # 4k and 16k requests
    PYTHONPATH=/tmp/base/src python benchmarks/sim_fleet_costs.py   # the same on an old tree
    python benchmarks/sim_fleet_costs.py --old /tmp/base/src --rounds 3   # CPU only, both trees,
        # alternated in one run (each round runs every kind in a fresh process per tree)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from infercast.metrics.summary import MetricsAccumulator
from infercast.sim.config import build_config
from infercast.sim.run import simulate

try:
    from infercast.sim.presets import build_step_model
except ImportError:  # a tree from before the move (A/B runs against an old commit)
    from infercast.commands.simulate import build_step_model

DISAGG = {
    "prefill": {"replicas": 1},
    "decode": {"replicas": 1},
    "transfer_latency_s": 0.002,
    "transfer_bandwidth_bytes_per_s": 2e10,
}


def config(n: int, kind: str):
    wl = {"num_requests": n, "trace": "azure-conv", "rate": 12.0}
    extra: dict = {}
    sched = {"policy": "chunked"}
    if kind == "disagg":
        extra["disaggregation"] = DISAGG
    elif kind == "prefix":
        sched["prefix_caching"] = True
    return build_config(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "mode": "fast",
            "seed": 1,
            "scheduler": sched,
            "workload": wl,
            **extra,
        }
    )


def cpu_s(n: int, kind: str, model, repeats: int) -> tuple[float, int]:
    """Least CPU seconds of ``repeats`` runs (the least is the one the machine disturbed least)
    and the run's kernel events."""
    best, events = float("inf"), 0
    for _ in range(repeats):
        t0 = time.process_time()
        r = simulate(config(n, kind), model)
        best = min(best, time.process_time() - t0)
        events = r.num_events
    return best, events


KINDS = ("plain", "disagg", "prefix")
LABELS = {"plain": "plain", "disagg": "disaggregated", "prefix": "prefix caching, nothing shared"}


def compare_trees(old_src: str, sizes: list[int], rounds: int, repeats: int) -> None:
    """Old tree vs this one, alternated: per round and tree a fresh process runs every kind."""
    trees = {"old": old_src, "new": str(Path(__file__).resolve().parents[1] / "src")}
    best: dict[tuple[str, int, str], float] = {}
    events: dict[tuple[str, int, str], int] = {}
    for _ in range(rounds):
        for tree, src in trees.items():
            argv = [sys.executable, __file__, "--child", "--repeats", str(repeats)]
            argv += ["--sizes", ",".join(map(str, sizes))]
            env = {**os.environ, "PYTHONPATH": src}
            out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
            for n, kind, cpu, ev in json.loads(out.stdout):
                key = (tree, n, kind)
                best[key] = min(cpu, best.get(key, float("inf")))
                events[key] = ev
    for n in sizes:
        k = n / 1000
        for kind in KINDS:
            o, w = best[("old", n, kind)], best[("new", n, kind)]
            po, pw = best[("old", n, "plain")], best[("new", n, "plain")]
            eo, ew = events[("old", n, kind)] / n, events[("new", n, kind)] / n
            print(
                f"{n:,} requests, {LABELS[kind]}: CPU-s per 1k old {o / k:.4f} ({o / po:.2f}x "
                f"plain), new {w / k:.4f} ({w / pw:.2f}x), new/old {w / o:.3f}; events per "
                f"request {eo:.2f} / {ew:.2f}; CPU us per event {o / (eo * n) * 1e6:.2f} / "
                f"{w / (ew * n) * 1e6:.2f}"
            )
    print(f"{rounds} rounds x {repeats} runs, least kept; load average {os.getloadavg()}")


def retained_bytes(n: int, model, column_cap: int | None) -> int:
    """Traced memory a plain run of ``n`` requests leaves behind (its accumulator kept alive)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        acc = MetricsAccumulator(column_cap=column_cap) if column_cap else MetricsAccumulator()
        simulate(config(n, "plain"), model, accumulator=acc)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", type=int, default=4000, help="requests of the shorter runs")
    ap.add_argument("--long", type=int, default=16000, help="requests of the longer runs")
    ap.add_argument("--repeats", type=int, default=2, help="runs per CPU measurement (least kept)")
    ap.add_argument("--old", help="an old tree's src/: compare CPU only, alternated")
    ap.add_argument("--rounds", type=int, default=3, help="alternations with --old")
    ap.add_argument("--sizes", help=argparse.SUPPRESS)  # the child's run lengths
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else [args.short, args.long]
    if args.old:
        compare_trees(args.old, sizes, args.rounds, args.repeats)
        return
    model = build_step_model(config(1, "plain"))
    simulate(config(1000, "plain"), model)  # warm the cost model's caches
    if args.child:
        rows = [(n, kind, *cpu_s(n, kind, model, args.repeats)) for n in sizes for kind in KINDS]
        print(json.dumps(rows))
        return
    for n in sizes:
        (plain, ep), (dis, ed), (pre, ex) = (cpu_s(n, kind, model, args.repeats) for kind in KINDS)
        k = n / 1000
        print(
            f"{n:,} requests: CPU-s per 1k requests: plain {plain / k:.3f}, "
            f"disaggregated {dis / k:.3f} ({dis / plain:.2f}x), "
            f"prefix caching with nothing shared {pre / k:.3f} ({pre / plain:.2f}x); "
            f"events per request {ep / n:.2f} / {ed / n:.2f} / {ex / n:.2f}, CPU us per event "
            f"{plain / ep * 1e6:.2f} / {dis / ed * 1e6:.2f} / {pre / ex * 1e6:.2f}"
        )
    caps: list[int | None] = [None, 4096]
    for cap in caps:
        try:
            a, b = retained_bytes(args.short, model, cap), retained_bytes(args.long, model, cap)
        except TypeError:  # no column_cap on this tree
            print(f"column_cap={cap}: not available on this tree")
            continue
        label = "exact per-request columns" if cap is None else f"column_cap={cap}"
        print(
            f"memory, {label}: {a / 1e6:.2f} MB kept after {args.short:,} requests, "
            f"{b / 1e6:.2f} MB at {args.long:,}: "
            f"{(b - a) / (args.long - args.short):.1f} bytes per request"
        )


if __name__ == "__main__":
    main()
