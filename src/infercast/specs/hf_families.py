"""Readers for the decoder-only families added to :mod:`infercast.specs.hf_config`.

Gemma 1/2/3, Phi-3/3.5/4 and Phi-3.5-MoE, Granite, OLMo-2/3, Command-R (cohere,
cohere2), GLM-4 (glm, glm4, chatglm), multimodal wrappers whose text model sits
in ``text_config`` (gemma3, mistral3), and a generic reader for unknown
Llama-like ``model_type``s that names what it assumed. Each reader says which
HF fields it reads; what only changes numerics (soft-capping, embedding or
logit multipliers, partial RoPE) does not change cost and is ignored.

Architecture facts (which layers slide, how many norms a layer has) come from
the Hugging Face ``transformers`` modeling code of each family
(huggingface/transformers @008e5743, ``src/transformers/models/<family>/``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from infercast.specs.hf_config import (
    Cfg,
    _common,
    _int,
    _layer,
    _llama,
    _mha,
    _num_layers,
    _opt_int,
    _sliding_layers,
)
from infercast.specs.model import (
    AttentionSpec,
    LayerSpec,
    ModelSpec,
    MoESpec,
)

# transformers' Gemma3TextConfig defaults (configuration_gemma3.py): the released
# gemma-3 config.json files leave these out of text_config and rely on them.
GEMMA3_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131_072,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
    "tie_word_embeddings": True,
}

LLAMA_LIKE_FIELDS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "vocab_size",
)
MOE_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size")


def _with_defaults(cfg: Cfg, defaults: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``cfg`` with class defaults filled in, and the names of the fields filled."""
    filled = [k for k in defaults if cfg.get(k) is None]
    return {**cfg, **{k: defaults[k] for k in filled}}, filled


def _patterned(
    cfg: Cfg, arch: str, n: int, ffn: int, sliding: Callable[[int], bool]
) -> tuple[LayerSpec, ...]:
    """Layers from ``layer_types`` when the config lists them, else from the family's pattern."""
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == n:
        return _sliding_layers(cfg, arch, n, ffn)
    window = _opt_int(cfg, "sliding_window")
    return tuple(_layer(window if sliding(i) else 0, ffn) for i in range(n))


def _gemma(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """gemma / gemma2 / gemma3_text: GeGLU MLP, tied embeddings.

    Gemma-2 and 3 wrap attention and MLP in norms before and after (4 per layer).
    Gemma-2 slides on even layers (0, 2, ...); Gemma-3 attends globally on one layer
    in ``sliding_window_pattern`` (6) and adds per-head q/k norms.
    """
    notes: tuple[str, ...] = ()
    if arch == "gemma3_text":
        cfg, filled = _with_defaults(cfg, GEMMA3_TEXT_DEFAULTS)
        if filled:
            notes = (f"Gemma3TextConfig defaults assumed for {', '.join(filled)}",)
    n = _num_layers(cfg, arch)
    ffn = _int(cfg, arch, "intermediate_size")
    if arch == "gemma2":
        layers = _patterned(cfg, arch, n, ffn, lambda i: i % 2 == 0)
    elif arch == "gemma3_text":
        period = _opt_int(cfg, "sliding_window_pattern", 6)
        layers = _patterned(cfg, arch, n, ffn, lambda i: (i + 1) % period != 0)
    else:
        layers = tuple(LayerSpec(ffn_size=ffn) for _ in range(n))
    common = _common(cfg, arch, name)
    common["tie_embeddings"] = bool(cfg.get("tie_word_embeddings", True))
    bias = bool(cfg.get("attention_bias", False))
    attn = _mha(cfg, arch, qkv_bias=bias, o_bias=bias, qk_norm=arch == "gemma3_text")
    return ModelSpec(
        attention=attn,
        layers=layers,
        norms_per_layer=2 if arch == "gemma" else 4,
        notes=notes,
        **common,
    )


def _olmo2(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """olmo2 / olmo3: Llama-like, norms after attention and MLP, q/k RMSNorm over all heads."""
    n = _num_layers(cfg, arch)
    ffn = _int(cfg, arch, "intermediate_size")
    bias = bool(cfg.get("attention_bias", False))
    attn = _mha(cfg, arch, qkv_bias=bias, o_bias=bias, qk_norm=True, qk_norm_full=True)
    return ModelSpec(
        attention=attn, layers=_sliding_layers(cfg, arch, n, ffn), **_common(cfg, arch, name)
    )


def _cohere(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """cohere / cohere2 (Command-R, Command-R7B): attention and MLP in parallel under one
    LayerNorm (scale only, no bias), tied embeddings; cohere2 attends globally on one layer
    in ``sliding_window_pattern`` (4). ``use_qk_norm`` adds per-head LayerNorms on q and k.
    """
    n = _num_layers(cfg, arch)
    ffn = _int(cfg, arch, "intermediate_size")
    if arch == "cohere2":
        period = _opt_int(cfg, "sliding_window_pattern", 4)
        layers = _patterned(cfg, arch, n, ffn, lambda i: (i + 1) % period != 0)
    else:
        layers = tuple(LayerSpec(ffn_size=ffn) for _ in range(n))
    bias = bool(cfg.get("attention_bias", False))
    qk = bool(cfg.get("use_qk_norm", False))
    attn = _mha(cfg, arch, qkv_bias=bias, o_bias=bias, qk_norm=qk, qk_norm_full=qk)
    common = _common(cfg, arch, name)
    common["tie_embeddings"] = bool(cfg.get("tie_word_embeddings", True))
    return ModelSpec(
        attention=attn, layers=layers, norms_per_layer=1, parallel_block=True, **common
    )


def _glm(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """glm / glm4 (GLM-4-9B, GLM-4-0414): Llama-like with q/k/v biases (none on o);
    glm4 adds norms after attention and after the MLP (4 per layer)."""
    n = _num_layers(cfg, arch)
    ffn = _int(cfg, arch, "intermediate_size")
    attn = _mha(cfg, arch, qkv_bias=bool(cfg.get("attention_bias", True)))
    return ModelSpec(
        attention=attn,
        layers=_sliding_layers(cfg, arch, n, ffn),
        norms_per_layer=4 if arch == "glm4" else 2,
        **_common(cfg, arch, name),
    )


def _chatglm(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """chatglm (THUDM's own GLM-4 configs): ``num_layers``, ``padded_vocab_size``,
    ``ffn_hidden_size``, ``kv_channels`` and ``multi_query_group_num`` KV heads."""
    h = _int(cfg, arch, "hidden_size")
    nh = _int(cfg, arch, "num_attention_heads")
    nkv = _int(cfg, arch, "multi_query_group_num") if cfg.get("multi_query_attention") else nh
    hd = _opt_int(cfg, "kv_channels") or h // nh
    attn = AttentionSpec(
        "mha",
        nh,
        nkv,
        hd,
        hd,
        qkv_bias=bool(cfg.get("add_qkv_bias", False)),
        o_bias=bool(cfg.get("add_bias_linear", False)),
    )
    ffn = _int(cfg, arch, "ffn_hidden_size", "intermediate_size")
    return ModelSpec(
        name=name,
        arch=arch,
        hidden_size=h,
        vocab_size=_int(cfg, arch, "padded_vocab_size", "vocab_size"),
        attention=attn,
        layers=tuple(
            LayerSpec(ffn_size=ffn)
            for _ in range(_int(cfg, arch, "num_layers", "num_hidden_layers"))
        ),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        max_context=_opt_int(cfg, "seq_length"),
    )


def _phimoe(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """phimoe (Phi-3.5-MoE): Mixtral-shaped experts, LayerNorms with bias, optional
    attention and LM-head biases."""
    n = _num_layers(cfg, arch)
    moe = MoESpec(
        num_experts=_int(cfg, arch, "num_local_experts"),
        experts_per_token=_int(cfg, arch, "num_experts_per_tok"),
        expert_ffn_size=_int(cfg, arch, "intermediate_size"),
    )
    layers = tuple(
        LayerSpec(x.attention, x.window, moe=True) for x in _sliding_layers(cfg, arch, n, 0)
    )
    bias = bool(cfg.get("attention_bias", False))
    return ModelSpec(
        attention=_mha(cfg, arch, qkv_bias=bias, o_bias=bias),
        layers=layers,
        moe=moe,
        norm="layer",
        lm_head_bias=bool(cfg.get("lm_head_bias", False)),
        **_common(cfg, arch, name),
    )


def llama_like_problem(cfg: Cfg) -> str:
    """Why a config of an unknown type cannot be read as Llama-like ('' when it can)."""
    if cfg.get("is_encoder_decoder"):
        return "it is an encoder-decoder model"
    missing = [f for f in LLAMA_LIKE_FIELDS if cfg.get(f) is None]
    if missing:
        return f"it lacks {', '.join(missing)}"
    moe = [f for f in MOE_FIELDS if cfg.get(f)]
    if moe:
        return f"it has expert fields ({', '.join(moe)}) whose layout is not known"
    return ""


def llama_like(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """An unknown ``model_type`` read as a Llama-like decoder, with a note of what was assumed."""
    spec = _llama(cfg, arch, name)
    tied = "tied" if spec.tie_embeddings else "untied"
    assumed = (
        f"model_type {arch!r} read as Llama-like: assumed a gated MLP (3 matrices of "
        f"intermediate_size), 2 RMSNorms per layer, a {tied} LM head (tie_word_embeddings), "
        f"biases only as attention_bias/mlp_bias say"
    )
    return replace(spec, notes=spec.notes + (assumed,))


FAMILY_READERS: dict[str, Callable[[Cfg, str, str], ModelSpec]] = {
    "gemma": _gemma,
    "gemma2": _gemma,
    "gemma3_text": _gemma,
    "olmo2": _olmo2,
    "olmo3": _olmo2,
    "cohere": _cohere,
    "cohere2": _cohere,
    "glm": _glm,
    "glm4": _glm,
    "chatglm": _chatglm,
    "phimoe": _phimoe,
}
