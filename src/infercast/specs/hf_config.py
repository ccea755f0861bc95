"""Build a :class:`ModelSpec` from a Hugging Face ``config.json`` dict.

One small reader per architecture family; each names the HF fields it reads.
An unknown ``model_type`` or a missing field is a ``ModelConfigError`` that says
which field is missing and for which architecture.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from infercast.errors import ConfigError, ModelConfigError
from infercast.specs.model import (
    ATTN_CHUNKED,
    ATTN_FULL,
    ATTN_SLIDING,
    AttentionSpec,
    LayerSpec,
    ModelSpec,
    MoESpec,
)
from infercast.validation import check_int

Cfg = Mapping[str, Any]


def _req(cfg: Cfg, arch: str, *names: str) -> Any:
    """First present field among ``names``; a clear error naming it when none is."""
    for name in names:
        if cfg.get(name) is not None:
            return cfg[name]
    alt = " or ".join(repr(n) for n in names)
    raise ModelConfigError(f"config.json ({arch}) misses field {alt}: add it to the config")


# Bounds that keep a typo from becoming hours of work or gigabytes (a config with
# 1e30 layers builds one spec per layer): far above any published model.
_MAX_LAYERS = 10_000
_MAX_SIZE = 2**40


def _checked_int(value: Any, arch: str, name: str, lo: int) -> int:
    """An integer field of config.json (4096.0 accepted; "8", true, NaN and 4.5 refused)."""
    hi = _MAX_LAYERS if name in ("num_hidden_layers", "n_layer", "num_layers") else _MAX_SIZE
    try:
        return check_int(
            value,
            f"config.json ({arch}) field {name!r}",
            lo,
            hi,
            whole_floats=True,
            fix=f"write an integer from {lo} to {hi}",
        )
    except ConfigError as exc:
        raise ModelConfigError(str(exc)) from None


def _int(cfg: Cfg, arch: str, *names: str) -> int:
    value = _req(cfg, arch, *names)
    name = next(n for n in names if cfg.get(n) is not None)
    return _checked_int(value, arch, name, 1)


def _opt_int(cfg: Cfg, name: str, default: int = 0, arch: str = "config") -> int:
    """An optional integer field: absent or null gives ``default``; present, it must be valid."""
    value = cfg.get(name)
    return default if value is None else _checked_int(value, arch, name, 0)


def _opt_bool(cfg: Cfg, name: str, default: bool) -> bool:
    """An optional true/false field: "false" (a string) or 0 is refused, never read as a bool."""
    value = cfg.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ModelConfigError(f"config.json field {name!r} = {value!r}: expected true or false")
    return value


def _heads(cfg: Cfg, arch: str) -> tuple[int, int, int]:
    """(num_heads, num_kv_heads, head_dim); kv heads default to heads (MHA).

    Grouped-query attention shares each KV head among a whole number of query
    heads, so the query heads must be a multiple of the KV heads.
    """
    h = _int(cfg, arch, "hidden_size", "n_embd", "d_model")
    nh = _int(cfg, arch, "num_attention_heads", "n_head")
    nkv = (
        _opt_int(cfg, "num_key_value_heads", arch=arch)
        or _opt_int(cfg, "num_kv_heads", arch=arch)
        or nh
    )
    hd = _opt_int(cfg, "head_dim", arch=arch) or h // nh
    if nh % nkv:
        raise ModelConfigError(
            f"config.json ({arch}): {nkv} KV heads for {nh} query heads; num_attention_heads "
            "must be a multiple of num_key_value_heads"
        )
    if hd < 1:
        raise ModelConfigError(
            f"config.json ({arch}): head_dim is 0 (hidden_size {h} < "
            f"{nh} heads); give head_dim or fix the sizes"
        )
    return nh, nkv, hd


def _common(cfg: Cfg, arch: str, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "arch": arch,
        "hidden_size": _int(cfg, arch, "hidden_size", "n_embd", "d_model"),
        "vocab_size": _int(cfg, arch, "vocab_size"),
        "tie_embeddings": _opt_bool(cfg, "tie_word_embeddings", False),
        "max_context": _opt_int(cfg, "max_position_embeddings")
        or _opt_int(cfg, "n_positions")
        or _opt_int(cfg, "seq_length"),
    }


def _num_layers(cfg: Cfg, arch: str) -> int:
    return _int(cfg, arch, "num_hidden_layers", "n_layer", "num_layers")


def _mha(cfg: Cfg, arch: str, **kw: Any) -> AttentionSpec:
    nh, nkv, hd = _heads(cfg, arch)
    return AttentionSpec(
        kind="mha", num_heads=nh, num_kv_heads=nkv, head_dim=hd, v_head_dim=hd, **kw
    )


def _layer(window: int, ffn: int) -> LayerSpec:
    """A dense layer that attends over a sliding ``window`` of tokens, or over all of them when
    ``window`` is 0."""
    if window:
        return LayerSpec(ATTN_SLIDING, window, ffn_size=ffn)
    return LayerSpec(ATTN_FULL, ffn_size=ffn)


def _sliding_layers(cfg: Cfg, arch: str, n: int, ffn: int) -> tuple[LayerSpec, ...]:
    """Layers of a llama-like model, honouring ``sliding_window`` / ``layer_types``."""
    window = _opt_int(cfg, "sliding_window")
    use_sw = _opt_bool(cfg, "use_sliding_window", True) and window > 0
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == n:
        return tuple(_layer(window if t == "sliding_attention" else 0, ffn) for t in types)
    if use_sw:
        # Qwen2-style: only layers from max_window_layers on use the window.
        first = _opt_int(cfg, "max_window_layers", 0) if "max_window_layers" in cfg else 0
        if arch.startswith("qwen"):
            return tuple(_layer(window if i >= first else 0, ffn) for i in range(n))
        return tuple(_layer(window, ffn) for _ in range(n))
    return tuple(_layer(0, ffn) for _ in range(n))


def _llama(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """llama, mistral, qwen2, qwen3 and other dense SwiGLU GQA models."""
    n = _num_layers(cfg, arch)
    ffn = _int(cfg, arch, "intermediate_size")
    bias = _opt_bool(cfg, "attention_bias", arch == "qwen2")
    attn = _mha(
        cfg, arch, qkv_bias=bias, o_bias=bias and arch != "qwen2", qk_norm=arch.startswith("qwen3")
    )
    return ModelSpec(
        attention=attn,
        layers=_sliding_layers(cfg, arch, n, ffn),
        mlp_bias=_opt_bool(cfg, "mlp_bias", False),
        **_common(cfg, arch, name),
    )


def _mixtral(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    n = _num_layers(cfg, arch)
    moe = MoESpec(
        num_experts=_int(cfg, arch, "num_local_experts", "num_experts"),
        experts_per_token=_int(cfg, arch, "num_experts_per_tok"),
        expert_ffn_size=_int(cfg, arch, "intermediate_size"),
    )
    layers = tuple(
        LayerSpec(layer.attention, layer.window, moe=True)
        for layer in _sliding_layers(cfg, arch, n, 0)
    )
    return ModelSpec(attention=_mha(cfg, arch), layers=layers, moe=moe, **_common(cfg, arch, name))


def _qwen_moe(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """qwen2_moe / qwen3_moe: sparse every ``decoder_sparse_step`` layers, optional shared
    expert."""
    n = _num_layers(cfg, arch)
    step = _opt_int(cfg, "decoder_sparse_step", 1)
    dense_only = set(cfg.get("mlp_only_layers") or [])
    shared_ffn = _opt_int(cfg, "shared_expert_intermediate_size")
    moe = MoESpec(
        num_experts=_int(cfg, arch, "num_experts"),
        experts_per_token=_int(cfg, arch, "num_experts_per_tok"),
        expert_ffn_size=_int(cfg, arch, "moe_intermediate_size"),
        num_shared_experts=1 if shared_ffn else 0,
        shared_ffn_size=shared_ffn,
    )
    layers = tuple(
        LayerSpec(moe=True)
        if i not in dense_only and (i + 1) % step == 0
        else LayerSpec(ffn_size=_int(cfg, arch, "intermediate_size"))
        for i in range(n)
    )
    notes = (
        ("qwen2_moe shared-expert gate (hidden_size params per layer) not counted",)
        if shared_ffn
        else ()
    )
    attn = _mha(
        cfg,
        arch,
        qkv_bias=_opt_bool(cfg, "attention_bias", arch == "qwen2_moe"),
        qk_norm=arch == "qwen3_moe",
    )
    return ModelSpec(
        attention=attn, layers=layers, moe=moe, notes=notes, **_common(cfg, arch, name)
    )


def _deepseek(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """deepseek_v2 / deepseek_v3: MLA attention, first k dense layers, shared experts."""
    n = _num_layers(cfg, arch)
    nh = _int(cfg, arch, "num_attention_heads")
    nope = _int(cfg, arch, "qk_nope_head_dim")
    rope = _int(cfg, arch, "qk_rope_head_dim")
    attn = AttentionSpec(
        kind="mla",
        num_heads=nh,
        num_kv_heads=nh,
        head_dim=nope + rope,
        v_head_dim=_int(cfg, arch, "v_head_dim"),
        q_lora_rank=_opt_int(cfg, "q_lora_rank"),
        kv_lora_rank=_int(cfg, arch, "kv_lora_rank"),
        qk_rope_head_dim=rope,
        qk_nope_head_dim=nope,
    )
    moe_ffn = _int(cfg, arch, "moe_intermediate_size")
    moe = MoESpec(
        num_experts=_int(cfg, arch, "n_routed_experts"),
        experts_per_token=_int(cfg, arch, "num_experts_per_tok"),
        expert_ffn_size=moe_ffn,
        num_shared_experts=_opt_int(cfg, "n_shared_experts"),
        shared_ffn_size=moe_ffn,
    )
    first_dense = _opt_int(cfg, "first_k_dense_replace")
    freq = _opt_int(cfg, "moe_layer_freq", 1)
    dense_ffn = _int(cfg, arch, "intermediate_size")
    layers = tuple(
        LayerSpec(moe=True) if i >= first_dense and i % freq == 0 else LayerSpec(ffn_size=dense_ffn)
        for i in range(n)
    )
    notes: tuple[str, ...] = ()
    if _opt_int(cfg, "num_nextn_predict_layers"):
        notes = (
            "multi-token-prediction layers excluded from parameters (as DeepSeek's 671B figure)",
        )
    return ModelSpec(
        attention=attn, layers=layers, moe=moe, notes=notes, **_common(cfg, arch, name)
    )


def _gpt_oss(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """gpt_oss: alternating sliding/full attention with sinks, biased MoE experts."""
    n = _num_layers(cfg, arch)
    moe = MoESpec(
        num_experts=_int(cfg, arch, "num_local_experts", "num_experts"),
        experts_per_token=_int(cfg, arch, "num_experts_per_tok", "experts_per_token"),
        expert_ffn_size=_int(cfg, arch, "intermediate_size"),
        router_bias=True,
        expert_bias=True,
    )
    layers = tuple(
        LayerSpec(x.attention, x.window, moe=True) for x in _sliding_layers(cfg, arch, n, 0)
    )
    attn = _mha(cfg, arch, qkv_bias=True, o_bias=True, sinks=True)
    return ModelSpec(attention=attn, layers=layers, moe=moe, **_common(cfg, arch, name))


def _llama4(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """llama4: chunked local attention on 3 of 4 layers, interleaved MoE with a shared expert."""
    text = cfg.get("text_config", cfg)
    n = _num_layers(text, arch)
    step = _opt_int(text, "interleave_moe_layer_step", 1)
    chunk = _opt_int(text, "attention_chunk_size")
    ffn = _int(text, arch, "intermediate_size")
    moe = MoESpec(
        num_experts=_int(text, arch, "num_local_experts"),
        experts_per_token=_int(text, arch, "num_experts_per_tok"),
        expert_ffn_size=ffn,
        num_shared_experts=1,
        shared_ffn_size=ffn,
    )
    dense_ffn = _int(text, arch, "intermediate_size_mlp")

    def layer(i: int) -> LayerSpec:
        # HF Llama4: every 4th layer (no_rope_layers) attends globally, the rest in chunks.
        glob = (i + 1) % 4 == 0 or not chunk
        kind, win = (ATTN_FULL, 0) if glob else (ATTN_CHUNKED, chunk)
        if (i + 1) % step == 0:
            return LayerSpec(kind, win, moe=True)
        return LayerSpec(kind, win, ffn_size=dense_ffn)

    common = _common(text, arch, name)
    common["tie_embeddings"] = bool(
        text.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False))
    )
    attn = _mha(text, arch, qk_norm=bool(text.get("use_qk_norm", False)))
    notes = ("text model only: the vision encoder in Meta's nominal size is not counted",)
    return ModelSpec(
        attention=attn, layers=tuple(layer(i) for i in range(n)), moe=moe, notes=notes, **common
    )


def _gptj(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """gptj: parallel attention+MLP with one LayerNorm, GELU MLP with biases, biased LM head."""
    n = _num_layers(cfg, arch)
    h = _int(cfg, arch, "hidden_size", "n_embd")
    ffn = _opt_int(cfg, "n_inner") or _opt_int(cfg, "intermediate_size") or 4 * h
    return ModelSpec(
        attention=_mha(cfg, arch),
        layers=tuple(LayerSpec(ffn_size=ffn) for _ in range(n)),
        gated_mlp=False,
        mlp_bias=True,
        norm="layer",
        norms_per_layer=1,
        lm_head_bias=True,
        parallel_block=True,
        **_common(cfg, arch, name),
    )


def _falcon(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """falcon (new decoder architecture): GQA, parallel attention, two LayerNorms, GELU MLP."""
    n = _num_layers(cfg, arch)
    h = _int(cfg, arch, "hidden_size")
    ffn = _opt_int(cfg, "ffn_hidden_size") or _opt_int(cfg, "intermediate_size") or 4 * h
    bias = _opt_bool(cfg, "bias", False)
    new_arch = _opt_bool(cfg, "new_decoder_architecture", False)
    attn = _mha(cfg, arch, qkv_bias=bias, o_bias=bias)
    if not new_arch and cfg.get("multi_query", True) and "num_kv_heads" not in cfg:
        # Falcon-7B style: multi-query attention (one KV head).
        attn = AttentionSpec("mha", attn.num_heads, 1, attn.head_dim, attn.head_dim, bias, bias)
    return ModelSpec(
        attention=attn,
        layers=tuple(LayerSpec(ffn_size=ffn) for _ in range(n)),
        gated_mlp=False,
        mlp_bias=bias,
        norm="layer",
        norms_per_layer=2 if new_arch else 1,
        parallel_block=_opt_bool(cfg, "parallel_attn", True),
        **_common(cfg, arch, name),
    )


def _bloom(cfg: Cfg, arch: str, name: str) -> ModelSpec:
    """bloom: MHA with biases, ALiBi (no position params), GELU MLP, embedding LayerNorm."""
    n = _num_layers(cfg, arch)
    h = _int(cfg, arch, "hidden_size", "n_embed")
    ffn = _opt_int(cfg, "intermediate_size") or 4 * h
    common = _common(cfg, arch, name)
    common["tie_embeddings"] = _opt_bool(cfg, "tie_word_embeddings", True)
    return ModelSpec(
        attention=_mha(cfg, arch, qkv_bias=True, o_bias=True),
        layers=tuple(LayerSpec(ffn_size=ffn) for _ in range(n)),
        gated_mlp=False,
        mlp_bias=True,
        norm="layer",
        extra_norms=1,
        **common,
    )


READERS: dict[str, Callable[[Cfg, str, str], ModelSpec]] = {
    "llama": _llama,
    "mistral": _llama,
    "phi3": _llama,
    "granite": _llama,
    "qwen2": _llama,
    "qwen3": _llama,
    "mixtral": _mixtral,
    "granitemoe": _mixtral,
    "qwen2_moe": _qwen_moe,
    "qwen3_moe": _qwen_moe,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "gpt_oss": _gpt_oss,
    "llama4": _llama4,
    "llama4_text": _llama4,
    "gptj": _gptj,
    "falcon": _falcon,
    "bloom": _bloom,
}
