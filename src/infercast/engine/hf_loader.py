"""Load a Hugging Face model directory: ``config.json`` + ``*.safetensors`` + tokenizer.

Tensors are read with ``safetensors`` (numpy). numpy has no bfloat16, so BF16
tensors are read from the file's documented layout instead (an 8-byte
little-endian header length, a JSON header of dtype/shape/offsets, then raw
data: github.com/huggingface/safetensors README) and widened to float32 by
shifting the 16 bits into the high half of a float32 (bf16 is truncated fp32).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from infercast.engine.config import EngineModelConfig
from infercast.engine.tokenizer import HFTokenizer, tokenizer_from_hf_dir
from infercast.engine.weights import ModelWeights, convert_weights, layer_from_parts
from infercast.errors import ModelConfigError


def _read_bf16(file: Path) -> dict[str, np.ndarray]:
    with file.open("rb") as fh:
        header_len = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(header_len))
    raw = np.memmap(file, dtype=np.uint8, mode="r", offset=8 + header_len)
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "BF16":
            continue
        start, stop = info["data_offsets"]
        bits = raw[start:stop].view(np.uint16).astype(np.uint32) << 16
        out[name] = bits.view(np.float32).reshape(info["shape"])
    return out


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of every ``*.safetensors`` file in a directory, as float32."""
    from safetensors import safe_open

    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ModelConfigError(f"{path} has no *.safetensors files")
    tensors: dict[str, np.ndarray] = {}
    for file in files:
        bf16 = _read_bf16(file)
        tensors.update(bf16)
        with safe_open(str(file), framework="numpy") as fh:
            for name in fh.keys():
                if name not in bf16:
                    tensors[name] = np.asarray(fh.get_tensor(name), dtype=np.float32)
    return tensors


def load_hf_dir(
    path: Path, weights: str = "fp32"
) -> tuple[EngineModelConfig, ModelWeights, HFTokenizer | None]:
    """Config, weights and (if present) tokenizer of a HF Llama directory.

    ``weights``: ``auto`` keeps a BF16 checkpoint's matrices bf16 (float32 ones
    float32), or one of :data:`infercast.engine.qlinear.WEIGHT_FORMATS`.
    """
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelConfigError(f"cannot read {path / 'config.json'}: {exc}") from None
    cfg = EngineModelConfig.from_hf(config, name=path.name)
    t = read_safetensors(path)

    def get(name: str) -> np.ndarray:
        if name not in t:
            raise ModelConfigError(f"{path} has no tensor {name!r}")
        return t[name]

    layers = []
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        layers.append(
            layer_from_parts(
                q=get(p + "self_attn.q_proj.weight"),
                k=get(p + "self_attn.k_proj.weight"),
                v=get(p + "self_attn.v_proj.weight"),
                o=get(p + "self_attn.o_proj.weight"),
                gate=get(p + "mlp.gate_proj.weight"),
                up=get(p + "mlp.up_proj.weight"),
                down=get(p + "mlp.down_proj.weight"),
                attn_norm=get(p + "input_layernorm.weight"),
                mlp_norm=get(p + "post_attention_layernorm.weight"),
            )
        )
    embed = np.ascontiguousarray(get("model.embed_tokens.weight"))
    head = embed if cfg.tie_word_embeddings or "lm_head.weight" not in t else get("lm_head.weight")
    w = ModelWeights(
        embed=embed,
        layers=layers,
        final_norm=get("model.norm.weight"),
        lm_head=np.ascontiguousarray(head),
    )
    if weights == "auto":
        weights = "bf16" if any(_is_bf16(f) for f in path.glob("*.safetensors")) else "fp32"
    if weights != "fp32":
        from infercast.engine.qlinear import to_format

        w = convert_weights(w, lambda m: to_format(m, weights))
    tok = tokenizer_from_hf_dir(path, config) if (path / "tokenizer.json").exists() else None
    return cfg, w, tok


def _is_bf16(file: Path) -> bool:
    """Whether a safetensors file stores any tensor as BF16 (read from its JSON header)."""
    with file.open("rb") as fh:
        header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
    return any(v.get("dtype") == "BF16" for k, v in header.items() if k != "__metadata__")


def save_hf_dir(path: Path, cfg: EngineModelConfig, w: ModelWeights) -> None:
    """Write weights as a HF directory (float32 safetensors), e.g. to serve them elsewhere."""
    from safetensors.numpy import save_file

    path.mkdir(parents=True, exist_ok=True)
    t = {"model.embed_tokens.weight": w.embed, "model.norm.weight": w.final_norm}
    if not cfg.tie_word_embeddings:
        t["lm_head.weight"] = w.lm_head
    q, kv, f = cfg.q_size, cfg.kv_size, cfg.intermediate_size
    for i, lw in enumerate(w.layers):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = lw.wqkv[:q]
        t[p + "self_attn.k_proj.weight"] = lw.wqkv[q : q + kv]
        t[p + "self_attn.v_proj.weight"] = lw.wqkv[q + kv :]
        t[p + "self_attn.o_proj.weight"] = lw.wo
        t[p + "mlp.gate_proj.weight"] = lw.w_gate_up[:f]
        t[p + "mlp.up_proj.weight"] = lw.w_gate_up[f:]
        t[p + "mlp.down_proj.weight"] = lw.w_down
        t[p + "input_layernorm.weight"] = lw.attn_norm
        t[p + "post_attention_layernorm.weight"] = lw.mlp_norm
    save_file({k: np.ascontiguousarray(v) for k, v in t.items()}, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(cfg.to_hf_dict(), indent=2))
