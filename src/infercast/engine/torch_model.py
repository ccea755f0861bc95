"""An optional torch backend: the same forward pass with bfloat16 weights and matmuls.

Measured on a Xeon with AMX (2026-12-03; one thread, w 5632 x 2048): torch bf16
matmuls run a 1- to 16-row product in ~1.25 ms, all at the bandwidth of reading w
once (bf16 halves those bytes), and a 1536^3 product at ~530 GFLOP/s (AMX),
against numpy float32's ~200 GFLOP/s and its slow 2-32-row products. So there this
backend follows the roofline's shape where numpy cannot. On an AVX2-only CPU
(no AVX-512 BF16, no AMX) bf16 products are slower than float32: docs/cpu-kernels.md.

Precision: weights and matmul inputs bf16 (fp32 accumulation inside oneDNN),
the residual stream, norms, RoPE, attention and the KV cache float32. The KV
cache is the numpy :class:`~infercast.engine.kv_store.PagedKVStore`, shared
with torch without copies (``torch.from_numpy``). Install with
``pip install 'infercast[torch]'``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infercast.engine.kv_store import PagedKVStore
from infercast.engine.model import ForwardPass, SeqInput
from infercast.engine.weights import ModelWeights
from infercast.errors import ConfigError


def import_torch():
    """torch, or a ConfigError that says how to install it."""
    try:
        import torch
    except ImportError:
        raise ConfigError("`backend` torch needs torch: pip install 'infercast[torch]'") from None
    return torch


class TorchLlamaModel(ForwardPass):
    """Drop-in for :class:`~infercast.engine.model.LlamaModel` (same ``forward``)."""

    def _load(self, weights: ModelWeights, num_threads: int) -> None:
        torch = self.torch = import_torch()
        torch.set_num_threads(num_threads)
        bf16 = torch.bfloat16

        def mat(a: np.ndarray):
            return torch.from_numpy(np.ascontiguousarray(a)).to(bf16)

        def vec(a: np.ndarray):  # a copy: loaded arrays may be read-only, torch wants writable
            return torch.from_numpy(np.array(a, dtype=np.float32))

        self.embed = weights.embed  # gathered in numpy: one row per token
        self.layers = [
            {
                "attn_norm": vec(lw.attn_norm),
                "wqkv": mat(lw.wqkv),
                "wo": mat(lw.wo),
                "mlp_norm": vec(lw.mlp_norm),
                "w_gate_up": mat(lw.w_gate_up),
                "w_down": mat(lw.w_down),
            }
            for lw in weights.layers
        ]
        self.final_norm = vec(weights.final_norm)
        self.lm_head = mat(weights.lm_head)
        self.cos, self.sin = torch.from_numpy(self.rope.cos), torch.from_numpy(self.rope.sin)

    @property
    def weight_bytes(self) -> int:
        """Bytes of the bf16 matrices a decode step reads (norms and embedding rows aside)."""
        mats = [self.lm_head] + [
            lw[k] for lw in self.layers for k in ("wqkv", "wo", "w_gate_up", "w_down")
        ]
        return int(sum(m.numel() * m.element_size() for m in mats))

    def _linear(self, x, w):
        return (x.to(self.torch.bfloat16) @ w.T).float()

    def _norm(self, x, gain):
        return x * self.torch.rsqrt((x * x).mean(-1, keepdim=True) + self.cfg.rms_norm_eps) * gain

    def _rope(self, x, pos):
        half = x.shape[-1] // 2
        cos, sin = self.cos[pos][:, None, :], self.sin[pos][:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return self.torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def forward(self, seqs: Sequence[SeqInput], kv: PagedKVStore, all_logits: bool = False) -> list:
        """As :meth:`LlamaModel.forward`: logits (numpy float32) per request; K/V written."""
        torch = self.torch
        ids = np.concatenate([np.asarray(s.token_ids, dtype=np.int64) for s in seqs])
        pos = torch.from_numpy(
            np.concatenate([np.arange(s.num_cached, s.num_cached + len(s.token_ids)) for s in seqs])
        )
        write = np.concatenate(
            [kv.slots(s.block_table, s.num_cached, s.num_cached + len(s.token_ids)) for s in seqs]
        )
        reads = [kv.slots(s.block_table, 0, s.num_cached + len(s.token_ids)) for s in seqs]
        x = torch.from_numpy(self.embed[ids])
        with torch.inference_mode():
            for li, lw in enumerate(self.layers):
                x = x + self._attention(li, lw, x, pos, seqs, kv, write, reads)
                h = self._norm(x, lw["mlp_norm"])
                gate, up = self._linear(h, lw["w_gate_up"]).chunk(2, dim=-1)
                x = x + self._linear(torch.nn.functional.silu(gate) * up, lw["w_down"])
            return self._logits(x, seqs, all_logits)

    def _attention(self, li, lw, x, pos, seqs, kv, write, reads):
        torch, cfg = self.torch, self.cfg
        t = x.shape[0]
        qkv = self._linear(self._norm(x, lw["attn_norm"]), lw["wqkv"])
        q = self._rope(qkv[:, : cfg.q_size].reshape(t, cfg.num_heads, cfg.head_dim), pos)
        k = self._rope(
            qkv[:, cfg.q_size : cfg.q_size + cfg.kv_size].reshape(
                t, cfg.num_kv_heads, cfg.head_dim
            ),
            pos,
        )
        v = qkv[:, cfg.q_size + cfg.kv_size :].reshape(t, cfg.num_kv_heads, cfg.head_dim)
        kv.write(li, write, k.numpy(), v.numpy())
        outs, row = [], 0
        for s, slots in zip(seqs, reads, strict=True):
            n = len(s.token_ids)
            k_ctx, v_ctx = (torch.from_numpy(a) for a in kv.read(li, slots))
            outs.append(self._sdpa(q[row : row + n], k_ctx, v_ctx, s.num_cached))
            row += n
        return self._linear(torch.cat(outs), lw["wo"])

    def _sdpa(self, q, k, v, start: int):
        # [n, H, d] -> [H, n, d]; query i (position start+i) sees keys 0..start+i.
        torch = self.torch
        n, ctx = q.shape[0], k.shape[0]
        mask = None
        if n > 1:
            mask = torch.arange(ctx)[None, :] <= (start + torch.arange(n))[:, None]
        out = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask, enable_gqa=True
        )
        return out.transpose(0, 1).reshape(n, -1)

    def _logits(self, x, seqs, all_logits: bool) -> list:
        ends = np.cumsum([len(s.token_ids) for s in seqs])
        if all_logits:
            logits = self._linear(self._norm(x, self.final_norm), self.lm_head).numpy()
            return list(np.split(logits, ends[:-1]))
        rows = [int(e) - 1 for e, s in zip(ends, seqs, strict=True) if s.want_logits]
        if not rows:
            return [None] * len(seqs)
        logits = iter(self._linear(self._norm(x[rows], self.final_norm), self.lm_head).numpy())
        return [next(logits) if s.want_logits else None for s in seqs]
