"""Decode-sized steps of compact-weight models run end to end in torch.

With ``--weights bf16|int8|q4`` a step of up to
:data:`~infercast.engine.qlinear.KERNEL_MAX_TOKENS` tokens is a stream of
compressed weight bytes through PyTorch's CPU kernels. Run from numpy, each of
SmolLM2-135M's 121 products paid a numpy -> torch -> numpy round trip (transpose,
bf16 cast, float cast, copy back) and every layer a dozen small numpy calls for
the norms, RoPE and attention: about 12 ms of CPU per step beside the kernels'
~10 (one thread, measured with cProfile on thread time). Here the activations
stay torch tensors, token-major ``[T, features]``, from the embedding rows to the
logits: each product is one kernel call on bf16 input, residual adds are
in-place float32, attention is ``scaled_dot_product_attention`` over the
requests' gathered K/V (a view of the numpy :class:`PagedKVStore`, no copy of
the store). Numbers: docs/design.md ("Quantized weights in the CPU engine").

The arithmetic is the one of :class:`~infercast.engine.model.LlamaModel`'s
kernel path (bf16 products with fp32 accumulation; norms, RoPE, attention and
the KV cache float32), so both agree to bf16 rounding (tested). Prefill-sized
steps stay in :class:`LlamaModel`, whose widened float32 GEMMs are faster there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infercast.engine.config import EngineModelConfig
from infercast.engine.kv_store import PagedKVStore
from infercast.engine.qlinear import import_torch
from infercast.engine.rope import RotaryTable
from infercast.engine.weights import ModelWeights

PAD_WASTE = 1.25  # decode requests share one attention call while padding stays this small


class TorchStep:
    """``forward`` of small steps for a model whose matrices are all compact (torch kernels)."""

    def __init__(self, cfg: EngineModelConfig, weights: ModelWeights, rope: RotaryTable) -> None:
        torch = self.torch = import_torch()
        self.cfg = cfg
        self.w = weights

        def vec(a: np.ndarray):  # a writable float32 copy (loaded arrays may be read-only)
            return torch.from_numpy(np.array(a, dtype=np.float32))

        self.norms = [(vec(lw.attn_norm), vec(lw.mlp_norm)) for lw in weights.layers]
        self.final_norm = vec(weights.final_norm)
        self.cos, self.sin = torch.from_numpy(rope.cos), torch.from_numpy(rope.sin)
        self.eps = float(cfg.rms_norm_eps)

    def _norm(self, x, gain):
        """RMSNorm to bf16 (the products' input): x * rsqrt(mean(x^2) + eps) * gain."""
        torch = self.torch
        ms = torch.mean(x * x, dim=-1, keepdim=True).add_(self.eps).rsqrt_()
        return (x * ms).mul_(gain).to(torch.bfloat16)

    def forward(self, seqs: Sequence, kv: PagedKVStore, all_logits: bool = False) -> list:
        """As :meth:`LlamaModel.forward` (logits numpy float32; the new K/V written to ``kv``)."""
        torch, cfg = self.torch, self.cfg
        ids = np.concatenate([np.asarray(s.token_ids, dtype=np.int64) for s in seqs])
        pos = np.concatenate([np.arange(s.num_cached, s.num_cached + len(s.token_ids))
                              for s in seqs])
        plan = _Plan.build(seqs, kv, torch)
        t, d, half = len(ids), cfg.head_dim, cfg.head_dim // 2
        cos, sin = self.cos[pos][:, None, :], self.sin[pos][:, None, :]  # [T, 1, d/2]
        from infercast.engine.qlinear import embed_rows

        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(embed_rows(self.w.embed, ids)))  # [T, H]
            qk_heads = cfg.num_heads + cfg.num_kv_heads
            for li, lw in enumerate(self.w.layers):
                attn_norm, mlp_norm = self.norms[li]
                qkv = lw.wqkv.mm_torch(self._norm(x, attn_norm)).float()  # [T, q + 2kv]
                qk = qkv[:, : cfg.q_size + cfg.kv_size].view(t, qk_heads, d)
                rot = torch.empty_like(qk)  # rotate-half RoPE on Q and K heads at once
                x1, x2 = qk[..., :half], qk[..., half:]
                torch.sub(x1 * cos, x2 * sin, out=rot[..., :half])
                torch.add(x2 * cos, x1 * sin, out=rot[..., half:])
                q, k = rot[:, : cfg.num_heads], rot[:, cfg.num_heads:]
                v = qkv[:, cfg.q_size + cfg.kv_size:].view(t, cfg.num_kv_heads, d)
                attn = self._attend(li, q, k, v, plan, kv)  # [T, q_size]
                x.add_(lw.wo.mm_torch(attn.to(torch.bfloat16)))
                gu = lw.w_gate_up.mm_torch(self._norm(x, mlp_norm))  # [T, 2F] bf16
                f = cfg.intermediate_size
                h = torch.nn.functional.silu(gu[:, :f].float()).mul_(gu[:, f:])
                x.add_(lw.w_down.mm_torch(h.to(torch.bfloat16)))
            return self._logits(x, seqs, all_logits)

    def _attend(self, li: int, q, k, v, plan: _Plan, kv: PagedKVStore):
        torch = self.torch
        k_flat, v_flat = (torch.from_numpy(a) for a in kv.flat(li))
        k_flat.index_copy_(0, plan.write, k)
        v_flat.index_copy_(0, plan.write, v)
        out = torch.empty((q.shape[0], q.shape[1] * q.shape[2]), dtype=torch.float32)
        sdpa = torch.nn.functional.scaled_dot_product_attention
        for cols, slots, mask in plan.groups:  # decode requests: [B, H, 1, d] queries
            b = len(cols)
            kc = k_flat.index_select(0, slots).view(b, -1, *k_flat.shape[1:]).transpose(1, 2)
            vc = v_flat.index_select(0, slots).view(b, -1, *v_flat.shape[1:]).transpose(1, 2)
            o = sdpa(q[cols].unsqueeze(2), kc, vc, attn_mask=mask, enable_gqa=True)
            out[cols] = o.reshape(b, -1)
        for cols, slots, mask in plan.spans:  # several new tokens: causal over their context
            kc, vc = k_flat.index_select(0, slots), v_flat.index_select(0, slots)
            o = sdpa(q[cols].transpose(0, 1), kc.transpose(0, 1), vc.transpose(0, 1),
                     attn_mask=mask, enable_gqa=True)
            out[cols] = o.transpose(0, 1).reshape(o.shape[1], -1)
        return out

    def _logits(self, x, seqs: Sequence, all_logits: bool) -> list:
        ends = np.cumsum([len(s.token_ids) for s in seqs])
        if all_logits:
            logits = self.w.lm_head.mm_torch(self._norm(x, self.final_norm)).float().numpy()
            return list(np.split(logits, ends[:-1]))
        rows = [int(e) - 1 for e, s in zip(ends, seqs, strict=True) if s.want_logits]
        if not rows:
            return [None] * len(seqs)
        h = self._norm(x[rows], self.final_norm)
        logits = iter(self.w.lm_head.mm_torch(h).float().numpy())
        return [next(logits) if s.want_logits else None for s in seqs]


class _Plan:
    """A step's KV addressing as torch index tensors, shared by every layer."""

    def __init__(self, write, groups: list, spans: list) -> None:
        self.write = write  # flat KV slots of the new tokens, in token order
        self.groups = groups  # (token rows, key slots [B * L], additive mask [B, 1, 1, L] | None)
        self.spans = spans  # (token slice, key slots [ctx], causal bool mask [n, ctx])

    @staticmethod
    def build(seqs: Sequence, kv: PagedKVStore, torch) -> _Plan:
        write, dec, spans, row = [], [], [], 0
        for s in seqs:
            n, end = len(s.token_ids), s.num_cached + len(s.token_ids)
            write.append(kv.slots(s.block_table, s.num_cached, end))
            if n == 1:
                dec.append((row, kv.slots(s.block_table, 0, end)))
            else:
                slots = torch.from_numpy(kv.slots(s.block_table, 0, end))
                mask = torch.arange(end)[None, :] <= (s.num_cached + torch.arange(n))[:, None]
                spans.append((slice(row, row + n), slots, mask))
            row += n
        return _Plan(torch.from_numpy(np.concatenate(write)), _decode_groups(dec, torch), spans)


def _decode_groups(dec: list[tuple[int, np.ndarray]], torch) -> list:
    """Decode requests grouped by context length (padding within PAD_WASTE), each group's
    key slots padded to its longest context (pad slots repeat slot 0, masked out)."""
    order = sorted(dec, key=lambda r: len(r[1]))
    groups: list[list] = []
    real = 0
    for r in order:
        n = len(r[1])
        if groups and (len(groups[-1]) + 1) * n <= PAD_WASTE * (real + n):
            groups[-1].append(r)
            real += n
        else:
            groups.append([r])
            real = n
    out = []
    for g in groups:
        width = max(len(s) for _, s in g)
        slots = np.zeros((len(g), width), dtype=np.int64)
        valid = np.zeros((len(g), width), dtype=bool)
        for i, (_, s) in enumerate(g):
            slots[i, : len(s)], valid[i, : len(s)] = s, True
        mask = None
        if not valid.all():
            mask = torch.from_numpy(np.where(valid, np.float32(0), np.float32(-np.inf)))
            mask = mask[:, None, None, :]
        out.append((torch.tensor([row for row, _ in g]), torch.from_numpy(slots.ravel()), mask))
    return out
