"""Compiled loops (numba) for the small work of decode: attention, norm, fp32/int8/bf16/q4 products.

A batch-1 decode step of SmolLM2-135M calls attention 30 times on 3 KV heads of
129 keys: work of microseconds that numpy spends in dozens of small calls
(scaling, gathers, ``matmul`` per segment, masking, softmax passes). One compiled
loop per layer does the same arithmetic (Vaswani et al. 2017, eq. 1: softmax(q
K^T / sqrt(d)) V, each KV head serving Hq/Hkv query heads, Ainslie et al. 2023)
straight from the paged store's slots, with no copies. Measured in the engine's
step: docs/cpu-kernels.md.

numba is in the ``torch`` extra; without it :func:`kernels` is ``None`` and the
numpy path (:func:`infercast.engine.attention.decode_attention`) runs. Both are
tested equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

ROW_CHUNK = 64  # rows of a product per unit of work (one thread's, with threads)
Q4_ROWS = 64  # rows per block of the q4 kernel's layout (its vector loop runs across them)
# Bytes of one group of one 64-row block in the integer q4 layout (q4_int_layout): 16 bytes a
# row (4 words of 4 bytes, each word a row's), then the rows' fp16 scales, then fp16 offsets.
Q4_INT_GROUP_BYTES = 16 * Q4_ROWS + 2 * 2 * Q4_ROWS
Q4_INT = True  # False: the float q4 kernel on every CPU (a switch for old-vs-new benchmarks)


@dataclass(frozen=True)
class DecodeSlots:
    """The step's decode requests: token columns, and each one's KV slots (CSR layout).

    Request i's keys are ``slots[ptr[i]:ptr[i + 1]]``; a decode query sees every
    cached key, so their order does not matter.
    """

    columns: np.ndarray  # [B] int64
    ptr: np.ndarray  # [B + 1] int64
    slots: np.ndarray  # [sum of contexts] int64

    @staticmethod
    def build(columns: list[int], slot_lists: list[np.ndarray]) -> DecodeSlots:
        ptr = np.zeros(len(slot_lists) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in slot_lists], out=ptr[1:])
        return DecodeSlots(
            np.asarray(columns, dtype=np.int64),
            ptr,
            np.concatenate(slot_lists).astype(np.int64, copy=False),
        )


@dataclass(frozen=True)
class Kernels:
    """The compiled functions (see the module doc)."""

    attend: object  # (q, k_flat, v_flat, columns, ptr, slots, out) -> None
    rms_norm_one: object  # (x [H], gain [H], eps) -> [H]
    int8_matmul: object  # (q int8 [N, K], scale [N], x [T, K], out [N, T]) -> None
    bf16_matmul: object  # (w bf16 bits as uint16 [N, K], x [T, K], out [N, T]) -> None
    fp32_matmul: object  # (w float32 [N, K], x [T, K], out [N, T]) -> None
    q4_matmul: object  # (qt uint8 [C, G, 16, R], d, m f32 [C, G, R], x [T, K], out [C R, T],
    # tasks: runs of blocks, one a thread)
    int8_matmul_threads: object  # the same over numba's threads (set_num_threads)
    bf16_matmul_threads: object
    fp32_matmul_threads: object
    q4_matmul_threads: object
    q4_blocks: object  # (qt, d, m, xa, xb, xs, out, c0, c1): blocks c0..c1-1 of q4_matmul
    # The integer q4 kernel (q4_isa(); None where this CPU has none): (qv uint8 [C, G, 1280],
    # x [T, K], out [C R, T], tasks), its threaded twin, the activation quantizer
    # (x [K] -> xq int8 [K], xd, xs f32 [K/32]) and (qv, xq, xd, xs, out, t, c0, c1): blocks
    # c0..c1-1 for token t.
    q4i_matmul: object = None
    q4i_matmul_threads: object = None
    q4i_quantize: object = None
    q4i_blocks: object = None
    # The integer int8 kernel (int8_int_kernels; None where this CPU has none): (q int8 [N, K],
    # ws int32 [N], scale [N], x [T, K], out [N, T]), its threaded twin, the activation
    # quantizer (x [T, K] -> xq uint8 [T, 2K], d f32 [T]) and (q, ws, scale, xq, d, out, r0,
    # r1): rows r0..r1-1.
    int8i_matmul: object = None
    int8i_matmul_threads: object = None
    int8i_quantize: object = None
    int8i_rows: object = None
    # (qv, xq, xd, xs [T, ...], out, c0, c1): blocks c0..c1-1 of the integer q4 kernel for every
    # token, each block read once (the batched fused step, decode_step.py)
    q4i_blocks_tokens: object = None
    # (q, scale, x [T, K], out, r0, r1) and (w16, x, out, r0, r1): rows r0..r1-1 of the
    # int8 and bf16 float loops (the batched fused step's share of a product)
    int8_rows: object = None
    bf16_rows: object = None

    def product(self, fmt: str, threads: int):
        """The int8, bf16, fp32 or q4 product kernel for ``threads`` threads (sets numba's
        count)."""
        name = f"{fmt}_matmul"
        if threads <= 1:
            return getattr(self, name)
        import numba

        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        return getattr(self, name + "_threads")


@cache
def f32_bits():
    """A numba ``@intrinsic``: the float32 whose bits are the int32 argument (an LLVM bitcast,
    which vectorizes, unlike a view of a one-element array): bf16 widened in registers, the
    fused step's e^x (engine/decode_step.py). Needs numba."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def f32_bits(typingctx, bits):
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], ir.FloatType())

        return types.float32(types.int32), codegen

    return f32_bits


# Software prefetch of bf16 rows (prefetch, below): how far ahead of the row being read, and
# one prefetch per cache line. SmolLM2-135M's 120 bf16 layer products, one thread, from DRAM
# (2026-12-05, AMD EPYC Zen 5, load 1.5-2.8; sdot read 43 GB/s): none 35.1-36.7 GB/s, 1 KB
# ahead 36.3, 2 KB 38.2-38.8, 3 KB 39.2, 4 KB 38.5-40.3, 6 KB 39.0, 8 KB 39.1; into L2 only
# (locality 2) 37.7-37.8, non-temporal 38.7-40.2 (docs/history/engine-weight-formats.md).
# Non-temporal (STREAM_LOCALITY), the whole batch-1 step (head in the fused call, context 128,
# paired A/B in one process, median step time against 4 KB; 03:49 UTC, load 2.5-2.7): 6 KB
# 0.963, 8 KB 0.962, 10 KB 0.981; 12 KB 1.007, 16 KB 1.017 (03:46, load 3-4). int8's rows (8 KB,
# I8_AHEAD_BYTES) and q4's groups (Q4_PREFETCH_AHEAD_BYTES) stream best at 8 KB too.
PREFETCH_AHEAD_BYTES = 8192
CACHE_LINE_BYTES = 64
# The integer q4 kernel's prefetch distance (q4_int_kernels: each group's 20 lines, this far on,
# within the matrix). SmolLM2-135M's chain of 120 q4 layer products, one thread, from DRAM,
# best of 30, ms (2026-12-05 01:25-01:30 UTC, load 4-5, one process per distance, alternated):
# none 1.62-1.72, 4 KB 1.66-1.73, 6 KB 1.58-1.62, 8 KB 1.43-1.54, 10 KB 1.44-1.52, 12 KB
# 1.46-1.61, 16 KB 1.51-1.66, 32 KB 1.59-1.70; into L2 only (locality 2) 8 KB 1.98-2.00, 16 KB
# 1.85-1.91; a plain read of the same bytes 1.26-1.42.
Q4_PREFETCH_AHEAD_BYTES = 8192
BF16_AHEAD = PREFETCH_AHEAD_BYTES // 2  # in bf16 elements
# The locality of the bf16 weight rows' prefetches: 0, non-temporal (x86 prefetchnta, "minimizing
# cache pollution": AMD64 Architecture Programmer's Manual vol. 1, 24592, PREFETCHlevel). Each
# line is read once a step and a step streams ~9x the LLC, so rows kept in the caches only evict
# what the next step reuses (the KV store). SmolLM2-135M bf16, batch-1 step at context 128, one
# thread, best of 30, main (locality 3) / this, processes alternated (2026-12-05 03:40 UTC, load
# 2-2.9): 7.71-8.03 / 7.31-7.38 ms (docs/history/engine-weight-formats.md, `bf16step`). The int8
# one-token rows and the q4 groups take it too: their fused layers in a paired A/B, one process,
# 100 rounds (04:01 UTC, load 2.7-3.1), median step 0.989 (int8) and 0.986 (q4) of locality 3's.
STREAM_LOCALITY = 0
BF16_LINE = CACHE_LINE_BYTES // 2


def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags (Linux /proc/cpuinfo); empty where that file is absent."""
    from pathlib import Path

    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return frozenset(line.partition(":")[2].split())


# Whether the bf16 weight rows ask for their lines ahead in software (:func:`bf16_prefetch`):
# faster on the AVX-512 Zen 5 (above), slower on the AVX2 Zen 2, where the bf16 loop is bound by
# the instructions it retires (each weight widened by a shift), not by DRAM, and 18 prefetches a
# 576-column row add to them. SmolLM2-135M batch-1 step, one thread, 2026-12-05 ~05:33 UTC,
# load 1.3-2.2: paired A/B in one process, 30 rounds, without / with 0.862 of the time; processes
# alternated twice, best of 15 ms, without / with: bf16 19.5-19.9 / 22.9-23.3, but int8 12.5-12.9
# / 10.3-11.3 and q4 10.5-10.7 / 9.2-9.3 (their prefetches, a few per 1-2 KB group or row in
# the integer kernels, stay on every CPU). A CPU without AVX-512 is taken as the Zen 2's kind.
def bf16_rows_prefetched(flags: frozenset[str]) -> bool:
    """Whether a CPU with these feature flags prefetches the bf16 rows: AVX-512 (above)."""
    return "avx512f" in flags


BF16_PREFETCH = bf16_rows_prefetched(cpu_flags())


# How many streams a thread's one-token bf16 rows are read in: its rows split into this many
# contiguous parts, one row of each in turn. A Zen 2 core reads one stream at ~15 GB/s and four
# far apart at ~22 (numpy's sdot: 16.5-17.6 one stream, 22.8-23.6 two), so a row at a time in
# address order left a third of the read rate unused; on the AVX-512 Zen 5 four streams ran
# slower than one (29.2 against 35-39 GB/s, docs/history/engine-weight-formats.md, bf16floor).
# 275 MB of 576-column bf16 rows, one thread, 2026-12-05 08:25 UTC, best of 7, two rounds: one
# stream 15.2, 15.1 GB/s; rows r and r + N/2 in turn 17.4, 17.9; four quarters 21.9, 22.5.
def row_streams(flags: frozenset[str]) -> int:
    """Streams a CPU with these feature flags reads the bf16 rows in: 1 with AVX-512, else 4."""
    return 1 if "avx512f" in flags else 4


ROW_STREAMS = row_streams(cpu_flags())


def bf16_prefetch():
    """The bf16 rows' prefetch intrinsic (:func:`prefetch` at :data:`STREAM_LOCALITY`), or one
    that emits nothing where :data:`BF16_PREFETCH` is off (LLVM then drops the loop of
    prefetches around it)."""
    return prefetch(STREAM_LOCALITY, BF16_PREFETCH)


@cache
def prefetch(locality: int = 3, emit: bool = True):
    """A numba ``@intrinsic``: ``prefetch(a, i)`` asks for the cache line holding element ``i``
    of array ``a``'s buffer (counted from its first element, in ``a``'s dtype, whatever its
    shape): LLVM's ``llvm.prefetch`` (read, data, ``locality`` 0-3;
    https://llvm.org/docs/LangRef.html#llvm-prefetch-intrinsic: no effect on what the program
    computes), on x86 ``prefetcht0`` into every cache level (3) or ``prefetchnta`` (0:
    non-temporal, :data:`STREAM_LOCALITY`). An address past the buffer is allowed: a prefetch
    never faults (Intel SDM vol. 2, PREFETCHh). ``emit`` False: nothing (the switch of
    :func:`bf16_prefetch`). Needs numba."""
    import llvmlite.binding as llvm
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    # typed pointers' name before LLVM 15's opaque ones
    name = "llvm.prefetch.p0" if llvm.llvm_version_info >= (15,) else "llvm.prefetch.p0i8"

    @intrinsic
    def prefetch(typingctx, arr, idx):
        if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            if not emit:
                return context.get_dummy_value()
            a = context.make_array(sig.args[0])(context, builder, args[0])
            i = context.cast(builder, args[1], sig.args[1], types.intp)
            p8 = builder.bitcast(builder.gep(a.data, [i]), ir.IntType(8).as_pointer())
            i32 = ir.IntType(32)
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [p8.type, i32, i32, i32]), name
            )
            read, loc, data = (ir.Constant(i32, v) for v in (0, locality, 1))
            builder.call(fn, [p8, read, loc, data])
            return context.get_dummy_value()

        return types.none(arr, idx), codegen

    return prefetch


@cache
def kernels() -> Kernels | None:
    """The compiled kernels, or ``None`` without numba. Compiled on first call (cached to disk)."""
    try:
        import numba
        from numba import njit
        from numba import prange as numba_prange
    except ImportError:
        return None

    def attend(q, k_flat, v_flat, columns, ptr, slots, out):  # pragma: no cover - compiled
        hq, d, _ = q.shape
        hkv = k_flat.shape[1]
        g = hq // hkv
        scale = np.float32(1.0 / np.sqrt(d))
        if d % 16 == 0:  # q K^T and p V as vector tiles (engine/attention_ir.py)
            qv = np.empty((hq, d), dtype=np.float32)
            acc = np.empty((hq, d), dtype=np.float32)
            inv = np.empty(hq, dtype=np.float32)
            for r in range(columns.shape[0]):
                c = columns[r]
                a = ptr[r]
                n = ptr[r + 1] - a
                keys = slots[a : a + n]
                scores = np.empty((hq, n), dtype=np.float32)
                for qi in range(hq):
                    for e in range(d):
                        qv[qi, e] = q[qi, e, c] * scale
                for h in range(hkv):
                    attn_scores(qv, k_flat, h * d, hkv * d, keys, h * g, g, scores)  # noqa: F821
                for qi in range(hq):
                    m = scores[qi, 0]
                    for j in range(1, n):
                        m = max(m, scores[qi, j])
                    total = np.float32(0.0)
                    for j in range(n):
                        p = np.exp(scores[qi, j] - m)
                        scores[qi, j] = p
                        total += p
                    inv[qi] = np.float32(1.0) / total
                for h in range(hkv):
                    attn_pv(scores, v_flat, h * d, hkv * d, keys, h * g, g, acc)  # noqa: F821
                for qi in range(hq):
                    for e in range(d):
                        out[qi, e, c] = acc[qi, e] * inv[qi]
            return
        qv = np.empty((g, d), dtype=np.float32)
        acc = np.empty((g, d), dtype=np.float32)
        for r in range(columns.shape[0]):
            c = columns[r]
            a = ptr[r]
            n = ptr[r + 1] - a
            scores = np.empty((g, n), dtype=np.float32)
            for h in range(hkv):
                for gi in range(g):
                    for e in range(d):
                        qv[gi, e] = q[h * g + gi, e, c] * scale
                for j in range(n):
                    kr = k_flat[slots[a + j], h]
                    for gi in range(g):
                        t = np.float32(0.0)
                        for e in range(d):
                            t += qv[gi, e] * kr[e]
                        scores[gi, j] = t
                for gi in range(g):
                    m = scores[gi, 0]
                    for j in range(1, n):
                        m = max(m, scores[gi, j])
                    total = np.float32(0.0)
                    for j in range(n):
                        p = np.exp(scores[gi, j] - m)
                        scores[gi, j] = p
                        total += p
                    for e in range(d):
                        acc[gi, e] = 0.0
                    for j in range(n):
                        vr = v_flat[slots[a + j], h]
                        p = scores[gi, j]
                        for e in range(d):
                            acc[gi, e] += p * vr[e]
                    inv = np.float32(1.0) / total
                    for e in range(d):
                        out[h * g + gi, e, c] = acc[gi, e] * inv

    from infercast.engine.attention_ir import intrinsics, source_digest

    attn_names = dict(zip(("attn_scores", "attn_pv"), intrinsics(), strict=True))
    attend = _with_globals(attend, **attn_names)
    # its disk-cache file named after attention_ir.py's digest too: numba checks only this file
    attend.__qualname__ = f"attend_{source_digest()}"
    attend = njit(fastmath=True, cache=True)(attend)

    @njit(fastmath=True, cache=True)
    def rms_norm_one(x, gain, eps):  # pragma: no cover - compiled
        # Zhang & Sennrich 2019: x / sqrt(mean(x^2) + eps) * gain, one token.
        s = np.float32(0.0)
        for i in range(x.shape[0]):
            s += x[i] * x[i]
        r = np.float32(1.0) / np.sqrt(s / np.float32(x.shape[0]) + np.float32(eps))
        out = np.empty((x.shape[0], 1), dtype=np.float32)
        for i in range(x.shape[0]):
            out[i, 0] = x[i] * r * gain[i]
        return out

    @njit(fastmath=True, cache=True, inline="always")
    def _dot4(wf, x_rows, t, out, r):  # pragma: no cover - compiled
        # out[r, t:t+4] = one float32 weight row against 4 tokens, the row read once: the
        # 4-token pass of the fp32 loop, inlined into it.
        x0, x1, x2, x3 = x_rows[t], x_rows[t + 1], x_rows[t + 2], x_rows[t + 3]
        a0 = a1 = a2 = a3 = np.float32(0.0)
        for c in range(wf.shape[0]):
            w = wf[c]
            a0 += w * x0[c]
            a1 += w * x1[c]
            a2 += w * x2[c]
            a3 += w * x3[c]
        out[r, t], out[r, t + 1], out[r, t + 2], out[r, t + 3] = a0, a1, a2, a3

    def _int8_rows(q, scale, x_rows, out, r0, r1):  # pragma: no cover - compiled
        # Rows r0..r1-1 of int8_matmul (below; also the batched fused step's share,
        # decode_step.py), compiled as a plain function as _q4_blocks is.
        k = q.shape[1]
        m = x_rows.shape[0]
        for r in range(r0, r1):
            qr = q[r]
            sr = scale[r]
            t = 0
            while t + 4 <= m:
                x0, x1, x2, x3 = x_rows[t], x_rows[t + 1], x_rows[t + 2], x_rows[t + 3]
                a0 = a1 = a2 = a3 = np.float32(0.0)
                for c in range(k):
                    w = np.float32(qr[c])
                    a0 += w * x0[c]
                    a1 += w * x1[c]
                    a2 += w * x2[c]
                    a3 += w * x3[c]
                out[r, t], out[r, t + 1] = a0 * sr, a1 * sr
                out[r, t + 2], out[r, t + 3] = a2 * sr, a3 * sr
                t += 4
            for tt in range(t, m):
                xr = x_rows[tt]
                acc = np.float32(0.0)
                for c in range(k):
                    acc += np.float32(qr[c]) * xr[c]
                out[r, tt] = acc * sr

    def int8_matmul(q, scale, x_rows, out):  # pragma: no cover - compiled
        # out[r, t] = scale[r] * sum_c q[r, c] x[t, c]: int8 rows widened in registers,
        # each widened weight used by up to 4 tokens; rows in chunks (threads: see below).
        n = q.shape[0]
        for ch in prange((n + ROW_CHUNK - 1) // ROW_CHUNK):  # noqa: F821 - a global (_with_globals)
            r0 = ch * ROW_CHUNK
            int8_rows(q, scale, x_rows, out, r0, min(n, r0 + ROW_CHUNK))  # noqa: F821

    def _bf16_rows(w16, x_rows, out, r0, r1):  # pragma: no cover - compiled
        # Rows r0..r1-1 of bf16_matmul (below; also the batched fused step's share)
        k = w16.shape[1]
        m = x_rows.shape[0]
        for r in range(r0, r1):
            at = r * k + BF16_AHEAD
            for e in range(0, k, BF16_LINE):  # in address order (decode_step._bf16_product)
                stream_prefetch(w16, at + e)  # noqa: F821
            wr = w16[r]
            t = 0
            while t + 4 <= m:
                x0, x1, x2, x3 = x_rows[t], x_rows[t + 1], x_rows[t + 2], x_rows[t + 3]
                a0 = a1 = a2 = a3 = np.float32(0.0)
                for c in range(k):
                    w = f32_bits(np.int32(np.int32(wr[c]) << 16))  # noqa: F821
                    a0 += w * x0[c]
                    a1 += w * x1[c]
                    a2 += w * x2[c]
                    a3 += w * x3[c]
                out[r, t], out[r, t + 1], out[r, t + 2], out[r, t + 3] = a0, a1, a2, a3
                t += 4
            for tt in range(t, m):
                xr = x_rows[tt]
                acc = np.float32(0.0)
                for c in range(k):
                    acc += f32_bits(np.int32(np.int32(wr[c]) << 16)) * xr[c]  # noqa: F821
                out[r, tt] = acc

    def bf16_matmul(w16, x_rows, out):  # pragma: no cover - compiled
        # out[r, t] = sum_c w[r, c] x[t, c]; bf16 is float32's top half: each weight is
        # widened by a shift in registers (f32_bits), each widened weight used by up to 4
        # tokens. A row widened into a float32 buffer first, then read back for the tokens
        # (until 2026-12-05), took 1.6x as long at 4 tokens (SmolLM2's 120 layer products,
        # one thread: 12.9-13.1 ms against 7.9-8.0; at 2 tokens 10.4-11.7 against 7.0; at one
        # token 2x from cache and 1.2x from DRAM, docs/cpu-kernels.md). Each row first asks for
        # the lines PREFETCH_AHEAD_BYTES further on (the batch-1 head, read from DRAM), where
        # BF16_PREFETCH is on.
        n = w16.shape[0]
        for ch in prange((n + ROW_CHUNK - 1) // ROW_CHUNK):  # noqa: F821 - a global (_with_globals)
            r0 = ch * ROW_CHUNK
            bf16_rows(w16, x_rows, out, r0, min(n, r0 + ROW_CHUNK))  # noqa: F821

    def fp32_matmul(w, x_rows, out):  # pragma: no cover - compiled
        # out[r, t] = sum_c w[r, c] x[t, c] for a few tokens (2-8: qlinear.fp32_jit_max_tokens):
        # each row, read once from memory, serves 8, then 4, 2 and 1 tokens at a time from L1
        # (an 8-wide pass ran SmolLM2's 120 products at 8 tokens in 32 ms against 38 for
        # two 4-wide ones; docs/cpu-kernels.md).
        n, k = w.shape
        m = x_rows.shape[0]
        for ch in prange((n + ROW_CHUNK - 1) // ROW_CHUNK):  # noqa: F821 - a global (_with_globals)
            for r in range(ch * ROW_CHUNK, min(n, (ch + 1) * ROW_CHUNK)):
                wr = w[r]
                t = 0
                while t + 8 <= m:
                    x0, x1, x2, x3 = x_rows[t], x_rows[t + 1], x_rows[t + 2], x_rows[t + 3]
                    x4, x5, x6, x7 = x_rows[t + 4], x_rows[t + 5], x_rows[t + 6], x_rows[t + 7]
                    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
                    for c in range(k):
                        wc = wr[c]
                        a0 += wc * x0[c]
                        a1 += wc * x1[c]
                        a2 += wc * x2[c]
                        a3 += wc * x3[c]
                        a4 += wc * x4[c]
                        a5 += wc * x5[c]
                        a6 += wc * x6[c]
                        a7 += wc * x7[c]
                    out[r, t], out[r, t + 1], out[r, t + 2], out[r, t + 3] = a0, a1, a2, a3
                    out[r, t + 4], out[r, t + 5], out[r, t + 6], out[r, t + 7] = a4, a5, a6, a7
                    t += 8
                if t + 4 <= m:
                    dot4(wr, x_rows, t, out, r)  # noqa: F821 - a global (_with_globals)
                    t += 4
                if t + 2 <= m:
                    x0, x1 = x_rows[t], x_rows[t + 1]
                    a0 = a1 = np.float32(0.0)
                    for c in range(k):
                        wc = wr[c]
                        a0 += wc * x0[c]
                        a1 += wc * x1[c]
                    out[r, t], out[r, t + 1] = a0, a1
                    t += 2
                if t < m:
                    xr = x_rows[t]
                    acc = np.float32(0.0)
                    for c in range(k):
                        acc += wr[c] * xr[c]
                    out[r, t] = acc

    @njit(fastmath=True, cache=True)
    def _q4_blocks(qt, d, m, xa, xb, xs, out, c0, c1):  # pragma: no cover - compiled
        # Blocks c0..c1-1 of q4_matmul (below), compiled as a plain function: inside a
        # prange body (a parfor) the same loops did not vectorize and took 2x the time.
        nc, ng, _, rb = qt.shape
        m_tok = xa.shape[0]
        acc = np.empty((m_tok, rb), dtype=np.float32)
        tot = np.empty((m_tok, rb), dtype=np.float32)
        flo = np.empty(rb, dtype=np.float32)
        fb = np.empty(rb, dtype=np.float32)
        for c in range(c0, c1):
            for t in range(m_tok):
                for j in range(rb):
                    tot[t, j] = 0.0
            for g in range(ng):
                for t in range(m_tok):
                    for j in range(rb):
                        acc[t, j] = 0.0
                for i in range(16):
                    qi = qt[c, g, i]
                    if m_tok == 1:
                        u = xa[0, g * 16 + i]
                        v = xb[0, g * 16 + i]
                        at = acc[0]
                        for j in range(rb):
                            b = np.int32(qi[j])
                            at[j] += np.float32(b & 15) * u + np.float32(b) * v
                        continue
                    for j in range(rb):  # more tokens: each byte widened once, used by all
                        b = np.int32(qi[j])
                        flo[j] = np.float32(b & 15)
                        fb[j] = np.float32(b)
                    for t in range(m_tok):
                        u = xa[t, g * 16 + i]
                        v = xb[t, g * 16 + i]
                        at = acc[t]
                        for j in range(rb):
                            at[j] += flo[j] * u + fb[j] * v
                dg = d[c, g]
                mg = m[c, g]
                for t in range(m_tok):
                    xsg = xs[t, g]
                    at = acc[t]
                    tt = tot[t]
                    for j in range(rb):
                        tt[j] += dg[j] * at[j] + mg[j] * xsg
            for t in range(m_tok):
                for j in range(rb):
                    out[c * rb + j, t] = tot[t, j]

    def q4_matmul(qt, d, m, x_rows, out, tasks):  # pragma: no cover - compiled
        # 4-bit groups of 32 (w = q d + m, q in 0..15) laid out by q4_layout: for each
        # block of R rows and group g, 16 byte-rows of R bytes; byte i of a row holds
        # elements i (low nibble) and 16 + i (high nibble) of its group, as in GGUF.
        # The vector loop runs across the R rows of a block (contiguous bytes, no
        # horizontal sums). The high nibble is never shifted out: with b the byte and
        # lo = b & 15, hi = (b - lo) / 16, so lo x_i + hi x_16+i = lo (x_i - x_16+i / 16)
        # + b (x_16+i / 16), two products of whole bytes (a shift of numba's int64
        # kept LLVM from vectorizing). Per group: sum_k w_k x_k = d sum q x + m sum x.
        nc, ng, _, rb = qt.shape
        m_tok = x_rows.shape[0]
        xa = np.empty((m_tok, ng * 16), dtype=np.float32)
        xb = np.empty((m_tok, ng * 16), dtype=np.float32)
        xs = np.empty((m_tok, ng), dtype=np.float32)
        for t in range(m_tok):
            for g in range(ng):
                s = np.float32(0.0)
                for i in range(16):
                    lo = x_rows[t, g * 32 + i]
                    hi = x_rows[t, g * 32 + 16 + i]
                    xb[t, g * 16 + i] = hi * np.float32(0.0625)
                    xa[t, g * 16 + i] = lo - hi * np.float32(0.0625)
                    s += lo + hi
                xs[t, g] = s
        # ``tasks`` (the thread count) runs of blocks, each a plain compiled call.
        parts = max(1, min(nc, tasks))
        for part in prange(parts):  # noqa: F821 - a global (_with_globals)
            c0, c1 = part * nc // parts, (part + 1) * nc // parts
            q4_blocks(qt, d, m, xa, xb, xs, out, c0, c1)  # noqa: F821 - a global (_with_globals)

    # One thread: compiled as plain loops (prange is range), cached to disk. More threads:
    # the same code with prange over row chunks, compiled on first use (not cached: one
    # cache entry per function), on numba's workqueue layer (its OpenMP layer slowed
    # PyTorch's OpenMP kernels 25x in the same process: engine/qlinear.py).
    numba.config.THREADING_LAYER = "workqueue"
    # The loops reach dot4, q4_blocks, the row functions, prange, f32_bits and stream_prefetch
    # as globals (see _with_globals: a closure over a dispatcher missed the disk cache in every
    # new process).
    names = dict(
        dot4=_dot4,
        q4_blocks=_q4_blocks,
        prange=numba_prange,
        f32_bits=f32_bits(),
        stream_prefetch=bf16_prefetch(),
    )
    # (local names other than the globals the loops call: a local of this function would be a
    # closure cell of theirs)
    rows_int8, rows_bf16 = (
        njit(fastmath=True, cache=True)(_with_globals(f, **names)) for f in (_int8_rows, _bf16_rows)
    )
    names.update(int8_rows=rows_int8, bf16_rows=rows_bf16)
    int8_matmul, bf16_matmul, fp32_matmul, q4_matmul = (
        _with_globals(f, **names) for f in (int8_matmul, bf16_matmul, fp32_matmul, q4_matmul)
    )
    serial = njit(fastmath=True, cache=True)
    threaded = njit(fastmath=True, parallel=True)
    isa = q4_isa()
    q4i = q4_int_kernels(isa) if isa is not None else (None,) * 5
    int8i = int8_int_kernels(isa) if isa is not None else (None,) * 4
    return Kernels(
        attend,
        rms_norm_one,
        serial(int8_matmul),
        serial(bf16_matmul),
        serial(fp32_matmul),
        serial(q4_matmul),
        threaded(int8_matmul),
        threaded(bf16_matmul),
        threaded(fp32_matmul),
        threaded(q4_matmul),
        _q4_blocks,
        *q4i[:4],
        *int8i,
        q4i[4],
        rows_int8,
        rows_bf16,
    )


def q4_float_layout(q: np.ndarray, d: np.ndarray, m: np.ndarray):
    """The float q4 kernel's (``q4_matmul``) layout of 4-bit groups of 32 (``w = q d + m``,
    q uint8 [N, K] in 0..15, d and m float32 [N, K/32]): (qt uint8 [C, G, 16, R], d and m
    float32 [C, G, R]), rows padded with zeros to C blocks of R = :data:`Q4_ROWS`."""
    n, k = q.shape
    g = k // 32
    pad = -n % Q4_ROWS
    c = (n + pad) // Q4_ROWS
    qp = np.pad(q, ((0, pad), (0, 0))).reshape(c, Q4_ROWS, g, 2, 16)
    packed = qp[:, :, :, 0, :] | (qp[:, :, :, 1, :] << 4)  # [C, R, G, 16]
    qt = np.ascontiguousarray(packed.transpose(0, 2, 3, 1))

    def blocks(a: np.ndarray) -> np.ndarray:
        a = np.pad(a.astype(np.float32), ((0, pad), (0, 0))).reshape(c, Q4_ROWS, g)
        return np.ascontiguousarray(a.transpose(0, 2, 1))

    return qt, blocks(d), blocks(m)


def q4_layout(q: np.ndarray, d: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, ...]:
    """The layout the q4 kernel of this CPU reads (``w = q d + m``, q uint8 [N, K] in 0..15,
    d and m float32 [N, K/32]): ``(qv,)`` (:func:`q4_int_layout`) where the integer kernel
    runs (:func:`q4_isa`), else ``(qt, d, m)`` (:func:`q4_float_layout`)."""
    if Q4_INT and q4_isa() is not None:
        return (q4_int_layout(q, d, m),)
    return q4_float_layout(q, d, m)


def q4_int_layout(q: np.ndarray, d: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The integer q4 kernel's layout: qv uint8 [C, G, :data:`Q4_INT_GROUP_BYTES`], rows padded
    with zeros to C blocks of R = :data:`Q4_ROWS`. Group g of block c is 4 words k of R x 4
    bytes (row j's 4 bytes at 4 j; byte b holds element 4 k + b in its low nibble and
    16 + 4 k + b in its high one, GGUF's pairing), then the R rows' d, then their m, as fp16
    (GGUF's Q4_0/Q4_1 store fp16: exact for them; a matrix quantized here is rounded)."""
    n, k = q.shape
    g = k // 32
    pad = -n % Q4_ROWS
    c = (n + pad) // Q4_ROWS
    qp = np.pad(q, ((0, pad), (0, 0))).reshape(c, Q4_ROWS, g, 2, 16)
    packed = (qp[:, :, :, 0, :] | (qp[:, :, :, 1, :] << 4)).reshape(c, Q4_ROWS, g, 4, 4)
    out = huge_empty((c, g, Q4_INT_GROUP_BYTES), np.uint8)
    out[:, :, : 16 * Q4_ROWS] = packed.transpose(0, 2, 3, 1, 4).reshape(c, g, 16 * Q4_ROWS)
    for i, a in enumerate((d, m)):
        a16 = np.pad(a.astype(np.float16), ((0, pad), (0, 0))).reshape(c, Q4_ROWS, g)
        at = 16 * Q4_ROWS + 2 * Q4_ROWS * i
        out[:, :, at : at + 2 * Q4_ROWS] = a16.transpose(0, 2, 1).copy().view(np.uint8)
    return out


HUGE_PAGE = 2 << 20  # bytes of an x86-64 transparent huge page


def huge_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """``np.empty(shape, dtype)`` for a matrix a decode step streams: from ``HUGE_PAGE`` bytes
    up, in an anonymous mapping aligned to huge pages and advised ``MADV_HUGEPAGE`` (Linux
    ``madvise(2)``; with the kernel's ``transparent_hugepage`` setting ``madvise``, as here,
    only such memory gets them, and numpy's own advice covers only the aligned middle of its
    buffers: SmolLM2's stacked QKV matrices had none). Fewer TLB misses in the stream:
    SmolLM2's 120 q4 layer products took 1.74-1.78 ms against 1.82-1.83, the fused step and head
    2.63-2.69 against 2.76-2.84 (one thread, alternated in one process, 2026-12-05, load 3-3.6).
    Elsewhere plain ``np.empty``."""
    import mmap

    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if n < HUGE_PAGE or not hasattr(mmap, "MADV_HUGEPAGE"):
        return np.empty(shape, dtype=dtype)
    m = mmap.mmap(-1, n + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        m.madvise(mmap.MADV_HUGEPAGE)
    except OSError:  # EINVAL where the kernel has no transparent huge pages: small pages
        pass
    buf = np.frombuffer(m, dtype=np.uint8)  # keeps the mapping alive
    off = -buf.ctypes.data % HUGE_PAGE
    return buf[off : off + n].view(dtype).reshape(shape)


def _with_globals(fn, **names):
    """``fn`` with ``names`` bound as globals, not closure cells: numba's disk cache keys a
    function by its closure cells' pickle (``numba/core/caching.py`` ``_index_key``), and a
    dispatcher or an ``@intrinsic`` pickles with a per-process uuid, so a closure over one
    misses the cache in every new process (and adds an entry to it)."""
    import types as pytypes

    assert not fn.__code__.co_freevars, fn.__code__.co_freevars
    return pytypes.FunctionType(fn.__code__, {**fn.__globals__, **names}, fn.__name__)


def _ir_declare(builder, name: str, ret, params):
    """The LLVM function ``name`` (an x86 or LLVM intrinsic) declared in the builder's module."""
    from llvmlite import ir
    from numba.core import cgutils

    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, params), name)


def _ir_shuffle(builder, a, b, idx: list[int]):
    """LLVM ``shufflevector`` of a and b by the lane numbers ``idx``."""
    from llvmlite import ir

    return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(ir.IntType(32), len(idx)), idx))


def _ir_splat(builder, val, vt):
    """A vector of type ``vt`` with ``val`` in every lane."""
    from llvmlite import ir

    undef = ir.Constant(vt, ir.Undefined)
    v = builder.insert_element(undef, val, ir.Constant(ir.IntType(32), 0))
    return _ir_shuffle(builder, v, undef, [0] * vt.count)


Q4_ISAS = ("vnni512", "bw512", "avx2")  # the integer q4 kernel's variants, fastest first


@cache
def q4_isa() -> str | None:
    """The integer q4 kernel's variant for this CPU, as LLVM sees it (numba compiles for the
    host CPU, ``-mcpu=native``): ``vnni512`` (AVX-512 VNNI ``vpdpbusd``), ``bw512`` (AVX-512BW
    ``vpmaddubsw`` + ``vpmaddwd``), ``avx2`` (the same on 256 bits), or None (no numba, another
    architecture, or ``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` set: a chosen target may lack
    them): the float kernel."""
    try:
        import llvmlite.binding as llvm
        import numba

        if numba.config.CPU_NAME or numba.config.CPU_FEATURES:
            return None
        f = llvm.get_host_cpu_features()
    except (ImportError, RuntimeError):
        return None
    if f.get("avx512vnni") and f.get("avx512bw"):
        return "vnni512"
    if f.get("avx512bw"):
        return "bw512"
    return "avx2" if f.get("avx2") and f.get("f16c") else None


@cache
def q4_int_kernels(isa: str) -> tuple:
    """(matmul, matmul_threads, quantize, blocks, blocks_tokens) of the integer q4 kernel (see
    :class:`Kernels`) in variant ``isa`` (:data:`Q4_ISAS`); cached to disk only for this
    CPU's own variant (a forced one, in tests, compiles afresh).

    The activation row is quantized once per product to int8 in groups of 32, as GGUF's
    Q8_1 (ggml ``quantize_row_q8_1_ref``, ggml/src/ggml-quants.c: ``d = max|x| / 127``,
    ``q = round(x / d)``), plus a second int8 plane for what that rounding left,
    ``r = round(256 (x / d - q))``, so x = d (q + r / 256) to 1/512 of d (llama.cpp keeps
    only q: with it alone the teacher-forced decode logits of SmolLM2-135M's Q4_1 file moved
    13 % from fp32's against 3.9 % for float activations; with r, 3.9 %:
    benchmarks/q4_decode_quality.py). The group's exact float sum stands in for ggml's
    ``s = d * sum(q)`` in the offset term. Each group's dot product is then integer: 4-bit
    weights (0..15, as unsigned bytes) times both int8 planes, summed 4 at a time into int32
    lanes by ``vpdpbusd`` (AVX-512 VNNI), or by ``vpmaddubsw`` (pairs into int16: at most
    4 x 15 x 127 for the two nibbles' pairs, no saturation) and ``vpmaddwd`` by ones: the two
    paths of llama.cpp's ``mul_sum_us8_pairs_float`` (ggml/src/ggml-cpu/arch/x86/quants.c);
    then ``256 sum(w q) + sum(w r)`` (below 2^24: exact in float32) takes one float
    multiply-add per group: ``d_w (d / 256) (...) + m_w sum(x)`` (as its
    ``ggml_vec_dot_q4_1_q8_1``). Unlike llama.cpp each int32 lane is a row (16 or 8 a
    vector, 64 a block), so there are no horizontal sums. The second plane doubles the
    integer work at no cost in time: the loop waits on DRAM (docs/cpu-kernels.md).

    numba has no vector types: the block is LLVM IR written here (``@intrinsic``) around
    the x86 intrinsics, so it is only compiled where :func:`q4_isa` says the CPU has them
    (numba's disk cache keys entries by CPU name and features, ``numba/core/caching.py``
    ``_index_key``)."""
    import llvmlite.binding as llvm
    from llvmlite import ir
    from numba import njit, types
    from numba import prange as numba_prange
    from numba.core import cgutils
    from numba.extending import intrinsic

    # typed pointers' name before LLVM 15's opaque ones (as prefetch, above)
    pf_name = "llvm.prefetch.p0" if llvm.llvm_version_info >= (15,) else "llvm.prefetch.p0i8"
    i8, i16, i32, i64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
    f16, f32 = ir.HalfType(), ir.FloatType()
    vb = 32 if isa == "avx2" else 64  # bytes a vector
    nl = vb // 4  # int32 lanes (rows) a vector
    nv = 4 * Q4_ROWS // vb  # vectors a word of the block
    v_i8, v_i16, v_i32 = ir.VectorType(i8, vb), ir.VectorType(i16, vb // 2), ir.VectorType(i32, nl)
    v_f16, v_f32 = ir.VectorType(f16, nl), ir.VectorType(f32, nl)

    declare, splat = _ir_declare, _ir_splat

    def dot(builder, acc, wlo, whi, xlo, xhi):
        """acc + per int32 lane: the 4 unsigned bytes of wlo times the 4 signed ones of xlo,
        plus whi's times xhi's."""
        if isa == "vnni512":
            fn = declare(builder, "llvm.x86.avx512.vpdpbusd.512", v_i32, [v_i32] * 3)
            acc = builder.call(fn, [acc, builder.bitcast(wlo, v_i32), xlo])
            return builder.call(fn, [acc, builder.bitcast(whi, v_i32), xhi])
        wide = isa == "bw512"
        n1 = "llvm.x86.avx512.pmaddubs.w.512" if wide else "llvm.x86.avx2.pmadd.ub.sw"
        n2 = "llvm.x86.avx512.pmaddw.d.512" if wide else "llvm.x86.avx2.pmadd.wd"
        f1 = declare(builder, n1, v_i16, [v_i8, v_i8])
        f2 = declare(builder, n2, v_i32, [v_i16, v_i16])
        pairs = builder.add(  # each int16 at most 4 x 15 x 127: no overflow
            builder.call(f1, [wlo, builder.bitcast(xlo, v_i8)]),
            builder.call(f1, [whi, builder.bitcast(xhi, v_i8)]),
        )
        if acc.type == v_i16:  # a group's int16 sums (widen16 when the group is done)
            return builder.add(acc, pairs)
        return builder.add(acc, builder.call(f2, [pairs, ir.Constant(v_i16, [1] * (vb // 2))]))

    def widen16(builder, acc16):
        """A group's int16 lane sums, pairwise into int32 lanes (``vpmaddwd`` by ones)."""
        n2 = "llvm.x86.avx512.pmaddw.d.512" if isa == "bw512" else "llvm.x86.avx2.pmadd.wd"
        f2 = declare(builder, n2, v_i32, [v_i16, v_i16])
        return builder.call(f2, [acc16, ir.Constant(v_i16, [1] * (vb // 2))])

    def emit_block(context, builder, qa, c, toks):
        """Block c of qv (C-contiguous [C, G, 1280]) times the quantized tokens ``toks``: a
        list of (xq, xd, xs, tot) pointers, token by token; each group's weights are loaded and
        split into nibbles once for all of them, and each token's sums are the one-token
        block's, in the same order (its integer sums are exact: equal to the bit)."""
        ng = cgutils.unpack_tuple(builder, qa.shape)[1]
        wp = builder.bitcast(qa.data, i8.as_pointer())
        fma = declare(builder, f"llvm.fma.v{nl}f32", v_f32, [v_f32] * 3)
        tots = [
            [cgutils.alloca_once_value(builder, ir.Constant(v_f32, [0.0] * nl)) for _ in range(nv)]
            for _ in toks
        ]
        four, low = ir.Constant(v_i8, [4] * vb), ir.Constant(v_i8, [15] * vb)
        cb = builder.mul(c, ng)

        def at(base, off, vt):
            ptr = builder.gep(wp, [builder.add(base, ir.Constant(i64, off))])
            return builder.load(builder.bitcast(ptr, vt.as_pointer()), align=1)

        pf_params = [i8.as_pointer(), i32, i32, i32]
        pf = declare(builder, pf_name, ir.VoidType(), pf_params)
        # read, non-temporal (STREAM_LOCALITY), data
        pf_args = [ir.Constant(i32, v) for v in (0, STREAM_LOCALITY, 1)]
        gb = ir.Constant(i64, Q4_INT_GROUP_BYTES)
        size = builder.mul(builder.mul(ng, cgutils.unpack_tuple(builder, qa.shape)[0]), gb)
        with cgutils.for_range(builder, ng) as loop:
            g = loop.index
            base = builder.mul(builder.add(cb, g), gb)
            ahead = builder.add(base, ir.Constant(i64, Q4_PREFETCH_AHEAD_BYTES))
            on = Q4_PREFETCH_AHEAD_BYTES > 0
            with builder.if_then(
                builder.and_(ir.Constant(ir.IntType(1), on), builder.icmp_signed("<", ahead, size))
            ):
                for line in range(0, Q4_INT_GROUP_BYTES, CACHE_LINE_BYTES):
                    ptr = builder.gep(wp, [builder.add(ahead, ir.Constant(i64, line))])
                    builder.call(pf, [ptr, *pf_args])
            xbase = builder.mul(g, ir.Constant(i64, 64))
            # the two int8 planes' sums, token by token; without VNNI in int16 lanes for the
            # whole group (4 words: at most 4 x 4 x 15 x 127 = 30,480, no overflow), widened
            # to int32 once a group, not once a word (the same exact sums, 3 in 4 vpmaddwd saved)
            zero = (
                ir.Constant(v_i32, [0] * nl)
                if isa == "vnni512"
                else ir.Constant(v_i16, [0] * (vb // 2))
            )
            coarse = [[zero] * nv for _ in toks]
            fine = [[zero] * nv for _ in toks]
            for k in range(4):
                words = []  # each token's 4 activations of the low and the high nibbles, a plane
                for xp, _, _, _ in toks:
                    ws = []
                    for off in (4 * k, 16 + 4 * k, 32 + 4 * k, 48 + 4 * k):
                        ptr = builder.gep(xp, [builder.add(xbase, ir.Constant(i64, off))])
                        word = builder.load(builder.bitcast(ptr, i32.as_pointer()), align=1)
                        ws.append(splat(builder, word, v_i32))
                    words.append(ws)
                for v in range(nv):
                    w = at(base, k * 4 * Q4_ROWS + v * vb, v_i8)
                    lo, hi = builder.and_(w, low), builder.lshr(w, four)
                    for u, wu in enumerate(words):
                        coarse[u][v] = dot(builder, coarse[u][v], lo, hi, wu[0], wu[1])
                        fine[u][v] = dot(builder, fine[u][v], lo, hi, wu[2], wu[3])
            if isa != "vnni512":
                coarse = [[widen16(builder, a) for a in row] for row in coarse]
                fine = [[widen16(builder, a) for a in row] for row in fine]
            dxs, sxs = [], []
            for _, xd, xs, _ in toks:
                dxs.append(splat(builder, builder.load(builder.gep(xd, [g])), v_f32))
                sxs.append(splat(builder, builder.load(builder.gep(xs, [g])), v_f32))
            for v in range(nv):
                dv = builder.fpext(at(base, 16 * Q4_ROWS + 2 * nl * v, v_f16), v_f32)
                mv = builder.fpext(at(base, 18 * Q4_ROWS + 2 * nl * v, v_f16), v_f32)
                for u in range(len(toks)):
                    # 256 coarse + fine: below 2^24 (32 x 15 x 127 x 257), exact in float32
                    acc = builder.add(
                        builder.shl(coarse[u][v], ir.Constant(v_i32, [8] * nl)), fine[u][v]
                    )
                    t = builder.load(tots[u][v])
                    t = builder.call(fma, [builder.sitofp(acc, v_f32), builder.fmul(dv, dxs[u]), t])
                    builder.store(builder.call(fma, [mv, sxs[u], t]), tots[u][v])
        for u, (_, _, _, out) in enumerate(toks):
            for v in range(nv):
                ptr = builder.gep(out, [ir.Constant(i64, v * nl)])
                builder.store(
                    builder.load(tots[u][v]), builder.bitcast(ptr, v_f32.as_pointer()), align=1
                )

    @intrinsic
    def dot_block(typingctx, qv, xq, xd, xs, tot, c):
        """tot[0:64] = block c of qv (C-contiguous [C, G, 1280]) times the quantized token."""
        if not (isinstance(qv, types.Array) and qv.layout == "C" and qv.ndim == 3):
            return None

        def codegen(context, builder, sig, args):
            qa, xa, xda, xsa, ta = (
                context.make_array(t)(context, builder, a)
                for t, a in zip(sig.args[:5], args[:5], strict=True)
            )
            xp = builder.bitcast(xa.data, i8.as_pointer())
            emit_block(context, builder, qa, args[5], [(xp, xda.data, xsa.data, ta.data)])
            return context.get_dummy_value()

        return types.none(qv, xq, xd, xs, tot, types.int64), codegen

    @intrinsic
    def dot_block_pair(typingctx, qv, xq, xd, xs, tot, c, t0):
        """tot[u, 0:64] = block c of qv times token t0 + u of xq, xd, xs ([T, ...], C order),
        u = 0, 1: dot_block's sums for two tokens, the block's bytes loaded once."""
        if not (isinstance(qv, types.Array) and qv.layout == "C" and qv.ndim == 3):
            return None
        if not all(isinstance(a, types.Array) and a.layout == "C" for a in (xq, xd, xs, tot)):
            return None

        def codegen(context, builder, sig, args):
            qa, xa, xda, xsa, ta = (
                context.make_array(t)(context, builder, a)
                for t, a in zip(sig.args[:5], args[:5], strict=True)
            )

            def row(arr, t, ty):  # row t of a C-ordered 2-D array, as a pointer to ``ty``
                stride = cgutils.unpack_tuple(builder, arr.strides)[0]
                p = builder.gep(
                    builder.bitcast(arr.data, i8.as_pointer()), [builder.mul(t, stride)]
                )
                return builder.bitcast(p, ty.as_pointer())

            toks = []
            for u in range(2):
                t = builder.add(args[6], ir.Constant(i64, u))
                toks.append(
                    (
                        row(xa, t, i8),
                        row(xda, t, f32),
                        row(xsa, t, f32),
                        builder.gep(ta.data, [ir.Constant(i64, u * Q4_ROWS)]),
                    )
                )
            emit_block(context, builder, qa, args[5], toks)
            return context.get_dummy_value()

        return types.none(qv, xq, xd, xs, tot, types.int64, types.int64), codegen

    keep = isa == q4_isa()  # cache only the variant this CPU runs (see the doc)

    @njit(fastmath=True, nogil=True, cache=keep)
    def quantize(v, xq, xd, xs):  # pragma: no cover - compiled
        # x [K] -> xq int8 [2K]: per group of 32, q = round(x / d) (d = max|x| / 127), then
        # the rest, round(256 (x / d - q)); xd [K/32] = d / 256, xs [K/32] the group's sum
        for g in range(xd.shape[0]):
            amax = np.float32(0.0)
            s = np.float32(0.0)
            for i in range(32):
                a = v[g * 32 + i]
                amax = max(amax, abs(a))
                s += a
            inv = np.float32(127.0) / amax if amax > 0 else np.float32(0.0)
            for i in range(32):
                y = v[g * 32 + i] * inv
                q = np.rint(y)
                r = np.rint((y - q) * np.float32(256.0))
                xq[g * 64 + i] = np.int8(q)
                xq[g * 64 + 32 + i] = np.int8(min(max(r, np.float32(-127.0)), np.float32(127.0)))
            xd[g] = amax / np.float32(127.0 * 256.0)
            xs[g] = s

    def blocks(qv, xq, xd, xs, out, t, c0, c1):  # pragma: no cover - compiled
        tot = np.empty(Q4_ROWS, dtype=np.float32)
        for c in range(c0, c1):
            q4i_dot_block(qv, xq, xd, xs, tot, c)  # noqa: F821 - a global of _with_globals
            for j in range(Q4_ROWS):
                out[c * Q4_ROWS + j, t] = tot[j]

    blocks = njit(fastmath=True, nogil=True, cache=keep)(
        _with_globals(blocks, q4i_dot_block=dot_block)
    )

    def blocks_tokens(qv, xq, xd, xs, out, c0, c1):  # pragma: no cover - compiled
        # blocks c0..c1-1 for every token (xq, xd, xs [T, ...]), the token loop inside each
        # block: its 64 rows' bytes (23 KB at K = 576) are read from DRAM once and from L1 by
        # the other tokens, where a token loop around all the blocks read the matrix once a
        # token (from L2/L3 after the first); two tokens at a time (dot_block_pair: each
        # weight vector loaded and split into nibbles once for both), an odd last one alone
        tot = np.empty((2, Q4_ROWS), dtype=np.float32)
        m_tok = xq.shape[0]
        for c in range(c0, c1):
            t = 0
            while t + 2 <= m_tok:
                q4i_dot_block_pair(qv, xq, xd, xs, tot, c, t)  # noqa: F821
                for j in range(Q4_ROWS):
                    out[c * Q4_ROWS + j, t] = tot[0, j]
                    out[c * Q4_ROWS + j, t + 1] = tot[1, j]
                t += 2
            if t < m_tok:
                q4i_dot_block(qv, xq[t], xd[t], xs[t], tot[0], c)  # noqa: F821
                for j in range(Q4_ROWS):
                    out[c * Q4_ROWS + j, t] = tot[0, j]

    blocks_tokens = njit(fastmath=True, nogil=True, cache=keep)(
        _with_globals(blocks_tokens, q4i_dot_block=dot_block, q4i_dot_block_pair=dot_block_pair)
    )

    def matmul(qv, x_rows, out, tasks):  # pragma: no cover - compiled
        nc, ng = qv.shape[0], qv.shape[1]
        m_tok = x_rows.shape[0]
        xq = np.empty((m_tok, ng * 64), dtype=np.int8)
        xd = np.empty((m_tok, ng), dtype=np.float32)
        xs = np.empty((m_tok, ng), dtype=np.float32)
        for t in range(m_tok):
            q4i_quantize(x_rows[t], xq[t], xd[t], xs[t])  # noqa: F821
        parts = max(1, min(nc, tasks))
        for part in prange(parts):  # noqa: F821
            c0, c1 = part * nc // parts, (part + 1) * nc // parts
            if m_tok == 1:  # one token: its row (a 1-D array), as the fused step
                q4i_blocks(qv, xq[0], xd[0], xs[0], out, 0, c0, c1)  # noqa: F821
            else:
                q4i_blocks_tokens(qv, xq, xd, xs, out, c0, c1)  # noqa: F821

    matmul = _with_globals(
        matmul,
        q4i_quantize=quantize,
        q4i_blocks=blocks,
        q4i_blocks_tokens=blocks_tokens,
        prange=numba_prange,
    )
    return (
        njit(fastmath=True, cache=keep)(matmul),
        njit(fastmath=True, parallel=True)(matmul),
        quantize,
        blocks,
        blocks_tokens,
    )


INT8_INT = True  # False: the float int8 loop on every CPU (a switch for old-vs-new benchmarks)
INT8_INT_MAX_COLS = 65536  # columns up to which the integer int8 kernel's int32 sums cannot wrap
I8_GROUP_ROWS = 8  # rows the integer int8 kernel sums at once (their 16 int32 sums overlap)
# Software prefetch (llvm.prefetch to L1) of the rows this many groups ahead, 0: none; for 2+
# tokens (one token has its own loop, below). Measured when one token also ran the groups:
# SmolLM2-135M's 120 layer products, one thread, one token, ms CPU (load ~3, 2026-12-05): none
# 4.0-4.1, 1 group 3.1-3.4, 2 groups 3.0-3.2, 4 and 8 3.4-3.9; the float loop 3.4-3.5. Also
# tried, no faster: 4 or 16 rows a group, each row's bytes in turn, two runs of rows at once,
# prefetch to L2, rows aligned to 64 bytes (docs/history/engine-weight-formats.md, int8vnni).
I8_PREFETCH_GROUPS = 2
# How far ahead the one-token loop (one row at a time) asks for each row's lines, in bytes.
# SmolLM2-135M's 120 products in the fused step's chain, one thread, one process, 30 rounds
# alternated (2026-12-05, load 2.9-3.2, read rate 40.6-43.0 GB/s), GB/s: 2 KB 37.4, 4 KB
# (bf16's PREFETCH_AHEAD_BYTES) 38.0-38.9, 6 KB 40.8-41.0, 7 KB 42.3, 8 KB 42.3-44.3, 10 KB
# 43.9, 12 KB 37.3-43.0, 16 KB 36.7; bf16's rows 40.4-41.1 in the same runs
# (docs/history/engine-weight-formats.md, int8stream).
I8_AHEAD_BYTES = 8192


def int8_int_ok(k: int) -> bool:
    """Whether an int8 matrix of ``k`` columns runs the integer kernel here: numba and a
    variant for this CPU (:func:`q4_isa`), :data:`INT8_INT` on, and ``k`` whole vectors of
    64 bytes, at most :data:`INT8_INT_MAX_COLS`; else the float loop."""
    return INT8_INT and 0 < k <= INT8_INT_MAX_COLS and k % 64 == 0 and q4_isa() is not None


@cache
def int8_int_kernels(isa: str) -> tuple:
    """(matmul, matmul_threads, quantize, rows) of the integer int8 kernel in variant ``isa``
    (:data:`Q4_ISAS`); cached to disk only for this CPU's own variant (as
    :func:`q4_int_kernels`).

    ``matmul(q, ws, scale, x_rows, out)``: out[r, t] = scale[r] sum_c q[r, c] x[t, c] for
    int8 rows q [N, K] (row-major, as :class:`~infercast.engine.qlinear.Int8Matrix` keeps
    them), their sums ``ws`` (int32 [N]) and float32 scales. Each token is quantized once
    (``quantize``) to two 8-bit planes with one scale d = max|x| / 127: q = round(x / d) and
    r = round(256 (x / d - q)), so x = d (q + r / 256) to d / 512 (2^-16 of max|x|; the
    weights' own rounding is up to 2^-8 of their row's largest), stored as q + 128 and
    r + 128 (unsigned bytes: ``vpdpbusd`` multiplies unsigned by signed bytes). Each row's
    dot product with each plane is then integer, 64 (or 32) bytes a vector op: for one token
    one row at a time in address order, its lines prefetched :data:`I8_AHEAD_BYTES` ahead
    (as bf16's one-token loop; 33 -> 42-44 GB/s, docs/history/engine-weight-formats.md,
    int8stream), for more :data:`I8_GROUP_ROWS` rows at a time (their int32 sums overlap),
    one reduction of the vectors at the end (a shuffle tree). The VNNI variant sums
    w (q + 128) with ``vpdpbusd`` and subtracts 128 ws; the others use llama.cpp's sign
    trick (|w| unsigned times x with w's sign, ``vpmaddubsw``: at most 2 x 128 x 127, no
    saturation; then ``vpmaddwd`` by ones; ggml/src/ggml-cpu/arch/x86/quants.c
    ``mul_sum_i8_pairs_float``) on the planes less 128. out = scale d (sum w q + (sum w r)
    / 256) in float32. The int32 sums (at most K x 255 x 128) hold for K up to
    :data:`INT8_INT_MAX_COLS`; columns beyond the last whole vector are summed by a scalar
    loop. ``rows(q, ws, scale, xq, d, out, r0, r1)``: rows
    r0..r1-1 (r0 a multiple of 8) for every token of xq [T, 2K] (the planes), d [T]."""
    from llvmlite import ir
    from numba import njit, types
    from numba import prange as numba_prange
    from numba.core import cgutils
    from numba.extending import intrinsic

    i8, i16, i32, i64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
    f32 = ir.FloatType()
    vb = 32 if isa == "avx2" else 64  # bytes a vector
    nl = vb // 4  # int32 lanes a vector
    v_i8, v_i16, v_i32 = ir.VectorType(i8, vb), ir.VectorType(i16, vb // 2), ir.VectorType(i32, nl)
    vnni = isa == "vnni512"

    declare, shuffle, splat = _ir_declare, _ir_shuffle, _ir_splat

    def reduce_tree(builder, vecs):
        """One int32 vector whose lane i is the sum of vecs[i]'s lanes (len(vecs) a power of
        two): pairs of vectors add their halves' lanes, then the last vector its own, until
        one lane is left a source; more sources than lanes: in runs of a vector's lanes,
        joined."""
        if len(vecs) > nl:
            parts = [reduce_tree(builder, vecs[i : i + nl]) for i in range(0, len(vecs), nl)]
            while len(parts) > 1:
                n = parts[0].type.count
                parts = [
                    shuffle(builder, a, b, list(range(2 * n)))
                    for a, b in zip(parts[::2], parts[1::2], strict=True)
                ]
            return parts[0]
        s = nl  # lanes a source holds in each vector
        while len(vecs) > 1:
            lo = [c * s + i for c in range(2 * nl // s) for i in range(s // 2)]
            hi = [j + s // 2 for j in lo]
            vecs = [
                builder.add(shuffle(builder, a, b, lo), shuffle(builder, a, b, hi))
                for a, b in zip(vecs[::2], vecs[1::2], strict=True)
            ]
            s //= 2
        x, width = vecs[0], nl
        while s > 1:
            lo = [c * s + i for c in range(width // s) for i in range(s // 2)]
            hi = [j + s // 2 for j in lo]
            x = builder.add(shuffle(builder, x, x, lo), shuffle(builder, x, x, hi))
            width //= 2
            s //= 2
        return x

    def prep(builder, x):
        """A plane's bytes (q + 128) as the dot product takes them: as they are for VNNI,
        else signed (q)."""
        return x if vnni else builder.xor(x, ir.Constant(v_i8, [-128] * vb))

    def dot(builder, acc, x, w):
        """acc + per int32 lane: 4 bytes of plane x times the 4 signed weights of w."""
        if vnni:
            fn = declare(builder, "llvm.x86.avx512.vpdpbusd.512", v_i32, [v_i32] * 3)
            return builder.call(fn, [acc, builder.bitcast(x, v_i32), builder.bitcast(w, v_i32)])
        wide = isa == "bw512"
        n1 = "llvm.x86.avx512.pmaddubs.w.512" if wide else "llvm.x86.avx2.pmadd.ub.sw"
        n2 = "llvm.x86.avx512.pmaddw.d.512" if wide else "llvm.x86.avx2.pmadd.wd"
        f1 = declare(builder, n1, v_i16, [v_i8, v_i8])
        f2 = declare(builder, n2, v_i32, [v_i16, v_i16])
        zero = ir.Constant(v_i8, [0] * vb)
        neg = builder.icmp_signed("<", w, zero)
        aw = builder.select(neg, builder.sub(zero, w), w)  # |w|, unsigned
        sx = builder.select(neg, builder.sub(zero, x), x)  # x with w's sign
        pairs = builder.call(f1, [aw, sx])  # at most 2 x 128 x 127: no saturation
        return builder.add(acc, builder.call(f2, [pairs, ir.Constant(v_i16, [1] * (vb // 2))]))

    def make_dot_rows(nr: int, prefetch: bool):
        @intrinsic
        def dot_rows(typingctx, q, ws, scale, r0, xq, d, res):
            """res[i] = scale[r] d (sum_c q[r, c] x_c) for rows r = r0 + i, i < nr, of q
            (int8 [N, K], C order, K a multiple of the vector) against the planes xq[:K] and
            xq[K:] (q + 128, r + 128) of a token whose scale is d; the rows side by side,
            column by column."""
            if not (isinstance(q, types.Array) and q.layout == "C" and q.ndim == 2):
                return None

            def codegen(context, builder, sig, args):
                qa, wsa, sa, xa, ra = (
                    context.make_array(sig.args[i])(context, builder, args[i])
                    for i in (0, 1, 2, 4, 6)
                )
                r0 = args[3]
                k = cgutils.unpack_tuple(builder, qa.shape)[1]
                wp = builder.bitcast(qa.data, i8.as_pointer())
                xp = builder.bitcast(xa.data, i8.as_pointer())
                bases = [builder.mul(builder.add(r0, ir.Constant(i64, i)), k) for i in range(nr)]
                zero = ir.Constant(v_i32, [0] * nl)
                accs = [cgutils.alloca_once_value(builder, zero) for _ in range(2 * nr)]
                ahead = builder.mul(k, ir.Constant(i64, nr * I8_PREFETCH_GROUPS))
                pf = declare(builder, "llvm.prefetch.p0i8", ir.VoidType(), [i8.as_pointer(), i32,
                             i32, i32])  # fmt: skip

                def load(ptr, off):
                    p = builder.gep(ptr, [off])
                    return builder.load(builder.bitcast(p, v_i8.as_pointer()), align=1)

                with cgutils.for_range(builder, builder.udiv(k, ir.Constant(i64, vb))) as loop:
                    off = builder.mul(loop.index, ir.Constant(i64, vb))
                    xc = prep(builder, load(xp, off))
                    xf = prep(builder, load(xp, builder.add(k, off)))
                    for i in range(nr):
                        at = builder.add(bases[i], off)
                        if prefetch and I8_PREFETCH_GROUPS:
                            c = [ir.Constant(i32, v) for v in (0, 3, 1)]
                            builder.call(pf, [builder.gep(wp, [builder.add(at, ahead)]), *c])
                        w = load(wp, at)
                        a_c, a_f = accs[i], accs[nr + i]
                        builder.store(dot(builder, builder.load(a_c), xc, w), a_c)
                        builder.store(dot(builder, builder.load(a_f), xf, w), a_f)
                # lanes 0..nr-1: the rows' sums with plane q, nr..2nr-1: with plane r
                sums = reduce_tree(builder, [builder.load(a) for a in accs])
                v_n, f_n = ir.VectorType(i32, nr), ir.VectorType(f32, nr)
                cs = shuffle(builder, sums, sums, list(range(nr)))
                fs = shuffle(builder, sums, sums, list(range(nr, 2 * nr)))

                def vec_at(arr, vt):  # arr[r0 : r0 + nr] as one vector
                    p = builder.gep(arr.data, [r0])
                    return builder.load(builder.bitcast(p, vt.as_pointer()), align=1)

                if vnni:  # the sums are of w (q + 128): less 128 sum_c w
                    off = builder.shl(vec_at(wsa, v_n), ir.Constant(v_n, [7] * nr))
                    cs, fs = builder.sub(cs, off), builder.sub(fs, off)
                val = builder.fadd(
                    builder.sitofp(cs, f_n),
                    builder.fmul(builder.sitofp(fs, f_n), ir.Constant(f_n, [1.0 / 256] * nr)),
                )
                sd = builder.fmul(vec_at(sa, f_n), splat(builder, args[5], f_n))
                p = builder.bitcast(ra.data, f_n.as_pointer())
                builder.store(builder.fmul(val, sd), p, align=1)
                return context.get_dummy_value()

            return types.none(q, ws, scale, types.int64, xq, types.float32, res), codegen

        return dot_rows

    @intrinsic
    def dot_row(typingctx, q, ws, scale, r, xq, d):
        """scale[r] d (sum_c q[r, c] x_c) for one row r of q (int8 [N, K], C order, K a
        multiple of 64) against the planes xq[:K] and xq[K:] of a token whose scale is d:
        two accumulators a plane (even and odd vectors), so that no chain of dependent dot
        instructions sets the pace, and one reduction of the row's two sums at the end."""
        if not (isinstance(q, types.Array) and q.layout == "C" and q.ndim == 2):
            return None

        def codegen(context, builder, sig, args):
            qa, wsa, sa, xa = (
                context.make_array(sig.args[i])(context, builder, args[i]) for i in (0, 1, 2, 4)
            )
            r = args[3]
            k = cgutils.unpack_tuple(builder, qa.shape)[1]
            wp = builder.gep(builder.bitcast(qa.data, i8.as_pointer()), [builder.mul(r, k)])
            xp = builder.bitcast(xa.data, i8.as_pointer())
            zero = ir.Constant(v_i32, [0] * nl)
            accs = [cgutils.alloca_once_value(builder, zero) for _ in range(4)]

            def load(ptr, off):
                p = builder.gep(ptr, [off])
                return builder.load(builder.bitcast(p, v_i8.as_pointer()), align=1)

            def step(off, j):  # vector at byte off into accumulators j (plane q), 2 + j (r)
                w = load(wp, off)
                xc = prep(builder, load(xp, off))
                xf = prep(builder, load(xp, builder.add(k, off)))
                builder.store(dot(builder, builder.load(accs[j]), xc, w), accs[j])
                builder.store(dot(builder, builder.load(accs[2 + j]), xf, w), accs[2 + j])

            pairs = builder.udiv(k, ir.Constant(i64, 2 * vb))
            with cgutils.for_range(builder, pairs) as loop:
                off = builder.mul(loop.index, ir.Constant(i64, 2 * vb))
                step(off, 0)
                step(builder.add(off, ir.Constant(i64, vb)), 1)
            last = builder.mul(pairs, ir.Constant(i64, 2 * vb))
            with builder.if_then(builder.icmp_unsigned("<", last, k)):  # an odd vector
                step(last, 0)
            a_c = builder.add(builder.load(accs[0]), builder.load(accs[1]))
            a_f = builder.add(builder.load(accs[2]), builder.load(accs[3]))
            sums = reduce_tree(builder, [a_c, a_f])  # lane 0: sum w q, lane 1: sum w r
            cs = builder.extract_element(sums, ir.Constant(i32, 0))
            fs = builder.extract_element(sums, ir.Constant(i32, 1))
            if vnni:  # the sums are of w (q + 128): less 128 sum_c w
                wsum = builder.load(builder.gep(wsa.data, [r]))
                off = builder.shl(wsum, ir.Constant(i32, 7))
                cs, fs = builder.sub(cs, off), builder.sub(fs, off)
            val = builder.fadd(
                builder.sitofp(cs, f32),
                builder.fmul(builder.sitofp(fs, f32), ir.Constant(f32, 1.0 / 256)),
            )
            sd = builder.fmul(builder.load(builder.gep(sa.data, [r])), args[5])
            return builder.fmul(val, sd)

        return types.float32(q, ws, scale, types.int64, xq, types.float32), codegen

    keep = isa == q4_isa()  # cache only the variant this CPU runs (see the doc)

    def quantize(x_rows, xq, d):  # pragma: no cover - compiled
        # x [T, K] (C order) -> xq uint8 [T, 2K]: q + 128, then r + 128; d [T] = max|x| / 127.
        # Written so that LLVM vectorizes each loop (one store stream a loop, float32 constants;
        # max|x| as the largest of the values' bits less the sign: an integer max, which
        # orders non-negative floats alike): 1.06 -> 0.47 us at K = 1536.
        m, k = x_rows.shape
        lo, hi = np.float32(-127.0), np.float32(127.0)
        for t in range(m):
            v = x_rows[t]
            bits = v.view(np.int32)
            mb = np.int32(0)
            for i in range(k):
                b = bits[i] & np.int32(0x7FFFFFFF)
                mb = b if b > mb else mb
            amax = i8_f32_bits(mb)  # noqa: F821 - a global of _with_globals
            inv = hi / amax if amax > 0 else np.float32(0.0)
            xc = xq[t, :k]
            for i in range(k):
                xc[i] = np.uint8(np.int32(np.rint(v[i] * inv)) + np.int32(128))
            xf = xq[t, k:]
            for i in range(k):
                y = v[i] * inv
                r = np.rint((y - np.rint(y)) * np.float32(256.0))
                r = lo if r < lo else (hi if r > hi else r)
                xf[i] = np.uint8(np.int32(r) + np.int32(128))
            d[t] = amax / hi

    quantize = njit(fastmath=True, nogil=True, cache=keep)(
        _with_globals(quantize, i8_f32_bits=f32_bits())
    )

    def rows(q, ws, scale, xq, d, out, r0, r1):  # pragma: no cover - compiled
        # Rows r0..r1-1 in groups of I8_GROUP_ROWS, each for every token while in cache, then
        # the rows left one at a time. One token: each row in turn, one stream in address
        # order (SmolLM2's 120 products in the fused step's chain, one process: 8-row groups
        # 33.0 GB/s, this with bf16's 4 KB 39.4, bf16's rows 41.2; at I8_AHEAD_BYTES see there).
        m_tok = xq.shape[0]
        if m_tok == 1:  # one row at a time in address order, its lines asked for 8 KB ahead
            k = q.shape[1]
            x0, d0 = xq[0], d[0]
            for r in range(r0, r1):
                at = r * k + I8_AHEAD_BYTES
                for e in range(0, k, CACHE_LINE_BYTES):
                    i8_prefetch(q, at + e)  # noqa: F821
                out[r, 0] = i8_dot_row1(q, ws, scale, r, x0, d0)  # noqa: F821
            return
        res = np.empty(I8_GROUP_ROWS, dtype=np.float32)
        r = r0
        while r + I8_GROUP_ROWS <= r1:
            for t in range(m_tok):
                if t == 0:  # the rows come from memory: prefetch the next groups
                    i8_dot_group_pf(q, ws, scale, r, xq[t], d[t], res)  # noqa: F821
                else:  # from L1: prefetches would only take load slots (8 tokens 1.5x)
                    i8_dot_group(q, ws, scale, r, xq[t], d[t], res)  # noqa: F821
                for i in range(I8_GROUP_ROWS):
                    out[r + i, t] = res[i]
            r += I8_GROUP_ROWS
        for rr in range(r, r1):
            for t in range(m_tok):
                i8_dot_row(q, ws, scale, rr, xq[t], d[t], res)  # noqa: F821
                out[rr, t] = res[0]

    rows = njit(fastmath=True, nogil=True, cache=keep)(
        _with_globals(
            rows,
            i8_dot_group_pf=make_dot_rows(I8_GROUP_ROWS, True),
            i8_dot_group=make_dot_rows(I8_GROUP_ROWS, False),
            i8_dot_row=make_dot_rows(1, False),
            i8_dot_row1=dot_row,
            i8_prefetch=prefetch(STREAM_LOCALITY),
        )
    )

    def matmul(q, ws, scale, x_rows, out, tasks):  # pragma: no cover - compiled
        n, k = q.shape
        m_tok = x_rows.shape[0]
        xq = np.empty((m_tok, 2 * k), dtype=np.uint8)
        d = np.empty(m_tok, dtype=np.float32)
        i8_quantize(x_rows, xq, d)  # noqa: F821
        # ``tasks`` (the thread count) runs of whole groups of rows, the last with the rest
        groups = n // I8_GROUP_ROWS
        parts = max(1, min(groups, tasks))
        for part in prange(parts):  # noqa: F821
            r0 = part * groups // parts * I8_GROUP_ROWS
            r1 = n if part == parts - 1 else (part + 1) * groups // parts * I8_GROUP_ROWS
            i8_rows(q, ws, scale, xq, d, out, r0, r1)  # noqa: F821

    matmul = _with_globals(matmul, i8_quantize=quantize, i8_rows=rows, prange=numba_prange)
    return (
        njit(fastmath=True, cache=keep)(matmul),
        njit(fastmath=True, parallel=True)(matmul),
        quantize,
        rows,
    )
