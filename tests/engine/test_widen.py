"""Prefill products by widened tiles: the whole-matrix product, on one thread or split."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import infercast.engine.threads as th  # noqa: E402
import infercast.engine.widen as wd  # noqa: E402
from infercast.engine.qlinear import (  # noqa: E402
    KERNEL_MAX_TOKENS,
    Scratch,
    matmul_fm,
    to_format,
)


def _w(n: int, k: int) -> np.ndarray:
    return (np.random.default_rng(n).standard_normal((n, k)) * 0.05).astype(np.float32)


def _x(k: int, t: int) -> np.ndarray:
    return np.random.default_rng(t).standard_normal((k, t)).astype(np.float32)


@pytest.mark.parametrize(
    ("rows", "cols", "granule", "parts"),
    [(3072, 576, 64, 1), (3072, 576, 64, 2), (576, 1536, 16, 2), (100, 64, 16, 3)],
)
def test_tile_rows_are_whole_granules_in_a_multiple_of_the_parts(rows, cols, granule, parts):
    """About TILE_WEIGHTS weights a tile, and at least ``parts`` tiles to split."""
    per = wd.tile_rows(rows, cols, granule, parts)
    assert per % granule == 0
    assert per * cols <= wd.TILE_WEIGHTS + granule * cols
    assert -(-rows // per) >= parts


@pytest.mark.parametrize("fmt", ["q4", "int8", "bf16"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_tiled_product_is_the_whole_matrix_product(fmt, threads, monkeypatch):
    """Several tiles (one a partial last block: 260 rows), on one thread or split between
    threads: the product of the whole dequantized matrix (the path before tiles), to float32
    rounding; and the BLAS threads are as they were after a split. (q4 and int8 take the
    tiles with ``qlinear.INT_PREFILL`` off.)"""
    import infercast.engine.qlinear as ql

    monkeypatch.setattr(ql, "INT_PREFILL", False)
    monkeypatch.setattr(wd, "TILE_WEIGHTS", 64 * 192)
    monkeypatch.setitem(th.THREADED_MIN_WORK, "widen", 0.0)
    m = to_format(_w(260, 192), fmt)
    x = _x(192, KERNEL_MAX_TOKENS + 3)
    before = [lib.get_num_threads() for lib in wd._blas()]
    got = matmul_fm(m, x, Scratch(threads))
    assert [lib.get_num_threads() for lib in wd._blas()] == before
    ref = m.dequantize().astype(np.float64) @ x
    assert got.shape == ref.shape and got.dtype == np.float32 and got.flags.c_contiguous
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.parametrize("fmt", ["int8", "bf16"])
def test_numpy_widening_is_the_numba_widening(fmt, monkeypatch):
    """Without numba the tiles are widened by numpy: the same float32 tile. (q4 without numba
    keeps PyTorch's packing, widened by numpy only: test_qlinear.py.)"""
    m = to_format(_w(200, 96), fmt)
    granule = 16
    r0, r1 = granule, min(200, 4 * granule)
    want = np.array(m._widen(r0, r1, np.empty(96 * 4 * granule, dtype=np.float32)))
    monkeypatch.setattr(wd, "widen_kernels", lambda: None)
    got = m._widen(r0, r1, np.empty(96 * 4 * granule, dtype=np.float32))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got, m.dequantize()[r0:r1], rtol=1e-6, atol=1e-7)
