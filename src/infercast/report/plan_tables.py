"""What ``infercast plan`` prints: the best configuration (or the closest misses) and its
alternatives, with cost, energy, tail latencies and why each is not the best."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def print_plan(d: dict, console: Console) -> None:
    """``d``: the plan as ``Plan.to_dict()`` gives it (what --json prints)."""

    best = d["best"]
    rows = ([best] if best else [d["closest_miss"]] if d.get("closest_miss") else []) + d[
        "alternatives"
    ]
    goal = "least energy per token" if d.get("objective") == "energy" else "cheapest"
    title = (
        f"plan: {goal} configuration meeting the SLO"
        if best
        else "plan: NOTHING meets the SLO (closest misses)"
    )
    t = Table(
        title=f"{title} ({d['model']}, {d['rate_per_s']:g} req/s, "
        f"TTFT p99 <= {d['slo']['ttft_p99_s'] * 1e3:g} ms, "
        f"TPOT p99 <= {d['slo']['tpot_p99_s'] * 1e3:g} ms)"
    )
    for col in (
        "configuration",
        "GPUs",
        "$/h",
        "$/M out tok",
        "J/out tok",
        "TTFT p99 (ms)",
        "TPOT p99 (ms)",
        "why not",
    ):
        t.add_column(col, justify="left" if col in ("configuration", "why not") else "right")
    for i, r in enumerate(rows):
        t.add_row(
            r["label"],
            str(r["num_gpus"]),
            f"{r['cost_per_hour']:.2f}",
            f"{r['cost_per_million_output_tokens']:.3f}"
            if r["cost_per_million_output_tokens"]
            else "-",
            f"{r['joules_per_output_token']:.3f}" if r.get("joules_per_output_token") else "-",
            f"{r['ttft_p99_s'] * 1e3:,.0f}",
            f"{r['tpot_p99_s'] * 1e3:.1f}",
            "best" if (best and i == 0) else r.get("why_not", ""),
        )
    console.print(t)
    console.print(
        f"{d['num_candidates']} candidates ({d['num_feasible']} meet the SLO), "
        f"{d['num_simulations']} simulations in {d['wall_s']:.1f} s on the {d['executor']} executor"
    )
