"""Memory plan of one GPU: weights, activation reserve, KV cache -> capacity and max batch.

available = device memory * memory_fraction (the rest is CUDA context, NCCL buffers,
allocator fragmentation). The activation reserve is what the largest step
(``max_num_batched_tokens`` tokens) needs live at once: the residual stream, the
widest projection output and the MLP intermediate, plus fp32 logits for
``max_num_seqs`` rows; engines profile this same peak before sizing the KV cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision
from infercast.units import fmt_bytes

DEFAULT_MEMORY_FRACTION = 0.95
DEFAULT_MAX_BATCHED_TOKENS = 8192
DEFAULT_MAX_SEQS = 256


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU memory budget of one replica."""

    device_bytes: float
    available_bytes: float
    weight_bytes: float
    activation_bytes: float
    kv_bytes_per_token: float  # per GPU, all layers, no window truncation
    model: ModelSpec
    kv_dtype_bytes: float
    kv_shard: float  # fraction of a token's KV that one GPU stores

    @property
    def kv_budget_bytes(self) -> float:
        """Bytes left for the KV cache (negative when the weights alone do not fit)."""
        return self.available_bytes - self.weight_bytes - self.activation_bytes

    @property
    def weights_fit(self) -> bool:
        return self.kv_budget_bytes > 0

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV one replica can hold (full-attention accounting, as paged engines
        allocate)."""
        if self.kv_budget_bytes <= 0 or self.kv_bytes_per_token <= 0:
            return 0
        return int(self.kv_budget_bytes // self.kv_bytes_per_token)

    def kv_bytes(self, batch: int, context: int) -> float:
        """KV bytes per GPU for ``batch`` sequences of ``context`` tokens (window-aware)."""
        return batch * self.model.kv_bytes_for_context(context, self.kv_dtype_bytes) * self.kv_shard

    def required_bytes(self, batch: int, context: int) -> float:
        """Weights + activation reserve + KV of ``batch`` sequences at ``context``."""
        return self.weight_bytes + self.activation_bytes + self.kv_bytes(batch, context)

    def fits(self, batch: int, context: int) -> bool:
        return self.required_bytes(batch, context) <= self.available_bytes

    def max_batch(self, context: int) -> int:
        """Largest batch of ``context``-token sequences that fits (0 if none)."""
        per_seq = self.kv_bytes(1, context)
        if self.kv_budget_bytes <= 0:
            return 0
        return int(self.kv_budget_bytes // per_seq) if per_seq > 0 else 0

    def max_context(self, batch: int = 1) -> int:
        """Longest context (tokens, full-attention accounting) ``batch`` sequences can reach."""
        if self.kv_budget_bytes <= 0:
            return 0
        return int(self.kv_budget_bytes // (self.kv_bytes_per_token * batch))

    def shortfall_message(self, batch: int, context: int) -> str:
        """'needs X, has Y' in GB and GiB, for a configuration that does not fit."""
        need, have = self.required_bytes(batch, context), self.available_bytes
        return f"needs {fmt_bytes(need)} per GPU, has {fmt_bytes(have)}"


def activation_reserve_bytes(
    model: ModelSpec,
    precision: Precision,
    parallel: Parallelism,
    max_batched_tokens: int,
    max_seqs: int,
) -> float:
    """Peak live activations of the largest step, per GPU (see module docstring)."""
    a, tp = model.attention, parallel.tp
    ffn = max([layer.ffn_size for layer in model.layers] + [0])
    if model.moe is not None:
        ffn = max(ffn, model.moe.expert_ffn_size * model.moe.experts_per_token)
    widest = max(a.num_heads * a.head_dim + 2 * a.num_kv_heads * a.head_dim, 2 * ffn) / tp
    per_token = (3 * model.hidden_size + widest + ffn / tp) * precision.activation_bytes
    logits = max_seqs * model.vocab_size / tp * 4.0
    return max_batched_tokens * per_token + logits


def plan_memory(
    model: ModelSpec,
    hardware: HardwareSpec,
    precision: Precision,
    parallel: Parallelism,
    memory_fraction: float = DEFAULT_MEMORY_FRACTION,
    max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS,
    max_seqs: int = DEFAULT_MAX_SEQS,
    expert_weight_bytes: float | None = None,
) -> MemoryPlan:
    """Per-GPU memory plan: weights split over tp*pp, KV heads split over tp (MLA latent
    replicated).

    ``expert_weight_bytes``: bytes per routed-expert weight when the experts have their own
    format (gpt-oss's MXFP4 beside BF16 attention, ``cost/experts.py``)."""
    gpus = parallel.tp * parallel.pp
    total = model.total_params * precision.weight_bytes
    if expert_weight_bytes is not None and model.moe is not None:
        routed = model.num_moe_layers * model.moe.num_experts * model.expert_params
        total += routed * (expert_weight_bytes - precision.weight_bytes)
    if precision.head_weights is not None:  # the LM head in its own format (tied: the table)
        total += (
            model.vocab_size
            * model.hidden_size
            * (precision.head_weight_bytes - precision.weight_bytes)
        )
    weights = total / gpus
    if parallel.attn_dp and parallel.tp > 1:
        # Attention replicated on every GPU of a stage; each GPU keeps the full KV of its own
        # 1/tp of the sequences, so a token costs its full KV on one GPU: 1/(tp pp) on average.
        attn = model.attention_params * model.num_layers * precision.weight_bytes / parallel.pp
        weights += attn * (1 - 1 / parallel.tp)
        shard = 1.0 / gpus
    elif model.attention.kind == "mla":
        shard = 1.0 / parallel.pp
    else:
        shard = (
            math.ceil(model.attention.num_kv_heads / parallel.tp)
            / model.attention.num_kv_heads
            / parallel.pp
        )
    kv_tok = model.kv_bytes_per_token(precision.kv_bytes) * shard
    act = activation_reserve_bytes(model, precision, parallel, max_batched_tokens, max_seqs)
    return MemoryPlan(
        device_bytes=hardware.memory_bytes,
        available_bytes=hardware.memory_bytes * memory_fraction,
        weight_bytes=weights,
        activation_bytes=act,
        kv_bytes_per_token=kv_tok,
        model=model,
        kv_dtype_bytes=precision.kv_bytes,
        kv_shard=shard,
    )


def fit_suggestions(
    plan: MemoryPlan, batch: int, context: int, parallel: Parallelism, precision: Precision
) -> list[str]:
    """What would make a configuration fit: more TP, FP8 KV, a smaller batch or context."""
    tips = []
    if not plan.weights_fit:
        tips.append(
            f"weights alone need {fmt_bytes(plan.weight_bytes)} per GPU: raise --tp (now "
            f"{parallel.tp}) or quantize --weights"
        )
        return tips
    mb = plan.max_batch(context)
    tips.append(f"batch <= {mb} at context {context}")
    mc = plan.max_context(batch)
    if mc > 0:
        tips.append(f"context <= {mc} at batch {batch}")
    if precision.kv_cache not in ("fp8", "int8", "int4", "fp4"):
        tips.append("--kv-cache fp8 halves the KV bytes")
    tips.append(f"--tp {parallel.tp * 2} splits weights and KV over twice the GPUs")
    return tips
