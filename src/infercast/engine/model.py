"""The batched forward pass: many requests' new tokens in one step over a paged KV cache.

Shapes: T = new tokens in the step (all requests concatenated), H = hidden size,
Hq/Hkv = query/KV heads, d = head dim, F = MLP width, V = vocabulary.
Activations are feature-major, ``[features, T]``: every product is ``w @ x``
(:func:`infercast.engine.linear.linear_fm`: at prefill sizes 10-15% faster than
``x @ w.T`` with the weights hot, 2-10% over a step's cold weights, on this
machine's OpenBLAS) and each op reads the previous one's
output without a transpose.
Llama architecture (Touvron et al. 2023): pre-norm RMSNorm (Zhang & Sennrich
2019), RoPE, grouped-query attention (Ainslie et al. 2023), SwiGLU MLP
(Shazeer 2020). Checked against :mod:`infercast.engine.reference` in tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import infercast.engine.decode_step as ds
from infercast.engine.attention import (
    PrefillSpan,
    causal_attention,
    decode_attention,
    decode_groups,
)
from infercast.engine.config import EngineModelConfig
from infercast.engine.decode_jit import DecodeSlots, kernels
from infercast.engine.decode_step import FusedDecode
from infercast.engine.kv_store import PagedKVStore
from infercast.engine.linear import linear
from infercast.engine.qlinear import Scratch, embed_rows, matmul_fm
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
    """x / sqrt(mean(x^2) + eps) * gain over the features of feature-major x [H, T].

    The sum of squares is a column-wise dot (einsum: no x*x temporary); the
    scaling is one outer product and one multiply into a new array, float32.
    One token (decode at batch 1) runs the compiled loop of
    :mod:`infercast.engine.decode_jit` when numba is there: one call, not six.
    """
    if x.shape[1] == 1:
        jit = kernels()
        if jit is not None:
            return jit.rms_norm_one(x[:, 0], gain, eps)
    ms = np.einsum("ht,ht->t", x, x)
    ms *= np.float32(1.0 / x.shape[0])
    ms += np.float32(eps)
    np.sqrt(ms, out=ms)
    np.divide(np.float32(1.0), ms, out=ms)
    out = np.multiply.outer(gain, ms)
    out *= x
    return out


def silu_mul(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """SwiGLU's silu(gate) * up, computed in place on gate."""
    sig = np.negative(gate)
    np.exp(sig, out=sig)
    sig += 1.0
    np.divide(gate, sig, out=gate)
    gate *= up
    return gate


class ForwardPass:
    """A backend's batched forward pass: what every backend is built from, and answers.

    Built from the model's config, its weights, the longest position to run (the RoPE
    tables, :attr:`rope`, cover ``0 .. max_positions - 1``) and the threads its products may use;
    each backend takes the weights in its own format in :meth:`_load`. ``forward(seqs, kv,
    all_logits)`` runs one step (:meth:`LlamaModel.forward`).
    """

    def __init__(
        self,
        cfg: EngineModelConfig,
        weights: ModelWeights,
        max_positions: int,
        num_threads: int = 1,
    ) -> None:
        self.cfg = cfg
        self.max_positions = max_positions
        self.rope = RotaryTable(cfg, max_positions)
        self._load(weights, num_threads)

    def _load(self, weights: ModelWeights, num_threads: int) -> None:
        raise NotImplementedError

    def forward(self, seqs: Sequence[SeqInput], kv: PagedKVStore, all_logits: bool = False) -> list:
        raise NotImplementedError


class LlamaModel(ForwardPass):
    """A Llama-architecture decoder executing ragged batches against a paged KV store."""

    def _load(self, weights: ModelWeights, num_threads: int) -> None:
        self.w = weights
        self.scratch = Scratch(num_threads)  # compact matrices widen here for prefill products
        # q4, int8 or bf16 layers: batch-1 decode as one compiled call per thread (decode_step.py)
        self.fused = FusedDecode.build(self.cfg, weights, num_threads)

    def _mm(self, w, x: np.ndarray) -> np.ndarray:
        return matmul_fm(w, x, self.scratch)

    def forward(
        self, seqs: Sequence[SeqInput], kv: PagedKVStore, all_logits: bool = False
    ) -> list[np.ndarray]:
        """Run one step; returns logits per request.

        Logits are ``[V]`` for the last new token of each request that wants them
        (``None`` for the others), or ``[n_i, V]`` for every new token when
        ``all_logits`` (tests). The new tokens' K/V are written into ``kv``.
        """
        if self._fused_ok(seqs, kv, all_logits):
            return self._fused_decode(seqs[0], kv)
        ids = np.concatenate([np.asarray(s.token_ids, dtype=np.int64) for s in seqs])
        positions = np.concatenate(
            [np.arange(s.num_cached, s.num_cached + len(s.token_ids)) for s in seqs]
        )
        plan = StepPlan.build(seqs, kv, self.cfg.num_heads // self.cfg.num_kv_heads)
        x = np.ascontiguousarray(embed_rows(self.w.embed, ids).T)  # [H, T]
        angles = self.rope.at(positions)  # the same for every layer
        for li, layer in enumerate(self.w.layers):
            x += self._attention(li, layer, x, angles, plan, kv)
            x += self._mlp(layer, x)
        return self._logits(x, seqs, all_logits)

    def _fused_ok(self, seqs, kv: PagedKVStore, all_logits: bool) -> bool:
        import infercast.engine.decode_step as ds
        import infercast.engine.qlinear as ql

        return (
            self.fused is not None
            and ds.ENABLED
            and ql.Q4_JIT_MAX_TOKENS >= 1
            and len(seqs) == 1
            and len(seqs[0].token_ids) == 1
            and not all_logits
            and hasattr(kv, "k_all")
        )

    def _fused_decode(self, s: SeqInput, kv: PagedKVStore) -> list[np.ndarray]:
        """One request's one-token decode through :class:`FusedDecode`."""
        pos = s.num_cached
        x = np.ascontiguousarray(embed_rows(self.w.embed, np.asarray(s.token_ids))[0])
        slots = kv.slots(s.block_table, 0, pos + 1)
        cos, sin = self.rope.cos[pos], self.rope.sin[pos]
        if s.want_logits and self.fused.head is not None and ds.HEAD_IN_STEP:
            # the final norm and head in the fused call, on its threads (decode_step.py)
            return [self.fused.run_logits(x, cos, sin, kv, slots)]
        self.fused.run(x, cos, sin, kv, slots)
        if not s.want_logits:
            return [None]
        # _logits' arithmetic for one row, without its bookkeeping for many requests
        h = rms_norm(x[:, None], self.w.final_norm, self.cfg.rms_norm_eps)
        head = self.w.lm_head
        if isinstance(head, np.ndarray):
            return [linear(np.ascontiguousarray(h.T), head)[0]]
        return [self._mm(head, h)[:, 0]]

    def _attention(
        self,
        li: int,
        lw: LayerWeights,
        x: np.ndarray,
        angles: tuple[np.ndarray, np.ndarray],
        plan: StepPlan,
        kv: PagedKVStore,
    ) -> np.ndarray:
        cfg = self.cfg
        h = rms_norm(x, lw.attn_norm, cfg.rms_norm_eps)
        qkv = self._mm(lw.wqkv, h)  # [q + 2kv, T]
        t, nq, d, qk = x.shape[1], cfg.num_heads, cfg.head_dim, cfg.q_size + cfg.kv_size
        # Q and K heads are adjacent in qkv: rotate them in one pass.
        rotated = self.rope.rotate(qkv[:qk].reshape(-1, d, t), *angles)  # [Hq + Hkv, d, T]
        q, k = rotated[:nq], rotated[nq:]
        v = qkv[qk:].reshape(cfg.num_kv_heads, d, t)
        out = attend(li, q, k, v, plan, kv)
        return self._mm(lw.wo, out.reshape(cfg.q_size, t))

    def _mlp(self, lw: LayerWeights, x: np.ndarray) -> np.ndarray:
        h = rms_norm(x, lw.mlp_norm, self.cfg.rms_norm_eps)
        gu = self._mm(lw.w_gate_up, h)  # [2F, T]
        f = self.cfg.intermediate_size
        return self._mm(lw.w_down, silu_mul(gu[:f], gu[f:]))

    def _logits(
        self, x: np.ndarray, seqs: Sequence[SeqInput], all_logits: bool
    ) -> list[np.ndarray]:
        ends = np.cumsum([len(s.token_ids) for s in seqs])
        if all_logits:
            h = rms_norm(x, self.w.final_norm, self.cfg.rms_norm_eps)
            logits = np.ascontiguousarray(self._mm(self.w.lm_head, h).T)
            return list(np.split(logits, ends[:-1]))
        rows = [int(e) - 1 for e, s in zip(ends, seqs, strict=True) if s.want_logits]
        out: list[np.ndarray | None] = [None] * len(seqs)
        if rows:
            h = rms_norm(x[:, rows], self.w.final_norm, self.cfg.rms_norm_eps)
            # Row-major head: [R, V] rows are the samplers' contiguous logits.
            head = self.w.lm_head
            if isinstance(head, np.ndarray):
                logits = linear(np.ascontiguousarray(h.T), head)
            else:
                logits = np.ascontiguousarray(self._mm(head, h).T)
            it = iter(logits)
            out = [next(it) if s.want_logits else None for s in seqs]
        return out


def attend(
    li: int, q: np.ndarray, k: np.ndarray, v: np.ndarray, plan: StepPlan, kv: PagedKVStore
) -> np.ndarray:
    """One layer's attention core: store the new K/V, attend every request; out [Hq, d, T].

    q, k [Hq or Hkv, d, T] (rotated) and v [Hkv, d, T] are the step's new tokens,
    feature-major. Public so that ``infercast machine`` can time exactly this.
    """
    kv.write(li, plan.write, k.transpose(2, 0, 1), v.transpose(2, 0, 1))
    out = np.empty(q.shape, dtype=np.float32)
    k_flat, v_flat = kv.flat(li)
    if plan.decode_slots is not None:
        ds = plan.decode_slots
        kernels().attend(q, k_flat, v_flat, ds.columns, ds.ptr, ds.slots, out)
    for group in plan.decode:
        decode_attention(q, k_flat, v_flat, group, out)
    for span in plan.prefill:
        cols = span.columns
        if span.start == 0:  # no cached context: the new K/V are the whole context
            k_ctx, v_ctx = k[..., cols].transpose(0, 2, 1), v[..., cols]
        else:
            k_ctx = k_flat[span.slots].transpose(1, 0, 2)
            v_ctx = v_flat[span.slots].transpose(1, 2, 0)
        causal_attention(q[..., cols], k_ctx, v_ctx, span, out[..., cols])
    return out


@dataclass(frozen=True)
class StepPlan:
    """Per-step KV addressing, shared by every layer."""

    write: np.ndarray  # flat KV slots of the step's new tokens, in column order
    decode: list  # DecodeGroup: requests with one new token, attended together (numpy)
    prefill: list[PrefillSpan]  # requests with several new tokens
    decode_slots: DecodeSlots | None = None  # the decode requests, for the compiled kernel

    @staticmethod
    def build(seqs: Sequence[SeqInput], kv: PagedKVStore, group: int, jit: bool = True) -> StepPlan:
        """The step's KV slots, decode requests and prefill spans; ``group`` = Hq / Hkv.

        Decode requests go to the compiled kernel (:mod:`infercast.engine.decode_jit`)
        when numba is there and ``jit``, else to numpy's padded groups.
        """
        write, dec_cols, dec_tables, dec_ctx, prefill = [], [], [], [], []
        col = 0
        for s in seqs:
            n, end = len(s.token_ids), s.num_cached + len(s.token_ids)
            write.append(kv.slots(s.block_table, s.num_cached, end))
            if n == 1:
                dec_cols.append(col)
                dec_tables.append(s.block_table)
                dec_ctx.append(end)
            else:
                read = kv.slots(s.block_table, 0, end)
                prefill.append(PrefillSpan.build(slice(col, col + n), s.num_cached, read, group))
            col += n
        if jit and dec_cols and kernels() is not None:
            reads = [kv.slots(t, 0, c) for t, c in zip(dec_tables, dec_ctx, strict=True)]
            slots = DecodeSlots.build(dec_cols, reads)
            return StepPlan(np.concatenate(write), [], prefill, slots)
        decode = decode_groups(dec_cols, dec_tables, dec_ctx, kv.block_size)
        return StepPlan(np.concatenate(write), decode, prefill)
