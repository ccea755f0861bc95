"""Is TensorRT-LLM's PyTorch flow host-bound on small-active MoE models? Two checks of the set.

    python benchmarks/trtllm_host_evidence.py [--token-us 0,10,20,30]

1. GB200 / B200 throughput of the same offline row (source, model, lengths, metric): the two carry
   the same Blackwell GPU and differ in the host (Grace against the DGX B200's x86), so a ratio
   well under 1 where dense models run above 1 points at the host, not at a GPU-side cost.
2. The profile's additive per-sampled-row host cost (``token_overhead_s``) set on every
   ``*/trtllm`` group of the shipped profile (other fields kept), the TensorRT-LLM perf-overview
   v0.20, v1.0 and latest rows predicted in closed form: median signed error per source, model and
   part at each value, and the median absolute error of them all.

docs/history/validation.md ("v0.9 and v1.0 held out") reads both.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from infercast.cost.profiles import load_profile_set
from infercast.validate.cases import load_cases
from infercast.validate.evaluate import Evaluator
from infercast.validate.ledger import profile_matrix

SOURCES = ("trtllm-perf-overview-v0.20", "trtllm-perf-overview-v1.0", "trtllm-perf-overview-latest")


def host_ratios(cases) -> None:
    pairs: dict[tuple, dict[str, float]] = defaultdict(dict)
    for c in cases:
        if c.hardware in ("b200", "gb200") and c.scenario == "offline":
            key = (c.source, c.model, c.tp, c.input_tokens, c.output_tokens, c.metric)
            pairs[key][c.hardware] = c.value
    by: dict[tuple, list[str]] = defaultdict(list)
    for (src, model, tp, i, o, _), v in sorted(pairs.items()):
        if len(v) == 2:
            by[(src, model, tp)].append(f"{i}/{o} {v['gb200'] / v['b200']:.2f}")
    print("GB200 / B200, same offline row:")
    for (src, model, tp), cells in sorted(by.items()):
        print(f"  {src} {model} tp{tp}: {', '.join(cells)}")


def token_trial(cases, values_s: list[float]) -> None:
    ev = Evaluator([c for c in cases if c.source in SOURCES], simulate=False)
    ship = load_profile_set("shipped")
    rows = np.array(ev.predictable)
    meas = np.array([c.value for c in ev.cases])[rows]
    err = {}
    for v in values_s:
        profs = [
            ship.for_group(g).with_updates(token_overhead_s=v)
            if g.endswith("/trtllm")
            else ship.for_group(g)
            for g in ev.groups
        ]
        err[v] = ev.values(profile_matrix(profs), rows=rows)[rows] / meas - 1
    by = defaultdict(list)
    for j, i in enumerate(rows):
        c = ev.cases[i]
        by[(c.source.removeprefix("trtllm-perf-overview-"), c.model, c.hardware)].append(j)
    us = " / ".join(f"{v * 1e6:g}" for v in values_s)
    print(f"token_overhead_s on */trtllm at {us} us: median signed error")
    for k, js in sorted(by.items()):
        print(
            f"  {' '.join(k):40s} {len(js):3d} "
            + " ".join(f"{np.median(err[v][js]):+.2f}" for v in err)
        )
    print(
        "  median |error| %: "
        + " / ".join(f"{np.median(np.abs(e)) * 100:.1f}" for e in err.values())
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--token-us", default="0,10,20,30")
    args = ap.parse_args()
    cases = load_cases()
    host_ratios(cases)
    token_trial(cases, [float(x) * 1e-6 for x in args.token_us.split(",")])


if __name__ == "__main__":
    main()
