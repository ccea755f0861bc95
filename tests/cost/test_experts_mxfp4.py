"""gpt-oss served from its MXFP4 checkpoint: MXFP4 routed experts beside BF16 attention
(cost/experts.py).

Hand numbers (gpt-oss-120b ``config.json``: hidden 2880, expert width 2880, 128 experts,
top-4, 36 layers): one routed expert holds 3 x 2880 x 2880 = 24,883,200 weights (+ biases),
so the routed experts are 36 x 128 x 24.9 M = 114.7 G weights; MXFP4 stores 0.5 + 1/32 bytes
each (OCP MX v1.0: E2M1 nibbles, one E8M0 scale per 32).
"""

from __future__ import annotations

import pytest

from infercast.cost.experts import MXFP4_BYTES_PER_WEIGHT, ExpertPrecision
from infercast.cost.step import StepModel
from infercast.errors import ConfigError
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.precision import Precision
from infercast.validate.cases import read_cases
from infercast.validate.setup import layout

COLS = (
    "id,scenario,metric,value,model,hardware,n_gpus,tp,ep,weights,kv_cache,engine,input_tokens,"
    "output_tokens\n"
)


def case(cells: str):
    (c,) = read_cases(COLS + cells + "\n")
    assert c.problem is None, c.problem
    return c


@pytest.fixture(scope="module")
def oss():
    return load_model("gpt-oss-120b")


def test_mxfp4_bytes_and_parse():
    assert MXFP4_BYTES_PER_WEIGHT == pytest.approx(4.25 / 8)
    e = ExpertPrecision.parse("mxfp4/fp8")
    assert (e.weight_bytes, e.compute) == (pytest.approx(0.53125), "fp8")
    with pytest.raises(ConfigError, match="mxfp4/bf16"):
        ExpertPrecision.parse("nvfp4")


def test_memory_counts_experts_in_mxfp4_rest_in_bf16(oss):
    hw = load_hardware("b200")
    plain = StepModel(oss, hw, Precision.parse("bf16")).memory.weight_bytes
    mixed = StepModel(
        oss, hw, Precision.parse("bf16"), experts=ExpertPrecision.parse("mxfp4/fp8")
    ).memory.weight_bytes
    routed = 36 * 128 * oss.expert_params
    assert 3 * 2880 * 2880 <= oss.expert_params < 3 * 2880 * 2880 * 1.001  # biases only on top
    assert plain - mixed == pytest.approx(routed * (2.0 - 0.53125))
    assert 60e9 < routed * 0.53125 < 62e9  # 114.7 G weights x 0.53 B = 60.9 GB


def test_expert_gemms_run_at_their_own_peak(oss):
    """B200 under TensorRT-LLM: experts at the FP8 rate (MXFP8 activations), attention
    projections BF16."""
    sm = StepModel(
        oss,
        load_hardware("b200"),
        Precision.parse("bf16"),
        experts=ExpertPrecision.parse("mxfp4/fp8"),
    )
    assert (sm.machine.peak_flops, sm.machine.expert_peak_flops) == (2.25e15, 4.5e15)
    ops = {o.op.name: o for o in sm.decode_cost(1, 1024).ops}
    gate_up = ops["moe.experts.gate_up"]
    # batch 1: 4 experts touched per layer, gate+up = 4 x 2880 x 5760 weights x 0.53125 B, 36 layers
    assert gate_up.op.compulsory_bytes == pytest.approx(36 * 4 * 2880 * 5760 * 0.53125)
    assert gate_up.op.expert and not ops["qkv_proj"].op.expert
    # a prefill-sized step is compute-bound on the experts: their floor is FLOPs / the FP8 peak
    big = {o.op.name: o for o in sm.prefill_cost(8192).ops}["moe.experts.gate_up"]
    assert big.floor_s == pytest.approx(big.op.flops / 4.5e15)


@pytest.mark.parametrize(
    "hardware,engine,weights,experts",
    [
        ("h100-sxm", "tensorrt-llm (latest)", "fp8", "mxfp4/bf16"),  # Hopper: W4A16_MXFP4
        (
            "b200",
            "tensorrt-llm (latest)",
            "fp4",
            "mxfp4/fp8",
        ),  # Blackwell TRT-LLM: W4A8_MXFP4_MXFP8
        ("b200", "vllm-0.15.1", "fp4", "mxfp4/bf16"),
        ("b200", "llama.cpp b6918", "fp4", ""),  # its own kernels: row precision as stated
        ("h200-sxm", "tensorrt-llm (latest)", "bf16", ""),  # a BF16 (dequantized) run stays BF16
    ],
)
def test_setup_serves_the_checkpoint(hardware, engine, weights, experts):
    c = case(
        f"x,offline,output_throughput_total,1,gpt-oss-120b,{hardware},1,1,,{weights},,{engine},"
        "1000,1000"
    )
    s = layout(c).setup
    assert s.experts == experts
    if experts:
        assert (s.weights, s.kv_cache) == (
            "bf16",
            "bf16",
        )  # attention/router/embeddings as shipped, KV unquantized
    else:
        assert s.weights == weights


def test_other_models_unchanged():
    s = layout(
        case(
            "x,offline,output_throughput_total,1,qwen3-235b-a22b,b200,8,8,,fp4,,tensorrt-llm,1000,"
            "1000"
        )
    ).setup
    assert (s.weights, s.kv_cache, s.experts) == ("fp4", "fp8", "")
