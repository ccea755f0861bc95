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
def kernels() -> Kernels | None:
    """The compiled kernels, or ``None`` without numba. Compiled on first call (cached to disk)."""
    try:
        import numba
        from numba import njit, prange
    except ImportError:
        return None

    @njit(fastmath=True, cache=True)
    def attend(q, k_flat, v_flat, columns, ptr, slots, out):  # pragma: no cover - compiled
        hq, d, _ = q.shape
        hkv = k_flat.shape[1]
        g = hq // hkv
        scale = np.float32(1.0 / np.sqrt(d))
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
    def dot4(wf, x_rows, t, out, r):  # pragma: no cover - compiled
        # out[r, t:t+4] = one float32 weight row against 4 tokens, the row read once: the
        # 4-token pass of the bf16 (widened row) and fp32 loops, inlined into each.
        x0, x1, x2, x3 = x_rows[t], x_rows[t + 1], x_rows[t + 2], x_rows[t + 3]
        a0 = a1 = a2 = a3 = np.float32(0.0)
        for c in range(wf.shape[0]):
            w = wf[c]
            a0 += w * x0[c]
            a1 += w * x1[c]
            a2 += w * x2[c]
            a3 += w * x3[c]
        out[r, t], out[r, t + 1], out[r, t + 2], out[r, t + 3] = a0, a1, a2, a3

    def int8_matmul(q, scale, x_rows, out):  # pragma: no cover - compiled
        # out[r, t] = scale[r] * sum_c q[r, c] x[t, c]: int8 rows widened in registers,
        # each widened weight used by up to 4 tokens; rows in chunks (threads: see below).
        n, k = q.shape
        m = x_rows.shape[0]
        for ch in prange((n + ROW_CHUNK - 1) // ROW_CHUNK):
            for r in range(ch * ROW_CHUNK, min(n, (ch + 1) * ROW_CHUNK)):
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

    def bf16_matmul(w16, x_rows, out):  # pragma: no cover - compiled
        # out[r, t] = sum_c w[r, c] x[t, c]; bf16 is float32's top half: each row is
        # widened by a shift into a float32 buffer (one per chunk), used by every token.
        n, k = w16.shape
        m = x_rows.shape[0]
        for ch in prange((n + ROW_CHUNK - 1) // ROW_CHUNK):
            buf = np.empty(k, dtype=np.uint32)
            wf = buf.view(np.float32)
            for r in range(ch * ROW_CHUNK, min(n, (ch + 1) * ROW_CHUNK)):
                wr = w16[r]
                for c in range(k):
                    buf[c] = np.uint32(wr[c]) << np.uint32(16)
                t = 0
                while t + 4 <= m:
                    dot4(wf, x_rows, t, out, r)
                    t += 4
                for tt in range(t, m):
                    xr = x_rows[tt]
                    acc = np.float32(0.0)
                    for c in range(k):
                        acc += wf[c] * xr[c]
                    out[r, tt] = acc

    def fp32_matmul(w, x_rows, out):  # pragma: no cover - compiled
        # out[r, t] = sum_c w[r, c] x[t, c] for a few tokens (2-8: qlinear.fp32_jit_max_tokens):
        # each row, read once from memory, serves 8, then 4, 2 and 1 tokens at a time from L1
        # (an 8-wide pass ran SmolLM2's 120 products at 8 tokens in 32 ms against 38 for
        # two 4-wide ones; docs/cpu-kernels.md).
        n, k = w.shape
        m = x_rows.shape[0]
        for ch in prange((n + ROW_CHUNK - 1) // ROW_CHUNK):
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
                    dot4(wr, x_rows, t, out, r)
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
    def q4_blocks(qt, d, m, xa, xb, xs, out, c0, c1):  # pragma: no cover - compiled
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
        for part in prange(parts):
            q4_blocks(qt, d, m, xa, xb, xs, out, part * nc // parts, (part + 1) * nc // parts)

    # One thread: compiled as plain loops (prange is range), cached to disk. More threads:
    # the same code with prange over row chunks, compiled on first use (not cached: one
    # cache entry per function), on numba's workqueue layer (its OpenMP layer slowed
    # PyTorch's OpenMP kernels 25x in the same process: engine/qlinear.py).
    numba.config.THREADING_LAYER = "workqueue"
    serial = njit(fastmath=True, cache=True)
    threaded = njit(fastmath=True, parallel=True)
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
        q4_blocks,
    )


def q4_layout(q: np.ndarray, d: np.ndarray, m: np.ndarray):
    """The q4 kernel's layout of 4-bit groups of 32 (``w = q d + m``, q uint8 [N, K] in
    0..15, d and m float32 [N, K/32]): (qt uint8 [C, G, 16, R], d and m float32 [C, G, R]),
    rows padded with zeros to C blocks of R = :data:`Q4_ROWS`."""
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
