"""Round 5: TensorRT-LLM decodes Llama 4's chunked-attention layers over the whole context on
Hopper.

TensorRT-LLM applies chunked attention to context requests only ("chunked attention can only be
applied to context requests", docs/source/features/long-sequence.md) and keeps every layer's
full KV; Blackwell's TRTLLM-Gen generation kernels take the chunk size (validate/setup.py).

Hand-checked decode step: Llama-4-Maverick (48 layers, every 4th one global, the other 36 chunked
at 8,192 tokens), one sequence with 20,000 cached tokens, TP1, BF16 KV: 8 KV heads x 128 x 2 (K, V)
x 2 B = 4,096 B per token per layer. Chunked, the 36 layers read the current chunk, 20,000 mod
8,192 = 3,616 tokens, the 12 global ones all 20,000: (36 x 3,616 + 12 x 20,000) x 4,096 B
= 370,176 x 4,096 B = 1.516 GB. As TensorRT-LLM decodes on Hopper, all 48 layers read 20,000
tokens: 960,000 x 4,096 B = 3.932 GB.
"""

from __future__ import annotations

import pytest

from infercast.cost.step import StepModel
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.model import ATTN_CHUNKED, ATTN_FULL
from infercast.specs.precision import Precision
from infercast.validate.cases import read_cases
from infercast.validate.setup import engine_model, layout

COLS = (
    "id,source,scenario,metric,value,model,hardware,n_gpus,tp,ep,weights,engine,input_tokens,"
    "output_tokens\n"
)


def _setup(cells: str):
    (c,) = read_cases(COLS + cells + "\n")
    assert c.problem is None, c.problem
    return layout(c).setup


def _cached_kv_bytes(model) -> float:
    step = StepModel(model, load_hardware("h200-sxm"), Precision.parse("fp8", "bf16"))
    ops = step.step_cost([1], [20_000]).ops
    return sum(o.op.bytes_read for o in ops if o.op.name.startswith("attention (cached KV)"))


def test_trtllm_hopper_rows_decode_chunked_layers_in_full():
    row = (
        "X,trtllm-perf-overview-v1.0,offline,output_throughput_total,4106,llama-4-maverick,{hw},8,"
        "8,,{w},{eng},20000,2000"
    )
    hopper = _setup(row.format(hw="h200-sxm", w="fp8", eng="tensorrt-llm-1.0 (pytorch)"))
    blackwell = _setup(row.format(hw="b200", w="fp4", eng="tensorrt-llm-1.0 (pytorch)"))
    vllm = _setup(row.format(hw="h200-sxm", w="fp8", eng="vllm-0.10"))
    assert (hopper.chunked_as_full, blackwell.chunked_as_full, vllm.chunked_as_full) == (
        True,
        False,
        False,
    )


def test_engine_model_runs_chunked_layers_as_full_attention():
    maverick = load_model("llama-4-maverick")
    assert sum(layer.attention == ATTN_CHUNKED for layer in maverick.layers) == 36
    setup = _setup(
        "X,trtllm-perf-overview-v1.0,offline,output_throughput_total,4106,llama-4-maverick,h200-"
        "sxm,8,8,,fp8,tensorrt-llm-1.0 (pytorch),20000,2000"
    )
    full = engine_model(maverick, setup)
    assert all(layer.attention == ATTN_FULL for layer in full.layers)
    assert [layer.moe for layer in full.layers] == [layer.moe for layer in maverick.layers]
    assert full.total_params == maverick.total_params
    dense = load_model("llama-3.1-8b")
    assert engine_model(dense, setup) is dense


def test_decode_kv_read_hand_checked():
    maverick = load_model("llama-4-maverick")
    setup = _setup(
        "X,trtllm-perf-overview-v1.0,offline,output_throughput_total,4106,llama-4-maverick,h200-"
        "sxm,8,8,,fp8,tensorrt-llm-1.0 (pytorch),20000,2000"
    )
    assert _cached_kv_bytes(maverick) == pytest.approx(370_176 * 4_096)
    assert _cached_kv_bytes(engine_model(maverick, setup)) == pytest.approx(960_000 * 4_096)
