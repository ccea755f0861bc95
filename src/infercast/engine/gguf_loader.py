"""Load a Llama-architecture GGUF file: config, float32 weights and tokenizer.

Weights are dequantized with ``gguf.quants.dequantize`` (Q4_0, Q4_1, Q8_0, F16,
F32 and the other types it knows) into the engine's float32 layout. llama.cpp's
converter permutes the rows of Q and K so its RoPE can rotate adjacent pairs
(``convert_hf_to_gguf.py``, ``LlamaModel.permute``); the engine uses Hugging
Face's rotate-half layout, so those rows are permuted back here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from infercast.engine.config import EngineModelConfig
from infercast.engine.tokenizer import HFTokenizer, tokenizer_from_gguf_fields
from infercast.engine.weights import ModelWeights, layer_from_parts
from infercast.errors import ModelConfigError


def _fields(reader: Any) -> dict[str, Any]:
    out = {}
    for key, field in reader.fields.items():
        try:
            out[key] = field.contents()
        except Exception:  # a field type gguf cannot render is one the engine never needs
            continue
    return out


def config_from_gguf(fields: dict[str, Any], name: str,
                     rope_factors: np.ndarray | None) -> EngineModelConfig:
    """The engine config from ``{arch}.*`` metadata (llama.cpp's key names)."""
    arch = fields.get("general.architecture")
    if arch != "llama":
        raise ModelConfigError(f"GGUF architecture {arch!r} is not supported; only 'llama'")
    try:
        heads = int(fields["llama.attention.head_count"])
        hidden = int(fields["llama.embedding_length"])
        scaling = None
        if rope_factors is not None:
            scaling = {"rope_type": "factors", "factors": tuple(float(x) for x in rope_factors)}
        elif fields.get("llama.rope.scaling.type") == "linear":
            scaling = {"rope_type": "linear", "factor": float(fields["llama.rope.scaling.factor"])}
        eos = fields.get("tokenizer.ggml.eos_token_id")
        return EngineModelConfig(
            hidden_size=hidden,
            num_layers=int(fields["llama.block_count"]),
            num_heads=heads,
            num_kv_heads=int(fields.get("llama.attention.head_count_kv", heads)),
            intermediate_size=int(fields["llama.feed_forward_length"]),
            vocab_size=int(fields.get("llama.vocab_size")
                           or len(fields["tokenizer.ggml.tokens"])),
            head_dim=int(fields.get("llama.attention.key_length") or hidden // heads),
            rms_norm_eps=float(fields.get("llama.attention.layer_norm_rms_epsilon", 1e-5)),
            rope_theta=float(fields.get("llama.rope.freq_base", 10000.0)),
            rope_scaling=scaling,
            max_position_embeddings=int(fields.get("llama.context_length", 2048)),
            bos_token_id=fields.get("tokenizer.ggml.bos_token_id"),
            eos_token_ids=() if eos is None else (int(eos),),
            name=name,
        )
    except KeyError as exc:
        raise ModelConfigError(f"GGUF metadata misses {exc.args[0]!r}") from None


def unpermute_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation: [heads, 2, d/2] -> [heads, d/2, 2] order back."""
    out_dim = w.shape[0]
    return (w.reshape(n_heads, out_dim // n_heads // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def load_gguf(path: Path) -> tuple[EngineModelConfig, ModelWeights, HFTokenizer]:
    """Read a GGUF file; returns (config, float32 weights, tokenizer)."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    try:
        reader = GGUFReader(str(path))
    except Exception as exc:
        raise ModelConfigError(f"cannot read GGUF file {path}: {exc}") from None
    tensors = {t.name: t for t in reader.tensors}

    def get(name: str) -> np.ndarray:
        if name not in tensors:
            raise ModelConfigError(f"GGUF file {path} has no tensor {name!r}")
        t = tensors[name]
        return np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)

    fields = _fields(reader)
    factors = get("rope_freqs.weight") if "rope_freqs.weight" in tensors else None
    cfg = config_from_gguf(fields, path.stem, factors)
    layers = []
    for i in range(cfg.num_layers):
        p = f"blk.{i}."
        layers.append(layer_from_parts(
            q=unpermute_rows(get(p + "attn_q.weight"), cfg.num_heads),
            k=unpermute_rows(get(p + "attn_k.weight"), cfg.num_kv_heads),
            v=get(p + "attn_v.weight"), o=get(p + "attn_output.weight"),
            gate=get(p + "ffn_gate.weight"), up=get(p + "ffn_up.weight"),
            down=get(p + "ffn_down.weight"), attn_norm=get(p + "attn_norm.weight"),
            mlp_norm=get(p + "ffn_norm.weight")))
    embed = get("token_embd.weight")
    tied = "output.weight" not in tensors
    cfg = cfg.replace(tie_word_embeddings=tied)
    head = embed if tied else get("output.weight")
    weights = ModelWeights(embed=embed, layers=layers, final_norm=get("output_norm.weight"),
                           lm_head=head)
    return cfg, weights, tokenizer_from_gguf_fields(fields)
