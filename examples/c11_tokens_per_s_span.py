"""Claim 11: "10k tok/s" is meaningless without batch, context and precision.

``infercast estimate`` for one model (Llama-3.1-8B on one H100 SXM) over
precision (BF16, FP8 weights + FP8 KV, INT4 weights + FP8 KV), context (512,
8192, 32768) and batch (powers of two from 1 while they fit). The span is the ratio
of the highest to the lowest decode tokens/s among configurations that fit.
"""

from __future__ import annotations

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, infercast, main

PRECISIONS = {
    "bf16": "--weights bf16",
    "fp8+fp8kv": "--weights fp8 --kv-cache fp8",
    "int4+fp8kv": "--weights int4 --kv-cache fp8",
}
CONTEXTS = (512, 8192, 32768)
BATCHES = ",".join(str(2**i) for i in range(13))  # 1 ... 4096; rows that do not fit are dropped
EST = (
    "infercast estimate --profile builtin --model llama-3.1-8b --hardware h100-sxm {flags} "
    "--context {ctx} --batch {batches} --json"
)
CLAIM = {
    "id": 11,
    "claim": '"10k tok/s" is meaningless without batch, context and precision: one model\'s '
    "tokens/s spans "
    "two orders of magnitude across them",
    "where": "seed, the closing advice on reading throughput numbers",
    "commands": [
        EST.format(flags="--weights W [--kv-cache fp8]", ctx="C", batches="1,2,4,...,4096")
        + "   (W = bf16, fp8, int4; C = "
        + ", ".join(map(str, CONTEXTS))
        + "; rows that fit)"
    ],
}


def run() -> dict:
    points = []
    for name, flags in PRECISIONS.items():
        for ctx in CONTEXTS:
            for d in infercast(EST.format(flags=flags, ctx=ctx, batches=BATCHES))["decode"]:
                if d["fits"]:
                    points.append(
                        {
                            "precision": name,
                            "context": ctx,
                            "batch": d["batch"],
                            "tokens_per_s": d["tokens_per_s"],
                        }
                    )
    lo = min(points, key=lambda p: p["tokens_per_s"])
    hi = max(points, key=lambda p: p["tokens_per_s"])
    capped = [p for p in points if p["batch"] <= 256]  # vLLM's default max_num_seqs
    hi256 = max(capped, key=lambda p: p["tokens_per_s"])
    return {
        "num_points": len(points),
        "lowest": lo,
        "highest": hi,
        "span": hi["tokens_per_s"] / lo["tokens_per_s"],
        "highest_batch_le_256": hi256,
        "span_batch_le_256": hi256["tokens_per_s"] / lo["tokens_per_s"],
        "count_near_10k": sum(1 for p in points if 8000 <= p["tokens_per_s"] <= 12000),
    }


def verdict(r: dict) -> tuple[str, str]:
    lo, hi = r["lowest"], r["highest"]

    def show(p: dict) -> str:
        return (
            f"{p['tokens_per_s']:,.0f} tok/s ({p['precision']}, context {p['context']}, batch "
            f"{p['batch']})"
        )

    finding = (
        f"{r['num_points']} configurations that fit: from {show(lo)} to {show(hi)}, a "
        f"{r['span']:.0f}x span; with batch capped at 256 (vLLM's default max_num_seqs) the top is "
        f"{show(r['highest_batch_le_256'])}, still {r['span_batch_le_256']:.0f}x. "
        f"{r['count_near_10k']} of them land within 8-12k tok/s."
    )
    if r["span_batch_le_256"] >= 100:
        return REPRODUCED, finding
    if r["span"] >= 10:
        return CONDITIONAL, finding
    return REFUTED, finding


if __name__ == "__main__":
    main(__import__(__name__))
