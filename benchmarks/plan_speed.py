"""How long ``infercast plan`` takes on each executor, and that they agree.

The issue's command: Llama-3.1-70B on H100 SXM / H200 SXM / B200, 10 req/s with
Azure conversation lengths, p99 TTFT <= 2 s and TPOT <= 50 ms, default grids
(TP 1/2/4/8; bf16, fp8, fp8+fp8-KV; two stages). Runs it serially, on the local
process pool and on a local Ray (2 CPUs), prints wall time, simulations and
the chosen configuration of each.

Run: python benchmarks/plan_speed.py [--no-ray]
"""

from __future__ import annotations

import argparse
import time

from infercast.plan import PlanRequest, plan


def request() -> PlanRequest:
    return PlanRequest(
        model="llama-3.1-70b",
        hardware=("h100-sxm", "h200-sxm", "b200"),
        rate=10.0,
        trace="azure-conv",
        slo_ttft_p99_s=2.0,
        slo_tpot_p99_s=0.05,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    runs = [("serial", {}), ("local", {"workers": 2})]
    if not args.no_ray:
        import ray

        t0 = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        print(f"ray.init: {time.perf_counter() - t0:.1f} s")
        runs.append(("ray", {}))
    answers = []
    for name, kw in runs:
        cpu0, t0 = time.process_time(), time.perf_counter()
        d = plan(request(), executor=name, **kw).to_dict()
        wall = time.perf_counter() - t0
        best = d["best"]
        answers.append((best, d["alternatives"]))
        print(
            f"{name:6}: {wall:6.1f} s wall, {time.process_time() - cpu0:6.1f} s driver CPU, "
            f"{d['num_candidates']} candidates, {d['num_simulations']} simulations -> "
            f"{best['label']} x{best['replicas']} ({best['num_gpus']} GPUs, "
            f"${best['cost_per_hour']:.2f}/h)"
        )
    print("all executors agree:", all(a == answers[0] for a in answers))


if __name__ == "__main__":
    main()
