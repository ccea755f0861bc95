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

Feature-major activations (``linear_fm``): the forward pass keeps activations
as ``[features, tokens]`` and computes ``w @ x`` into ``[out, tokens]``, with
no transposes between products. For 128 rows this ran 10-15% faster than ``x @
w.T`` with the weights hot (random-100m's and SmolLM2's shapes, one thread:
153-160 vs 126-140 GFLOP/s) and 2-10% faster over a step's cold weights
(random-100m's chain of 48 products at 128 tokens: 155.7-158.5 vs 159.9-174.7
ms). At 2-32 tokens (chain of random-100m's 48 products, thread CPU time, best
of 4, ms):

======  ==============  ===============================  ===========================
tokens  ``linear`` (x)  ``w_blk @ x``, 2**19 / 2**18      ``linear`` on x.T, out .T
======  ==============  ===============================  ===========================
2       19.8            19.9 / 20.6                      20.4
4       23.2            22.5 / 23.0                      23.4
8       27.6            30.5 / 32.3                      28.4
12      37.3            43.3 / 46.5                      38.7
16      43.7            44.3 / 47.7                      44.2
32      64.3            66.4 / 63.7                      68.3
======  ==============  ===============================  ===========================

In the engine's decode step (one process, thread CPU time, best of 6, ms,
random-100m / SmolLM2 at 128 cached tokens; w row blocks of 2**19 / 2**18
multiply-adds, or the row-major blocking through transposes):

======  =========================  =========================  ===============
tokens  2**19 blocks               2**18 blocks               transposes
======  =========================  =========================  ===============
20      80.9 / 138.4               85.1 / 146.7               82.2 / 131.0
24      88.8 / 152.8               90.1 / 161.0               85.8 / 144.0
28      102.0 / 174.4              112.0 / 183.0              101.9 / 160.7
32      106.0 / 166.5              106.1 / 178.0              108.0 / 171.9
======  =========================  =========================  ===============

So 2-4 and 29-32 tokens take row blocks of w of 2**19 multiply-adds each (at
least 16 rows), 5-28 go through the row-major blocking with two small
transposes, and beyond 32 one BLAS call.
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
        w_blk = w[start : start + rows].T
        for part in slices:
            np.matmul(x[part], w_blk, out=out[part, start : start + rows])
    return out


FM_VIA_ROWS = (5, 28)  # tokens that go through the row-major blocking (module doc)


def linear_fm(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """w [out, in] @ x [in, T] -> [out, T] C-contiguous, float32 (feature-major)."""
    t = x.shape[1]
    if t == 1 or t > SMALL_BATCH_MAX_ROWS:
        return w @ x
    if FM_VIA_ROWS[0] <= t <= FM_VIA_ROWS[1]:
        return np.ascontiguousarray(linear(np.ascontiguousarray(x.T), w).T)
    rows = max(16, MULADDS_PER_PRODUCT // (t * w.shape[1]))
    if rows >= w.shape[0]:
        return w @ x
    out = np.empty((w.shape[0], t), dtype=np.float32)
    for start in range(0, w.shape[0], rows):
        np.matmul(w[start : start + rows], x, out=out[start : start + rows])
    return out
