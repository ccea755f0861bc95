"""report/plan_tables.py: the plan's best configuration, or its closest misses."""

from __future__ import annotations

from infercast.report.plan_tables import print_plan

ROW = {
    "label": "h100-sxm tp1 bf16",
    "num_gpus": 2,
    "cost_per_hour": 4.0,
    "cost_per_million_output_tokens": 0.5,
    "ttft_p99_s": 0.25,
    "tpot_p99_s": 0.02,
}
PLAN = {
    "model": "m",
    "rate_per_s": 2.0,
    "slo": {"ttft_p99_s": 1.0, "tpot_p99_s": 0.05},
    "alternatives": [{**ROW, "label": "b200 tp1", "why_not": "costs more"}],
    "num_candidates": 4,
    "num_feasible": 2,
    "num_simulations": 9,
    "wall_s": 1.23,
    "executor": "serial",
}


def test_the_best_leads_and_the_alternatives_say_why_not(console):
    print_plan({**PLAN, "best": ROW}, console)
    text = console.export_text()
    assert "cheapest configuration meeting the SLO" in text and "best" in text
    assert "costs more" in text and "TTFT p99 <= 1000 ms, TPOT p99 <= 50 ms" in text
    assert "4 candidates (2 meet the SLO), 9 simulations in 1.2 s on the serial executor" in text


def test_nothing_meets_the_slo_shows_the_closest_miss(console):
    miss = {**ROW, "label": "closest", "why_not": "TPOT p99 1.5x the SLO"}
    print_plan({**PLAN, "best": None, "closest_miss": miss, "objective": "energy"}, console)
    text = console.export_text()
    assert "NOTHING meets the SLO" in text and "TPOT p99 1.5x the SLO" in text
