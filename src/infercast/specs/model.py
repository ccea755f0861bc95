"""Model architecture spec (``ModelSpec``) and its parameter / KV-cache arithmetic.

A ``ModelSpec`` is built from a Hugging Face ``config.json`` by
:mod:`infercast.specs.hf_config`; this module only holds the normalized shape
and derives totals from it. Counting conventions (tested against published
figures in ``data/models/PUBLISHED_SIZES.csv``):

- Parameters are every trainable weight of the text model: embeddings, the LM head
  (unless tied), attention and MLP/expert matrices with their biases, norms,
  routers. Multi-token-prediction heads (DeepSeek-V3 ``num_nextn_predict_layers``)
  are excluded, as DeepSeek's own 671B figure does; so are vision towers.
- Active parameters are those one token touches: all but the routed experts a
  token does not use (total - (E - k) * expert size, per MoE layer).
- KV bytes per token: 2 (K and V) x kv heads x head dim per layer for MHA/GQA/MQA;
  for MLA the compressed latent (kv_lora_rank) plus the decoupled RoPE key
  (qk_rope_head_dim), once per layer, as vLLM and SGLang cache it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

ATTN_FULL = "full"
ATTN_SLIDING = "sliding"  # token attends to the last `window` positions
ATTN_CHUNKED = "chunked"  # token attends within its aligned chunk of `window` positions


@dataclass(frozen=True, slots=True)
class AttentionSpec:
    """Shape of one attention block (shared by all layers of a model).

    For MLA (``kind == "mla"``), ``head_dim`` is the query/key head dim
    (nope + rope) and the ``*_lora_rank`` / ``qk_*`` fields are set.
    """

    kind: str  # "mha" (covers GQA/MQA) or "mla"
    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3, Llama-4 Scout)
    qk_norm_full: bool = False  # the q/k norms span all heads (OLMo-2): q_dim + kv_dim scales
    sinks: bool = False  # learned per-head attention sink logits (gpt-oss)
    q_lora_rank: int = 0  # MLA: 0 means a plain q projection
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def qk_norm_params(self) -> int:
        """Scales of the q and k norms: per head (2 x head_dim) or over all heads (OLMo-2)."""
        if self.qk_norm_full:
            return self.q_dim + self.num_kv_heads * self.head_dim
        return 2 * self.head_dim if self.qk_norm else 0

    @property
    def kv_elements_per_token(self) -> int:
        """KV-cache elements one token stores per layer."""
        if self.kind == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim


@dataclass(frozen=True, slots=True)
class MoESpec:
    """Routed experts (plus optional always-on shared experts) of an MoE layer."""

    num_experts: int
    experts_per_token: int
    expert_ffn_size: int
    num_shared_experts: int = 0
    shared_ffn_size: int = 0  # FFN width of each shared expert
    router_bias: bool = False
    expert_bias: bool = False  # biases on expert matrices (gpt-oss)


@dataclass(frozen=True, slots=True)
class LayerSpec:
    """What varies between layers: attention span and dense vs MoE FFN."""

    attention: str = ATTN_FULL  # full | sliding | chunked
    window: int = 0  # tokens, for sliding / chunked
    moe: bool = False
    ffn_size: int = 0  # dense FFN width (when not moe)


@dataclass(frozen=True)
class ModelSpec:
    """Normalized architecture of a decoder-only transformer.

    Build it with :func:`infercast.specs.hf_reader.model_from_hf_config`.
    """

    name: str
    arch: str  # HF model_type
    hidden_size: int
    vocab_size: int
    attention: AttentionSpec
    layers: tuple[LayerSpec, ...]
    moe: MoESpec | None = None
    gated_mlp: bool = True  # SwiGLU-style: gate, up, down (3 matrices); else up, down
    mlp_bias: bool = False
    norm: str = "rms"  # rms (scale only) | layer (scale + bias)
    norms_per_layer: int = 2
    extra_norms: int = 0  # norms outside the layers besides the final one (BLOOM's embedding LN)
    tie_embeddings: bool = False
    lm_head_bias: bool = False
    parallel_block: bool = (
        False  # attention and MLP read the same input (GPT-J, Falcon): one TP all-reduce per layer
    )
    max_context: int = 0
    notes: tuple[str, ...] = field(default=())

    # ---- structure -------------------------------------------------------
    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @cached_property
    def layer_groups(self) -> tuple[tuple[LayerSpec, int], ...]:
        """Distinct layer kinds with their counts (cost is computed once per kind)."""
        return tuple(Counter(self.layers).items())

    @property
    def is_moe(self) -> bool:
        return self.moe is not None and any(layer.moe for layer in self.layers)

    @property
    def num_moe_layers(self) -> int:
        return sum(1 for layer in self.layers if layer.moe)

    # ---- parameter counts -------------------------------------------------
    def _norm_params(self, width: int) -> int:
        return width * (2 if self.norm == "layer" else 1)

    @cached_property
    def attention_params(self) -> int:
        """Parameters of one attention block (projections, biases, q/k norms, sinks)."""
        a, h = self.attention, self.hidden_size
        if a.kind == "mla":
            qk = a.qk_nope_head_dim + a.qk_rope_head_dim
            if a.q_lora_rank:
                q = h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * a.num_heads * qk
            else:
                q = h * a.num_heads * qk
            kv_a = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
            kv_b = a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim)
            return q + kv_a + kv_b + a.num_heads * a.v_head_dim * h
        kv_dim = a.num_kv_heads * a.head_dim
        params = h * a.q_dim + 2 * h * kv_dim + a.num_heads * a.v_head_dim * h
        if a.qkv_bias:
            params += a.q_dim + 2 * kv_dim
        if a.o_bias:
            params += h
        params += a.qk_norm_params
        if a.sinks:
            params += a.num_heads
        return params

    def dense_mlp_params(self, ffn_size: int) -> int:
        """Parameters of one dense MLP of width ``ffn_size``."""
        h = self.hidden_size
        mats = 3 if self.gated_mlp else 2
        params = mats * h * ffn_size
        if self.mlp_bias:
            params += (mats - 1) * ffn_size + h
        return params

    @cached_property
    def expert_params(self) -> int:
        """Parameters of one routed expert (gated MLP of the expert width)."""
        m = self._moe()
        h, f = self.hidden_size, m.expert_ffn_size
        return 3 * h * f + ((2 * f + h) if m.expert_bias else 0)

    @cached_property
    def moe_layer_params(self) -> int:
        """Parameters of one MoE FFN block: router, all routed experts, shared experts."""
        m = self._moe()
        h = self.hidden_size
        router = h * m.num_experts + (m.num_experts if m.router_bias else 0)
        shared = m.num_shared_experts * 3 * h * m.shared_ffn_size
        return router + m.num_experts * self.expert_params + shared

    def _moe(self) -> MoESpec:
        if self.moe is None:
            raise ValueError(f"{self.name} has no MoE layers")
        return self.moe

    def layer_params(self, layer: LayerSpec) -> int:
        """Parameters of one decoder layer."""
        ffn = self.moe_layer_params if layer.moe else self.dense_mlp_params(layer.ffn_size)
        norms = self.norms_per_layer * self._norm_params(self.hidden_size)
        return self.attention_params + ffn + norms

    @cached_property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @cached_property
    def lm_head_params(self) -> int:
        """Untied LM head matrix (0 when tied to the embedding) plus its bias."""
        head = 0 if self.tie_embeddings else self.vocab_size * self.hidden_size
        return head + (self.vocab_size if self.lm_head_bias else 0)

    @cached_property
    def total_params(self) -> int:
        """Every parameter of the text model (see module docstring for conventions)."""
        layers = sum(self.layer_params(layer) * n for layer, n in self.layer_groups)
        norms = (1 + self.extra_norms) * self._norm_params(self.hidden_size)
        return layers + self.embedding_params + self.lm_head_params + norms

    @cached_property
    def active_params(self) -> int:
        """Parameters one token touches: routed experts it does not use are excluded."""
        if not self.is_moe:
            return self.total_params
        m = self._moe()
        unused = (m.num_experts - m.experts_per_token) * self.expert_params
        return self.total_params - unused * self.num_moe_layers

    @cached_property
    def linear_params(self) -> int:
        """Parameters that live in matmul weights (all but embedding gather, norms, sinks)."""
        return self.total_params - self.embedding_params - self.small_params

    @cached_property
    def small_params(self) -> int:
        """Norm scales/biases, q/k norms and attention sinks: read once per step, tiny."""
        a = self.attention
        per_layer = self.norms_per_layer * self._norm_params(self.hidden_size)
        per_layer += a.qk_norm_params
        if a.sinks:
            per_layer += a.num_heads
        if a.kind == "mla":
            per_layer += a.kv_lora_rank + (a.q_lora_rank or 0)
        final = (1 + self.extra_norms) * self._norm_params(self.hidden_size)
        return per_layer * self.num_layers + final

    # ---- KV cache ---------------------------------------------------------
    def kv_bytes_per_token(self, kv_dtype_bytes: float) -> float:
        """KV-cache bytes one token adds across all layers (no window truncation)."""
        return self.num_layers * self.attention.kv_elements_per_token * kv_dtype_bytes

    def kv_tokens_held(self, layer: LayerSpec, context: int) -> int:
        """Tokens of KV a layer must keep for a sequence of ``context`` tokens."""
        if layer.attention == ATTN_SLIDING:
            return min(context, layer.window)
        if layer.attention == ATTN_CHUNKED:
            return min(context, layer.window)  # the current chunk (at most a full chunk)
        return context

    def kv_bytes_for_context(self, context: int, kv_dtype_bytes: float) -> float:
        """KV bytes one sequence of ``context`` tokens holds, window-aware."""
        per_layer = self.attention.kv_elements_per_token * kv_dtype_bytes
        held = sum(self.kv_tokens_held(layer, context) * n for layer, n in self.layer_groups)
        return held * per_layer

    @property
    def min_window(self) -> float:
        """Smallest sliding/chunk window of any layer (inf when all layers are full)."""
        windows = [layer.window for layer in self.layers if layer.attention != ATTN_FULL]
        return float(min(windows)) if windows else float("inf")
