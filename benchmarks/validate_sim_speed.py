"""How long `infercast validate` (the default: serving rows by simulation) takes, in a pool.

    python benchmarks/validate_sim_speed.py [--every N] [--workers W]
                                            [--scenario concurrency,disaggregated] [--slowest K]
                                            [--model NAME] [--no-past-window]

Takes every N-th run (the rows of one run share a simulation) of the shipped rows of the listed
scenarios, runs each distinct simulation once in a pool of ``W`` worker processes (each timed by
its own process CPU clock), and prints wall seconds, the CPU seconds of all simulations, the load
average (the machine is shared), the ``K`` slowest simulations with their rows, the whole set's
CPU seconds extrapolated from the sample, and the median |error| by simulation and by the closed
form (``--fast``) on the same rows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def _scores(preds) -> str:
    out = []
    for m in ("ttft_mean_s", "tpot_mean_s"):
        for sc in sorted({p.case.scenario for p in preds}):
            e = [
                abs(p.error_pct)
                for p in preds
                if p.case.metric == m and p.case.scenario == sc and p.error_pct is not None
            ]
            if e:
                out.append(f"{sc}/{m} {len(e)} rows, median |err| {statistics.median(e):.1f} %")
    return "; ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--scenario", default="concurrency")
    ap.add_argument("--slowest", type=int, default=8)
    ap.add_argument("--model", default="", help="only rows whose model name contains this")
    ap.add_argument(
        "--no-past-window",
        action="store_true",
        help="the fast path before decode_affine_past_window (A/B of its speed)",
    )
    args = ap.parse_args()
    if args.no_past_window:  # the pool's workers are forked: they inherit the class attribute
        from infercast.cost.step import StepModel

        StepModel.affine_past_window_context = float("inf")  # type: ignore[misc, assignment]

    from validate_tables import Timed  # the same timed task the table regeneration uses

    from infercast.cost.profiles import load_profile_set
    from infercast.validate.cases import load_cases
    from infercast.validate.evaluate import Evaluator, SimFailure, run_simulations
    from infercast.validate.score import agreement

    scenarios = set(args.scenario.split(","))
    every = [c for c in load_cases() if c.scenario in scenarios and args.model in (c.model or "")]
    runs = sorted({c.id.rsplit("-", 1)[0] for c in every})
    picked = set(runs[:: args.every])
    cases = [c for c in every if c.id.rsplit("-", 1)[0] in picked]
    prof = load_profile_set(None)
    ev = Evaluator(cases, prefer_simulator=True, assume_weights="checkpoint")
    todo, rows = {}, {}
    for case, plan in zip(ev.cases, ev.plans, strict=True):
        if plan is not None and plan.simulate is not None:
            key = (plan.sim_key, prof.for_group(plan.group))
            todo[key] = (Timed(plan.simulate), key[1])
            rows.setdefault(key, []).append(case.id)
    t0 = time.perf_counter()
    done = run_simulations(todo, args.workers)
    wall = time.perf_counter() - t0
    cache, cpu = {}, {}
    for key, result in done.items():
        if isinstance(result, SimFailure):
            cache[key] = result
            print(f"FAILED {rows[key][0]}: {result.reason}")
        else:
            cache[key], cpu[key] = result
    total = sum(cpu.values())
    print(
        f"{args.scenario}: {len(cases)} of {len(every)} rows, {len(todo)} simulations, "
        f"{args.workers} workers"
    )
    print(f"wall {wall:.1f} s, simulations' CPU {total:.1f} s, load average {os.getloadavg()}")
    print(f"whole set by extrapolation: {total * len(every) / max(len(cases), 1):.0f} CPU-s")
    for key in sorted(cpu, key=lambda k: -cpu[k])[: args.slowest]:
        print(f"  {cpu[key]:7.1f} CPU-s  {', '.join(rows[key][:3])}")
    preds = ev.predict(prof, sim_cache=cache)
    closed = Evaluator(cases, assume_weights="checkpoint").predict(prof)
    print(f"simulator:   {_scores(preds)}")
    print(f"closed form: {_scores(closed)}")
    for k, v in agreement(preds).items():  # rows predicted by both (the closed form beside each)
        print(
            f"{k}: {v['rows']} rows, sim / closed median {v['median_ratio']:.3f} "
            f"(10-90 % {v['p10_ratio']:.3f}-{v['p90_ratio']:.3f}), median |err| sim "
            f"{v['median_abs_error_pct_sim']:.1f} %, "
            f"closed {v['median_abs_error_pct_closed']:.1f} %"
        )


if __name__ == "__main__":
    main()
