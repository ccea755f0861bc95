"""``StepModel``: the time of one forward step of one replica, floor and expected.

Build it once per (model, hardware, precision, parallel, profile); then
``step_time_s`` / ``step_cost`` are cheap: ops that depend only on the number of
new tokens are memoized per token count, attention ops are rebuilt from a few
sums. ``decode_affine`` exposes the exact affine form of a pure decode step for
the simulator's closed-form fast path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.memory import DEFAULT_MEMORY_FRACTION, MemoryPlan, plan_memory
from infercast.cost.ops import OpCost, Shards, SpanStats, span_stats
from infercast.cost.roofline import COMPUTE, LINK, MEMORY, Machine, OpTime, time_op
from infercast.errors import ConfigError
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ATTN_FULL, ModelSpec
from infercast.specs.parallel import Parallelism
from infercast.specs.precision import Precision


@dataclass(frozen=True)
class StepCost:
    """One step itemised by op, with totals.

    ``floor_time_s`` sums the per-op floors (kernels run one after another);
    ``overlap_floor_s`` = max(total FLOPs / peak, total bytes / bandwidth) is the
    looser bound that even perfect overlap of all ops cannot beat.
    """

    ops: tuple[OpTime, ...]
    overhead_s: float
    num_tokens: int
    num_seqs: int
    notes: tuple[str, ...] = field(default=())
    _overlap_floor_s: float = 0.0

    @property
    def floor_time_s(self) -> float:
        return sum(o.floor_s for o in self.ops)

    @property
    def time_s(self) -> float:
        return sum(o.time_s for o in self.ops) + self.overhead_s

    @property
    def flops(self) -> float:
        return sum(o.op.flops for o in self.ops)

    @property
    def bytes(self) -> float:
        return sum(o.op.bytes for o in self.ops)

    @property
    def compulsory_bytes(self) -> float:
        return sum(o.op.compulsory_bytes for o in self.ops)

    @property
    def overlap_floor_s(self) -> float:
        """max(FLOPs / peak, compulsory bytes / bandwidth) over the whole step, plus links."""
        return self._overlap_floor_s

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")

    def time_by_bound(self) -> dict[str, float]:
        out = {COMPUTE: 0.0, MEMORY: 0.0, LINK: 0.0}
        for o in self.ops:
            out[o.bound] += o.time_s
        return out

    @property
    def bound(self) -> str:
        """The resource that binds most of the step's expected time."""
        by = self.time_by_bound()
        return max(by, key=by.__getitem__)


def _machine(hw: HardwareSpec, prec: Precision) -> tuple[Machine, Precision, tuple[str, ...]]:
    """Resolve peaks; a compute dtype the part lacks falls back to 16-bit, with a note."""
    notes: list[str] = []
    if hw.memory_bandwidth_bytes_per_s <= 0:
        raise ConfigError(f"hardware {hw.key!r} has no memory bandwidth in its spec: pick a specific variant or add one")
    compute = prec.compute
    if hw.peak_flops(compute) is None:
        fallback = next((d for d in ("bf16", "fp16", "fp32") if hw.peak_flops(d)), None)
        if fallback is None:
            raise ConfigError(f"hardware {hw.key!r} has no dense FLOP/s figure in its spec: add flops_per_s for {compute}")
        notes.append(f"{hw.key} has no {compute} peak: matmuls computed at the {fallback} peak (weight-only {prec.weights})")
        compute = fallback
        prec = Precision(prec.weights, compute, prec.kv_cache)
    sixteen = hw.peak_flops("bf16") or hw.peak_flops("fp16") or hw.peak_flops("fp32")
    attn_peak = hw.peak_flops("fp8") if (prec.kv_cache == "fp8" and compute == "fp8" and hw.peak_flops("fp8")) else sixteen
    if compute == "fp32":
        attn_peak = hw.peak_flops("fp32")
    if not attn_peak:
        notes.append(f"{hw.key} has no 16-bit peak in its spec: attention timed at the {compute} peak")
        attn_peak = hw.peak_flops(compute)
    m = Machine(hw.peak_flops(compute) or 0.0, attn_peak or 0.0, hw.memory_bandwidth_bytes_per_s,
                hw.link_bandwidth_bytes_per_s, compute)
    return m, prec, tuple(notes)


class StepModel:
    """Forward-step cost of one replica: ``model`` on ``hardware`` at ``precision`` and ``parallel``."""

    def __init__(self, model: ModelSpec, hardware: HardwareSpec, precision: Precision | None = None,
                 parallel: Parallelism | None = None, profile: EfficiencyProfile | None = None,
                 memory_fraction: float = DEFAULT_MEMORY_FRACTION, max_batched_tokens: int = 8192,
                 max_seqs: int = 256):
        self.model, self.hardware = model, hardware
        self.parallel = parallel or Parallelism()
        self.profile = profile or EfficiencyProfile()
        if self.parallel.gpus_per_replica > 1 and hardware.link_bandwidth_bytes_per_s <= 0:
            raise ConfigError(f"hardware {hardware.key!r} has no scale-up link bandwidth: use --tp 1 --pp 1 or add link_bandwidth_bytes_per_s")
        self.machine, self.precision, self.notes = _machine(hardware, precision or Precision())
        self.shards = Shards(model, self.precision, self.parallel)
        self.memory: MemoryPlan = plan_memory(model, hardware, self.precision, self.parallel,
                                              memory_fraction, max_batched_tokens, max_seqs)
        self._token_cache: dict[tuple[int, int], tuple[tuple[OpTime, ...], float]] = {}
        self._affine_cache: dict[int, tuple[float, float]] = {}
        self._spans = tuple({(layer.attention, layer.window): 0 for layer in model.layers})
        self._span_counts = {s: sum(1 for x in model.layers if (x.attention, x.window) == s) for s in self._spans}

    # ---- public -------------------------------------------------------------------
    @property
    def kv_capacity_tokens(self) -> int:
        """KV tokens one replica holds after weights and activations."""
        return self.memory.kv_capacity_tokens

    @property
    def kv_bytes_per_token(self) -> float:
        """KV bytes per token per GPU."""
        return self.memory.kv_bytes_per_token

    @property
    def affine_context_limit(self) -> float:
        """Contexts up to which ``decode_affine`` is exact (window edge of windowed layers)."""
        return self.model.min_window - 1

    def step_cost(self, new_tokens: Sequence[int], cached_tokens: Sequence[int],
                  num_logits: int | None = None) -> StepCost:
        """Itemised cost of one step (see module docstring for the batch description)."""
        new, cached = self._arrays(new_tokens, cached_tokens)
        t = int(new.sum())
        logits = len(new) if num_logits is None else num_logits
        token_ops, _ = self._token_ops(t, logits)
        ops = token_ops + self._attention_times(new, cached, t)
        return StepCost(ops, self.profile.step_overhead_s, t, len(new), self.notes, self._overlap_floor(ops))

    def step_time_s(self, new_tokens: Sequence[int], cached_tokens: Sequence[int]) -> float:
        """Expected time of one step, seconds (overhead included)."""
        new, cached = self._arrays(new_tokens, cached_tokens)
        t = int(new.sum())
        _, token_time = self._token_ops(t, len(new))
        attn = sum(o.time_s for o in self._attention_times(new, cached, t))
        return token_time + attn + self.profile.step_overhead_s

    def decode_affine(self, num_seqs: int) -> tuple[float, float]:
        """(a_s, b_s): a decode step of ``num_seqs`` sequences with cached contexts summing
        to S takes a_s + b_s * S, exactly, while every context <= ``affine_context_limit``."""
        if num_seqs not in self._affine_cache:
            ones = np.ones(num_seqs)
            base = self.step_time_s(ones, np.zeros(num_seqs))
            big = 1024.0 if np.isfinite(self.affine_context_limit) else 1_000_000.0
            big = min(big, max(self.affine_context_limit, 1.0))
            at_big = self.step_time_s(ones, np.full(num_seqs, big))
            self._affine_cache[num_seqs] = (base, (at_big - base) / (big * num_seqs))
        return self._affine_cache[num_seqs]

    def prefill_cost(self, prompt_tokens: int, batch: int = 1) -> StepCost:
        """Prefill of ``batch`` prompts of ``prompt_tokens`` each, in one step."""
        return self.step_cost([prompt_tokens] * batch, [0] * batch)

    def decode_cost(self, batch: int, context: int) -> StepCost:
        """One decode step of ``batch`` sequences each at ``context`` tokens (incl. the new one)."""
        return self.step_cost([1] * batch, [max(context - 1, 0)] * batch)

    # ---- internals ----------------------------------------------------------------
    def _overlap_floor(self, ops: tuple[OpTime, ...]) -> float:
        m = self.machine
        compute = sum(o.op.flops / (m.attn_peak_flops if o.op.kind == "attention" else m.peak_flops)
                      for o in ops if o.op.kind != "comm")
        memory = sum(o.op.compulsory_bytes for o in ops) / m.bandwidth
        link = sum(o.floor_s for o in ops if o.op.kind == "comm")
        return max(compute, memory) + link

    @staticmethod
    def _arrays(new_tokens: Sequence[int], cached_tokens: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        new = np.asarray(new_tokens, dtype=np.float64)
        cached = np.asarray(cached_tokens, dtype=np.float64)
        if new.shape != cached.shape:
            raise ValueError("new_tokens and cached_tokens must have the same length")
        return new, cached

    def _token_ops(self, t: int, logits: int) -> tuple[tuple[OpTime, ...], float]:
        """Ops that depend only on the new-token and logit counts (memoized)."""
        key = (t, logits)
        hit = self._token_cache.get(key)
        if hit is None:
            ops: list[OpCost] = []
            for layer, count in self.model.layer_groups:
                ops += [op.scaled(count) for op in self.shards.layer_token_ops(layer, t)]
            ops += self.shards.head_ops(t, logits)
            timed = tuple(time_op(op, self.machine, self.profile) for op in _merge(ops))
            hit = (timed, sum(o.time_s for o in timed))
            if len(self._token_cache) < 65536:
                self._token_cache[key] = hit
        return hit

    def _attention_times(self, new: np.ndarray, cached: np.ndarray, t: int) -> tuple[OpTime, ...]:
        ops: list[OpCost] = []
        for kind, window in self._spans:
            stats = span_stats(kind, window, new, cached) if len(new) else SpanStats()
            count = self._span_counts[(kind, window)]
            label = "" if kind == ATTN_FULL else f" [{kind} {window}]"
            for op in self.shards.attention_ops(stats, t):
                ops.append(replace(op, name=op.name + label).scaled(count))
        return tuple(time_op(op, self.machine, self.profile) for op in ops)


def _merge(ops: list[OpCost]) -> list[OpCost]:
    """Sum ops of the same name (same op in different layer groups) into one ledger line."""
    merged: dict[str, OpCost] = {}
    for op in ops:
        prev = merged.get(op.name)
        if prev is None:
            merged[op.name] = op
        elif prev.m_tokens == op.m_tokens:
            merged[op.name] = OpCost(op.name, op.kind, prev.flops + op.flops, prev.bytes_read + op.bytes_read,
                                     prev.bytes_written + op.bytes_written, op.m_tokens, prev.count + op.count,
                                     prev.link_bytes + op.link_bytes, prev.collectives + op.collectives,
                                     prev.compulsory_bytes + op.compulsory_bytes)
        else:
            merged[f"{op.name}#{len(merged)}"] = op
    return list(merged.values())
