"""Claim 14: H200 and B200 serve a day of traffic for fewer dollars than H100 at the same SLO.

Claim 10 compares $/M tokens at one batch; a fleet pays for a day: whole replicas,
scaled to a curve, idle at night. ``infercast fleet`` over the rising half of a diurnal
day (trough at hour 0, peak at hour 12: by symmetry the mean load of a whole day),
Llama-3.1-70B with FP8 weights and KV, one GPU per replica, eight sequences per step,
1024-token prompts and 256-token outputs, peak 1 request/s, the ``scheduled`` policy
sized per hour from each part's own saturated capacity (x 1.25), each part at its median
on-demand price in ``data/prices.csv``. $/day and kWh/day are the 12 hours x 2.
"""

from __future__ import annotations

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, infercast, main

PARTS = ("h100-sxm", "h200-sxm", "b200")
CMD = (
    "infercast fleet --profile builtin --model llama-3.1-70b --hardware {part} --weights fp8 "
    "--kv-cache fp8 --max-num-seqs 8 --input-tokens 1024 --output-tokens 256 --peak-rate 1 --hours "
    "12 --peak-hour 12 --tick-s 600 --policy scheduled --json"
)
CLAIM = {
    "id": 15,
    "claim": "H200 and B200 serve a day of traffic for fewer dollars than H100 at the same SLO",
    "where": "issue 22 (fleet economics): H100 vs H200 vs B200 $/day at the same SLO",
    "commands": [CMD.format(part="PART") + "   (PART = " + ", ".join(PARTS) + ")"],
}
KEYS = (
    "slo_attainment",
    "replica_hours",
    "usd_per_day",
    "kwh_per_day",
    "peak_replicas",
    "mean_replicas",
    "usd_per_million_tokens",
    "requests_arrived",
)


def run() -> dict:
    out = {}
    for part in PARTS:
        r = infercast(CMD.format(part=part))
        day = r["policies"]["scheduled"]["day"]
        out[part] = {
            "capacity_rps": r["replica_capacity_rps"],
            "price_per_gpu_hour": r["price_per_gpu_hour"],
            **{k: day[k] for k in KEYS},
        }
    return {"parts": out}


def verdict(r: dict) -> tuple[str, str]:
    p = r["parts"]
    rows = "; ".join(
        f"{k}: {v['capacity_rps']:.2f} req/s per GPU, {v['mean_replicas']:.2f} replicas on average "
        f"(peak {v['peak_replicas']}), ${v['usd_per_day']:.0f}/day at "
        f"${v['price_per_gpu_hour']:.2f}/GPU-h, {v['kwh_per_day']:.1f} kWh/day, SLO "
        f"{v['slo_attainment']:.1%}"
        for k, v in p.items()
    )
    h100 = p["h100-sxm"]
    same_slo = all(v["slo_attainment"] >= h100["slo_attainment"] - 0.01 for v in p.values())
    cheaper = [k for k in ("h200-sxm", "b200") if p[k]["usd_per_day"] < h100["usd_per_day"]]
    finding = rows + "."
    if len(cheaper) == 2 and same_slo:
        return REPRODUCED, finding
    if cheaper and same_slo:
        return CONDITIONAL, (
            finding + f" Only {', '.join(cheaper)} is cheaper per day: a fleet buys whole GPUs, so "
            "a part whose one replica covers the peak with room to spare pays for that room all "
            "day."
        )
    why = [f"{k} costs more per day" for k in ("h200-sxm", "b200") if k not in cheaper]
    why += [
        f"{k} is cheaper only at a lower SLO ({p[k]['slo_attainment']:.1%} vs H100's "
        f"{h100['slo_attainment']:.1%})"
        for k in cheaper
        if p[k]["slo_attainment"] < h100["slo_attainment"] - 0.01
    ]
    return REFUTED, (
        finding + " " + "; ".join(why) + ": a fleet buys whole GPUs, so the part whose one replica "
        "just covers the peak wins or loses on that rounding, not on $/M tokens at full batch."
    )


if __name__ == "__main__":
    main(__import__(__name__))
