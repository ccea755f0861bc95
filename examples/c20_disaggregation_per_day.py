"""Claim 20: disaggregated serving pays over a day of traffic, not only at one rate.

Claim 9 compares layouts at one rate. A fleet serves a day: the rate falls at night, and
a disaggregated unit cannot shrink below one prefill plus one decode replica, while an
aggregated fleet can run on one GPU. Here ``infercast fleet`` runs the same day on both:
the rising half of the diurnal curve (``fleet/load.py``: trough 20 % of the peak at hour
0, peak 3 requests/s at hour 12; by symmetry the mean load of a whole day) on claim 9's
prefill-heavy load (4000-token prompts, 200-token outputs) under its tight TPOT SLO
(15 ms; TTFT 2 s), Llama-3.1-8B BF16 on H100 SXM, under the ``scheduled`` policy (sized
per hour from the day's curve and one member's saturated capacity x ``--headroom``).
Members: aggregated replicas (1 GPU) at the default headroom 1.25 and at 2.5 (twice the
replicas per unit of rate: sizing on saturated throughput is blind to the TPOT SLO), and
disaggregated units of one prefill and one decode replica (2 GPUs). "The same SLO" is
99 % of the day's requests meeting it: each kind's cheapest day that reaches it is
compared.
"""

from __future__ import annotations

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, infercast, main

TARGET = 0.99
CMD = (
    "infercast fleet --profile builtin --model llama-3.1-8b --hardware h100-sxm --weights bf16 "
    "--input-tokens 4000 --output-tokens 200 --slo-tpot-ms 15 --peak-rate 3 --hours 12 "
    "--peak-hour 12 --tick-s 600 --policy scheduled --json"
)
SETUPS = {
    "aggregated, headroom 1.25": "",
    "aggregated, headroom 2.5": "--headroom 2.5",
    "1P+1D units, headroom 1.25": "--disaggregated",
}
CLAIM = {
    "id": 20,
    "claim": "disaggregated serving pays over a day of traffic, not only at one rate",
    "where": "issue 22 (fleet economics): when does disaggregation pay over a day, not at one rate",
    "commands": [
        f"{CMD} SETUP   (SETUP = nothing, " + ", ".join(v for v in SETUPS.values() if v) + ")"
    ],
}
KEYS = (
    "slo_attainment",
    "replica_hours",
    "gpu_hours",
    "usd",
    "energy_kwh",
    "peak_replicas",
    "tpot_p99_s",
    "requests_arrived",
)


def run() -> dict:
    days = {}
    for name, flags in SETUPS.items():
        out = infercast(f"{CMD} {flags}".strip())
        d = out["policies"]["scheduled"]["day"]
        days[name] = {
            "member": d["member"],
            "gpus_per_member": out["gpus_per_replica"],
            "capacity_rps": out["replica_capacity_rps"],
            **{k: d[k] for k in KEYS},
        }
    best = {}
    for kind in ("aggregated", "units"):
        fits = [k for k, v in days.items() if (kind in k) and v["slo_attainment"] >= TARGET]
        best[kind] = min(fits, key=lambda k: days[k]["usd"]) if fits else None
    a, d = best["aggregated"], best["units"]
    ratio = days[a]["usd"] / days[d]["usd"] if a and d else None
    return {"target_slo": TARGET, "days": days, "cheapest": best, "aggregated_over_units": ratio}


def verdict(r: dict) -> tuple[str, str]:
    days = r["days"]
    rows = "; ".join(
        f"{k}: SLO {v['slo_attainment']:.1%}, {v['gpu_hours']:.1f} GPU-h, ${v['usd']:.2f}, "
        f"{v['energy_kwh']:.2f} kWh, p99 TPOT {1e3 * v['tpot_p99_s']:.1f} ms, peak "
        f"{v['peak_replicas']} {v['member']}(s)"
        for k, v in days.items()
    )
    a, d = r["cheapest"]["aggregated"], r["cheapest"]["units"]
    finding = f"12 h, {days[next(iter(days))]['requests_arrived']:,} requests. {rows}."
    if d is None:
        return REFUTED, finding + f" No day of units reaches {r['target_slo']:.0%} of the SLO."
    if a is None:
        return (
            CONDITIONAL,
            finding + f" Only the units reach {r['target_slo']:.0%}: aggregated replicas would "
            "need more headroom than tried here.",
        )
    ratio = r["aggregated_over_units"]
    if ratio > 1.05:
        return REPRODUCED, finding + (
            f" At {r['target_slo']:.0%} of the SLO the units' day costs {1 / ratio:.2f}x the "
            "aggregated one's."
        )
    return REFUTED, finding + (
        f" At {r['target_slo']:.0%} of the SLO the aggregated day ({a}) costs {ratio:.2f}x the "
        "units': at this fleet's size (one member covers most hours) a unit's two GPUs cannot "
        "shrink at night, while aggregated replicas add a second GPU only for the peak hours. "
        "The split pays at one high rate (claim 9: half the GPUs at 20 req/s), not on a day "
        "whose peak one unit covers."
    )


if __name__ == "__main__":
    main(__import__(__name__))
