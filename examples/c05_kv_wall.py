"""Claim 5: at long context or large batch the KV cache, not the weights, is the wall.

From ``infercast estimate --profile builtin --json``: weight bytes per GPU and KV bytes per token.
KV bytes read per decode step = kv_bytes_per_token x context x batch, so KV
passes the weights when context x batch > weight_bytes / kv_bytes_per_token.
For each context, the batch where that happens and whether it fits in memory
(the memory plan's max batch); checked on the decode rows by the share of the
step's bytes that are KV at that batch.
"""

from __future__ import annotations

import math

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, decode_row, infercast, main

CASES = {
    "llama-3.1-8b bf16": "--model llama-3.1-8b --weights bf16",
    "llama-3.1-70b fp8/fp8 KV": "--model llama-3.1-70b --weights fp8 --kv-cache fp8",
}
CONTEXTS = (2048, 8192, 32768, 131072)
CLAIM = {
    "id": 5,
    "claim": "the KV cache, not the weights, becomes the wall at long context or large batch",
    "where": "seed, the KV-cache / memory-wall section",
    "commands": [
        f"infercast estimate --profile builtin --hardware h100-sxm {flags} --context C --batch 1,B "
        f"--json   (C = {', '.join(map(str, CONTEXTS))}; B = the crossover batch)"
        for flags in CASES.values()
    ],
}


def _case(flags: str) -> dict:
    base = infercast(
        f"infercast estimate --profile builtin --hardware h100-sxm {flags} --batch 1 --json"
    )
    weight_b, kv_tok = base["memory"]["weight_bytes"], base["model"]["kv_bytes_per_token"]
    cross_tokens = weight_b / kv_tok
    rows = {}
    for ctx in CONTEXTS:
        b = max(1, math.ceil(cross_tokens / ctx))
        e = infercast(
            f"infercast estimate --profile builtin --hardware h100-sxm {flags} --context {ctx} "
            f"--batch 1,{b} --json"
        )
        d1, db = decode_row(e, 1), decode_row(e, b)
        rows[str(ctx)] = {
            "crossover_batch": b,
            "max_batch": e["memory"]["max_batch"],
            "kv_share_of_bytes": kv_tok * ctx * b / db["bytes"],
            "step_ratio_vs_batch1": db["step_time_s"] / d1["step_time_s"],
        }
    return {
        "weight_bytes": weight_b,
        "kv_bytes_per_token": kv_tok,
        "crossover_tokens": cross_tokens,
        "by_context": rows,
    }


def run() -> dict:
    return {name: _case(flags) for name, flags in CASES.items()}


def _line(name: str, c: dict) -> str:
    parts = []
    for ctx, row in c["by_context"].items():
        fit = (
            f"fits; KV {row['kv_share_of_bytes']:.0%} of the step's bytes"
            if row["crossover_batch"] <= row["max_batch"]
            else f"does not fit: max batch {row['max_batch']}"
        )
        parts.append(f"{int(ctx) // 1024}k: batch {row['crossover_batch']} ({fit})")
    return (
        f"{name}: weights {c['weight_bytes'] / 1e9:.1f} GB, KV {c['kv_bytes_per_token'] / 1e3:.0f} "
        f"kB/token, KV passes weights at context x batch = {c['crossover_tokens'] / 1e3:.0f}k "
        "tokens; " + ", ".join(parts)
    )


def verdict(r: dict) -> tuple[str, str]:
    finding = "; ".join(_line(n, c) for n, c in r.items()) + "."
    reachable = [
        n
        for n, c in r.items()
        if any(row["crossover_batch"] <= row["max_batch"] for row in c["by_context"].values())
    ]
    capacity_bound = [
        n
        for n, c in r.items()
        if n not in reachable
        and all(row["max_batch"] < row["crossover_batch"] for row in c["by_context"].values())
    ]
    if len(reachable) == len(r):
        return REPRODUCED, finding + " KV traffic passes the weights within memory in every case."
    if reachable and len(reachable) + len(capacity_bound) == len(r):
        return REPRODUCED, (
            finding + f" For {', '.join(reachable)} KV traffic passes the weights within memory; "
            f"for {', '.join(capacity_bound)} the KV cache is the wall as capacity first (the "
            "few GB left beside the weights cap the batch before KV traffic can pass them)."
        )
    if reachable:
        return CONDITIONAL, finding
    return REFUTED, finding


if __name__ == "__main__":
    main(__import__(__name__))
