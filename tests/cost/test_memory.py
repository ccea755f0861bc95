"""The per-GPU memory plan (cost/memory.py) against hand calculations from published figures.

Inputs and their sources:
- H100 SXM capacity as CUDA reports it: 85,045,477,376 bytes (deviceQuery on an H100 80GB
  HBM3, ``data/hardware_capacity.csv``); 95 % of it is usable (the default fraction):
  80,793,203,507.2 bytes.
- Llama-3.1-8B: 8,030,261,248 parameters (model card); Llama-3.1-70B: 70,553,706,496
  (safetensors index of meta-llama/Llama-3.1-70B). KV per token and layer: 2 * 8 KV heads *
  128 * 2 bytes (bf16) = 4,096 bytes; 32 layers (8B) = 131,072, 80 layers (70B) = 327,680.
- DeepSeek-V3: 61 layers, an MLA latent of 512 + 64 elements per token and layer
  (DeepSeek-V2 paper, arXiv:2405.04434, Table 1), replicated on every TP rank.
- gpt-oss: checkpoint sizes 60.8 GiB (120b) and 12.8 GiB (20b) with MXFP4 routed experts
  (OpenAI, gpt-oss model card, arXiv:2508.10925, Table 1); 18 of gpt-oss-120b's 36 layers
  attend over a sliding window of 128 tokens (its ``config.json``, ``layer_types``).
"""

from __future__ import annotations

import pytest

from infercast.cost.experts import MXFP4_BYTES_PER_WEIGHT
from infercast.cost.memory import activation_reserve_bytes, fit_suggestions, plan_memory
from infercast.specs.catalog import load_hardware, load_model
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision

H100_BYTES = 85_045_477_376
AVAILABLE = H100_BYTES * 0.95
BF16 = Precision.parse("bf16")
GiB = 2**30


@pytest.fixture(scope="module")
def h100():
    hw = load_hardware("h100-sxm")
    assert hw.memory_bytes == H100_BYTES
    return hw


def test_llama8b_on_one_h100(h100):
    plan = plan_memory(load_model("llama-3.1-8b"), h100, BF16, Parallelism())
    assert plan.available_bytes == pytest.approx(AVAILABLE)
    assert plan.weight_bytes == 2 * 8_030_261_248
    # Largest step of 8192 tokens: residual stream (3 x 4096), the widest projection
    # (gate+up, 2 x 14336), the MLP intermediate (14336), in bf16; fp32 logits for 256 rows.
    assert plan.activation_bytes == 8192 * (3 * 4096 + 2 * 14336 + 14336) * 2 + 256 * 128_256 * 4
    assert plan.kv_bytes_per_token == 131_072
    budget = AVAILABLE - 16_060_522_496 - 1_037_303_808
    assert plan.kv_budget_bytes == pytest.approx(budget)
    assert plan.kv_capacity_tokens == 485_957 == int(budget // 131_072)


def test_a_128k_context_holds_16_gib_of_kv(h100):
    plan = plan_memory(load_model("llama-3.1-8b"), h100, BF16, Parallelism())
    assert plan.kv_bytes(1, 131_072) == 16 * GiB  # 131,072 tokens x 131,072 bytes = 2**34


def test_batch_and_context_limits_are_the_kv_budget_divided(h100):
    plan = plan_memory(load_model("llama-3.1-8b"), h100, BF16, Parallelism())
    per_seq = 4096 * 131_072  # a 4096-token sequence: 512 MiB
    assert plan.max_batch(4096) == int(plan.kv_budget_bytes // per_seq) == 118
    assert plan.fits(118, 4096) and not plan.fits(119, 4096)
    assert plan.max_context(1) == plan.kv_capacity_tokens
    assert plan.max_context(4) == int(plan.kv_budget_bytes // (4 * 131_072))


def test_llama70b_needs_two_h100s(h100):
    model = load_model("llama-3.1-70b")
    one = plan_memory(model, h100, BF16, Parallelism())
    assert one.weight_bytes == 2 * 70_553_706_496 and not one.weights_fit
    assert one.max_batch(1000) == 0 and one.kv_capacity_tokens == 0
    tips = fit_suggestions(one, 1, 1000, Parallelism(), BF16)
    assert len(tips) == 1 and "raise --tp" in tips[0]

    two = plan_memory(model, h100, BF16, Parallelism(tp=2))
    assert two.weight_bytes == 70_553_706_496
    # 8192 x (3 x 8192 + 57344 / 2 + 28672 / 2) x 2 bytes + 256 x 128256 / 2 x 4 bytes
    assert two.activation_bytes == 1_107_296_256 + 65_667_072
    assert two.kv_bytes_per_token == 327_680 / 2  # 4 of the 8 KV heads per GPU
    budget = AVAILABLE - 70_553_706_496 - 1_172_963_328
    assert two.kv_capacity_tokens == int(budget // 163_840) == 55_337


def test_kv_heads_replicated_beyond_their_count(h100):
    """tp 16 over 8 KV heads: each GPU keeps one whole head, 1/8 (not 1/16) of a token's KV."""
    plan = plan_memory(load_model("llama-3.1-8b"), h100, BF16, Parallelism(tp=16))
    assert plan.kv_shard == 1 / 8
    assert plan.kv_bytes_per_token == 131_072 / 8


def test_mla_latent_is_replicated_on_every_tp_rank(h100):
    fp8 = Precision.parse("fp8", kv_cache="fp8")
    plan = plan_memory(load_model("deepseek-v3"), h100, fp8, Parallelism(tp=8))
    assert plan.kv_shard == 1.0
    assert plan.kv_bytes_per_token == 61 * (512 + 64) * 1  # fp8 KV: 35,136 bytes per token


def test_attention_data_parallel_replicates_attention_weights(h100):
    plan = plan_memory(load_model("llama-3.1-8b"), h100, BF16, Parallelism(tp=2, attn_dp=True))
    attention = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024) * 2  # q, o, k, v of 32 layers, bf16
    assert plan.weight_bytes == 2 * 8_030_261_248 / 2 + attention / 2
    assert plan.kv_bytes_per_token == 131_072 / 2  # each GPU holds its own sequences' KV


@pytest.mark.parametrize(
    ("model", "published_gib"), [("gpt-oss-120b", 60.8), ("gpt-oss-20b", 12.8)]
)
def test_mxfp4_experts_weigh_what_the_checkpoint_does(h100, model, published_gib):
    plan = plan_memory(
        load_model(model), h100, BF16, Parallelism(), expert_weight_bytes=MXFP4_BYTES_PER_WEIGHT
    )
    assert plan.weight_bytes / GiB == pytest.approx(published_gib, rel=0.01)


def test_sliding_layers_hold_only_their_window(h100):
    plan = plan_memory(load_model("gpt-oss-120b"), h100, BF16, Parallelism())
    per_layer_token = 2 * 8 * 64 * 2  # K and V, 8 KV heads of 64, bf16
    assert plan.kv_bytes(1, 8192) == (18 * 8192 + 18 * 128) * per_layer_token == 306_708_480
    assert plan.kv_bytes_per_token == 36 * per_layer_token  # capacity counts full attention


def test_activation_reserve_of_a_moe_counts_the_routed_rows():
    """Mixtral: the MLP intermediate is top-2 x 14336 wide per token."""
    got = activation_reserve_bytes(load_model("mixtral-8x7b"), BF16, Parallelism(), 1024, 8)
    assert got == 1024 * (3 * 4096 + 2 * 28672 + 28672) * 2 + 8 * 32_000 * 4


def test_suggestions_for_a_batch_that_does_not_fit(h100):
    plan = plan_memory(load_model("llama-3.1-8b"), h100, BF16, Parallelism())
    tips = fit_suggestions(plan, 1000, 8192, Parallelism(), BF16)
    assert tips[0] == "batch <= 59 at context 8192"
    assert "--kv-cache fp8 halves the KV bytes" in tips and "--tp 2" in tips[-1]
    fp8 = Precision.parse("bf16", kv_cache="fp8")
    assert not any("--kv-cache" in t for t in fit_suggestions(plan, 1000, 8192, Parallelism(), fp8))
    assert plan.shortfall_message(1000, 8192).startswith("needs ")
