"""Speculative decoding vs the ``speculative`` rows of measurements.csv (EAGLE-3 paper).

Two checks, both printed as predicted vs measured with the relative error:

1. Batch-1 speedups of the HF research implementation (Vicuna-13B on an RTX 3090,
   EAGLE / EAGLE-2 / EAGLE-3, five datasets). The paper gives the acceptance length
   tau next to each speedup, so the model is given tau and predicts only the cost
   side: speedup = tau x plain step / (k head steps + one verify step of the tree).
   Vicuna-13B is costed as Llama-2-13B (same shapes). Tree: EAGLE-2/3 verify 60
   tokens at depth 7 (their default dynamic tree), EAGLE-1 a 26-token static tree
   at depth 5.
2. Speedup vs batch of SGLang (Llama-3.1-8B, H100, chain of 3) and vLLM (RTX 3090,
   chain of 2), EAGLE-3 and EAGLE: closed-loop simulations at concurrency = batch
   with and without speculation (MT-bench-like lengths: 128 in, 256 out). These
   rows give no acceptance, so two variants: an assumed per-token acceptance
   (EAGLE-3 0.75, EAGLE 0.6, spread 0.1 across requests), and a one-parameter fit
   of the acceptance to the smallest batch, the rest of the curve predicted.

Run: python benchmarks/plan_speculative_check.py   (about 30 s)
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from importlib import resources

from infercast.cost.speculative import SpeculativeConfig, SpeculativeModel, acceptance_from_tau
from infercast.cost.step import StepModel
from infercast.sim.build import step_model
from infercast.sim.config import build_config
from infercast.sim.run import simulate
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.precision import Precision

TREES = {
    "eagle-3": (7, 60),
    "eagle-2": (7, 60),
    "eagle": (5, 26),
}  # method: (depth, verified tokens)


def rows() -> list[dict[str, str]]:
    text = resources.files("infercast.data").joinpath("measurements.csv").read_text()
    return [r for r in csv.DictReader(text.splitlines()) if r["scenario"] == "speculative"]


def batch_one_check(data) -> list[float]:
    pairs: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for r in data:
        if r["engine"].startswith("hf research impl + "):
            method = r["engine"].removeprefix("hf research impl + ")
            if method in TREES:
                pairs[(method, r["dataset"])][r["metric"]] = float(r["value"])
    target = StepModel(
        load_model("llama-2-13b"), load_hardware("rtx-3090"), Precision.parse("fp16")
    )
    errors = []
    print("1. batch 1, Vicuna-13B (as Llama-2-13B) on RTX 3090, HF implementation")
    print(f"{'method':9} {'dataset':30} {'tau':>5} {'measured':>9} {'predicted':>9} {'error':>7}")
    for (method, dataset), m in sorted(pairs.items()):
        depth, width = TREES[method]
        tau = m["acceptance_length"]
        cfg = SpeculativeConfig(
            "eagle",
            depth,
            acceptance_from_tau(min(tau, depth + 1), depth),
            0.0,
            verify_tokens=width,
        )
        step = SpeculativeModel(target, cfg).step(1, 512)
        pred = tau * step.plain_s / step.step_s
        err = pred / m["speedup"] - 1
        errors.append(err)
        print(f"{method:9} {dataset:30} {tau:5.2f} {m['speedup']:9.2f} {pred:9.2f} {err:+7.1%}")
    return errors


def sim_speedup(hw: str, batch: int, k: int, a: float, std: float, cache: dict) -> float:
    base = {
        "model": "llama-3.1-8b",
        "hardware": hw,
        "mode": "exact",
        "seed": 1,
        "workload": {
            "concurrency": batch,
            "num_requests": max(8, 3 * batch),
            "input": {"mean": 128},
            "output": {"mean": 256},
        },
    }
    key = (hw, batch)
    if key not in cache:
        cfg = build_config(base)
        cache[key] = (step_model(cfg), simulate(cfg, step_model(cfg)).summary.output_throughput_tps)
    sm, plain = cache[key]
    spec = simulate(
        build_config(
            {
                **base,
                "speculative": {
                    "num_speculative_tokens": k,
                    "acceptance": a,
                    "acceptance_std": std,
                },
            }
        ),
        sm,
    )
    return spec.summary.output_throughput_tps / plain


def fit_acceptance(hw, batch, k, measured, cache) -> float:
    lo, hi = 0.05, 0.97
    for _ in range(14):  # bisection: speedup rises with acceptance
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sim_speedup(hw, batch, k, mid, 0.0, cache) < measured else (lo, mid)
    return (lo + hi) / 2


def batch_curve_check(data) -> dict[str, list[float]]:
    curves: dict[tuple[str, str, int], list[tuple[int, float]]] = defaultdict(list)
    for r in data:
        if r["metric"] == "speedup" and r["engine"].startswith(("sglang-0.4.4 + ", "vllm + ")):
            engine, method = r["engine"].split(" + ")
            k = int(method.split("chain ")[1].rstrip(")"))
            hw = "h100-sxm" if r["hardware"] == "h100" else r["hardware"]
            curves[(f"{engine} {method}", hw, k)].append((int(r["batch"]), float(r["value"])))
    errors: dict[str, list[float]] = {"assumed": [], "fitted": []}
    cache: dict = {}
    print(
        "\n2. speedup vs batch, Llama-3.1-8B, simulated closed loop (assumed a | a fitted at the "
        "first batch)"
    )
    for (name, hw, k), pts in sorted(curves.items()):
        pts.sort()
        assumed = 0.75 if "eagle-3" in name else 0.6
        a_fit = fit_acceptance(hw, pts[0][0], k, pts[0][1], cache)
        print(f"{name} on {hw}: assumed a={assumed}, fitted a={a_fit:.3f}")
        for i, (batch, meas) in enumerate(pts):
            p1 = sim_speedup(hw, batch, k, assumed, 0.1, cache)
            p2 = sim_speedup(hw, batch, k, a_fit, 0.0, cache)
            errors["assumed"].append(p1 / meas - 1)
            if i:
                errors["fitted"].append(p2 / meas - 1)
            print(
                f"  batch {batch:3d}: measured {meas:4.2f}  assumed {p1:4.2f} "
                f"({p1 / meas - 1:+6.1%})  fitted {p2:4.2f} ({p2 / meas - 1:+6.1%})"
            )
    return errors


def summary(name: str, errs: list[float]) -> None:
    mape = sum(abs(e) for e in errs) / len(errs)
    gmean = math.exp(sum(math.log(1 + e) for e in errs) / len(errs)) - 1
    print(
        f"{name}: {len(errs)} rows, mean |error| {mape:.1%}, geometric-mean bias {gmean:+.1%}, "
        f"worst {max(errs, key=abs):+.1%}"
    )


def main() -> None:
    data = rows()
    e1 = batch_one_check(data)
    e2 = batch_curve_check(data)
    print()
    summary("batch-1 HF speedups given tau", e1)
    summary("speedup vs batch, assumed acceptance", e2["assumed"])
    summary("speedup vs batch, acceptance fitted at the first batch (other batches)", e2["fitted"])


if __name__ == "__main__":
    main()
