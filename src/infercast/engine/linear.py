"""``x @ w.T`` for the engine's weight layout, fast at the small batches decode runs.

OpenBLAS (numpy's BLAS) runs a matrix product with 2-32 rows in ``x`` far
below both the bandwidth and the compute roofline: measured on this machine
(one thread, w 5632 x 2048 float32), 1 row took 1.5 ms (a memory-bound gemv at
~30 GB/s) but 2-8 rows took ~6 ms, 4x the time to read w once. Splitting w into
row blocks of 128-256 KiB (which stay in L2 while all rows of x use them) brought
2-4 rows back to ~1.7 ms and 8-32 rows to 1.5-2.5x faster than one call. Large
batches (prefill) go to BLAS in one call, where it reaches its GEMM peak.
"""

from __future__ import annotations

import numpy as np

SMALL_BATCH_MAX_ROWS = 32  # above this, one BLAS call is as fast (measured, see module doc)
# Bytes of w per block: ~256 KiB for up to 4 rows of x, ~128 KiB beyond (measured best
# on w 3072 x 576 and 5632 x 2048: larger blocks lose 30-50% at 8-16 rows).
BLOCK_BYTES_FEW = 256 * 1024
BLOCK_BYTES_MANY = 128 * 1024


def linear(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x [T, in] @ w[out, in].T -> [T, out], float32."""
    t = x.shape[0]
    if t == 1 or t > SMALL_BATCH_MAX_ROWS:
        return x @ w.T
    block = BLOCK_BYTES_FEW if t <= 4 else BLOCK_BYTES_MANY
    rows = max(32, block // (w.shape[1] * w.itemsize))
    if rows >= w.shape[0]:
        return x @ w.T
    xt = np.ascontiguousarray(x.T)  # [in, T]
    out = np.empty((w.shape[0], t), dtype=np.float32)
    for start in range(0, w.shape[0], rows):
        np.dot(w[start: start + rows], xt, out=out[start: start + rows])
    return np.ascontiguousarray(out.T)
