"""The whole shipped measurement set: every row accounted for, scores in a sane band, floor
check."""

from __future__ import annotations

import math

import pytest

from infercast.cost.profiles import load_profile_set
from infercast.validate.cases import load_cases
from infercast.validate.evaluate import Evaluator
from infercast.validate.score import floor_report, report


@pytest.mark.slow
def test_whole_shipped_set_runs_and_scores():
    cases = load_cases()
    preds = Evaluator(cases, assume_weights="checkpoint").predict(
        load_profile_set(None)
    )  # as the CLI
    rep = report(preds, "shipped", floor_report(cases))
    assert len(rep["rows"]) == len(cases) == 3723
    for r in rep["rows"]:  # never dropped: predicted, or skipped with a reason
        assert (r["predicted"] is None) != (r["skipped_reason"] is None)
        if r["predicted"] is not None:
            assert math.isfinite(r["predicted"]) and r["predicted"] > 0
    s = rep["summary"]
    assert (
        s["overall"]["coverage"] >= 0.90
    )  # every row counted; the reasons of the rest are reported
    assumed = [r for r in rep["rows"] if r["assumed_weights"]]
    assert (
        len(assumed) == s["assumed_weights"]["count"] == 302
    )  # rows without a dtype: marked, never silent
    assert not [
        r for r in rep["rows"] if "simulat" in (r["skipped_reason"] or "")
    ]  # none waits for --simulate-all
    # regression bands on the shipped profile (see docs/accuracy.md for the current numbers)
    assert s["scenario_metric"]["offline/output_throughput_total"]["median_abs_error_pct"] < 20
    assert s["scenario_metric"]["concurrency/tpot_mean_s"]["median_abs_error_pct"] < 25
    assert s["scenario_metric"]["single_stream/ttft_mean_s"]["median_abs_error_pct"] < 20
    # Known violations, each explained:
    # - LCPP-0016: llama.cpp gpt-oss decode (MXFP4 scale bytes < NVFP4's; see test_floor.py).
    # - TRT09-0047: TRT-LLM v0.9 table, Mixtral-8x7B fp16 on 2 x A100, batch 32, 2048/2048:
    #   801 tok/s/GPU means 20 ms per decode step, but 32 tokens touch all 8 experts, and
    #   streaming 46.7B fp16 weights from two GPUs takes >= 22.9 ms at full bandwidth. The
    #   number is most likely the 2-GPU total (a units error in the source): as total, the
    #   prediction is within 6 %.
    # - AIC-0912/0913 (closed-loop cycle): Qwen3-32B NVFP4 on 2 x GB200, 448 clients of
    #   15,000-token prompts and 500 output tokens, TTFT 0.75-0.97 s and TPOT 13 ms: a
    #   7.6 s cycle for 6.7M prompt tokens is 4.3x the two GPUs' FP4 peak (the FLOPs alone
    #   take 33 s). Only prompts served from the prefix cache (a harness whose prompts share
    #   their start) or a different concurrency than stated can give it.
    explained = {"LCPP-0016", "TRT09-0047", "AIC-0912-tpot", "AIC-0913-tpot"}
    assert {v["id"] for v in rep["floor"]["violations"]} <= explained
    cycles = [v for v in rep["floor"]["violations"] if v["metric"] == "closed_loop_cycle_s"]
    assert {v["id"] for v in cycles} == {"AIC-0912-tpot", "AIC-0913-tpot"}
    flagged = {r["id"] for r in rep["rows"] if any("beats physics" in n for n in r["notes"])}
    assert flagged == explained | {
        "AIC-0912-ttft",
        "AIC-0913-ttft",
    }  # both rows of a run, noted where they are read
    assert rep["floor"]["checked"] > 3000  # rows, and ~600 closed-loop runs


def test_floor_violation_is_listed():
    from infercast.validate.cases import read_cases

    cols = (
        "id,scenario,metric,value,model,hardware,n_gpus,tp,weights,input_tokens,output_tokens,"
        "batch\n"
    )
    rows = (
        "fast,kernel,decode_step_s,0.0001,llama-3.1-70b,h100-sxm,1,1,fp8,1024,32,1\n"
        "ok,kernel,decode_step_s,0.05,llama-3.1-70b,h100-sxm,1,1,fp8,1024,32,1\n"
        "tpot,concurrency,tpot_mean_s,0.002,llama-3.1-70b,h100-sxm,1,1,fp8,1024,256,\n"
        "many,static_batch,output_throughput_per_gpu,1e6,llama-3.1-70b,h100-sxm,1,1,fp8,128,128,"
        "64\nnobatch,static_batch,output_throughput_per_gpu,1e6,llama-3.1-70b,h100-sxm,1,1,fp8,128,"
        ",\n"
    )
    rep = floor_report(read_cases(cols + rows))
    assert rep["checked"] == 4 and [v["id"] for v in rep["violations"]] == ["fast", "tpot", "many"]
    assert rep["violations"][0]["ratio"] < 0.01


def test_closed_loop_runs_pair_their_ttft_and_tpot_rows():
    from infercast.validate.cases import read_cases
    from infercast.validate.score import closed_loop_pairs

    cols = (
        "id,scenario,metric,value,model,hardware,n_gpus,tp,weights,input_tokens,output_tokens,"
        "concurrency\n"
    )
    run = "concurrency,{m},{v},llama-3.1-70b,h100-sxm,1,1,fp8,4096,128,{c}\n"
    rows = "".join(
        f"{i},{run.format(m=m, v=v, c=c)}"
        for i, m, v, c in (
            ("a-ttft", "ttft_mean_s", 2.0, 64),
            ("a-tpot", "tpot_mean_s", 0.05, 64),  # 8.35 s < 19 s of work
            ("b-ttft", "ttft_mean_s", 0.3, 1),
            ("b-tpot", "tpot_mean_s", 0.03, 1),  # one client: physical
            ("c-tpot", "tpot_mean_s", 0.05, 32),
        )
    )  # no TTFT row: no cycle to check
    cases = read_cases(cols + rows)
    assert [(t.id, d.id) for t, d in closed_loop_pairs(cases)] == [
        ("a-ttft", "a-tpot"),
        ("b-ttft", "b-tpot"),
    ]
    rep = floor_report(cases)
    assert rep["checked"] == 5 + 2
    assert [(v["id"], v["metric"]) for v in rep["violations"]] == [
        ("a-tpot", "closed_loop_cycle_s")
    ]


@pytest.mark.slow
def test_shipped_profile_has_a_group_for_every_family_with_enough_rows():
    # the shipped profile is refitted whenever the data or the grouping changes: a stale file would
    # leave a family (Ada: 33 fit rows) on the default profile
    from infercast.validate.calibrate import MIN_GROUP_ROWS, Calibrator

    cal = Calibrator(load_cases())
    rows = cal.rows()
    counts = {g: int((cal.group_of[rows] == i).sum()) for i, g in enumerate(cal.ev.groups)}
    due = {g for g, n in counts.items() if n >= MIN_GROUP_ROWS}
    assert "ada/trtllm-engine" in due and MIN_GROUP_ROWS == 30
    assert due == set(load_profile_set(None).groups)
