"""Model weights in the layout the forward pass uses, and seeded random weights.

Linear weights are stored ``[out_features, in_features]`` (the PyTorch/GGUF row
layout) and applied as ``x @ w.T``; BLAS reads the transpose without a copy.
Q, K and V are fused into one matrix and gate/up into another, so a layer runs
four matrix products instead of seven.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infercast.engine.config import EngineModelConfig


@dataclass
class LayerWeights:
    """One decoder layer, float32."""

    attn_norm: np.ndarray  # [hidden]
    wqkv: np.ndarray  # [q_size + 2 * kv_size, hidden]; Q/K rows in HF (rotate-half) order
    wo: np.ndarray  # [hidden, q_size]
    mlp_norm: np.ndarray  # [hidden]
    w_gate_up: np.ndarray  # [2 * intermediate, hidden]: gate rows then up rows
    w_down: np.ndarray  # [hidden, intermediate]


@dataclass
class ModelWeights:
    """All weights; ``lm_head`` is the embedding matrix itself when tied."""

    embed: np.ndarray  # [vocab, hidden]
    layers: list[LayerWeights]
    final_norm: np.ndarray  # [hidden]
    lm_head: np.ndarray  # [vocab, hidden]

    @property
    def nbytes(self) -> int:
        """Bytes read per forward step: every array once (a tied head counts once)."""
        arrays = [self.embed, self.final_norm]
        if self.lm_head is not self.embed:
            arrays.append(self.lm_head)
        for layer in self.layers:
            arrays += [layer.attn_norm, layer.wqkv, layer.wo, layer.mlp_norm,
                       layer.w_gate_up, layer.w_down]
        return int(sum(a.nbytes for a in arrays))


def layer_from_parts(q, k, v, o, gate, up, down, attn_norm, mlp_norm) -> LayerWeights:
    """Fuse separate projections (each [out, in]) into the engine's layout, float32."""
    f32 = np.float32
    return LayerWeights(
        attn_norm=np.asarray(attn_norm, dtype=f32),
        wqkv=np.ascontiguousarray(np.concatenate([q, k, v], axis=0), dtype=f32),
        wo=np.ascontiguousarray(o, dtype=f32),
        mlp_norm=np.asarray(mlp_norm, dtype=f32),
        w_gate_up=np.ascontiguousarray(np.concatenate([gate, up], axis=0), dtype=f32),
        w_down=np.ascontiguousarray(down, dtype=f32),
    )


def random_weights(cfg: EngineModelConfig, seed: int) -> ModelWeights:
    """Seeded random weights: std 0.02 matrices (GPT-2's init scale), norms around 1.

    Norm gains get a little noise so a bug that mixes up which norm is applied
    where changes the output (all-ones gains would hide it).
    """
    rng = np.random.default_rng(seed)
    h, std = cfg.hidden_size, 0.02

    def mat(rows: int, cols: int) -> np.ndarray:
        # Uniform with the same std (half-width std*sqrt(3)): 3x faster than normal
        # draws, which matters for the 1.1B-parameter size.
        a = np.float32(std * np.sqrt(3.0))
        m = rng.random((rows, cols), dtype=np.float32)
        m *= 2 * a
        m -= a
        return m

    def gain() -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(h, dtype=np.float32)).astype(np.float32)

    layers = []
    for _ in range(cfg.num_layers):
        layers.append(LayerWeights(
            attn_norm=gain(), wqkv=mat(cfg.q_size + 2 * cfg.kv_size, h), wo=mat(h, cfg.q_size),
            mlp_norm=gain(), w_gate_up=mat(2 * cfg.intermediate_size, h),
            w_down=mat(h, cfg.intermediate_size),
        ))
    embed = (rng.standard_normal((cfg.vocab_size, h), dtype=np.float32)).astype(np.float32)
    head = embed if cfg.tie_word_embeddings else mat(cfg.vocab_size, h)
    return ModelWeights(embed=embed, layers=layers, final_norm=gain(), lm_head=head)
