"""LoRA adapters (cost/lora.py) against hand calculations on Llama-3.1-8B."""

import pytest

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.lora import LoraSpec, LoraStepModel, parse_targets
from infercast.cost.step import StepModel
from infercast.errors import ConfigError
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision

# q: 4096 -> 4096, v: 4096 -> 8 x 128 = 1024; rank 16; 32 layers; bf16 adapters
QV_PARAMS = 16 * ((4096 + 4096) + (4096 + 1024)) * 32  # 6,815,744 per adapter
QV_BYTES = QV_PARAMS * 2


def _sm(lora=None, tp=1, bw=5.563e10, max_seqs=256):
    args = (
        load_model("llama-3.1-8b"),
        load_hardware("h100-sxm"),
        Precision.parse("bf16", None),
        Parallelism(tp=tp),
        EfficiencyProfile(),
    )
    if lora is None:
        return StepModel(*args, max_seqs=max_seqs)
    return LoraStepModel(*args, max_seqs=max_seqs, lora=lora, host_bandwidth_bytes_per_s=bw)


def test_targets():
    assert parse_targets("attn") == ("q", "k", "v", "o")
    assert parse_targets("q, v,q") == ("q", "v")
    with pytest.raises(ConfigError, match="LoRA target 'x'"):
        parse_targets("q,x")


def test_adapter_size_and_flops_by_hand():
    sm = _sm(LoraSpec(16, ("q", "v")))
    assert sm.adapter_bytes == QV_BYTES
    op = sm.lora_op(100, 100)
    assert op.op.flops == 2 * QV_PARAMS * 100


def test_tensor_parallel_split_of_column_and_row_targets():
    # tp 2: q column-parallel (A whole, B halved), o row-parallel (A halved, B whole)
    sm = _sm(LoraSpec(8, ("q", "o")), tp=2)
    assert sm.adapter_bytes == 8 * ((4096 + 2048) + (2048 + 4096)) * 32 * 2


def test_distinct_adapters_in_a_batch():
    spec = LoraSpec(16, adapters=4)
    assert spec.distinct(2) == pytest.approx(4 * (1 - 0.75**2))  # 1.75
    assert LoraSpec(16, adapters=1).distinct(64) == pytest.approx(1.0)


def test_mixing_adapters_reads_each_distinct_adapters_weights():
    one, many = (
        _sm(LoraSpec(16, ("q", "v"), adapters=1)),
        _sm(LoraSpec(16, ("q", "v"), adapters=64)),
    )
    a, b = one.lora_op(32, 32), many.lora_op(32, 32)
    d = 64 * (1 - (63 / 64) ** 32)
    assert b.op.compulsory_bytes - a.op.compulsory_bytes == pytest.approx((d - 1) * QV_BYTES)
    # a decode step is memory bound here: the extra time is the extra bytes at the profile's
    # bandwidth
    bw = load_hardware("h100-sxm").memory_bandwidth_bytes_per_s
    assert b.time_s - a.time_s == pytest.approx(
        (d - 1) * QV_BYTES / (bw * EfficiencyProfile().mem_bw_eff), rel=1e-9
    )
    base = _sm().decode_cost(32, 1000).time_s
    assert one.decode_cost(32, 1000).time_s == pytest.approx(base + a.time_s)
    assert many.step_time_s([1] * 32, [999] * 32) == pytest.approx(base + b.time_s)


def test_resident_adapters_come_out_of_the_kv_cache():
    base, lora = _sm(), _sm(LoraSpec(16, ("q", "v"), adapters=8))
    assert lora.memory.weight_bytes - base.memory.weight_bytes == 8 * QV_BYTES
    assert lora.kv_capacity_tokens < base.kv_capacity_tokens


def test_a_missing_adapter_is_loaded_over_the_host_link_before_its_first_step():
    spec = LoraSpec(16, ("q", "v"), adapters=64, slots=8)
    sm = _sm(spec, bw=5.563e10)
    assert sm.hit_ratio == pytest.approx(8 / 64)
    start = (
        sm.step_time_s([512], [0])
        - StepModel.step_time_s(sm, [512], [0])
        - sm.lora_op(512, 1).time_s
    )
    assert start == pytest.approx((1 - 8 / 64) * QV_BYTES / 5.563e10)
    # a later chunk of the same prompt (cached > 0) and decodes load nothing
    later = sm.step_time_s([512], [512]) - StepModel.step_time_s(sm, [512], [512])
    assert later == pytest.approx(sm.lora_op(512, 1).time_s)


def test_the_fast_paths_agree_with_step_time():
    sm = _sm(LoraSpec(16, adapters=16, slots=4))
    full = sm.step_time_s([1] * 10 + [256], [500] * 10 + [0])
    assert sm.mixed_step_time_s(10, 5000, [256], [0]) == pytest.approx(full, rel=1e-12)
    assert sm.chunk_step_time_s(10, 5000, 256, 0) == pytest.approx(full, rel=1e-12)
    a, b = sm.decode_affine(10)
    assert a + b * 5000 == pytest.approx(sm.step_time_s([1] * 10, [500] * 10), rel=1e-9)


def test_moe_experts_and_mla_are_refused():
    moe = load_model("qwen3-30b-a3b")
    with pytest.raises(ConfigError, match="routed experts"):
        LoraStepModel(moe, load_hardware("h100-sxm"), lora=LoraSpec(8, ("up",)))
