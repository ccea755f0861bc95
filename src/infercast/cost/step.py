"""``StepModel``: the time of one forward step of one replica, floor and expected.

Build it once per (model, hardware, precision, parallel, profile); then
``step_time_s`` / ``step_cost`` are cheap: ops that depend only on the number of
new tokens are memoized per token count, attention ops are rebuilt from a few
sums. ``decode_affine`` exposes the exact affine form of a pure decode step for
the simulator's closed-form fast path; ``decode_affine_past_window`` the one of a
sliding-window model's decode step once every context covers the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from infercast.cost.efficiency import EfficiencyProfile
from infercast.cost.expert_routing import ExpertRouting, replica_bytes
from infercast.cost.experts import ExpertPrecision
from infercast.cost.memory import DEFAULT_MEMORY_FRACTION, MemoryPlan, plan_memory
from infercast.cost.ops import ATTENTION, COMM, GEMM, OpCost, Shards, SpanStats, span_stats
from infercast.cost.roofline import (
    COMPUTE,
    LINK,
    MEMORY,
    Machine,
    OpTime,
    comm_expected_s,
    efficiencies,
    expected_source,
    time_op,
)
from infercast.errors import ConfigError
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ATTN_FULL, ATTN_SLIDING, ModelSpec
from infercast.specs.parallel import Parallelism, check_attention_split
from infercast.specs.precision import Precision

Tokens = Sequence[float] | np.ndarray  # per-sequence token counts: a list or a float array


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

    def time_by_kind(self) -> dict[str, float]:
        """Expected time per op kind (gemm: weights, attention: KV cache, comm, elementwise...)."""
        out: dict[str, float] = {}
        for o in self.ops:
            out[o.op.kind] = out.get(o.op.kind, 0.0) + o.time_s
        return out

    @property
    def bound(self) -> str:
        """The resource that binds most of the step's expected time."""
        by = self.time_by_bound()
        return max(by, key=by.__getitem__)


def tp_link(hw: HardwareSpec, gpus_per_replica: int) -> HardwareSpec:
    """``hw`` with the link a multi-GPU replica's TP/PP traffic crosses: PCIe when the part has
    no scale-up link (NVLink/xGMI) but a PCIe bandwidth, as vLLM/TRT-LLM run TP on L40S, L4 and
    RTX boxes (NCCL over PCIe); else ``hw`` itself."""
    if gpus_per_replica > 1 and hw.link_bandwidth_bytes_per_s <= 0 < hw.pcie_bandwidth_bytes_per_s:
        return replace(hw, link_bandwidth_bytes_per_s=hw.pcie_bandwidth_bytes_per_s)
    return hw


def _tp_link(hw: HardwareSpec, gpus_per_replica: int) -> tuple[HardwareSpec, tuple[str, ...]]:
    """:func:`tp_link`, with a note when the link is PCIe; an error when a multi-GPU replica
    has neither link."""
    if gpus_per_replica <= 1 or hw.link_bandwidth_bytes_per_s > 0:
        return hw, ()
    if hw.pcie_bandwidth_bytes_per_s <= 0:
        raise ConfigError(
            f"hardware {hw.key!r} has no scale-up link and no PCIe bandwidth: use `tp` 1 `pp` 1 "
            "or add link_bandwidth_bytes_per_s (or pcie_bandwidth_bytes_per_s) to its spec"
        )
    pcie = hw.pcie_bandwidth_bytes_per_s
    note = (
        f"{hw.key} has no NVLink-class link: TP/PP traffic crosses PCIe at {pcie / 1e9:,.0f} GB/s "
        "per GPU"
    )
    return tp_link(hw, gpus_per_replica), (note,)


def _expert_peak(
    hw: HardwareSpec, experts: ExpertPrecision | None, notes: list[str]
) -> tuple[float, str]:
    """Peak and dtype of the routed experts' GEMMs (0, "" when they share the step's precision)."""
    if experts is None:
        return 0.0, ""
    dtype = next((d for d in (experts.compute, "bf16", "fp16", "fp32") if hw.peak_flops(d)), None)
    if dtype is None:
        raise ConfigError(
            f"hardware {hw.key!r} has no dense FLOP/s figure in its spec: add flops_per_s for "
            f"{experts.compute}"
        )
    if dtype != experts.compute:
        notes.append(
            f"{hw.key} has no {experts.compute} peak: expert matmuls computed at the {dtype} peak"
        )
    return float(hw.peak_flops(dtype) or 0.0), dtype


def _machine(
    hw: HardwareSpec, prec: Precision, experts: ExpertPrecision | None = None
) -> tuple[Machine, Precision, tuple[str, ...]]:
    """Resolve peaks; a compute dtype the part lacks falls back to 16-bit, with a note."""
    notes: list[str] = []
    if hw.memory_bandwidth_bytes_per_s <= 0:
        raise ConfigError(
            f"hardware {hw.key!r} has no memory bandwidth in its spec: pick a specific variant or "
            "add one"
        )
    compute = prec.compute
    if hw.peak_flops(compute) is None:
        fallback = next((d for d in ("bf16", "fp16", "fp32") if hw.peak_flops(d)), None)
        if fallback is None:
            raise ConfigError(
                f"hardware {hw.key!r} has no dense FLOP/s figure in its spec: add flops_per_s for "
                f"{compute}"
            )
        notes.append(
            f"{hw.key} has no {compute} peak: matmuls computed at the {fallback} peak (weight-only "
            f"{prec.weights})"
        )
        compute = fallback
        prec = replace(prec, compute=compute)
    sixteen = hw.peak_flops("bf16") or hw.peak_flops("fp16") or hw.peak_flops("fp32")
    # FP8 attention with an FP8 KV cache under FP8 or FP4 matmuls: TensorRT-LLM runs FP8 context
    # FMHA when the attention output feeds an FP8 or NVFP4 GEMM or the KV cache is FP8
    # (tensorrt_llm/_torch/attention_backend/trtllm.py: ``fp8_context_fmha = is_fp8_out or
    # is_fp4_out or (has_fp8_kv_cache() and use_paged_context_fmha)``)
    narrow = compute in ("fp8", "fp4")
    attn_peak = (
        hw.peak_flops("fp8")
        if (prec.kv_cache == "fp8" and narrow and hw.peak_flops("fp8"))
        else sixteen
    )
    if compute == "fp32" or prec.kv_cache == "fp32":
        # fp32 matmuls, or an fp32 KV cache (infercast's CPU engine, whose q4/int8 matmuls
        # compute in int8 where prefill runs the integer kernels: engine/predict.py): the
        # attention reads fp32 K/V and computes in fp32 (engine/attention.py), at fp32's peak.
        # At a 16-bit peak a CPU without a bf16 unit (Zen 2: PyTorch's bf16 matmul 1.4 GFLOP/s,
        # fp32 99) priced SmolLM2's 128-token prefill attention at 394 ms against 27 measured.
        attn_peak = hw.peak_flops("fp32")
    if not attn_peak:
        notes.append(
            f"{hw.key} has no 16-bit peak in its spec: attention timed at the {compute} peak"
        )
        attn_peak = hw.peak_flops(compute)
    expert_peak, expert_dtype = _expert_peak(hw, experts, notes)
    m = Machine(
        hw.peak_flops(compute) or 0.0,
        attn_peak or 0.0,
        hw.memory_bandwidth_bytes_per_s,
        hw.link_bandwidth_bytes_per_s,
        compute,
        expert_peak,
        expert_dtype,
    )
    return m, prec, tuple(notes)


def _fold_layer_overhead(profile: EfficiencyProfile, layers: int) -> EfficiencyProfile:
    """The profile with its per-layer overhead charged into the per-step one (a step runs every
    layer once, pipeline stages included), so every step time adds one fixed overhead."""
    if not profile.layer_overhead_s:
        return profile
    return profile.with_updates(
        step_overhead_s=profile.step_overhead_s + profile.layer_overhead_s * layers,
        layer_overhead_s=0.0,
    )


class StepModel:
    """Forward-step cost of one replica: ``model`` on ``hardware`` at ``precision`` and
    ``parallel``."""

    def __init__(
        self,
        model: ModelSpec,
        hardware: HardwareSpec,
        precision: Precision | None = None,
        parallel: Parallelism | None = None,
        profile: EfficiencyProfile | None = None,
        memory_fraction: float = DEFAULT_MEMORY_FRACTION,
        max_batched_tokens: int = 8192,
        max_seqs: int = 256,
        experts: ExpertPrecision | None = None,
        whole_heads: bool = True,
        routing: ExpertRouting | None = None,
    ):
        """``experts``: the routed experts' own storage and compute (``cost/experts.py``) when a
        checkpoint quantizes only them (gpt-oss: MXFP4 experts beside BF16 attention); None =
        ``precision``. ``whole_heads``: refuse a TP size that splits attention heads unevenly, as
        engines do (``specs.parallel.check_attention_split``); False keeps the ideal even split
        (physics floors). ``routing``: skewed expert routing and EPLB replicas
        (``cost/expert_routing.py``); None = uniform."""
        self.parallel = parallel or Parallelism()
        hardware, link_notes = _tp_link(hardware, self.parallel.gpus_per_replica)
        self.model, self.hardware = model, hardware
        self.profile = _fold_layer_overhead(profile or EfficiencyProfile(), model.num_layers)
        if whole_heads:
            check_attention_split(model, self.parallel)
        self.experts = experts if model.is_moe else None
        self.machine, self.precision, self.notes = _machine(
            hardware, precision or Precision(), self.experts
        )
        self.notes += link_notes
        expert_bytes = self.experts.weight_bytes if self.experts else None
        self.routing = routing if model.is_moe else None
        self.shards = Shards(model, self.precision, self.parallel, expert_bytes, self.routing)
        self.memory: MemoryPlan = plan_memory(
            model,
            hardware,
            self.precision,
            self.parallel,
            memory_fraction,
            max_batched_tokens,
            max_seqs,
            expert_bytes,
        )
        if self.routing is not None and self.routing.redundant:
            self.memory = replace(
                self.memory,
                weight_bytes=self.memory.weight_bytes
                + replica_bytes(self.routing, model, self.shards, self.parallel),
            )
        self._token_cache: dict[tuple[int, int], tuple[tuple[OpTime, ...], float]] = {}
        self._affine_cache: dict[int, tuple[float, float]] = {}
        self._past_cache: dict[int, tuple[float, float]] = {}
        self._spans = tuple({(layer.attention, layer.window): 0 for layer in model.layers})
        self._span_counts = {
            s: sum(1 for x in model.layers if (x.attention, x.window) == s) for s in self._spans
        }
        self._all_full = all(kind == ATTN_FULL for kind, _ in self._spans)
        self._lin_tokens, self._lin_logits = (
            _compile(self._per_token_ops, 1),
            _compile(self._per_logit_ops, 1),
        )
        self._tok_linear = _linear_fn(self._lin_tokens.ops, self.machine, self.profile)
        self._logit_linear = _linear_fn(self._lin_logits.ops, self.machine, self.profile)
        self._attn_lin = self._compile_attention() if self._all_full else ()
        self._attention = _attention_fn(
            self._attention_terms()
        )  # x0..x6 (the seven sums) -> seconds
        self._tok_time_cache: dict[int, float] = {}
        self._logit_time_cache: dict[int, float] = {}
        self._moe_time_cache: dict[int, tuple[float, ...]] = {}
        self._moe = bool(self._lin_tokens.nonaffine_names)

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

    @property
    def affine_past_window_context(self) -> float:
        """Contexts from which ``decode_affine_past_window`` is exact: one below the widest
        sliding window, where every sliding layer reads its whole window (``ops.span_pairs``:
        ``min(c, W - 1)`` keys); inf when all layers are full or any is chunked-local (its keys
        cycle with the chunk, never settling)."""
        windowed = [(k, w) for k, w in self._spans if k != ATTN_FULL]
        if not windowed or any(k != ATTN_SLIDING for k, _ in windowed):
            return float("inf")
        return float(max(w for _, w in windowed)) - 1

    def step_cost(
        self, new_tokens: Tokens, cached_tokens: Tokens, num_logits: int | None = None
    ) -> StepCost:
        """Itemised cost of one step (see module docstring for the batch description)."""
        new, cached = self._arrays(new_tokens, cached_tokens)
        t = int(new.sum())
        logits = len(new) if num_logits is None else num_logits
        token_ops, _ = self._token_ops(t, logits)
        ops = token_ops + self._attention_times(new, cached, t)
        overhead = self.profile.step_overhead_s + self._widen_s(t) + self._sampling_s(logits)
        return StepCost(ops, overhead, t, len(new), self.notes, self._overlap_floor(ops))

    def step_time_s(self, new_tokens: Tokens, cached_tokens: Tokens) -> float:
        """Expected time of one step, seconds (overhead included)."""
        new, cached = self._arrays(new_tokens, cached_tokens)
        t = int(new.sum())
        attn = sum(o.time_s for o in self._attention_times(new, cached, t))
        return self._token_time(t, len(new)) + attn + self.profile.step_overhead_s

    def mixed_step_time_s(
        self,
        num_decode: int,
        decode_cached_sum: float,
        new_tokens: Sequence[int] = (),
        cached_tokens: Sequence[int] = (),
    ) -> float:
        """``step_time_s`` of ``num_decode`` one-token decodes whose cached contexts sum to
        ``decode_cached_sum``, plus the listed sequences; plain-float arithmetic, no arrays.

        Exact for full-attention models (decode contexts enter only through their sum);
        windowed models are costed with the decode contexts split evenly.
        """
        if not self._all_full:
            share = decode_cached_sum / num_decode if num_decode else 0.0
            return self.step_time_s(
                [1] * num_decode + list(new_tokens), [share] * num_decode + list(cached_tokens)
            )
        k = len(new_tokens)
        if k != len(cached_tokens):
            raise ValueError("new_tokens and cached_tokens must have the same length")
        pc_dec = kv_dec = float(decode_cached_sum)
        if k == 1 and new_tokens[0] != 1:  # one prefill chunk beside the decodes (the usual step)
            n, c = new_tokens[0], cached_tokens[0]  # the loop below, unrolled: same additions
            t = num_decode + n
            x = (
                pc_dec,
                0.0 + n * c,
                float(num_decode),
                0.0 + n * (n + 1) / 2,
                kv_dec,
                0.0 + c,
                float(t),
            )
        else:
            pc_pre = pn_pre = kv_pre = 0.0
            pn_dec = float(num_decode)
            t = num_decode
            for n, c in zip(new_tokens, cached_tokens, strict=False):  # lengths checked above
                t += n
                if n == 1:
                    pc_dec += c
                    pn_dec += 1.0
                    kv_dec += c
                else:
                    pc_pre += n * c
                    pn_pre += n * (n + 1) / 2
                    kv_pre += c
            x = (pc_dec, pc_pre, pn_dec, pn_pre, kv_dec, kv_pre, float(t))
        attn = self._attention(*x)  # attention ops are linear in the sums
        tok, head = self._tok_time_cache.get(t), self._logit_time_cache.get(num_decode + k)
        if (
            tok is None or head is None or self._moe
        ):  # a miss (or MoE ops): the method fills the memos
            return self._token_time(t, num_decode + k) + attn + self.profile.step_overhead_s
        return tok + head + attn + self.profile.step_overhead_s  # ``_token_time``'s hit, inlined

    def chunk_step_time_s(self, num_decode: int, decode_cached_sum: float, n: int, c: int) -> float:
        """``mixed_step_time_s(num_decode, decode_cached_sum, [n], [c])``: the decodes and one
        prefill chunk of ``n`` new tokens on ``c`` cached (the simulator's usual step), the same
        floats, no lists."""
        if n == 1 or not self._all_full or self._moe:  # those take other branches there
            return self.mixed_step_time_s(num_decode, decode_cached_sum, [n], [c])
        t = num_decode + n
        pc = float(decode_cached_sum)  # ``mixed_step_time_s``'s unrolled one-chunk sums
        attn = self._attention(
            pc, 0.0 + n * c, float(num_decode), 0.0 + n * (n + 1) / 2, pc, 0.0 + c, float(t)
        )
        tok, head = self._tok_time_cache.get(t), self._logit_time_cache.get(num_decode + 1)
        if tok is None or head is None:
            return self._token_time(t, num_decode + 1) + attn + self.profile.step_overhead_s
        return tok + head + attn + self.profile.step_overhead_s

    def _compile_attention(self) -> tuple[tuple[tuple[float, ...], tuple[float, ...]], ...]:
        """Coefficients of each attention op's FLOPs and bytes in the seven step sums."""
        count = self.model.num_layers
        basis = [SpanStats(*[1.0 if j == i else 0.0 for j in range(6)]) for i in range(6)]
        zero = self.shards.attention_ops(SpanStats(), 0.0)
        per_t = self.shards.attention_ops(SpanStats(), 1.0)
        cols = [self.shards.attention_ops(b, 0.0) for b in basis]
        out = []
        for k in range(len(zero)):
            fc = tuple(count * (c[k].flops - zero[k].flops) for c in cols) + (
                count * (per_t[k].flops - zero[k].flops),
            )
            bc = tuple(count * (c[k].bytes - zero[k].bytes) for c in cols) + (
                count * (per_t[k].bytes - zero[k].bytes),
            )
            out.append((fc, bc))
        return tuple(out)

    def _attention_terms(
        self,
    ) -> tuple[
        tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...], float, float], ...
    ]:
        """``_attn_lin`` without its zero coefficients, with each op's roofline denominators.

        Same values as summing all seven products in order: the dropped terms are
        ``0.0 * x`` with finite ``x >= 0``, and adding 0.0 changes no partial sum.
        """
        eff, m = self.profile, self.machine
        c_eff, b_eff = efficiencies(ATTENTION, eff)  # expected_s's, as _attention_fn divides
        f_den, b_den = m.attn_peak_flops * c_eff, m.bandwidth * b_eff
        return tuple(
            (
                tuple((i, c) for i, c in enumerate(fc) if c),
                tuple((i, c) for i, c in enumerate(bc) if c),
                f_den,
                b_den,
            )
            for fc, bc in self._attn_lin
        )

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

    def decode_affine_past_window(self, num_seqs: int) -> tuple[float, float]:
        """(a_s, b_s): a decode step of ``num_seqs`` sequences whose cached contexts sum to S
        takes a_s + b_s * S while every context >= ``affine_past_window_context``: the sliding
        layers then cost a constant (their whole window), the full layers stay affine in S. Two
        evaluations of ``step_time_s``, as ``decode_affine``: at every context P (the window
        edge) and at P + 1024."""
        p = self.affine_past_window_context
        if not np.isfinite(p):
            raise ValueError("no past-window affine form: the model has no sliding-window layers")
        if num_seqs not in self._past_cache:
            ones, big = np.ones(num_seqs), 1024.0
            at_p = self.step_time_s(ones, np.full(num_seqs, p))
            at_big = self.step_time_s(ones, np.full(num_seqs, p + big))
            b = (at_big - at_p) / (big * num_seqs)
            self._past_cache[num_seqs] = (at_p - b * p * num_seqs, b)
        return self._past_cache[num_seqs]

    def prefill_cost(self, prompt_tokens: int, batch: int = 1) -> StepCost:
        """Prefill of ``batch`` prompts of ``prompt_tokens`` each, in one step."""
        return self.step_cost([prompt_tokens] * batch, [0] * batch)

    def decode_cost(self, batch: int, context: int) -> StepCost:
        """One decode step of ``batch`` sequences each at ``context`` tokens (incl. the new one)."""
        return self.step_cost([1] * batch, [max(context - 1, 0)] * batch)

    # ---- internals ----------------------------------------------------------------
    def resource_floors(self, ops: Sequence[OpTime]) -> tuple[float, float, float]:
        """(compute_s, memory_s, link_s) of ``ops`` at peak: FLOPs / peak (attention at its own
        peak, routed experts at theirs), compulsory bytes / bandwidth, and the links' floors."""
        m = self.machine
        compute = sum(
            o.op.flops
            / (m.attn_peak_flops if o.op.kind == "attention" else m.gemm_peak_dtype(o.op)[0])
            for o in ops
            if o.op.kind != "comm"
        )
        memory = sum(o.op.compulsory_bytes for o in ops) / m.bandwidth
        link = sum(o.floor_s for o in ops if o.op.kind == "comm")
        return compute, memory, link

    def _overlap_floor(self, ops: tuple[OpTime, ...]) -> float:
        compute, memory, link = self.resource_floors(ops)
        return max(compute, memory) + link

    @staticmethod
    def _arrays(new_tokens: Tokens, cached_tokens: Tokens) -> tuple[np.ndarray, np.ndarray]:
        new = np.asarray(new_tokens, dtype=np.float64)
        cached = np.asarray(cached_tokens, dtype=np.float64)
        if new.shape != cached.shape:
            raise ValueError("new_tokens and cached_tokens must have the same length")
        return new, cached

    def _per_token_ops(self, t: float) -> list[OpCost]:
        """Every op whose size depends on the new-token count (all but the LM head)."""
        ops: list[OpCost] = []
        for layer, count in self.model.layer_groups:
            ops += [op.scaled(count) for op in self.shards.layer_token_ops(layer, t)]
        return ops + [op for op in self.shards.head_ops(t, 1) if op.name != "lm_head"]

    def _moe_expert_ops(self, t: float) -> list[OpCost]:
        """The routed-expert GEMMs (not affine in t: distinct experts touched), all MoE layers."""
        n = self.model.num_moe_layers
        return [
            op.scaled(n) for op in self.shards.moe_ops(t) if op.name.startswith(_NONAFFINE_PREFIX)
        ]

    def _per_logit_ops(self, logits: float) -> list[OpCost]:
        return [op for op in self.shards.head_ops(1, logits) if op.name == "lm_head"]

    def _widen_s(self, t: int) -> float:
        """A CPU engine's once-a-step widening of its compact matrices, in a step of more than
        ``widen_min_tokens`` tokens (``EfficiencyProfile.widen_step_s``; 0 on GPUs), and its
        layer-by-layer cost in a step of more than one token (``multi_token_step_s``)."""
        p = self.profile
        widen = p.widen_step_s if p.widen_step_s and t > p.widen_min_tokens else 0.0
        # a step of several tokens runs layer by layer (``multi_token_step_s``)
        return widen + p.multi_token_step_s if p.multi_token_step_s and t > 1 else widen

    def _sampling_s(self, logits: int) -> float:
        """The serving loop's work per sampled row: sampling, detokenizing, streaming
        (``EfficiencyProfile.token_overhead_s``; 0 unless ``infercast machine`` measured it)."""
        return self.profile.token_overhead_s * logits

    def _token_time(self, t: int, logits: int) -> float:
        """Expected time of the token-count ops: the token and logit parts memoized apart
        (each has few distinct keys; their pair has many), misses use the compiled affine ops."""
        tok = self._tok_time_cache.get(t)
        if tok is None:
            tok = self._tok_linear(t) + self._widen_s(t)
            if len(self._tok_time_cache) >= 1 << 16:
                self._tok_time_cache.clear()
            self._tok_time_cache[t] = tok
        head = self._logit_time_cache.get(logits)
        if head is None:
            head = self._logit_linear(logits) + self._sampling_s(logits)
            if len(self._logit_time_cache) >= 1 << 16:
                self._logit_time_cache.clear()
            self._logit_time_cache[logits] = head
        hit = tok + head
        if self._lin_tokens.nonaffine_names:
            moe = self._moe_time_cache.get(t)
            if moe is None:
                m, eff = self.machine, self.profile
                moe = tuple(time_op(op, m, eff).time_s for op in self._moe_expert_ops(t))
                if len(self._moe_time_cache) >= 1 << 16:
                    self._moe_time_cache.clear()
                self._moe_time_cache[t] = moe
            for x in moe:  # added one by one, as computed
                hit += x
        return hit

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


def _attention_fn(ops):
    """``(x0..x6) -> sum over ops of max(flops / f_den, bytes / b_den)``, the attention time of a
    step from its seven sums, generated as one function from ``_attention_terms`` (a step pays one
    call, not two closure calls per op). Each dot product is the left-to-right sum of
    ``coef * x[i]`` (``0.0 + y`` is ``y``); coefficients are written as ``repr`` literals, which
    read back exactly.
    """

    def dot(terms) -> str:
        if not terms:
            return "0.0"
        return " + ".join(f"({coef!r}) * x{i}" for i, coef in terms)

    lines = ["def attention(x0, x1, x2, x3, x4, x5, x6):", "    total = 0.0"]
    for f, b, f_den, b_den in ops:
        lines += [
            "    " + line for line in expected_source(dot(f), dot(b), repr(f_den), repr(b_den))
        ]
    lines.append("    return total")
    scope: dict = {"inf": float("inf"), "nan": float("nan")}  # what ``repr`` writes for those
    exec("\n".join(lines), scope)  # noqa: S102 -- source built above from floats only
    return scope["attention"]


_NONAFFINE_PREFIX = "moe.experts."  # bytes and GEMM rows follow the distinct experts touched


@dataclass(frozen=True, slots=True)
class _LinOp:
    """An op whose FLOPs, bytes and link bytes are affine in x (tokens or logits)."""

    kind: str
    f0: float
    f1: float
    b0: float
    b1: float
    l0: float
    l1: float
    c0: float
    c1: float
    m0: float  # GEMM rows at x = 0
    m1: float  # GEMM rows per unit of x (1 for token-count ops; 1/tp under attention DP)


@dataclass(frozen=True)
class _Compiled:
    ops: tuple[_LinOp, ...]
    nonaffine_names: frozenset[str]


def _linear_fn(ops: tuple[_LinOp, ...], m: Machine, eff: EfficiencyProfile):
    """``x -> sum over ops of roofline.op_expected_s(op at x)``, generated as one function with
    the machine's and profile's constants written in (as :func:`_attention_fn`): a memo miss
    pays one call, not three per op (``efficiencies``, ``expected_s``). Per op, in order:
    ``comm_expected_s`` of the link bytes and collectives at x; else
    ``max(flops / (peak * c_eff), bytes / (bandwidth * b_eff))`` as ``expected_s`` picks it,
    with ``efficiencies``' factors: constant products for every kind but a GEMM, whose compute
    efficiency ``EfficiencyProfile.gemm_eff`` follows its rows at x. Products of constants are
    computed here once, the same float each call would compute; literals are ``repr``, which
    reads back exactly.
    """
    lines = ["def linear(x):", "    total = 0.0"]
    for op in ops:
        if op.kind == COMM:
            link, coll = f"({op.l0!r}) + ({op.l1!r}) * x", f"({op.c0!r}) + ({op.c1!r}) * x"
            lines.append(f"    total += comm({link}, {coll}, m, eff)")
            continue
        c_eff, b_eff = efficiencies(op.kind, eff, m.compute_dtype, 1.0)
        if op.kind == GEMM:  # gemm_eff at max(rows, 1e-9), as ``efficiencies``
            rows = f"max(({op.m0!r}) + ({op.m1!r}) * x, 1e-9)"
            lines.append(f"    c = ({m.peak_flops!r}) * gemm_eff({m.compute_dtype!r}, {rows})")
        else:
            lines.append(f"    c = {m.peak_flops * c_eff!r}")
        flops, nbytes = f"({op.f0!r}) + ({op.f1!r}) * x", f"({op.b0!r}) + ({op.b1!r}) * x"
        lines += [
            "    " + line for line in expected_source(flops, nbytes, "c", repr(m.bandwidth * b_eff))
        ]
    lines.append("    return total")
    scope: dict = {
        "inf": float("inf"),
        "nan": float("nan"),
        "comm": comm_expected_s,
        "gemm_eff": eff.gemm_eff,
        "m": m,
        "eff": eff,
    }
    exec("\n".join(lines), scope)  # noqa: S102 -- source built above from floats and strs only
    return scope["linear"]


def _compile(build, _unit: int) -> _Compiled:
    """Affine form of the ops ``build(x)`` returns, from their values at x = 1 and x = 2."""
    one, two = build(1.0), build(2.0)
    lin, skip = [], set()
    for a, b in zip(one, two, strict=True):
        if a.name.startswith(_NONAFFINE_PREFIX):
            skip.add(a.name)
            continue
        f1, b1, l1, c1 = (
            b.flops - a.flops,
            b.bytes - a.bytes,
            b.link_bytes - a.link_bytes,
            b.collectives - a.collectives,
        )
        lin.append(
            _LinOp(
                a.kind,
                a.flops - f1,
                f1,
                a.bytes - b1,
                b1,
                a.link_bytes - l1,
                l1,
                a.collectives - c1,
                c1,
                2 * a.m_tokens - b.m_tokens,
                b.m_tokens - a.m_tokens,
            )
        )
    return _Compiled(tuple(lin), frozenset(skip))


def _merge(ops: list[OpCost]) -> list[OpCost]:
    """Sum ops of the same name (same op in different layer groups) into one ledger line."""
    merged: dict[str, OpCost] = {}
    for op in ops:
        prev = merged.get(op.name)
        if prev is None:
            merged[op.name] = op
        elif prev.m_tokens == op.m_tokens:
            merged[op.name] = OpCost(
                op.name,
                op.kind,
                prev.flops + op.flops,
                prev.bytes_read + op.bytes_read,
                prev.bytes_written + op.bytes_written,
                op.m_tokens,
                prev.count + op.count,
                prev.link_bytes + op.link_bytes,
                prev.collectives + op.collectives,
                prev.compulsory_bytes + op.compulsory_bytes,
                op.expert,
            )
        else:
            merged[f"{op.name}#{len(merged)}"] = op
    return list(merged.values())
