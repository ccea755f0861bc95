"""Harness presets: each rule as the harness's code has it (the sources the TOML cites)."""

from __future__ import annotations

import numpy as np
import pytest

from infercast.errors import ConfigError
from infercast.sim.clients import (
    closed_loop_workload,
    harness_names,
    load_harness,
    parse_harness,
)
from infercast.sim.config import build_config
from infercast.sim.run import workload_spec
from infercast.sim.workload import request_stream


def test_shipped_harnesses_load_with_every_rule_cited():
    assert {"inferencex", "vllm-bench-serve", "sglang-bench-serving"} <= set(harness_names())
    for name in harness_names():
        h = load_harness(name)
        assert h.name == name and h.start == "burst" and h.ttft in ("first_text", "first_response")
        assert all(
            h.sources[k] for k in ("start", "warmup_requests", "range_ratio", "length_rule", "ttft")
        )


def test_inferencex_sends_ten_prompts_per_client():
    # workflow: --num-prompts $(( $CONC * 10 )) --max-concurrency $CONC
    assert load_harness("inferencex").requests_for(64) == 640


def test_aiconfigurator_runner_times_ten_requests_per_client_after_draining_two():
    # genai_perf_runner.py run(): --request-count C * 10 --warmup-request-count C * 2;
    # aiperf CreditIssuingStrategy._execute_phases waits for every warm-up credit to return before
    # the profiling phase, so the warm-up is not timed and the timed run starts on an idle engine
    h = load_harness("aiconfigurator-aiperf")
    assert h.requests_for(8) == 80 and h.warmup_for(8) == 16
    assert load_harness("inferencex").warmup_for(8) == 1  # the single-prompt test run
    w = closed_loop_workload(h, 8, 1024, 256, fixed=True)
    assert w["num_requests"] == 80 and w["concurrency"] == 8  # no warm-up request in the run


def test_aiconfigurator_runner_sends_every_request_at_the_stated_lengths():
    # --synthetic-input-tokens-stddev 0 --output-tokens-stddev 0, min_tokens = max_tokens = osl
    h = load_harness("aiconfigurator-aiperf")
    assert h.range_ratio == 0
    w = closed_loop_workload(h, 4, 1024, 256, fixed=True)
    assert w["input"] == {"dist": "fixed", "mean": 1024}
    assert w["output"] == {"dist": "fixed", "mean": 256}


def test_a_chat_client_prefills_the_model_s_chat_template_too():
    # openai_chat.py _create_messages: the prompt goes as one user message; the server applies the
    # chat template: Qwen3 '<|im_start|>user\n' + prompt + '<|im_end|>\n<|im_start|>assistant\n'
    from infercast.sim.clients import chat_template_tokens

    h = load_harness("aiconfigurator-aiperf")
    assert h.endpoint == "chat" and chat_template_tokens("qwen3-32b") == 8
    w = closed_loop_workload(h, 8, 1024, 256, fixed=True, model="qwen3-32b")
    assert w["input"] == {"dist": "fixed", "mean": 1032}
    assert w["output"] == {"dist": "fixed", "mean": 256}  # the template is prompt, not output
    assert closed_loop_workload(h, 8, 1024, 256, fixed=True, model="Llama-3.1-8B")["input"] == {
        "dist": "fixed",
        "mean": 1024 + 35,  # the default system header with its dates, then the user turn
    }
    # a model without a tabled template runs the stated length; completions clients send the
    # prompt as it is
    assert chat_template_tokens("gpt-oss-120b") is None
    assert (
        closed_loop_workload(h, 8, 1024, 256, fixed=True, model="gpt-oss-120b")["input"]["mean"]
        == 1024
    )
    ix = closed_loop_workload(load_harness("inferencex"), 8, 1024, 256, model="qwen3-32b")
    assert ix["input"]["mean"] == pytest.approx((819 + 1024) / 2)


def test_aiperf_burst_after_a_drained_warmup_starts_c_requests_on_an_idle_engine():
    # RequestRateStrategy: ConcurrencyBurstRateGenerator.next_interval() == 0 behind a semaphore
    # of C, after the warm-up phase has completed: the timed run's first C requests leave at t = 0
    # into an empty engine, and with fixed lengths they share one prefill step
    from infercast.sim.presets import build_step_model

    from .helpers import run

    w = closed_loop_workload(load_harness("aiconfigurator-aiperf"), 4, 512, 8, fixed=True)
    cfg = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "seed": 0, "workload": w}
    res, records = run(build_step_model(build_config(cfg)), **cfg)
    assert res.summary.completed == 40
    first = [r for r in records if r.arrival_s == 0.0]
    assert len(first) == 4
    assert len({r.first_token_s for r in first}) == 1  # one shared prefill step


def test_bench_serving_low_rule_is_randint_of_int_l_r_to_l():
    # sample_random_requests: randint(int(input_len * range_ratio), input_len + 1)
    assert load_harness("inferencex").length_range(1024) == (int(1024 * 0.8), 1024)
    assert load_harness("inferencex").length_range(1000, 0.8) == (800, 1000)


def test_sglang_default_ratio_draws_from_one_to_l():
    # bench_serving.py: --random-range-ratio 0.0, randint(max(int(L r), 1), L + 1)
    assert load_harness("sglang-bench-serving").length_range(1024) == (1, 1024)


def test_vllm_symmetric_rule_spans_l_times_one_minus_to_one_plus_r():
    # vllm/benchmarks/datasets.py RandomDataset: [floor(L (1 - r)), ceil(L (1 + r))]
    h = load_harness("vllm-bench-serve")
    assert h.length_range(1024) == (1024, 1024)
    assert h.length_range(1000, 0.1) == (900, 1100)


def test_closed_loop_workload_draws_the_harness_range_in_the_simulator():
    h = load_harness("inferencex")
    w = closed_loop_workload(h, 8, 1000, 500)
    assert w["arrival"] == "closed" and w["concurrency"] == 8 and w["num_requests"] == 80
    cfg = build_config(
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "seed": 0,
            "workload": w | {"num_requests": 4000},
        }
    )
    prompts = np.array(
        [r[1] for r in request_stream(workload_spec(cfg, None), np.random.default_rng(0))]
    )
    assert prompts.min() == 800 and prompts.max() == 1000
    assert prompts.mean() == pytest.approx(900, rel=0.01)  # randint(800, 1001)'s mean


def test_fixed_rows_run_their_stated_lengths():
    w = closed_loop_workload(load_harness("sglang-bench-serving"), 4, 1024, 128, fixed=True)
    assert w["input"] == {"dist": "fixed", "mean": 1024} and w["output"] == {
        "dist": "fixed",
        "mean": 128,
    }


def test_a_preset_without_a_source_is_one_line():
    data = load_harness("inferencex").model_dump()
    del data["sources"]["ttft"]
    with pytest.raises(ConfigError, match=r"^harness preset x\.toml: .*add ttft to \[sources\]$"):
        parse_harness(data, "x.toml")


def test_unknown_harness_names_the_choices():
    with pytest.raises(ConfigError, match="unknown harness 'wrk'.*inferencex"):
        load_harness("wrk")
