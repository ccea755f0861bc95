"""plan simulates every candidate with the stated expert skew or LoRA adapters (sim/config
sections)."""

import json

import pytest

from infercast.cli import main
from infercast.plan import PlanRequest
from infercast.plan.evaluate import sim_config
from infercast.plan.space import Candidate

ARGS = [
    "plan",
    "--profile",
    "builtin",
    "--model",
    "llama-3.1-8b",
    "--hardware",
    "h100-sxm",
    "--tp",
    "1",
    "--precision",
    "bf16/bf16",
    "--batch-caps",
    "256",
    "--chunks",
    "8192",
    "--request-rate",
    "8",
    "--slo-ttft-ms",
    "1000",
    "--slo-tpot-ms",
    "40",
    "--input-tokens",
    "500",
    "--output-tokens",
    "100",
    "--executor",
    "serial",
    "--num-prompts",
    "100",
    "--json",
]


def test_sections_reach_every_candidates_config():
    req = PlanRequest(
        "qwen3-30b-a3b",
        ("h100-sxm",),
        4.0,
        1.0,
        0.05,
        input_tokens=500,
        output_tokens=100,
        levers=(("expert_routing", (("redundant", 0), ("skew", 1.0))),),
    )
    cfg = sim_config(Candidate("h100-sxm", 2, "bf16", "bf16"), req, 1)
    assert cfg["expert_routing"] == {"redundant": 0, "skew": 1.0}


def test_adapters_cost_the_plan_gpus_or_dollars(capsys):
    main(ARGS)
    plain = json.loads(capsys.readouterr().out)["best"]
    main([*ARGS, "--lora-rank", "64", "--lora-targets", "all", "--lora-adapters", "64"])
    lora = json.loads(capsys.readouterr().out)
    assert not any(
        a["speculative"] or a["disaggregated"] for a in [lora["best"], *lora["alternatives"]]
    )
    assert lora["best"]["tpot_p99_s"] > plain["tpot_p99_s"]


def test_a_bad_lever_fails_before_the_search(capsys):
    with pytest.raises(SystemExit) as exc:
        main([*ARGS, "--expert-skew", "1"])  # llama is dense
    assert exc.value.code == 2 and "dense" in capsys.readouterr().err
