"""Prefill products of compact matrices: tiles of rows widened to float32, each multiplied at once.

Beyond ``qlinear.KERNEL_MAX_TOKENS`` tokens a product is compute-bound and OpenBLAS's float32
GEMM is the fastest float32 kernel here, so a compact matrix (bf16, int8, q4) is widened to
float32 and multiplied there. The matrix is widened :func:`tile_rows` rows at a time into a
reused buffer, and each tile's GEMM writes its rows of the output, so no float32 copy of a
whole matrix is written and read back (SmolLM2-135M's gate/up: 7.1 MB). The widening
kernels are numba loops over the stored bytes (numpy without numba); q4 is widened from the
numba product kernels' own layout (the file's fp16 scales: the weights decode multiplies).
With more than one thread (``threads.product_threads``, path ``widen``) the tiles are split
between the threads, each widening and multiplying its own on one thread (the BLAS held to
one thread meanwhile), rather than widening on one thread between GEMMs on all. Measurements:
docs/cpu-kernels.md ("Prefill: widened tiles").
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

# Weights per widened tile (rows = this // columns, a multiple of the q4 packing's block):
# SmolLM2-135M's 120 prefill products, ms CPU, one thread, tiles of 512 / 1024 / 2048 / all
# rows of its 3072 x 576 gate/up (2026-12-05, load 2-2.7, benchmarks/prefill_widen.py):
# q4 at 128 tokens 263.8 / 265.5 / 265.7 / 265.1, at 512 961 / 958 / 957 / 986.
TILE_WEIGHTS = 2**19

Widen = Callable[[int, int, np.ndarray], np.ndarray]  # (r0, r1, buffer) -> rows [r1 - r0, K]


def tile_rows(rows: int, cols: int, granule: int, parts: int) -> int:
    """Rows per tile of a [rows, cols] matrix: about :data:`TILE_WEIGHTS` weights, a multiple
    of ``granule`` (the q4 packing's block), the tiles a multiple of ``parts`` in number."""
    tiles = max(1, -(-rows * cols // TILE_WEIGHTS))
    tiles = -(-tiles // parts) * parts
    per = -(-rows // tiles)
    return -(-per // granule) * granule


@cache
def _blas():
    """threadpoolctl's handle on numpy's BLAS (its threads are set per product split)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas").lib_controllers


def tiled_product(
    widen: Widen, shape: tuple[int, int], granule: int, x: np.ndarray, bufs, threads: int
) -> np.ndarray:
    """w @ x [K, T] -> [N, T] float32, w widened ``widen(r0, r1, buffer)`` a tile at a time.

    ``bufs(i, n)`` is thread i's float32 buffer of at least n values; ``threads`` > 1 splits
    the tiles between the calling thread and ``threads`` - 1 pool threads (``bufs.pool``).
    """
    n, k = shape
    out = np.empty((n, x.shape[1]), dtype=np.float32)
    rows = tile_rows(n, k, granule, threads)
    tiles = [(r0, min(n, r0 + rows)) for r0 in range(0, n, rows)]
    size = -(-rows // granule) * granule * k

    def run(part, i):
        buf = bufs(i, size)
        for r0, r1 in part:
            np.matmul(widen(r0, r1, buf), x, out=out[r0:r1])

    if threads <= 1 or len(tiles) < 2:
        run(tiles, 0)
        return out
    threads = min(threads, len(tiles))
    parts = [tiles[i::threads] for i in range(threads)]
    libs = _blas()
    before = [lib.get_num_threads() for lib in libs]
    for lib in libs:
        lib.set_num_threads(1)
    try:
        futures = [bufs.pool.submit(run, part, i) for i, part in enumerate(parts[1:], 1)]
        run(parts[0], 0)
        for f in futures:
            f.result()
    finally:
        for lib, b in zip(libs, before, strict=True):
            lib.set_num_threads(b)
    return out


@cache
def f32_of_f16():
    """A numba ``@intrinsic``: the float32 value of the fp16 whose bits are the uint16 argument
    (an LLVM bitcast to ``half`` and ``fpext``: exact, subnormals included, and vectorized as
    ``vcvtph2ps`` with F16C; numba 0.68 has no float16 type). Needs numba."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def f32_of_f16(typingctx, bits):
        def codegen(context, builder, sig, args):
            return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

        return types.float32(types.uint16), codegen

    return f32_of_f16


@cache
def widen_kernels():
    """(int8, bf16, q4i, q4f, q4i_rows, q4f_rows) widening kernels compiled by numba, or None
    without numba (q4i, q4f: q4 in the numba product kernels' integer and float layouts; the
    ``_rows`` ones: chosen rows of them, for embedding lookups)."""
    try:
        from numba import njit
    except ImportError:
        return None
    from infercast.engine.decode_jit import _with_globals

    @njit(nogil=True, fastmath=True, cache=True)
    def int8(q, s, out, r0):  # pragma: no cover - compiled
        # rows r0 .. r0 + len(out) - 1 of int8 q [N, K] times their scale s [N]
        for r in range(out.shape[0]):
            sr = s[r0 + r]
            for j in range(q.shape[1]):
                out[r, j] = np.float32(q[r0 + r, j]) * sr

    @njit(nogil=True, fastmath=True, cache=True)
    def bf16(bits, out_bits, r0):  # pragma: no cover - compiled
        # bf16 is float32's top half: rows r0 .. of bits uint16 [N, K] shifted up
        for r in range(out_bits.shape[0]):
            for j in range(bits.shape[1]):
                out_bits[r, j] = np.uint32(bits[r0 + r, j]) << np.uint32(16)

    def q4i(q32, h16, out, c0):  # pragma: no cover - compiled
        # The integer kernel's layout (decode_jit.q4_int_layout) viewed as q32 uint32
        # [C, G, 5 R] (word k of row j at k R + j: its nibble 2 b is element 4 k + b of the
        # group, nibble 2 b + 1 element 16 + 4 k + b) and h16 uint16 [C, G, 10 R] (the rows'
        # fp16 d at 8 R, m at 9 R); out [K, Ct R]: blocks c0 .. c0 + Ct - 1 transposed,
        # q d + m. Each word is loaded once per nibble (from L1), shifted and masked as uint32
        # into a row view of out: across the R rows it vectorizes (vpsrld, vpandd, vcvtdq2ps,
        # vfmadd; d, m by vcvtph2ps). 3072x576 in tiles of 896 rows, one thread, 2026-12-05
        # (benchmarks/q4_products.py --widen, load ~3): 10.3 Gweights/s, the float layout's
        # loop 15.4; Int4Matrix._widen of main (the PyTorch packing's loop) and of this
        # alternated, load 2.8-2.9: 8.0-8.6 against 9.4-12.5. With out[row, o + j] for the row
        # view 9.0, both nibbles of a byte a pass (two row views) 9.4, against its 11.7 then.
        rb = h16.shape[2] // 10
        d = np.empty(rb, dtype=np.float32)
        m = np.empty(rb, dtype=np.float32)
        for cc in range(out.shape[1] // rb):
            c = c0 + cc
            o = cc * rb
            for g in range(q32.shape[1]):
                words = q32[c, g]
                h = h16[c, g]
                for j in range(rb):
                    d[j] = f32_of_f16(h[8 * rb + j])  # noqa: F821 - a global (_with_globals)
                    m[j] = f32_of_f16(h[9 * rb + j])  # noqa: F821
                for k in range(4):
                    for n in range(8):
                        dst = out[g * 32 + 4 * k + n // 2 + 16 * (n % 2)]
                        sh = np.uint32(4 * n)
                        for j in range(rb):
                            q = np.int32((words[k * rb + j] >> sh) & np.uint32(15))
                            dst[o + j] = np.float32(q) * d[j] + m[j]

    @njit(nogil=True, fastmath=True, cache=True)
    def q4f(qt, d, m, out, c0):  # pragma: no cover - compiled
        # The float kernel's layout (decode_jit.q4_float_layout): qt uint8 [C, G, 16, R] (byte
        # i of row j: element i in its low nibble, 16 + i in its high one), d, m float32
        # [C, G, R]; out [K, Ct R] as q4i's.
        rb = qt.shape[3]
        for cc in range(out.shape[1] // rb):
            c = c0 + cc
            o = cc * rb
            for g in range(qt.shape[1]):
                dg = d[c, g]
                mg = m[c, g]
                for i in range(16):
                    b = qt[c, g, i]
                    lo = out[g * 32 + i]
                    hi = out[g * 32 + 16 + i]
                    for j in range(rb):
                        lo[o + j] = np.float32(b[j] & np.uint8(15)) * dg[j] + mg[j]
                    for j in range(rb):
                        hi[o + j] = np.float32(b[j] >> np.uint8(4)) * dg[j] + mg[j]

    def q4i_rows(q32, h16, ids, out):  # pragma: no cover - compiled
        # rows ``ids`` of q4i's layout, dequantized into out [T, K] (an embedding lookup)
        rb = h16.shape[2] // 10
        for t in range(ids.shape[0]):
            c, j = ids[t] // rb, ids[t] % rb
            for g in range(q32.shape[1]):
                d = f32_of_f16(h16[c, g, 8 * rb + j])  # noqa: F821 - a global (_with_globals)
                m = f32_of_f16(h16[c, g, 9 * rb + j])  # noqa: F821
                for k in range(4):
                    w = q32[c, g, k * rb + j]
                    for b in range(4):
                        lo = np.int32((w >> np.uint32(8 * b)) & np.uint32(15))
                        hi = np.int32((w >> np.uint32(8 * b + 4)) & np.uint32(15))
                        out[t, g * 32 + 4 * k + b] = np.float32(lo) * d + m
                        out[t, g * 32 + 16 + 4 * k + b] = np.float32(hi) * d + m

    @njit(nogil=True, fastmath=True, cache=True)
    def q4f_rows(qt, d, m, ids, out):  # pragma: no cover - compiled
        # rows ``ids`` of q4f's layout into out [T, K]
        rb = qt.shape[3]
        for t in range(ids.shape[0]):
            c, j = ids[t] // rb, ids[t] % rb
            for g in range(qt.shape[1]):
                dg, mg = d[c, g, j], m[c, g, j]
                for i in range(16):
                    b = qt[c, g, i, j]
                    out[t, g * 32 + i] = np.float32(b & np.uint8(15)) * dg + mg
                    out[t, g * 32 + 16 + i] = np.float32(b >> np.uint8(4)) * dg + mg

    jit = njit(nogil=True, fastmath=True, cache=True)
    q4i, q4i_rows = (jit(_with_globals(f, f32_of_f16=f32_of_f16())) for f in (q4i, q4i_rows))
    return int8, bf16, q4i, q4f, q4i_rows, q4f_rows


def q4_blocks(
    blocks: np.ndarray, scale: np.ndarray, zero: np.ndarray, c0: int, out: np.ndarray
) -> None:
    """Widen blocks c0 .. c0 + out.shape[1] - 1 of PyTorch's int4 packing (blocks uint8
    [C, K, B/2], ``qlinear.packing_block``; scale, zero [G, C, 2, B/2]: ``Int4Matrix.scale_t``,
    ``zero_t`` by block) into ``out`` [K, Ct, 2, B/2]: w transposed, (q - 8) scale + zero. numpy:
    the packing is only kept without numba (where numba runs q4 is widened from its own layout,
    :func:`q4_layout_blocks`)."""
    ct = out.shape[1]
    b = blocks[c0 : c0 + ct].transpose(1, 0, 2)  # [K, Ct, B/2]
    out[:, :, 0] = b & 15
    out[:, :, 1] = b >> 4
    g = out.reshape(-1, 32, *out.shape[1:])  # [G, 32, Ct, 2, B/2]
    g -= 8.0
    g *= scale[:, None, c0 : c0 + ct]
    g += zero[:, None, c0 : c0 + ct]


def q4_layout_blocks(layout: tuple[np.ndarray, ...], c0: int, out: np.ndarray) -> None:
    """Widen blocks c0 .. c0 + out.shape[1] / R - 1 of a numba q4 layout
    (``decode_jit.q4_layout``: ``(qv,)`` or ``(qt, d, m)``) into ``out`` [K, Ct R]: w transposed,
    ``q d + m`` with the layout's d and m (the file's fp16 values for Q4_0/Q4_1) rounded once
    to float32 (q d is exact: 4 x 11 bits), so each weight is the dequantized one exactly."""
    kernels = widen_kernels()
    if len(layout) == 1:
        qv = layout[0]
        kernels[2](qv.view(np.uint32), qv.view(np.uint16), out, c0)
    else:
        kernels[3](*layout, out, c0)


def q4_layout_rows(layout: tuple[np.ndarray, ...], ids: np.ndarray, out: np.ndarray) -> None:
    """Rows ``ids`` of a numba q4 layout dequantized into ``out`` [T, K], the same values as
    :func:`q4_layout_blocks` widens."""
    kernels = widen_kernels()
    if len(layout) == 1:
        qv = layout[0]
        kernels[4](qv.view(np.uint32), qv.view(np.uint16), ids, out)
    else:
        kernels[5](*layout, ids, out)


def int8_rows(q: np.ndarray, s: np.ndarray, r0: int, out: np.ndarray) -> None:
    """Rows r0 .. r0 + len(out) - 1 of int8 ``q`` times their scales ``s``, into ``out``."""
    kernels = widen_kernels()
    if kernels is not None:
        kernels[0](q, s, out, r0)
        return
    r1 = r0 + out.shape[0]
    np.multiply(q[r0:r1], s[r0:r1, None], out=out)


def bf16_rows(bits: np.ndarray, r0: int, out: np.ndarray) -> None:
    """Rows r0 .. r0 + len(out) - 1 of bf16 ``bits`` (uint16) as float32, into ``out``."""
    kernels = widen_kernels()
    out_bits = out.view(np.uint32)
    if kernels is not None:
        kernels[1](bits, out_bits, r0)
        return
    np.left_shift(bits[r0 : r0 + out.shape[0]], 16, out=out_bits, dtype=np.uint32)
