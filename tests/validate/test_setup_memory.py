"""Engine memory rules: TensorRT-LLM's KV cache is a fraction of the memory left *free* after
weights and activations; vLLM/SGLang hold everything in a fraction of the device (setup.py)."""

from __future__ import annotations

import pytest

from infercast.specs.engines import load_engine
from infercast.validate.cases import read_cases
from infercast.validate.ledger import setup_step_model
from infercast.validate.setup import layout

COLS = (
    "id,scenario,metric,value,model,hardware,n_gpus,tp,weights,engine,input_tokens,output_tokens\n"
)


def setup_of(engine: str):
    (c,) = read_cases(
        COLS
        + f"x,offline,output_throughput_total,1,llama-3.1-70b,h100-sxm,1,1,fp8,{engine},1000,1000\n"
    )
    return layout(c).setup


def test_trtllm_kv_is_a_fraction_of_free_memory():
    """Llama-3.1-70B FP8 on one H100: 70.6 GB of weights on a ~85 GB part. vLLM's rule leaves
    0.9 x 85.0 - 70.6 - 2.3 (activations at its 1,024 sequences) = 3.6 GB of KV; TensorRT-LLM's
    0.9 x (85.0 - 70.6 - 2.9) = 10.5 GB."""
    trt, vllm = (
        setup_step_model(setup_of("tensorrt-llm-0.17")).memory,
        setup_step_model(setup_of("vllm-0.8")).memory,
    )
    used = trt.weight_bytes + trt.activation_bytes
    assert 70e9 < trt.weight_bytes < 71e9 and trt.device_bytes > used
    free, total = (
        load_engine("trtllm-engine-0.17").memory_fraction,
        load_engine("vllm-0.12").memory_fraction,
    )
    assert free == total == 0.9  # the engines' defaults, cited in data/engines/*.toml
    assert trt.kv_budget_bytes == pytest.approx(free * (trt.device_bytes - used))
    assert vllm.kv_budget_bytes == pytest.approx(
        total * vllm.device_bytes - vllm.weight_bytes - vllm.activation_bytes
    )
    assert 9e9 < trt.kv_budget_bytes < 12e9 and 3e9 < vllm.kv_budget_bytes < 4e9
    # 2,000 tokens of FP8 KV = 80 layers x 8 KV heads x 128 x 2 x 2,000 B = 327.7 MB a sequence:
    # 31 sequences in 10.5 GB (the vLLM rule at the same KV dtype would leave 3.1 GB: 9)
    assert trt.kv_bytes(1, 2000) == pytest.approx(80 * 8 * 128 * 2 * 2000)
    assert trt.max_batch(2000) == 31


def test_weights_that_do_not_fit_still_do_not():
    (c,) = read_cases(
        COLS
        + "x,offline,output_throughput_total,1,llama-3.1-405b,h100-sxm,1,1,fp8,tensorrt-llm,128,"
        "128\n"
    )
    assert setup_step_model(layout(c).setup).memory.kv_budget_bytes < 0
