"""The tables and lines ``infercast fleet`` prints: one row per policy's day (``fleet/day.py``'s
report), the replica's (or unit's) economics, each policy's bottleneck story.

On a day of disaggregated units (the header has ``unit``) every count the day reports under
``replica_*`` keys counts units; the table names them units and shows GPU-hours beside them."""

from __future__ import annotations


def _fmt(v, spec: str, none: str = "-") -> str:
    return none if v is None or v != v else format(v, spec)


def print_fleet(
    header: dict, runs: dict, storage_bytes_per_s: float, warmup_s: float, plot: str | None
) -> None:
    """The fleet's header lines, the day per policy, each policy's bottleneck story."""
    from rich.table import Table

    from infercast.report.console import make_console

    c = make_console()
    h = header
    c.print(
        f"fleet: {h['model']} ({h['weights']}) on {h['hardware']} TP{h['tp']}; {h['load']}; "
        f"~{h['expected_requests']:,.0f} requests over {h['hours']:g} h"
    )
    one = f"one unit ({h['unit']})" if "unit" in h else "one replica"
    c.print(
        f"{one}: {h['replica_capacity_rps']:.2f} req/s saturated, "
        f"starts in {h['replica_start_s']:.0f} s "
        f"(weights / {storage_bytes_per_s / 1e9:g} GB/s + {warmup_s:g} s warm-up); "
        f"price {_fmt(h['price_per_gpu_hour'], ',.2f')} $/GPU-hour ({h['price_source']}); "
        f"SLO TTFT <= {h['slo']['ttft_s']} s, TPOT <= {h['slo']['tpot_s']} s"
    )
    member = "unit" if "unit" in h else "replica"
    t = Table(title="the day per policy")
    cols = (
        "policy",
        "SLO met",
        "goodput/s",
        "rejected",
        f"{member}-h",
        "GPU-h",
        f"peak {member}s",
        "util",
        "$/day",
        "$/M tok",
        "kWh/day",
        "J/out tok",
        "TTFT p99 s",
    )
    for col in cols:
        t.add_column(col, justify="left" if col == "policy" else "right", no_wrap=col != "policy")
    for name, out in runs.items():
        d = out["day"]
        t.add_row(
            name,
            _fmt(100 * d["slo_attainment"] if d["slo_attainment"] is not None else None, ".1f")
            + "%",
            _fmt(d["goodput_per_s"], ",.2f"),
            f"{d['requests_rejected']:,}",
            _fmt(d["replica_hours"], ",.1f"),
            _fmt(d.get("gpu_hours"), ",.1f"),
            str(d["peak_replicas"]),
            _fmt(d.get("mean_utilization"), ".2f"),
            _fmt(d["usd_per_day"], ",.2f"),
            _fmt(d["usd_per_million_tokens"], ",.3f"),
            _fmt(d["kwh_per_day"], ",.1f"),
            _fmt(d.get("joules_per_output_token"), ",.3f"),
            _fmt(d["ttft_p99_s"], ",.2f"),
        )
    c.print(t)
    if "unit" in h:
        c.print(
            f"a unit is {h['unit']}: unit-h are billed unit-hours, GPU-h = unit-h x "
            f"{h['gpus_per_replica']} GPUs, $ and kWh count every GPU of every unit"
        )
    if "base_pool" in h:
        b = h["base_pool"]
        c.print(
            f"base pool: {b['replicas']} x {b['hardware']} TP{b['tp']} always on "
            f"({b['replica_capacity_rps']:.2f} req/s each, "
            f"{_fmt(b['price_per_gpu_hour'], ',.2f')} $/GPU-hour); "
            "the policy scales the rest; replica-h, peak, $ and kWh include it"
        )
    for name, out in runs.items():
        d = out["day"]
        changes = d.get("bottleneck_changes", [])
        moves = ", ".join(f"{ch['t_s'] / 3600:.1f} h -> {ch['to']}" for ch in changes[:8])
        more = " ..." if len(changes) > 8 else ""
        story = (
            f"; bottleneck ticks {d['bottleneck_minutes']}; moves: {moves}{more}" if changes else ""
        )
        c.print(f"{name}: {d['policy_detail']}{story}")
        if d["reject_reasons"]:
            c.print(f"  rejected: {d['reject_reasons']}")
    if plot:
        c.print(f"plot written to {plot}")
