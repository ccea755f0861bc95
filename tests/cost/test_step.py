"""Cost-model invariants and independent cross-checks."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infercast.cost.comm import ring_allreduce_time_s
from infercast.cost.efficiency import EfficiencyProfile, load_profile
from infercast.cost.ops import COMM, GEMM
from infercast.cost.roofline import comm_expected_s, efficiencies, expected_s
from infercast.cost.step import StepModel
from infercast.errors import ConfigError
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision


def sm(model="llama-3.1-8b", hw="h100-sxm", weights="bf16", kv=None, tp=1, **kw):
    return StepModel(
        load_model(model), load_hardware(hw), Precision.parse(weights, kv), Parallelism(tp=tp), **kw
    )


def test_prefill_flops_are_2n_per_token_plus_attention():
    m = sm()
    spec = m.model
    t = 2048
    cost = m.prefill_cost(t)
    matmul_params = spec.total_params - spec.embedding_params - spec.small_params
    attention = (
        4 * spec.num_layers * spec.attention.num_heads * spec.attention.head_dim * t * (t + 1) / 2
    )
    # LM head runs for the one sampled position only.
    lm_head_saving = 2 * (t - 1) * spec.vocab_size * spec.hidden_size
    expected = 2 * matmul_params * t + attention - lm_head_saving
    gemm_and_attn = sum(o.op.flops for o in cost.ops if o.op.kind in ("gemm", "attention"))
    assert gemm_and_attn == pytest.approx(expected, rel=1e-6)


def test_gated_mlp_counted_as_three_matrices():
    m = sm()
    cost = m.prefill_cost(128)
    mlp = sum(o.op.flops for o in cost.ops if o.op.name.startswith("mlp.") and o.op.kind == "gemm")
    assert mlp == pytest.approx(2 * 128 * 3 * 4096 * 14336 * 32)


def test_moe_touches_expected_distinct_experts():
    m = sm("mixtral-8x7b")
    one = m.decode_cost(1, 1024)
    many = m.decode_cost(256, 1024)
    w = lambda c: next(o for o in c.ops if o.op.name == "moe.experts.gate_up").op.compulsory_bytes  # noqa: E731
    # one token reads 2 of 8 experts; 256 tokens read (almost) all 8.
    assert w(many) / w(one) == pytest.approx(8 * (1 - (1 - 2 / 8) ** 256) / 2, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    b=st.integers(1, 512), c=st.integers(1, 32768), db=st.integers(0, 64), dc=st.integers(0, 4096)
)
def test_floor_below_expected_and_monotone(b, c, db, dc):
    m = _SM
    base = m.decode_cost(b, c)
    assert base.floor_time_s <= base.time_s
    assert base.overlap_floor_s <= base.floor_time_s + 1e-15
    assert m.decode_cost(b + db, c).time_s >= base.time_s - 1e-12
    assert m.decode_cost(b, c + dc).time_s >= base.time_s - 1e-12
    assert m.decode_cost(b + db, c).floor_time_s >= base.floor_time_s - 1e-12
    assert m.memory.required_bytes(b + db, c + dc) >= m.memory.required_bytes(b, c)


_SM = sm("llama-3.1-70b", weights="fp8", kv="fp8", tp=2)


@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "qwen3-32b"])
def test_decode_affine_is_exact(model):
    m = sm(model, hw="h200-sxm", weights="fp8", tp=8)
    for n in (1, 7, 64):
        a, b = m.decode_affine(n)
        ctx = [100 + 37 * i for i in range(n)]
        assert m.step_time_s([1] * n, ctx) == pytest.approx(a + b * sum(ctx), rel=1e-12)


def test_sliding_window_limits_affine_range_and_kv_read():
    m = sm("mistral-7b")
    assert m.affine_context_limit == 4095
    near = m.decode_cost(1, 4096)
    far = m.decode_cost(1, 32768)

    def kv(c):
        return next(
            o for o in c.ops if o.op.name.startswith("attention (cached")
        ).op.compulsory_bytes

    assert kv(far) == kv(near)


def test_w4a16_helps_at_batch_1_not_when_compute_bound():
    bf16, int4 = sm("llama-3.1-8b"), sm("llama-3.1-8b", weights="int4")
    assert int4.precision.compute == "bf16"
    assert int4.decode_cost(1, 1024).time_s < 0.5 * bf16.decode_cost(1, 1024).time_s
    big_prefill = ([4096] * 4, [0] * 4)
    ratio = int4.step_time_s(*big_prefill) / bf16.step_time_s(*big_prefill)
    assert ratio == pytest.approx(1.0, abs=0.03)  # same 16-bit tensor peak
    fp8 = sm("llama-3.1-8b", weights="fp8")
    assert fp8.step_time_s(*big_prefill) < 0.7 * bf16.step_time_s(*big_prefill)
    gemm_s = lambda m: sum(o.time_s for o in m.step_cost(*big_prefill).ops if o.op.kind == "gemm")  # noqa: E731
    # W8A8 uses the 8-bit peak: GEMMs take ~half (0.70 vs 0.75 achieved fraction).
    assert gemm_s(fp8) / gemm_s(bf16) == pytest.approx(0.5 * 0.75 / 0.70, rel=0.02)


def test_fp8_kv_halves_kv_traffic_and_doubles_capacity():
    a, b = sm("llama-3.1-8b"), sm("llama-3.1-8b", kv="fp8")
    assert b.kv_bytes_per_token == a.kv_bytes_per_token / 2
    assert b.memory.max_batch(8192) >= 2 * a.memory.max_batch(8192)


@pytest.mark.parametrize(
    ("model", "weights", "tp"), [("llama-3.1-8b", "bf16", 1), ("mixtral-8x7b", "fp8", 8)]
)
def test_generated_linear_time_is_each_ops_expected_time_summed(model, weights, tp):
    m = sm(model, hw="h200-sxm", weights=weights, tp=tp)
    mach, eff = m.machine, m.profile

    def op_s(op, x):  # roofline.op_expected_s of the affine op at x
        if op.kind == COMM:
            return comm_expected_s(op.l0 + op.l1 * x, op.c0 + op.c1 * x, mach, eff)
        c_eff, b_eff = efficiencies(op.kind, eff, mach.compute_dtype, op.m0 + op.m1 * x)
        flops, nbytes = op.f0 + op.f1 * x, op.b0 + op.b1 * x
        return expected_s(flops, nbytes, mach.peak_flops, mach.bandwidth, c_eff, b_eff)[0]

    kinds = {op.kind for op in m._lin_tokens.ops}
    assert {COMM, GEMM} <= kinds if tp > 1 else GEMM in kinds
    for compiled, fn in ((m._lin_tokens, m._tok_linear), (m._lin_logits, m._logit_linear)):
        for x in (1, 3, 64, 1000, 8192):
            total = 0.0
            for op in compiled.ops:
                total += op_s(op, x)
            assert fn(x) == total


def test_tp_allreduce_ring_formula():
    m = sm("llama-3.1-70b", tp=4)
    cost = m.decode_cost(8, 1024)
    ar = next(o for o in cost.ops if o.op.name == "tp all-reduce")
    buf = 8 * 8192 * 2.0
    assert ar.op.link_bytes == pytest.approx(80 * 2 * 2 * 3 / 4 * buf)
    assert ring_allreduce_time_s(buf, 4, 450e9) == pytest.approx(1.5 * buf / 450e9)
    assert ar.floor_s == pytest.approx(ar.op.link_bytes / 450e9)


def test_tp_splits_weights_and_fits_what_tp1_cannot():
    one, two = sm("llama-3.1-70b"), sm("llama-3.1-70b", tp=2)
    assert not one.memory.weights_fit
    assert two.memory.weights_fit and two.memory.weight_bytes == pytest.approx(
        one.memory.weight_bytes / 2
    )


def test_missing_peak_falls_back_with_a_note():
    m = sm("llama-3.1-8b", hw="a100-sxm-80gb", weights="fp8")
    assert m.precision.compute == "bf16" and m.notes


def test_part_without_bandwidth_is_an_error():
    with pytest.raises(ConfigError, match="no memory bandwidth"):
        sm(hw="h100")


def test_profile_roundtrip_and_validation(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text("mem_bw_eff = 0.5\nstep_overhead_s = 0.002\n")
    prof = load_profile(p)
    assert prof.mem_bw_eff == 0.5 and prof.step_overhead_s == 0.002
    slow = sm(profile=prof).decode_cost(1, 1024).time_s
    assert slow > sm().decode_cost(1, 1024).time_s
    p.write_text("mem_bw_eff = 1.5\n")
    with pytest.raises(ConfigError, match="mem_bw_eff"):
        load_profile(p)
    p.write_text("mem_bw_efff = 0.5\n")
    with pytest.raises(ConfigError, match="unknown field"):
        load_profile(p)
    assert math.isclose(EfficiencyProfile().gemm_eff("bf16", 1e9), 0.75, rel_tol=1e-6)


def test_a_q4_model_with_an_int8_head_prices_between_q4_and_int8():
    """SmolLM2's Q4_1 GGUF (4-bit layers, Q8_0 head: ``Precision.head_weights``): a decode step
    streams the layers at int4's bytes and the head at int8's, so it costs more than all-int4
    and less than all-int8; the weights it keeps in memory lie between too."""
    model, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")

    def step(prec: Precision) -> StepModel:
        return StepModel(model, hw, prec, max_seqs=8)

    q4, int8 = step(Precision.parse("int4")), step(Precision.parse("int8", compute="bf16"))
    mixed = step(Precision.parse("int4", head_weights="int8"))
    times = [sm.step_time_s([1] * 4, [512] * 4) for sm in (q4, mixed, int8)]
    assert times[0] < times[1] < times[2]
    head_extra = 4096 * 128_256 * (1.0 - Precision.parse("int4").weight_bytes)
    assert mixed.memory.weight_bytes - q4.memory.weight_bytes == pytest.approx(head_extra)
    assert q4.memory.weight_bytes < mixed.memory.weight_bytes < int8.memory.weight_bytes


def test_small_products_follow_their_own_curve_up_to_their_rows():
    """``gemm_small_max_tokens``: products of at most that many rows take the small curve
    (above 1 of the peak: a narrower multiply than the priced dtype), larger ones the main
    one; 0 (the default) leaves one curve."""
    prof = EfficiencyProfile(
        gemm_small_max_tokens=48, gemm_small_peak_ratio=2.0, gemm_small_m_half=4.0
    )
    assert prof.gemm_eff("fp32", 4) == pytest.approx(2.0 * 4 / 8)
    assert prof.gemm_eff("fp32", 48) == pytest.approx(2.0 * 48 / 52)
    assert prof.gemm_eff("fp32", 49) == pytest.approx(0.75 * 49 / (49 + 16))
    assert EfficiencyProfile().gemm_eff("fp32", 4) == pytest.approx(0.75 * 4 / 20)
    model, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    one = StepModel(model, hw, Precision.parse("bf16"), max_seqs=8)
    slow = prof.with_updates(gemm_small_peak_ratio=0.05)  # 32-row products compute-bound
    two = StepModel(model, hw, Precision.parse("bf16"), profile=slow, max_seqs=8)
    assert two.step_time_s([32], [0]) > 1.5 * one.step_time_s([32], [0])
    assert two.step_time_s([512], [0]) == pytest.approx(one.step_time_s([512], [0]))
