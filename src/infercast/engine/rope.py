"""Rotary position embeddings (RoPE), with the config's frequency scaling.

Su et al. 2021 (arXiv:2104.09864); the "rotate half" layout of Hugging Face's
``LlamaRotaryEmbedding``: dimension i pairs with i + head_dim/2. Scalings follow
``transformers.modeling_rope_utils``: ``linear`` divides every frequency by
``factor``; ``llama3`` (Llama 3.1 report, Sec. 3) leaves high frequencies alone,
divides low ones by ``factor`` and blends smoothly in between. GGUF files carry
the llama3 result as a ``rope_freqs`` tensor of divisors (type ``factors`` here).
"""

from __future__ import annotations

import math

import numpy as np

from infercast.engine.config import EngineModelConfig, rope_type_of


def inv_frequencies(cfg: EngineModelConfig) -> np.ndarray:
    """Inverse frequencies theta^(-2i/d), i < d/2, after scaling; float64 [head_dim/2]."""
    d = cfg.head_dim
    inv = 1.0 / cfg.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    kind = rope_type_of(cfg.rope_scaling)
    if kind == "linear":
        return inv / float(cfg.rope_scaling["factor"])
    if kind == "llama3":
        return _llama3_scale(inv, cfg.rope_scaling)
    if kind == "factors":  # GGUF files store llama3 scaling as per-frequency divisors
        return inv / np.asarray(cfg.rope_scaling["factors"], dtype=np.float64)
    return inv


def _llama3_scale(inv: np.ndarray, s) -> np.ndarray:
    # transformers: _compute_llama3_parameters (same constants, same blend).
    factor = float(s["factor"])
    low, high = float(s.get("low_freq_factor", 1.0)), float(s.get("high_freq_factor", 4.0))
    old_ctx = float(s["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_ctx / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return np.where(medium, blended, scaled)


class RotaryTable:
    """Precomputed cos/sin per position, float32 [max_positions, head_dim/2]."""

    def __init__(self, cfg: EngineModelConfig, max_positions: int) -> None:
        angles = np.outer(np.arange(max_positions, dtype=np.float64), inv_frequencies(cfg))
        self.cos = np.cos(angles).astype(np.float32)
        self.sin = np.sin(angles).astype(np.float32)

    def at(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """cos, sin of each token's position, [head_dim/2, tokens] (gather once per step)."""
        return (
            np.ascontiguousarray(self.cos[positions].T),
            np.ascontiguousarray(self.sin[positions].T),
        )

    @staticmethod
    def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        """Rotate feature-major x [heads, head_dim, tokens] by the angles from :meth:`at`.

        Returns a new array; the angles broadcast along the contiguous token axis.
        """
        half = x.shape[1] // 2
        x1, x2 = x[:, :half], x[:, half:]
        out = np.empty(x.shape, dtype=np.float32)
        tmp = np.empty(x1.shape, dtype=np.float32)
        lo, hi = out[:, :half], out[:, half:]
        np.multiply(x1, cos, out=lo)
        np.multiply(x2, sin, out=tmp)
        lo -= tmp
        np.multiply(x2, cos, out=hi)
        np.multiply(x1, sin, out=tmp)
        hi += tmp
        return out
