"""Claim 20: disaggregated serving pays over a day of traffic, not only at one rate.

Claim 9 compares layouts at one rate. A fleet serves a day: the rate falls at night, and
a disaggregated unit cannot shrink below one prefill plus one decode replica, while an
aggregated fleet can run on one GPU. Here ``infercast fleet`` runs the same day on both:
the rising half of the diurnal curve (``fleet/load.py``: trough 20 % of the peak at hour
0, peak at hour 12; by symmetry the mean load of a whole day) at two peaks, 3 and 20
requests/s (claim 9's rate), on claim 9's prefill-heavy load (4000-token prompts, 200-token
outputs) under its tight TPOT SLO (15 ms; TTFT 2 s), Llama-3.1-8B BF16 on H100 SXM, under
the ``scheduled`` policy (sized per hour from the day's curve and one member's saturated
capacity x ``--headroom``). Members: aggregated replicas (1 GPU) at headroom 1.25 (the
default), 2.0 and 2.5 (more replicas per unit of rate: sizing on saturated throughput is
blind to the TPOT SLO), and disaggregated units of one prefill and one decode replica (2
GPUs) at 1.25. "The same SLO" is 99 % of the day's requests meeting it: on each day each
kind's cheapest setup that reaches it is compared; a saving under 5 % does not count.
"""

from __future__ import annotations

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, infercast, main

TARGET = 0.99
CMD = (
    "infercast fleet --profile builtin --model llama-3.1-8b --hardware h100-sxm --weights bf16 "
    "--input-tokens 4000 --output-tokens 200 --slo-tpot-ms 15 --peak-rate PEAK --hours 12 "
    "--peak-hour 12 --tick-s 600 --policy scheduled --json"
)
PEAKS_RPS = (3, 20)
SETUPS = {
    "aggregated, headroom 1.25": "",
    "aggregated, headroom 2.0": "--headroom 2.0",
    "aggregated, headroom 2.5": "--headroom 2.5",
    "1P+1D units, headroom 1.25": "--disaggregated",
}
CLAIM = {
    "id": 20,
    "claim": "disaggregated serving pays over a day of traffic, not only at one rate",
    "where": "issue 22 (fleet economics): when does disaggregation pay over a day, not at one rate",
    "commands": [
        f"{CMD} SETUP   (PEAK = "
        + ", ".join(map(str, PEAKS_RPS))
        + "; SETUP = nothing, "
        + ", ".join(v for v in SETUPS.values() if v)
        + ")"
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


def one_day(peak_rps: float) -> dict:
    """Every setup on one day, and each kind's cheapest day that meets the target."""
    days = {}
    for name, flags in SETUPS.items():
        out = infercast(f"{CMD.replace('PEAK', str(peak_rps))} {flags}".strip())
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
    return {"days": days, "cheapest": best, "aggregated_over_units": ratio}


def run() -> dict:
    return {
        "target_slo": TARGET,
        "peaks": {f"peak {p} req/s": one_day(p) for p in PEAKS_RPS},
    }


def _describe(name: str, day: dict) -> str:
    days = day["days"]
    rows = "; ".join(
        f"{k}: SLO {v['slo_attainment']:.1%}, {v['gpu_hours']:.1f} GPU-h, ${v['usd']:.2f}, "
        f"{v['energy_kwh']:.2f} kWh, p99 TPOT {1e3 * v['tpot_p99_s']:.1f} ms, peak "
        f"{v['peak_replicas']} {v['member']}(s)"
        for k, v in days.items()
    )
    a, d = day["cheapest"]["aggregated"], day["cheapest"]["units"]
    head = f"{name} (12 h, {days[next(iter(days))]['requests_arrived']:,} requests): {rows}. "
    if a is None or d is None:
        return head + f"Cheapest at 99 %: aggregated {a}, units {d}."
    return head + (
        f"Cheapest at 99 %: {a} vs {d}; aggregated / units dollars "
        f"{day['aggregated_over_units']:.2f}."
    )


def verdict(r: dict) -> tuple[str, str]:
    finding = " ".join(_describe(name, day) for name, day in r["peaks"].items())
    ratios = {n: d["aggregated_over_units"] for n, d in r["peaks"].items()}
    if any(v is None for v in ratios.values()):
        return CONDITIONAL, finding + " One kind missed the target on some day (see above)."
    pays = [n for n, v in ratios.items() if v > 1.05]
    if len(pays) == len(ratios):
        return REPRODUCED, finding + " The units' day is cheaper by more than 5 % at every peak."
    if pays:
        return CONDITIONAL, finding + (
            f" The split pays over a day only at {', '.join(pays)}: a unit's two GPUs cannot "
            "shrink at night, so the saving at the peak must outweigh the idle night."
        )
    return REFUTED, finding + (
        " On neither day does the units' day cost 5 % less than the aggregated one at the "
        "same SLO: at a 3 req/s peak one member covers most hours, and a unit's two GPUs "
        "cannot shrink at night while aggregated replicas add a GPU only for the peak hours; "
        "at claim 9's 20 req/s, where the split halved the GPUs at one rate, the day's "
        "trough and the aggregated fleet's finer steps leave a few percent. Prefill-heavy "
        "load, one dense 8B model, scheduled sizing."
    )


if __name__ == "__main__":
    main(__import__(__name__))
