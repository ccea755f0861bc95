"""Closed-loop rows are simulated with the client their harness runs (sim.clients)."""

from __future__ import annotations

import pytest

from infercast.cost.efficiency import EfficiencyProfile
from infercast.validate.evaluate import Prediction, run_simulations
from infercast.validate.predict import harness_workload, row_harness
from infercast.validate.score import agreement
from infercast.validate.setup import Setup, Unpredictable
from infercast.validate.simrun import sim_predictor


def test_a_row_with_inferencex_s_length_range_runs_its_client(concurrency_row):
    w, note = harness_workload(concurrency_row(extra={"length_range_ratio": 0.8}), 16)
    assert note is None
    assert w["num_requests"] == 160  # --num-prompts $(( $CONC * 10 ))
    assert w["input"]["dist"] == "uniform" and w["input"]["mean"] == pytest.approx((819 + 1024) / 2)


def test_a_row_without_a_harness_runs_its_fixed_lengths_and_says_so(concurrency_row):
    w, note = harness_workload(concurrency_row(), 16)
    assert w["input"] == {"dist": "fixed", "mean": 1024} and w["num_requests"] == 160
    assert note == "harness not stated: InferenceX's client assumed"


def test_aiconfigurator_fixed_length_rows_run_its_aiperf_runner(concurrency_row):
    # the silicon sample's fixed-length rows name no harness: aiconfigurator's own runner
    # (genai_perf_runner.py: AIPerf, 10 C timed requests, fixed lengths) is assumed and noted
    row = concurrency_row(source="aiconfigurator-silicon-sample")
    harness, note = row_harness(row)
    assert harness.name == "aiconfigurator-aiperf"
    assert note == "harness not stated: aiconfigurator's AIPerf runner assumed"
    w, _ = harness_workload(row, 16)
    before = harness_workload(concurrency_row(), 16)[0]  # InferenceX's client, fixed lengths
    # the same closed loop (burst, warm-up drained, 10 requests per client, fixed lengths), but a
    # chat request: the engine prefills Llama-3.1's template (35 tokens) with each prompt
    assert w["input"] == {"dist": "fixed", "mean": 1024 + 35}
    assert {k: v for k, v in w.items() if k != "input"} == {
        k: v for k, v in before.items() if k != "input"
    }
    untabled = concurrency_row(source="aiconfigurator-silicon-sample", model="gpt-oss-120b")
    assert harness_workload(untabled, 16)[1].endswith(
        "chat template of gpt-oss-120b not tabled: stated length run"
    )
    ranged = concurrency_row(
        source="aiconfigurator-silicon-sample", extra={"length_range_ratio": 0.8}
    )
    assert row_harness(ranged)[0].name == "inferencex"  # InferenceX's runs state their range


def test_a_row_names_its_harness(concurrency_row):
    harness, note = row_harness(concurrency_row(extra={"harness": "sglang-bench-serving"}))
    assert harness.name == "sglang-bench-serving" and note is None
    with pytest.raises(Unpredictable, match="unknown harness 'ab'"):
        row_harness(concurrency_row(extra={"harness": "ab"}))


def test_pool_and_inline_runs_give_the_same_summary():
    s = Setup("llama-3.1-8b", "h100-sxm", "bf16", "bf16", 1, 1, 1, 256, 8192)
    todo = {}
    for c in (2, 3):
        key, task = sim_predictor(
            s,
            {
                "arrival": "closed",
                "concurrency": c,
                "num_requests": 4 * c,
                "input": {"dist": "uniform", "mean": 300, "std": 40},
                "output": {"dist": "fixed", "mean": 20},
            },
        )
        todo[key] = (task, EfficiencyProfile())
    inline, pooled = run_simulations(todo, workers=1), run_simulations(todo, workers=2)
    assert [inline[k].ttft.mean for k in todo] == [pooled[k].ttft.mean for k in todo]


def test_agreement_is_the_median_ratio_of_simulated_to_closed_form(concurrency_row):
    rows = [
        Prediction(concurrency_row(), p, closed_form=c)
        for p, c in ((1.0, 1.0), (1.2, 1.0), (0.9, 1.0))
    ]
    got = agreement(rows)["concurrency/ttft_mean_s"]
    assert got["rows"] == 3 and got["median_ratio"] == pytest.approx(1.0)
    assert got["median_abs_diff_pct"] == pytest.approx(10.0)


def test_agreement_reports_the_spread_and_both_errors(concurrency_row):
    pairs = [(1.0 + k / 100, 1.0) for k in range(-10, 11)]  # ratios 0.90 .. 1.10
    rows = [Prediction(concurrency_row(), p, closed_form=c) for p, c in pairs]
    got = agreement(rows)["concurrency/ttft_mean_s"]
    assert got["p10_ratio"] == pytest.approx(0.92) and got["p90_ratio"] == pytest.approx(1.08)
    # measured 0.1: the closed form (1.0) is 900 % off; the simulated values 800 .. 1000 %
    assert got["median_abs_error_pct_closed"] == pytest.approx(900.0)
    assert got["median_abs_error_pct_sim"] == pytest.approx(900.0)


def test_a_row_s_polling_interval_reaches_the_simulated_server(concurrency_row):
    from infercast.validate.ledger import StepModels
    from infercast.validate.predict import plan_case, recv_interval

    row = concurrency_row(extra={"scheduler_recv_interval": 30})
    assert recv_interval(row) == 30 and recv_interval(concurrency_row()) == 1
    plan = plan_case(row, StepModels(None))
    assert plan.simulate.config.scheduler.recv_interval == 30
    assert plan.sim_key != plan_case(concurrency_row(), StepModels(None)).sim_key
    for bad in (0, 2.5, "30", True):
        with pytest.raises(Unpredictable, match="scheduler_recv_interval"):
            recv_interval(concurrency_row(extra={"scheduler_recv_interval": bad}))


def test_the_closed_form_charges_later_waves_the_polling_wait(concurrency_row):
    from infercast.cost.profiles import load_profile_set
    from infercast.validate.evaluate import Evaluator

    rows = [
        concurrency_row(id="P-1-ttft"),
        concurrency_row(id="P-2-ttft", extra={"scheduler_recv_interval": 30}),
    ]
    plain, polled = Evaluator(rows).predict(load_profile_set(None))
    tpot = Evaluator([concurrency_row(id="P-3-tpot", metric="tpot_mean_s")]).predict(
        load_profile_set(None)
    )[0]
    # InferenceX's client: 10 requests per client, wave one meets an idle engine
    wait = (30 - 1) / 2 * (10 - 1) / 10 * tpot.predicted
    assert polled.predicted - plain.predicted == pytest.approx(wait, rel=1e-9)
