"""Where a bf16 (or int8) batch-1 decode step's time goes, against the bandwidth floor (issue 21).

One thread, SmolLM2-135M in bf16 (``--weights int8``: int8), one token on ``--context``
cached ones. Prints the best process-CPU ms of the whole step (``LlamaModel.forward``), of
its fused layers (``FusedDecode.run``: the 120 layer products plus attention, norms, SwiGLU)
and of the tied head's product (``matmul_fm``, one token), the rest by difference; then each
layer product's read rate inside a chain of all 120 products in the step's order, run through
the fused step's own compiled product (``decode_step``'s ``bf16_product``, ``int8i_product``
or ``int8_product``) and timed per product with the CPU's cycle counter
(``llvm.readcyclecounter``, the TSC on x86; best of ``--rounds`` per product), and the same
product from cache (one matrix again and again). Everything is compared with
``machine_probe.read_bandwidth`` (a float32 dot product over twice the LLC).

    python benchmarks/bf16_decode_split.py --rounds 20 [--weights int8]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from cpu_kernels import _best_cpu as best_cpu  # a sibling script: one timer

KINDS = ("qkv", "o", "gate/up", "down")


def _compiled(product):
    """(tsc, chain, again): the cycle counter, the timed chain, and one product repeated."""
    from llvmlite import ir
    from numba import njit, types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def tsc(typingctx):
        def codegen(context, builder, sig, args):
            fnty = ir.FunctionType(ir.IntType(64), [])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
            return builder.call(fn, [])

        return types.int64(), codegen

    @njit(nogil=True)
    def now():
        return tsc()

    @njit(nogil=True)
    def chain(ws, vs, outs, cycles):
        for li in range(ws[0][0].shape[0]):
            t0 = tsc()
            product(ws[0], li, vs[0], outs[0], 0, 1)
            t1 = tsc()
            product(ws[1], li, vs[1], outs[1], 0, 1)
            t2 = tsc()
            product(ws[2], li, vs[2], outs[2], 0, 1)
            t3 = tsc()
            product(ws[3], li, vs[3], outs[3], 0, 1)
            t4 = tsc()
            cycles[0] += t1 - t0
            cycles[1] += t2 - t1
            cycles[2] += t3 - t2
            cycles[3] += t4 - t3

    @njit(nogil=True)
    def again(w, v, out, reps):
        t0 = tsc()
        for _ in range(reps):
            product(w, 0, v, out, 0, 1)
        return tsc() - t0

    return now, chain, again


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--weights", choices=("bf16", "int8"), default="bf16")
    args = ap.parse_args()

    from threadpoolctl import threadpool_limits

    from infercast.engine.decode_step import _step_kernel
    from infercast.engine.engine import make_model
    from infercast.engine.kv_store import PagedKVStore
    from infercast.engine.loader import load
    from infercast.engine.machine_probe import read_bandwidth, stream_bytes
    from infercast.engine.model import SeqInput

    loaded = load(args.model, weights=args.weights)
    cfg, ctx = loaded.cfg, args.context
    net = make_model(loaded, ctx + 2, "numpy", 1)
    if getattr(net, "fused", None) is None:
        raise SystemExit(f"no fused {args.weights} step here (numba missing?)")
    blocks = list(range(-(-(ctx + 1) // 16)))
    kv = PagedKVStore(cfg, len(blocks), 16)
    seqs = [SeqInput([7], ctx, blocks)]
    slots = kv.slots(blocks, 0, ctx + 1)
    x = np.zeros(cfg.hidden_size, np.float32)
    h = np.random.default_rng(1).standard_normal((cfg.hidden_size, 1)).astype(np.float32)
    head, ws = net.w.lm_head, net.fused.w
    rng = np.random.default_rng(0)
    vs = tuple(rng.standard_normal(w[0].shape[2]).astype(np.float32) for w in ws)
    outs = tuple(np.zeros((w[0].shape[1], 1), np.float32) for w in ws)
    # the step's product for these layers (decode_step's _product_impl picks it alike)
    pname = {1: "bf16_product", 2: "int8_product", 3: "int8i_product"}[len(ws[0])]
    now, chain, again = _compiled(_step_kernel().py_func.__globals__[pname])
    now()
    c0, t0 = now(), time.perf_counter()
    time.sleep(0.2)
    hz = (now() - c0) / (time.perf_counter() - t0)
    with threadpool_limits(1):
        bw = read_bandwidth(stream_bytes(), 3, 1).best
        cos, sin = net.rope.cos[ctx], net.rope.sin[ctx]
        parts = (
            lambda: net.forward(seqs, kv),
            lambda: net.fused.run(x, cos, sin, kv, slots),
            lambda: head.matmul_fm(h, net.scratch),
        )
        # the three in turn, best of 5 each a round: a loaded machine's slow spells hit all
        times = np.array([[best_cpu(f, 5) for f in parts] for _ in range(args.rounds)])
        step, layers, head_s = times.min(axis=0)
        cycles = np.zeros((args.rounds, 4), np.int64)
        chain(ws, vs, outs, np.zeros(4, np.int64))
        for r in range(args.rounds):
            chain(ws, vs, outs, cycles[r])
        best = cycles.min(axis=0) / hz
        cached = [
            min(again(w, v, o, 50) for _ in range(3)) / hz / 50
            for w, v, o in zip(ws, vs, outs, strict=True)
        ]
    layer_bytes = sum(a.nbytes for w in ws for a in w)  # int8: with the scales and row sums
    floor = (layer_bytes + head.nbytes) / bw
    print(f"{pname}: read bandwidth {bw / 1e9:.1f} GB/s; TSC {hz / 1e9:.2f} GHz")
    print(
        f"step {step * 1e3:.2f} ms cpu; the matrices' floor {floor * 1e3:.2f} ms "
        f"({floor / step:.2f} of the step): layers {layers * 1e3:.2f} ms, head "
        f"{head_s * 1e3:.2f} ({head.nbytes / head_s / 1e9:.1f} GB/s), rest "
        f"{(step - layers - head_s) * 1e3:.2f}"
    )
    print(
        f"the 120 layer products in a chain: {best.sum() * 1e3:.2f} ms, "
        f"{layer_bytes / best.sum() / 1e9:.1f} GB/s ({layer_bytes / best.sum() / bw:.2f} of "
        f"the read rate); the fused layers' other work {(layers - best.sum()) * 1e3:.2f} ms"
    )
    for kind, w, s, c in zip(KINDS, ws, best, cached, strict=True):
        n, k = w[0].shape[1:]
        print(
            f"  {kind:>7} {n}x{k}: {s * 1e3:.2f} ms, {w[0].nbytes / s / 1e9:.1f} GB/s from DRAM, "
            f"{w[0][0].nbytes / c / 1e9:.0f} GB/s from cache ({w[0][0].nbytes / 1e6:.2f} MB)"
        )


if __name__ == "__main__":
    main()
