"""Parallelism: the one-GPU capacity cliff, ring all-reduce scaling, attention data parallel."""

from __future__ import annotations

import pytest

from infercast.cost.step import StepModel
from infercast.sim.build import step_model as sim_step_model
from infercast.sim.config import build_config
from infercast.sim.run import simulate
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision


def _offline(tp: int, num: int = 200):
    cfg = build_config(
        {
            "model": "llama-3.3-70b",
            "hardware": "h100-sxm",
            "weights": "fp8",
            "kv_cache": "fp8",
            "tp": tp,
            "scheduler": {"max_num_seqs": 512},
            "workload": {
                "arrival": "offline",
                "num_requests": num,
                "input": {"mean": 1000},
                "output": {"mean": 1000},
            },
        }
    )
    sm = sim_step_model(cfg)
    return sm, simulate(cfg, sm)


def test_tp2_fits_what_tp1_cannot_and_the_cliff_follows():
    one, r1 = _offline(1)
    two, r2 = _offline(2)
    # 64 sequences of 2000 tokens: no room beside 70.6 GB of FP8 weights on one 80 GiB part.
    assert not one.memory.fits(64, 2000) and two.memory.fits(64, 2000)
    assert two.kv_capacity_tokens > 10 * one.kv_capacity_tokens
    # Capacity, not compute: twice the GPUs serve far more than twice the tokens (TRT-LLM: 742 ->
    # 4,247).
    ratio = r2.summary.output_throughput_tps / r1.summary.output_throughput_tps
    assert ratio > 4.0
    assert r1.mean_batch_size < 0.25 * r2.mean_batch_size  # ~30 vs ~170 sequences in flight


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_allreduce_time_scales_as_the_ring_formula(tp):
    sm = StepModel(
        load_model("llama-3.1-70b"),
        load_hardware("h100-sxm"),
        Precision.parse("bf16"),
        Parallelism(tp=tp),
    )
    op = next(o for o in sm.decode_cost(32, 1024).ops if o.op.name == "tp all-reduce")
    buf = 32 * 8192 * 2.0  # tokens x hidden x bf16
    assert op.op.link_bytes == pytest.approx(
        80 * 2 * 2 * (tp - 1) / tp * buf
    )  # 80 layers, 2 per layer
    assert op.floor_s == pytest.approx(op.op.link_bytes / sm.hardware.link_bandwidth_bytes_per_s)


def test_attention_dp_multiplies_mla_kv_capacity_and_drops_the_attention_allreduce():
    m, hw, prec = load_model("deepseek-v3"), load_hardware("h200-sxm"), Precision.parse("fp8")
    tp = StepModel(m, hw, prec, Parallelism(tp=8, ep=8))
    dp = StepModel(m, hw, prec, Parallelism(tp=8, ep=8, attn_dp=True))
    # The MLA latent is replicated on every TP rank; under attention DP each GPU keeps only its
    # sequences'.
    assert dp.kv_bytes_per_token == pytest.approx(tp.kv_bytes_per_token / 8)
    extra = m.attention_params * m.num_layers * 1.0 * 7 / 8  # attention weights replicated (fp8)
    assert dp.memory.weight_bytes == pytest.approx(tp.memory.weight_bytes + extra)
    link = [
        {o.op.name: o.op.link_bytes for o in x.decode_cost(64, 2048).ops if o.op.kind == "comm"}
        for x in (tp, dp)
    ]
    # TP attention: every rank holds every token, so the 58 MoE layers dispatch nothing and sum
    # their experts' outputs in the MLP all-reduce (two reduces in each of the 61 layers)...
    assert "ep all-to-all" not in link[0]
    buf = 64 * m.hidden_size * 2.0  # tokens x hidden x bf16 activations
    assert link[0]["tp all-reduce"] == pytest.approx(61 * 2 * 2 * 7 / 8 * buf)
    # ...attention DP: only the 3 dense layers gather/scatter, the MoE layers dispatch their own
    # tokens.
    assert link[1]["tp all-reduce"] == pytest.approx(link[0]["tp all-reduce"] * 3 / (2 * 61))
    a2a = 58 * 2 * 7 / 8 * (64 / 8) * m.moe.experts_per_token * buf / 64
    assert link[1]["ep all-to-all"] == pytest.approx(a2a)
    # A large long-context decode batch: each GPU reads 1/8 of the latent cache instead of all of
    # it.
    assert dp.step_time_s([1] * 256, [4000] * 256) < 0.7 * tp.step_time_s([1] * 256, [4000] * 256)
    # The fast paths agree with the itemised cost under attention DP.
    assert dp.step_time_s([1] * 256, [4000] * 256) == pytest.approx(
        dp.decode_cost(256, 4001).time_s, rel=1e-9
    )
    assert dp.mixed_step_time_s(3, 300, [500], [0]) == pytest.approx(
        dp.step_time_s([1, 1, 1, 500], [100] * 3 + [0])
    )


def test_attention_dp_on_a_dense_gqa_model_keeps_one_reduce_per_layer():
    m, hw = load_model("llama-3.1-70b"), load_hardware("h100-sxm")
    tp = StepModel(m, hw, Precision.parse("bf16"), Parallelism(tp=8))
    dp = StepModel(m, hw, Precision.parse("bf16"), Parallelism(tp=8, attn_dp=True))
    ar = {
        s: next(o for o in x.decode_cost(16, 512).ops if o.op.name == "tp all-reduce")
        for s, x in (("tp", tp), ("dp", dp))
    }
    assert ar["dp"].op.link_bytes == pytest.approx(
        ar["tp"].op.link_bytes / 2
    )  # all-gather + reduce-scatter only
    assert (
        dp.kv_capacity_tokens < tp.kv_capacity_tokens
    )  # 8 KV heads / TP 8 shard perfectly: DP only adds weights


def test_tp_must_shard_attention_heads_as_engines_do():
    from infercast.errors import ConfigError
    from infercast.specs.parallel import check_attention_split

    llama8, dsr1 = (
        load_model("llama-3.1-8b"),
        load_model("deepseek-r1"),
    )  # 32 q / 8 kv heads; MLA, 128 heads
    for tp in (
        1,
        2,
        4,
        8,
        16,
        32,
    ):  # 16, 32: each rank holds a replica of its KV head (vLLM's rule)
        check_attention_split(llama8, Parallelism(tp=tp))
    with pytest.raises(ConfigError, match="use `tp` 1, 2, 4, 8, 16, 32"):
        check_attention_split(llama8, Parallelism(tp=3))
    check_attention_split(dsr1, Parallelism(tp=64))  # MLA: one latent KV, replicated
    with pytest.raises(ConfigError, match="128 attention heads"):
        check_attention_split(dsr1, Parallelism(tp=72))
    check_attention_split(
        dsr1, Parallelism(tp=72, ep=72, attn_dp=True)
    )  # attention DP: whole heads per rank
    with pytest.raises(ConfigError):
        StepModel(llama8, load_hardware("h100-sxm"), Precision.parse("bf16"), Parallelism(tp=3))
    # a physics floor keeps the ideal even split
    floor = StepModel(
        llama8,
        load_hardware("h100-sxm"),
        Precision.parse("bf16"),
        Parallelism(tp=3),
        whole_heads=False,
    )
    assert floor.decode_cost(1, 128).floor_time_s > 0


def test_kv_heads_must_divide_or_be_divided_by_tp():
    from dataclasses import replace

    from infercast.errors import ConfigError
    from infercast.specs.parallel import check_attention_split

    base = load_model("llama-3.1-8b")
    odd = replace(
        base, attention=replace(base.attention, num_heads=48, num_kv_heads=12)
    )  # 48 q, 12 kv heads
    check_attention_split(odd, Parallelism(tp=4))  # 12 kv / 4
    check_attention_split(odd, Parallelism(tp=24))  # 24 = 2 x 12: kv replicated
    with pytest.raises(ConfigError, match="12 KV heads"):
        check_attention_split(odd, Parallelism(tp=8))  # 48 q / 8 is fine; 12 kv vs 8 is neither
