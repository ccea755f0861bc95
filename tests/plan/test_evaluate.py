"""``plan --profile`` / ``--engine``: the planner times candidates like every other command."""

from __future__ import annotations

import pytest

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.profiles import load_profile_set
from infercast.plan import PlanRequest
from infercast.plan.evaluate import plan_profile, sim_config
from infercast.plan.space import Candidate

REQ = dict(
    model="llama-3.1-8b",
    hardware=("h100-sxm",),
    rate=1.0,
    input_tokens=256,
    output_tokens=64,
    slo_ttft_p99_s=1.0,
    slo_tpot_p99_s=0.1,
)


def _cand() -> Candidate:
    return Candidate(hardware="h100-sxm", tp=1, weights="bf16", kv_cache="bf16")


def test_plan_defaults_to_the_shipped_profile_and_takes_builtin():
    cand = _cand()
    assert plan_profile(cand, PlanRequest(**REQ)) == load_profile_set(None).default
    assert plan_profile(cand, PlanRequest(**REQ, profile="builtin")) == EfficiencyProfile()


def test_plan_engine_sets_policy_and_profile_group():
    cand = _cand()
    req = PlanRequest(**REQ, engine="sglang")
    assert sim_config(cand, req, 1)["scheduler"]["policy"] == "prefill-first"
    assert plan_profile(cand, req) == load_profile_set(None).for_group("hopper/sglang")
    assert (
        sim_config(cand, PlanRequest(**REQ), 1)["scheduler"].get("policy") is None
    )  # the simulator's default


def test_plan_cli_rejects_a_bad_engine_before_searching():
    from infercast.cli import main

    with pytest.raises(SystemExit) as exc:
        main(
            [
                "plan",
                "-m",
                "llama-3.1-8b",
                "--rate",
                "1",
                "--slo-ttft-p99",
                "1",
                "--slo-tpot-p99",
                "0.1",
                "--input-tokens",
                "256",
                "--output-tokens",
                "64",
                "--engine",
                "nope",
            ]
        )
    assert exc.value.code == 2


def test_a_candidate_that_cannot_run_keeps_the_reason_with_bare_parameter_names():
    # sim/build names `tp` and `weights`; a candidate's error is data, not a command line
    from infercast.plan.evaluate import evaluate

    req = PlanRequest(**{**REQ, "model": "llama-3.1-70b"})
    result = evaluate(_cand(), req)
    assert result.error and "leaves no memory for the KV cache" in result.error
    assert "`" not in result.error and "use more tp, smaller weights" in result.error
