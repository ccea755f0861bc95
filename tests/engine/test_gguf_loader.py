"""GGUF loading against a file written here: metadata, Q/K row permutation, quant types."""

from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from infercast.engine.config import named_config  # noqa: E402
from infercast.engine.gguf_loader import load_gguf  # noqa: E402
from infercast.engine.kv_store import PagedKVStore  # noqa: E402
from infercast.engine.model import LlamaModel, SeqInput  # noqa: E402
from infercast.engine.weights import random_weights  # noqa: E402


def _permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    # llama.cpp convert_hf_to_gguf.py, LlamaModel.permute: HF rows -> GGUF rows.
    return (
        w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def _write(path, cfg, w, qtype) -> None:
    from tokenizers import pre_tokenizers

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(cfg.num_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_heads)
    writer.add_head_count_kv(cfg.num_kv_heads)
    writer.add_rope_freq_base(cfg.rope_theta)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_vocab_size(cfg.vocab_size)
    tokens = sorted(pre_tokenizers.ByteLevel.alphabet()) + ["<s>", "</s>", "<a>", "<b>"]
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * 256 + [3, 3, 3, 3])
    writer.add_token_merges([])
    writer.add_bos_token_id(256)
    writer.add_eos_token_id(257)

    def tensor(name: str, arr: np.ndarray, quantize: bool = True) -> None:
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if quantize and qtype != gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, gguf.quants.quantize(arr, qtype), raw_dtype=qtype)
        else:
            writer.add_tensor(name, arr)

    q, kv, f = cfg.q_size, cfg.kv_size, cfg.intermediate_size
    tensor("token_embd.weight", w.embed)
    tensor("output_norm.weight", w.final_norm, quantize=False)
    tensor("output.weight", w.lm_head)
    for i, lw in enumerate(w.layers):
        p = f"blk.{i}."
        tensor(p + "attn_q.weight", _permute(lw.wqkv[:q], cfg.num_heads))
        tensor(p + "attn_k.weight", _permute(lw.wqkv[q : q + kv], cfg.num_kv_heads))
        tensor(p + "attn_v.weight", lw.wqkv[q + kv :])
        tensor(p + "attn_output.weight", lw.wo)
        tensor(p + "ffn_gate.weight", lw.w_gate_up[:f])
        tensor(p + "ffn_up.weight", lw.w_gate_up[f:])
        tensor(p + "ffn_down.weight", lw.w_down)
        tensor(p + "attn_norm.weight", lw.attn_norm, quantize=False)
        tensor(p + "ffn_norm.weight", lw.mlp_norm, quantize=False)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _logits(cfg, w, ids):
    return LlamaModel(cfg, w, 64).forward(
        [SeqInput(ids, 0, [0, 1, 2, 3])], PagedKVStore(cfg, 4, 16), all_logits=True
    )[0]


@pytest.mark.parametrize(
    "qtype, atol", [("F32", 1e-5), ("F16", 2e-2), ("Q8_0", 0.1), ("Q4_0", 0.3)]
)
def test_gguf_round_trip_matches_the_original_weights(tmp_path, qtype, atol):
    # hidden 64 and FFN 160 are multiples of 32, the Q8_0 block size.
    cfg = named_config("tiny")
    w = random_weights(cfg, seed=9)
    path = tmp_path / "tiny.gguf"
    _write(path, cfg, w, getattr(gguf.GGMLQuantizationType, qtype))
    got_cfg, got_w, tok = load_gguf(path)
    assert (got_cfg.num_heads, got_cfg.num_kv_heads, got_cfg.head_dim) == (4, 2, 16)
    assert not got_cfg.tie_word_embeddings
    ids = [5, 99, 200, 3, 41, 17, 250, 8]
    ref = _logits(cfg, w, ids)
    assert np.abs(_logits(got_cfg, got_w, ids) - ref).max() < atol * np.abs(ref).max()
    assert tok.decode(tok.encode("héllo <a>")) == "héllo "  # bytes round-trip; control dropped
    assert tok.encode("<a>") == [258] and tok.eos_ids == (257,)
