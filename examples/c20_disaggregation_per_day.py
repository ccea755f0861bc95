"""Claim 20: disaggregated serving pays over a day of traffic, not only at one rate.

Claim 9 compares layouts at one rate. A fleet serves a day: the rate falls at night,
and a disaggregated deployment cannot shrink below one prefill plus one decode
replica, while an aggregated one can run on one GPU. Here the day is the diurnal curve
``infercast fleet`` uses (``fleet/load.py``: peak 20 requests/s at hour 14, trough
20 % of it), on claim 9's prefill-heavy load (4000-token prompts, 200-token outputs)
under its tight SLO (p99 TTFT 2 s, p99 TPOT 15 ms), Llama-3.1-8B BF16 on H100 SXM.
``infercast plan`` finds the fewest GPUs meeting the SLO, aggregated and disaggregated
(P:D 1:1, 2:1, 1:2), at four rate levels (5, 10, 15, 20 requests/s); each hour of the
day runs on the plan of the lowest level at or above its busiest minute (an operator's
hourly schedule, as the ``scheduled`` policy). GPU-hours per day = the sum over hours.
"""

from __future__ import annotations

from _gallery import CONDITIONAL, REFUTED, REPRODUCED, cheapest_option, infercast, main

LEVELS = (5, 10, 15, 20)
PEAK, TROUGH, PEAK_HOUR = 20.0, 0.2, 14.0
PLAN = (
    "infercast plan --profile builtin --model llama-3.1-8b --hardware h100-sxm --tp 1 --precision "
    "bf16/bf16 --batch-caps 256 --chunks 8192 --no-speculative --disagg-ratios 1:1,2:1,1:2 "
    "--executor serial --alternatives 10 --input-tokens 4000 --output-tokens 200 --num-prompts 300 "
    "--slo-ttft-ms 2000 --slo-tpot-ms 15 --request-rate {rate} --json"
)
CLAIM = {
    "id": 20,
    "claim": "disaggregated serving pays over a day of traffic, not only at one rate",
    "where": "issue 22 (fleet economics): when does disaggregation pay over a day, not at one rate",
    "commands": [PLAN.format(rate="R") + "   (R = " + ", ".join(map(str, LEVELS)) + ")"],
}


def _hourly_peaks() -> list[float]:
    from infercast.fleet.load import diurnal_rates

    per_minute = diurnal_rates(PEAK, 24.0, TROUGH, PEAK_HOUR)
    return [float(per_minute[h * 60 : (h + 1) * 60].max()) for h in range(24)]


def run() -> dict:
    levels = {}
    for rate in LEVELS:
        p = infercast(PLAN.format(rate=rate))
        levels[str(rate)] = {
            "aggregated": cheapest_option(p, False),
            "disaggregated": cheapest_option(p, True),
        }
    peaks = _hourly_peaks()
    hour_level = [str(min(lv for lv in LEVELS if lv >= r - 1e-9)) for r in peaks]
    day = {}
    for kind in ("aggregated", "disaggregated"):
        plans = [levels[lv][kind] for lv in hour_level]
        day[kind] = {
            "gpu_hours": sum(p["num_gpus"] for p in plans),
            "usd_per_day": sum(p["cost_per_hour"] for p in plans),
        }
    return {
        "levels": levels,
        "hour_level": hour_level,
        "day": day,
        "benefit_at_peak": levels["20"]["aggregated"]["cost_per_hour"]
        / levels["20"]["disaggregated"]["cost_per_hour"],
        "benefit_over_day": day["aggregated"]["usd_per_day"] / day["disaggregated"]["usd_per_day"],
    }


def verdict(r: dict) -> tuple[str, str]:
    lv = r["levels"]
    per_level = ", ".join(
        f"{k} req/s {v['aggregated']['num_gpus']} vs {v['disaggregated']['num_gpus']}"
        for k, v in lv.items()
    )
    hours = {k: r["hour_level"].count(k) for k in lv}
    a, d = r["day"]["aggregated"], r["day"]["disaggregated"]
    finding = (
        f"GPUs aggregated vs disaggregated: {per_level}; hours of the day at each level: "
        + ", ".join(f"{k} req/s {n} h" for k, n in hours.items())
        + f". Per day: {a['gpu_hours']} vs {d['gpu_hours']} GPU-hours (${a['usd_per_day']:,.0f} vs "
        f"${d['usd_per_day']:,.0f}): {r['benefit_over_day']:.2f}x over the day vs "
        f"{r['benefit_at_peak']:.2f}x at the peak rate."
    )
    day_b, peak_b = r["benefit_over_day"], r["benefit_at_peak"]
    low = lv[min(lv, key=float)]
    night = (
        f" At {min(lv, key=float)} req/s the split needs {low['disaggregated']['num_gpus']} GPUs, "
        f"aggregated {low['aggregated']['num_gpus']}: its smallest unit (a prefill plus a decode "
        "replica) leaves no room to shrink at night."
    )
    if day_b > 1.05 and day_b >= peak_b - 0.05:
        return (
            REPRODUCED,
            finding + " The split pays at every level of the day, so it pays over the day.",
        )
    if day_b > 1.05:
        return (
            CONDITIONAL,
            finding + " The split pays over the day, but less than at the peak." + night,
        )
    return REFUTED, (
        finding + " Over the day the split does not pay: the hours at low rates, where a "
        "prefill-plus-decode pair is more than the load needs, outweigh its advantage at the peak."
    )


if __name__ == "__main__":
    main(__import__(__name__))
