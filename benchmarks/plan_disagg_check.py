"""Disaggregated serving vs the ``disaggregated`` rows of measurements.csv (aiconfigurator silicon
data).

Each row pair (TTFT mean, TPOT mean) carries its worker layouts in ``extra``:
per pool the TP size, attention-DP size, MoE EP size and (sometimes) worker
count. A worker of tp x attention_dp GPUs maps to ``Parallelism(tp=g,
attn_dp=attention_dp > 1, ep=moe_ep)``; rows mixing attention TP and DP, with
pipeline parallel, or whose worker counts cannot be told from the GPU total
are skipped. Closed loop at the row's concurrency, fixed lengths, 3 x
concurrency requests, default KV dtype (the rows do not say).

Run: python benchmarks/plan_disagg_check.py [--max-rows 40] [--max-concurrency 256]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import time
from collections import defaultdict
from importlib import resources

from infercast.errors import InfercastError
from infercast.sim.build import pool_step_model
from infercast.sim.config import build_config
from infercast.sim.run import simulate


def pool(p: dict) -> tuple[int, int, bool] | None:
    """(GPUs per worker, EP, attention DP) or None when not representable."""
    tp, adp, pp = int(p["tp_size"] or 1), int(p["attention_dp_size"] or 1), int(p["pp_size"] or 1)
    if pp != 1 or (tp > 1 and adp > 1):
        return None
    g = tp * adp
    return g, min(int(p["moe_ep_size"] or 1), g), adp > 1


def workers(extra: dict, n_gpus: int, gp: int, gd: int) -> tuple[int, int] | None:
    pw, dw = extra["prefill"]["num_workers"], extra["decode"]["num_workers"]
    if pw and dw:
        return int(pw), int(dw)
    return (1, 1) if n_gpus == gp + gd else None


def cases(max_conc: int) -> list[dict]:
    text = resources.files("infercast.data").joinpath("measurements.csv").read_text()
    pairs: dict[str, dict] = defaultdict(dict)
    for r in csv.DictReader(text.splitlines()):
        if r["scenario"] == "disaggregated" and r["extra"]:
            pairs[r["id"].rsplit("-", 1)[0]][r["metric"]] = r
    out = []
    for key, m in sorted(pairs.items()):
        if set(m) != {"ttft_mean_s", "tpot_mean_s"}:
            continue
        r = m["tpot_mean_s"]
        extra = json.loads(r["extra"])
        p, d = pool(extra["prefill"]), pool(extra["decode"])
        conc = int(r["concurrency"] or 0)
        if p is None or d is None or not 0 < conc <= max_conc:
            continue
        w = workers(extra, int(r["n_gpus"] or 0), p[0], d[0])
        if w is None:
            continue
        out.append(
            {
                "key": key,
                "model": r["model"],
                "hardware": r["hardware"],
                "weights": r["weights"],
                "input": int(r["input_tokens"]),
                "output": int(r["output_tokens"]),
                "concurrency": conc,
                "prefill": p,
                "decode": d,
                "workers": w,
                "engine": r["engine"],
                "ttft": float(m["ttft_mean_s"]["value"]),
                "tpot": float(r["value"]),
            }
        )
    return out


def run_case(c: dict) -> tuple[float, float]:
    (gp, ep_p, dp_p), (gd, ep_d, dp_d) = c["prefill"], c["decode"]
    cfg = build_config(
        {
            "model": c["model"],
            "hardware": c["hardware"],
            "weights": c["weights"],
            "tp": gd,
            "ep": ep_d,
            "attn_dp": dp_d,
            "seed": 0,
            "scheduler": {
                "max_num_seqs": max(256, c["concurrency"]),
                "max_num_batched_tokens": max(8192, c["concurrency"]),
            },
            "workload": {
                "concurrency": c["concurrency"],
                "num_requests": 3 * c["concurrency"],
                "input": {"mean": c["input"]},
                "output": {"mean": c["output"]},
            },
            "disaggregation": {
                "prefill": {"replicas": c["workers"][0], "tp": gp, "ep": ep_p, "attn_dp": dp_p},
                "decode": {"replicas": c["workers"][1]},
            },
        }
    )
    target = pool_step_model(cfg, cfg.disaggregation.decode, None)
    s = simulate(cfg, target).summary
    return s.ttft.mean, s.tpot.mean


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-rows", type=int, default=40)
    ap.add_argument("--max-concurrency", type=int, default=256)
    args = ap.parse_args()
    all_cases = cases(args.max_concurrency)
    step = max(1, len(all_cases) // args.max_rows)
    chosen = all_cases[::step][: args.max_rows]
    print(
        f"{len(all_cases)} representable row pairs with concurrency <= {args.max_concurrency}; "
        f"running {len(chosen)}"
    )
    errs: dict[str, list[float]] = {"ttft": [], "tpot": []}
    t0 = time.process_time()
    for c in chosen:
        try:
            ttft, tpot = run_case(c)
        except InfercastError as exc:
            print(f"  {c['key']}: skipped ({exc})")
            continue
        e1, e2 = ttft / c["ttft"] - 1, tpot / c["tpot"] - 1
        errs["ttft"].append(e1)
        errs["tpot"].append(e2)
        print(
            f"  {c['key']:44} {c['hardware']:8} {c['weights']} {c['input']}/{c['output']} "
            f"c={c['concurrency']:<4} P {c['workers'][0]}x{c['prefill'][0]} D "
            f"{c['workers'][1]}x{c['decode'][0]}: TTFT {c['ttft']:.3f} vs {ttft:.3f} ({e1:+.0%})  "
            f"TPOT {c['tpot'] * 1e3:.1f} vs {tpot * 1e3:.1f} ms ({e2:+.0%})"
        )
    for name, e in errs.items():
        if e:
            gm = math.exp(sum(math.log(1 + x) for x in e) / len(e)) - 1
            med = sorted(abs(x) for x in e)[len(e) // 2]
            print(f"{name}: {len(e)} rows, median |error| {med:.0%}, geometric-mean bias {gm:+.0%}")
    print(f"{time.process_time() - t0:.1f} CPU-s")


if __name__ == "__main__":
    main()
