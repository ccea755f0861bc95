"""plan --objective energy ranks configurations meeting the SLO by joules per output token."""

import pytest

from infercast.errors import ConfigError
from infercast.plan import PlanRequest, plan


def _req(objective: str) -> PlanRequest:
    return PlanRequest(
        model="llama-3.1-8b",
        hardware=("h100-sxm", "h200-sxm"),
        rate=4.0,
        slo_ttft_p99_s=2.0,
        slo_tpot_p99_s=0.05,
        input_tokens=512,
        output_tokens=128,
        num_requests=100,
        tps=(1,),
        precisions=(("bf16", "bf16"), ("fp8", "fp8")),
        batch_caps=(64,),
        chunks=(2048,),
        speculative=(False,),
        disagg_ratios=(),
        objective=objective,
        exhaustive=True,
    )


def test_energy_objective_orders_by_joules_and_reports_them():
    d = plan(_req("energy"), "serial").to_dict()
    rows = [d["best"]] + d["alternatives"]
    joules = [r["joules_per_output_token"] for r in rows]
    assert all(j > 0 for j in joules) and joules == sorted(joules)
    assert d["objective"] == "energy" and rows[0]["kwh_per_day"] > 0
    cost = plan(_req("cost"), "serial").to_dict()
    hours = [r["cost_per_hour"] for r in [cost["best"]] + cost["alternatives"]]
    assert hours == sorted(hours)


def test_unknown_objective_is_an_error():
    with pytest.raises(ConfigError, match="objective"):
        _req("speed")
