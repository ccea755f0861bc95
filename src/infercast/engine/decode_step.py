"""A batch-1 decode step of q4, int8 or bf16 layers as one compiled call per thread, with
spin barriers.

With ``--threads 2`` the q4 products ran one numba ``prange`` region each: 121 starts and
joins a SmolLM2-135M step around ~50 us of work apiece, and numba's workqueue wakes each
worker twice a region through a condition variable (numba 0.68 ``workqueue.c``
``parallel_for``: a task to sync its thread count, then the work; its header's "wait and
spin on a task queue" is a ``pthread_cond_wait``). Here every thread runs the whole layer
stack in one compiled call (``nogil``): each computes its share of the 64-row blocks of
every product (:func:`infercast.engine.decode_jit.q4_layout`) into a shared buffer, and the
threads meet at a counter barrier (atomic add, then spin on an atomic load; ``sched_yield``
after a while, for a loaded machine) after each product and after attention: five barriers a
layer, one thread start and join a step. The cheap work between products (RMSNorm, the
residual adds, SiLU, each product's activation sums) is repeated by every thread on its own
copy, so it needs no barrier; RoPE, the KV write and attention are split by KV head.
The arithmetic is the unfused path's
(:class:`infercast.engine.model.LlamaModel` with the q4 kernel) but for e^x, an inlined
polynomial (``fexp``, ~1e-6 relative) so that softmax and SiLU vectorize: tested equal.

Runs when numba is present, every layer matrix is ``q4`` in the kernel's layout (or every
one ``int8`` or every one ``bf16``: rows in chunks of 16 instead of blocks; a bf16 step
also sheds the per-layer numpy work of the per-product path), and the step is one request
decoding one token (``serve``'s batch-1 decode); other steps take the per-product path.
"""

# ruff: noqa: F821 - the compiled functions name each other as globals of _step_kernel's `ns`

from __future__ import annotations

import os
import threading
from functools import cache

import numpy as np

from infercast.engine.decode_jit import (
    BF16_AHEAD,
    BF16_LINE,
    Q4_ROWS,
    f32_bits,
    huge_empty,
    int8_int_ok,
    kernels,
    prefetch,
)

ENABLED = True  # False: the per-product path (a switch for old-vs-new benchmarks)
# False: the final norm and head product after the fused call, on matmul_fm's threads (old-vs-new)
HEAD_IN_STEP = True
_STEP_HEAD: list = []  # the compiled step with the head (_step_head), set by _step_kernel
SPINS_BEFORE_YIELD = 2000
# The int8 and bf16 products' rows go to the threads in chunks of 16 (a 64-byte line of float32
# outputs, so no two threads write one line): SmolLM2-135M's 960-, 576- and 3072-row products
# split evenly between two threads, where chunks of 64 gave one thread 8 of 15 and 5 of 9
# (each product ends at a barrier: the other thread waits). q4's blocks are 64 rows.
SHARE_ROWS = 16


def _sources_stamp() -> str:
    """A digest of the modules whose compiled code the step's functions take in (their kernels
    and intrinsics are linked into each caller's machine code): numba's disk cache checks only
    the caller's own file (``numba/core/caching.py``: its index holds that file's mtime and
    size), so a changed q4 kernel in decode_jit.py ran the step cached before it. The digest
    is in each function's qualified name, hence in its cache file's name
    (``_CacheImpl.get_filename_base``)."""
    import hashlib
    from pathlib import Path

    from infercast.engine import attention_ir, decode_jit

    h = hashlib.sha256()
    for m in (decode_jit, attention_ir):
        h.update(Path(m.__file__).read_bytes())
    return h.hexdigest()[:12]


@cache
def _step_kernel():
    """The compiled step (cached to disk), or None without numba."""
    jit = kernels()
    if jit is None:
        return None
    import types as pytypes

    from llvmlite import ir
    from numba import njit, types
    from numba.core import cgutils
    from numba.extending import intrinsic, overload

    # The compiled functions reach each other through this namespace (their globals), not
    # through closure cells: numba's disk cache keys a function by its closure cells'
    # pickle (numba/core/caching.py ``_index_key``), which holds a per-process uuid for a
    # dispatcher or an intrinsic, so a closure over one recompiled the step in every new
    # process (7 s) and added a cache entry. Each ``_name`` below is published as ``name``.
    ns = dict(globals())
    ns.update(q4_blocks=jit.q4_blocks, q4i_quantize=jit.q4i_quantize, q4i_blocks=jit.q4i_blocks)
    stamp = _sources_stamp()
    ns.update(int8i_quantize=jit.int8i_quantize, int8i_rows=jit.int8i_rows)

    def compiled(**opts):
        def publish(fn):
            assert not fn.__code__.co_freevars, fn.__code__.co_freevars
            code = pytypes.FunctionType(fn.__code__, ns, fn.__name__.removeprefix("_"))
            code.__qualname__ = f"{fn.__qualname__}_{stamp}"  # the disk cache's file name
            ns[code.__name__] = njit(nogil=True, cache=True, **opts)(code)
            return ns[code.__name__]

        return publish

    def _slot0(context, builder, aryty, ary):
        arr = context.make_array(aryty)(context, builder, ary)
        zero = context.get_constant(types.intp, 0)
        return cgutils.get_item_pointer(context, builder, aryty, arr, [zero])

    @intrinsic
    def _atomic_add(typingctx, arr, val):
        """``arr[0] += val`` atomically (sequentially consistent); the old value."""

        def codegen(context, builder, sig, args):
            ptr = _slot0(context, builder, sig.args[0], args[0])
            return builder.atomic_rmw("add", ptr, args[1], "seq_cst")

        return types.int64(arr, types.int64), codegen

    @intrinsic
    def _atomic_load(typingctx, arr):
        """``arr[0]``, read atomically (sequentially consistent)."""

        def codegen(context, builder, sig, args):
            ptr = _slot0(context, builder, sig.args[0], args[0])
            return builder.load_atomic(ptr, "seq_cst", 8)

        return types.int64(arr), codegen

    @intrinsic
    def _sched_yield(typingctx):
        """POSIX ``sched_yield()``: give the core to another runnable thread."""

        def codegen(context, builder, sig, args):
            if os.name != "posix":  # no sched_yield to link against: keep spinning
                return context.get_constant(types.int32, 0)
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield"
            )
            return builder.call(fn, [])

        return types.int32(), codegen

    from infercast.engine.attention_ir import intrinsics

    ns.update(zip(("attn_scores", "attn_pv"), intrinsics(), strict=True))
    _STEP_HEAD.clear()
    ns.update(
        atomic_add=_atomic_add,
        atomic_load=_atomic_load,
        sched_yield=_sched_yield,
        f32_bits=f32_bits(),
        prefetch=prefetch(),
    )

    @compiled(fastmath=True, inline="always")
    def _fexp(x):  # pragma: no cover - compiled
        # e^x = 2^n e^t, n = rint(x log2 e), t = (x log2 e - n) ln 2 in [-0.35, 0.35]: e^t by its
        # Taylor series to t^7 (truncation under 1e-7), 2^n by its float32 bits (the range
        # reduction of Cody & Waite 1980, "Software Manual for the Elementary Functions").
        # Unlike libm's expf it is inlined, so the softmax and SiLU loops vectorize; relative
        # error ~1e-6 for x in [-87, 87]; below -87 it gives ~1e-38 (not 0), above 87 ~2^126.
        y = min(max(x * np.float32(1.4426950408889634), np.float32(-125.0)), np.float32(126.0))
        n = np.rint(y)
        t = (y - n) * np.float32(0.6931471805599453)
        p = np.float32(1.0 / 5040.0)
        p = p * t + np.float32(1.0 / 720.0)
        p = p * t + np.float32(1.0 / 120.0)
        p = p * t + np.float32(1.0 / 24.0)
        p = p * t + np.float32(1.0 / 6.0)
        p = p * t + np.float32(0.5)
        p = p * t + np.float32(1.0)
        p = p * t + np.float32(1.0)
        return p * f32_bits((np.int32(n) + np.int32(127)) << np.int32(23))

    @compiled()
    def _barrier(bar, target, spins):  # pragma: no cover - compiled
        # Every thread adds 1 and waits for the count of all threads' arrivals so far.
        atomic_add(bar, 1)
        n = 0
        while atomic_load(bar) < target:
            n += 1
            if n > spins:
                sched_yield()

    @compiled(fastmath=True)
    def _prep(v, xa, xb, xs):  # pragma: no cover - compiled
        # q4_matmul's activation vectors for one token (see decode_jit.q4_matmul).
        for g in range(xs.shape[1]):
            s = np.float32(0.0)
            for i in range(16):
                lo = v[g * 32 + i]
                hi = v[g * 32 + 16 + i]
                xb[0, g * 16 + i] = hi * np.float32(0.0625)
                xa[0, g * 16 + i] = lo - hi * np.float32(0.0625)
                s += lo + hi
            xs[0, g] = s

    @compiled(fastmath=True)
    def _norm(x, gain, eps, out):  # pragma: no cover - compiled
        # decode_jit.rms_norm_one's arithmetic (Zhang & Sennrich 2019).
        s = np.float32(0.0)
        for i in range(x.shape[0]):
            s += x[i] * x[i]
        r = np.float32(1.0) / np.sqrt(s / np.float32(x.shape[0]) + np.float32(eps))
        for i in range(x.shape[0]):
            out[i] = x[i] * r * gain[i]

    @compiled(fastmath=True)
    def _q4_product(w, li, v, out, tid, nth):  # pragma: no cover - compiled
        # This thread's share of the blocks of layer li's matrix w = (qt, d, m) times v.
        qt, d, m = w
        nc, ng = qt.shape[1], qt.shape[2]
        xa = np.empty((1, ng * 16), dtype=np.float32)
        xb = np.empty((1, ng * 16), dtype=np.float32)
        xs = np.empty((1, ng), dtype=np.float32)
        prep(v, xa, xb, xs)
        q4_blocks(qt[li], d[li], m[li], xa, xb, xs, out, tid * nc // nth, (tid + 1) * nc // nth)

    @compiled(fastmath=True)
    def _q4i_product(w, li, v, out, tid, nth):  # pragma: no cover - compiled
        # The same with the integer kernel (w = (qv,): decode_jit.q4_int_layout): the token
        # quantized to int8 groups, then this thread's blocks.
        qv = w[0][li]
        nc, ng = qv.shape[0], qv.shape[1]
        xq = np.empty(ng * 64, dtype=np.int8)
        xd = np.empty(ng, dtype=np.float32)
        xs = np.empty(ng, dtype=np.float32)
        q4i_quantize(v, xq, xd, xs)
        q4i_blocks(qv, xq, xd, xs, out, 0, tid * nc // nth, (tid + 1) * nc // nth)

    @compiled(inline="always")
    def _row_share(n, tid, nth):  # pragma: no cover - compiled
        # This thread's rows of an int8 or bf16 product, in chunks of SHARE_ROWS
        nc = (n + SHARE_ROWS - 1) // SHARE_ROWS
        return tid * nc // nth * SHARE_ROWS, min(n, (tid + 1) * nc // nth * SHARE_ROWS)

    @compiled(fastmath=True)
    def _int8_product(w, li, v, out, tid, nth):  # pragma: no cover - compiled
        # This thread's share of layer li's int8 rows (w = (q, scale)) times v, in chunks
        # of SHARE_ROWS rows: decode_jit.int8_matmul's one-token loop.
        q, sc = w
        n, k = q.shape[1], q.shape[2]
        r0, r1 = row_share(n, tid, nth)
        for r in range(r0, r1):
            qr = q[li, r]
            acc = np.float32(0.0)
            for c in range(k):
                acc += np.float32(qr[c]) * v[c]
            out[r, 0] = acc * sc[li, r]

    @compiled(fastmath=True)
    def _int8i_product(w, li, v, out, tid, nth):  # pragma: no cover - compiled
        # The same with the integer kernel (w = (q, scale, row sums): decode_jit.int8_int_kernels):
        # the vector quantized to two 8-bit planes (by every thread), then this thread's rows,
        # one at a time in address order (its one-token loop). Numba's disk cache of this step
        # is keyed by this file's stamp alone (numba/core/caching.py; other files' changes:
        # numba PR 8396, unmerged): a change to decode_jit's kernels must touch this file.
        q, sc, ws = w
        n, k = q.shape[1], q.shape[2]
        xq = np.empty((1, 2 * k), dtype=np.uint8)
        d = np.empty(1, dtype=np.float32)
        int8i_quantize(v.reshape(1, k), xq, d)
        r0, r1 = row_share(n, tid, nth)
        int8i_rows(q[li], ws[li], sc[li], xq, d, out, r0, r1)

    @compiled(fastmath=True)
    def _bf16_product(w, li, v, out, tid, nth):  # pragma: no cover - compiled
        # This thread's share of layer li's bf16 rows (w = (bits,), uint16) times v, in chunks
        # of SHARE_ROWS rows, each weight widened in registers (decode_jit.bf16_matmul's one token),
        # each row first prefetching the lines 4 KB on (decode_jit.PREFETCH_AHEAD_BYTES), in
        # address order: one row at a time, one stream (2 or 4 rows interleaved ran slower from
        # DRAM), and a loop from 0 (one from the row's address, which LLVM peeled so that the
        # last lines went first, gained half as much: docs/history/engine-weight-formats.md).
        b16 = w[0]
        n, k = b16.shape[1], b16.shape[2]
        r0, r1 = row_share(n, tid, nth)
        for r in range(r0, r1):
            at = (li * n + r) * k + BF16_AHEAD
            for e in range(0, k, BF16_LINE):
                prefetch(b16, at + e)
            acc = np.float32(0.0)
            for c in range(k):
                acc += f32_bits(np.int32(np.int32(b16[li, r, c]) << 16)) * v[c]
            out[r, 0] = acc

    def _product(w, li, v, out, tid, nth):  # typed by the overload below
        raise NotImplementedError

    ns["product"] = _product

    @overload(_product)
    def _product_impl(w, li, v, out, tid, nth):
        # q4 layers carry (qv,) or (qt, d, m), int8 layers (q, scale) or, for the integer
        # kernel, (q, scale, row sums), bf16 ones (bits,) as uint16: chosen when compiled.
        if len(w) == 1:
            fn = ns["bf16_product" if w[0].dtype == types.uint16 else "q4i_product"]
        elif w[0].dtype == types.int8:
            fn = ns["int8i_product" if len(w) == 3 else "int8_product"]
        else:
            fn = ns["q4_product"]
        return lambda w, li, v, out, tid, nth: fn(w, li, v, out, tid, nth)

    @compiled(fastmath=True)
    def _step(  # pragma: no cover - compiled
        x, norms, wqkv, wo, wgu, wdown, shape, eps, cos, sin, k_all, v_all, slots, bufs, bar,
        tid, nth,
    ):  # fmt: skip
        nq, nkv, hd, f = shape[0], shape[1], shape[2], shape[3]
        h_size = x.shape[0]
        g = nq // nkv
        half = hd // 2
        qkv_buf, att_buf, o_buf, gu_buf, dn_buf = bufs
        xp = x.copy()  # this thread's residual stream
        hv = np.empty(h_size, dtype=np.float32)
        act = np.empty(f, dtype=np.float32)
        qv = np.empty((nq, hd), dtype=np.float32)  # this thread's heads' rows only
        n_ctx = slots.shape[0]
        scores = np.empty((nq, n_ctx), dtype=np.float32)
        acc = np.empty((nq, hd), dtype=np.float32)
        inv_total = np.empty(nq, dtype=np.float32)
        wslot = slots[n_ctx - 1]
        scale = np.float32(1.0 / np.sqrt(hd))
        target = 0
        for li in range(norms.shape[0]):
            norm(xp, norms[li, 0], eps, hv)
            product(wqkv, li, hv, qkv_buf, tid, nth)
            target += nth
            barrier(bar, target, SPINS_BEFORE_YIELD)
            # RoPE (rotate-half, engine/rope.py), the KV write and attention of this thread's
            # KV heads (decode_jit.attend's arithmetic: Vaswani et al. 2017 eq. 1, GQA), key
            # by key over all of them: each slot's K (then V) row of every head is one
            # contiguous read (SmolLM2 q4's fused layers 2.7-2.9 -> 2.5-2.6 ms before fexp;
            # docs/history/engine-weight-formats.md).
            k_off, v_off = nq * hd, (nq + nkv) * hd
            for h in range(tid, nkv, nth):
                kr = k_all[li, wslot, h]
                vr = v_all[li, wslot, h]
                for e in range(half):
                    a = qkv_buf[k_off + h * hd + e, 0]
                    b = qkv_buf[k_off + h * hd + half + e, 0]
                    kr[e] = a * cos[e] - b * sin[e]
                    kr[half + e] = b * cos[e] + a * sin[e]
                for e in range(hd):
                    vr[e] = qkv_buf[v_off + h * hd + e, 0]
                for qi in range(h * g, h * g + g):
                    for e in range(half):
                        a = qkv_buf[qi * hd + e, 0]
                        b = qkv_buf[qi * hd + half + e, 0]
                        qv[qi, e] = (a * cos[e] - b * sin[e]) * scale
                        qv[qi, half + e] = (b * cos[e] + a * sin[e]) * scale
                    for e in range(hd):
                        acc[qi, e] = 0.0
            # q K^T and p V as vector tiles (engine/attention_ir.py) where the head size is a
            # multiple of 16: SmolLM2's 30 layers ~0.19 -> ~0.09 ms with the K/V in cache
            ir = hd % 16 == 0
            row0 = li * k_all.shape[1] * nkv * hd  # layer li's first K/V element
            if ir:
                for h in range(tid, nkv, nth):
                    attn_scores(qv, k_all, row0 + h * hd, nkv * hd, slots, h * g, g, scores)
            else:
                for j in range(n_ctx):
                    sj = slots[j]
                    for h in range(tid, nkv, nth):
                        for qi in range(h * g, h * g + g):
                            t = np.float32(0.0)
                            for e in range(hd):
                                t += qv[qi, e] * k_all[li, sj, h, e]
                            scores[qi, j] = t
            for h in range(tid, nkv, nth):
                for qi in range(h * g, h * g + g):
                    mx = scores[qi, 0]
                    for j in range(1, n_ctx):
                        mx = max(mx, scores[qi, j])
                    total = np.float32(0.0)
                    for j in range(n_ctx):
                        p = fexp(scores[qi, j] - mx)
                        scores[qi, j] = p
                        total += p
                    inv_total[qi] = np.float32(1.0) / total
            if ir:
                for h in range(tid, nkv, nth):
                    attn_pv(scores, v_all, row0 + h * hd, nkv * hd, slots, h * g, g, acc)
            else:
                for j in range(n_ctx):
                    sj = slots[j]
                    for h in range(tid, nkv, nth):
                        for qi in range(h * g, h * g + g):
                            p = scores[qi, j]
                            for e in range(hd):
                                acc[qi, e] += p * v_all[li, sj, h, e]
            for h in range(tid, nkv, nth):
                for qi in range(h * g, h * g + g):
                    for e in range(hd):
                        att_buf[qi * hd + e] = acc[qi, e] * inv_total[qi]
            target += nth
            barrier(bar, target, SPINS_BEFORE_YIELD)
            product(wo, li, att_buf, o_buf, tid, nth)
            target += nth
            barrier(bar, target, SPINS_BEFORE_YIELD)
            for i in range(h_size):
                xp[i] += o_buf[i, 0]
            norm(xp, norms[li, 1], eps, hv)
            product(wgu, li, hv, gu_buf, tid, nth)
            target += nth
            barrier(bar, target, SPINS_BEFORE_YIELD)
            for i in range(f):  # SwiGLU (Shazeer 2020): silu(gate) * up
                gt = gu_buf[i, 0]
                act[i] = gt / (np.float32(1.0) + fexp(-gt)) * gu_buf[f + i, 0]
            product(wdown, li, act, dn_buf, tid, nth)
            target += nth
            barrier(bar, target, SPINS_BEFORE_YIELD)
            for i in range(h_size):
                xp[i] += dn_buf[i, 0]
        if tid == 0:
            x[:] = xp

    @compiled(fastmath=True)
    def _step_head(  # pragma: no cover - compiled
        x, norms, wqkv, wo, wgu, wdown, shape, eps, cos, sin, k_all, v_all, slots, bufs, bar,
        head, final_norm, logits, tid, nth,
    ):  # fmt: skip
        # The layers (_step), then the final RMSNorm (each thread on its own copy) and the head
        # product split by 64-row chunks between the same threads: no pool start and join
        # after the step. _step leaves the residual in x from thread 0: one more barrier.
        step(
            x, norms, wqkv, wo, wgu, wdown, shape, eps, cos, sin, k_all, v_all, slots, bufs,
            bar, tid, nth,
        )  # fmt: skip
        barrier(bar, (5 * norms.shape[0] + 1) * nth, SPINS_BEFORE_YIELD)
        hv = np.empty(x.shape[0], dtype=np.float32)
        norm(x, final_norm, eps, hv)
        product(head, 0, hv, logits, tid, nth)

    _STEP_HEAD.append(ns["step_head"])
    return ns["step"]


def _step_head_kernel():
    """The compiled step with the final norm and head product (``_step_head``)."""
    _step_kernel()
    return _STEP_HEAD[0]


def _stacked(arrays: list[np.ndarray]) -> np.ndarray:
    """``np.stack(arrays)`` into huge pages (:func:`infercast.engine.decode_jit.huge_empty`)."""
    out = huge_empty((len(arrays), *arrays[0].shape), arrays[0].dtype)
    return np.stack(arrays, out=out)


def _stack(mats) -> tuple[np.ndarray, ...]:
    """The layers' matrices as [L, ...] arrays, q4 as (qv,) or (qt, d, m) in its kernel's layout,
    int8 as (q, scale), bf16 as (bits,); each matrix's own arrays become views of them (no
    second copy)."""
    from infercast.engine.qlinear import Bf16Matrix, Int4Matrix

    if isinstance(mats[0], Int4Matrix):
        n = len(mats[0].jit_layout)
        out = tuple(_stacked([m.jit_layout[i] for m in mats]) for i in range(n))
        for li, m in enumerate(mats):
            m.jit_layout = tuple(a[li] for a in out)
        return out
    if isinstance(mats[0], Bf16Matrix):
        bits = _stacked([m.bits for m in mats])
        for li, m in enumerate(mats):
            m.bits = bits[li]
            m.w = m._torch.from_numpy(m.bits.view(np.int16)).view(m._torch.bfloat16)
        return (bits,)
    out = tuple(
        (_stacked if a == "q_np" else np.stack)([getattr(m, a) for m in mats])
        for a in ("q_np", "s32", "ws")
    )
    for li, m in enumerate(mats):
        m.q_np, m.s32, m.ws = (a[li] for a in out)
        m.q = m._torch.from_numpy(m.q_np)
    # (q, scale, row sums): the integer kernel (decode_jit.int8_int_kernels), else (q, scale)
    return out if kernels().int8i_rows is not None and int8_int_ok(out[0].shape[2]) else out[:2]


class FusedDecode:
    """The layer stack of a q4, int8 or bf16 model for batch-1 decode steps (module doc)."""

    def __init__(self, cfg, weights, threads: int) -> None:
        layers = weights.layers
        self.w = [_stack([getattr(lw, n) for lw in layers]) for n in _MATRICES]
        self.head = _head_layout(weights.lm_head)  # None: the head runs after the fused call
        self.final_norm = np.asarray(weights.final_norm, np.float32)
        self.vocab = int(weights.lm_head.shape[0])
        self.norms = np.stack([np.stack([lw.attn_norm, lw.mlp_norm]) for lw in layers]).astype(
            np.float32
        )
        self.shape = np.array(
            [cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size], np.int64
        )
        self.eps = float(cfg.rms_norm_eps)
        # rows of each product (q4: padded to whole 64-row blocks)
        rows = [w[0].shape[1] * (Q4_ROWS if w[0].dtype == np.uint8 else 1) for w in self.w]
        self.bufs = (
            np.zeros((rows[0], 1), np.float32),
            np.zeros(cfg.num_heads * cfg.head_dim, np.float32),
            np.zeros((rows[1], 1), np.float32),
            np.zeros((rows[2], 1), np.float32),
            np.zeros((rows[3], 1), np.float32),
        )
        self.bar = np.zeros(1, np.int64)
        self.threads = max(1, threads)
        self._team: _Team | None = None
        self._kv: tuple | None = None

    @staticmethod
    def build(cfg, weights, threads: int) -> FusedDecode | None:
        """The fused step when numba is there and every layer matrix is q4 in the kernel's
        layout, or every one int8, or every one bf16, else None."""
        from infercast.engine.qlinear import Bf16Matrix, Int4Matrix, Int8Matrix

        mats = [getattr(lw, n) for lw in weights.layers for n in _MATRICES]
        if _step_kernel() is None or not mats:
            return None
        q4 = all(isinstance(m, Int4Matrix) and m.jit_layout is not None for m in mats)
        if not q4 and not any(
            all(isinstance(m, c) for m in mats) for c in (Int8Matrix, Bf16Matrix)
        ):
            return None
        return FusedDecode(cfg, weights, threads)

    def run_logits(self, x: np.ndarray, cos, sin, kv, slots: np.ndarray) -> np.ndarray:
        """:meth:`run`, then the final RMSNorm and the head product in the same compiled call
        (its rows split between the step's threads): the token's logits [V]. Needs
        :attr:`head` (not None)."""
        rows = self.head[0].shape[1] * (Q4_ROWS if self.head[0].dtype == np.uint8 else 1)
        logits = np.empty((rows, 1), np.float32)
        self._go(_step_head_kernel(), x, cos, sin, kv, slots, (self.head, self.final_norm, logits))
        return logits[: self.vocab, 0]

    def _go(self, kernel, x, cos, sin, kv, slots: np.ndarray, extra: tuple) -> None:
        """``kernel`` (the step, or the step with ``extra`` arguments) on every thread."""
        if self._kv is None or self._kv[0] is not kv.k_all:  # the store's slots, flat
            n = kv.k_all.shape[1] * kv.k_all.shape[2]
            k_all = kv.k_all.reshape(kv.k_all.shape[0], n, *kv.k_all.shape[3:])
            self._kv = (kv.k_all, k_all, kv.v_all.reshape(k_all.shape))
        k_all, v_all = self._kv[1:]
        args = (
            x, self.norms, *self.w, self.shape, self.eps, cos, sin, k_all, v_all,
            np.ascontiguousarray(slots, dtype=np.int64), self.bufs, self.bar, *extra,
        )  # fmt: skip
        self.bar[0] = 0
        if self.threads == 1:
            kernel(*args, 0, 1)
            return
        if self._team is None:
            self._team = _Team(self.threads - 1)
        self._team.run(kernel, args, self.threads)

    def run(self, x: np.ndarray, cos, sin, kv, slots: np.ndarray) -> None:
        """Every layer on residual ``x`` [H] (updated in place) for one token whose KV slots
        (context and its own, last) are ``slots``; writes its K/V into ``kv``."""
        if self._kv is None or self._kv[0] is not kv.k_all:  # the store's slots, flat
            n = kv.k_all.shape[1] * kv.k_all.shape[2]
            k_all = kv.k_all.reshape(kv.k_all.shape[0], n, *kv.k_all.shape[3:])
            self._kv = (kv.k_all, k_all, kv.v_all.reshape(k_all.shape))
        k_all, v_all = self._kv[1:]
        args = (
            x, self.norms, *self.w, self.shape, self.eps, cos, sin, k_all, v_all,
            np.ascontiguousarray(slots, dtype=np.int64), self.bufs, self.bar,
        )  # fmt: skip
        self.bar[0] = 0
        if self.threads == 1:
            _step_kernel()(*args, 0, 1)
            return
        if self._team is None:
            self._team = _Team(self.threads - 1)
        self._team.run(_step_kernel(), args, self.threads)


_MATRICES = ("wqkv", "wo", "w_gate_up", "w_down")


def _head_layout(head) -> tuple[np.ndarray, ...] | None:
    """The head matrix as a one-layer stack of :func:`_stack`'s layouts (views, no copy), for
    the fused step's ``product``; None for a float32 head or one without the kernels' layout."""
    from infercast.engine.qlinear import Bf16Matrix, Int4Matrix, Int8Matrix

    if isinstance(head, Int4Matrix) and head.jit_layout is not None:
        return tuple(a[None] for a in head.jit_layout)
    if isinstance(head, Bf16Matrix):
        return (head.bits[None],)
    if isinstance(head, Int8Matrix):
        out = (head.q_np[None], head.s32[None], head.ws[None])
        # the integer kernel where _stack takes it for the layers
        return out if kernels().int8i_rows is not None and int8_int_ok(head.shape[1]) else out[:2]
    return None


class _Team:
    """Helper threads that each run the compiled step beside the calling thread (tid 0)."""

    def __init__(self, helpers: int) -> None:
        self._go = [threading.Semaphore(0) for _ in range(helpers)]
        self._done = threading.Semaphore(0)
        self._job = None
        for tid in range(1, helpers + 1):
            threading.Thread(target=self._loop, args=(tid,), daemon=True).start()

    def _loop(self, tid: int) -> None:
        while True:
            self._go[tid - 1].acquire()
            fn, args, nth = self._job
            try:
                fn(*args, tid, nth)
            finally:
                self._done.release()

    def run(self, fn, args, nth: int) -> None:
        self._job = (fn, args, nth)
        for go in self._go:
            go.release()
        fn(*args, 0, nth)
        for _ in self._go:
            self._done.acquire()
