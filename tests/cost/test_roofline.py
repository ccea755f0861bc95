"""Roofline timing of one op (cost/roofline.py) against hand calculations.

The machine is an H100 SXM at its datasheet figures (NVIDIA H100 Tensor Core GPU datasheet:
989 TFLOPS dense BF16, 1,979 dense FP8, 3.35 TB/s HBM3, NVLink 900 GB/s bidirectional =
450 GB/s each way). The floor is the roofline of Williams, Waterman & Patterson 2009
("Roofline: an insightful visual performance model"): time = max(FLOPs / peak, bytes /
bandwidth); its ridge point for a bf16 weight GEMM is peak * 2 bytes / (2 FLOP * bandwidth)
= 989e12 / 3.35e12 = 295.2 token rows.
"""

from __future__ import annotations

import pytest

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.ops import ATTENTION, COMM, OpCost, gemm
from infercast.cost.roofline import (
    COMPUTE,
    LINK,
    MEMORY,
    Machine,
    op_expected_s,
    op_floor_s,
    time_op,
)
from infercast.cost.step import StepModel
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.precision import Precision

PEAK, FP8_PEAK, BW, LINK_BW = 989e12, 1979e12, 3.35e12, 450e9
H100 = Machine(
    peak_flops=PEAK,
    attn_peak_flops=PEAK,
    bandwidth=BW,
    link_bandwidth=LINK_BW,
    compute_dtype="bf16",
    expert_peak_flops=FP8_PEAK,
    expert_dtype="fp8",
)
PROFILE = EfficiencyProfile()  # defaults: gemm 0.75 * m / (m + 16), memory 0.80, link 0.75 + 10 us


def square(m: int) -> OpCost:
    """A 4096 x 4096 bf16 projection over ``m`` token rows."""
    return gemm("proj", m, 4096, 4096, w_bytes=2, a_bytes=2)


def test_one_token_projection_is_bound_by_streaming_its_weights():
    floor, bound = op_floor_s(square(1), H100)
    assert bound == MEMORY
    assert floor == pytest.approx(4096 * 4096 * 2 / BW)  # 33.55 MB / 3.35 TB/s = 10.0 us


def test_a_thousand_rows_are_bound_by_the_tensor_cores():
    floor, bound = op_floor_s(square(1024), H100)
    assert bound == COMPUTE
    assert floor == pytest.approx(2 * 1024 * 4096 * 4096 / PEAK)  # 34.7 us


def test_the_bound_flips_at_the_ridge_point():
    ridge = PEAK * 2 / (2 * BW)
    assert ridge == pytest.approx(295.2, abs=0.05)
    assert op_floor_s(square(295), H100)[1] == MEMORY
    assert op_floor_s(square(296), H100)[1] == COMPUTE


def test_expected_time_applies_the_profile_factors():
    op = square(1)
    compute = op.flops / (PEAK * 0.75 * 1 / (1 + 16))
    memory = (4096 * 4096 * 2 + 4096 * 2 + 4096 * 2) / (BW * 0.80)  # weights, input and output
    expected, bound = op_expected_s(op, H100, PROFILE)
    assert bound == MEMORY and expected == pytest.approx(max(compute, memory))
    big = square(4096)
    expected, bound = op_expected_s(big, H100, PROFILE)
    assert bound == COMPUTE
    assert expected == pytest.approx(big.flops / (PEAK * 0.75 * 4096 / (4096 + 16)))


def test_the_floor_counts_only_compulsory_bytes_and_expected_time_all_bytes():
    op = OpCost(
        "act", "elementwise", flops=1e6, bytes_read=1e9, bytes_written=1e9, compulsory_bytes=0.0
    )
    assert op_floor_s(op, H100) == (pytest.approx(1e6 / PEAK), COMPUTE)
    assert op_expected_s(op, H100, PROFILE)[0] == pytest.approx(2e9 / (BW * 0.60))


def test_attention_runs_at_the_attention_peak():
    machine = Machine(
        PEAK, attn_peak_flops=PEAK / 2, bandwidth=BW, link_bandwidth=LINK_BW, compute_dtype="fp8"
    )
    op = OpCost("attention", ATTENTION, flops=1e12, bytes_read=1e6, compulsory_bytes=1e6)
    assert op_floor_s(op, machine) == (pytest.approx(1e12 / (PEAK / 2)), COMPUTE)
    assert op_expected_s(op, machine, PROFILE)[0] == pytest.approx(1e12 / (PEAK / 2 * 0.55))


def test_routed_expert_gemms_run_at_the_experts_dtype():
    dense = square(4096)
    expert = OpCost(
        dense.name,
        dense.kind,
        dense.flops,
        dense.bytes_read,
        dense.bytes_written,
        dense.m_tokens,
        compulsory_bytes=dense.compulsory_bytes,
        expert=True,
    )
    assert op_floor_s(expert, H100)[0] == pytest.approx(dense.flops / FP8_PEAK)
    # 8-bit GEMMs reach gemm_compute_eff_8bit (0.70) of their peak
    assert op_expected_s(expert, H100, PROFILE)[0] == pytest.approx(
        dense.flops / (FP8_PEAK * 0.70 * 4096 / (4096 + 16))
    )


def test_a_ring_all_reduce_over_nvlink():
    # One token's 8192 bf16 activations all-reduced over 8 GPUs: 2 x 7/8 x 16,384 bytes each.
    link_bytes = 2 * 7 / 8 * 8192 * 2
    op = OpCost("tp all-reduce", COMM, link_bytes=link_bytes, collectives=1)
    assert op_floor_s(op, H100) == (pytest.approx(link_bytes / LINK_BW), LINK)
    expected, bound = op_expected_s(op, H100, PROFILE)
    assert bound == LINK and expected == pytest.approx(link_bytes / (LINK_BW * 0.75) + 10e-6)
    timed = time_op(op, H100, PROFILE)
    assert timed.floor_s == pytest.approx(link_bytes / LINK_BW)
    assert timed.time_s == pytest.approx(expected)


def test_batch_one_decode_floor_is_the_bytes_over_the_bandwidth():
    """The memory-bound 'speed of light' of decoding: every weight and the KV read once per token.

    Llama-3.1-8B, bf16, 1024-token context: 15,144,075,264 compulsory bytes (tests/cost/test_ops.py
    derives them from the published config) / 3.35 TB/s = 4.52 ms, at most 221 tokens/s.
    """
    sm = StepModel(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), Precision.parse("bf16"))
    cost = sm.decode_cost(1, 1024)
    assert cost.bound == MEMORY
    assert cost.compulsory_bytes == 15_144_075_264
    assert cost.floor_time_s == pytest.approx(15_144_075_264 / BW, rel=1e-5)
    assert 1 / cost.floor_time_s == pytest.approx(221.2, abs=0.1)
