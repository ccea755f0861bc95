"""The batched forward pass: many requests' new tokens in one step over a paged KV cache.

Shapes: T = new tokens in the step (all requests concatenated), H = hidden size,
Hq/Hkv = query/KV heads, d = head dim, F = MLP width, V = vocabulary.
Llama architecture (Touvron et al. 2023): pre-norm RMSNorm (Zhang & Sennrich
2019), RoPE, grouped-query attention (Ainslie et al. 2023), SwiGLU MLP
(Shazeer 2020). Checked against :mod:`infercast.engine.reference` in tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infercast.engine.config import EngineModelConfig
from infercast.engine.kv_store import PagedKVStore
from infercast.engine.linear import linear
from infercast.engine.rope import RotaryTable
from infercast.engine.weights import LayerWeights, ModelWeights


@dataclass(frozen=True)
class SeqInput:
    """One request's share of a step: new token ids at positions num_cached.. onward."""

    token_ids: Sequence[int]
    num_cached: int
    block_table: Sequence[int]
    want_logits: bool = True


def rms_norm(x: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * gain, over the last axis (float32).

    The sum of squares is a row-wise dot (einsum: no x*x temporary) and the
    scaling runs in place on one new array.
    """
    ms = np.einsum("...i,...i->...", x, x)[..., None]
    ms *= np.float32(1.0 / x.shape[-1])
    ms += np.float32(eps)
    np.sqrt(ms, out=ms)
    out = np.divide(x, ms)
    out *= gain
    return out


def silu_mul(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """SwiGLU's silu(gate) * up, computed in place on gate."""
    sig = np.negative(gate)
    np.exp(sig, out=sig)
    sig += 1.0
    np.divide(gate, sig, out=gate)
    gate *= up
    return gate


QUERY_BLOCK = 128  # long prefills attend in query blocks, each to the keys it can see


def causal_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, start: int) -> np.ndarray:
    """Attention of n new queries at positions start.. over ctx = start + n keys.

    Queries go in blocks of QUERY_BLOCK; block [i, j) only reads keys
    0 .. start + j - 1, which skips most of the masked half of a long prefill.
    """
    n = q.shape[0]
    if n <= QUERY_BLOCK:
        return _attention_block(q, k, v, start)
    return np.concatenate([
        _attention_block(q[i: i + QUERY_BLOCK], k[: start + min(i + QUERY_BLOCK, n)],
                         v[: start + min(i + QUERY_BLOCK, n)], start + i)
        for i in range(0, n, QUERY_BLOCK)])


def _attention_block(q: np.ndarray, k: np.ndarray, v: np.ndarray, start: int) -> np.ndarray:
    """Attention of n new queries at positions start.. over ctx = start + n keys.

    q [n, Hq, d]; k, v [ctx, Hkv, d] -> [n, Hq * d]. Each KV head serves
    g = Hq/Hkv query heads, so queries are grouped [Hkv, n*g, d] and each
    group runs as one matmul against its shared K (no K/V repetition). The
    1/sqrt(d) scale goes on q and the softmax's division on the [.., d] output,
    the smaller array in both cases (prefill 128 tokens: ~17% less time here).
    """
    n, hq, d = q.shape
    ctx, hkv, _ = k.shape
    g = hq // hkv
    qg = (q * np.float32(1.0 / np.sqrt(d))).reshape(n, hkv, g, d)
    qg = qg.transpose(1, 0, 2, 3).reshape(hkv, n * g, d)
    scores = qg @ k.transpose(1, 2, 0)  # [Hkv, n*g, ctx]
    if n > 1:  # query i (position start+i) sees keys 0..start+i
        future = np.arange(ctx)[None, :] > (start + np.arange(n))[:, None]  # [n, ctx]
        mask = np.where(future, np.float32(-np.inf), np.float32(0.0))
        scores.reshape(hkv, n, g, ctx)[...] += mask[None, :, None, :]
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    denom = scores.sum(axis=-1, keepdims=True)
    out = scores @ v.transpose(1, 0, 2)  # [Hkv, n*g, d]
    out /= denom
    return out.reshape(hkv, n, g, d).transpose(1, 0, 2, 3).reshape(n, hq * d)


class LlamaModel:
    """A Llama-architecture decoder executing ragged batches against a paged KV store."""

    def __init__(self, cfg: EngineModelConfig, weights: ModelWeights, max_positions: int):
        self.cfg = cfg
        self.w = weights
        self.max_positions = max_positions
        self.rope = RotaryTable(cfg, max_positions)

    def forward(self, seqs: Sequence[SeqInput], kv: PagedKVStore,
                all_logits: bool = False) -> list[np.ndarray]:
        """Run one step; returns logits per request.

        Logits are ``[V]`` for the last new token of each request that wants them
        (``None`` for the others), or ``[n_i, V]`` for every new token when
        ``all_logits`` (tests). The new tokens' K/V are written into ``kv``.
        """
        ids = np.concatenate([np.asarray(s.token_ids, dtype=np.int64) for s in seqs])
        positions = np.concatenate(
            [np.arange(s.num_cached, s.num_cached + len(s.token_ids)) for s in seqs])
        write_slots = [kv.slots(s.block_table, s.num_cached, s.num_cached + len(s.token_ids))
                       for s in seqs]
        read_slots = [kv.slots(s.block_table, 0, s.num_cached + len(s.token_ids)) for s in seqs]
        all_write = np.concatenate(write_slots)
        x = self.w.embed[ids]  # [T, H] (a copy)
        angles = self.rope.at(positions)  # the same for every layer
        for li, layer in enumerate(self.w.layers):
            x += self._attention(li, layer, x, angles, seqs, kv, all_write, read_slots)
            x += self._mlp(layer, x)
        return self._logits(x, seqs, all_logits)

    def _attention(self, li: int, lw: LayerWeights, x: np.ndarray,
                   angles: tuple[np.ndarray, np.ndarray], seqs: Sequence[SeqInput],
                   kv: PagedKVStore, write: np.ndarray,
                   read_slots: list[np.ndarray]) -> np.ndarray:
        cfg = self.cfg
        h = rms_norm(x, lw.attn_norm, cfg.rms_norm_eps)
        qkv = linear(h, lw.wqkv)  # [T, q + 2kv]
        t, nq, qk = x.shape[0], cfg.num_heads, cfg.q_size + cfg.kv_size
        # Q and K heads are adjacent in qkv: rotate them in one pass.
        rotated = self.rope.rotate(qkv[:, :qk].reshape(t, -1, cfg.head_dim), *angles)
        q, k = rotated[:, :nq], rotated[:, nq:]
        v = qkv[:, qk:].reshape(t, cfg.num_kv_heads, cfg.head_dim)
        kv.write(li, write, k, v)
        out = np.empty((t, cfg.q_size), dtype=np.float32)
        row = 0
        for s, slots in zip(seqs, read_slots, strict=True):
            n = len(s.token_ids)
            k_ctx, v_ctx = kv.read(li, slots)
            out[row: row + n] = causal_attention(q[row: row + n], k_ctx, v_ctx, s.num_cached)
            row += n
        return linear(out, lw.wo)

    def _mlp(self, lw: LayerWeights, x: np.ndarray) -> np.ndarray:
        h = rms_norm(x, lw.mlp_norm, self.cfg.rms_norm_eps)
        gu = linear(h, lw.w_gate_up)  # [T, 2F]
        f = self.cfg.intermediate_size
        return linear(silu_mul(gu[:, :f], gu[:, f:]), lw.w_down)

    def _logits(self, x: np.ndarray, seqs: Sequence[SeqInput],
                all_logits: bool) -> list[np.ndarray]:
        ends = np.cumsum([len(s.token_ids) for s in seqs])
        if all_logits:
            h = rms_norm(x, self.w.final_norm, self.cfg.rms_norm_eps)
            logits = h @ self.w.lm_head.T
            return list(np.split(logits, ends[:-1]))
        rows = [int(e) - 1 for e, s in zip(ends, seqs, strict=True) if s.want_logits]
        out: list[np.ndarray | None] = [None] * len(seqs)
        if rows:
            h = rms_norm(x[rows], self.w.final_norm, self.cfg.rms_norm_eps)
            logits = linear(h, self.w.lm_head)  # only the rows that sample: [R, V]
            it = iter(logits)
            out = [next(it) if s.want_logits else None for s in seqs]
        return out
