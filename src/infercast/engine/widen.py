"""Prefill products of compact matrices: tiles of rows widened to float32, each multiplied at once.

Beyond ``qlinear.KERNEL_MAX_TOKENS`` tokens a product is compute-bound and OpenBLAS's float32
GEMM is the fastest float32 kernel here, so a compact matrix (bf16, int8, q4) is widened to
float32 and multiplied there. The matrix is widened :func:`tile_rows` rows at a time into a
reused buffer, and each tile's GEMM writes its rows of the output, so no float32 copy of a
whole matrix is written and read back (SmolLM2-135M's gate/up: 7.1 MB). The widening
kernels are numba loops over the stored bytes (numpy without numba). With more than one
thread (``threads.product_threads``, path ``widen``) the tiles are split between the threads,
each widening and multiplying its own on one thread (the BLAS held to one thread meanwhile),
rather than widening on one thread between GEMMs on all. Measurements:
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
def widen_kernels():
    """(q4, int8, bf16) tile widening kernels compiled by numba, or None without numba."""
    try:
        from numba import njit
    except ImportError:
        return None

    @njit(nogil=True, fastmath=True, cache=True)
    def q4(blocks, scale, zero, out, c0):  # pragma: no cover - compiled
        # blocks uint8 [C, K, B/2]: PyTorch's int4 packing (qlinear.packing_block); scale, zero
        # [G, C, 2, B/2] (qlinear.Int4Matrix.scale_t, zero_t by block); out [K, Ct, 2, B/2]:
        # blocks c0 .. c0 + Ct - 1 transposed, (q - 8) scale + zero. Byte arithmetic in uint8
        # and indices from 0 in the inner loops: vectorized (vpmovzxbd, vcvtdq2ps, vfmadd;
        # an int32 nibble or a slice of a row was not: 1.2-2.5 against 7.7 Gweights/s)
        k, half = blocks.shape[1], blocks.shape[2]
        for cc in range(out.shape[1]):
            c = c0 + cc
            for kk in range(k):
                g = kk // 32
                for i in range(half):
                    q = np.float32(blocks[c, kk, i] & np.uint8(15)) - np.float32(8)
                    out[kk, cc, 0, i] = q * scale[g, c, 0, i] + zero[g, c, 0, i]
                for i in range(half):
                    q = np.float32(blocks[c, kk, i] >> np.uint8(4)) - np.float32(8)
                    out[kk, cc, 1, i] = q * scale[g, c, 1, i] + zero[g, c, 1, i]

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

    return q4, int8, bf16


def q4_blocks(
    blocks: np.ndarray, scale: np.ndarray, zero: np.ndarray, c0: int, out: np.ndarray
) -> None:
    """Widen q4 blocks c0 .. c0 + out.shape[1] - 1 into ``out`` [K, Ct, 2, B/2] (see
    :func:`widen_kernels`; numpy without numba)."""
    kernels = widen_kernels()
    if kernels is not None:
        kernels[0](blocks, scale, zero, out, c0)
        return
    ct = out.shape[1]
    b = blocks[c0 : c0 + ct].transpose(1, 0, 2)  # [K, Ct, B/2]
    out[:, :, 0] = b & 15
    out[:, :, 1] = b >> 4
    g = out.reshape(-1, 32, *out.shape[1:])  # [G, 32, Ct, 2, B/2]
    g -= 8.0
    g *= scale[:, None, c0 : c0 + ct]
    g += zero[:, None, c0 : c0 + ct]


def int8_rows(q: np.ndarray, s: np.ndarray, r0: int, out: np.ndarray) -> None:
    """Rows r0 .. r0 + len(out) - 1 of int8 ``q`` times their scales ``s``, into ``out``."""
    kernels = widen_kernels()
    if kernels is not None:
        kernels[1](q, s, out, r0)
        return
    r1 = r0 + out.shape[0]
    np.multiply(q[r0:r1], s[r0:r1, None], out=out)


def bf16_rows(bits: np.ndarray, r0: int, out: np.ndarray) -> None:
    """Rows r0 .. r0 + len(out) - 1 of bf16 ``bits`` (uint16) as float32, into ``out``."""
    kernels = widen_kernels()
    out_bits = out.view(np.uint32)
    if kernels is not None:
        kernels[2](bits, out_bits, r0)
        return
    np.left_shift(bits[r0 : r0 + out.shape[0]], 16, out=out_bits, dtype=np.uint32)
