"""q4 products of mid-size token counts: the numba kernel vs PyTorch's int4 kernel vs widen + BLAS.

SmolLM2-135M's chain of 120 layer products (per layer: QKV 960x576, O 576x576, gate/up
3072x576, down 576x1536; 30 layers, 106 M weights, from DRAM as in a step), random weights
quantized to q4, at each ``--tokens`` count, through: the numba kernel of this CPU
(``decode_jit.q4_layout``: the integer one where ``q4_isa`` finds a variant, else, or with
``--float``, the float one), PyTorch's ``_weight_int4pack_mm_for_cpu`` (its packing, bf16
activations), and tiles of the numba layout widened to float32 then OpenBLAS
(``engine/widen.py``, as prefill runs them).
On ``--threads`` N: the numba kernel on N threads (``Kernels.product``), PyTorch's on N intra-op
threads, and the widening on one between OpenBLAS products on N (``threads.THREADED_MIN_WORK``
``widen``). Rounds alternate the paths; prints best process CPU and wall ms of each.

    python benchmarks/q4_products.py --tokens 32,48,56,64,96,128 --threads 1,2 --rounds 5

``--widen``: instead, the rate of prefill's q4 widening alone (``widen.q4_layout_blocks``), the
3072x576 gate/up in tiles of 896 rows (``widen.tile_rows``), one thread, in Gweights/s.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

SHAPES = ((960, 576), (576, 576), (3072, 576), (576, 1536))  # (out, in) per layer
LAYERS = 30


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", default="32,48,56,64,96,128")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--float", action="store_true", help="the float kernel (decode_jit.Q4_INT)")
    ap.add_argument("--widen", action="store_true", help="the q4 widening's rate alone")
    args = ap.parse_args()
    import infercast.engine.decode_jit as dj

    dj.Q4_INT = not args.float
    if args.widen:
        widen_rate(args.rounds)
        return
    from threadpoolctl import threadpool_limits

    from infercast.engine.decode_jit import Q4_ROWS, kernels
    from infercast.engine.qformats import GROUP, quantize_q4
    from infercast.engine.qlinear import Int4Matrix, Scratch, import_torch, torch_int4_packing
    from infercast.engine.threads import product_threads
    from infercast.engine.widen import tiled_product

    torch = import_torch()
    jit = kernels()
    rng = np.random.default_rng(0)
    chain = []
    for _ in range(LAYERS):
        for s in SHAPES:
            rows = quantize_q4(rng.uniform(-0.05, 0.05, s).astype(np.float32))
            chain.append((Int4Matrix(rows), torch_int4_packing(rows)))
    fmt = "q4i" if len(chain[0][0].jit_layout) == 1 else "q4"
    op = torch.ops.aten._weight_int4pack_mm_for_cpu
    print(f"# load {os.getloadavg()[0]:.2f}, numba kernel {fmt}", flush=True)
    for threads in [int(v) for v in args.threads.split(",")]:
        scratch = Scratch(threads)
        for t in [int(v) for v in args.tokens.split(",")]:
            xs = {k: rng.standard_normal((k, t)).astype(np.float32) for k in (576, 1536)}

            def numba(t=t, xs=xs, threads=threads):
                kernel = jit.product(fmt, threads)
                for m, _ in chain:
                    out = np.empty((m.jit_layout[0].shape[0] * Q4_ROWS, t), np.float32)
                    kernel(*m.jit_layout, xs[m.shape[1]].T.copy(), out, threads)

            def pytorch(xs=xs, threads=threads):
                torch.set_num_threads(threads)
                xt = {k: torch.from_numpy(x.T.copy()).to(torch.bfloat16) for k, x in xs.items()}
                for m, (packed, sz) in chain:
                    op(xt[m.shape[1]], packed, GROUP, sz).float()

            def widen(xs=xs, scratch=scratch):
                for m, _ in chain:
                    n, k = m.shape
                    th = product_threads("widen", n, k, xs[k].shape[1], scratch.threads)
                    tiled_product(m._widen, m.shape, Q4_ROWS, xs[k], scratch, th)

            paths = {"numba": numba, "torch": pytorch, "widen": widen}
            best = dict.fromkeys(paths, np.inf)
            wall = dict.fromkeys(paths, np.inf)
            with threadpool_limits(threads):
                for fn in paths.values():
                    fn()
                for _ in range(args.rounds):
                    for name, fn in paths.items():
                        c0, w0 = time.process_time(), time.perf_counter()
                        fn()
                        best[name] = min(best[name], time.process_time() - c0)
                        wall[name] = min(wall[name], time.perf_counter() - w0)
            row = ", ".join(f"{k} {best[k] * 1e3:.1f} / {wall[k] * 1e3:.1f}" for k in paths)
            print(f"{threads} thread(s), {t:4d} tokens, ms CPU / wall: {row}", flush=True)
    print(f"# load {os.getloadavg()[0]:.2f}")


def widen_rate(rounds: int, shape: tuple[int, int] = (3072, 576), tile: int = 896) -> None:
    """Best Gweights/s of widening a q4 matrix in tiles (process CPU time, 10 passes a round)."""
    from infercast.engine.decode_jit import Q4_ROWS
    from infercast.engine.qformats import quantize_q4
    from infercast.engine.qlinear import Int4Matrix
    from infercast.engine.widen import q4_layout_blocks

    rows = quantize_q4(np.random.default_rng(0).uniform(-0.05, 0.05, shape).astype(np.float32))
    m = Int4Matrix(rows)
    blocks = m.jit_layout[0].shape[0]
    buf = np.empty(shape[1] * tile, np.float32)
    tiles = [(c0, min(tile // Q4_ROWS, blocks - c0)) for c0 in range(0, blocks, tile // Q4_ROWS)]

    def run():
        for c0, ct in tiles:
            out = buf[: shape[1] * ct * Q4_ROWS].reshape(shape[1], -1)  # as Int4Matrix._widen
            q4_layout_blocks(m.jit_layout, c0, out)

    run()
    best = np.inf
    for _ in range(rounds):
        c0 = time.process_time()
        for _ in range(10):
            run()
        best = min(best, (time.process_time() - c0) / 10)
    kind = "integer" if len(m.jit_layout) == 1 else "float"
    print(f"# load {os.getloadavg()[0]:.2f}; {kind} layout, {shape[0]}x{shape[1]}, tiles of {tile}")
    print(f"{best * 1e3:.3f} ms a matrix, {shape[0] * shape[1] / best / 1e9:.2f} Gweights/s")


if __name__ == "__main__":
    main()
