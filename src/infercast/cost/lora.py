"""LoRA adapters served beside the base model: their FLOPs, bytes, memory and loading.

A LoRA adapter adds ``x @ A @ B`` to a targeted linear layer ``x @ W`` (``A``: [d_in, r],
``B``: [r, d_out]); multi-adapter servers keep one base model and run every request's own
adapter in the same batch with gathered GEMV kernels (Punica's SGMV, arXiv:2310.18547;
S-LoRA's MBGMV, arXiv:2311.03285; vLLM's punica-derived ``lora_shrink``/``lora_expand``).

- **FLOPs** per token and targeted layer: ``2 r (d_in + d_out)`` (shrink then expand), per GPU
  split as vLLM's tensor-parallel LoRA layers split them: column-parallel targets (q, k, v,
  gate, up) keep ``A`` whole and shard ``B`` (``d_in + d_out / tp``); row-parallel targets
  (o, down) shard ``A`` and keep ``B`` whole (``d_in / tp + d_out``).
- **Bytes** per step: the weights of every *distinct* adapter in the batch (each is read once
  per step, as the base weights are) plus the activations the two kernels move (the input,
  the rank-``r`` intermediate written and read, the output read and written back).
- **Mixing adapters** is where the batching penalty comes from: ``n`` sequences drawn from ``N``
  equally popular adapters hold ``D = N (1 - (1 - 1/N)^n)`` distinct ones in expectation, so the
  step reads ``D`` adapters' weights instead of one, and each adapter's GEMV runs on ``n / D``
  rows (the profile's small-row GEMM efficiency). Punica reports its SGMV batching many
  adapters at "only 2ms latency per token" added and S-LoRA "up to 4 times" the throughput of
  serving adapters one at a time (their abstracts); this model charges the same mechanism
  from bytes and rows rather than a fitted constant.
- **Memory**: ``slots`` adapters resident on the GPU (vLLM's ``--max-loras``) cost their
  weights beside the base model, out of the KV cache.
- **Loading**: with ``N`` adapters and ``S`` slots under uniform popularity, a request finds its
  adapter resident with probability ``S / N`` (the independent-reference hit ratio of LRU or
  random replacement with equal popularity); a miss loads one adapter over the host link
  (``cost/kv_tier.py``'s measured bandwidth) before the request's first step, blocking that
  step as vLLM's synchronous ``LRUCacheWorkerLoRAManager`` load does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from infercast.cost.ops import GEMM, OpCost
from infercast.cost.roofline import OpTime, time_op
from infercast.cost.step import StepCost, StepModel
from infercast.errors import ConfigError

TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
ALIASES = {"attn": ("q", "k", "v", "o"), "mlp": ("gate", "up", "down"), "all": TARGETS}
_ROW_PARALLEL = ("o", "down")  # A sharded over tp, B whole (vLLM RowParallelLinearWithLoRA)


def parse_targets(spec: str) -> tuple[str, ...]:
    """``"q,v"``, ``"attn"`` (q,k,v,o), ``"mlp"`` (gate,up,down) or ``"all"`` -> target names."""
    out: list[str] = []
    for part in (p.strip().lower() for p in spec.split(",")):
        names = ALIASES.get(part, (part,))
        for n in names:
            if n not in TARGETS:
                raise ConfigError(
                    f"LoRA target {part!r}: use names from {', '.join(TARGETS)} "
                    f"or {', '.join(ALIASES)}"
                )
            if n not in out:
                out.append(n)
    if not out:
        raise ConfigError("LoRA targets are empty: give e.g. q,v or attn or all")
    return tuple(out)


@dataclass(frozen=True)
class LoraSpec:
    """Adapters of ``rank`` on ``targets``; ``adapters`` equally popular ones in the workload,
    ``slots`` of them resident on the GPU (None: all, at most the batch cap), stored at
    ``weight_bytes`` per parameter (16-bit, as PEFT saves them)."""

    rank: int
    targets: tuple[str, ...] = ALIASES["attn"]
    adapters: int = 1
    slots: int | None = None
    weight_bytes: float = 2.0

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise ConfigError(f"LoRA rank {self.rank}: must be >= 1")
        if self.adapters < 1:
            raise ConfigError(f"LoRA adapters {self.adapters}: must be >= 1")
        if self.slots is not None and self.slots < 1:
            raise ConfigError(
                f"LoRA slots {self.slots}: must be >= 1 (adapters resident on the GPU)"
            )

    def resident(self, max_seqs: int) -> int:
        """Adapters held on the GPU: ``slots``, else every adapter a full batch could use."""
        return min(self.slots or min(self.adapters, max_seqs), self.adapters)

    def hit_ratio(self, max_seqs: int) -> float:
        """Chance a request's adapter is already resident (uniform popularity)."""
        return self.resident(max_seqs) / self.adapters

    def distinct(self, num_seqs: float) -> float:
        """Expected distinct adapters among ``num_seqs`` sequences (uniform popularity)."""
        n = self.adapters
        return n * (1.0 - (1.0 - 1.0 / n) ** num_seqs) if num_seqs > 0 else 0.0


def layer_shapes(model, targets: tuple[str, ...]) -> list[tuple[str, int, int]]:
    """(target, d_in, d_out) of each targeted linear of one layer (standard attention, dense
    MLP)."""
    a = model.attention
    if a.kind == "mla" and any(t in ("q", "k", "v", "o") for t in targets):
        raise ConfigError(f"{model.name}: LoRA on MLA attention is not modelled: target mlp only")
    if model.is_moe and any(t in ALIASES["mlp"] for t in targets):
        raise ConfigError(
            f"{model.name}: LoRA on routed experts is not modelled: target attn (q,k,v,o)"
        )
    h, ffn = model.hidden_size, max((x.ffn_size for x in model.layers), default=0)
    dims = {
        "q": (h, a.num_heads * a.head_dim),
        "k": (h, a.num_kv_heads * a.head_dim),
        "v": (h, a.num_kv_heads * a.v_head_dim),
        "o": (a.num_heads * a.v_head_dim, h),
        "gate": (h, ffn),
        "up": (h, ffn),
        "down": (ffn, h),
    }
    if not model.gated_mlp and "gate" in targets:
        raise ConfigError(f"{model.name} has no gate projection: drop gate from the LoRA targets")
    return [(t, *dims[t]) for t in targets]


def _per_gpu_params(shapes: list[tuple[str, int, int]], rank: int, tp: int) -> float:
    """One adapter's parameters per GPU per layer (see module docstring for the TP split)."""
    total = 0.0
    for name, d_in, d_out in shapes:
        total += rank * ((d_in / tp + d_out) if name in _ROW_PARALLEL else (d_in + d_out / tp))
    return total


class LoraStepModel(StepModel):
    """:class:`StepModel` of a base model serving LoRA adapters (``lora``), same interface."""

    def __init__(self, *args, lora: LoraSpec, host_bandwidth_bytes_per_s: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.lora = lora
        self._shapes = layer_shapes(self.model, lora.targets)
        tp, layers = self.parallel.tp, self.model.num_layers
        self._params = _per_gpu_params(self._shapes, lora.rank, tp) * layers  # one adapter, per GPU
        self.adapter_bytes = self._params * lora.weight_bytes
        max_seqs = kwargs.get("max_seqs", 256)
        self.hit_ratio = lora.hit_ratio(max_seqs)
        self.load_s = (
            self.adapter_bytes / host_bandwidth_bytes_per_s
            if host_bandwidth_bytes_per_s > 0
            else 0.0
        )
        if self.hit_ratio < 1.0 and self.load_s <= 0.0:
            raise ConfigError(
                f"LoRA slots below the adapter count need the host link's bandwidth: "
                f"{self.hardware.key} has none in its spec (add pcie_bandwidth_bytes_per_s)"
            )
        act = 0.0  # activation elements moved per token (input, intermediate twice, output twice)
        for name, d_in, d_out in self._shapes:
            i, o = (d_in / tp, d_out) if name in _ROW_PARALLEL else (d_in, d_out / tp)
            act += i + 2 * lora.rank + 2 * o
        self._act_bytes_per_token = act * layers * self.precision.activation_bytes
        self.memory = replace(
            self.memory,
            weight_bytes=self.memory.weight_bytes + lora.resident(max_seqs) * self.adapter_bytes,
        )
        self._lora_cache: dict[tuple[int, int], OpTime] = {}

    def lora_op(self, tokens: int, seqs: int) -> OpTime:
        """The step's LoRA kernels (shrink + expand, every targeted layer) as one timed op."""
        key = (tokens, seqs)
        hit = self._lora_cache.get(key)
        if hit is None:
            d = self.lora.distinct(seqs)
            weights = d * self.adapter_bytes
            op = OpCost(
                "lora (sgmv shrink+expand)",
                GEMM,
                2.0 * self._params * tokens,
                weights + self._act_bytes_per_token * tokens / 2,
                self._act_bytes_per_token * tokens / 2,
                tokens / d if d else 0.0,
                compulsory_bytes=weights,
            )
            hit = time_op(op, self.machine, self.profile)
            if len(self._lora_cache) < 1 << 16:
                self._lora_cache[key] = hit
        return hit

    def _extra_s(self, tokens: int, seqs: int, starts: int) -> float:
        """LoRA kernels plus the expected adapter loads of ``starts`` requests beginning."""
        load = starts * (1.0 - self.hit_ratio) * self.load_s if starts else 0.0
        return (self.lora_op(tokens, seqs).time_s if tokens else 0.0) + load

    def step_cost(self, new_tokens, cached_tokens, num_logits=None) -> StepCost:
        base = super().step_cost(new_tokens, cached_tokens, num_logits)
        op = self.lora_op(base.num_tokens, base.num_seqs)
        return replace(
            base, ops=base.ops + (op,), _overlap_floor_s=self._overlap_floor(base.ops + (op,))
        )

    def step_time_s(self, new_tokens, cached_tokens) -> float:
        base = StepModel.step_time_s(self, new_tokens, cached_tokens)
        new = [int(n) for n in new_tokens]
        starts = sum(1 for n, c in zip(new, cached_tokens, strict=True) if n > 1 and c == 0)
        return base + self._extra_s(sum(new), len(new), starts)

    def mixed_step_time_s(
        self, num_decode, decode_cached_sum, new_tokens=(), cached_tokens=()
    ) -> float:
        if not self._all_full:  # the base class would call the overridden step_time_s
            share = decode_cached_sum / num_decode if num_decode else 0.0
            return self.step_time_s(
                [1] * num_decode + list(new_tokens), [share] * num_decode + list(cached_tokens)
            )
        base = StepModel.mixed_step_time_s(
            self, num_decode, decode_cached_sum, new_tokens, cached_tokens
        )
        starts = sum(1 for n, c in zip(new_tokens, cached_tokens, strict=True) if n > 1 and c == 0)
        return base + self._extra_s(
            num_decode + sum(new_tokens), num_decode + len(new_tokens), starts
        )

    def chunk_step_time_s(self, num_decode, decode_cached_sum, n, c) -> float:
        return self.mixed_step_time_s(num_decode, decode_cached_sum, [n], [c])
