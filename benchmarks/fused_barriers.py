"""The fused decode step's barriers alone: N threads meeting ``--barriers`` times (SmolLM2-135M's
step meets 151 times: five a layer, 30 layers, one before the head) with no work between, started
and joined as the step is (``decode_step._Team``), at each ``--spins`` (``SPINS_BEFORE_YIELD``:
spins on the counter before each ``sched_yield``). Prints best / 10th percentile / median
microseconds of a start, the barriers and the join, over ``--runs``, rounds alternated. With
both threads on separate CPUs a barrier is the counter's cache line crossing between them;
when the scheduler has woken the helper on the caller's own CPU (a busy machine), the two take
turns there, each barrier a spin budget and a switch.

    PYTHONPATH=$PWD/src python benchmarks/fused_barriers.py --spins 0,100,500,2000,10000
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--barriers", default="1,151")
    ap.add_argument("--spins", default="2000")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    from numba import njit

    import infercast.engine.decode_step as ds

    if ds._step_kernel() is None:
        raise SystemExit("needs numba")
    barrier = ds._step_kernel().py_func.__globals__["barrier"]  # the step's compiled barrier

    @njit(nogil=True)
    def meet(n, spins, bar, tid, nth):  # pragma: no cover - compiled
        target = 0
        for _ in range(n):
            target += nth
            barrier(bar, target, spins)

    team = ds._Team(args.threads - 1)
    bar = np.zeros(1, np.int64)
    for r in range(args.rounds):
        for spins in [int(s) for s in args.spins.split(",")]:
            for n in [int(b) for b in args.barriers.split(",")]:
                ts = []
                for _ in range(args.runs + 1):
                    bar[0] = 0
                    t0 = time.perf_counter()
                    team.run(meet, (n, spins, bar), args.threads)
                    ts.append(time.perf_counter() - t0)
                q = sorted(ts[1:])
                print(
                    f"r{r} load {os.getloadavg()[0]:.1f} spins {spins:6d} barriers {n:4d}: "
                    f"{q[0] * 1e6:7.1f} / {q[len(q) // 10] * 1e6:7.1f} / "
                    f"{statistics.median(q) * 1e6:7.1f} us",
                    flush=True,
                )


if __name__ == "__main__":
    main()
