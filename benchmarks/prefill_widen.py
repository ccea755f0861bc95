"""Prefill products of compact matrices: whole-matrix widening vs widened tiles, by tile size.

One prefill step's chain of SmolLM2-135M layer products (per layer: QKV 960x576, O 576x576,
gate/up 3072x576, down 576x1536; 30 layers, so the weights come from DRAM as in a step) at
``--tokens`` tokens, in each compact format: ``whole`` (the whole matrix widened into one
float32 buffer, then one GEMM: the path before engine/widen.py, with its kernels), ``2^P``
(the engine's path, tiles of about 2^P weights: engine/widen.py ``TILE_WEIGHTS``; with
``--threads`` above 1 also ``split``: the tiles split between the threads, each widened and
multiplied on one, where without it they are widened on one between GEMMs on all),
PyTorch's own kernels (``--torch``: ``_weight_int8pack_mm``, the bf16 matmul, bf16
activations), against float32 (OpenBLAS on the float32 matrix). Variants alternate round by
round in one process; prints the best process CPU and wall ms of each and ratios to float32.

    python benchmarks/prefill_widen.py --tokens 128,512 --threads 1 --rounds 5
"""

from __future__ import annotations

import argparse
import time

import numpy as np

SHAPES = ((960, 576), (576, 576), (3072, 576), (576, 1536))  # (out, in) per layer
LAYERS = 30


def _whole_product(m, x, scratch) -> np.ndarray:
    """The whole matrix widened into one float32 buffer, then one GEMM (the path before
    engine/widen.py's tiles, with its kernels)."""
    from infercast.engine.decode_jit import Q4_ROWS
    from infercast.engine.qlinear import Int4Matrix, widen_int4
    from infercast.engine.widen import q4_layout_blocks

    n, k = m.shape
    if isinstance(m, Int4Matrix) and m.jit_layout is not None:  # the numba kernels' layout
        wt = scratch.get((k, m.jit_layout[0].shape[0] * Q4_ROWS))
        q4_layout_blocks(m.jit_layout, 0, wt)
        return np.ascontiguousarray((wt.T @ x)[:n])
    if isinstance(m, Int4Matrix):  # PyTorch's packing (without numba)
        wt = scratch.get((k, m.packed.shape[0]))
        widen_int4(m.packed.numpy(), m.scale_t, m.zero_t, wt)
        return np.ascontiguousarray((wt.T @ x)[:n])
    return m._widen(0, n, scratch(0, n * k)) @ x


def _with(tile_weights: int, split: bool, fn):
    """fn run with engine/widen.py's tile size and threads rule for the widen path set."""
    import infercast.engine.threads as th
    import infercast.engine.widen as wd

    def run():
        saved = wd.TILE_WEIGHTS, th.THREADED_MIN_WORK["widen"]
        wd.TILE_WEIGHTS, th.THREADED_MIN_WORK["widen"] = tile_weights, 0.0 if split else np.inf
        try:
            return fn()
        finally:
            wd.TILE_WEIGHTS, th.THREADED_MIN_WORK["widen"] = saved

    return run


def _torch_product(m, x):
    from infercast.engine.qlinear import Bf16Matrix, _from_torch_fm, _to_torch_rows

    torch = m._torch
    xt = _to_torch_rows(x, torch, torch.bfloat16)
    if isinstance(m, Bf16Matrix):
        return _from_torch_fm(xt @ m.w.T, m.shape[0])
    return _from_torch_fm(torch.ops.aten._weight_int8pack_mm(xt, m.q, m.s), m.shape[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", default="128,512")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--formats", default="q4,int8,bf16")
    ap.add_argument("--tiles", default="17,19,21", help="log2 of the weights per tile")
    ap.add_argument("--torch", action="store_true", help="also PyTorch's int8 and bf16 kernels")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    from threadpoolctl import threadpool_limits

    from infercast.engine.qlinear import Scratch, import_torch, matmul_fm, to_format

    import_torch().set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    dense = [
        [(rng.standard_normal(s) * 0.05).astype(np.float32) for s in SHAPES] for _ in range(LAYERS)
    ]
    fmts = args.formats.split(",")
    mats = {f: [[to_format(w, f) for w in layer] for layer in dense] for f in fmts}
    tiles = [int(r) for r in args.tiles.split(",")]
    scratch = Scratch(args.threads)
    for t in [int(v) for v in args.tokens.split(",")]:
        xs = [rng.standard_normal((s[1], t)).astype(np.float32) for s in SHAPES]
        fp32 = [(w, x) for layer in dense for w, x in zip(layer, xs, strict=True)]
        variants = {"fp32": lambda c=fp32: [w @ x for w, x in c]}
        for f in fmts:
            chain = [(m, x) for layer in mats[f] for m, x in zip(layer, xs, strict=True)]
            variants[f"{f} whole"] = lambda c=chain: [_whole_product(m, x, scratch) for m, x in c]
            for tw in tiles:
                for split in (False, True) if args.threads > 1 else (False,):
                    name = f"{f} 2^{tw}" + (" split" if split else "")
                    variants[name] = _with(
                        2**tw, split, lambda c=chain: [matmul_fm(m, x, scratch) for m, x in c]
                    )
            if args.torch and f != "q4":
                variants[f"{f} torch"] = lambda c=chain: [_torch_product(m, x) for m, x in c]
        # every variant of a format gives the same product (float32 rounding; torch: bf16)
        for f in fmts:
            m, x = mats[f][0][2], xs[2]
            ref = _whole_product(m, x, scratch)
            for name in variants:
                if name.startswith(f + " 2^"):
                    got = _with(
                        2 ** int(name.split("^")[1].split()[0]),
                        "split" in name,
                        lambda m=m, x=x: matmul_fm(m, x, scratch),
                    )()
                    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max(), name
        best = dict.fromkeys(variants, float("inf"))
        wall = dict.fromkeys(variants, float("inf"))
        with threadpool_limits(args.threads):
            for fn in variants.values():
                fn()  # compile, warm
            for _ in range(args.rounds):
                for name in variants:
                    c0, w0 = time.process_time(), time.perf_counter()
                    fn()
                    best[name] = min(best[name], time.process_time() - c0)
                    wall[name] = min(wall[name], time.perf_counter() - w0)
        flops = 2 * t * LAYERS * sum(a * b for a, b in SHAPES)
        print(f"# {t} tokens, {args.threads} thread(s), best of {args.rounds}: ms CPU, wall")
        for name, s in best.items():
            w = wall[name]
            print(
                f"{name:>14} {s * 1e3:8.1f} {w * 1e3:8.1f}  {s / best['fp32']:5.2f}x fp32 CPU, "
                f"{w / wall['fp32']:5.2f}x wall  {flops / w / 1e9:6.1f} GFLOP/s wall",
                flush=True,
            )


if __name__ == "__main__":
    main()
