"""Claim 10: H200's 4.8 TB/s and 141 GB and B200's 8 TB/s shift decode cost: $/M tokens at the same
SLO.

``infercast estimate`` for Llama-3.1-70B with FP8 weights and FP8 KV on one GPU
of each part, context 2048: the largest batch that fits in memory and keeps the
expected TPOT within 50 ms, its tokens/s per GPU, and $/M output tokens at the
part's median on-demand price in ``data/prices.csv``. MI300X has no quote there:
its $/M is shown at price parity with the H100 quote, an ASSUMPTION (its tokens/s
per GPU is the model's; apply your own price).
"""

from __future__ import annotations

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, infercast, main

PARTS = ("h100-sxm", "h200-sxm", "b200", "mi300x")
H100_TP2 = (
    " --tp 2"  # two H100s: the same 160 GB class of memory as one H200, at H100 bandwidth per GPU
)
SLO_TPOT_S = 0.050
BATCHES = ",".join(map(str, sorted({1, 2, 4} | set(range(8, 1025, 8)))))
EST = (
    "infercast estimate --profile builtin --model llama-3.1-70b --hardware {part} --weights fp8 "
    "--kv-cache fp8 --context 2048 --batch {batches}{price} --json"
)
CLAIM = {
    "id": 10,
    "claim": "H200's 4.8 TB/s and 141 GB and B200's 8 TB/s shift decode cost: $/M tokens for one "
    "model on H100, H200, B200 (and MI300X) at the same SLO",
    "where": "seed, the hardware section",
    "commands": [
        EST.format(part="PART", batches="1,2,4,8,16,...,1024", price="")
        + "   (PART = "
        + ", ".join(PARTS)
        + "; MI300X with --price = the H100 quote, an assumption; and H100 with --tp 2)"
    ],
}


def _best(est: dict) -> dict:
    ok = [d for d in est["decode"] if d["fits"] and d["step_time_s"] <= SLO_TPOT_S]
    d = max(ok, key=lambda x: x["batch"])
    return {
        "batch": d["batch"],
        "tpot_s": d["step_time_s"],
        "tokens_per_s": d["tokens_per_s"],
        "max_batch_memory": est["memory"]["max_batch"],
        "price_per_hour": est["cost"]["price_per_hour"],
        "price_source": est["cost"]["price_source"],
        "usd_per_million": d["cost_per_million_output_tokens"],
    }


def run() -> dict:
    out = {}
    h100_price = None
    for part in PARTS:
        price = f" --price {h100_price}" if part == "mi300x" else ""
        out[part] = _best(infercast(EST.format(part=part, batches=BATCHES, price=price)))
        if part == "h100-sxm":
            h100_price = out[part]["price_per_hour"]
    tp2 = _best(infercast(EST.format(part="h100-sxm", batches=BATCHES, price=H100_TP2)))
    tp2["tokens_per_s"] /= 2  # per GPU
    out["h100-sxm x2 (TP2)"] = tp2
    return {"slo_tpot_s": SLO_TPOT_S, "parts": out}


def verdict(r: dict) -> tuple[str, str]:
    p = r["parts"]
    rows = "; ".join(
        f"{k}: batch {v['batch']} (memory allows {v['max_batch_memory']}), "
        f"{v['tokens_per_s']:,.0f} tok/s/GPU, ${v['usd_per_million']:.2f}/M at "
        f"${v['price_per_hour']:.2f}/GPU-h" + (" (assumed = H100 price)" if k == "mi300x" else "")
        for k, v in p.items()
    )
    finding = f"TPOT <= {r['slo_tpot_s'] * 1e3:.0f} ms, context 2048: {rows}."
    h100 = p["h100-sxm"]
    cheaper = [k for k in ("h200-sxm", "b200") if p[k]["usd_per_million"] < h100["usd_per_million"]]
    if len(cheaper) == 2:
        return REPRODUCED, (
            finding + " H200 and B200 cut $/M by "
            f"{h100['usd_per_million'] / p['h200-sxm']['usd_per_million']:.1f}x and "
            f"{h100['usd_per_million'] / p['b200']['usd_per_million']:.1f}x vs H100; on one GPU "
            "the H100 is capacity-bound (70 GB of FP8 weights leave little KV room): two H100s at "
            f"TP2 reach ${p['h100-sxm x2 (TP2)']['usd_per_million']:.2f}/M. Prices are single "
            "median quotes; MI300X's $/M is an assumption."
        )
    if cheaper:
        return CONDITIONAL, finding
    return REFUTED, finding


if __name__ == "__main__":
    main(__import__(__name__))
