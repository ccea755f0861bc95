"""How long `infercast validate --simulate-all` takes: closed-loop rows by simulation, in a pool.

    python benchmarks/validate_sim_speed.py [--every N] [--workers W] [--scenario concurrency]

Predicts every N-th (ttft, tpot) pair of the shipped rows of a scenario by simulation (each
row's benchmark client, ``sim.clients``) with ``W`` worker processes, and prints wall seconds,
CPU seconds (this process and its workers), the load average (the machine is shared), the
slowest simulations, the scores against the closed form on the same rows, and the whole set's
CPU seconds extrapolated from the sample.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time


def _cpu_s() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _scores(preds) -> str:
    out = []
    for m in ("ttft_mean_s", "tpot_mean_s"):
        e = [abs(p.error_pct) for p in preds if p.case.metric == m and p.error_pct is not None]
        out.append(
            f"{m} {len(e)} rows, median |err| {statistics.median(e):.1f} %" if e else f"{m}: none"
        )
    return "; ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--scenario", default="concurrency")
    args = ap.parse_args()

    from infercast.cost.profiles import load_profile_set
    from infercast.validate.cases import load_cases
    from infercast.validate.evaluate import Evaluator

    every = [c for c in load_cases() if c.scenario == args.scenario]
    pairs = sorted({c.id.rsplit("-", 1)[0] for c in every})
    picked = set(pairs[:: args.every])
    cases = [c for c in every if c.id.rsplit("-", 1)[0] in picked]
    prof = load_profile_set(None)
    t0, c0 = time.perf_counter(), _cpu_s()
    ev = Evaluator(cases, prefer_simulator=True, assume_weights="checkpoint", workers=args.workers)
    sims = {p.sim_key for p in ev.plans if p is not None and p.simulate is not None}
    preds = ev.predict(prof)
    wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
    closed = Evaluator(cases, assume_weights="checkpoint").predict(prof)
    print(
        f"{args.scenario}: {len(cases)} of {len(every)} rows, {len(sims)} simulations, "
        f"{args.workers} workers"
    )
    print(
        f"wall {wall:.1f} s, CPU {cpu:.1f} s (this process + workers), load average "
        f"{os.getloadavg()}"
    )
    print(f"whole scenario by extrapolation: {cpu * len(every) / max(len(cases), 1):.0f} CPU-s")
    print(f"simulator:   {_scores(preds)}")
    print(f"closed form: {_scores(closed)}")


if __name__ == "__main__":
    main()
