"""``x @ w.T`` for the engine's weight layout, fast at the small batches decode runs.

OpenBLAS (numpy's BLAS) runs a matrix product with 2-32 rows in ``x`` far
below both the bandwidth and the compute roofline: on this machine (one
thread) the chain of random-100m's 49 weight matrices took 25 ms with 1 row of
x but 74-84 ms with 2-16 rows and 104 ms with 32, in one call per matrix.
Splitting w into row blocks that stay in L2 (2 MiB per core here) while the
rows of x use them brings 2-4 rows near the one-row time and 8-32 rows to
1.3-2.5x faster than one call. Large batches (prefill) go to BLAS in one call,
where it reaches its GEMM peak.

Each block runs as ``x_slice @ w_blk.T`` into a column slice of the output (no
transposes). Block size and x slice were chosen on that chain (thread CPU time,
best of 3x2, ms; "wx" is the earlier ``w_blk @ x.T`` into a transposed output):

====  ==========  ==================  ==================  ===================  ========
rows  wx 128 KiB  xw 128 KiB, 1 slice  xw 256 KiB, 1 slice  xw 128 KiB, 16 rows  one call
====  ==========  ==================  ==================  ===================  ========
16    60.7        54.3                90.5                54.6                 83.6
32    94.5        133.6               156.8               82.9                 104.2
====  ==========  ==================  ==================  ===================  ========

With up to 8 rows, x goes in one slice (8 rows: random-100m decode step 48.6 ->
43.8 ms against the earlier scheme's 256 KiB blocks).

Block heights make each product 2**19 multiply-adds (rows of x slice x rows of w
x in; 256 KiB of w for 8 rows of x, 128 KiB for 16, 1 MiB for 2) unless the
minimum block height raises it. For 2-6 rows this beat fixed 256 KiB blocks by
2-5% (chain of random-100m's matrices, best of 4x2: 28.8 -> 27.6 ms at 2 rows,
32.3 -> 31.5 at 4, 35.3 -> 34.7 at 6; SmolLM2's 42.5 -> 40.5 at 2). The size
matters because above about 1e6 OpenBLAS leaves its
small-matrix kernel for the packing GEMM path, which ran 2-3x slower at these
sizes (hot, 16 rows of x, in 768: 42 rows of w 94 GFLOP/s, 85 rows 49). So
beyond 8 rows of x a block may have 8 rows of w, not 16: random-1b's w_down (in
5632) took 16-row blocks (1.44e6) before and takes 8 (0.72e6) now; its chain of
5 layers of random-1b's shapes ran 141.6 -> 129.3 ms at 16 rows and 242.8 ->
207.9 ms at 32 (one process, thread CPU time, best of 3x2; with up to 8 rows of x
at least 16 rows of w stay: 83.7 vs 86.0 ms at 8).
"""

from __future__ import annotations

import numpy as np

SMALL_BATCH_MAX_ROWS = 32  # above this, one BLAS call is as fast (measured, see module doc)
SLICE_ROWS = 16  # rows of x per product beyond 8 rows (see the module doc's table)
MULADDS_PER_PRODUCT = 2**19  # x slice rows x w block rows x in (see the module doc)


def linear(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x [T, in] @ w[out, in].T -> [T, out], float32."""
    t = x.shape[0]
    if t == 1 or t > SMALL_BATCH_MAX_ROWS:
        return x @ w.T
    slice_rows = t if t <= 8 else SLICE_ROWS
    rows = max(16 if t <= 8 else 8, MULADDS_PER_PRODUCT // (slice_rows * w.shape[1]))
    if rows >= w.shape[0]:
        return x @ w.T
    slices = [slice(i, i + slice_rows) for i in range(0, t, slice_rows)]
    out = np.empty((t, w.shape[0]), dtype=np.float32)
    for start in range(0, w.shape[0], rows):
        w_blk = w[start: start + rows].T
        for part in slices:
            np.matmul(x[part], w_blk, out=out[part, start: start + rows])
    return out
