"""trtllm-bench's own engine limits on the v0.17 perf overview's offline rows.

That overview builds each engine with ``trtllm-bench build --dataset`` (its "Reproducing
Benchmarked Results", docs/source/performance/perf-overview.md @258c7540), so the engine's
max_batch_size and max_num_tokens are trtllm-bench's heuristic for the dataset's lengths
(tensorrt_llm/bench/build/tuning.py calc_engine_setting and finetune_setting: the KV requests
that fit in 0.95 of the memory the weights leave, capped at 4,096 requests and 32,768 tokens,
rounded up, at least 64 requests and 2,048 tokens), not trtllm-build's 2,048 / 8,192 defaults.
The numbers below are that arithmetic done by hand.
"""

from __future__ import annotations

import json

from infercast.validate.cases import read_cases
from infercast.validate.setup import layout

COLS = (
    "id,source,scenario,metric,value,model,hardware,tp,weights,kv_cache,engine,input_tokens,"
    "output_tokens,extra\n"
)
V017 = "tensorrt-llm-0.17 (trtllm-bench; gh200: gptManagerBenchmark)"
V10 = "tensorrt-llm-1.0 (pytorch, trtllm-bench)"
PRESET = {V017: (2048, 8192), V10: (2048, 8192)}  # the presets' build / llm_args defaults


def setup_of(model, hardware, weights, engine, isl, osl, scenario="offline", extra=None, tp=1):
    text = json.dumps(extra or {}).replace('"', '""')
    (c,) = read_cases(
        COLS + f"X,src,{scenario},output_throughput_total,1,{model},{hardware},{tp},{weights},,"
        f'"{engine}",{isl},{osl},"{text}"\n'
    )
    s = layout(c).setup
    return s.max_seqs, s.max_batched_tokens


def test_a_small_model_gets_the_heuristics_caps():
    # Llama-3.1-8B FP8 on one H100 at 128/128: 79.2 GiB less 8.0 GB of weights leave 71 GiB,
    # 0.95 of it at 64 KiB of fp8 KV a token holds ~4,300 requests of 256 tokens: the cap,
    # 4,096, and twice that in tokens (1 + 128/128), 8,192
    assert setup_of("llama-3.1-8b", "h100-sxm", "fp8", V017, 128, 128) == (4096, 8192)
    # at 128/2048, ~510 requests: 512 (rounded up to 128s), ~540 tokens: the 2,048 floor
    assert setup_of("llama-3.1-8b", "h100-sxm", "fp8", V017, 128, 2048) == (512, 2048)


def test_a_model_that_nearly_fills_the_part_gets_the_heuristics_floors():
    # Llama-3.1-70B FP8 on one H100: ~9 GiB left for KV, 0.6 GiB a 2048/2048 request, ~13
    # requests: finetune_setting's floors, 64 requests and 2,048 tokens
    assert setup_of("llama-3.1-70b", "h100-sxm", "fp8", V017, 2048, 2048) == (64, 2048)


def test_other_flows_stated_limits_and_other_scenarios_keep_the_preset():
    assert setup_of("llama-3.1-8b", "h100-sxm", "fp8", V10, 128, 128) == PRESET[V10]
    stated = setup_of(
        "llama-3.1-8b", "h100-sxm", "fp8", V017, 128, 128, extra={"max_num_tokens": 512}
    )
    assert stated[1] == 512
    server = setup_of("llama-3.1-8b", "h100-sxm", "fp8", V017, 128, 128, scenario="server")
    assert server == PRESET[V017]
