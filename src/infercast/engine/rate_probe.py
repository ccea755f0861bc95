"""The engine's own kernel rates on this machine, and an efficiency profile fitted to them.

``infercast machine`` measures the hardware (bandwidth, big-GEMM peak); this
module measures what the CPU engine achieves with it, on a model's shapes, so
that the cost model can predict the engine rather than an ideal kernel:

- **GEMM rate vs rows** (M = tokens in the step): the engine's own products
  (:func:`~infercast.engine.qlinear.matmul_fm` over each layer's four packed
  matrices, as the forward pass calls it, and the LM head as its logits do) in
  one weight format (``fp32``, or ``bf16``/``int8``/``q4``: PyTorch's kernels,
  a different curve), with the weights cold, as in a step: a pass walks a ring of
  layers at least as large as the model's stream (or the last-level cache).
  OpenBLAS runs 2-32-row products far below its big-GEMM peak (see
  :mod:`infercast.engine.linear`), which is the shape the profile's
  ``eff * M / (M + m_half)`` has to follow. The ops charge the format's bytes
  per weight (:attr:`~infercast.specs.precision.Precision.weight_bytes`), as the
  step model of ``serve --weights`` does.
- **Attention**: :func:`infercast.engine.model.attend` (KV write + paged
  attention of every layer) for decode batches and prefills.
- **Elementwise work of a prefill** (norms, RoPE, SiLU, residual adds): numpy's passes
  over the activations, ~6 % of a prefill step on one core (:func:`elementwise_points`).
- **Per-step and per-layer overhead**: forwards of models with one layer and
  with the model's depth, its heads but tiny widths, whose FLOPs and bytes are
  negligible, matrices in the same format: what the engine's Python, numpy and
  (compact formats) torch calls cost.

:func:`infercast.engine.profile_fit.fit_profile` then chooses the cost model's
factors (``gemm_compute_eff``, ``gemm_m_half``, ``mem_bw_eff``; ``attn_bw_eff``,
``attn_compute_eff``; ``step_overhead_s``, ``layer_overhead_s``) by least
squares on log(predicted / measured), where
"predicted" is the cost model's own op timing
(:func:`infercast.cost.roofline.op_expected_s`) on the same ops, so the fitted
profile means exactly what ``estimate`` and ``simulate`` do with it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from infercast.engine.config import EngineModelConfig

# Row counts of the GEMM points. OpenBLAS's float32 GEMM (every product above 48 tokens) runs
# token counts that are not a multiple of 8 slower: the four SmolLM2-135M layer products of
# 128 / 129 / 131 / 136 tokens 10.0 / 10.4 / 11.0 / 10.6 ms (one Zen 2 core, 2026-12-05), a
# prefill of 63 tokens 237 ms and of 64 207. A served step's count is whatever its requests
# add up to (a 128-token chunk beside three decodes: 131), so the large points come in pairs,
# one aligned and one not, and the fitted curve runs between them.
DEFAULT_ROWS = (1, 4, 8, 16, 32, 64, 67, 128, 131, 512)
HEAD_MAX_ROWS = 64  # the LM head runs one row per sampling request: decode batches only
PASS_FLOPS = 30e9  # a timed pass does at most this much work (~0.2 s), at least one layer
DECODE_BATCHES = (1, 8, 32)
PREFILL_TOKENS = (128, 512)
EVICT_BYTES = 256 * 2**20  # read before each attention run: more than this guest's share of L3


@dataclass(frozen=True)
class Point:
    """One timed unit of engine work and the cost model's ops for it."""

    kind: str  # "gemm" (the layers' products), "head", "attention", "elementwise", "overhead"
    label: str
    ops: tuple  # infercast.cost.ops.OpCost of the unit
    median_s: float  # wall time
    best_s: float  # wall time
    best_cpu_s: float  # CPU time (``_times``): excludes waits for a core on a shared machine
    runs: int
    layers: int = 0  # decoder layers of the timed step ("overhead") or pass ("gemm")

    @property
    def flops(self) -> float:
        return sum(o.flops for o in self.ops)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "flops": self.flops,
            "bytes": sum(o.bytes for o in self.ops),
            "median_s": self.median_s,
            "best_s": self.best_s,
            "best_cpu_s": self.best_cpu_s,
            "runs": self.runs,
        }


def _times(
    fn: Callable[[], Any], runs: int, before: Callable[[], Any] | None = None, threads: int = 1
) -> tuple[float, float, float]:
    """Median and best wall time and best CPU time of ``runs`` calls after a warm-up.

    ``before`` runs untimed before each call. CPU time: the process's with one thread, since
    numba's parallel kernels (the q4 widening pass) run on its worker thread even then (a
    3072 x 576 q4 product of 64 tokens: 1.9 ms of the calling thread's CPU, 3.2 of the
    process's and of the wall clock, 2026-12-04), which the calling thread's CPU time, used
    until then, left out of every q4 prefill point; with more threads the calling thread's.
    """
    cpu_clock = time.process_time if threads == 1 else time.thread_time
    fn()
    ts, cpu = [], []
    for _ in range(runs):
        if before is not None:
            before()
        t0, c0 = time.perf_counter(), cpu_clock()
        fn()
        ts.append(time.perf_counter() - t0)
        cpu.append(cpu_clock() - c0)
    return statistics.median(ts), min(ts), min(cpu)


def weight_bytes(weights: str) -> float:
    """Bytes per weight the cost model charges for a ``serve --weights`` format (scales too);
    a mixed one (``q4+int8``): its layers'."""
    from infercast.engine.predict import precision

    return precision(weights).weight_bytes


def head_weight_bytes(weights: str) -> float:
    """Bytes per LM-head weight the cost model charges for ``weights`` (``q4+int8``: int8's)."""
    from infercast.engine.predict import precision

    return precision(weights).head_weight_bytes


def _ring_config(
    cfg: EngineModelConfig, stream_bytes: int, w_bytes: float = 4.0
) -> EngineModelConfig:
    """``cfg`` with as many layers as the ring needs: the model's, or enough to pass the cache."""
    layer_bytes = w_bytes * (
        cfg.hidden_size * (cfg.q_size + 2 * cfg.kv_size)
        + cfg.q_size * cfg.hidden_size
        + 3 * cfg.hidden_size * cfg.intermediate_size
    )
    layers = min(cfg.num_layers, max(2, int(-(-stream_bytes // layer_bytes))))
    return replace(cfg, num_layers=layers)


def layer_ops(cfg: EngineModelConfig, m: int, w_bytes: float = 4.0) -> tuple:
    """The cost model's GEMM ops of one layer's four products at ``m`` rows, float32
    activations, ``w_bytes`` per weight."""
    from infercast.cost.ops import gemm

    h, q, f = cfg.hidden_size, cfg.q_size, cfg.intermediate_size
    return (
        gemm("qkv", m, h, q + 2 * cfg.kv_size, w_bytes, 4),
        gemm("o", m, q, h, w_bytes, 4),
        gemm("gate_up", m, h, 2 * f, w_bytes, 4),
        gemm("down", m, f, h, w_bytes, 4),
    )


def _in_format(w, weights: str):
    """Random ModelWeights with every matrix in ``weights`` (fp32: as they are); a mixed
    ``q4+int8`` keeps the layers in the first and the embedding and LM head in the last, as
    SmolLM2's Q4_1 GGUF stores them (``predict.layer_and_head``)."""
    from infercast.engine.predict import layer_and_head

    layers, head = layer_and_head(weights)
    if layers == head == "fp32":
        return w
    from infercast.engine.qlinear import to_format
    from infercast.engine.weights import MATRICES, LayerWeights, ModelWeights

    def conv(m, fmt: str):
        return m if fmt == "fp32" else to_format(m, fmt)

    def layer(lw):
        parts = {f.name: getattr(lw, f.name) for f in fields(LayerWeights)}
        return LayerWeights(
            **{k: conv(v, layers) if k in MATRICES else v for k, v in parts.items()}
        )

    embed = conv(w.embed, head)
    lm_head = embed if w.lm_head is w.embed else conv(w.lm_head, head)
    return ModelWeights(embed, [layer(lw) for lw in w.layers], w.final_norm, lm_head)


def gemm_points(
    cfg: EngineModelConfig,
    rows: Sequence[int] = DEFAULT_ROWS,
    runs: int = 5,
    stream_bytes: int = 2**30,
    weights: str = "fp32",
    threads: int = 1,
) -> list[Point]:
    """Time the engine's layer products at each row count, with the LM head up to HEAD_MAX_ROWS.

    A timed pass is a step's chain of products: it continues around the ring of
    layers where the previous one stopped, so the weights come from memory as a
    step's do, and covers as many layers as PASS_FLOPS allows (all of them at
    decode sizes), then the head (as a decode step, whose head reads
    ``vocab x hidden`` after the layers evicted it from the cache).
    """
    from infercast.cost.ops import gemm
    from infercast.engine.linear import linear
    from infercast.engine.qlinear import Scratch, matmul_fm
    from infercast.engine.weights import pack_weights, random_weights

    wb, hb = weight_bytes(weights), head_weight_bytes(weights)
    ring = _ring_config(cfg, stream_bytes, wb)
    w = _in_format(pack_weights(random_weights(ring, seed=0)), weights)
    scratch = Scratch(threads)
    rng = np.random.default_rng(1)
    h, q, f = cfg.hidden_size, cfg.q_size, cfg.intermediate_size
    points, at = [], [0]  # at: the next layer of the ring, across passes and row counts
    for m in rows:
        xh, xq, xf = (rng.standard_normal((n, m), dtype=np.float32) for n in (h, q, f))
        xr = np.ascontiguousarray(xh.T) if m <= HEAD_MAX_ROWS else None
        per_layer = sum(o.flops for o in layer_ops(cfg, m, wb))
        n = max(1, min(ring.num_layers, int(PASS_FLOPS // per_layer)))

        def one_pass(n=n, xh=xh, xq=xq, xf=xf, xr=xr, at=at) -> None:
            for _ in range(n):
                lw = w.layers[at[0] % ring.num_layers]
                at[0] += 1
                matmul_fm(lw.wqkv, xh, scratch), matmul_fm(lw.wo, xq, scratch)
                matmul_fm(lw.w_gate_up, xh, scratch), matmul_fm(lw.w_down, xf, scratch)
            if xr is not None and isinstance(w.lm_head, np.ndarray):  # as LlamaModel._logits
                linear(xr, w.lm_head)
            elif xr is not None:
                matmul_fm(w.lm_head, xh, scratch)

        med, best, cpu = _times(one_pass, runs, threads=threads)
        ops = tuple(o.scaled(n) for o in layer_ops(cfg, m, wb))
        label = f"{n} layers' products, M={m}"
        if xr is not None:
            ops += (gemm("lm_head", m, h, cfg.vocab_size, hb, 4),)
            label += " + LM head"
        points.append(Point("gemm", label, ops, med, best, cpu, runs, n))
    return points


def widen_layer_s(
    cfg: EngineModelConfig, weights: str = "fp32", runs: int = 5, threads: int = 1
) -> float:
    """CPU seconds one layer's four products spend widening their matrices to float32 in a
    step of more than ``qlinear.KERNEL_MAX_TOKENS`` tokens, matrices in ``weights``.

    Measured as the compact products' time minus the float32 products' on the same widening
    buffer (OpenBLAS: what the widened matrix then runs) at ``KERNEL_MAX_TOKENS + 1`` tokens,
    best of ``runs`` each, the caches evicted before each; 0 for fp32, which never widens, and
    for q4 and int8 where their prefill runs the integer kernels (``qlinear.integer_prefill``). A
    cost per step, not per token (SmolLM2 q4, 30 layers' products, 2026-12-04 20:17, load 7:
    296 ms CPU at 64 tokens against 67 at 32 and 133 for fp32 at 64), which the GEMM curve
    cannot carry (``EfficiencyProfile.widen_step_s``).
    """
    from infercast.engine.predict import layer_and_head
    from infercast.engine.qlinear import KERNEL_MAX_TOKENS, Scratch, integer_prefill, matmul_fm

    weights = layer_and_head(weights)[0]  # the layers' products widen; the head runs decode rows
    if weights == "fp32" or integer_prefill(weights):  # the integer kernels widen nothing
        return 0.0
    from infercast.engine.weights import pack_weights, random_weights

    one = replace(cfg, num_layers=1)
    lw = _in_format(pack_weights(random_weights(one, seed=0)), weights).layers[0]
    mats = (lw.wqkv, lw.wo, lw.w_gate_up, lw.w_down)
    rng = np.random.default_rng(1)
    m = KERNEL_MAX_TOKENS + 1
    xs = [rng.standard_normal((w.shape[1], m), dtype=np.float32) for w in mats]
    scratch = Scratch(threads)
    pairs = list(zip(mats, xs, strict=True))
    evict = np.ones(EVICT_BYTES // 4, dtype=np.float32)  # the weights come from DRAM, as in a step
    with threadpool_limits(threads):
        compact = _times(
            lambda: [matmul_fm(w, x, scratch) for w, x in pairs], runs, evict.sum, threads
        )
        dense = _times(
            lambda: [scratch.get(w.shape) @ x for w, x in pairs], runs, evict.sum, threads
        )
    return max(0.0, compact[2] - dense[2])


def attention_points(
    cfg: EngineModelConfig,
    step_model,
    context: int = 128,
    runs: int = 5,
    batches: Sequence[int] = DECODE_BATCHES,
    prefills: Sequence[int] = PREFILL_TOKENS,
    evict_bytes: int = EVICT_BYTES,
    threads: int = 1,
    weights: str = "fp32",
) -> list[Point]:
    """Time :func:`~infercast.engine.model.attend` over every layer of a full-depth store; for
    decode with compact ``weights`` (q4, int8, bf16, auto) and numba, the fused step's attention
    instead (:func:`infercast.engine.decode_step.decode_attention`), which those steps run.

    Decode: ``b`` requests with ``context`` cached tokens each; prefill: one
    prompt from scratch. Block tables are descending, as the KV manager hands
    them out. Before each timed run ``evict_bytes`` are read, as a step's
    weight stream does, so the K/V come from memory (from the cache they ran
    1.6x faster: random-100m, b=32). The ops are the step model's attention
    ops for the same batch (summed over layers, as the timed unit is).
    """
    from infercast.engine.kv_store import PagedKVStore
    from infercast.engine.model import SeqInput, StepPlan

    rng = np.random.default_rng(2)
    g, d, block = cfg.num_heads // cfg.num_kv_heads, cfg.head_dim, 16
    evict = np.ones(max(1, evict_bytes // 4), dtype=np.float32)
    cases = [([1] * b, [context] * b, f"decode b={b} ctx={context}") for b in batches]
    cases += [([n], [0], f"prefill {n}") for n in prefills]
    points = []
    for new, cached, label in cases:
        per = -(-(max(new) + max(cached)) // block)
        kv = PagedKVStore(cfg, per * len(new), block)
        for a in kv.k + kv.v:
            a[:] = rng.random(a.shape, dtype=np.float32)
        seqs = [
            SeqInput([0] * n, c, list(range((i + 1) * per - 1, i * per - 1, -1)))
            for i, (n, c) in enumerate(zip(new, cached, strict=True))
        ]
        plan = StepPlan.build(seqs, kv, g)
        t = sum(new)
        q = rng.standard_normal((cfg.num_heads, d, t), dtype=np.float32)
        k, v = (rng.standard_normal((cfg.num_kv_heads, d, t), dtype=np.float32) for _ in "kv")

        def run(plan=plan, kv=kv, q=q, k=k, v=v) -> None:
            _all_layers(cfg.num_layers, q, k, v, plan, kv)

        if t == len(new) and _fused_attention(weights, t):
            run = _fused_decode_attention(cfg, seqs, kv, rng)
        med, best, cpu = _times(run, runs, evict.sum, threads)
        ops = tuple(
            o.op for o in step_model.step_cost(new, cached).ops if o.op.name.startswith("attention")
        )
        points.append(Point("attention", label, ops, med, best, cpu, runs))
    return points


def elementwise_points(
    cfg: EngineModelConfig,
    step_model,
    runs: int = 5,
    prefills: Sequence[int] = PREFILL_TOKENS,
    threads: int = 1,
) -> list[Point]:
    """Time the elementwise work of a prefill of ``n`` tokens over every layer: what
    :meth:`~infercast.engine.model.LlamaModel.forward` does between its products and attention,
    with its own functions and in its order (the angles once, then per layer RMSNorm, RoPE on Q
    and K, the residual add, RMSNorm, SiLU x up, the residual add).

    numpy runs these as separate passes over [features, tokens] arrays, about 6 us a token a
    layer on one Zen 2 core (SmolLM2-135M, 2026-12-05: 21 ms at 128 tokens, 93 at 512), 6 % of
    a prefill step, which the cost model's default elementwise efficiency (0.60 of the
    bandwidth) priced at a third of that (7 ms). Decode steps of compact formats run them
    inside the fused step's compiled call (``engine/decode_step.py``) and fp32 ones pay mostly
    the calls, which the overhead points measure; so only prefill sizes are timed. The ops are
    the step model's elementwise ops for the same prefill (norms and the activation, summed
    over layers).
    """
    from infercast.cost.ops import ELEMENTWISE
    from infercast.engine.model import rms_norm, silu_mul
    from infercast.engine.rope import RotaryTable

    rng = np.random.default_rng(3)
    h, f, d = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    qk = cfg.q_size + cfg.kv_size
    gain = (1.0 + 0.1 * rng.standard_normal(h)).astype(np.float32)
    rope = RotaryTable(cfg, max(prefills))
    points = []
    for n in prefills:
        x0 = rng.standard_normal((h, n), dtype=np.float32)
        qkv = rng.standard_normal((qk + cfg.kv_size, n), dtype=np.float32)
        out = rng.standard_normal((h, n), dtype=np.float32)  # stands in for o's and down's
        gate_up0 = rng.standard_normal((2 * f, n), dtype=np.float32)
        x, gate_up = x0.copy(), gate_up0.copy()

        def reset(x=x, x0=x0, gate_up=gate_up, gate_up0=gate_up0) -> None:
            # silu_mul works in place: each run starts from the same values
            np.copyto(x, x0)
            np.copyto(gate_up, gate_up0)

        def run(n=n, x=x, qkv=qkv, out=out, gate_up=gate_up) -> None:
            angles = rope.at(np.arange(n))
            for _ in range(cfg.num_layers):
                rms_norm(x, gain, cfg.rms_norm_eps)
                rope.rotate(qkv[:qk].reshape(-1, d, n), *angles)
                x += out
                rms_norm(x, gain, cfg.rms_norm_eps)
                silu_mul(gate_up[:f], gate_up[f:])
                x += out

        med, best, cpu = _times(run, runs, reset, threads)
        ops = tuple(o.op for o in step_model.step_cost([n], [0]).ops if o.op.kind == ELEMENTWISE)
        points.append(Point("elementwise", f"elementwise, prefill {n}", ops, med, best, cpu, runs))
    return points


def _fused_attention(weights: str, batch: int) -> bool:
    """Whether a decode step of ``batch`` requests on ``weights`` layers runs the fused step
    (numba there; beyond batch 1 as far as ``FusedDecode.max_tokens`` reaches: ``auto`` taken
    as 4-bit layers)."""
    from infercast.engine import qlinear as ql
    from infercast.engine.decode_jit import kernels, q4_isa

    if weights == "fp32" or kernels() is None:
        return False
    if batch == 1:
        return True
    if weights == "bf16":
        return batch <= ql.bf16_jit_max_tokens()
    if q4_isa() is None:  # the float q4 kernel has no batched step; int8's float loop
        return weights == "int8" and batch <= ql.int8_jit_max_tokens()
    return batch <= ql.KERNEL_MAX_TOKENS


def _fused_decode_attention(cfg: EngineModelConfig, seqs, kv, rng):
    """A call of the fused step's attention for these one-token requests (random QKV rows,
    each at its own position's angles; their slots as the engine orders them)."""
    from infercast.engine.decode_step import decode_attention
    from infercast.engine.model import decode_slots
    from infercast.engine.rope import RotaryTable

    pos = np.array([s.num_cached for s in seqs])
    rope = RotaryTable(cfg, int(pos.max()) + 1)
    reads = [decode_slots(kv, s.block_table, s.num_cached + 1) for s in seqs]
    ptr = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in reads], out=ptr[1:])
    slots = np.concatenate(reads).astype(np.int64)
    rows = (cfg.num_heads + 2 * cfg.num_kv_heads) * cfg.head_dim
    qkv = rng.standard_normal((len(seqs), rows), dtype=np.float32)
    cos, sin = np.ascontiguousarray(rope.cos[pos]), np.ascontiguousarray(rope.sin[pos])
    return lambda: decode_attention(cfg, kv, qkv, cos, sin, ptr, slots)


def _all_layers(layers: int, q, k, v, plan, kv) -> None:
    from infercast.engine.model import attend

    for li in range(layers):
        attend(li, q, k, v, plan, kv)


def overhead_point(
    cfg: EngineModelConfig,
    runs: int = 5,
    layers: int | None = None,
    weights: str = "fp32",
    threads: int = 1,
    batch: int = 1,
) -> Point:
    """A decode step of ``batch`` requests (one token each) on a model with ``layers``
    (default cfg's) layers, 64 wide, its matrices in ``weights``.

    Its FLOPs and bytes are negligible, so its time is the engine's fixed cost
    per step and per layer (Python and numpy calls). q4, int8 and bf16 layers run a decode step
    as one compiled call (``engine/decode_step.py``: at batch 1, and for several requests'
    one token each up to its ``max_tokens``); fp32 layers and steps with a prefill run layer
    by layer. ``batch`` 2 (kind ``overhead_multi``) is what a batched decode step adds
    (``EfficiencyProfile.multi_token_step_s``).
    """
    from infercast.engine.kv_store import PagedKVStore
    from infercast.engine.model import LlamaModel, SeqInput
    from infercast.engine.weights import random_weights

    layers = cfg.num_layers if layers is None else layers
    heads = min(cfg.num_heads, 4)
    kv_heads = max(1, heads * cfg.num_kv_heads // cfg.num_heads)
    small = replace(
        cfg,
        hidden_size=16 * heads,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=16,
        intermediate_size=64,
        vocab_size=256,
        rope_scaling=None,
        num_layers=layers,
    )
    model = LlamaModel(small, _in_format(random_weights(small, seed=0), weights), 64)
    kv = PagedKVStore(small, 2 * batch, 16)
    seq = [SeqInput([1], 8, [2 * i, 2 * i + 1]) for i in range(batch)]
    med, best, cpu = _times(lambda: model.forward(seq, kv), runs, threads=threads)
    kind, label = "overhead", f"{layers}-layer step at tiny widths"
    if batch > 1:
        kind, label = "overhead_multi", label + f", batch {batch}"
    return Point(kind, label, (), med, best, cpu, runs, layers)


def measure(
    cfg: EngineModelConfig,
    step_model,
    rows: Sequence[int] = DEFAULT_ROWS,
    runs: int = 5,
    threads: int = 1,
    stream_bytes: int = 2**30,
    weights: str = "fp32",
) -> list[Point]:
    """Every point the fit uses, with ``threads`` BLAS (and torch) threads, matrices in
    ``weights``."""
    if weights != "fp32":
        from infercast.engine.qlinear import import_torch

        import_torch().set_num_threads(threads)
    with threadpool_limits(threads):
        return (
            gemm_points(cfg, rows, runs, stream_bytes, weights, threads)
            + attention_points(
                cfg,
                step_model,
                runs=runs,
                evict_bytes=min(stream_bytes, EVICT_BYTES),
                threads=threads,
                weights=weights,
            )
            + elementwise_points(cfg, step_model, runs=runs, threads=threads)
            + [overhead_point(cfg, runs, n, weights, threads) for n in sorted({1, cfg.num_layers})]
            + [overhead_point(cfg, runs, None, weights, threads, batch=2)]
        )
