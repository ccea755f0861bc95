"""Attention's tensor-core rate: FP8 with an FP8 KV cache under FP8 or FP4 matmuls (cost/step.py
_machine)."""

from __future__ import annotations

import pytest

from infercast.cost.step import StepModel
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.precision import Precision


@pytest.mark.parametrize(
    "weights,kv,peak",
    [
        (
            "fp4",
            "fp8",
            4.5e15,
        ),  # NVFP4 model, FP8 KV: FP8 context FMHA (TRT-LLM is_fp4_out / fp8 KV)
        ("fp8", "fp8", 4.5e15),
        ("fp4", "bf16", 2.25e15),  # 16-bit KV: 16-bit attention
        ("int4", "fp8", 2.25e15),  # W4A16: 16-bit activations, 16-bit attention
        ("bf16", "fp8", 2.25e15),
    ],
)
def test_attention_peak_on_b200(weights, kv, peak):
    sm = StepModel(load_model("llama-3.1-8b"), load_hardware("b200"), Precision.parse(weights, kv))
    assert sm.machine.attn_peak_flops == peak
    # a 4,096-token prefill's attention over new tokens is compute-bound: its floor is FLOPs / that
    # peak
    op = next(o for o in sm.prefill_cost(4096).ops if o.op.name == "attention (new tokens)")
    assert op.floor_s == pytest.approx(op.op.flops / peak)


def test_an_fp32_kv_cache_attends_at_the_fp32_peak():
    """An fp32 KV cache (the CPU engine's) under int8 matmuls: attention at fp32's peak, not the
    16-bit one (which a CPU without a bf16 unit runs ~70x slower); the matmuls at int8's."""
    from dataclasses import replace

    flops = {"fp32": 1e11, "bf16": 1.4e9, "int8": 5.9e10}
    cpu = replace(load_hardware("b200"), flops_per_s=flops)
    sm = StepModel(load_model("llama-3.1-8b"), cpu, Precision.parse("int8", "fp32", compute="int8"))
    assert sm.machine.attn_peak_flops == 1e11
    assert sm.machine.peak_flops == 5.9e10
    sixteen = StepModel(load_model("llama-3.1-8b"), cpu, Precision.parse("int8", "bf16", "int8"))
    assert sixteen.machine.attn_peak_flops == 1.4e9
