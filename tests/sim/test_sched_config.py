"""A replica's scheduler from a simulator config: the admission rule reaches every simulator
path (aggregated fast and exact, disaggregated pools, speculative runs)."""

from __future__ import annotations

import pytest

from infercast.sim.config import build_config
from infercast.sim.run import simulate
from infercast.sim.sched_config import scheduler_config

# KV for ~6,400 tokens against 32 clients of 400 + ~300 tokens: current-use preempts
SCARCE = {
    "model": "llama-3.1-8b",
    "hardware": "h100-sxm",
    "seed": 1,
    "workload": {
        "concurrency": 32,
        "num_requests": 80,
        "input": {"mean": 400},
        "output": {"dist": "uniform", "mean": 300, "std": 100},
    },
}


def _run(step_model, admission: str, mode: str = "fast", **extra):
    cfg = {
        **SCARCE,
        "mode": mode,
        "scheduler": {"num_blocks": 400, "block_size": 16, "admission": admission},
        **extra,
    }
    records = []
    result = simulate(build_config(cfg), step_model, sink=records.append)
    return result, {r.request_id: r for r in records}


def test_scheduler_config_carries_the_admission_rule():
    cfg = build_config(
        {"scheduler": {"admission": "sglang-new-token-ratio", "new_token_ratio_init": 0.5}}
    )
    s = scheduler_config(cfg, 10_000)
    assert (s.admission, s.new_token_ratio_init, s.clip_max_new_tokens) == (
        "sglang-new-token-ratio",
        0.5,
        4096,
    )
    with pytest.raises(ValueError, match="admission"):
        build_config({"scheduler": {"admission": "greedy"}})


@pytest.mark.parametrize("mode", ["fast", "exact"])
def test_reserve_full_output_never_preempts_where_current_use_does(step_model, mode):
    current, _ = _run(step_model, "current-use", mode)
    reserve, recs = _run(step_model, "reserve-full-output", mode)
    assert current.num_preemptions > 0
    assert reserve.num_preemptions == 0 and len(recs) == 80
    assert all(r.finish_reason == "length" for r in recs.values())
    # fewer requests run at once, so each waits longer for its first token
    assert reserve.summary.ttft.mean > current.summary.ttft.mean


@pytest.mark.parametrize("admission", ["reserve-full-output", "sglang-new-token-ratio"])
def test_fast_path_equals_exact_under_each_rule(step_model, admission):
    _, fast = _run(step_model, admission, "fast")
    _, exact = _run(step_model, admission, "exact")
    assert fast.keys() == exact.keys()
    for rid, e in exact.items():
        f = fast[rid]
        assert (f.num_preemptions, f.output_tokens) == (e.num_preemptions, e.output_tokens)
        assert f.first_token_s == pytest.approx(e.first_token_s, rel=1e-9)
        assert f.finish_s == pytest.approx(e.finish_s, rel=1e-9)


def test_disaggregated_decode_pool_follows_the_rule(step_model):
    disagg = {
        "prefill": {"replicas": 1},
        "decode": {"replicas": 1},
        "transfer_latency_s": 0.002,
        "transfer_bandwidth_bytes_per_s": 2e10,
    }
    current, _ = _run(step_model, "current-use", disaggregation=disagg)
    reserve, recs = _run(step_model, "reserve-full-output", disaggregation=disagg)
    assert current.extra["decode_num_preemptions"] > 0
    assert reserve.extra["decode_num_preemptions"] == 0 and len(recs) == 80


def test_speculative_run_follows_the_rule(step_model):
    spec = {"num_speculative_tokens": 3, "acceptance": 0.7}
    reserve, recs = _run(step_model, "reserve-full-output", "exact", speculative=spec)
    assert reserve.num_preemptions == 0 and len(recs) == 80


def test_attention_dp_balance_reaches_the_scheduler_and_agrees_fast_and_exact(step_model):
    cfg = build_config(
        {
            **SCARCE,
            "scheduler": {"adp_ranks": 4, "adp_timeout_iters": 30, "adp_batching_wait_iters": 2},
        }
    )
    sc = scheduler_config(cfg, 100_000)
    assert (sc.adp_ranks, sc.adp_timeout_iters, sc.adp_batching_wait_iters) == (4, 30, 2)
    runs = {}
    for mode in ("fast", "exact"):
        c = build_config(
            {**SCARCE, "mode": mode, "scheduler": {"adp_ranks": 4, "adp_timeout_iters": 30}}
        )
        runs[mode] = simulate(c, step_model).summary.ttft.mean
    off = build_config(SCARCE)
    assert runs["fast"] == pytest.approx(runs["exact"], rel=1e-9)
    assert runs["fast"] > simulate(off, step_model).summary.ttft.mean  # requests wait
