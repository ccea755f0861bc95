"""Claim 13: a fleet sized for its peak pays for idle GPUs most of the day.

``infercast fleet`` over the rising half of a diurnal day (trough at hour 0, peak at
hour 12: by symmetry the same mean load as a whole day), Llama-3.1-8B BF16 replicas on
H100 SXM with one sequence per step (a small replica, so a day needs few requests to
need several replicas), 512-token prompts and outputs. Two policies on the same
arrivals: ``fixed`` at the replicas the peak needs (capacity x 1.25 headroom) and
``predictive`` (Holt's forecast of the arrivals, one start time ahead). The idle cost
is what the fixed fleet pays beyond the autoscaled one, at the SLO each reaches.
"""

from __future__ import annotations

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, infercast, main

CMD = (
    "infercast fleet --profile builtin --model llama-3.1-8b --hardware h100-sxm --weights bf16 "
    "--max-num-seqs 1 --input-tokens 512 --output-tokens 512 --peak-rate 0.6 --hours 12 "
    "--peak-hour 12 --tick-s 300 --policy fixed,predictive --json"
)
CLAIM = {
    "id": 14,
    "claim": "A fleet sized for its peak pays for idle capacity: its daily cost vs an autoscaled "
    "fleet at the same SLO",
    "where": "issue 22 (fleet economics): idle cost of a fleet sized for peak",
    "commands": [CMD],
}
KEYS = (
    "slo_attainment",
    "replica_hours",
    "usd",
    "energy_kwh",
    "peak_replicas",
    "mean_replicas",
    "mean_utilization",
    "requests_arrived",
)


def run() -> dict:
    out = infercast(CMD)
    days = {k: {x: v["day"][x] for x in KEYS} for k, v in out["policies"].items()}
    f, p = days["fixed"], days["predictive"]
    return {
        "replica_capacity_rps": out["replica_capacity_rps"],
        "replica_start_s": out["replica_start_s"],
        "price_per_gpu_hour": out["price_per_gpu_hour"],
        "policies": days,
        "idle_usd": f["usd"] - p["usd"],
        "idle_share_of_fixed_bill": (f["usd"] - p["usd"]) / f["usd"],
        "energy_saved_kwh": f["energy_kwh"] - p["energy_kwh"],
    }


def verdict(r: dict) -> tuple[str, str]:
    f, p = r["policies"]["fixed"], r["policies"]["predictive"]
    finding = (
        f"Fixed at the peak's {f['peak_replicas']} replicas: ${f['usd']:.2f} and "
        f"{f['energy_kwh']:.2f} kWh for 12 h, SLO met by {f['slo_attainment']:.1%}, replicas busy "
        f"{f['mean_utilization']:.0%} of the time; predictive autoscaling: "
        f"{p['mean_replicas']:.2f} replicas on average, ${p['usd']:.2f}, {p['energy_kwh']:.2f} "
        f"kWh, SLO {p['slo_attainment']:.1%}. Idle capacity is {r['idle_share_of_fixed_bill']:.0%} "
        "of the fixed fleet's bill (energy falls less: an idle GPU still draws 80 W, a busy one "
        "~270 W)."
    )
    if r["idle_share_of_fixed_bill"] >= 0.15 and p["slo_attainment"] >= f["slo_attainment"] - 0.01:
        return REPRODUCED, finding
    if r["idle_share_of_fixed_bill"] >= 0.15:
        return (
            CONDITIONAL,
            finding
            + " The autoscaled fleet saves it only by giving up some SLO attainment while replicas "
            "start.",
        )
    return REFUTED, finding


if __name__ == "__main__":
    main(__import__(__name__))
