"""Per-operator FLOPs and bytes of one forward step (the ledger).

A step is described per sequence by ``new`` tokens computed on top of ``cached``
tokens already in the KV cache. Everything is per GPU of one replica (tensor
parallel shards divide matmuls; pipeline stages run one after another, so the
ledger covers all layers). Conventions, with their derivations:

- GEMM ``[M, K] x [K, N]``: 2*M*K*N FLOPs (one multiply + one add per MAC);
  bytes = weights K*N*w + input M*K*a + output M*N*a.
- Attention per (query, key) pair and head: 2*d_qk (scores) + 2*d_v (P @ V) FLOPs.
  Causal: a new token at position p sees p + 1 keys (full), min(p + 1, W)
  (sliding window W), or its position within its aligned chunk (chunked local).
  KV bytes: each visible cached entry is read once per step (FlashAttention /
  paged attention stream K and V once per sequence; GQA: only the kv heads are
  stored and read), the new tokens' K/V are written once.
- MLA (DeepSeek-V2/V3): decode uses the absorbed form, attending over the
  compressed latent (d_qk = kv_lora + rope, d_v = kv_lora, shared by all heads);
  prefill uses the expanded form (d_qk = nope + rope, d_v = v_head) and first
  expands the cached latent with kv_b (2 * kv_lora * heads * (nope + v) FLOPs per
  cached token). The latent is replicated on every TP rank.
- MoE: tokens x k expert-MLPs of FLOPs; weight bytes of the *distinct* experts
  the batch touches, E * (1 - (1 - k/E)^T) in expectation for uniform routing.
  Routed experts may be stored in their own format (``expert_weight_bytes``,
  e.g. gpt-oss's MXFP4 beside BF16 attention; ``cost/experts.py``).
- LM head only for sequences that sample this step; logits written in fp32.
- ``compulsory_bytes``: traffic no kernel fusion can avoid (weights, KV read and
  write, gathered embedding rows). The floor uses it; the expected time uses all
  bytes, activations included (they round-trip HBM between unfused kernels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from infercast.cost.comm import alltoall_link_bytes, ring_allreduce_link_bytes
from infercast.cost.expert_routing import ExpertRouting
from infercast.specs.model import ATTN_CHUNKED, ATTN_FULL, ATTN_SLIDING, LayerSpec, ModelSpec
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision

GEMM, ATTENTION, ELEMENTWISE, GATHER, COMM = "gemm", "attention", "elementwise", "gather", "comm"


@dataclass(frozen=True, slots=True)
class OpCost:
    """FLOPs and bytes of one operator, summed over the ``count`` layers it appears in.

    For ``kind == "comm"``, ``link_bytes`` is what each GPU sends over its link and
    ``collectives`` how many collective calls that took (for latency).
    """

    name: str
    kind: str
    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    m_tokens: float = 0.0  # GEMM rows (drives GEMM efficiency)
    count: int = 1
    link_bytes: float = 0.0
    collectives: float = 0.0
    compulsory_bytes: float = (
        0.0  # traffic no fusion can avoid: weights, KV read/write, gathered rows
    )
    expert: bool = (
        False  # a routed-expert GEMM: runs at the experts' own compute dtype (cost/experts.py)
    )

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte of memory traffic."""
        return self.flops / self.bytes if self.bytes else float("inf")

    def scaled(self, count: int) -> OpCost:
        """This op repeated over ``count`` layers."""
        return OpCost(
            self.name,
            self.kind,
            self.flops * count,
            self.bytes_read * count,
            self.bytes_written * count,
            self.m_tokens,
            self.count * count,
            self.link_bytes * count,
            self.collectives * count,
            self.compulsory_bytes * count,
            self.expert,
        )


def gemm(
    name: str,
    m: float,
    k: float,
    n: float,
    w_bytes: float,
    a_bytes: float,
    weight_bytes: float | None = None,
) -> OpCost:
    """A dense GEMM [m, k] x [k, n]; ``weight_bytes`` overrides k*n*w (MoE: touched experts)."""
    wb = k * n * w_bytes if weight_bytes is None else weight_bytes
    return OpCost(
        name,
        GEMM,
        2.0 * m * k * n,
        wb + m * k * a_bytes,
        m * n * a_bytes,
        m_tokens=m,
        compulsory_bytes=wb,
    )


def elementwise(
    name: str,
    elems_in: float,
    elems_out: float,
    a_bytes: float,
    flops_per_elem: float = 1.0,
    extra_bytes: float = 0.0,
) -> OpCost:
    return OpCost(
        name,
        ELEMENTWISE,
        flops_per_elem * elems_in,
        elems_in * a_bytes + extra_bytes,
        elems_out * a_bytes,
        compulsory_bytes=extra_bytes,
    )


# ---- attention statistics -------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SpanStats:
    """Attention work of a step for one attention span (full / sliding W / chunked C).

    ``*_dec`` sums over sequences computing one token (decode), ``*_pre`` over the
    rest (prefill chunks); MLA needs the split, MHA adds them.
    """

    pairs_cached_dec: float = 0.0
    pairs_cached_pre: float = 0.0
    pairs_new_dec: float = 0.0
    pairs_new_pre: float = 0.0
    kv_read_dec: float = 0.0  # cached KV entries read
    kv_read_pre: float = 0.0


def _sum_min(c: np.ndarray, n: np.ndarray, w: float) -> np.ndarray:
    """sum_{j=1..n} min(c + j, w), elementwise (keys seen under a sliding window w)."""
    m = np.clip(w - c, 0, n)
    return m * c + m * (m + 1) / 2 + (n - m) * w


def _chunk_prefix(x: np.ndarray, w: float) -> np.ndarray:
    """sum_{p < x} (p mod w + 1): keys seen by positions 0..x-1 under chunked attention."""
    q, r = np.divmod(x, w)
    return q * w * (w + 1) / 2 + r * (r + 1) / 2


def span_pairs(
    kind: str, window: float, new: np.ndarray, cached: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pairs with cached keys, pairs with new keys, cached entries read) per sequence."""
    if kind == ATTN_FULL or window <= 0:
        return new * cached, new * (new + 1) / 2, cached
    if kind == ATTN_SLIDING:
        total = _sum_min(cached, new, window)
        own = _sum_min(np.zeros_like(cached), new, window)
        return total - own, own, np.minimum(cached, window - 1)
    if kind == ATTN_CHUNKED:
        total = _chunk_prefix(cached + new, window) - _chunk_prefix(cached, window)
        in_chunk = np.mod(cached, window)
        first = np.where(in_chunk > 0, np.minimum(new, window - in_chunk), 0)
        cached_pairs = first * in_chunk
        return cached_pairs, total - cached_pairs, in_chunk
    raise ValueError(f"unknown attention span {kind!r}")


def span_stats(kind: str, window: float, new: np.ndarray, cached: np.ndarray) -> SpanStats:
    """Aggregate attention statistics of a step for one span kind."""
    pc, pn, kv = span_pairs(kind, window, new, cached)
    dec = new == 1
    pre = ~dec
    return SpanStats(
        float(pc[dec].sum()),
        float(pc[pre].sum()),
        float(pn[dec].sum()),
        float(pn[pre].sum()),
        float(kv[dec].sum()),
        float(kv[pre].sum()),
    )


# ---- per-layer ledger -------------------------------------------------------------
class Shards:
    """Per-GPU shapes of a model under a parallel layout and precision."""

    def __init__(
        self,
        model: ModelSpec,
        precision: Precision,
        parallel: Parallelism,
        expert_weight_bytes: float | None = None,
        routing: ExpertRouting | None = None,
    ):
        a = model.attention
        self.routing = routing  # skewed routing (cost/expert_routing.py); None = uniform
        tp = parallel.tp
        self.model, self.prec, self.par = model, precision, parallel
        self.h = model.hidden_size
        self.w = precision.weight_bytes
        self.we = (
            self.w if expert_weight_bytes is None else expert_weight_bytes
        )  # routed experts' own storage
        self.a = precision.activation_bytes
        self.kvb = precision.kv_bytes
        # Attention data parallel: whole attention per GPU over its 1/tp share of the sequences.
        self.attn_dp = parallel.attn_dp and tp > 1
        self.attn_share = 1.0 / tp if self.attn_dp else 1.0
        atp = 1 if self.attn_dp else tp
        self.heads = a.num_heads / atp
        self.kv_heads = math.ceil(a.num_kv_heads / atp)  # replicated when kv heads < tp
        if a.kind == "mla":
            self.kv_elems = a.kv_lora_rank + a.qk_rope_head_dim  # latent replicated on each rank
        else:
            self.kv_elems = 2 * self.kv_heads * a.head_dim

    # attention projections -------------------------------------------------------
    def attn_proj_ops(self, t: float) -> list[OpCost]:
        a, h, w, ab = self.model.attention, self.h, self.w, self.a
        t = t * self.attn_share  # this GPU's tokens under attention DP
        if a.kind == "mla":
            qk = a.qk_nope_head_dim + a.qk_rope_head_dim
            ops = []
            if a.q_lora_rank:
                ops.append(gemm("q_a_proj", t, h, a.q_lora_rank, w, ab))
                ops.append(gemm("q_b_proj", t, a.q_lora_rank, self.heads * qk, w, ab))
            else:
                ops.append(gemm("q_proj", t, h, self.heads * qk, w, ab))
            ops.append(gemm("kv_a_proj", t, h, a.kv_lora_rank + a.qk_rope_head_dim, w, ab))
            # kv_b: decode applies it to q/o (absorbed), prefill to new tokens' latents: T rows
            # either way.
            ops.append(
                gemm(
                    "kv_b_proj",
                    t,
                    a.kv_lora_rank,
                    self.heads * (a.qk_nope_head_dim + a.v_head_dim),
                    w,
                    ab,
                )
            )
            ops.append(gemm("o_proj", t, self.heads * a.v_head_dim, h, w, ab))
            return ops
        qkv_n = self.heads * a.head_dim + self.kv_elems
        return [
            gemm("qkv_proj", t, h, qkv_n, w, ab),
            gemm("o_proj", t, self.heads * a.v_head_dim, h, w, ab),
        ]

    def attention_ops(self, s: SpanStats, new_tokens: float) -> list[OpCost]:
        """Attention core: the part over cached KV and the causal part over new tokens."""
        a, ab, kvb = self.model.attention, self.a, self.kvb
        if self.attn_dp:  # this GPU's sequences only: an even share of every sum
            f = self.attn_share
            s = SpanStats(
                s.pairs_cached_dec * f,
                s.pairs_cached_pre * f,
                s.pairs_new_dec * f,
                s.pairs_new_pre * f,
                s.kv_read_dec * f,
                s.kv_read_pre * f,
            )
            new_tokens = new_tokens * f
        if a.kind == "mla":
            dec_qk, dec_v = a.kv_lora_rank + a.qk_rope_head_dim, a.kv_lora_rank
            pre_qk, pre_v = a.qk_nope_head_dim + a.qk_rope_head_dim, a.v_head_dim
            expand = (
                2.0
                * a.kv_lora_rank
                * self.heads
                * (a.qk_nope_head_dim + a.v_head_dim)
                * s.kv_read_pre
            )
        else:
            dec_qk = pre_qk = a.head_dim
            dec_v = pre_v = a.v_head_dim
            expand = 0.0
        per_pair_dec = 2.0 * self.heads * (dec_qk + dec_v)
        per_pair_pre = 2.0 * self.heads * (pre_qk + pre_v)
        cached = OpCost(
            "attention (cached KV)",
            ATTENTION,
            flops=per_pair_dec * s.pairs_cached_dec + per_pair_pre * s.pairs_cached_pre + expand,
            bytes_read=(s.kv_read_dec + s.kv_read_pre) * self.kv_elems * kvb,
            compulsory_bytes=(s.kv_read_dec + s.kv_read_pre) * self.kv_elems * kvb,
        )
        q_elems = self.heads * (a.head_dim if a.kind != "mla" else dec_qk)
        new = OpCost(
            "attention (new tokens)",
            ATTENTION,
            flops=per_pair_dec * s.pairs_new_dec + per_pair_pre * s.pairs_new_pre,
            bytes_read=new_tokens * (q_elems + self.kv_elems) * ab,
            bytes_written=new_tokens * (self.heads * a.v_head_dim * ab + self.kv_elems * kvb),
            compulsory_bytes=new_tokens * self.kv_elems * kvb,
        )
        return [cached, new]

    # MLP / MoE -----------------------------------------------------------------------
    def mlp_ops(self, layer: LayerSpec, t: float) -> list[OpCost]:
        if layer.moe:
            return self.moe_ops(t)
        return self.dense_mlp_ops("mlp", layer.ffn_size, t)

    def dense_mlp_ops(self, prefix: str, ffn: float, t: float) -> list[OpCost]:
        f = ffn / self.par.tp
        m, h, w, ab = self.model, self.h, self.w, self.a
        up_n = 2 * f if m.gated_mlp else f
        return [
            gemm(f"{prefix}.{'gate_up' if m.gated_mlp else 'up'}_proj", t, h, up_n, w, ab),
            elementwise(f"{prefix}.act", t * up_n, t * f, ab, flops_per_elem=4.0),
            gemm(f"{prefix}.down_proj", t, f, h, w, ab),
        ]

    def moe_ops(self, t: float) -> list[OpCost]:
        """Router, routed experts, their output reduction, shared experts.

        Sharding: ``ep`` ranks split the experts, the ``tp / ep`` ranks of one expert split its
        FFN width (TensorRT-LLM's moe_tp_size = tp / ep); a rank runs ``rows / ep`` token-expert
        rows. FLOPs and weights per rank are ``1 / tp`` of the total either way, but the rows'
        hidden-size activations (the gate_up input, the down output) are not split by the FFN
        shards: each rank reads and writes ``rows / ep`` full rows. The ``k`` expert outputs of
        a token are then summed back to one row (``moe.finalize``: TensorRT-LLM's
        ``finalizeMoeRoutingKernel``, vLLM's ``moe_sum`` after its fused-MoE Triton GEMMs; both
        read every expert output row and write one row per token).
        """
        moe, h, w, ab, tp, ep = self.model.moe, self.h, self.we, self.a, self.par.tp, self.par.ep
        assert moe is not None
        e, k, f = moe.num_experts, moe.experts_per_token, moe.expert_ffn_size
        touched = e * (1.0 - (1.0 - k / e) ** t) if t > 0 else 0.0
        rows = t * k  # token-expert pairs
        if (
            self.routing is not None
        ):  # skew: the busiest EP rank's load, as if every rank carried it
            rank_touched, rank_rows = self.routing.rank_load(t, k, ep)
            touched, rows = rank_touched * ep, rank_rows * ep
        m_per_expert = rows / touched if touched else 0.0
        local = rows / ep  # rows this rank's experts run, each with the full hidden size
        gate_up = OpCost(
            "moe.experts.gate_up",
            GEMM,
            2.0 * rows * h * 2 * f / tp,
            touched * h * 2 * f * w / tp + local * h * ab,
            rows * 2 * f * ab / tp,
            m_per_expert,
            compulsory_bytes=touched * h * 2 * f * w / tp,
            expert=True,
        )
        down = OpCost(
            "moe.experts.down",
            GEMM,
            2.0 * rows * f * h / tp,
            touched * f * h * w / tp + rows * f * ab / tp,
            local * h * ab,
            m_per_expert,
            compulsory_bytes=touched * f * h * w / tp,
            expert=True,
        )
        ops = [
            gemm("moe.router", t, h, e, self.w, ab),
            gate_up,
            elementwise("moe.act", rows * 2 * f / tp, rows * f / tp, ab, 4.0),
            down,
            elementwise("moe.finalize", local * h, t * self.attn_share * h, ab),
        ]
        if moe.num_shared_experts:
            ops += self.dense_mlp_ops("moe.shared", moe.num_shared_experts * moe.shared_ffn_size, t)
        return ops

    def norm_op(self, name: str, t: float) -> OpCost:
        return elementwise(
            name, t * self.h, t * self.h, self.a, flops_per_elem=4.0, extra_bytes=self.h * self.w
        )

    def comm_ops(self, layer: LayerSpec, t: float) -> list[OpCost]:
        """TP all-reduces (two per layer, one for parallel blocks) and EP all-to-alls.

        Attention DP: no reduce after attention (each GPU's own sequences); the
        MLP gathers every GPU's tokens and scatters its output back (all-gather +
        reduce-scatter move 2 (n-1)/n x buffer, what one ring all-reduce moves),
        or, with EP, dispatches only its own tokens all-to-all.

        EP under TP attention (TensorRT-LLM's "TEP"): after the attention all-reduce every
        rank already holds every token, so nothing is dispatched; each rank runs its local
        experts on the tokens routed to them ("a GPU only sees tokens routed to its local
        experts", TensorRT-LLM docs, "Parallelism in TensorRT-LLM") and the partial outputs
        are summed by the MLP's all-reduce, as in dense TP.
        """
        tp, ep = self.par.tp, self.par.ep
        buf = t * self.h * self.a
        ops = []
        reduces = 1 if self.model.parallel_block or self.attn_dp else 2
        if layer.moe and ep > 1 and self.attn_dp:
            reduces -= 1
            rows = t * self.attn_share * self.model.moe.experts_per_token  # type: ignore[union-attr]
            if (
                self.routing is not None and self.model.moe is not None
            ):  # the busiest rank gets its share
                rows *= self.routing.imbalance(self.model.moe.experts_per_token, ep)
            a2a = 2 * alltoall_link_bytes(rows * self.h * self.a, ep)  # dispatch + combine
            ops.append(OpCost("ep all-to-all", COMM, link_bytes=a2a, collectives=2))
        if tp > 1 and reduces:
            ops.append(
                OpCost(
                    "tp all-reduce",
                    COMM,
                    link_bytes=reduces * ring_allreduce_link_bytes(buf, tp),
                    collectives=reduces,
                )
            )
        return ops

    def layer_token_ops(self, layer: LayerSpec, t: float) -> list[OpCost]:
        """Ops of one layer that depend only on the number of new tokens."""
        ops = [self.norm_op("attn_norm", t * self.attn_share), *self.attn_proj_ops(t)]
        if self.model.norms_per_layer > 1:
            ops.append(self.norm_op("mlp_norm", t))
        return ops + self.mlp_ops(layer, t) + self.comm_ops(layer, t)

    def head_ops(self, t: float, logits: float) -> list[OpCost]:
        """Embedding gather, final norm, LM head (fp32 logits), pipeline sends."""
        m, tp = self.model, self.par.tp
        v = m.vocab_size / tp
        # the head's own storage when it has one (``Precision.head_weights``: a Q8_0 head
        # beside Q4_1 layers, as llama.cpp quantizes); the layers' otherwise
        head = gemm("lm_head", logits, self.h, v, self.prec.head_weight_bytes, self.a)
        head = OpCost(
            head.name,
            GEMM,
            head.flops,
            head.bytes_read,
            logits * v * 4.0,
            logits,
            compulsory_bytes=head.compulsory_bytes,
        )
        ops = [
            OpCost(
                "embedding gather",
                GATHER,
                0.0,
                t * self.h * self.w,
                t * self.h * self.a,
                compulsory_bytes=t * self.h * self.w,
            ),
            self.norm_op("final_norm", t),
            head,
        ]
        if self.par.pp > 1:
            ops.append(
                OpCost(
                    "pp send/recv",
                    COMM,
                    link_bytes=(self.par.pp - 1) * t * self.h * self.a,
                    collectives=self.par.pp - 1,
                )
            )
        return ops
