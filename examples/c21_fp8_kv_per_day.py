"""Claim 21: an FP8 KV cache cuts a fleet's cost per day at the same SLO (what does it save?).

At one rate, FP8 KV halves the bytes per cached token, so a replica holds twice the
tokens and batches more sequences; whether that is worth dollars over a day depends on
whether KV capacity was what limited the replicas. ``infercast fleet`` over the rising
half of a diurnal day (trough at hour 0, peak at hour 12: by symmetry the mean load of a
whole day), Llama-3.1-70B with FP8 weights on one H100 SXM per replica (80 GB, about
70 GB of it weights: the KV cache gets what is left), up to 64 sequences per step,
1024-token prompts and 256-token outputs, peak 2 requests/s, the ``scheduled`` policy
sized per hour from each configuration's own saturated capacity (x 1.25), the H100's
median on-demand price in ``data/prices.csv``. The only change between the two runs is
``--kv-cache bf16`` vs ``--kv-cache fp8``. $/day and kWh/day are the 12 hours x 2.
"""

from __future__ import annotations

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, infercast, main

KV = ("bf16", "fp8")
CMD = (
    "infercast fleet --profile builtin --model llama-3.1-70b --hardware h100-sxm --weights fp8 "
    "--kv-cache {kv} --max-num-seqs 64 --input-tokens 1024 --output-tokens 256 --peak-rate 2 "
    "--hours 12 --peak-hour 12 --tick-s 600 --policy scheduled --json"
)
CLAIM = {
    "id": 21,
    "claim": "an FP8 KV cache cuts a fleet's cost per day at the same SLO",
    "where": "issue 22 (fleet economics): what FP8 KV saves per day",
    "commands": [CMD.format(kv="KV") + "   (KV = " + ", ".join(KV) + ")"],
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
    "ttft_p99_s",
    "tpot_p99_s",
)


def run() -> dict:
    out = {}
    for kv in KV:
        r = infercast(CMD.format(kv=kv))
        day = r["policies"]["scheduled"]["day"]
        out[kv] = {"capacity_rps": r["replica_capacity_rps"], **{k: day[k] for k in KEYS}}
    return {"kv_cache": out}


def verdict(r: dict) -> tuple[str, str]:
    b, f = r["kv_cache"]["bf16"], r["kv_cache"]["fp8"]
    rows = "; ".join(
        f"{k} KV: {v['capacity_rps']:.2f} req/s per replica, {v['mean_replicas']:.2f} replicas on "
        f"average (peak {v['peak_replicas']}), ${v['usd_per_day']:.0f}/day, {v['kwh_per_day']:.1f} "
        f"kWh/day, SLO {v['slo_attainment']:.1%}"
        for k, v in r["kv_cache"].items()
    )
    saved = b["usd_per_day"] - f["usd_per_day"]
    finding = rows + f". FP8 KV saves ${saved:,.0f}/day ({saved / b['usd_per_day']:.0%})"
    finding += f" and {b['kwh_per_day'] - f['kwh_per_day']:.1f} kWh/day."
    same_slo = f["slo_attainment"] >= b["slo_attainment"] - 0.01
    gain = f["capacity_rps"] / b["capacity_rps"] - 1
    why = (
        f" One replica's saturated capacity rises {gain:.0%} (twice the cached tokens: a larger "
        "batch), but a day buys whole replicas over a curve, so the bill falls "
        f"{saved / b['usd_per_day']:.0%}: the saving is where the peak's rounding and the night's "
        "minimum of one replica let it show."
    )
    if saved > 0.05 * b["usd_per_day"] and same_slo:
        return REPRODUCED, finding + why
    if saved > 0 and same_slo:
        return CONDITIONAL, finding + why + " Here that is small."
    return REFUTED, (
        finding
        + " FP8 KV does not lower the day's cost here"
        + ("" if same_slo else " at the same SLO")
        + ": the replicas were not KV-bound."
    )


if __name__ == "__main__":
    main(__import__(__name__))
