"""The paged, batched, chunked forward pass equals a plain one-request reference."""

from __future__ import annotations

import numpy as np
import pytest

from infercast.engine.config import EngineModelConfig, named_config
from infercast.engine.gguf_loader import unpermute_rows
from infercast.engine.kv_store import PagedKVStore
from infercast.engine.linear import linear
from infercast.engine.model import LlamaModel, SeqInput
from infercast.engine.reference import reference_logits
from infercast.engine.rope import inv_frequencies
from infercast.engine.weights import pack_weights, random_weights
from infercast.sched.request import Request
from infercast.sched.scheduler import Scheduler, SchedulerConfig


def _run_scheduled(cfg, w, sequences, budget, block_size, num_blocks):
    """Teacher-force each full token sequence through the real scheduler's batches.

    Each request's prompt is its sequence minus the last ``n_out`` tokens; the
    "sampled" tokens are the sequence's own next tokens, so the logits of every
    computed position can be compared with one reference pass over the sequence.
    """
    sched = Scheduler(
        SchedulerConfig(
            policy="chunked",
            max_num_seqs=8,
            max_num_batched_tokens=budget,
            block_size=block_size,
            num_blocks=num_blocks,
        )
    )
    n_out = 4
    for rid, seq in sequences.items():
        sched.add_request(Request(rid, len(seq) - n_out, n_out + 1))
    model = LlamaModel(cfg, w, 512)
    kv = PagedKVStore(cfg, num_blocks, block_size)
    got = {rid: {} for rid in sequences}
    shapes = set()
    while sched.has_unfinished:
        batch = sched.schedule()
        inputs = [
            SeqInput(
                sequences[s.request_id][
                    s.num_cached_tokens : s.num_cached_tokens + s.num_new_tokens
                ],
                s.num_cached_tokens,
                s.block_table,
            )
            for s in batch.seqs
        ]
        shapes.add(tuple((s.num_new_tokens > 1, s.num_cached_tokens > 0) for s in batch.seqs))
        for s, lg in zip(batch.seqs, model.forward(inputs, kv, all_logits=True), strict=True):
            for i in range(s.num_new_tokens):
                got[s.request_id][s.num_cached_tokens + i] = lg[i]
        sched.update(batch)
    return got, shapes


@pytest.mark.parametrize("size", ["tiny", "tiny-llama3"])
def test_paged_batched_chunked_matches_reference(size):
    cfg = named_config(size)
    w = random_weights(cfg, seed=3)
    rng = np.random.default_rng(7)
    sequences = {
        f"r{i}": [int(t) for t in rng.integers(0, 256, n)] for i, n in enumerate((29, 11, 45, 6))
    }
    got, shapes = _run_scheduled(cfg, w, sequences, budget=13, block_size=4, num_blocks=64)
    # The schedule really mixed chunked prefills with decodes in one step.
    assert any(len(s) > 1 and any(p and c for p, c in s) for s in shapes)
    for rid, seq in sequences.items():
        ref = reference_logits(cfg, w, seq)
        positions = sorted(got[rid])
        assert positions == list(range(len(seq)))
        ours = np.stack([got[rid][p] for p in positions])
        assert np.abs(ours - ref).max() < 1e-4


def test_attention_reads_through_block_table():
    """Scrambled, non-contiguous blocks give the same logits as contiguous ones."""
    cfg = named_config("tiny")
    w = random_weights(cfg, seed=1)
    model = LlamaModel(cfg, w, 64)
    toks = list(range(40, 62))
    a = model.forward(
        [SeqInput(toks, 0, [0, 1, 2, 3, 4, 5])], PagedKVStore(cfg, 16, 4), all_logits=True
    )[0]
    b = model.forward(
        [SeqInput(toks, 0, [13, 2, 9, 15, 0, 7])], PagedKVStore(cfg, 16, 4), all_logits=True
    )[0]
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_llama3_rope_scaling_keeps_high_and_divides_low_frequencies():
    cfg = named_config("tiny-llama3")
    plain = inv_frequencies(cfg.replace(rope_scaling=None))
    scaled = inv_frequencies(cfg)
    wavelen = 2 * np.pi / plain
    old = cfg.rope_scaling["original_max_position_embeddings"]
    high = wavelen < old / cfg.rope_scaling["high_freq_factor"]
    low = wavelen > old / cfg.rope_scaling["low_freq_factor"]
    assert high.any() and low.any()
    np.testing.assert_allclose(scaled[high], plain[high])
    np.testing.assert_allclose(scaled[low], plain[low] / cfg.rope_scaling["factor"])
    linear = inv_frequencies(cfg.replace(rope_scaling={"type": "linear", "factor": 4.0}))
    np.testing.assert_allclose(linear, plain / 4.0)


def test_gguf_row_permutation_round_trips():
    # llama.cpp convert_hf_to_gguf.py LlamaModel.permute, applied to HF rows.
    heads, d, hidden = 3, 8, 5
    hf = np.arange(heads * d * hidden, dtype=np.float32).reshape(heads * d, hidden)
    gguf = hf.reshape(heads, 2, d // 2, hidden).swapaxes(1, 2).reshape(hf.shape)
    np.testing.assert_array_equal(unpermute_rows(gguf, heads), hf)


def test_config_errors_name_the_value():
    from infercast.errors import ModelConfigError

    with pytest.raises(ModelConfigError, match="num_key_value_heads=3"):
        EngineModelConfig(
            hidden_size=64,
            num_layers=1,
            num_heads=4,
            num_kv_heads=3,
            intermediate_size=8,
            vocab_size=10,
        )
    with pytest.raises(ModelConfigError, match="yarn"):
        named_config("tiny").replace(rope_scaling={"rope_type": "yarn", "factor": 2.0})


def test_parameter_count_matches_tinyllama():
    # TinyLlama-1.1B: 1,100,048,384 parameters (HF model card / safetensors index).
    assert named_config("1b").num_params == 1_100_048_384


def test_long_prefill_in_query_blocks_matches_reference():
    """Prompts longer than QUERY_BLOCK take the blocked-attention path, chunked or not."""
    cfg = named_config("tiny")
    w = random_weights(cfg, seed=4)
    seq = [int(t) for t in np.random.default_rng(5).integers(0, 256, 300)]
    got, _ = _run_scheduled(cfg, w, {"long": seq}, budget=200, block_size=16, num_blocks=40)
    ours = np.stack([got["long"][p] for p in range(len(seq))])
    assert np.abs(ours - reference_logits(cfg, w, seq)).max() < 1e-4


@pytest.mark.parametrize("size", ["tiny", "tiny-llama3"])
def test_packed_weights_are_the_same_model_in_one_buffer(size):
    cfg = named_config(size)
    packed = pack_weights(random_weights(cfg, seed=5))
    plain = random_weights(cfg, seed=5)
    mats = [
        getattr(lw, f) for lw in packed.layers for f in ("wqkv", "wo", "w_gate_up", "w_down")
    ] + [packed.lm_head]
    assert all(m.flags.c_contiguous and m.base is mats[0].base for m in mats)
    assert (packed.lm_head is packed.embed) == cfg.tie_word_embeddings
    seq = [3, 141, 59, 26, 5, 35]
    got, want = [
        LlamaModel(cfg, w, 64).forward(
            [SeqInput(seq, 0, [0, 1])], PagedKVStore(cfg, 4, 4), all_logits=True
        )[0]
        for w in (packed, plain)
    ]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("rows", [1, 2, 7, 8, 9, 16, 17, 31, 32, 33])
def test_blocked_linear_equals_one_product(rows):
    # w [2600, 256]: blocks of 2**19 / (slice rows x 256) rows (1024 for 2 rows of
    # x, 128 beyond 8), so blocks and x slices are ragged at both ends.
    rng = np.random.default_rng(rows)
    w = rng.standard_normal((2600, 256), dtype=np.float32)
    x = rng.standard_normal((rows, 256), dtype=np.float32)
    got = linear(x, w)
    assert got.shape == (rows, 2600) and got.flags.c_contiguous
    np.testing.assert_allclose(
        got, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("tokens", [1, 3, 4, 5, 17, 28, 29, 32, 33])
def test_feature_major_linear_equals_one_product(tokens):
    # Each regime of linear_fm: one call, w row blocks, the row-major path, wide blocks.
    from infercast.engine.linear import linear_fm

    rng = np.random.default_rng(tokens)
    w = rng.standard_normal((2600, 256), dtype=np.float32)
    x = rng.standard_normal((256, tokens), dtype=np.float32)
    got = linear_fm(w, x)
    assert got.shape == (2600, tokens) and got.flags.c_contiguous
    np.testing.assert_allclose(
        got, w.astype(np.float64) @ x.astype(np.float64), rtol=1e-4, atol=1e-4
    )


def test_decode_batch_of_uneven_contexts_matches_reference():
    """Decode tokens of requests with 1-40 cached tokens, attended in padded groups,
    next to a prefill chunk in the same step."""
    from infercast.engine.attention import decode_groups

    cfg = named_config("tiny")
    w = random_weights(cfg, seed=8)
    rng = np.random.default_rng(9)
    lengths = (1, 2, 3, 9, 10, 33, 40)
    seqs = [[int(t) for t in rng.integers(0, 256, n + 1)] for n in lengths]
    model, kv = LlamaModel(cfg, w, 64), PagedKVStore(cfg, 96, 4)
    tables = [list(range(12 * i, 12 * i + 12))[::-1] for i in range(len(seqs) + 1)]
    for s, t in zip(seqs, tables, strict=False):
        model.forward([SeqInput(s[:-1], 0, t)], kv)
    chunk = [int(t) for t in rng.integers(0, 256, 7)]
    step = [SeqInput([s[-1]], len(s) - 1, t) for s, t in zip(seqs, tables, strict=False)]
    got = model.forward(step[:3] + [SeqInput(chunk, 0, tables[-1])] + step[3:], kv)
    got = got[:3] + got[4:]
    groups = decode_groups(list(range(len(seqs))), tables, [n + 1 for n in lengths], 4)
    assert len(groups) > 1 and any(g.mask is not None for g in groups)
    for s, lg in zip(seqs, got, strict=True):
        assert np.abs(lg - reference_logits(cfg, w, s)[-1]).max() < 1e-4


def test_decode_reads_runs_of_blocks_as_views_and_masks_the_rest():
    """Block tables with ascending and descending runs, scattered blocks and the partly
    filled last block inside a run: decode logits still equal the reference."""
    from infercast.engine.attention import segments

    # Runs of >= 3 consecutive ids become slices; the last block (id 5 here, 2 of 4 rows
    # used) sits inside the run 3..6, so its unused rows are masked, not cut out.
    segs, valid = segments([4, 3, 20, 11, 6, 5], 22, 4)
    assert segs[0] == slice(12, 28) and np.array_equal(segs[1], [44, 45, 46, 47, 80, 81, 82, 83])
    assert valid.sum() == 22 and not valid[10:12].any()

    cfg = named_config("tiny")
    w = random_weights(cfg, seed=11)
    rng = np.random.default_rng(12)
    tables = [
        [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
        [10, 11, 12, 40, 13, 14, 15, 16, 30, 17],
        [50, 20, 51, 21, 52, 22, 53, 23, 54, 55],
        [34, 35, 36, 37, 38, 39, 33, 32],
    ]
    lengths = (37, 30, 38, 29)
    seqs = [[int(t) for t in rng.integers(0, 256, n + 1)] for n in lengths]
    model, kv = LlamaModel(cfg, w, 64), PagedKVStore(cfg, 64, 4)
    for s, t in zip(seqs, tables, strict=True):
        model.forward([SeqInput(s[:-1], 0, t)], kv)
    got = model.forward(
        [SeqInput([s[-1]], len(s) - 1, t) for s, t in zip(seqs, tables, strict=True)], kv
    )
    for s, lg in zip(seqs, got, strict=True):
        assert np.abs(lg - reference_logits(cfg, w, s)[-1]).max() < 1e-4


def test_decode_slots_are_the_context_in_address_order_then_the_tokens_own():
    """A prompt's blocks come highest first from the KV manager; a decode reads its context's
    slots in address order (the same set), its own slot last (the fused step writes there)."""
    from infercast.engine.model import decode_slots

    kv = PagedKVStore(named_config("tiny"), 8, 4)
    table = [7, 6, 2, 5]
    got = decode_slots(kv, table, 14)
    want = kv.slots(table, 0, 14)
    assert got[-1] == want[-1] == 5 * 4 + 1
    assert np.array_equal(got[:-1], np.sort(want[:-1]))
    assert not np.array_equal(got, want)
