"""A plain reference forward: one request, no paging, no batching, no chunking.

Written to be obviously right rather than fast, and independent of
:mod:`infercast.engine.model` where that matters (its own RoPE angles, K/V heads
repeated explicitly, one dense causal mask), so tests between the two catch
errors in the paged, batched path.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infercast.engine.config import EngineModelConfig
from infercast.engine.rope import inv_frequencies
from infercast.engine.weights import ModelWeights


def _rotate(x: np.ndarray, pos: np.ndarray, inv_freq: np.ndarray) -> np.ndarray:
    # HF apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, with cos/sin duplicated.
    ang = np.outer(pos, inv_freq)  # [n, d/2], float64
    cos = np.concatenate([np.cos(ang), np.cos(ang)], axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(ang), np.sin(ang)], axis=-1)[:, None, :]
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return (x * cos + rotated * sin).astype(np.float32)


def _norm(x: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    return (x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps)) * g


def reference_logits(
    cfg: EngineModelConfig, w: ModelWeights, token_ids: Sequence[int]
) -> np.ndarray:
    """Logits [n, vocab] for every position of one prompt, computed in one pass."""
    n, d = len(token_ids), cfg.head_dim
    pos = np.arange(n)
    inv_freq = inv_frequencies(cfg)
    rep = cfg.num_heads // cfg.num_kv_heads
    mask = np.triu(np.full((n, n), -np.inf), k=1)
    x = w.embed[np.asarray(token_ids)].astype(np.float32)
    for lw in w.layers:
        h = _norm(x, lw.attn_norm, cfg.rms_norm_eps)
        wq = lw.wqkv[: cfg.q_size]
        wk = lw.wqkv[cfg.q_size : cfg.q_size + cfg.kv_size]
        wv = lw.wqkv[cfg.q_size + cfg.kv_size :]
        q = _rotate((h @ wq.T).reshape(n, cfg.num_heads, d), pos, inv_freq)
        k = _rotate((h @ wk.T).reshape(n, cfg.num_kv_heads, d), pos, inv_freq)
        v = (h @ wv.T).reshape(n, cfg.num_kv_heads, d)
        k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)  # [n, Hq, d]
        att = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d) + mask
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", att, v).reshape(n, cfg.q_size)
        x = x + o @ lw.wo.T
        h = _norm(x, lw.mlp_norm, cfg.rms_norm_eps)
        f = cfg.intermediate_size
        gate, up = h @ lw.w_gate_up[:f].T, h @ lw.w_gate_up[f:].T
        x = (x + (gate / (1 + np.exp(-gate)) * up) @ lw.w_down.T).astype(np.float32)
    return _norm(x, w.final_norm, cfg.rms_norm_eps) @ w.lm_head.T
