"""Round 4: TensorRT-LLM's engine flow and its PyTorch backend are separate profile groups.

TensorRT-LLM's performance overview: "Starting with v0.19, testing was performed using the
PyTorch backend - this workflow does not require an engine to be built". Hand-checked rows:
TRT17-* (v0.17 table, ``tensorrt-llm-0.17 (trtllm-bench; ...)``) built TensorRT engines;
TRT10-0130 (v1.0, ``tensorrt-llm-1.0 (pytorch, trtllm-bench)``) and aiconfigurator's
``trtllm-1.0.0rc3`` / ``trtllm-0.8.1.post1`` runs (the latter a Dynamo version on a
DeepSeek-V3 run, which only the PyTorch backend serves) ran the PyTorch backend.
"""

from __future__ import annotations

import pytest

from infercast.validate.cases import read_cases
from infercast.validate.setup import group_key, trtllm_engine_flow

COLS = (
    "id,source,scenario,metric,value,model,hardware,tp,weights,engine,input_tokens,output_tokens\n"
)


@pytest.mark.parametrize(
    ("engine", "hardware", "group"),
    [
        (
            "tensorrt-llm-0.17 (trtllm-bench; gh200: gptManagerBenchmark)",
            "h100-sxm",
            "hopper/trtllm-engine",
        ),
        (
            "tensorrt-llm-0.9 (gptSessionBenchmark, static batching)",
            "a100-sxm-80gb",
            "ampere/trtllm-engine",
        ),
        ("tensorrt-llm (nvidia mlperf harness)", "b200", "blackwell/trtllm-engine"),
        ("tensorrt-llm-1.0 (pytorch, trtllm-bench)", "b200", "blackwell/trtllm"),
        ("tensorrt-llm-0.20 (pytorch, trtllm-bench)", "h200-sxm", "hopper/trtllm"),
        ("trtllm-1.0.0rc3", "h100-sxm", "hopper/trtllm"),
        ("trtllm-0.8.1.post1", "h200-sxm", "hopper/trtllm"),
        ("vllm-0.12.0", "h100-sxm", "hopper/vllm"),
    ],
)
def test_group_of_each_backend(engine, hardware, group):
    (c,) = read_cases(
        COLS
        + f'X,src,offline,output_throughput_total,1,llama-3.1-8b,{hardware},1,fp8,"{engine}",128,'
        "128\n"
    )
    assert group_key(c) == group


def test_engine_flow_needs_an_old_release_or_the_mlperf_harness():
    assert trtllm_engine_flow("tensorrt-llm-0.18")
    assert not trtllm_engine_flow("tensorrt-llm-0.19")
    assert not trtllm_engine_flow("trtllm-")
