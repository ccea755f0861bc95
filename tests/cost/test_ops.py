"""The per-operator ledger (cost/ops.py) against hand calculations from published configs.

Sources of the hand numbers:
- Llama-3.1-8B ``config.json`` (meta-llama/Llama-3.1-8B): hidden 4096, 32 layers, 32 query
  heads, 8 KV heads, head_dim 128, intermediate 14336, vocab 128256, untied LM head; the
  model card's 8,030,261,248 parameters. Linear (matmul) weights per layer:
  q 4096*4096 + k 4096*1024 + v 4096*1024 + o 4096*4096 = 41,943,040 and
  gate/up/down 3*4096*14336 = 176,160,768; 32 layers = 6,979,321,856; LM head
  4096*128256 = 525,336,576; together 7,504,658,432. The rest of the 8.03 B is the
  embedding (525,336,576) and the RMSNorm scales (65 * 4096 = 266,240).
- Forward FLOPs of the matmuls: 2 per weight per token (Kaplan et al. 2020, "Scaling Laws
  for Neural Language Models", Table 1: C_forward ~ 2N).
- Attention FLOPs: 2 * d_attn for the logits and 2 * d_attn for the weighted sum of values,
  per query, key and layer (Hoffmann et al. 2022, "Training Compute-Optimal Large Language
  Models", Appendix F), d_attn = heads * head_dim = 4096 here: 16,384 per pair and layer.
- KV bytes per token: 2 (K and V) * 8 heads * 128 * 2 bytes (bf16) * 32 layers = 131,072.
- Mixtral-8x7B ``config.json``: 8 experts, top-2, hidden 4096, expert width 14336.
- DeepSeek-V3 ``config.json``: kv_lora_rank 512, qk_rope_head_dim 64, 128 heads; MLA caches
  the compressed latent plus the decoupled RoPE key, (d_c + d_h^R) elements per token and
  layer (DeepSeek-V2 paper, arXiv:2405.04434, Section 2.1.4 and Table 1).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from infercast.cost.ops import (
    ATTENTION,
    COMM,
    GEMM,
    Shards,
    elementwise,
    gemm,
    span_pairs,
    span_stats,
)
from infercast.specs.catalog import load_model
from infercast.specs.model import ATTN_CHUNKED, ATTN_FULL, ATTN_SLIDING
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision

LLAMA8B_LINEAR = 7_504_658_432  # matmul weights incl. the LM head (module docstring)
LLAMA8B_LINEAR_NO_HEAD = LLAMA8B_LINEAR - 4096 * 128_256
LLAMA8B_NORMS = 65 * 4096  # 2 per layer + the final norm
LLAMA8B_KV_PER_TOKEN = 2 * 8 * 128 * 2 * 32  # bytes, bf16
LLAMA8B_PAIR_FLOPS = 4 * 32 * 128  # per (query, key) pair and layer: 2 d_attn + 2 d_attn


def ledger(shards: Shards, new: list[int], cached: list[int], logits: int) -> list:
    """Every op of one step, all layers, as a step model would sum them."""
    n, c = np.array(new, dtype=float), np.array(cached, dtype=float)
    tokens = float(n.sum())
    ops = []
    for layer, count in shards.model.layer_groups:
        stats = span_stats(layer.attention, layer.window, n, c)
        layer_ops = shards.layer_token_ops(layer, tokens) + shards.attention_ops(stats, tokens)
        ops += [op.scaled(count) for op in layer_ops]
    return ops + shards.head_ops(tokens, logits)


def total(ops, attr: str, kind: str | None = None) -> float:
    return sum(getattr(op, attr) for op in ops if kind is None or op.kind == kind)


@pytest.fixture(scope="module")
def llama8b() -> Shards:
    return Shards(load_model("llama-3.1-8b"), Precision.parse("bf16"), Parallelism())


def test_the_hand_count_is_the_published_parameter_count():
    embedding = 4096 * 128_256
    assert LLAMA8B_LINEAR + embedding + LLAMA8B_NORMS == 8_030_261_248


def test_gemm_is_two_flops_per_multiply_accumulate_and_streams_its_weights_once():
    op = gemm("proj", m=3, k=4096, n=1024, w_bytes=2, a_bytes=2)
    assert op.flops == 2 * 3 * 4096 * 1024
    assert op.compulsory_bytes == 4096 * 1024 * 2
    assert op.bytes_read == 4096 * 1024 * 2 + 3 * 4096 * 2
    assert op.bytes_written == 3 * 1024 * 2
    assert op.intensity == pytest.approx(op.flops / (op.bytes_read + op.bytes_written))


def test_elementwise_counts_only_its_extra_bytes_as_compulsory():
    op = elementwise("norm", elems_in=10, elems_out=10, a_bytes=2, flops_per_elem=4, extra_bytes=8)
    assert (op.flops, op.bytes_read, op.bytes_written, op.compulsory_bytes) == (40, 28, 20, 8)


def test_decode_token_matmul_flops_are_twice_the_linear_weights(llama8b):
    ops = ledger(llama8b, new=[1], cached=[1023], logits=1)
    assert total(ops, "flops", GEMM) == 2 * LLAMA8B_LINEAR == 15_009_316_864


def test_decode_attention_flops_and_kv_bytes(llama8b):
    ops = ledger(llama8b, new=[1], cached=[1023], logits=1)
    # The new token attends to 1023 cached keys and itself, in each of 32 layers.
    assert total(ops, "flops", ATTENTION) == 32 * LLAMA8B_PAIR_FLOPS * 1024 == 536_870_912
    cached_op = next(op for op in ops if op.name == "attention (cached KV)")
    assert cached_op.bytes_read == 1023 * LLAMA8B_KV_PER_TOKEN == 134_086_656


def test_decode_compulsory_bytes_are_weights_plus_kv(llama8b):
    """Batch-1 decode reads every matmul weight and norm scale once, one embedding row, the KV."""
    ops = ledger(llama8b, new=[1], cached=[1023], logits=1)
    weights = 2 * (LLAMA8B_LINEAR + LLAMA8B_NORMS + 4096)
    kv = (1023 + 1) * LLAMA8B_KV_PER_TOKEN  # read the cached entries, write the new one
    assert total(ops, "compulsory_bytes") == weights + kv == 15_144_075_264


def test_prefill_matmuls_scale_with_tokens_and_the_head_with_sampled_rows(llama8b):
    n = 2048
    ops = ledger(llama8b, new=[n], cached=[0], logits=1)
    assert total(ops, "flops", GEMM) == 2 * n * LLAMA8B_LINEAR_NO_HEAD + 2 * 4096 * 128_256
    # Causal: token p sees p + 1 keys, n (n + 1) / 2 pairs per layer.
    assert total(ops, "flops", ATTENTION) == 32 * LLAMA8B_PAIR_FLOPS * n * (n + 1) // 2


def test_batching_decodes_shares_the_weights_not_the_kv(llama8b):
    one = ledger(llama8b, new=[1], cached=[511], logits=1)
    four = ledger(llama8b, new=[1] * 4, cached=[511] * 4, logits=4)
    weights = 2 * (LLAMA8B_LINEAR + LLAMA8B_NORMS)
    kv = 512 * LLAMA8B_KV_PER_TOKEN
    embedding_row = 4096 * 2
    assert total(one, "compulsory_bytes") == weights + embedding_row + kv
    assert total(four, "compulsory_bytes") == weights + 4 * embedding_row + 4 * kv
    assert total(four, "flops", GEMM) == 4 * total(one, "flops", GEMM)


def test_tensor_parallel_splits_matmuls_and_adds_two_ring_all_reduces_per_layer():
    shards = Shards(load_model("llama-3.1-8b"), Precision.parse("bf16"), Parallelism(tp=2))
    ops = ledger(shards, new=[1], cached=[1023], logits=1)
    assert total(ops, "flops", GEMM) == LLAMA8B_LINEAR  # half of 2 * weights on each GPU
    # Ring all-reduce (Patarasuk & Yuan 2009): each GPU sends 2 (n - 1) / n of the buffer,
    # here one token's 4096 bf16 activations, after attention and after the MLP.
    comm = [op for op in ops if op.kind == COMM]
    assert sum(op.link_bytes for op in comm) == 32 * 2 * (2 * 1 / 2 * 4096 * 2)
    assert sum(op.collectives for op in comm) == 64
    cached_op = next(op for op in ops if op.name == "attention (cached KV)")
    assert cached_op.bytes_read == 1023 * LLAMA8B_KV_PER_TOKEN / 2  # 4 of the 8 KV heads


def test_kv_heads_are_replicated_when_tp_exceeds_them():
    """vLLM replicates KV heads when tp > num_kv_heads (QKVParallelLinear, num_kv_head_replicas)."""
    shards = Shards(load_model("llama-3.1-8b"), Precision.parse("bf16"), Parallelism(tp=16))
    assert shards.kv_heads == 1
    assert shards.kv_elems == 2 * 1 * 128


def test_mla_decode_reads_the_latent_and_prefill_expands_it():
    shards = Shards(load_model("deepseek-v3"), Precision.parse("bf16"), Parallelism())
    assert shards.kv_elems == 512 + 64
    stats = span_stats(ATTN_FULL, 0, np.array([1.0]), np.array([999.0]))
    cached = shards.attention_ops(stats, 1.0)[0]
    # Absorbed decode: 128 heads attend over the latent, d_qk = 512 + 64, d_v = 512.
    assert cached.flops == 2 * 128 * (576 + 512) * 999
    assert cached.bytes_read == 999 * 576 * 2
    pre = span_stats(ATTN_FULL, 0, np.array([100.0]), np.array([999.0]))
    cached_pre = shards.attention_ops(pre, 100.0)[0]
    # Expanded prefill: d_qk = 128 + 64, d_v = 128, and kv_b expands each cached latent:
    # 2 * 512 * 128 heads * (128 + 128) FLOPs per cached token.
    expand = 2 * 512 * 128 * (128 + 128) * 999
    assert cached_pre.flops == 2 * 128 * (192 + 128) * 100 * 999 + expand


def test_moe_touches_the_expected_number_of_distinct_experts():
    """Uniform top-k routing: an expert is missed by a token with probability 1 - k/E."""
    shards = Shards(load_model("mixtral-8x7b"), Precision.parse("bf16"), Parallelism())
    expert_gate_up_bytes = 4096 * 2 * 14336 * 2
    layer = next(layer for layer in shards.model.layers if layer.moe)

    def touched(tokens: int) -> float:
        op = next(op for op in shards.mlp_ops(layer, tokens) if op.name == "moe.experts.gate_up")
        return op.compulsory_bytes / expert_gate_up_bytes

    assert touched(1) == pytest.approx(2.0)  # one token: exactly its k = 2 experts
    assert touched(2) == pytest.approx(8 * (1 - (6 / 8) ** 2))  # 3.5
    assert touched(64) == pytest.approx(8.0, rel=1e-7)  # a large batch touches all 8

    rng = np.random.default_rng(0)  # Monte Carlo of the same routing: 4 tokens, top-2 of 8
    draws = [
        len({e for _ in range(4) for e in rng.choice(8, 2, replace=False)}) for _ in range(20000)
    ]
    assert touched(4) == pytest.approx(np.mean(draws), rel=0.01)


def test_moe_flops_follow_the_routed_rows_not_the_touched_experts():
    shards = Shards(load_model("mixtral-8x7b"), Precision.parse("bf16"), Parallelism())
    layer = next(layer for layer in shards.model.layers if layer.moe)
    ops = {op.name: op for op in shards.mlp_ops(layer, 10)}
    rows = 10 * 2
    assert ops["moe.experts.gate_up"].flops == 2 * rows * 4096 * 2 * 14336
    assert ops["moe.experts.down"].flops == 2 * rows * 14336 * 4096
    assert ops["moe.router"].flops == 2 * 10 * 4096 * 8


def _brute_force(kind: str, window: int, new: int, cached: int) -> tuple[int, int, int]:
    """(pairs with cached keys, pairs with new keys, cached entries read), by enumeration."""

    def visible(p: int, key: int) -> bool:
        if key > p:
            return False
        if kind == ATTN_SLIDING:
            return p - key < window
        if kind == ATTN_CHUNKED:
            return p // window == key // window
        return True

    queries = range(cached, cached + new)
    pc = sum(visible(p, k) for p in queries for k in range(cached))
    pn = sum(visible(p, k) for p in queries for k in range(cached, cached + new))
    read = sum(any(visible(p, k) for p in queries) for k in range(cached))
    return pc, pn, read


@pytest.mark.parametrize("kind,window", [(ATTN_FULL, 0), (ATTN_SLIDING, 4), (ATTN_CHUNKED, 4)])
def test_span_pairs_count_the_keys_each_query_sees(kind, window):
    for new, cached in itertools.product(range(1, 10), range(0, 13)):
        pc, pn, read = span_pairs(kind, window, np.array([float(new)]), np.array([float(cached)]))
        expected = _brute_force(kind, window, new, cached)
        assert (pc[0], pn[0]) == expected[:2], (kind, new, cached)
        if new == 1:  # decode reads exactly the cached keys it sees
            assert read[0] == expected[2], (kind, new, cached)


def test_span_pairs_hand_examples():
    # Sliding window 4, decode at position 10: keys 7..10, three of them cached.
    pc, pn, read = span_pairs(ATTN_SLIDING, 4, np.array([1.0]), np.array([10.0]))
    assert (pc[0], pn[0], read[0]) == (3, 1, 3)
    # Chunks of 4, positions 10, 11, 12 on top of 10 cached: 10 and 11 see cached 8 and 9
    # (4 cached pairs); new pairs 1 + 2 (chunk 8..11) + 1 (12 opens a chunk) = 4.
    pc, pn, read = span_pairs(ATTN_CHUNKED, 4, np.array([3.0]), np.array([10.0]))
    assert (pc[0], pn[0], read[0]) == (4, 4, 2)


def test_the_lm_head_streams_its_own_format_and_the_layers_theirs():
    """``Precision.head_weights``: a Q4_1 GGUF's Q8_0 head (int8) beside 4-bit layers reads
    vocab x hidden bytes at one byte a weight; the layers keep int4's bytes."""
    model = load_model("llama-3.1-8b")
    mixed = Shards(model, Precision.parse("int4", "bf16", head_weights="int8"), Parallelism())
    plain = Shards(model, Precision.parse("int4", "bf16"), Parallelism())
    head = {op.name: op for op in mixed.head_ops(1, 1)}["lm_head"]
    assert head.bytes_read == pytest.approx(4096 * 128_256 * 1.0 + 4096 * 2)  # + its input
    assert head.bytes_read > {op.name: op for op in plain.head_ops(1, 1)}["lm_head"].bytes_read
    layer = model.layers[0]
    assert total(mixed.layer_token_ops(layer, 1), "bytes_read") == pytest.approx(
        total(plain.layer_token_ops(layer, 1), "bytes_read")
    )
    assert Precision.parse("int4", head_weights="int4").head_weights is None  # same: no head
