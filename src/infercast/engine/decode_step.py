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
copy, so it needs no barrier; RoPE, the KV write and attention are split by KV head. Asked for
logits, the call ends with the final norm and each thread's share of the head's rows (q4, int8
or bf16: no Python between the last layer and the head).
The arithmetic is the unfused path's
(:class:`infercast.engine.model.LlamaModel` with the q4 kernel) but for e^x, an inlined
polynomial (``fexp``, ~1e-6 relative) so that softmax and SiLU vectorize: tested equal.

Runs when numba is present, every layer matrix is ``q4`` in the kernel's layout (or every
one ``int8`` or every one ``bf16``: rows in chunks of 16 instead of blocks; a bf16 step
also sheds the per-layer numpy work of the per-product path), and the step is one request
decoding one token (``serve``'s batch-1 decode). A step of several requests decoding one token
each runs :meth:`FusedDecode.run_many` the same way (:func:`_define_many`); other steps
(prefill, a prefill beside decodes) take the per-product path.
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
    ROW_STREAMS,
    bf16_prefetch,
    f32_bits,
    huge_empty,
    int8_int_ok,
    kernels,
)

ENABLED = True  # False: the per-product path (a switch for old-vs-new benchmarks)
SPINS_BEFORE_YIELD = 2000
# The int8 and bf16 products' rows go to the threads in chunks of 16 (a 64-byte line of float32
# outputs, so no two threads write one line): SmolLM2-135M's 960-, 576- and 3072-row products
# split evenly between two threads, where chunks of 64 gave one thread 8 of 15 and 5 of 9 (each
# product ends at a barrier: the other thread waits; docs/history/engine-weight-formats.md,
# `twothread`). q4's blocks are 64 rows (decode_jit.Q4_ROWS).
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
    ns.update(
        atomic_add=_atomic_add,
        atomic_load=_atomic_load,
        sched_yield=_sched_yield,
        f32_bits=f32_bits(),
        stream_prefetch=bf16_prefetch(),
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

    @compiled(fastmath=True, inline="always")
    def _softmax_rows(scores, q0, q1, n_ctx, inv_total):  # pragma: no cover - compiled
        # rows q0..q1-1 of the scores [nq, >= n_ctx] -> e^(s - max), unnormalized, in place;
        # inv_total[q] = 1 / their sum (the weighted V sum is scaled once at the end)
        for qi in range(q0, q1):
            mx = scores[qi, 0]
            for j in range(1, n_ctx):
                mx = max(mx, scores[qi, j])
            total = np.float32(0.0)
            for j in range(n_ctx):
                p = fexp(scores[qi, j] - mx)
                scores[qi, j] = p
                total += p
            inv_total[qi] = np.float32(1.0) / total

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
        # This thread's rows [r0, r1) of an n-row int8 or bf16 product, in chunks of SHARE_ROWS
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
        # each row first prefetching the lines 8 KB on (decode_jit.PREFETCH_AHEAD_BYTES; with
        # AVX-512 only, decode_jit.BF16_PREFETCH), non-temporal (decode_jit.STREAM_LOCALITY:
        # the KV store stays cached), a loop from 0 (one from the row's address, which LLVM
        # peeled so that the last lines went first, gained half as much:
        # docs/history/engine-weight-formats.md). One row at a time, in decode_jit.ROW_STREAMS
        # streams: the share split into that many parts, a row of each in turn (one on the
        # Zen 5, where 2 or 4 rows side by side or four parts read slower from DRAM; four on
        # the Zen 2, whose core reads one stream at two thirds of four's rate).
        b16 = w[0]
        n, k = b16.shape[1], b16.shape[2]
        r0, r1 = row_share(n, tid, nth)
        part = (r1 - r0 + ROW_STREAMS - 1) // ROW_STREAMS
        for j in range(part):  # row j of each of ROW_STREAMS parts in turn (decode_jit)
            for s in range(ROW_STREAMS):
                r = r0 + s * part + j
                if r < r1:
                    at = (li * n + r) * k + BF16_AHEAD
                    for e in range(0, k, BF16_LINE):
                        stream_prefetch(b16, at + e)
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
        head, final_norm, logits, tid, nth,
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
                softmax_rows(scores, h * g, h * g + g, n_ctx, inv_total)
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
        if head is not None:  # the final norm and this thread's share of the head's rows
            norm(xp, final_norm, eps, hv)
            product(head, 0, hv, logits, tid, nth)
        if tid == 0:
            x[:] = xp

    _define_many(ns, compiled)
    return ns["step"]


@cache
def _many_kernel():
    """The compiled batched step (:func:`_define_many`), or None without numba."""
    return None if _step_kernel() is None else _MANY["step_many"]


_MANY: dict = {}  # the batched step, published by _define_many


def _define_many(ns: dict, compiled) -> None:
    """The batched step: T tokens of T requests (each decoding one token at its own position
    over its own KV slots) through every layer in one compiled call per thread.

    The per-product path's arithmetic token by token: each product is the kernel that path runs
    for T tokens (the integer q4 kernel's blocks, each read once for every token,
    ``blocks_tokens``; the integer int8 rows in groups of 8; the float int8 and bf16 loops, 4
    tokens a pass), over activations quantized by the same functions; RMSNorm, RoPE and
    attention as the batch-1 fused step (``fexp`` for e^x). Token t belongs to thread
    t mod nth: its residual, norms, activation prep (quantization), RoPE, KV write and
    attention; the rows of each product are split among all threads (q4's 64-row blocks,
    int8's and bf16's chunks of SHARE_ROWS), with a
    barrier before and after each product: eight a layer."""
    from numba import types
    from numba.extending import overload

    jit = kernels()
    ns.update(
        q4i_blocks_tokens=jit.q4i_blocks_tokens, int8_rows=jit.int8_rows, bf16_rows=jit.bf16_rows
    )

    @compiled(fastmath=True)
    def _q4i_product_t(w, li, ab, out, tid, nth):  # pragma: no cover - compiled
        qv = w[0][li]
        nc = qv.shape[0]
        q4i_blocks_tokens(qv, ab[1], ab[3], ab[4], out, tid * nc // nth, (tid + 1) * nc // nth)

    @compiled(fastmath=True)
    def _int8i_product_t(w, li, ab, out, tid, nth):  # pragma: no cover - compiled
        q, sc, ws = w
        n = q.shape[1]
        r0, r1 = row_share(n, tid, nth)
        int8i_rows(q[li], ws[li], sc[li], ab[2], ab[5], out, r0, r1)

    @compiled(fastmath=True)
    def _int8_product_t(w, li, ab, out, tid, nth):  # pragma: no cover - compiled
        # decode_jit.int8_matmul's loop (4 tokens a pass over a row) on this thread's rows
        q, sc = w
        r0, r1 = row_share(q.shape[1], tid, nth)
        int8_rows(q[li], sc[li], ab[0], out, r0, r1)

    @compiled(fastmath=True)
    def _bf16_product_t(w, li, ab, out, tid, nth):  # pragma: no cover - compiled
        # decode_jit.bf16_matmul's loop (each row's lines asked for 8 KB ahead where
        # BF16_PREFETCH is on, each widened weight used by 4 tokens a pass) on this thread's rows
        b16 = w[0]
        r0, r1 = row_share(b16.shape[1], tid, nth)
        bf16_rows(b16[li], ab[0], out, r0, r1)

    @compiled(fastmath=True)
    def _q4i_prep_t(v, t, ab):  # pragma: no cover - compiled
        ng = v.shape[0] // 32
        q4i_quantize(v, ab[1][t], ab[3][t, :ng], ab[4][t, :ng])

    @compiled(fastmath=True)
    def _int8i_prep_t(v, t, ab):  # pragma: no cover - compiled
        k = v.shape[0]
        int8i_quantize(v.reshape((1, k)), ab[2][t : t + 1, : 2 * k], ab[5][t : t + 1])

    @compiled(fastmath=True)
    def _float_prep_t(v, t, ab):  # pragma: no cover - compiled
        xr = ab[0][t]
        for i in range(v.shape[0]):
            xr[i] = v[i]

    def _product_t(w, li, ab, out, tid, nth):  # typed by the overload below
        raise NotImplementedError

    def _prep_t(w, v, t, ab):  # typed by the overload below
        raise NotImplementedError

    def kind(w):  # the layout of a stacked matrix (_stack): its kernel's name
        if len(w) == 1:
            return "bf16" if w[0].dtype == types.uint16 else "q4i"
        if w[0].dtype == types.int8:
            return "int8i" if len(w) == 3 else "int8"
        return "q4"  # the float q4 kernel: no batched step (FusedDecode.max_tokens is 0)

    @overload(_product_t)
    def _product_t_impl(w, li, ab, out, tid, nth):
        fn = ns[f"{kind(w)}_product_t"]
        return lambda w, li, ab, out, tid, nth: fn(w, li, ab, out, tid, nth)

    @overload(_prep_t)
    def _prep_t_impl(w, v, t, ab):
        k = kind(w)
        fn = ns[f"{k}_prep_t" if k in ("q4i", "int8i") else "float_prep_t"]
        return lambda w, v, t, ab: fn(v, t, ab)

    ns.update(product_t=_product_t, prep_t=_prep_t)

    @compiled(fastmath=True)
    def _attend_t(  # pragma: no cover - compiled
        li, t, qkv, shape, cos, sin, k_all, v_all, keys, qv, acc, inv_total, sbuf, row
    ):  # fmt: skip
        # Token t's RoPE, K/V write (its own slot: the last of its keys) and attention, every
        # head: the batch-1 step's arithmetic (_step) on column t, into row [Hq hd].
        nq, nkv, hd = shape[0], shape[1], shape[2]
        g = nq // nkv
        half = hd // 2
        n_ctx = keys.shape[0]
        wslot = keys[n_ctx - 1]
        scale = np.float32(1.0 / np.sqrt(hd))
        k_off, v_off = nq * hd, (nq + nkv) * hd
        for h in range(nkv):
            kr = k_all[li, wslot, h]
            vr = v_all[li, wslot, h]
            for e in range(half):
                a = qkv[t, k_off + h * hd + e]
                b = qkv[t, k_off + h * hd + half + e]
                kr[e] = a * cos[t, e] - b * sin[t, e]
                kr[half + e] = b * cos[t, e] + a * sin[t, e]
            for e in range(hd):
                vr[e] = qkv[t, v_off + h * hd + e]
            for qi in range(h * g, h * g + g):
                for e in range(half):
                    a = qkv[t, qi * hd + e]
                    b = qkv[t, qi * hd + half + e]
                    qv[qi, e] = (a * cos[t, e] - b * sin[t, e]) * scale
                    qv[qi, half + e] = (b * cos[t, e] + a * sin[t, e]) * scale
                for e in range(hd):
                    acc[qi, e] = 0.0
        scores = sbuf[: nq * n_ctx].reshape((nq, n_ctx))
        ir = hd % 16 == 0
        row0 = li * k_all.shape[1] * nkv * hd  # layer li's first K/V element
        if ir:
            for h in range(nkv):
                attn_scores(qv, k_all, row0 + h * hd, nkv * hd, keys, h * g, g, scores)
        else:
            for j in range(n_ctx):
                sj = keys[j]
                for qi in range(nq):
                    s = np.float32(0.0)
                    for e in range(hd):
                        s += qv[qi, e] * k_all[li, sj, qi // g, e]
                    scores[qi, j] = s
        softmax_rows(scores, 0, nq, n_ctx, inv_total)
        if ir:
            for h in range(nkv):
                attn_pv(scores, v_all, row0 + h * hd, nkv * hd, keys, h * g, g, acc)
        else:
            for j in range(n_ctx):
                sj = keys[j]
                for qi in range(nq):
                    p = scores[qi, j]
                    for e in range(hd):
                        acc[qi, e] += p * v_all[li, sj, qi // g, e]
        for qi in range(nq):
            for e in range(hd):
                row[qi * hd + e] = acc[qi, e] * inv_total[qi]

    @compiled(fastmath=True)
    def _step_many(  # pragma: no cover - compiled
        x, norms, wqkv, wo, wgu, wdown, shape, eps, cos, sin, k_all, v_all, ptr, slots, bufs,
        ab, bar, tid, nth,
    ):  # fmt: skip
        # x [T, H]: the tokens' residuals (shared; token t's rows are thread t mod nth's)
        nq, hd, f = shape[0], shape[2], shape[3]
        m_tok, h_size = x.shape
        # the products' outputs, token-major [T, rows] (each written through its transpose, as
        # the kernels' [rows, T]): a token's row is contiguous for RoPE, SiLU and the residual
        qkv_buf, o_buf, gu_buf, dn_buf = bufs
        hv = np.empty(h_size, dtype=np.float32)
        arow = np.empty(nq * hd, dtype=np.float32)
        act = np.empty(f, dtype=np.float32)
        qv = np.empty((nq, hd), dtype=np.float32)
        acc = np.empty((nq, hd), dtype=np.float32)
        inv_total = np.empty(nq, dtype=np.float32)
        n_max = 1
        for t in range(m_tok):
            n_max = max(n_max, ptr[t + 1] - ptr[t])
        sbuf = np.empty(nq * n_max, dtype=np.float32)
        target = 0
        for li in range(norms.shape[0]):
            for t in range(tid, m_tok, nth):
                norm(x[t], norms[li, 0], eps, hv)
                prep_t(wqkv, hv, t, ab)
            target += nth
            barrier(bar, target, SPINS_BEFORE_YIELD)
            product_t(wqkv, li, ab, qkv_buf.T, tid, nth)
            target += nth
            barrier(bar, target, SPINS_BEFORE_YIELD)
            for t in range(tid, m_tok, nth):
                keys = slots[ptr[t] : ptr[t + 1]]
                attend_t(
                    li, t, qkv_buf, shape, cos, sin, k_all, v_all, keys, qv, acc, inv_total,
                    sbuf, arow,
                )  # fmt: skip
                prep_t(wo, arow, t, ab)
            target += nth
            barrier(bar, target, SPINS_BEFORE_YIELD)
            product_t(wo, li, ab, o_buf.T, tid, nth)
            target += nth
            barrier(bar, target, SPINS_BEFORE_YIELD)
            for t in range(tid, m_tok, nth):
                xt = x[t]
                for i in range(h_size):
                    xt[i] += o_buf[t, i]
                norm(xt, norms[li, 1], eps, hv)
                prep_t(wgu, hv, t, ab)
            target += nth
            barrier(bar, target, SPINS_BEFORE_YIELD)
            product_t(wgu, li, ab, gu_buf.T, tid, nth)
            target += nth
            barrier(bar, target, SPINS_BEFORE_YIELD)
            for t in range(tid, m_tok, nth):
                for i in range(f):  # SwiGLU (Shazeer 2020): silu(gate) * up
                    gt = gu_buf[t, i]
                    act[i] = gt / (np.float32(1.0) + fexp(-gt)) * gu_buf[t, f + i]
                prep_t(wdown, act, t, ab)
            target += nth
            barrier(bar, target, SPINS_BEFORE_YIELD)
            product_t(wdown, li, ab, dn_buf.T, tid, nth)
            target += nth
            barrier(bar, target, SPINS_BEFORE_YIELD)
            for t in range(tid, m_tok, nth):
                xt = x[t]
                for i in range(h_size):
                    xt[i] += dn_buf[t, i]

    @compiled(fastmath=True)
    def _attention_many(  # pragma: no cover - compiled
        layers, qkv, shape, cos, sin, k_all, v_all, ptr, slots
    ):  # fmt: skip
        # The batched step's attention work alone, one thread: every layer's RoPE, K/V write
        # and attention of each token (what ``infercast machine`` times for decode)
        nq, hd = shape[0], shape[2]
        m_tok = qkv.shape[0]
        qv = np.empty((nq, hd), dtype=np.float32)
        acc = np.empty((nq, hd), dtype=np.float32)
        inv_total = np.empty(nq, dtype=np.float32)
        row = np.empty(nq * hd, dtype=np.float32)
        n_max = 1
        for t in range(m_tok):
            n_max = max(n_max, ptr[t + 1] - ptr[t])
        sbuf = np.empty(nq * n_max, dtype=np.float32)
        for li in range(layers):
            for t in range(m_tok):
                keys = slots[ptr[t] : ptr[t + 1]]
                attend_t(li, t, qkv, shape, cos, sin, k_all, v_all, keys, qv, acc, inv_total,
                         sbuf, row)  # fmt: skip

    _MANY["step_many"] = ns["step_many"]
    _MANY["attention_many"] = ns["attention_many"]


def decode_attention(
    cfg, kv, qkv: np.ndarray, cos, sin, ptr: np.ndarray, slots: np.ndarray
) -> None:
    """Every layer's attention of a fused decode step (batch 1 or :meth:`FusedDecode.run_many`)
    on one thread: T tokens' RoPE, K/V write and attention, from their QKV rows ``qkv``
    [T, (Hq + 2 Hkv) d], angles ``cos``, ``sin`` [T, d/2] and KV slots ``slots[ptr[t]:ptr[t +
    1]]`` (their own last). What ``infercast machine`` times for a decode step of compact layers
    (``rate_probe.attention_points``); needs numba."""
    _many_kernel()
    shape = np.array(
        [cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size], np.int64
    )
    n = kv.k_all.shape[1] * kv.k_all.shape[2]
    k_all = kv.k_all.reshape(kv.k_all.shape[0], n, *kv.k_all.shape[3:])
    v_all = kv.v_all.reshape(k_all.shape)
    _MANY["attention_many"](kv.k_all.shape[0], qkv, shape, cos, sin, k_all, v_all, ptr, slots)


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


def _head(m) -> tuple[np.ndarray, ...] | None:
    """The head's arrays as the step's product takes a layer's (a leading axis of one): bf16 as
    (bits,), q4 in its kernel's layout, int8 as (q, scale[, row sums]) as :func:`_stack` chooses;
    None for a float32 head (the caller's product)."""
    from infercast.engine.qlinear import Bf16Matrix, Int4Matrix, Int8Matrix

    if isinstance(m, Bf16Matrix):
        return (m.bits[None],)
    if isinstance(m, Int4Matrix):
        return None if m.jit_layout is None else tuple(a[None] for a in m.jit_layout)
    if isinstance(m, Int8Matrix):
        out = (m.q_np[None], m.s32[None], m.ws[None])
        return out if kernels().int8i_rows is not None and int8_int_ok(m.shape[1]) else out[:2]
    return None


class FusedDecode:
    """The layer stack of a q4, int8 or bf16 model for batch-1 decode steps (module doc)."""

    def __init__(self, cfg, weights, threads: int) -> None:
        layers = weights.layers
        self.w = [_stack([getattr(lw, n) for lw in layers]) for n in _MATRICES]
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
        # the head runs in the same compiled call, after the final norm (run(logits=True))
        self.head = _head(weights.lm_head)
        self.final_norm = np.ascontiguousarray(weights.final_norm, dtype=np.float32)
        self.vocab = cfg.vocab_size
        self.threads = max(1, threads)
        self._team: _Team | None = None
        self._kv: tuple | None = None
        self.rows = rows
        # the widest activation a product takes (H, Hq d or F): the batched step's buffers
        self._k_max = max(cfg.hidden_size, cfg.num_heads * cfg.head_dim, cfg.intermediate_size)
        self.max_tokens = _many_max_tokens(self.w)
        self._many_bufs: tuple | None = None  # the batched step's buffers, max_tokens rows

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

    def run(
        self, x: np.ndarray, cos, sin, kv, slots: np.ndarray, logits: bool = False
    ) -> np.ndarray | None:
        """Every layer on residual ``x`` [H] (updated in place) for one token whose KV slots
        (context and its own, last) are ``slots``; writes its K/V into ``kv``. With ``logits``
        and a q4, int8 or bf16 head, also the final norm and the head in the same call: returns
        the logits [V] (else None; the caller runs the head)."""
        if self._kv is None or self._kv[0] is not kv.k_all:  # the store's slots, flat
            n = kv.k_all.shape[1] * kv.k_all.shape[2]
            k_all = kv.k_all.reshape(kv.k_all.shape[0], n, *kv.k_all.shape[3:])
            self._kv = (kv.k_all, k_all, kv.v_all.reshape(k_all.shape))
        k_all, v_all = self._kv[1:]
        head = final_norm = out = None  # None: the compiled step without the head
        if logits and self.head is not None:
            head, final_norm = self.head, self.final_norm
            rows = head[0].shape[1] * (Q4_ROWS if head[0].dtype == np.uint8 else 1)
            out = np.empty((rows, 1), np.float32)  # q4: whole 64-row blocks
        args = (
            x, self.norms, *self.w, self.shape, self.eps, cos, sin, k_all, v_all,
            np.ascontiguousarray(slots, dtype=np.int64), self.bufs, self.bar, head, final_norm,
            out,
        )  # fmt: skip
        self.bar[0] = 0
        if self.threads == 1:
            _step_kernel()(*args, 0, 1)
        else:
            if self._team is None:
                self._team = _Team(self.threads - 1)
            self._team.run(_step_kernel(), args, self.threads)
        return None if out is None else out[: self.vocab, 0]

    def run_many(self, x: np.ndarray, cos, sin, kv, ptr: np.ndarray, slots: np.ndarray) -> None:
        """Every layer on the residuals ``x`` [T, H] (updated in place) of T requests' one
        token each, 2 <= T <= :attr:`max_tokens`; token t at RoPE angles ``cos[t]``,
        ``sin[t]`` [T, d/2], its KV slots (context and its own, last) ``slots[ptr[t]:ptr[t +
        1]]``; writes their K/V into ``kv``."""
        if self._kv is None or self._kv[0] is not kv.k_all:  # the store's slots, flat
            n = kv.k_all.shape[1] * kv.k_all.shape[2]
            k_all = kv.k_all.reshape(kv.k_all.shape[0], n, *kv.k_all.shape[3:])
            self._kv = (kv.k_all, k_all, kv.v_all.reshape(k_all.shape))
        k_all, v_all = self._kv[1:]
        if self._many_bufs is None:  # one set for every batch size: their first T rows
            km, n = self._k_max, self.max_tokens
            self._many_bufs = (
                tuple(np.zeros((n, r), np.float32) for r in self.rows),
                (
                    np.zeros((n, km), np.float32),  # float activations (int8, bf16 loops)
                    np.zeros((n, 2 * km), np.int8),  # the integer q4 kernel's two planes
                    np.zeros((n, 2 * km), np.uint8),  # the integer int8 kernel's
                    np.zeros((n, km // 32 + 1), np.float32),  # q4: each group's scale
                    np.zeros((n, km // 32 + 1), np.float32),  # q4: each group's sum
                    np.zeros(n, np.float32),  # int8: each token's scale
                ),
            )
        t = x.shape[0]
        bufs, ab = (tuple(a[:t] for a in group) for group in self._many_bufs)
        args = (
            x, self.norms, *self.w, self.shape, self.eps, cos, sin, k_all, v_all,
            ptr, slots, bufs, ab, self.bar,
        )  # fmt: skip
        self.bar[0] = 0
        if self.threads == 1:
            _many_kernel()(*args, 0, 1)
            return
        if self._team is None:
            self._team = _Team(self.threads - 1)
        self._team.run(_many_kernel(), args, self.threads)


def _many_max_tokens(mats) -> int:
    """The most tokens the batched step runs for these stacked matrices: the per-product path's
    limit of each one's kernel (qlinear.py); 0 with the float q4 kernel (no batched step)."""
    from infercast.engine import qlinear as ql

    out = ql.KERNEL_MAX_TOKENS
    for w in mats:
        if len(w) == 1 and w[0].dtype == np.uint16:
            # the float loop (qlinear.bf16_jit_max_tokens): at 8 tokens on the Zen 5, where
            # PyTorch's bf16 matmul takes over from 5, the batched step with the loop ran
            # 26.9 ms against the per-product path's 25.5 (SmolLM2-135M, one thread)
            out = min(out, ql.bf16_jit_max_tokens())
        elif len(w) == 1:
            out = min(out, ql.Q4_INT_JIT_MAX_TOKENS)
        elif w[0].dtype == np.int8:
            lim = ql.INT8_INT_JIT_MAX_TOKENS if len(w) == 3 else ql.int8_jit_max_tokens()
            out = min(out, lim)
        else:
            return 0
    return out


_MATRICES = ("wqkv", "wo", "w_gate_up", "w_down")


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
