"""Load a Llama-architecture GGUF file: config, weights and tokenizer.

Q4_0, Q4_1 and Q8_0 matrices are read block by block into quantized rows
(:mod:`infercast.engine.qformats`) and kept compact in memory (``--weights``
``auto``: Q4 as ``q4``, Q8_0 as ``int8``, F16/BF16 as ``bf16``); the other types
``gguf.quants.dequantize`` knows are widened to float32. llama.cpp's
converter permutes the rows of Q and K so its RoPE can rotate adjacent pairs
(``convert_hf_to_gguf.py``, ``LlamaModel.permute``); the engine uses Hugging
Face's rotate-half layout, so those rows are permuted back here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from infercast.engine.config import EngineModelConfig
from infercast.engine.qformats import Rows, map_rows, q4_0_rows, q4_1_rows, q8_0_rows
from infercast.engine.qlinear import resolve_weights, to_format
from infercast.engine.tokenizer import HFTokenizer, tokenizer_from_gguf_fields
from infercast.engine.weights import ModelWeights, layer_from_parts
from infercast.errors import ModelConfigError

BLOCK_READERS = {"Q4_0": q4_0_rows, "Q4_1": q4_1_rows, "Q8_0": q8_0_rows}
NATIVE_FORMAT = {"Q4_0": "q4", "Q4_1": "q4", "Q8_0": "int8", "F16": "bf16", "BF16": "bf16"}


def _fields(reader: Any) -> dict[str, Any]:
    out = {}
    for key, field in reader.fields.items():
        try:
            out[key] = field.contents()
        except Exception:  # a field type gguf cannot render is one the engine never needs
            continue
    return out


def config_from_gguf(
    fields: dict[str, Any], name: str, rope_factors: np.ndarray | None
) -> EngineModelConfig:
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
            vocab_size=int(fields.get("llama.vocab_size") or len(fields["tokenizer.ggml.tokens"])),
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
    return (
        w.reshape(n_heads, out_dim // n_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    )


def load_gguf(
    path: Path, weights: str = "auto"
) -> tuple[EngineModelConfig, ModelWeights, HFTokenizer]:
    """Read a GGUF file; returns (config, weights in ``weights`` format, tokenizer).

    ``weights`` is ``auto`` (each matrix as stored, see the module doc) or one of
    :data:`infercast.engine.qlinear.WEIGHT_FORMATS` for every matrix.
    """
    from gguf import GGUFReader
    from gguf.quants import dequantize

    weights = resolve_weights(weights)

    try:
        reader = GGUFReader(str(path))
    except Exception as exc:
        raise ModelConfigError(f"cannot read GGUF file {path}: {exc}") from None
    tensors = {t.name: t for t in reader.tensors}
    for t in tensors.values():  # before any long work: one row of each tensor dequantizes
        _check_type(t)

    def fmt(name: str) -> str:
        """The format a matrix is kept in: as stored (``auto``) or the one asked for."""
        kind = tensors[name].tensor_type.name if name in tensors else ""
        return NATIVE_FORMAT.get(kind, "fp32") if weights == "auto" else weights

    def get(name: str) -> np.ndarray:
        if name not in tensors:
            raise ModelConfigError(f"GGUF file {path} has no tensor {name!r}")
        t = tensors[name]
        return np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)

    def matrix(name: str) -> Rows:
        """Q4/Q8 blocks read as they are when kept in their own format, else float32."""
        kind = tensors[name].tensor_type.name if name in tensors else ""
        if kind in BLOCK_READERS and NATIVE_FORMAT[kind] == fmt(name):
            return BLOCK_READERS[kind](tensors[name].data, int(tensors[name].shape[-1]))
        return get(name)

    fields = _fields(reader)
    factors = get("rope_freqs.weight") if "rope_freqs.weight" in tensors else None
    cfg = config_from_gguf(fields, path.stem, factors)
    layers = []
    for i in range(cfg.num_layers):
        p = f"blk.{i}."
        lw = layer_from_parts(
            q=map_rows(matrix(p + "attn_q.weight"), lambda a: unpermute_rows(a, cfg.num_heads)),
            k=map_rows(matrix(p + "attn_k.weight"), lambda a: unpermute_rows(a, cfg.num_kv_heads)),
            v=matrix(p + "attn_v.weight"),
            o=matrix(p + "attn_output.weight"),
            gate=matrix(p + "ffn_gate.weight"),
            up=matrix(p + "ffn_up.weight"),
            down=matrix(p + "ffn_down.weight"),
            attn_norm=get(p + "attn_norm.weight"),
            mlp_norm=get(p + "ffn_norm.weight"),
        )
        # A fused matrix is kept in the format of its first part (Q, gate).
        lw.wqkv = to_format(lw.wqkv, fmt(p + "attn_q.weight"))
        lw.wo = to_format(lw.wo, fmt(p + "attn_output.weight"))
        lw.w_gate_up = to_format(lw.w_gate_up, fmt(p + "ffn_gate.weight"))
        lw.w_down = to_format(lw.w_down, fmt(p + "ffn_down.weight"))
        layers.append(lw)
    embed = to_format(matrix("token_embd.weight"), fmt("token_embd.weight"))
    tied = "output.weight" not in tensors
    cfg = cfg.replace(tie_word_embeddings=tied)
    head = embed if tied else to_format(matrix("output.weight"), fmt("output.weight"))
    w = ModelWeights(embed=embed, layers=layers, final_norm=get("output_norm.weight"), lm_head=head)
    return cfg, w, tokenizer_from_gguf_fields(fields)


def _check_type(t) -> None:
    """A ModelConfigError naming a tensor whose type ``gguf`` cannot dequantize (e.g. Q8_K)."""
    from gguf.quants import dequantize

    try:
        dequantize(t.data[:1], t.tensor_type)
    except (NotImplementedError, ValueError, KeyError):
        raise ModelConfigError(
            f"GGUF tensor {t.name} is {t.tensor_type.name}, a type this engine cannot run; "
            f"use a file with Q4_0, Q4_1, Q8_0, F16 or F32 weights"
        ) from None
